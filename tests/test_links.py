"""Links of the book that can be checked without building it.

* one repository URL: ``_config.yml``, README and every chapter's install cell agree, and
  ``lstpe repo set-url`` moves all of them to a fork at once;
* the bibliography: every entry of ``references.bib`` has a url (but :data:`NO_URL`), the
  paper's two versions have distinct labels (2024a, 2024b), every ``{cite}`` key used in
  the book exists, and the keys other chapters rely on are there;
* cross-references: every relative Markdown link in a chapter points at a file that exists;
* code fences close as written in README and the chapters (text after a closing fence turns
  the rest of the page into code);
* the vendored MathJax is present with its license, and ``_config.yml`` points at it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lstpe import repo

ROOT = Path(__file__).resolve().parents[1]
BIB = ROOT / "references.bib"
REQUIRED_KEYS = {
    "ito2024learning", "ito2024importance", "vaswani2017attention", "shaw2018self",
    "su2024roformer", "su2021sinusoidal", "su2022flaw", "press2022alibi", "kazemnejad2023nope",
    "ruoss2023randomized", "birney2006lst", "schaefer2018parcellation", "yeo2011networks",
    "vanessen2013hcp", "jacot2018ntk", "chizat2019lazy", "canal2024positional",
}
NO_URL = {"canal2024positional"}
"""Entries cited without an address (the post could not be found at a confirmed one)."""
CITE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]+)`")
MD_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _bib_entries() -> dict[str, str]:
    """key -> body of every entry of references.bib."""
    text = BIB.read_text(encoding="utf-8")
    starts = list(re.finditer(r"^@(\w+)\{([^,\s]+),", text, re.M))
    ends = [m.start() for m in starts[1:]] + [len(text)]
    return {m[2]: text[m.end():e] for m, e in zip(starts, ends, strict=True)}


def _markdown_cells() -> dict[str, list[str]]:
    """Page name -> its Markdown texts (the markdown cells of a notebook, or one .md file)."""
    out = {}
    for p in sorted((ROOT / "book").iterdir()):
        if p.suffix == ".md":
            out[p.name] = [p.read_text(encoding="utf-8")]
        elif p.suffix == ".ipynb":
            cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
            out[p.name] = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    return out


def _markdown_sources() -> dict[str, str]:
    """Page name -> its Markdown (the markdown cells of a notebook joined, or a .md file)."""
    return {page: "\n".join(texts) for page, texts in _markdown_cells().items()}


# --------------------------------------------------------------------------- repository URL


def test_repository_url_agrees_everywhere() -> None:
    assert repo.check(ROOT) == []


def test_every_chapter_in_the_toc_has_the_install_cell() -> None:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    for f in files:
        nb = ROOT / f"{f}.ipynb"
        if nb.exists():
            src = repo.install_cell(nb)
            assert src is not None, f"{f}: its first code cell is not the install cell"
            assert repo.configured(ROOT).pip_spec in src


def test_the_install_cell_is_short_and_hidden_on_the_page() -> None:
    """Every chapter's install cell has at most 15 lines and a tag that keeps its code off the
    rendered page (``remove-input`` or ``hide-input``); Jupyter and Colab still run it."""
    for nb in repo.notebooks(ROOT):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        first = next(c for c in cells if c["cell_type"] == "code")
        assert len("".join(first["source"]).splitlines()) <= 15, nb.name
        tags = set(first.get("metadata", {}).get("tags", []))
        assert tags & {"remove-input", "hide-input", "remove-cell"}, nb.name


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_install_cell_clones_the_stored_runs_without_the_resume_state(tmp_path: Path) -> None:
    """Every chapter has the same install cell, and its clone command, run against a local
    repository laid out as this one is (served with partial clone allowed, as GitHub does),
    checks out ``lstpe/`` and ``results/`` but not ``results/long/_resume`` -- nor downloads
    its blob (about half of what a plain shallow clone of the repository brings)."""
    cells = {nb.name: repo.install_cell(nb) for nb in repo.notebooks(ROOT)}
    assert len(set(cells.values())) == 1, "the chapters' install cells differ"
    src = next(iter(cells.values()))
    origin, home = tmp_path / "origin", tmp_path / "home"
    big = bytes(range(256)) * 4096  # 1 MiB that does not compress
    files = {"lstpe/__init__.py": b"", "results/paper/a/manifest.json": b"{}",
             "results/long/table2/x/2235/manifest.json": b"{}",
             "results/long/_resume/mechanism/chunk0.pt": big}
    for rel, data in files.items():
        (origin / rel).parent.mkdir(parents=True, exist_ok=True)
        (origin / rel).write_bytes(data)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"],
                ["config", "uploadpack.allowFilter", "true"]):
        subprocess.run([*git, "-C", str(origin), *cmd], check=True)
    command = repo.clone_command(src, f"file://{origin}", "main", str(home))
    subprocess.run(command, shell=True, check=True, cwd=tmp_path)
    assert (home / "lstpe/__init__.py").exists()
    assert (home / "results/long/table2/x/2235/manifest.json").exists()
    assert not (home / "results/long/_resume").exists()
    objects = sum(f.stat().st_size for f in (home / ".git/objects").rglob("*") if f.is_file())
    assert objects < len(big) / 2, f"the clone downloaded {objects} bytes: the resume state too"


def test_set_url_moves_everything_to_a_fork(tmp_path: Path) -> None:
    for name in ("_config.yml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "book", tmp_path / "book")
    (tmp_path / "lstpe").mkdir()
    before = {p.name: json.loads(p.read_text()) for p in repo.notebooks(tmp_path)}

    assert repo.main(["--root", str(tmp_path), "set-url", "https://github.com/you/fork.git",
                      "--branch", "dev"]) == 0
    assert repo.configured(tmp_path) == repo.Repository("https://github.com/you/fork", "dev")
    assert repo.check(tmp_path) == []
    readme = (tmp_path / "README.md").read_text()
    assert "git+https://github.com/you/fork@dev" in readme
    assert "github.com/lstpe/lstpe" not in readme
    cfg = yaml.safe_load((tmp_path / "_config.yml").read_text())
    assert cfg["repository"] == {**cfg["repository"], "url": "https://github.com/you/fork",
                                 "branch": "dev"}
    for nb in repo.notebooks(tmp_path):
        after = json.loads(nb.read_text())
        old = before[nb.name]
        first = next(i for i, c in enumerate(after["cells"]) if c["cell_type"] == "code")
        assert "git+https://github.com/you/fork@dev" in "".join(after["cells"][first]["source"])
        rest = [c for i, c in enumerate(after["cells"]) if i != first]
        assert rest == [c for i, c in enumerate(old["cells"]) if i != first], nb.name
    # and back: the round trip restores the files exactly
    repo.set_url(tmp_path, "https://github.com/lstpe/lstpe", "main")
    for name in ("_config.yml", "README.md"):
        assert (tmp_path / name).read_text() == (ROOT / name).read_text()


def test_set_url_rejects_what_is_not_a_github_repository(tmp_path: Path) -> None:
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    with pytest.raises(ValueError):
        repo.set_url(tmp_path, "https://example.org/not/github")
    with pytest.raises(ValueError):
        repo.set_url(tmp_path, "https://github.com/you/fork", "bad branch")


# --------------------------------------------------------------------------- bibliography


def test_bibliography_entries_have_urls_and_required_keys() -> None:
    entries = _bib_entries()
    assert REQUIRED_KEYS <= set(entries), f"missing: {sorted(REQUIRED_KEYS - set(entries))}"
    for key, body in entries.items():
        url = re.search(r"^\s*url\s*=\s*\{(https?://[^}\s]+)\}", body, re.M)
        if key in NO_URL:  # cited by title, series and date: no address could be confirmed
            assert not url and re.search(r"^\s*note\s*=.*without an address", body, re.M)
            continue
        assert url, f"{key}: no url"
        assert "duckduckgo" not in url[1] and "google.com/search" not in url[1], \
            f"{key}: a web search is not an address"
        assert re.search(r"^\s*title\s*=", body, re.M), f"{key}: no title"
        assert re.search(r"^\s*year\s*=", body, re.M), f"{key}: no year"


def test_the_two_paper_versions_read_apart() -> None:
    entries = _bib_entries()
    years = {k: re.search(r"^\s*year\s*=\s*\{([^}]+)\}", entries[k], re.M)[1]
             for k in ("ito2024importance", "ito2024learning")}
    assert years == {"ito2024importance": "2024a", "ito2024learning": "2024b"}


def test_references_page_labels_read_like_the_citations() -> None:
    """The References page's labels (lstpe.sphinx_bib) are the in-text author-year form, one
    per entry, with TeX accents decoded and the two paper versions apart."""
    from pybtex.database import parse_file

    from lstpe.sphinx_bib import STYLE, AuthorYearLabelStyle

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "lstpe.sphinx_bib" in cfg["sphinx"]["extra_extensions"]
    assert cfg["sphinx"]["config"]["bibtex_default_style"] == STYLE
    bib = parse_file(str(BIB))
    labels = {k: AuthorYearLabelStyle().format_label(e) for k, e in bib.entries.items()}
    assert len(set(labels.values())) == len(labels), labels
    assert labels["ito2024learning"] == "Ito et al., 2024b"
    assert labels["ito2024importance"] == "Ito et al., 2024a"
    assert labels["ruoss2023randomized"] == "Ruoss et al., 2023"
    assert labels["su2021sinusoidal"] == "Su, 2021"
    assert not any("{" in v or "\\" in v for v in labels.values())
    from pybtex.database import Entry, Person

    accented = Entry("misc", fields={"year": "2023"},
                     persons={"author": [Person("Del{\\'e}tang, Gr{\\'e}goire")]})
    assert AuthorYearLabelStyle().format_label(accented) == "Delétang, 2023"


def test_every_citation_resolves() -> None:
    keys = set(_bib_entries())
    cited = set()
    for page, text in _markdown_sources().items():
        for group in CITE.findall(text):
            for key in (k.strip() for k in group.split(",")):
                assert key in keys, f"{page}: {{cite}} of unknown key {key!r}"
                cited.add(key)
    assert cited, "no page cites anything"


def test_bibliography_page_is_in_the_toc() -> None:
    toc = (ROOT / "_toc.yml").read_text()
    assert "book/references" in toc
    assert "{bibliography}" in (ROOT / "book" / "references.md").read_text()
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["bibtex_bibfiles"] == ["references.bib"]


# --------------------------------------------------------------------------- cross-references


def test_relative_links_between_chapters_resolve() -> None:
    for page, text in _markdown_sources().items():
        for target in MD_LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#")[0]
            assert (ROOT / "book" / path).exists(), f"{page}: broken link to {target}"


def _fence_errors(text: str) -> list[str]:
    """Code fences that do not close as written (CommonMark: a closing fence is the backticks
    alone, so text after it leaves the block open and the rest of the page renders as code)."""
    errors, open_at = [], 0
    for n, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped.startswith("```"):
            continue
        if not open_at:
            open_at = n
        elif stripped.strip("`").strip():
            errors.append(f"line {n}: text after the fence that closes line {open_at}: {line!r}")
        else:
            open_at = 0
    return errors + ([f"line {open_at}: fence never closed"] if open_at else [])


def test_fence_errors_catch_text_after_a_closing_fence() -> None:
    assert _fence_errors("```bash\nls\n```\ntext\n") == []
    assert _fence_errors("```bash\nls\n``` text\n```\n")[0].startswith("line 3:")
    assert _fence_errors("```\nls\n") == ["line 1: fence never closed"]


def test_code_fences_close_in_readme_and_chapters() -> None:
    pages = {"README.md": [(ROOT / "README.md").read_text(encoding="utf-8")],
             **_markdown_cells()}  # one text per notebook cell: a fence cannot span cells
    for page, texts in pages.items():
        for t in texts:
            assert not _fence_errors(t), f"{page}: {_fence_errors(t)}"


# --------------------------------------------------------------------------- offline MathJax


def test_mathjax_is_vendored_and_configured() -> None:
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    static = cfg["html_static_path"]
    js = [ROOT / s / cfg["mathjax_path"] for s in static]
    js = [p for p in js if p.exists()]
    assert js, f"mathjax_path {cfg['mathjax_path']} is in none of {static}"
    assert not cfg["mathjax_path"].startswith("http")
    assert js[0].stat().st_size > 1_000_000
    assert "Apache License" in (js[0].parent / "LICENSE").read_text()
    assert (js[0].parent / "PROVENANCE.md").exists()
    assert cfg["mathjax3_config"]["tex"]["macros"]["R"] == "\\mathbb{R}"
    # Jupyter Book would load every .js under _static/ a second time on every page
    assert not (ROOT / "_static").exists() or not list((ROOT / "_static").rglob("*.js"))


def test_chapter_references_are_links() -> None:
    """Every "chapter N" in prose is a link to that chapter (headings, tables, code aside)."""
    plain = re.compile(r"(?<![\[\w/])[Cc]hapter \d{1,2}(?![\]\d])")
    for page, text in _markdown_sources().items():
        for line in text.split("\n"):
            if line.lstrip().startswith(("#", "|")):
                continue
            prose = "".join(line.split("`")[::2])
            assert not plain.search(prose), f"{page}: plain chapter reference in {line!r}"
