"""Helpers of the tutorial chapters 2-4 (lstpe.tutorial): numbers and figure hygiene."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lstpe import lst  # noqa: E402
from lstpe.rendering import style  # noqa: E402
from lstpe.tutorial import lst_task as lt  # noqa: E402


def check_figure(fig) -> None:
    """Every axes that shows data has axis labels (boards and galleries are axis-off), every
    heatmap has a colour bar, no legend sits inside an axes over the data, no title, label or
    tick runs into another (:func:`lstpe.rendering.style.overlapping_text`), and no text shows
    under 9 pt on the page (its font size, scaled as the page shrinks a figure wider than the
    content column: :func:`lstpe.rendering.style.small_text`)."""
    assert style.small_text(fig) == [], f"text under {style.MIN_PT} pt on the page"
    assert style.overlapping_text(fig) == [], "titles, labels or ticks run into each other"
    fig.canvas.draw()
    cbar_axes = {a for a in fig.axes if a.get_label() == "<colorbar>"}
    images = 0
    for ax in fig.axes:
        if ax in cbar_axes or not ax.axison:
            continue
        drawn = ax.lines or ax.collections or ax.patches or ax.images
        board = ax.get_aspect() == 1.0 and not ax.get_xticks().size
        if drawn and not board:
            assert ax.get_xlabel() and ax.get_ylabel() or _shares_labels(ax), ax.get_title()
        for im in ax.images:
            if im.get_array().ndim == 2 and im.colorbar is None and im.cmap.N > 4:
                images += 1
        leg = ax.get_legend()
        if leg is not None:
            lb = leg.get_window_extent()
            ab = ax.get_window_extent()
            inside = lb.x0 >= ab.x0 and lb.x1 <= ab.x1 and lb.y0 >= ab.y0 and lb.y1 <= ab.y1
            assert not inside, f"{ax.get_title()}: legend inside the axes"
    assert images == 0, "a heatmap without a colour bar"
    plt.close(fig)


def test_small_text_measures_the_displayed_size() -> None:
    """A 9 pt label on a figure twice the column's width shows at 4.5 pt; at the column's
    width it shows at 9 pt; :func:`style.readable` fits the first to the column (the saved PNG,
    padded by ``savefig.pad_inches`` each side, at most the column wide) and lifts it."""
    fig = plt.figure(figsize=(2 * style.WIDTH, 3), dpi=style.DPI)
    ax = fig.add_axes((0, 0, 1, 0.8))  # the saved PNG (tight box) is the figure's full width
    ax.set_title("t", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    assert [t for t, _ in style.small_text(fig)] == ["t"]
    assert style.displayed_pt(fig, 9) == pytest.approx(4.5, rel=0.05)
    style.readable(fig)
    assert style.COLUMN_PX - 4 <= style._png_width_px(fig) <= style.COLUMN_PX
    assert fig.get_figwidth() == pytest.approx(style.WIDTH, rel=0.04)
    assert style.small_text(fig) == []
    plt.close(fig)


def _shares_labels(ax) -> bool:
    """Panels of a row with a shared y axis label only the first; a shared x axis only the
    bottom row."""
    fig = ax.figure
    others = [a for a in fig.axes if a is not ax and a.axison]
    has_x = bool(ax.get_xlabel()) or any(a.get_xlabel() for a in others)
    has_y = bool(ax.get_ylabel()) or any(a.get_ylabel() for a in others)
    return has_x and has_y


@pytest.fixture(scope="module")
def examples() -> dict[int, lst.Puzzle]:
    human = lst.load_human()
    puzzles = lst.puzzles_from_frame(human)
    return {v: puzzles[int(human.index[human["vectors"] == v][0])] for v in (1, 2, 3)}


# --------------------------------------------------------------------------- chapter 2


def test_probe_values_and_forcing_agree_with_relational_complexity(examples) -> None:
    human = lst.load_human()
    for p in lst.puzzles_from_frame(human)[::9]:
        own = lt.own_lines(p)
        rc = lst.relational_complexity(p)
        singles = [len(lt.probe_values(p, own[k])) == 1 for k in ("row alone", "column alone")]
        both = len(lt.probe_values(p, own["row + column"])) == 1
        expected = 1 if any(singles) else 2 if both else 3 if lt.forcing(p, 3) else 4
        assert rc == expected
        assert lt.probe_values(p, list(lt.LINES)) == [p.answer]
    with pytest.raises(ValueError):
        lt.probe_values(examples[1], [("diagonal", 0)])


def test_lines_table_and_lines_to_show(examples) -> None:
    t = lt.lines_table(examples)
    assert list(t["computed RC"]) == [1, 2, 3]
    for p in examples.values():
        assert len(lt.probe_values(p, lt.lines_to_show(p))) == 1


def test_square_checks_and_solver_table(examples) -> None:
    checks = lt.square_checks(lst.latin_squares())
    assert checks["squares"] == 576 == checks["4! * 3! * R4"]
    assert checks["reduced squares R4"] == 4 and checks["all rows and columns permutations"]
    t = lt.solver_table(examples)
    assert (t["solve()"] == t["published answer"]).all()
    assert lt.token_table(examples[3]).to_numpy().sum() == sum(
        ch != "0" for ch in examples[3].string)


def test_pair_forced_counts_the_hidden_singles() -> None:
    t = lt.pair_forced({"human": lst.load_human()})
    assert t.loc["human", "three-vector"] == 36
    assert t.loc["human", "forced by a pair of lines"] == 0


def test_human_summary_and_filled_cells() -> None:
    acc = lst.human_accuracy()
    s = lt.condition_summary(acc)
    assert list(s["puzzles"]) == [36, 36, 36]
    assert s["mean"].is_monotonic_decreasing
    gen = lst.generate_frame(20, seed=0)
    f = lt.filled_cells(gen)
    for _, t in f.groupby("vectors"):
        assert np.isclose(t["authors' training set"].sum(), 1)
        assert np.isclose(t["generated"].sum(), 1)


def test_split_table_totals() -> None:
    splits = lst.load_split("paper", seed=0)
    t = lt.split_table(splits)
    assert t.loc["total", "val"] == 108
    assert t.loc["total", "train"] + t.loc["total", "test"] == 9000
    assert lt.shared_ids(splits) == 0


def test_chapter2_figures_are_labelled(examples) -> None:
    human = lst.load_human()
    puzzles = lst.puzzles_from_frame(human)
    acc = lst.human_accuracy()
    gen = lst.generate_frame(10, seed=1, exclude=puzzles)
    for fig in (lt.plot_examples(examples), lt.plot_forcing_lines(examples),
                lt.plot_square_gallery(lst.latin_squares()), lt.plot_human_accuracy(acc),
                lt.plot_filled_cells(gen), lt.plot_generated(gen),
                lt.plot_easiest_hardest(acc, puzzles),
                lt.plot_hidden_single(lst.load_training())):
        check_figure(fig)


# --------------------------------------------------------------------------- chapter 3


def test_sinusoid_checks_vanish() -> None:
    from lstpe.tutorial import sinusoid as sn

    assert sn.permutation_residual() < 1e-5  # attention scores are computed in float32
    assert (sn.gram_checks() < 1e-5).all()
    assert (sn.shift_checks() < 1e-5).all()
    h = sn.hessian_table()
    assert h["identity"] < 1e-5 and h["diagonal, tied pairs"] < 1e-5
    assert h["random diagonal"] > 0.1 and h["random full (A A^T / d)"] > 0.1
    assert sn.toeplitz_gap([[0, 1, 2], [3, 0, 1], [4, 3, 0]]) == 0
    assert sn.toeplitz_gap(np.arange(9).reshape(3, 3)) == 8
    assert sn.toeplitz_gap([[0, 1], [2, 0]]) == 0 and sn.toeplitz_gap([[0, 1], [1, 1]]) == 1


def test_shuffle_change_separates_nope_from_2d_fixed() -> None:
    from lstpe.tutorial import sinusoid as sn

    x = lst.load_split("paper", seed=0)["val"].x[:20]
    ch = sn.shuffle_change(x)
    assert ch["nope"] < 1e-5 < 1e-3 < ch["2d-fixed"]


def test_decay_integral_closed_forms() -> None:
    from scipy.integrate import quad

    from lstpe.tutorial import sinusoid as sn

    for x in (0.0, 3.0, 40.0):
        for base in (100, 10000):
            num = quad(lambda t, x=x, base=base: np.cos(x * base ** -t), 0, 1, limit=200)[0]
            assert np.isclose(sn.decay_integral([x], base)[0], num, atol=1e-6)
        assert np.isclose(sn.decay_integral([x])[0], quad(lambda t, x=x: np.cos(x * t), 0, 1)[0])
    d = sn.sinusoid_decay(15, 160)
    assert d[0] == pytest.approx(1) and np.all(np.diff(d[:5]) < 0)


def test_grid_checks_split_rows_and_columns() -> None:
    from lstpe.tutorial import sinusoid as sn

    t = sn.grid_checks()
    assert (t["same (dr, dc)"] < 1e-5).all()
    halves = t.iloc[1:]
    # one half depends on the row offset only, the other on the column offset only
    assert sorted((halves["same dr"] < 1e-5).tolist()) == [False, True]
    assert sorted((halves["same dc"] < 1e-5).tolist()) == [False, True]


def test_chapter3_figures_are_labelled() -> None:
    from lstpe.tutorial import sinusoid as sn

    for fig in (sn.plot_gram(), sn.plot_decay(), sn.plot_clocks_and_counter(),
                sn.plot_grid_similarity()):
        check_figure(fig)


# --------------------------------------------------------------------------- chapter 4


def test_rope_checks() -> None:
    from lstpe.tutorial import rotary as rt

    assert (rt.shift_invariance() < 1e-4).all()
    t = rt.rope_checks(rt.constant_content_scores())
    assert (t["spread within one (dr, dc)"] < 1e-4).all()
    assert (t.loc[["rope (paper)", "rope (textbook)"], "Toeplitz gap (1-D offset)"] < 1e-4).all()
    assert (t.loc[["rope-2d (paper)", "rope-2d (textbook)"], "Toeplitz gap (1-D offset)"]
            > 0.1).all()
    assert rt.ones_vs_sinusoid() < 1e-4


def test_relative_demo_logits_toeplitz_weights_not() -> None:
    from lstpe.tutorial import rotary as rt
    from lstpe.tutorial.sinusoid import toeplitz_gap

    demo = rt.relative_demo()
    assert toeplitz_gap(demo["logits"]) < 1e-12
    assert toeplitz_gap(demo["weights, textbook (bidirectional)"]) > 1e-3
    causal = demo["weights, paper (causal)"]
    assert np.allclose(np.triu(causal, 1), 0) and np.allclose(causal.sum(1), 1)


def test_variants_table_lists_every_pe_compactly() -> None:
    from lstpe.nn import encodings as enc
    from lstpe.tutorial import rotary as rt

    t = rt.variants_table()
    assert list(t.index) == list(enc.PE_NAMES)
    assert t.shape[1] == 7
    assert t.loc["c-nope", "causal"] == "yes"
    assert t.loc["relative", "out proj."] == "none / bias"
    assert t.loc["c-nope", "qkv bias"] == "no / yes"
    assert t.loc["rope", "acts in"] == "attention"


def test_chapter4_figures_are_labelled() -> None:
    from lstpe.analysis import probe as P
    from lstpe.tutorial import rotary as rt

    cfg = P.ProbeConfig(steps=5)
    trained = {v: P.train_probe(v, 0, cfg)[0] for v in ("rope", "alibi", "rope+l2", "alibi+l2")}
    for fig in (rt.plot_rotation_2d(), rt.plot_scores(rt.constant_content_scores()),
                rt.plot_relative(rt.relative_demo()), rt.plot_alibi(),
                rt.plot_probe_mass(trained, cfg.n)):
        check_figure(fig)


# --------------------------------------------------------------------------- exercises


def _consistent(p: lst.Puzzle) -> np.ndarray:
    """The Latin squares agreeing with the filled cells of ``p``, by brute force over all 576."""
    sq = lst.latin_squares()
    g = np.array(p.grid)
    keep = (g > 0) & ~np.eye(16, dtype=bool)[p.probe[0] * 4 + p.probe[1]].reshape(4, 4)
    return sq[(sq[:, keep] == g[keep]).all(axis=1)]


def run_cells(chapter: str, ids: tuple[str, ...], ns: dict) -> tuple[dict, str]:
    """Run the code cells ``ids`` of ``book/<chapter>.ipynb``, in order, in the namespace
    ``ns`` (what the chapter defined before them); returns it and what the cells printed."""
    path = Path(__file__).resolve().parents[1] / "book" / f"{chapter}.ipynb"
    cells = {c["id"]: "".join(c["source"]) for c in json.loads(path.read_text())["cells"]}
    printed = io.StringIO()
    ns.setdefault("display", print)
    with contextlib.redirect_stdout(printed):
        for cid in ids:
            exec(compile(cells[cid], f"{chapter}.ipynb[{cid}]", "exec"), ns)
    return ns, printed.getvalue()


def test_exercise_solutions_are_folded_code_not_calls() -> None:
    """Every exercise solution cell of chapters 2-4b is folded (source one click away, output
    shown), at most 15 lines, and defines or computes its answer instead of calling a
    solutions module."""
    for chapter in ("02_latin_square_task", "03_sinusoidal", "04_rotary_relative",
                    "04b_learnable_pe"):
        path = Path(__file__).resolve().parents[1] / "book" / f"{chapter}.ipynb"
        sols = [c for c in json.loads(path.read_text())["cells"] if "solution" in c["id"]]
        assert len(sols) >= 2, chapter
        for c in sols:
            src = "".join(c["source"])
            assert c["metadata"].get("tags") == ["hide-input"], (chapter, c["id"])
            assert len(src.splitlines()) <= 15 and "exercises" not in src, (chapter, c["id"])
    assert not (Path(lt.__file__).parent / "exercises.py").exists()


def test_exercise_2_1_removable_cells(examples) -> None:
    """The chapter's solution code: one cell of the 3-vector example can go (row 0, column 2)
    and the puzzle stays a 3-vector one; blanking any other leaves several probe values
    (checked by brute force over the 576 squares)."""
    p = examples[3]
    ns, printed = run_cells("02_latin_square_task", ("exercise-1-solution",
                                                     "exercise-1-solution-run"),
                            {"lst": lst, "examples": examples})
    filled = [(r, c) for r in range(4) for c in range(4) if p.grid[r][c]]
    assert [tuple(rc) for rc in ns["filled"].tolist()] == filled
    for (r, c), values in zip(filled, ns["values"], strict=True):
        grid = np.array(p.grid)
        grid[r, c] = 0
        q = lst.Puzzle(tuple(map(tuple, grid)), p.probe)
        assert values == sorted({int(s[p.probe]) for s in _consistent(q)})
    assert ns["still_unique"].tolist() == [[0, 2]]
    assert "without (0, 2): relational complexity 3" in printed


def test_exercise_2_2_consistent_squares() -> None:
    """The chapter's counts equal a brute-force count; the folded answer's numbers hold."""
    puzzles = lst.puzzles_from_frame(lst.load_human())
    ns, _ = run_cells("02_latin_square_task", ("exercise-2-solution",),
                      {"lst": lst, "puzzles": puzzles, "acc": lst.human_accuracy()})
    f = ns["sq_table"]
    for i in (0, 17, 54, 107):
        assert f.loc[i, "squares"] == len(_consistent(puzzles[i]))
    assert (f["squares"] == 1).sum() > len(f) / 2  # most puzzles leave one square
    s = ns["summary"]
    assert s["mean squares"].round(1).tolist() == [1.4, 1.2, 1.6]
    assert s["mean accuracy"].round(2).tolist() == [0.97, 0.87, 0.66]
    rho = s["spearman(squares, accuracy)"]
    assert rho.round(2).tolist() == [-0.22, 0.03, 0.51]  # the folded answer's words


def _decay(k: int, d: int, base: float) -> float:
    """(2/d) sum_i cos(k theta_i), theta_i = base^(-2i/d): the sinusoid's similarity at offset k."""
    theta = base ** (-2 * np.arange(d // 2) / d)
    return float(np.cos(k * theta).sum() / (d / 2))


def _chapter3_sinusoid() -> dict:
    from lstpe.tutorial import sinusoid as sn

    ns, _ = run_cells("03_sinusoidal", ("readable-sinusoid-1d",), {"sn": sn})
    return ns


def test_exercise_3_1_decay_over_the_lst() -> None:
    ns, printed = run_cells("03_sinusoidal", ("exercise-1-solution",), _chapter3_sinusoid())
    for base in (10000, 100):
        np.testing.assert_allclose(ns["similarity"](base), [_decay(k, 160, base)
                                                             for k in range(16)], atol=1e-6)
    assert round(ns["similarity"](100)[15], 2) == 0.29
    assert round(ns["similarity"](10000)[15], 2) == 0.64
    k = int(ns["gaps"].argmin())
    base = ns["bases"][k]
    assert ns["gaps"][k] == pytest.approx(abs(_decay(1, 160, base) - _decay(15, 160, base)),
                                          abs=1e-6)
    assert 0.1 < ns["gaps"][k] < 0.2  # no base makes offsets 1 and 15 alike
    assert "offsets 1 and 15 most alike" in printed


def test_exercise_3_2_binary_grid_keeps_the_split_loses_offsets() -> None:
    from lstpe.tutorial import sinusoid as sn

    ns, _ = run_cells("03_sinusoidal", ("exercise-2-solution",), _chapter3_sinusoid())
    P = ns["binary_grid_pe"](160).numpy()
    rows, cols = np.arange(16) // 4, np.arange(16) % 4
    assert sorted(map(tuple, P[:, ::40].astype(int).tolist())) == sorted(
        (r >> 1, r & 1, c >> 1, c & 1) for r in range(4) for c in range(4))
    for half, key in ((P[:, :80], rows), (P[:, 80:], cols)):
        S = half @ half.T  # depends on the two cells' rows (columns) only
        for i in range(16):
            for j in range(16):
                same = (key == key[i])[:, None] & (key == key[j])[None, :]
                assert np.all(S[same] == S[i, j])
    assert (sn.grid_checks(P=ns["binary_grid_pe"](160)) > 1).all().all()


def test_exercise_4_1_mean_readout_depends_on_everything() -> None:
    import torch

    from lstpe.analysis import rope_misuse as rm

    batch = lst.load_split("paper", seed=0)["val"].x[:8]
    authors = rm.dependence_table(batch).iloc[:, 0]
    assert authors.iloc[0] == 0.0  # token 15's read-out: cells 0-14 of puzzle 0 do not matter
    ns, _ = run_cells("04_rotary_relative", ("exercise-1-solution",),
                      {"rm": rm, "torch": torch, "batch": batch})
    assert (ns["changes"] > 1e-6).all()  # the mean read-out: none is 0
    assert len(ns["changes"]) == len(authors) == 3  # the same three edits


def test_exercise_4_2_asymmetric_slopes_break_the_mirror() -> None:
    from lstpe.nn import encodings as enc

    ns, printed = run_cells("04_rotary_relative", ("exercise-2-solution",), {"np": np})
    sym = ns["l2_row_mass"](0.5, 0.5, n=16)
    a = np.exp(enc.alibi_bias(16).numpy())  # the package's bias: -0.5 |i - j|
    np.testing.assert_allclose(sym, (a / np.linalg.norm(a, axis=1, keepdims=True)).sum(1))
    np.testing.assert_allclose(sym, sym[::-1])
    assert len(np.unique(sym.round(9))) == 8
    assert len(np.unique(ns["l2_row_mass"](0.5, 1.0, n=16).round(9))) == 16
    assert "slopes 0.5/1.0: 16 distinct row sums of 16" in printed


# --------------------------------------------------------------------------- chapter 4b


def _grid_score(P: np.ndarray) -> float:
    """Written out here, independently of :mod:`lstpe.analysis.pe_structure`: the Pearson
    correlation, over the 120 pairs of cells, of the cosine of their centred rows with minus
    their Manhattan distance on the 4x4 grid."""
    C = P - P.mean(0)
    C = C / np.linalg.norm(C, axis=1, keepdims=True)
    r, c = np.arange(16) // 4, np.arange(16) % 4
    dist = np.abs(r[:, None] - r[None]) + np.abs(c[:, None] - c[None])
    i, j = np.triu_indices(16, 1)
    return float(np.corrcoef((C @ C.T)[i, j], -dist[i, j])[0, 1])


def test_blur_kernel_averages_each_cell_and_its_neighbours() -> None:
    from lstpe.tutorial import lazy_rich as lr

    K = lr.blur_kernel().numpy()
    np.testing.assert_allclose(K.sum(1), 1)
    assert K[0, [0, 1, 4]].tolist() == pytest.approx([1 / 3] * 3)  # a corner: itself + 2
    assert K[5, [1, 4, 5, 6, 9]].tolist() == pytest.approx([1 / 5] * 5)  # inside: itself + 4
    assert (K > 0).sum() == 16 + 2 * 24  # 24 pairs of neighbours on a 4x4 grid


def test_lazy_rich_toy_small_sigma_learns_the_grid_large_sigma_stays_put() -> None:
    """The chapter's claim at its seed: both scales fit the blur; at sigma 0.02 the learned
    part dominates the init and the trained PE codes neighbours alike (grid score > 0.5); at
    sigma 2 the learned part is under a fifth of the init and the grid score moves by less
    than 0.15 from the random start's."""
    import torch

    from lstpe.nn import encodings as enc
    from lstpe.tutorial import lazy_rich as lr

    small, large = (lr.train_toy(s, steps=800, seed=0) for s in lr.TOY_SIGMAS)
    for run in (small, large):
        assert run.losses[-20:].mean() < 0.05 * run.zero_loss  # both learn the task
        ref = enc.additive_pe(f"learn-{run.sigma}", 1, 16, 32,
                              generator=torch.Generator().manual_seed(0))[0]
        np.testing.assert_array_equal(run.pe_init, ref.double().numpy())  # the package's draw
    ratio = {r.sigma: np.linalg.norm(r.pe_final - r.pe_init) / np.linalg.norm(r.pe_init)
             for r in (small, large)}
    assert ratio[small.sigma] > 5 and ratio[large.sigma] < 0.2
    assert _grid_score(small.pe_final) > 0.5 > abs(_grid_score(small.pe_init))
    assert abs(_grid_score(large.pe_final) - _grid_score(large.pe_init)) < 0.15
    t = lr.toy_table([small, large])
    np.testing.assert_allclose(t["|ΔP| / |P_0|"], [ratio[small.sigma], ratio[large.sigma]])
    np.testing.assert_allclose(t["grid score P_T"], [_grid_score(small.pe_final),
                                                      _grid_score(large.pe_final)], atol=1e-9)
    check_figure(lr.plot_toy([small, large]))
    with pytest.raises(ValueError, match="sigma=0"):
        lr.train_toy(0.0)


def test_plot_pe_draws_an_encoding() -> None:
    from lstpe.nn import encodings as enc
    from lstpe.tutorial import sinusoid as sn

    check_figure(sn.plot_pe(enc.sinusoid_1d(64, 32), "sinusoid"))
    fig = sn.plot_pe(2 * enc.sinusoid_1d(16, 8), "twice a sinusoid")
    assert fig.axes[0].images[0].get_clim() == pytest.approx((-2, 2), abs=1e-3)  # nothing clipped
    check_figure(fig)
    check_figure(sn.plot_pe(enc.sinusoid_2d(4, 4, 160), "2d-fixed", "cell", split=80))


def test_plot_alibi_draws_the_bias_it_is_given() -> None:
    from lstpe.nn import encodings as enc
    from lstpe.tutorial import rotary as rt

    fig = rt.plot_alibi(bias=enc.alibi_bias(16, 0.25))
    img = fig.axes[0].images[0].get_array()
    np.testing.assert_allclose(img, enc.alibi_bias(16, 0.25).numpy())
    assert fig.axes[0].get_title() == "ALiBi bias -0.25 |i - j|"
    check_figure(fig)
