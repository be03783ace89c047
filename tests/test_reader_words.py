"""tests/reader_words.py: the check that keeps the project's words off reader pages."""
from __future__ import annotations

from tests.reader_words import article_text, reader_word_problems


def test_an_undefined_term_is_named_with_its_page() -> None:
    problems = reader_word_problems("Each unit trained for 200 epochs on a lent GPU.", "ch5")
    assert len(problems) == 2
    assert problems[0].startswith("ch5: 'unit'") and "Each unit trained" in problems[0]
    assert problems[1].startswith("ch5: 'lent'")


def test_a_term_defined_at_its_first_use_passes_and_stays_defined() -> None:
    text = ("A *unit* (one trained model: one PE, one seed) is stored whole. "
            "Later units need no gloss; the campaign (our long training job) goes on.")
    assert reader_word_problems(text, "p") == []


def test_a_definition_after_the_first_use_is_too_late() -> None:
    text = "The units are stored. A unit (one trained model) is one PE and one seed."
    assert [p.split("'")[1] for p in reader_word_problems(text, "p")] == ["unit"]


def test_math_units_are_not_the_projects_noun() -> None:
    text = ("Project onto the unit vector; the unit circle; scaled to unit norm, "
            "a unit-norm row, in units of its initial norm.")
    assert reader_word_problems(text, "p") == []
    assert reader_word_problems(text + " Each unit is a model.", "p") != []
    assert reader_word_problems("A unit of another recipe is refused.", "p") != []


def test_items_chunks_and_the_rest_are_caught() -> None:
    for text, term in [("Items 4-10 still train.", "item N"), ("a chunk of runs", "chunk"),
                       ("each published segment", "segment"), ("12 machine-hours", "machine-hours"),
                       ("the witness pair", "witness"), ("one fragment", "fragment"),
                       ("the lease ended", "lease"), ("the campaign", "campaign")]:
        assert [p.split("'")[1] for p in reader_word_problems(text, "p")] == [term], text
    assert reader_word_problems("an item of the questionnaire, a line", "p") == []


def test_article_text_keeps_outputs_and_visible_code_and_drops_folded_code() -> None:
    """Code cells are hidden the way the book hides them: a folded cell's input (its source
    one click away) is left out, a visible cell's input is read, every output is kept."""
    page = ("<html><head><title>unit</title></head><body><nav>campaign</nav><main><article>"
            "<p>The finding.</p><div class='cell tag_hide-input docutils container'><details>"
            "<summary>Show code cell source</summary><div class='cell_input docutils container'>"
            "<div class='highlight'><pre>run_unit(lease)</pre></div></div></details>"
            "<div class='cell_output'><pre>3 units stored</pre></div></div>"
            "<div class='cell docutils container'><div class='cell_input docutils container'>"
            "<pre>fig = plot_witness(wit)</pre></div><div class='cell_output'><pre>shown</pre>"
            "</div></div><h2>Title<a class='headerlink'>#</a></h2></article>"
            "<footer>next: the campaign</footer></main></body></html>")
    text = article_text(page)
    assert "3 units stored" in text and "The finding." in text and "shown" in text
    assert "plot_witness(wit)" in text  # visible code is what a reader reads
    assert "lease" not in text and "campaign" not in text and "#" not in text


def test_code_names_carry_the_projects_words_and_a_call_is_no_gloss() -> None:
    for text, term in [("from lstpe.campaign import status as cs", "campaign"),
                       ("lstpe.analysis.long_runs.fragment_match per model", "fragment"),
                       ("wit = lmm.weight_decay_witness(S.results_dir)", "witness"),
                       ("wfig = long_runs.plot_witness(wit)", "witness"),
                       ('query("chunk == @lm.chunk.name")', "chunk"),
                       ("six at a time on borrowed GPUs", "borrowed machine"),
                       ("`lstpe campaign run --unit table2/learn-0.3/2235`", "unit"),
                       ("3 machine hours", "machine-hours"),
                       ("lm.chunk.name", "chunk")]:
        found = [p.split("'")[1] for p in reader_word_problems(text, "p")]
        assert term in found, (text, found)
    assert reader_word_problems("the community, its opportunities, a campaigner's units_",
                                "p") == ["p: 'unit' first used without a definition: ...the "
                                         "community, its opportunities, a campaigner's units_... "
                                         "(say it in the reader's words, or gloss it at its "
                                         "first use: 'units (plain words)')"]


def test_a_librarys_method_is_not_the_projects_noun() -> None:
    assert reader_word_problems("q, k, v = self.qkv(h).chunk(3, dim=-1)", "p") == []
