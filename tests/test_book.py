"""The book builds, and every chapter page renders in a real browser with its figures.

Builds the whole book with ``jupyter-book build`` (which executes every chapter at ``preview``
scale) into a temporary folder, then checks each page's HTML (figures, tables, no error output,
no stray outputs such as ``Text(...)`` or local paths) and opens it in headless Chromium
(Debian's ``chromium``, installed here when missing), keeping one screenshot per page under
``artifacts/screenshots/`` (not committed). In the browser, every page must load MathJax from
the book itself (no CDN), typeset all its math without errors, and show no raw TeX outside code.
"""

from __future__ import annotations

import html
import html.parser
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import executed_copy
from tests.reader_words import SkipStack

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _chapters() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = toc.get("chapters", []) + [c for p in toc.get("parts", []) for c in p["chapters"]]
    files = [toc["root"]] + [c["file"] for c in chapters]
    return [f.removesuffix(".ipynb").removesuffix(".md") for f in files]


def _is_notebook(page: str) -> bool:
    return (ROOT / f"{page}.ipynb").exists()


def _markdown(page: str) -> str:
    """The Markdown of a page: a .md file, or the markdown cells of a notebook."""
    if not _is_notebook(page):
        return (ROOT / f"{page}.md").read_text(encoding="utf-8")
    cells = json.loads((ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _chromium() -> str:
    """Path of a Chromium binary, installing Debian's package if there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.fail("headless Chromium is needed: install Debian's 'chromium' package")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env,
                   capture_output=True)
    path = shutil.which("chromium")
    assert path, "apt-get installed chromium but no 'chromium' binary is on PATH"
    return path


class _Page(html.parser.HTMLParser):
    """Counts what a rendered chapter page shows."""

    def __init__(self) -> None:
        super().__init__()
        self.images = 0
        self.tables = 0
        self.stderr_blocks = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        cls = a.get("class") or ""
        if tag == "img" and "logo" not in cls:
            self.images += 1
        if tag == "table":
            self.tables += 1
        if "stderr" in cls.split() or "output_traceback" in cls or "traceback" in cls.split():
            self.stderr_blocks += 1
        if tag == "h1":
            self._in_title = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "h1":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


class _Visible(html.parser.HTMLParser):
    """Text a reader sees outside code (and outside typeset math), plus what a page loads.

    Skips ``head``, ``script``, ``style``, ``pre``, ``code``, ``textarea``, MathJax's typeset
    output (``mjx-container``), highlighted code blocks and print-only elements; collects the
    text of cell outputs separately, and the ``src`` of every script.
    """

    SKIP = {"head", "script", "style", "pre", "code", "textarea", "mjx-container", "svg"}

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.outputs: list[str] = []
        self.scripts: list[str] = []
        self.math = 0
        self.math_errors = 0
        self._skip = SkipStack()
        self._output: tuple[str, int] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"])
        if tag == "mjx-container":
            self.math += 1
        if a.get("data-mml-node") == "merror" or "data-mjx-error" in a:
            self.math_errors += 1
        if self._output and tag == self._output[0]:
            self._output = (tag, self._output[1] + 1)
        elif self._output is None and "cell_output" in cls:
            self._output = (tag, 1)
            self.outputs.append("")
        self._skip.start(tag, tag in self.SKIP or "highlight" in cls or "onlyprint" in cls)

    def handle_endtag(self, tag: str) -> None:
        if self._output and tag == self._output[0]:
            depth = self._output[1] - 1
            self._output = (tag, depth) if depth else None
        self._skip.end(tag)

    def handle_data(self, data: str) -> None:
        if self._output is not None:
            self.outputs[-1] += data
        if not self._skip:
            self.text.append(data)


RAW_TEX = re.compile(r"\\[A-Za-z]+|\$\$|\\[()\[\]]")
"""A TeX control sequence (``\\frac``, ``\\mathbf``, ``\\begin``), ``$$``, ``\\(`` ... in prose."""

STRAY_OUTPUT = [
    (re.compile(r"^\s*Text\(", re.M), "a matplotlib Text(...) repr"),
    (re.compile(r"^\s*\[\]\s*$"), "a bare []"),
    (re.compile(r"^\s*\[<matplotlib\.", re.M), "a list of matplotlib artists"),
    (re.compile(r"<matplotlib\.\w+"), "a matplotlib object repr"),
    (re.compile(r"\bscale=(?:preview|cpu|paper)\b"),
     "a setup line naming the scale (issue 51: a page says which units it read)"),
    (re.compile(r"\|\s*:?(?:-{3,}|\u2014)+:?\s*\|"),  # "---", or the em dash Sphinx makes of it
     "a Markdown table shown as text, not rendered"),
    (re.compile(r"T[Tt]est\w*\("), "a raw scipy test result"),
    (re.compile(re.escape(str(ROOT))), "a local path of the build machine"),
    (re.compile(r"(?<![\w.])/(?:tmp|home|work|root|Users)/"), "a local absolute path"),
]


def _executed_tree(executed: dict[str, Path], into: Path) -> Path | None:
    """A copy of the book's sources under ``into`` whose chapters are the ones nbmake executed
    in this run (``executed_chapters``), configured not to execute them again; None when
    nbmake did not execute every chapter of the book (the build then executes them itself)."""
    names = [f"{c.split('/', 1)[1]}.ipynb" for c in _chapters() if _is_notebook(c)]
    if not executed or any(n not in executed for n in names):
        return None
    copied = ("_config.yml", "_toc.yml", "references.bib", "_vendor", "_css", "book")
    for part in copied:
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, into / part)
    for other in ROOT.iterdir():  # what pages link to (results/, README.md, ...): as it is
        if other.name not in copied and not other.name.startswith((".", "_build")):
            (into / other.name).symlink_to(other)
    for n in names:
        shutil.copy2(executed_copy(executed, n), into / "book" / n)
    cfg = yaml.safe_load((into / "_config.yml").read_text())
    cfg["execute"]["execute_notebooks"] = "off"
    (into / "_config.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return into


@pytest.fixture(scope="module")
def built_book(tmp_path_factory: pytest.TempPathFactory,
               executed_chapters: dict[str, Path]) -> Path:
    """The book built once: from the chapters nbmake executed in this run when it executed
    all of them (each chapter runs once per test run), else executing them here."""
    out = tmp_path_factory.mktemp("book")
    source = _executed_tree(executed_chapters, tmp_path_factory.mktemp("source")) or ROOT
    proc = subprocess.run(
        [shutil.which("jupyter-book") or "jupyter-book", "build", str(source),
         "--path-output", str(out), "--warningiserror", "--keep-going"],
        capture_output=True, text=True, cwd=source,
    )
    log = proc.stdout[-6000:] + proc.stderr[-6000:]
    assert proc.returncode == 0, f"jupyter-book build failed:\n{log}"
    return out / "_build" / "html"


def test_every_chapter_page_has_its_content(built_book: Path) -> None:
    for chapter in _chapters():
        page = built_book / f"{chapter}.html"
        assert page.exists(), f"{page} was not built"
        p = _Page()
        p.feed(page.read_text(encoding="utf-8"))
        assert p.title.strip(), f"{chapter}: no <h1> title"
        assert p.stderr_blocks == 0, f"{chapter}: the page shows error output"
        assert "Traceback (most recent call last)" not in page.read_text(encoding="utf-8")
        if _is_notebook(chapter):
            assert p.images >= 1, f"{chapter}: no figure on the page"


def test_references_page_is_labelled_by_author_and_year(built_book: Path) -> None:
    """lstpe.sphinx_bib: the list reads like the citations, not pybtex's alpha labels."""
    page = (built_book / "book" / "references.html").read_text(encoding="utf-8")
    assert "Ito et al., 2024b" in page and "Ito et al., 2024a" in page
    assert "ICK+" not in page and "Deletang" not in page


def test_no_stray_outputs(built_book: Path) -> None:
    """Cells show results, not reprs of return values, nor paths of the machine that built them."""
    problems = []
    for chapter in _chapters():
        v = _Visible()
        v.feed((built_book / f"{chapter}.html").read_text(encoding="utf-8"))
        for out in v.outputs:
            for pattern, what in STRAY_OUTPUT:
                if pattern.search(out):
                    problems.append(f"{chapter}: {what}: {out.strip()[:160]!r}")
    assert not problems, "\n".join(problems)


LOCAL_NOTEBOOK_LINK = re.compile(r'href="(?![a-z]+:)(?![./]*_sources/)([^"#]*\.ipynb)[#"]')
"""A relative link to a notebook file (the site has none; Sphinx turns a chapter's links into
``.html``, which a displayed output that is not parsed as MyST does not get)."""


def test_links_between_pages_point_at_pages(built_book: Path) -> None:
    bad = [f"{chapter}: {m}" for chapter in _chapters()
           for m in LOCAL_NOTEBOOK_LINK.findall((built_book / f"{chapter}.html").read_text())]
    assert not bad, "links to .ipynb files on the site:\n" + "\n".join(bad)


def test_pages_render_in_headless_chromium(built_book: Path) -> None:
    chromium = _chromium()
    shots = ROOT / "artifacts" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars"]
    problems = []
    for chapter in _chapters():
        url = (built_book / f"{chapter}.html").as_uri()
        # virtual time lets MathJax finish typesetting before the DOM is dumped
        dom = subprocess.run([chromium, *flags, "--virtual-time-budget=20000", "--dump-dom", url],
                             capture_output=True, text=True, timeout=120)
        assert dom.returncode == 0, f"chromium could not open {url}: {dom.stderr[-2000:]}"
        p = _Page()
        p.feed(dom.stdout)
        assert p.title.strip(), f"{chapter}: the browser shows no title"
        problems += _math_problems(chapter, dom.stdout)
        png = shots / (chapter.replace("/", "_") + ".png")
        subprocess.run([chromium, *flags, "--virtual-time-budget=20000", "--window-size=1280,2400",
                        f"--screenshot={png}", url],
                       capture_output=True, timeout=120, check=True)
        assert png.exists() and png.stat().st_size > 10_000, f"{chapter}: empty screenshot"
    assert not problems, "\n".join(problems)


def _math_problems(chapter: str, dom: str) -> list[str]:
    """What is wrong with the math of one page as the browser shows it."""
    v = _Visible()
    v.feed(dom)
    out = []
    # (no page loads the ipywidgets embed manager: _config.yml sets nb_ipywidgets_js to {},
    # and test_no_page_references_a_cdn checks every load)
    mathjax = [s for s in v.scripts if "mathjax" in s.lower() or "polyfill" in s.lower()]
    remote = [s for s in mathjax if re.match(r"(https?:)?//", s)]
    if remote:
        out.append(f"{chapter}: loads math scripts from the network: {remote}")
    if not any("_static/mathjax/" in s for s in mathjax):
        out.append(f"{chapter}: does not load the vendored MathJax (scripts: {mathjax})")
    if "$" in _markdown(chapter) and v.math == 0:
        out.append(f"{chapter}: has math in its source but none was typeset")
    if v.math_errors:
        out.append(f"{chapter}: {v.math_errors} TeX error(s) in the typeset math")
    text = " ".join(v.text)
    for m in RAW_TEX.finditer(text):
        out.append(f"{chapter}: raw TeX visible: {text[max(0, m.start() - 60):m.end() + 40]!r}")
    return out


# --------------------------------------------------------------------------- widths and CDNs

LAYOUT_JS = r"""
(function () {
  function scrolls(el) {
    const o = getComputedStyle(el).overflowX;
    return o === "auto" || o === "scroll";
  }
  function name(el) {
    const cls = typeof el.className === "string" ? el.className.split(" ")[0] : "";
    const c = cls ? "." + cls : "";
    return el.tagName.toLowerCase() + c;
  }
  function measure() {
    const col = document.querySelector("article.bd-article") || document.querySelector("main");
    const c = col.getBoundingClientRect();
    const out = {width: window.innerWidth, column: [c.left, c.right], wide: [], unwrapped: [],
                 clipped: [], remote: []};
    for (const el of col.querySelectorAll("*")) {
      const r = el.getBoundingClientRect();
      if (!r.width || !r.height) continue;
      let box = el.parentElement, inBox = false;
      while (box && box !== col) {
        if (scrolls(box)) { inBox = true; break; }
        box = box.parentElement;
      }
      const text = (el.textContent || "").trim().slice(0, 70);
      if (!inBox && (r.right > c.right + 1 || r.left < c.left - 1))
        out.wide.push([name(el), Math.round(r.left), Math.round(r.right), text]);
      const o = getComputedStyle(el).overflowX;
      // MathJax's assistive MathML is hidden on purpose; inline math overhangs a few px
      const hidden = el.tagName.toLowerCase() === "mjx-assistive-mml";
      if (!hidden && (o === "hidden" || o === "clip") && el.scrollWidth > el.clientWidth + 8)
        out.clipped.push([name(el), el.scrollWidth, el.clientWidth, text]);
      const printed = el.matches(".output.stream pre, .output.stderr pre");
      if (printed && el.scrollWidth > el.clientWidth + 1)
        out.unwrapped.push([name(el), el.scrollWidth, el.clientWidth, text]);
    }
    // issue 51: the page's height, where its finding starts (its first Markdown output) and
    // the code inputs a reader sees above it, and what must fit the column at any width
    out.height = document.documentElement.scrollHeight;
    // a cell's Markdown output is parsed into the page: its paragraphs sit in .cell_output
    const finding = col.querySelector(".cell_output > p, .cell_output .text_markdown");
    out.finding = finding ? finding.getBoundingClientRect().top + window.scrollY : null;
    // a folded input sits in a closed <details> (Chromium still lays it out: ask the details)
    out.inputs_before = [...col.querySelectorAll(".cell_input")].filter(i => {
      const r = i.getBoundingClientRect();
      return r.height > 0 && !i.closest("details:not([open])") && finding
        && r.top < finding.getBoundingClientRect().top;
    }).length;
    // a row's name (code in a table's first column) broken across lines reads as letters
    out.broken = [...col.querySelectorAll("td:first-child code, th:first-child code")]
      .filter(e => new Set([...e.getClientRects()].map(r => Math.round(r.top))).size > 1)
      .map(e => e.textContent.trim().slice(0, 40));
    const past = el => el.getBoundingClientRect().right > c.right + 1;
    out.key_wide = [...col.querySelectorAll("table.lstpe-key")].filter(past)
      .map(t => t.textContent.trim().slice(0, 60));
    out.fig_wide = [...col.querySelectorAll(".cell_output img")].filter(past)
      .map(i => i.getAttribute("alt") || i.src.slice(-40));
    for (const e of performance.getEntriesByType("resource"))
      if (!/^(file|data|blob|about):/.test(e.name)) out.remote.push(e.name);
    parent.postMessage(JSON.stringify(out), "*");
  }
  window.addEventListener("load", () => setTimeout(measure, 1000));
})();
"""
"""Injected into a copy of each page: measures, once the page (and MathJax) has loaded, every
element of the article column and every resource the page fetched, and posts the result to
the frame around it."""

FRAME = """<!DOCTYPE html><html><body style="margin:0"><pre id="lstpe-layout"></pre>
<iframe src="{src}" style="border:0;width:{w}px;height:2000px"></iframe>
<script>window.addEventListener("message", e => {{
  document.getElementById("lstpe-layout").textContent = e.data; }});</script></body></html>"""
"""A page at a given width: an iframe of that width (headless Chromium's window is at least
500 px wide; an iframe is the viewport of the page in it, media queries included)."""

CDN = re.compile(r"""<(?:script|link|img|iframe|source|embed|video|audio)\b[^>]*?\b(?:src|href)"""
                 r"""\s*=\s*["'](?:https?:)?//[^"']+|data-[\w-]*cdn[\w-]*\s*=\s*["'][^"']+"""
                 r"""|url\(\s*["']?(?:https?:)?//[^)]+""")
"""What would fetch from another host: a script, style sheet, image, frame or media element
with an absolute URL, a widget manager's CDN base (``data-jupyter-widgets-cdn``), a CSS
``url(//...)``. Links a reader follows (``<a href>``) are not loads."""

WIDTHS = (420, 1280)
"""The two widths a reader uses: a phone in portrait, a laptop."""


_MEASURED: dict[tuple[str, str, int], dict] = {}


def layout_problems(chromium: str, html_dir: Path, chapter: str, width: int) -> list[str]:
    """What is too wide on one page at ``width`` px, as headless Chromium lays it out.

    Measures, in the article column (``article.bd-article``): every element (a table, a
    figure, a line of output) whose box extends past the column's left or right edge and is
    not inside a box that scrolls horizontally (``overflow-x: auto | scroll``); every element
    that hides content it cuts off (``overflow-x: hidden | clip`` with a scroll width above
    its width); every printed line (stream or stderr output) that does not wrap (it would
    need a scroll bar); every row name (code in a table's first column) broken across lines;
    and every resource the page fetched from anything but the built book
    (``file:``/``data:`` URLs). MathJax's screen-reader copy (``mjx-assistive-mml``, hidden
    by design) and overhangs of up to 8 px (glyphs of inline math) are not clipping.
    """
    page = html_dir / f"{chapter}.html"
    probe = page.with_name(page.stem + ".__layout__.html")
    frame = page.with_name(page.stem + f".__frame{width}__.html")
    probe.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", f"<script>{LAYOUT_JS}</script></body>"), encoding="utf-8")
    frame.write_text(FRAME.format(src=probe.name, w=width), encoding="utf-8")
    try:
        dom = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--allow-file-access-from-files", "--virtual-time-budget=30000",
             "--window-size=1400,2000", "--dump-dom", frame.resolve().as_uri()],
            capture_output=True, text=True, timeout=180)
    finally:
        probe.unlink()
        frame.unlink()
    m = re.search(r'<pre id="lstpe-layout">(.*?)</pre>', dom.stdout, re.S)
    if not m or not m.group(1).strip():
        return [f"{chapter} @{width}: the page did not report its layout ({dom.stderr[-300:]})"]
    got = json.loads(html.unescape(m.group(1)))
    _MEASURED[(str(html_dir), chapter, width)] = got
    where = f"{chapter} @{width}px"
    out = [f"{where}: wider than the column {got['column']}: {w}" for w in got["wide"]]
    out += [f"{where}: content clipped: {c}" for c in got["clipped"]]
    out += [f"{where}: a printed line does not wrap: {u}" for u in got["unwrapped"]]
    out += [f"{where}: fetched from the network: {r}" for r in got["remote"]]
    out += [f"{where}: a row's name broken across lines: {b}" for b in got.get("broken", [])]
    return out


def cdn_references(html_dir: Path) -> list[str]:
    """Every attribute of the built HTML that would fetch from another host (:data:`CDN`)."""
    out = []
    for page in sorted(html_dir.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        out += [f"{page.relative_to(html_dir)}: {m.group(0)[:120]}" for m in CDN.finditer(text)]
    return out


def test_no_page_references_a_cdn(built_book: Path) -> None:
    """Offline: no page of the built book names a script, style, font or image on another host
    (:data:`CDN`)."""
    assert cdn_references(built_book) == []


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_fit_their_column(built_book: Path, width: int) -> None:
    """At 420 px and at 1280 px, on every chapter page: no table, figure or line is wider than
    the article column unless it scrolls in its own box, no content is clipped, printed lines
    wrap, and nothing is fetched from the network (:func:`layout_problems` says how)."""
    chromium = _chromium()
    problems = []
    for chapter in _chapters():
        problems += layout_problems(chromium, built_book, chapter, width)
    assert not problems, "\n".join(problems[:60])



RESULTS_PAGES = ("book/intro", "book/05_training", "book/06_sigma_sweep",
                 "book/07_inside_the_models", "book/07b_alignment", "book/08_robustness",
                 "book/09_models_and_humans", "book/10_brain", "book/11_reproduction_report")
"""The pages that open with their finding (issue 51)."""
FIRST_SCREEN = 800
"""The height in px of a laptop's first screen at a 1280-px window (1280 x 800)."""
MAX_HEIGHT = 13_500
"""A long page's height at 1280 px, folded sections folded. Issue 51 asked for about 10k px
and folded figures to get there; issue 65 puts every figure a takeaway describes back in
view, and the pages measured 16.8k (chapter 7), 13.0k (10) and 12.1k (11) px on the first
build that did. Chapter 7 is now two pages (7: what a learnable PE learns; 7b: the alignment
measures), each estimated at about 10k px; the bound is the tallest remaining page,
chapter 10's 13.0k, rounded up to the next 500, and keeps every long page from growing."""
LONG_PAGES = ("book/07_inside_the_models", "book/07b_alignment", "book/10_brain",
              "book/11_reproduction_report")
TALLER: dict[str, int] = {"book/07b_alignment": 15_000, "book/10_brain": 15_000,
                          "book/11_reproduction_report": 26_000}
"""Long pages allowed past :data:`MAX_HEIGHT`, each for the table issue 76 added: the paper's
sentences quoted verbatim, one row each, beside the paper's number and ours (7b: its 5 rows,
13.5k px with them; chapter 10: Fig. 4C,D's row, 13 973 px with it; chapter 11: the whole
scorecard, 26 rows, 25.6k px with them, the grid score named against the 2-D rows and the
pairs of one model trained twice on two machines), each bound
rounded up to the next 500 or 1000 so that the page still cannot grow further."""
"""The pages issue 51 found too long (15.9k, 16.9k and 13.5k px at 1280 px), and chapter 7's
second half."""


def measured(chromium: str, html_dir: Path, chapter: str, width: int) -> dict:
    """What :data:`LAYOUT_JS` reported for one page at ``width`` (measured once)."""
    key = (str(html_dir), chapter, width)
    if key not in _MEASURED:
        layout_problems(chromium, html_dir, chapter, width)
    return _MEASURED.get(key, {})


def reader_problems(got: dict, chapter: str, width: int) -> list[str]:
    """What a results page's measurement says against issue 51: at 1280 px the finding starts
    inside the first screen (at every width with no code input shown above it), and a page of
    :data:`LONG_PAGES` is at most :data:`MAX_HEIGHT` tall; at every width no key table column
    or figure is wider than the column."""
    out = []
    if width == 1280:
        if got.get("finding") is None:
            out.append(f"{chapter}: no finding (a Markdown output) on the page")
        elif got["finding"] + 24 > FIRST_SCREEN:
            out.append(f"{chapter}: the finding starts at {got['finding']:.0f} px, below the "
                       f"first screen ({FIRST_SCREEN} px)")
        top = TALLER.get(chapter, MAX_HEIGHT)
        if chapter in LONG_PAGES and got.get("height", 0) > top:
            out.append(f"{chapter}: {got['height']} px tall at 1280 px (at most {top})")
    if got.get("inputs_before", 0) > 0:  # issue 65: the finding before any code
        out.append(f"{chapter} @{width}: {got['inputs_before']} code input(s) shown above "
                   "the finding")
    out += [f"{chapter} @{width}: a key table wider than the column: {t}"
            for t in got.get("key_wide", [])]
    out += [f"{chapter} @{width}: a figure wider than the column: {f}"
            for f in got.get("fig_wide", [])]
    return out


def test_reader_problems_sees_a_late_finding_and_a_wide_table() -> None:
    got = {"finding": 1400, "inputs_before": 2, "height": 18_200, "key_wide": ["cell n"],
           "fig_wide": []}
    problems = reader_problems(got, LONG_PAGES[0], 1280)
    assert len(problems) == 4 and "below the first screen" in problems[0]
    assert reader_problems({"finding": 500, "inputs_before": 0, "height": 9000}, "x", 1280) == []
    assert len(reader_problems({"finding": 500, "inputs_before": 1}, "x", 420)) == 1


@pytest.mark.parametrize("width", WIDTHS)
def test_results_pages_open_with_their_finding(built_book: Path, width: int) -> None:
    """Issues 51 and 65, measured in headless Chromium: on the intro and chapters 5-11 the
    finding's top is inside the first screen at 1280 px, no code input is shown above it at
    420 or 1280 px, each page is at most :data:`MAX_HEIGHT` px tall there, and at 420 and
    1280 px no key evidence table and no figure is wider than the column."""
    chromium = _chromium()
    problems = []
    for chapter in RESULTS_PAGES:
        problems += reader_problems(measured(chromium, built_book, chapter, width), chapter,
                                    width)
    assert not problems, "\n".join(problems)


PICTURE = re.compile(r"<picture\b[^>]*?\bdata-lstpe-check=\"([^\"]*)\"[^>]*>.*?</picture>", re.S)
"""A figure as :func:`lstpe.rendering.responsive.figure_html` writes it: the laptop's and the
phone's rendering, and the house style's checks of both."""
FIGURE_IMG = re.compile(r"<img\b[^>]*\bsrc=\"(?:data:image/png[^\"]{0,40}|[^\"]*_images/[^\"]+)\"")
"""A figure drawn by a notebook (an inline PNG or one myst-nb wrote to ``_images/``)."""


def figure_problems(page_html: str, chapter: str) -> list[str]:
    """What the figures of one built page break (issue 51, the house style): every figure
    has a phone's rendering, and at both widths none shows text under 9 pt, text over text
    or over another panel, a legend over either, or a marker cut by its axes
    (:func:`lstpe.rendering.responsive.check_figure`, recorded in ``data-lstpe-check``)."""
    out = []
    for i, m in enumerate(PICTURE.finditer(page_html)):
        got = json.loads(html.unescape(m.group(1)))
        alt = re.search(r'alt="([^"]*)"', m.group(0))
        name = f"{chapter} figure {i + 1} ({html.unescape(alt.group(1))[:50] if alt else '?'})"
        for width, result in got.items():
            out += [f"{name} @{width}: {kind}: {items[:3]}"
                    for kind, items in result.items() if items]
    rest = PICTURE.sub("", page_html)
    out += [f"{chapter}: a figure without a phone's rendering: {m.group(0)[:90]}"
            for m in FIGURE_IMG.finditer(rest)]
    return out


def test_figure_problems_reads_the_checks() -> None:
    check = html.escape(json.dumps({"laptop": {"small": [], "overlap": []},
                                    "phone": {"small": [["0.5", 6.1]], "cut": []}}))
    page = (f'<picture class="lstpe-figure" data-lstpe-check="{check}"><source srcset="x">'
            f'<img src="data:image/png;base64,AAAA" alt="curves"></picture>'
            '<img src="../_images/abc.png" alt="">')
    problems = figure_problems(page, "ch")
    assert len(problems) == 2
    assert "@phone: small" in problems[0] and "curves" in problems[0]
    assert "without a phone's rendering" in problems[1]



def test_figures_stay_readable_on_a_laptop_and_a_phone(built_book: Path) -> None:
    """Issue 51: every figure of every chapter shows both renderings, and the house style's
    checks of each pass (:func:`figure_problems`): no text under 9 pt, no text over text, no
    legend over a label or the data, no marker cut by its axes, at 1280 and at 420 px."""
    problems = []
    for chapter in _chapters():
        if _is_notebook(chapter):
            problems += figure_problems(
                (built_book / f"{chapter}.html").read_text(encoding="utf-8"), chapter)
    assert not problems, "\n".join(problems)


READER_PAGES = ("intro", "02_", "03_", "04_", "04b_", "05_", "06_", "07_", "07b_", "08_", "09_",
                "10_")
"""The pages in the reader's words (issue 65, item 5): the intro and chapters 2-10."""


def test_reader_pages_define_the_projects_words(built_book: Path) -> None:
    """No "unit", "campaign", "lease", "chunk", ... on a reader page without a gloss at its first
    use there (tests/reader_words.py); code inputs are skipped, outputs and dropdowns kept."""
    from tests.reader_words import article_text, reader_word_problems
    pages = [c for c in _chapters() if c.removeprefix("book/").startswith(READER_PAGES)]
    assert len(pages) == 12, pages
    problems = [p for c in pages for p in reader_word_problems(
        article_text((built_book / f"{c}.html").read_text(encoding="utf-8")), c)]
    assert not problems, "\n".join(problems)


PAPER_QUOTE = re.compile(r"“([^”]{12,}?)” \((v1|v2), ")
"""A sentence of the paper as every page quotes it: in curly quotes, then its version."""


def _plain(text: str) -> str:
    """Text as the paper's plain copy and the rendered page can both be compared: math
    delimiters, code marks and the copy's Markdown emphasis (``*learn-0.2*``) dropped,
    apostrophes straightened, whitespace collapsed."""
    for mark in ("\\(", "\\)", "$", "`", "*"):
        text = text.replace(mark, "")
    return re.sub(r"\s+", " ", text.replace("’", "'")).strip()


def _paper_text(version: str) -> str:
    lines = (ROOT / "tests" / "data" / "paper" / f"{version}_quoted.txt").read_text(
        encoding="utf-8").splitlines()
    return _plain(" ".join(ln for ln in lines if not ln.startswith("# ")))


def test_every_quoted_sentence_is_the_papers_verbatim(built_book: Path) -> None:
    """Every sentence a page puts in quotation marks and attributes to a version of the paper
    is in that version, word for word (pieces between ellipses in order): no page misquotes
    the paper, and the scorecard quotes at least one sentence per claim."""
    texts = {v: _paper_text(v) for v in ("v1", "v2")}
    found, problems = 0, []
    for chapter in _chapters():
        page = html.unescape(re.sub(r"<[^>]+>", "", (built_book / f"{chapter}.html").read_text(
            encoding="utf-8")))
        for quote, version in PAPER_QUOTE.findall(page):
            found += 1
            pos = 0
            for piece in (_plain(p) for p in quote.split("…") if p.strip()):
                i = texts[version].find(piece, pos)
                if i < 0:
                    problems.append(f"{chapter}: not in {version}: {piece[:100]!r}")
                    break
                pos = i + len(piece)
    assert not problems, "\n".join(problems)
    assert found >= 20, f"only {found} quoted sentences of the paper found on the pages"
