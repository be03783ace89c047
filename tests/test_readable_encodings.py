"""The encodings written out in chapters 3, 4 and 4b equal the package's: every PE the paper
trains (2d-fixed, 1d-fixed, learn, random, relative, rope, nope as the absence of one, c-nope)
and the two it lacks (alibi, rope-2d).

Each chapter writes an encoding as a short torch function (or module) in a code cell tagged
``readable-<name>``, followed by a cell with the same tag that asserts equality with the
package on one input. These tests run those very cells (so a chapter whose check fails fails
here, with its own assertion), then compare the chapter's functions with
:mod:`lstpe.nn.encodings` and :func:`lstpe.nn.model.attention` on random inputs of other
shapes, bases and seeds than the chapter's check uses. They fail when the chapter's code
drifts from the package (another frequency base, a pairing, a mask) or the package from it.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from lstpe.nn import encodings as enc
from lstpe.nn.model import attention

torch.set_num_threads(1)

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = {
    "03_sinusoidal": ("readable-sinusoid-1d", "readable-sinusoid-2d"),
    "04_rotary_relative": ("readable-rope", "readable-rope-2d", "readable-relative",
                           "readable-alibi", "readable-c-nope"),
    "04b_learnable_pe": ("readable-learnable", "readable-random"),
}
"""Each chapter's sections, by cell tag, in the chapter's order."""
PRINTED = {
    "03_sinusoidal": ("1-D sinusoid: ours equals", "2-D sinusoid: ours equals"),
    "04_rotary_relative": ("RoPE: ours equals", "rope-2d: ours equals", "relative: ours equals",
                           "ALiBi: ours equals", "c-nope: ours equals"),
    "04b_learnable_pe": ("learnable PE: ours equals", "random PE: ours equals"),
}
"""The lines each chapter's checks print when they pass."""


def tagged_cells(chapter: str) -> list[tuple[str, str]]:
    """(tag, source) of every code cell of ``chapter`` tagged with one of its sections."""
    cells = json.loads((BOOK / f"{chapter}.ipynb").read_text(encoding="utf-8"))["cells"]
    out = []
    for c in cells:
        tags = [t for t in c.get("metadata", {}).get("tags", []) if t in CHAPTERS[chapter]]
        if c["cell_type"] == "code" and tags:
            out.append((tags[0], "".join(c["source"])))
    return out


def run_chapter(chapter: str) -> tuple[dict[str, Any], str]:
    """The namespace after running the chapter's readable cells in order, and their output."""
    ns: dict[str, Any] = {"__name__": chapter}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for i, (tag, src) in enumerate(tagged_cells(chapter)):
            exec(compile(src, f"{chapter}.ipynb[{tag} #{i}]", "exec"), ns)
    return ns, printed.getvalue()


@pytest.fixture(scope="module")
def ch3() -> dict[str, Any]:
    return run_chapter("03_sinusoidal")[0]


@pytest.fixture(scope="module")
def ch4() -> dict[str, Any]:
    return run_chapter("04_rotary_relative")[0]


@pytest.fixture(scope="module")
def ch4b() -> dict[str, Any]:
    return run_chapter("04b_learnable_pe")[0]


def _qkv(n: int, d: int, seed: int, heads: int = 1, batch: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, batch, heads, n, d, generator=g)


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_every_section_has_its_code_and_its_check(chapter: str) -> None:
    """Each section has a code cell and a check cell (at least two cells), in the chapter's
    order, each at most 15 lines; the chapter's own checks pass and say so."""
    sections = CHAPTERS[chapter]
    tags = [t for t, _ in tagged_cells(chapter)]
    assert [t for t in sections if tags.count(t) < 2] == []
    assert tags == sorted(tags, key=sections.index), "the sections are out of order"
    assert all(len(src.splitlines()) <= 15 for _, src in tagged_cells(chapter))
    _, printed = run_chapter(chapter)
    for start in PRINTED[chapter]:
        assert any(line.startswith(start) for line in printed.splitlines()), start


# --------------------------------------------------------------------------- chapter 3


@pytest.mark.parametrize(("n", "d", "base"), [(16, 160, 10000.0), (50, 8, 10000.0),
                                              (7, 12, 100.0)])
def test_sinusoid_1d_is_the_package_s(ch3, n: int, d: int, base: float) -> None:
    ours = ch3["sinusoid"](n, d, base)
    torch.testing.assert_close(ours, enc.sinusoid_1d(n, d, base), rtol=0, atol=1e-6)
    assert ours.shape == (n, d) and ours.dtype == torch.float32


def test_sinusoid_2d_is_the_2d_fixed_pe_in_both_orders(ch3) -> None:
    sin2 = ch3["sinusoid_2d"]
    for d in (160, 32):
        torch.testing.assert_close(sin2(4, d), enc.additive_pe("2d-fixed", 1, 16, d)[0])
        textbook = enc.parse_pe("2d-fixed", variant="textbook")
        torch.testing.assert_close(sin2(4, d, columns_first=False),
                                   enc.additive_pe(textbook, 1, 16, d)[0])
    torch.testing.assert_close(sin2(3, 8), enc.sinusoid_2d(3, 3, 8, columns_first=True))


# --------------------------------------------------------------------------- chapter 4


@pytest.mark.parametrize(("n", "d", "seed"), [(16, 160, 3), (16, 16, 4), (9, 24, 5)])
def test_rope_is_the_package_s(ch4, n: int, d: int, seed: int) -> None:
    """Both rotations equal ``apply_rope`` (textbook and paper variants), and one head of
    attention with ``rope_paper`` equals the package's ``rope`` attention."""
    q, k, v = _qkv(n, d, seed)
    tol = {"rtol": 1e-5, "atol": 1e-5}  # the package's angles are float32, ours float64
    textbook, paper = (enc.parse_pe("rope", variant=x) for x in ("textbook", "paper"))
    torch.testing.assert_close(ch4["rope"](q), enc.apply_rope(textbook, q), **tol)
    torch.testing.assert_close(ch4["rope_paper"](q), enc.apply_rope(paper, q), **tol)
    A = torch.softmax(ch4["rope_paper"](q) @ ch4["rope_paper"](k).mT / d ** 0.5, dim=-1)
    torch.testing.assert_close(A @ v, attention(q, k, v, "rope")[0], **tol)


def test_rope_scores_depend_on_the_offset_only(ch4) -> None:
    """An independent fact: with the same query and key everywhere, the scores of the
    chapter's rope are constant along diagonals (R_m^T R_n = R_{n-m})."""
    g = torch.Generator().manual_seed(6)
    q, k = torch.randn(2, 1, 16, generator=g, dtype=torch.float64)
    S = ch4["rope"](q.expand(16, 16)) @ ch4["rope"](k.expand(16, 16)).T
    for off in range(-15, 16):
        diag = torch.diagonal(S, off)
        assert float(diag.max() - diag.min()) < 1e-10


def test_rope_at_given_positions_is_the_package_s_rotation(ch4) -> None:
    """``rope(x, m=...)`` turns each token by its own position, as ``rotate`` with
    ``rope_angles`` of those positions does (textbook pairing)."""
    x = torch.randn(2, 7, 12, generator=torch.Generator().manual_seed(20))
    m = torch.tensor([3, 0, 0, 5, 1, 2, 9])
    torch.testing.assert_close(ch4["rope"](x, m=m), enc.rotate(x, enc.rope_angles(m, 12)),
                               rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ch4["rope"](x, m=torch.arange(7)), ch4["rope"](x))


@pytest.mark.parametrize(("side", "d", "seed"), [(4, 160, 21), (4, 16, 22), (3, 24, 23)])
def test_rope_2d_is_the_package_s(ch4, side: int, d: int, seed: int) -> None:
    """Both axial rotations equal ``apply_rope`` for ``rope-2d`` (textbook and paper variants,
    on square grids of other sides too), and one head of attention with the paper form equals
    the package's ``rope-2d`` attention."""
    q, k, v = _qkv(side * side, d, seed)
    tol = {"rtol": 1e-5, "atol": 1e-5}
    for variant, name in (("textbook", "rope_2d"), ("paper", "rope_2d_paper")):
        spec = enc.parse_pe("rope-2d", variant=variant)
        torch.testing.assert_close(ch4[name](q, side), enc.apply_rope(spec, q, side, side), **tol)
    if side == 4:
        A = torch.softmax(ch4["rope_2d_paper"](q) @ ch4["rope_2d_paper"](k).mT / d ** 0.5, -1)
        torch.testing.assert_close(A @ v, attention(q, k, v, "rope-2d")[0], **tol)


def test_rope_2d_scores_depend_on_the_grid_offset_only(ch4) -> None:
    """With the same query and key at every cell, the chapter's rope_2d scores are equal for
    every pair of cells with the same (row, column) offset, and differ along a 1-D diagonal."""
    g = torch.Generator().manual_seed(24)
    q, k = torch.randn(2, 1, 16, generator=g, dtype=torch.float64)
    S = ch4["rope_2d"](q.expand(16, 16)) @ ch4["rope_2d"](k.expand(16, 16)).T
    r, c = torch.arange(16) // 4, torch.arange(16) % 4
    dr, dc = r[None, :] - r[:, None], c[None, :] - c[:, None]
    for a in range(-3, 4):
        for b in range(-3, 4):
            same = S[(dr == a) & (dc == b)]
            assert same.numel() and float(same.max() - same.min()) < 1e-10
    assert float(torch.diagonal(S, 1).max() - torch.diagonal(S, 1).min()) > 1e-3


@pytest.mark.parametrize(("n", "d", "seed"), [(16, 160, 7), (16, 8, 8), (5, 12, 9)])
def test_relative_attention_is_the_package_s(ch4, n: int, d: int, seed: int) -> None:
    q, k, v = _qkv(n, d, seed)
    a = torch.randn(2 * n - 1, d, generator=torch.Generator().manual_seed(seed + 100))
    ours = ch4["relative_attention"]
    torch.testing.assert_close(ours(q, k, v, a), attention(q, k, v, "relative", rel=a)[0])
    shaw = enc.parse_pe("relative", variant="textbook")
    torch.testing.assert_close(ours(q, k, v, a, causal=False),
                               attention(q, k, v, shaw, rel=a)[0])
    # the causal form reads no key after its query: changing the last key moves query 0 not
    k2 = k.clone()
    k2[..., -1, :] += 1.0
    torch.testing.assert_close(ours(q, k2, v, a)[..., 0, :], ours(q, k, v, a)[..., 0, :])


@pytest.mark.parametrize(("n", "d", "seed"), [(16, 160, 10), (11, 8, 11)])
def test_alibi_is_the_package_s(ch4, n: int, d: int, seed: int) -> None:
    q, k, v = _qkv(n, d, seed)
    torch.testing.assert_close(ch4["alibi"](n), enc.alibi_bias(n), rtol=0, atol=0)
    torch.testing.assert_close(ch4["alibi"](n, 0.25), enc.alibi_bias(n, 0.25), rtol=0, atol=0)
    torch.testing.assert_close(ch4["alibi_attention"](q, k, v), attention(q, k, v, "alibi")[0])


@pytest.mark.parametrize(("n", "d", "seed"), [(16, 160, 25), (16, 8, 26), (7, 12, 27)])
def test_c_nope_attention_is_the_package_s(ch4, n: int, d: int, seed: int) -> None:
    """The chapter's c-nope equals the package's attention with the authors' temperature 1/100
    and the textbook's 1, reads no key after its query, and is nearly one-hot at 1/100."""
    q, k, v = _qkv(n, d, seed)
    ours = ch4["c_nope_attention"]
    torch.testing.assert_close(ours(q, k, v), attention(q, k, v, "c-nope")[0])
    textbook = enc.parse_pe("c-nope", variant="textbook")
    torch.testing.assert_close(ours(q, k, v, temperature=1.0), attention(q, k, v, textbook)[0])
    k2 = k.clone()
    k2[..., -1, :] += 1.0
    torch.testing.assert_close(ours(q, k2, v)[..., :-1, :], ours(q, k, v)[..., :-1, :])
    eye = torch.eye(n)
    sharp, soft = (ours(q, k, eye, temperature=t)[..., 1:, :].amax(-1).mean() for t in (0.01, 1))
    assert float(sharp) > 0.9 > 0.6 > float(soft)  # the chapter's reading of its printout


# --------------------------------------------------------------------------- chapter 4b


@pytest.mark.parametrize(("layers", "d", "sigma", "seed"), [(4, 160, 0.2, 12), (1, 32, 2.0, 13),
                                                            (2, 8, 0.02, 14)])
def test_learnable_pe_draws_the_package_s_init(ch4b, layers: int, d: int, sigma: float,
                                               seed: int) -> None:
    """From one generator state the chapter's PE draws what ``additive_pe("learn-σ")`` draws,
    bit for bit, and adds block ``layer``'s matrix to the stream."""
    pe = ch4b["LearnablePE"](layers, 16, d, sigma, generator=torch.Generator().manual_seed(seed))
    ref = enc.additive_pe(f"learn-{sigma}", layers, 16, d,
                          generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(pe.P.detach(), ref, rtol=0, atol=0)
    assert pe.P.requires_grad
    h = torch.randn(2, 16, d)
    torch.testing.assert_close(pe(h, layers - 1), h + ref[layers - 1])
    assert abs(float(pe.P.detach().std()) / sigma - 1) < 0.1


@pytest.mark.parametrize(("layers", "d", "seed"), [(4, 160, 15), (1, 32, 16), (2, 8, 17)])
def test_random_pe_is_the_package_s_and_never_trains(ch4b, layers: int, d: int,
                                                      seed: int) -> None:
    """The chapter's RandomPE draws ``additive_pe("random")`` bit for bit, with standard
    deviation about 1, and is not trained; the package's random model starts from the PE of
    learn-1.0 of its seed and does not train it."""
    from lstpe.nn.model import LSTTransformer

    pe = ch4b["RandomPE"](layers, 16, d, generator=torch.Generator().manual_seed(seed))
    ref = enc.additive_pe("random", layers, 16, d, generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(pe.P, ref, rtol=0, atol=0)
    assert not pe.P.requires_grad and not list(p for p in pe.parameters() if p.requires_grad)
    assert abs(float(pe.P.std()) - 1) < 0.1
    h = torch.randn(2, 16, d)
    torch.testing.assert_close(pe(h, layers - 1), h + ref[layers - 1])
    frozen, learned = LSTTransformer("random", seed=seed), LSTTransformer("learn-1.0", seed=seed)
    torch.testing.assert_close(frozen.pe, learned.pe, rtol=0, atol=0)
    assert not frozen.pe.requires_grad and learned.pe.requires_grad
