"""Tests of lstpe.lst: Latin squares, solver, relational complexity, vendored data, generator,
splits and human accuracy.

The oracles here are written independently of the module: Latin squares come from a brute
force over 24^4 row permutations (``all_squares`` in conftest), puzzles are solved by plain
filtering of those squares, and relational complexity is recomputed from its definition with
Python sets of cells (no bitmasks).
"""

from __future__ import annotations

import itertools
from importlib import resources

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lstpe import lst
from lstpe.lst import data as lst_data
from lstpe.lst import generator as lst_generate

LINES = [[4 * r + c for c in range(4)] for r in range(4)] + [
    [4 * r + c for r in range(4)] for c in range(4)
]
"""The 8 lines (4 rows, then 4 columns) as flat cell indices."""


# --------------------------------------------------------------------------- oracles


def digits(s: str) -> np.ndarray:
    return np.array([int(ch) for ch in s])


def probe_values(squares: np.ndarray, s: str, cells: set[int] | None = None) -> set[int]:
    """Probe values of the squares agreeing with the filled cells of ``s`` among ``cells``
    (default: all cells)."""
    a, flat = digits(s), squares.reshape(len(squares), 16)
    use = [c for c in (range(16) if cells is None else cells) if 1 <= a[c] <= 4]
    ok = (flat[:, use] == a[use]).all(axis=1) if use else np.ones(len(flat), dtype=bool)
    return {int(v) for v in flat[ok, s.index("5")]}


def oracle_rc(squares: np.ndarray, s: str) -> int:
    """Relational complexity from its definition (see lstpe.lst's docstring)."""
    pr, pc = divmod(s.index("5"), 4)

    def forces(lines) -> bool:
        return len(probe_values(squares, s, set().union(*(LINES[i] for i in lines)))) == 1

    if forces([pr]) or forces([4 + pc]):
        return 1
    if forces([pr, 4 + pc]):
        return 2
    if any(forces(t) for t in itertools.combinations(range(8), 3)):
        return 3
    return 4


def probe_value_table(squares: np.ndarray, a: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Vectorised oracle: which probe values 1-4 (columns) the squares agreeing with the filled
    cells of puzzles ``a`` (N, 16; 5 = probe) where ``cells`` (16,) is True allow. (N, 4) bool."""
    flat = squares.reshape(len(squares), 16).astype(np.int64)  # (K, 16)
    probe = (a == 5).argmax(1)
    out = np.empty((len(a), 4), dtype=bool)
    for i in range(0, len(a), 1000):
        ai, pi = a[i:i + 1000], probe[i:i + 1000]
        use = cells[None, :] & (ai >= 1) & (ai <= 4)  # (n, 16)
        ok = (~use[:, None, :] | (flat[None] == ai[:, None, :])).all(-1)  # (n, K)
        at_probe = flat[:, pi].T  # (n, K): each square's value at the puzzle's probe
        out[i:i + 1000] = np.stack([(ok & (at_probe == v)).any(1) for v in range(1, 5)], 1)
    return out


def jaccard_sets(s: str, t: str) -> float:
    """Jaccard distance of the (cell, value) sets of the non-blank cells of two strings."""
    a = {(i, ch) for i, ch in enumerate(s) if ch != "0"}
    b = {(i, ch) for i, ch in enumerate(t) if ch != "0"}
    return 1 - len(a & b) / len(a | b)


# --------------------------------------------------------------------------- Latin squares


def test_576_latin_squares_match_brute_force(all_squares):
    sq = lst.latin_squares()
    assert sq.shape == (576, 4, 4)
    assert len(all_squares) == 576  # the brute force itself: 4! * 3! * 4 reduced squares
    for s in sq:  # every returned square is Latin
        for line in list(s) + list(s.T):
            assert sorted(line.tolist()) == [1, 2, 3, 4]
    assert len({s.tobytes() for s in sq}) == 576  # all distinct
    assert {s.tobytes() for s in sq} == {s.tobytes() for s in all_squares}
    reduced = [s for s in all_squares if (s[0] == [1, 2, 3, 4]).all()
               and (s[:, 0] == [1, 2, 3, 4]).all()]
    assert len(reduced) == 4  # the known number of reduced squares of order 4
    assert not sq.flags.writeable


# --------------------------------------------------------------------------- hand cases

HAND = [
    # row 0 = 1 2 3 ?: the row alone gives 4; 24 squares extend the first row 1234
    ("1235000000000000", 4, 1, 24),
    # probe (0,0): row 0 has 2 3 -> {1,4}; column 0 has 4 -> {1,2,3}; together -> 1
    ("5230400000000000", 1, 2, None),
    # probe (0,0), row 0 has 2; columns 2 and 3 each hold a 1 (rows 1, 2), so the 1 of row 0
    # can only go to the probe (a "hidden single"): row + column give {1,3,4}, 3 lines give 1
    ("5200001000010000", 1, 3, None),
]


@pytest.mark.parametrize("s, answer, rc, n_cand", HAND)
def test_hand_computed_puzzles(s, answer, rc, n_cand, all_squares):
    p = lst.parse(s)
    assert p.probe == divmod(s.index("5"), 4)
    assert lst.solve(p) == answer
    assert lst.relational_complexity(p) == rc
    assert oracle_rc(all_squares, s) == rc
    q = lst.parse(s, answer=answer, vectors=rc)
    assert (q.answer, q.vectors) == (answer, rc)
    if n_cand is not None:
        assert len(lst.candidates(p)) == n_cand


def test_hand_row_and_column_partials():
    p = lst.parse("5230400000000000")
    row_only = lst.parse("5230000000000000")
    col_only = lst.parse("5000400000000000")
    with pytest.raises(lst.AmbiguousPuzzleError) as e:
        lst.solve(row_only)
    assert e.value.values == (1, 4)
    with pytest.raises(lst.AmbiguousPuzzleError) as e:
        lst.solve(col_only)
    assert e.value.values == (1, 2, 3)
    assert lst.solve(p) == 1


def test_render_text_hand_case():
    p = lst.parse("1235000000000000", answer=4)
    lines = lst.render_text(p).splitlines()
    assert lines[0].split() == ["●", "▲", "■", "?"]
    assert lines[1].split() == ["·"] * 4
    assert lst.render_text(p, show_answer=True).splitlines()[0].split()[-1] == "[✚]"


def test_jaccard_hand_case():
    a = lst.parse("1235000000000000")  # {(0,1), (1,2), (2,3), (3,?)}
    b = lst.parse("1205300000000000")  # {(0,1), (1,2), (3,?), (4,3)}
    assert lst.jaccard_dissimilarity(a, b) == pytest.approx(1 - 3 / 5)
    assert lst.jaccard_dissimilarity(a, a) == 0.0
    assert lst.min_dissimilarity([a], []) == np.inf


# --------------------------------------------------------------------------- vendored data


def test_every_vendored_puzzle_uniquely_solvable_with_stored_answer(
        all_squares, human_frame, training_frame):
    df = pd.concat([human_frame, training_frame], ignore_index=True)
    assert len(df) == 108 + 9000
    a = np.stack([digits(s) for s in df["puzzle"]])
    assert ((a == 5).sum(1) == 1).all()
    allowed = probe_value_table(all_squares, a, np.ones(16, dtype=bool))
    expected = np.arange(1, 5)[None, :] == df["answer"].to_numpy()[:, None]
    np.testing.assert_array_equal(allowed, expected)  # exactly one value: the stored answer
    for i in range(0, len(a), 997):  # a spread-out sample in plain Python
        assert probe_values(all_squares, df["puzzle"].iloc[i]) == {int(df["answer"].iloc[i])}
    # and through the module's solver, for all of them
    for s, ans in zip(df["puzzle"], df["answer"], strict=True):
        assert lst.solve(lst.parse(s)) == ans


def test_human_labels_reproduced_exactly(human_frame, all_squares):
    assert len(human_frame) == 108
    assert human_frame["vectors"].value_counts().to_dict() == {1: 36, 2: 36, 3: 36}
    rc = lst.relational_complexities(list(human_frame["puzzle"]))
    np.testing.assert_array_equal(rc, human_frame["vectors"].to_numpy())
    oracle = [oracle_rc(all_squares, s) for s in human_frame["puzzle"]]
    np.testing.assert_array_equal(oracle, human_frame["vectors"].to_numpy())
    conf = lst.complexity_confusion(human_frame)
    np.testing.assert_array_equal(conf.to_numpy(), 36 * np.eye(3, dtype=int))


def test_training_labels_agree(training_frame, all_squares):
    conf = lst.complexity_confusion(training_frame)
    assert list(conf.index) == [1, 2, 3] and list(conf.columns) == [1, 2, 3]
    np.testing.assert_array_equal(conf.to_numpy(), 3000 * np.eye(3, dtype=int))
    # the definition-level oracle on a stratified sample
    sample = training_frame.groupby("vectors").sample(40, random_state=1)
    oracle = [oracle_rc(all_squares, s) for s in sample["puzzle"]]
    np.testing.assert_array_equal(oracle, sample["vectors"].to_numpy())


def test_plain_fewest_lines_would_relabel_612_quaternary(training_frame, all_squares):
    """The docstring's claim: without the row+column restriction, 612 of the 3000 Quaternary
    puzzles are forced by some two lines."""
    q = training_frame[training_frame["vectors"] == 3]
    a = np.stack([digits(s) for s in q["puzzle"]])
    two = np.zeros(len(a), dtype=bool)
    for i, j in itertools.combinations(range(8), 2):
        mask = np.zeros(16, dtype=bool)
        mask[LINES[i] + LINES[j]] = True
        two |= probe_value_table(all_squares, a, mask).sum(1) == 1
    assert two.sum() == 612


def test_training_puzzles_far_from_human(training_frame, human_frame):
    d = lst.min_dissimilarity(list(training_frame["puzzle"]), list(human_frame["puzzle"]))
    assert (d > 0.8).all()
    assert d.min() == pytest.approx(0.8125)
    sample = training_frame["puzzle"].iloc[::150]
    for s, ds in zip(sample, d[::150], strict=True):
        assert ds == pytest.approx(min(jaccard_sets(s, t) for t in human_frame["puzzle"]))


def test_puzzles_from_frame_roundtrip(human_frame):
    ps = lst.puzzles_from_frame(human_frame)
    assert [p.string for p in ps] == list(human_frame["puzzle"])
    assert [p.answer for p in ps] == list(human_frame["answer"])
    assert [p.vectors for p in ps] == list(human_frame["vectors"])
    assert [p.id for p in ps] == list(human_frame["id"])


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("s, needle", [
    ("123", "got 3"),
    ("12350000000000000", "got 17"),
    ("1235000000000007", "'7'"),
    ("12350000000x0000", "'x'"),
    ("1234000000000000", "found 0"),
    ("5500000000000000", "found 2"),
    ("1135000000000000", "shape 1 repeated in row 0"),
    ("1000100000005000", "shape 1 repeated in column 0"),
])
def test_bad_strings_rejected_naming_the_value(s, needle):
    with pytest.raises(ValueError) as e:
        lst.parse(s)
    assert needle in str(e.value)


def test_non_string_rejected():
    with pytest.raises(ValueError, match="int 1235"):
        lst.parse(1235000000000000)


@pytest.mark.parametrize("s, answer, needle", [
    ("1235000000000000", 3, "answer 3 already appears in the probe's row 0"),
    ("5230400000000000", 4, "answer 4 already appears in the probe's column 0"),
    ("5200001000010000", 3, "answer 3 contradicts '5200001000010000': the unique solution is 1"),
    ("5000000000000000", 1, "answer 1 is not the unique solution"),
    ("1235000000000000", 0, "got 0"),
    ("1235000000000000", 5, "got 5"),
    ("1235000000000000", 2.5, "got 2.5"),
    ("1235000000000000", True, "got True"),
    ("1235000000000000", "4", "got '4'"),
    ("1235000000000000", float("nan"), "got nan"),
])
def test_contradicting_answer_rejected(s, answer, needle):
    with pytest.raises(ValueError) as e:
        lst.parse(s, answer=answer)
    assert needle in str(e.value)


@pytest.mark.parametrize("vectors", [0, 5, 2.5, "x", float("nan"), True])
def test_bad_vectors_rejected(vectors):
    with pytest.raises(ValueError) as e:
        lst.parse("1235000000000000", vectors=vectors)
    assert f"vectors must be an integer 1-4, got {vectors!r}" in str(e.value)


def test_unsolvable_and_ambiguous():
    # cell (0,0) must hold 1 (row 0 has 2 3 4) but column 0 already holds 1
    bad = lst.parse("0234100000000005")
    with pytest.raises(lst.UnsolvablePuzzleError, match="0234100000000005"):
        lst.solve(bad)
    with pytest.raises(lst.AmbiguousPuzzleError) as e:
        lst.solve(lst.parse("5000000000000000"))
    assert e.value.values == (1, 2, 3, 4)
    with pytest.raises(ValueError, match="puzzle 1 .*not uniquely solvable"):
        lst.relational_complexities(["1235000000000000", "5000000000000000"])


@pytest.mark.parametrize("kw, needle", [
    ({"grid": ((0,) * 4,) * 3, "probe": (0, 0)}, "4x4"),
    ({"grid": ((7, 0, 0, 0),) + ((0,) * 4,) * 3, "probe": (1, 1)}, "0-4"),
    ({"grid": ((0,) * 4,) * 4, "probe": (4, 0)}, "(4, 0)"),
    ({"grid": ((1, 0, 0, 0),) + ((0,) * 4,) * 3, "probe": (0, 0)}, "got 1"),
])
def test_puzzle_validation(kw, needle):
    with pytest.raises(ValueError) as e:
        lst.Puzzle(**kw)
    assert needle in str(e.value)


def test_impossible_generation_raises_instead_of_hanging(monkeypatch, human_frame):
    """Every cell is the probe of some human puzzle, so no puzzle is > 0.99 from all of them;
    the generator gives up after MAX_IDLE_DRAWS fruitless candidates."""
    exclude = lst.puzzles_from_frame(human_frame)
    assert {p.probe for p in exclude} == {divmod(i, 4) for i in range(16)}
    monkeypatch.setattr(lst_generate, "MAX_IDLE_DRAWS", 5000)  # where generate reads it
    with pytest.raises(ValueError, match="cannot generate 2 distinct puzzles of complexity 1.*"
                                         "min_dissimilarity=0.99 to 108 excluded"):
        lst.generate(2, 1, seed=0, exclude=exclude, min_dissimilarity=0.99)


def test_generate_and_split_arguments_rejected():
    with pytest.raises(ValueError, match="-1"):
        lst.generate(-1, 1, seed=0)
    with pytest.raises(ValueError, match="got 4"):
        lst.generate(1, 4, seed=0)
    with pytest.raises(ValueError, match=r"\[0, 1\), got 1.0"):
        lst.generate(1, 1, seed=0, min_dissimilarity=1.0)
    with pytest.raises(ValueError, match="'bogus'.*paper, generated"):
        lst.load_split("bogus")
    with pytest.raises(ValueError, match="1..8100, got 0"):
        lst.load_split("paper", n_train=0)
    with pytest.raises(ValueError, match="1..8000, got 0"):
        lst.load_split("paper", n_train=0, rule="text")
    with pytest.raises(ValueError, match="'bogus'.*code, text"):
        lst.load_split("paper", rule="bogus")


# --------------------------------------------------------------------------- property tests

puzzle_draw = st.tuples(st.integers(0, 575), st.integers(0, 15), st.integers(0, 2**16 - 1))


def make_string(squares: np.ndarray, draw: tuple[int, int, int]) -> tuple[str, int]:
    """A puzzle cut from square ``i``: probe cell ``probe``, the cells of bitmask ``shown``;
    returns the string and the square's value at the probe."""
    i, probe, shown = draw
    flat = squares[i].reshape(16)
    a = [int(flat[c]) if shown >> c & 1 else 0 for c in range(16)]
    a[probe] = 5
    return "".join(map(str, a)), int(flat[probe])


@settings(max_examples=60, deadline=None)
@given(draw=puzzle_draw)
def test_parse_solve_roundtrip(all_squares, draw):
    s, truth = make_string(all_squares, draw)
    p = lst.parse(s)
    assert p.string == s
    assert lst.parse(p.string) == p
    x = lst.encode([s])[0]  # one-hot decodes back to the string
    assert "".join(str(int(r.argmax()) + 1) if r.sum() else "0" for r in x) == s
    values = probe_values(all_squares, s)
    assert truth in values  # cut from a Latin square: never contradictory
    if len(values) == 1:
        assert lst.solve(p) == truth
        assert lst.parse(s, answer=truth).answer == truth
        assert int(lst.labels([s])[0]) == truth - 1
        rc = lst.relational_complexity(p)
        assert rc == oracle_rc(all_squares, s)
    else:
        with pytest.raises(lst.AmbiguousPuzzleError) as e:
            lst.solve(p)
        assert set(e.value.values) == values


@settings(max_examples=30, deadline=None)
@given(draw=puzzle_draw, relabel=st.permutations([1, 2, 3, 4]),
       rows=st.permutations(range(4)), transpose=st.booleans())
def test_complexity_invariant_under_symmetries(all_squares, draw, relabel, rows, transpose):
    """Relabelling shapes, permuting rows and transposing map lines to lines: the answer
    follows the relabelling and the relational complexity is unchanged."""
    s, truth = make_string(all_squares, draw)
    if len(probe_values(all_squares, s)) != 1:
        return
    a = digits(s).reshape(4, 4)
    b = np.where((a >= 1) & (a <= 4), np.array([0, *relabel, 5])[a], a)[list(rows)]
    b = b.T if transpose else b
    t = "".join(map(str, b.ravel()))
    assert lst.solve(lst.parse(t)) == relabel[truth - 1]
    assert lst.relational_complexity(lst.parse(t)) == lst.relational_complexity(lst.parse(s))


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10**6), vectors=st.integers(1, 3), n=st.integers(1, 4))
def test_generate_roundtrip(all_squares, seed, vectors, n):
    ps = lst.generate(n, vectors, seed=seed)
    assert ps == lst.generate(n, vectors, seed=seed)  # deterministic for a seed
    assert len(ps) == n and len({p.string for p in ps}) == n
    assert [p.id for p in ps] == list(range(n))
    for p in ps:
        q = lst.parse(p.string, answer=p.answer, vectors=p.vectors, id=p.id)
        assert q == p
        assert probe_values(all_squares, p.string) == {p.answer}
        assert oracle_rc(all_squares, p.string) == vectors


# --------------------------------------------------------------------------- generator


@pytest.mark.parametrize("vectors", [1, 2, 3])
def test_generator_unique_right_complexity_far(vectors, human_frame, all_squares):
    exclude = lst.puzzles_from_frame(human_frame)
    ps = lst.generate(45, vectors, seed=11, exclude=exclude)
    assert len({p.string for p in ps}) == 45
    for p in ps:
        assert p.vectors == vectors
        assert probe_values(all_squares, p.string) == {p.answer}
        assert oracle_rc(all_squares, p.string) == vectors
        assert min(jaccard_sets(p.string, t) for t in human_frame["puzzle"]) > 0.8
    # filled-cell counts follow the authors' histogram (largest-remainder quotas)
    hist = lst.FILLED_HISTOGRAM[vectors]
    counts = pd.Series([sum(ch in "1234" for ch in p.string) for p in ps]).value_counts()
    expected = {k: 45 * c / sum(hist.values()) for k, c in hist.items()}
    for k, e in expected.items():
        assert abs(counts.get(k, 0) - e) < 1


def test_generator_deterministic_for_a_seed(human_frame):
    exclude = lst.puzzles_from_frame(human_frame)
    ps = lst.generate(20, 3, seed=(5, 3), exclude=exclude)
    assert ps == lst.generate(20, 3, seed=(5, 3), exclude=exclude)
    assert [p.string for p in ps] != [p.string for p in lst.generate(20, 3, seed=(6, 3))]
    # the exclusion matters: without it almost every puzzle is within 0.8 of a human one
    free = lst.generate(20, 3, seed=(5, 3))
    d = [min(jaccard_sets(p.string, t) for t in human_frame["puzzle"]) for p in free]
    assert np.mean(np.array(d) <= 0.8) > 0.5


def test_generate_frame_format(training_frame):
    df = lst.generate_frame(5, seed=3)
    assert list(df.columns) == list(training_frame.columns)
    assert df["vectors"].tolist() == [1] * 5 + [2] * 5 + [3] * 5
    assert df["id"].tolist() == list(range(15))
    np.testing.assert_array_equal(lst.relational_complexities(list(df["puzzle"])),
                                  df["vectors"].to_numpy())
    assert (df["source"] == "generated").all()


# --------------------------------------------------------------------------- splits


def test_paper_split_sizes_and_stratification(paper_splits, training_frame, human_frame):
    tr, te, va = paper_splits["train"], paper_splits["test"], paper_splits["val"]
    # the authors' code: scikit-learn's stratified 90/10 split, 300 test puzzles per condition
    assert (len(tr), len(te), len(va)) == (8100, 900, 108)
    assert torch.bincount(te.vectors, minlength=4)[1:].tolist() == [300, 300, 300]
    assert torch.bincount(tr.vectors, minlength=4)[1:].tolist() == [2700, 2700, 2700]
    ids_tr, ids_te = set(tr.ids.tolist()), set(te.ids.tolist())
    assert not ids_tr & ids_te and ids_tr | ids_te == set(range(9000))
    assert va.ids.tolist() == list(range(108))
    for split, frame in ((tr, training_frame), (te, training_frame), (va, human_frame)):
        rows = frame.set_index("id").loc[split.ids.numpy()]
        assert split.y.tolist() == (rows["answer"] - 1).tolist()
        assert split.vectors.tolist() == rows["vectors"].tolist()
        assert torch.equal(split.x, lst.encode(list(rows["puzzle"])))
        assert split.x.shape == (len(split), 16, 5) and split.x.dtype == torch.float32
    assert (torch.diff(tr.ids) > 0).all()


def test_split_determinism_and_subsample(paper_splits):
    again = lst.load_split("paper", seed=0, n_train=90)
    assert torch.equal(again["test"].ids, paper_splits["test"].ids)
    assert torch.bincount(again["train"].vectors)[1:].tolist() == [30, 30, 30]
    assert set(again["train"].ids.tolist()) <= set(paper_splits["train"].ids.tolist())
    # the code's split is fixed; the seed only draws the subsample
    other = lst.load_split("paper", seed=1, n_train=90)
    assert torch.equal(other["test"].ids, paper_splits["test"].ids)
    assert not torch.equal(other["train"].ids, again["train"].ids)
    # the text's split: 8000 / 1000, drawn from the seed
    t0, t1 = lst.load_split("paper", seed=0, rule="text"), lst.load_split("paper", seed=1,
                                                                          rule="text")
    assert (len(t0["train"]), len(t0["test"])) == (8000, 1000)
    assert torch.bincount(t0["test"].vectors, minlength=4)[1:].tolist() == [334, 333, 333]
    assert not torch.equal(t0["test"].ids, t1["test"].ids)


def test_authors_split_matches_scikit_learn_when_available(training_frame):
    """The vendored rows are what scikit-learn's train_test_split gives (checked only where
    scikit-learn is installed; it is no dependency)."""
    sk = pytest.importorskip("sklearn.model_selection")
    _, test = sk.train_test_split(np.arange(9000), test_size=0.1, random_state=42,
                                  stratify=training_frame["condition"].to_numpy())
    np.testing.assert_array_equal(np.sort(test), lst.authors_test_rows())


def test_generated_split(monkeypatch, human_frame):
    """The ``generated`` kind, on a small pool (generating 9000 takes too long for a unit
    test): the pool excludes the human puzzles and is split like the paper's."""
    calls = []
    real = lst.generate_frame

    def small(n_per_condition, seed, exclude=None):
        calls.append((n_per_condition, seed, exclude))
        return real(400, seed)

    monkeypatch.setattr(lst_data, "generate_frame", small)  # where load_split looks it up
    lst_data._generated_training.cache_clear()
    try:
        s = lst.load_split("generated", seed=2)
    finally:
        lst_data._generated_training.cache_clear()
    (n, seed, exclude), = calls
    assert (n, seed) == (3000, 2)
    assert [p.string for p in exclude] == list(human_frame["puzzle"])
    assert (len(s["train"]), len(s["test"]), len(s["val"])) == (200, 1000, 108)
    assert torch.bincount(s["test"].vectors)[1:].tolist() == [334, 333, 333]
    assert torch.bincount(s["train"].vectors)[1:].tolist() == [66, 67, 67]
    pool = real(400, 2)
    rows = pool.set_index("id").loc[s["train"].ids.numpy()]
    assert torch.equal(s["train"].x, lst.encode(list(rows["puzzle"])))


# --------------------------------------------------------------------------- humans


def test_human_accuracy_per_condition():
    acc = lst.human_accuracy()
    assert len(acc) == 108 and (acc["n_trials"] == 40).all()
    by = lst.human_accuracy_by_condition()
    # the reference README's values, to 3 decimals (0.6625 = 954/1440 rounds half-up to 0.663)
    for v, ref in {1: 0.967, 2: 0.870, 3: 0.663}.items():
        assert abs(by[v] - ref) <= 0.0005 + 1e-12
    # independently from the raw trials: 40 distinct participants per puzzle, counts of correct
    with resources.files("lstpe").joinpath("data", "lst", "human_behaviour.csv").open() as f:
        raw = pd.read_csv(f)
    puz = raw[raw["trial_type"] != "Null"]
    assert raw["subject"].nunique() == 40
    assert (puz.groupby("LST_id")["subject"].nunique() == 40).all()
    correct = puz.groupby("trial_type")["accuracy"].sum()
    assert correct.to_dict() == {"Binary": 1392, "Ternary": 1253, "Quaternary": 954}
    assert by.to_dict() == pytest.approx({1: 1392 / 1440, 2: 1253 / 1440, 3: 954 / 1440})
    per = puz.groupby(puz["LST_id"] - 1)["accuracy"].mean()
    np.testing.assert_allclose(acc.set_index("id")["accuracy"], per.sort_index())
