"""The value syntax of ``lstpe batch`` (``--grid key=v1,v2,...`` and ``-p key=value``):
:data:`VALUE_SYNTAX`. A value is a Python literal of plain values (lists, tuples, dicts,
numbers, strings, True/False/None; JSON's true/false/null too) or a bare word (a string);
``--grid`` splits on commas outside brackets and quotes, ``-p`` never splits. Anything else (a
set, bytes, a complex number, Ellipsis, unbalanced brackets...) is an error naming the text,
raised before any point runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

VALUE_SYNTAX = """\
value syntax (--grid KEY=V1,V2,... and -p KEY=VALUE):
  a Python literal           0.1  2235  "text"  [2235, 6312]  True  None  (JSON true/false/null too)
  a bare word (a string)     preview  2d-fixed  learn-0.2  (letters, digits and _.-+/:)
  --grid splits on commas outside brackets and quotes:
      --grid seeds=[2235],[6312]    two points, seeds=[2235] and seeds=[6312]
      --grid sigmas=0.1,0.5         two points
  -p never splits:  -p seeds=[1,2]  is one list
  quote for your shell:  --grid 'pes=["learn-0.1"],["2d-fixed"]'
"""

_BARE_WORD = re.compile(r"^[A-Za-z0-9_.+\-/:]+$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JSON_WORDS = {"true": True, "false": False, "null": None}


# --------------------------------------------------------------------------- value syntax


def parse_value(text: str) -> Any:
    """One parameter value: a Python literal, a JSON word, or a bare word (a string).

    Examples: ``"0.1" -> 0.1``, ``"[2235]" -> [2235]``, ``"preview" -> "preview"``,
    ``"'a b'" -> "a b"``, ``"true" -> True``.

    Raises:
        ValueError: empty text, or text that is neither a literal nor a bare word.
    """
    s = text.strip()
    if not s:
        raise ValueError(f"empty parameter value in {text!r}")
    try:
        value = ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    else:
        if (bad := _unplain(value)) is not None:
            raise ValueError(f"parameter value {text!r} holds {bad}, which a notebook parameter "
                             "cannot be: use lists, dicts, numbers, strings, True/False/None")
        return value
    if s in _JSON_WORDS:
        return _JSON_WORDS[s]
    if _BARE_WORD.match(s):
        return s
    raise ValueError(
        f"cannot parse parameter value {text!r}: use a Python literal (0.1, [2235], 'text', "
        "True) or a bare word of letters, digits and _.-+/: (preview, learn-0.2)"
    )


def _unplain(value: Any) -> str | None:
    """What in ``value`` is no plain value (lists, tuples, dicts of numbers, strings, booleans,
    None), e.g. ``"a set"``, or None."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return None
    if isinstance(value, (list, tuple, dict)):
        items = [*value, *value.values()] if isinstance(value, dict) else value
        return next((b for b in map(_unplain, items) if b is not None), None)
    return "Ellipsis (...)" if value is Ellipsis else f"a {type(value).__name__}"


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` on ``sep`` where it is outside brackets and quotes.

    ``"[1,2],[3]" -> ["[1,2]", "[3]"]``; ``"'a,b',c" -> ["'a,b'", "c"]``.

    Raises:
        ValueError: unbalanced brackets or an unterminated quote, naming the text.
    """
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    quote: str | None = None
    parts, cur = [], []
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i:i + 2])
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            stack.append(c)
        elif c in pairs:
            if not stack or stack.pop() != pairs[c]:
                raise ValueError(f"unbalanced {c!r} in {text!r}")
        elif c == sep and not stack:
            parts.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    if quote:
        raise ValueError(f"unterminated quote {quote} in {text!r}")
    if stack:
        raise ValueError(f"unclosed {stack[-1]!r} in {text!r}")
    parts.append("".join(cur))
    return parts


def _split_key(spec: str, flag: str) -> tuple[str, str]:
    key, eq, value = spec.partition("=")
    key = key.strip()
    if not eq:
        raise ValueError(f"{flag} {spec!r} has no '='; write {flag} key=value")
    if not _KEY.match(key):
        raise ValueError(f"{flag} {spec!r}: {key!r} is not a valid parameter name")
    return key, value


def parse_grid(specs: Sequence[str]) -> dict[str, list[Any]]:
    """``["seeds=[2235],[6312]", "sigmas=0.1,0.5"]`` -> ``{"seeds": [[2235], [6312]], ...}``.

    Raises:
        ValueError: missing ``=``, bad key, duplicate key, or an unparsable value.
    """
    grid: dict[str, list[Any]] = {}
    for spec in specs:
        key, text = _split_key(spec, "--grid")
        if key in grid:
            raise ValueError(f"--grid key {key!r} is given twice")
        try:
            grid[key] = [parse_value(v) for v in split_top_level(text)]
        except ValueError as e:
            raise ValueError(f"--grid {spec!r}: {e}") from None
    return grid


def parse_params(specs: Sequence[str]) -> dict[str, Any]:
    """``["scale=preview", "epochs=3"]`` -> ``{"scale": "preview", "epochs": 3}`` (no splitting).

    Raises:
        ValueError: missing ``=``, bad or duplicate key, or an unparsable value.
    """
    out: dict[str, Any] = {}
    for spec in specs:
        key, text = _split_key(spec, "-p")
        if key in out:
            raise ValueError(f"-p key {key!r} is given twice")
        try:
            out[key] = parse_value(text)
        except ValueError as e:
            raise ValueError(f"-p {spec!r}: {e}") from None
    return out
