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


def test_article_text_keeps_outputs_and_drops_code_inputs() -> None:
    page = ("<html><head><title>unit</title></head><body><nav>campaign</nav><main><article>"
            "<p>The finding.</p><div class='cell docutils'><div class='cell_input'><pre>"
            "run_unit(lease)</pre></div><div class='cell_output'><pre>3 units stored</pre>"
            "</div></div><h2>Title<a class='headerlink'>#</a></h2></article>"
            "<footer>next: the campaign</footer></main></body></html>")
    text = article_text(page)
    assert "3 units stored" in text and "The finding." in text
    assert "lease" not in text and "campaign" not in text and "#" not in text
