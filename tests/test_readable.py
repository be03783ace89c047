"""Chapter 5's readable code (the learnable PE, one block, one training step) equals the package.

The chapter writes these as short torch modules in cells tagged ``readable-pe``,
``readable-block`` and ``readable-step``, each followed by a cell that asserts equality with
the package's own code (the batched model the engine trains, the plain ``Block``, and
``lstpe.training.train.train`` for one step). These tests run those very cells, so they fail
when the package's model or training step changes, or when the chapter's code stops matching
it; and they add what the chapter leaves out: the gradients themselves (one Adam step moves
each weight by about lr * sign(g), which says little about the gradient's size), the other
additive PEs' blocks, and the weight plumbing of :mod:`lstpe.tutorial.readable`.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from lstpe.nn.architecture import ModelConfig, init_weights
from lstpe.nn.model import BatchedLSTTransformer
from lstpe.tutorial import readable

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "05_training.ipynb"
SECTIONS = ("readable-pe", "readable-block", "readable-step")
"""The cell tags of the three sections, in the chapter's order."""

TINY = ModelConfig(d_model=32, n_layers=2)


def chapter_cells() -> list[tuple[str, str]]:
    """(tag, source) of every code cell of chapter 5 tagged with one of :data:`SECTIONS`."""
    cells = json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"]
    out = []
    for c in cells:
        tags = [t for t in c.get("metadata", {}).get("tags", []) if t in SECTIONS]
        if c["cell_type"] == "code" and tags:
            out.append((tags[0], "".join(c["source"])))
    return out


@pytest.fixture(scope="module")
def chapter() -> tuple[dict[str, Any], str]:
    """The namespace after running the chapter's readable cells in order, and what they
    printed (a failing check cell raises here, with the chapter's own assertion)."""
    ns: dict[str, Any] = {"__name__": "chapter5"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for i, (tag, src) in enumerate(chapter_cells()):
            exec(compile(src, f"{CHAPTER.name}[{tag} #{i}]", "exec"), ns)
    return ns, printed.getvalue()


def test_every_section_has_its_code_and_its_check() -> None:
    tags = [t for t, _ in chapter_cells()]
    assert [t for t in SECTIONS if tags.count(t) < 2] == []
    assert tags == sorted(tags, key=SECTIONS.index), "the sections are out of order"
    for tag, src in chapter_cells():
        assert len(src.splitlines()) <= 15, f"a {tag} cell is longer than 15 lines"


def test_the_chapter_checks_pass(chapter) -> None:
    _, printed = chapter
    lines = printed.splitlines()
    assert any(line.startswith("learnable PE: ours equals lstpe's") for line in lines)
    assert any(line.startswith("one block: ours equals lstpe's") for line in lines)
    assert any(line.startswith("one step: loss") for line in lines)


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A readable model's gradients under the package's names and layout."""
    out = {}
    for name, p in model.named_parameters():
        key, transpose = readable.package_name(name)
        out[key] = p.grad.T if transpose and p.grad.dim() == 2 else p.grad
    return out


def test_gradients_equal_the_package(chapter) -> None:
    """The loss's gradient of the readable model equals the batched model's, weight by weight
    (the key bias aside: its true gradient is zero, what it gets is rounding)."""
    ns, _ = chapter
    model = ns["PaperModel"](d=TINY.d_model, n_layers=TINY.n_layers)
    readable.from_package(model, init_weights("learn-0.2", 7, TINY))
    pkg = BatchedLSTTransformer(["learn-0.2"], [7], TINY)
    g = torch.Generator().manual_seed(0)
    x = F.one_hot(torch.randint(0, 6, (64, 16), generator=g), 6)[..., 1:].float()
    y = torch.randint(0, 4, (64,), generator=g)
    F.cross_entropy(model(x), y).backward()
    F.cross_entropy(pkg(x)[0], y).backward()
    ours = _grads(model)
    assert len(ours) == 4 + 1 + 12 * TINY.n_layers
    d = TINY.d_model
    for key, grad in ours.items():
        ref = pkg.get(key).grad[0]
        if key.endswith("qkv.b"):
            grad, ref = grad.view(3, d)[[0, 2]], ref.view(3, d)[[0, 2]]
            torch.testing.assert_close(ours[key][d:2 * d], torch.zeros(d), rtol=0, atol=1e-6)
        assert grad.abs().max() > 0, f"{key}: no gradient"
        torch.testing.assert_close(grad, ref, rtol=1e-4, atol=1e-7, msg=key)


@pytest.mark.parametrize("pe", ["random", "nope", "1d-fixed", "2d-fixed"])
def test_the_block_is_the_block_of_every_additive_pe(chapter, pe: str) -> None:
    """Eval mode: the readable block (dropout off) on embedding + PE equals the package's block
    of the other additive PEs too, fixed PEs and the 0.1 dropout of the sinusoids included."""
    ns, _ = chapter
    cfg = ModelConfig(d_model=TINY.d_model, n_layers=1)
    pkg = BatchedLSTTransformer([pe], [3], cfg).eval()
    p_drop = 0.1 if pe.endswith("fixed") else 0.0
    assert pkg.structures[0].dropout == p_drop
    block = ns["PostLNBlock"](cfg.d_model, p_drop=p_drop).eval()
    readable.copy_into(pkg, block, "blocks.0.")
    h = torch.randn(4, 16, cfg.d_model, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(block(h + pkg.pe()[0, 0]), pkg.blocks(h[None])[0][0])


def test_weights_round_trip_through_the_package(chapter) -> None:
    ns, _ = chapter
    a = ns["PaperModel"](d=TINY.d_model, n_layers=TINY.n_layers)
    pkg = BatchedLSTTransformer(["learn-0.5", "learn-0.2"], [1, 2], TINY)
    readable.copy_into(pkg, a, m=1)
    b = ns["PaperModel"](d=TINY.d_model, n_layers=TINY.n_layers)
    readable.from_package(b, pkg.single_weights(1))
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)
    torch.testing.assert_close(pkg.pe()[1], a.pe.P.detach(), rtol=0, atol=0)
    assert readable.package_name("blocks.3.fc1.weight") == ("blocks.3.fc1.w", True)
    assert readable.package_name("pe.P") == ("pe.learn", False)
    with pytest.raises(ValueError, match="no package name"):
        readable.package_name("blocks.0.rel")


def test_chapter_4b_shows_the_learnable_pe_chapter_5_imports() -> None:
    """The learnable PE is written once, under its formula in chapter 4b; the package keeps the
    same class byte for byte, which chapter 5 imports instead of writing it again."""
    cells = json.loads((ROOT / "book" / "04b_learnable_pe.ipynb").read_text(encoding="utf-8"))
    shown = ["".join(c["source"]) for c in cells["cells"]
             if c["cell_type"] == "code" and "class LearnablePE" in "".join(c["source"])]
    assert len(shown) == 1, "chapter 4b writes the learnable PE once"
    kept = inspect.getsource(readable.LearnablePE)
    assert shown[0][shown[0].index("class LearnablePE"):].rstrip() == kept.rstrip()
    ch5 = "\n".join(src for _, src in chapter_cells())
    assert "class LearnablePE" not in ch5 and "import LearnablePE" in ch5
