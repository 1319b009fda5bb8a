"""The book as a website (python -m transformer_lib.book html, Jupyter Book 1): built from the committed notebooks,
offline, then read as files and opened page by page in headless Chromium over file://, at a desk's 1280x900 (light
theme) and a phone's 390x844 (dark theme).

The browser tests need Chromium and its driver (Debian: apt-get install chromium chromium-driver); where they are
missing they are skipped, saying so. Screenshots of a desktop and a phone page go to build/screenshots/.
"""
import base64
import functools
import json
import re
import shutil
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

import transformer_lib.book as bk
from transformer_lib.book import site as site_module
from transformer_lib.book.cli import main as book_main
from transformer_lib.book.site import SiteError, assemble, build_site, refused, rewrite_links, svg_loads
from transformer_lib.book.site_chapters import _plot_width

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "build" / "screenshots"
# each query, the chapter that teaches it, and the section its first result opens (the heading's anchor)
SEARCHES = {"RoPE": ("11_modern", "rotary-position-embeddings-rope"), "beam search": ("07_decoding", "beam-search"),
            "label smoothing": ("05_training", "label-smoothing"), "BPE": ("06_data", "subwords-byte-pair-encoding-bpe"),
            "key/value cache": ("07_decoding", "a-key-value-kv-cache"), "KV cache": ("07_decoding", "a-key-value-kv-cache"),
            "warmup": ("05_training", "the-learning-rate-schedule-warmup-then-decay"),
            "layer norm": ("03_blocks", "layer-normalization"), "int8": ("09_fast", "deeper-eight-bit-weights-int8"),
            "positional encoding": ("01_embeddings", "sinusoidal-positional-encoding")}
# how often a wait asks the browser again (selenium's default, half a second, is mostly time spent idle)
POLL = 0.05
PLACEHOLDER_ALT = re.compile(r"^(?:|image|figure|picture|plot|chart|output|png|no description.*|[\w./-]+\.(?:png|svg|jpe?g))$",
                             re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    book = bk.load_book(ROOT)
    pages = build_site(book, out, log=lambda *_: None)
    return book, out, pages


@functools.cache
def _parsed(path: Path) -> BeautifulSoup:
    """A page of the module's site (the `site` fixture, built once), parsed once for every test that reads it: the
    tests only read the tree, never change it."""
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def _soup(out, page):
    return _parsed(out / page.html)


def _all_html(out):
    return sorted(p for p in out.rglob("*.html") if "_static" not in p.parts)


# ---- the build, read as files


def test_the_docs_come_in_the_order_readme_lists_them(site):
    """The sidebar's Reference part follows README's list of docs (the guide to commands first), not file names."""
    _, out, pages = site
    docs = [p.source for p in pages if p.kind == "doc"]
    listed = re.findall(r"^- \[`?(docs/[\w.-]+\.md)`?\]", (ROOT / "README.md").read_text(encoding="utf-8"), re.M)
    assert docs[:len(listed)] == listed and docs[0] == "docs/commands.md"
    home = next(p for p in pages if p.kind == "home")
    nav = _soup(out, home).select("nav.bd-links a")
    shown = [a.get("href", "").split("#")[0].rsplit("/", 1)[-1] for a in nav]
    assert [d for d in shown if d.endswith(".html") and f"docs/{d[:-5]}.md" in docs] == \
        [Path(d).with_suffix(".html").name for d in docs]


def test_every_chapter_solution_and_doc_is_a_page_in_reading_order(site):
    book, out, pages = site
    chapters = [p for p in pages if p.kind == "chapter"]
    assert [p.source for p in chapters] == [c.file for c in book.chapters]
    assert {p.kind for p in pages} == {"home", "chapter", "solution", "doc", "licence"}
    assert {p.source for p in pages} >= {"docs/references.md", "docs/bad_inputs.md", "solutions/index.md",
                                         "solutions/ch05_training.md", "license.md", "index.md"}
    for i, page in enumerate(chapters):
        soup = _soup(out, page)
        assert soup.title.string.startswith(f"Chapter {i + 1}: ")
        prev = soup.select_one("a.left-prev")
        nxt = soup.select_one("a.right-next")
        if i:
            assert prev["href"] == Path(chapters[i - 1].html).name
        if i + 1 < len(chapters):
            assert nxt["href"] == Path(chapters[i + 1].html).name
        assert "#| export" not in soup.get_text() and "#| default_exp" not in soup.get_text()


def test_what_a_reader_expects_is_on_every_chapter_page(site):
    book, out, pages = site
    for page in (p for p in pages if p.kind == "chapter"):
        text = (out / page.html).read_text(encoding="utf-8")
        soup = _soup(out, page)
        colab = f"https://colab.research.google.com/github/{book.repository}/blob/{book.branch}/{page.source}"
        assert soup.select(f'a[href="{colab}"]'), page.source  # open in Colab
        assert soup.select(f'a[href="https://github.com/{book.repository}"]'), page.source  # the repository
        download = soup.select_one(f'a[href$="_sources/{page.source}"]')
        assert download is not None, page.source  # download the notebook
        assert soup.select("button.theme-switch-button"), page.source  # light and dark
        assert soup.select("#pst-page-toc-nav, nav.bd-toc-nav, div.bd-toc"), page.source  # in-page contents
        assert "copybutton.js" in text  # a copy button on every code cell
        assert "CC BY 4.0" in soup.select_one("footer.bd-footer-content").get_text(), page.source  # the licence
    for page in pages:
        assert "MIT License" in _soup(out, page).select_one("footer.bd-footer-content").get_text(), page.source
        (icon,) = _soup(out, page).select('link[rel="icon"]')  # the book's icon: no request for a missing one
        assert (out / page.html).parent.joinpath(icon["href"]).resolve().is_file(), (page.source, icon["href"])


def test_markdown_outputs_are_tables_not_pipes(site):
    """The chapters print their result tables as Markdown (display(Markdown(...))): each must be a table on the page."""
    book, out, pages = site
    for page in (p for p in pages if p.kind == "chapter"):
        nb = nbformat.read(book.root / page.source, as_version=4)
        printed = sum("\n|" in o.get("data", {}).get("text/markdown", "") for c in nb.cells for o in c.get("outputs", []))
        soup = _soup(out, page)
        rows = [line for line in soup.select_one("article").get_text().splitlines()
                if line.strip().startswith("|") and line.strip().endswith("|")]
        assert rows == [], (page.source, rows[:2])
        assert len(soup.select("div.cell_output table")) >= printed, page.source


def test_the_download_button_gives_the_chapter_as_committed(site):
    book, out, _ = site
    for chapter in book.chapters:
        assert (out / "_sources" / chapter.file).read_bytes() == (book.root / chapter.file).read_bytes()


def test_every_internal_link_and_anchor_leads_somewhere(site):
    _, out, _ = site
    ids = {}

    def ids_of(path):
        if path not in ids:
            ids[path] = {e["id"] for e in _parsed(path).select("[id]")}
        return ids[path]

    followed = 0
    for path in _all_html(out):
        for a in _parsed(path).select("a[href]"):
            href = a["href"]
            if re.match(r"^(?:[a-z][a-z0-9+.-]*:|//)", href, re.I) or href.startswith("javascript"):
                continue
            target, _, anchor = urllib.parse.unquote(href).partition("#")
            file = (path.parent / target).resolve() if target else path
            assert file.is_file() or (file / "index.html").is_file(), (path.relative_to(out), href)
            if anchor and file.suffix == ".html":
                assert anchor in ids_of(file), (path.relative_to(out), href)
            followed += 1
    assert followed > 1000


def _loads_from_outside(text: str) -> list[str]:
    """Addresses outside the site that HTML or CSS would make a browser fetch by itself."""
    remote = r"(?:https?:)?//[^\"'\s>)]+"
    patterns = [rf"<(?:script|img|iframe|source|video|audio|embed|track|input)\b[^>]*?\bsrc\s*=\s*[\"']?({remote})",
                rf"<link\b[^>]*?\bhref\s*=\s*[\"']?({remote})", rf"\bsrcset\s*=\s*[\"'][^\"']*?({remote})",
                rf"\bposter\s*=\s*[\"']?({remote})", rf"<object\b[^>]*?\bdata\s*=\s*[\"']?({remote})",
                rf"<image\b[^>]*?\b(?:xlink:)?href\s*=\s*[\"']?({remote})", rf"url\(\s*[\"']?({remote})",
                rf"@import\s+(?:url\()?\s*[\"']?({remote})"]
    return [m for p in patterns for m in re.findall(p, text, re.I)]


def test_no_page_or_stylesheet_loads_anything_from_outside_the_site(site):
    _, out, _ = site
    files = _all_html(out) + sorted(out.rglob("*.css")) + sorted(out.rglob("*.svg"))
    assert len(files) > 40
    for path in files:
        assert _loads_from_outside(path.read_text(encoding="utf-8", errors="replace")) == [], path.relative_to(out)
    # the check itself sees each way a page can load a resource
    for html in ['<img src="https://x/a.png">', '<img srcset="a.png 1x, //x/b.png 2x">', '<link href="//x/c.css">',
                 '<video poster="http://x/p.jpg">', "<style>@import 'https://x/d.css';</style>",
                 '<div style="background: url(https://x/e.png)">', '<svg><image href="https://x/f.png"/></svg>']:
        assert len(_loads_from_outside(html)) == 1, html


def test_every_figure_has_alt_text_that_says_something(site):
    book, out, pages = site
    figures = 0
    for page in (p for p in pages if p.kind == "chapter"):
        for img in _soup(out, page).select("article img"):
            alt = img.get("alt", "").strip()
            assert not PLACEHOLDER_ALT.match(alt) and len(alt) > 20, (page.source, img.get("src"), alt)
            figures += 1
    plots = diagrams = 0
    for chapter in book.chapters:
        nb = nbformat.read(book.root / chapter.file, as_version=4)
        plots += sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
        diagrams += sum(c.source.count("](attachment:") for c in nb.cells if c.cell_type == "markdown")
    assert figures == plots + diagrams and plots >= 27 and diagrams >= 50


def test_charts_carry_their_spec_and_their_picture(site):
    _, out, pages = site
    charts = {}
    for page in (p for p in pages if p.kind == "chapter"):
        for chart in _soup(out, page).select("div.tb-chart"):
            script = (out / "_static" / "charts" / f"{chart['data-chart']}.js").read_text(encoding="utf-8")
            spec = json.loads(script.splitlines()[1].split(" = ", 1)[1].rstrip(";"))
            assert "$schema" in spec and chart.select_one("img.tb-figure")["alt"]
            charts[page.source] = charts.get(page.source, 0) + 1
    assert charts == {"notebooks/01_embeddings.ipynb": 1, "notebooks/05_training.ipynb": 1,
                      "notebooks/07_decoding.ipynb": 2}
    bundle = (out / "_static" / "vega.js").read_text(encoding="utf-8")
    assert "window.vegaEmbed" in bundle and bundle.startswith("(function () {")


def test_pages_share_their_styles_and_scripts_and_stay_light(site):
    _, out, _ = site
    for path in _all_html(out):
        text = path.read_text(encoding="utf-8")
        soup = _parsed(path)
        assert len(text.encode()) <= 600_000, path.relative_to(out)
        assert sum(len(s.get_text()) for s in soup.select("style")) < 2_000, path.relative_to(out)
        assert any("_static/" in link["href"] for link in soup.select("link[rel=stylesheet]"))


def test_the_chart_library_loads_only_where_a_chart_is_and_no_unused_mathjax_is_published(site):
    """vega.js (about 0.9 MB) is in no page's scripts: site.js loads it on a page with a chart (the browser test sees
    every chart drawn). MathJax's bundles that no page loads are left out of the site; the one pages load is there."""
    _, out, _ = site
    for path in _all_html(out):
        scripts = [s["src"] for s in _parsed(path).select("script[src]")]
        assert not [s for s in scripts if "vega.js" in s or "scorer.js" in s or "charts/" in s], (path.relative_to(out),
                                                                                               scripts)
    assert "loadVega" in (out / "_static" / "site.js").read_text(encoding="utf-8")
    mathjax = out / "_static" / "mathjax"
    assert (mathjax / "startup.js").is_file() and (mathjax / "output" / "chtml.js").is_file()
    assert not (mathjax / "tex-chtml.js").exists() and not (mathjax / "ui" / "menu.js").exists()
    for folder, names in site_module.UNUSED_ASSETS.items():
        assert not [n for n in names if (out / folder / n).exists()], folder
    assert not list(mathjax.glob("*-full*.js")) and not list(mathjax.glob("tex-svg*.js"))


def test_pages_load_no_fontawesome_js_search_tools_only_on_the_search_page_and_icon_fonts_of_the_icons_used(site):
    """The theme's 1.5 MB fontawesome.js is neither loaded nor published (its stylesheet draws the icons from the web
    fonts, cut to the icons the site names); Sphinx's search index loads on the search page alone."""
    _, out, _ = site
    for path in _all_html(out):
        text = path.read_text(encoding="utf-8")
        assert "fontawesome.js" not in text, path.relative_to(out)
        assert ("searchindex.js" in text) == (path.name == "search.html"), path.relative_to(out)
    assert not (out / "_static" / "scripts" / "fontawesome.js").exists()
    fonts = out / "_static" / "vendor" / "fontawesome" / "webfonts"
    assert {p.name for p in fonts.iterdir()} >= {"fa-solid-900.woff2", "fa-brands-400.woff2"}
    assert all(p.stat().st_size < 20_000 for p in fonts.iterdir())  # 118-420 KB each before the cut

    from fontTools.ttLib import TTFont

    shown = set(TTFont(fonts / "fa-brands-400.woff2").getBestCmap()) | set(TTFont(fonts / "fa-solid-900.woff2").getBestCmap())
    assert {0xF09B, 0xF0C9, 0xF002} <= shown  # github, bars (the menu), magnifying-glass (search)
    # the stylesheet's glyph rules: the icons the fonts keep, not the 2,000 of Font Awesome (about 90 KB)
    css = (out / "_static" / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8")
    glyphs = {int(code, 16) for code in re.findall(r'\.fa-[a-z0-9-]+:(?:before|after)\{content:"\\([0-9a-f]{4,5})"\}', css)}
    assert 3 <= len(glyphs) < 60 and glyphs <= shown | {0xF002}, sorted(map(hex, glyphs - shown))
    assert ".fa-magnifying-glass:before" in css and ".fa-bars:before" in css and ".fa-zebra" not in css


def test_every_picture_of_a_page_loads_lazily(site):
    """Every picture of every page (a chapter's diagrams too, which Sphinx writes without it) carries
    loading="lazy": it loads as the reader comes to it, not with the page."""
    _, out, _ = site
    eager = [(path.relative_to(out).as_posix(), img.get("src")) for path in _all_html(out)
             for img in _parsed(path).select("img") if img.get("loading") != "lazy"]
    assert eager == [], eager[:5]


def test_a_worked_solutions_download_button_gives_its_code(site):
    """The page of a worked solution holds the solution file's code, so its download (the page's source) is the code,
    not a directive that includes it."""
    _, out, pages = site
    solutions = [p for p in pages if p.kind == "solution" and not p.source.endswith("index.md")]
    assert len(solutions) >= 11
    for page in solutions:
        code = (ROOT / page.source).with_suffix(".py").read_text(encoding="utf-8").strip()
        downloaded = [p.read_text(encoding="utf-8") for p in (out / "_sources").glob(page.source + "*")]
        assert len(downloaded) == 1 and code in downloaded[0] and "literalinclude" not in downloaded[0], page.source
        assert 'class="highlight-python' in (out / page.html).read_text(encoding="utf-8"), page.html


def test_search_excerpts_served_over_http_show_no_tex(site):
    """Served over http, the search page shows an excerpt of each page found: its text, not its contents list, with
    formulas read as "…", not TeX; a section found shows its own text, from its heading on."""
    from selenium.webdriver.support.ui import WebDriverWait

    _, out, _ = site
    server = _served(out)
    browser = _browser()
    try:
        first, excerpts = {}, []
        for query in ["softmax", *SEARCHES]:
            browser.get(f"http://127.0.0.1:{server.server_port}/search.html?q={urllib.parse.quote(query)}")
            WebDriverWait(browser, 60, poll_frequency=POLL).until(lambda b: b.execute_script(
                "return document.querySelectorAll('#search-results ul.search li').length > 0 && "
                "document.querySelectorAll('#search-results p.context').length >= "
                "Math.min(6, document.querySelectorAll('#search-results ul.search li').length)"))
            shown = [e.text for e in browser.find_elements("css selector", "#search-results p.context")]
            excerpts += shown
            first[query] = (browser.find_element("css selector", "#search-results ul.search li > a").text, shown[0])
    finally:
        browser.quit()
        server.shutdown()
    assert len(excerpts) >= 6
    assert not [e for e in excerpts if re.search(r"\\[(\[]|\\(?:frac|sqrt|mathrm|text|cdot)\b|\$(?![A-Z][A-Z0-9_]*)", e)], excerpts
    # an excerpt is the page's text: never the contents list the theme keeps for print or its sidebar
    assert not [e for e in excerpts if re.match(r"(\.\.\.)?\s*Contents\b", e)], excerpts
    for query, (_, anchor) in SEARCHES.items():  # a section found opens with its heading, then its text
        if anchor:
            title, excerpt = first[query]
            heading = title.split(" > ")[-1]
            assert excerpt.startswith(heading) and len(excerpt) > len(heading) + 40, (query, title, excerpt[:80])


def test_rewrite_links_points_pages_at_pages_and_other_files_at_the_repository():
    pages = {"README.md": "index.md", "docs/running.md": "docs/running.md",
             "notebooks/01_embeddings.ipynb": "notebooks/01_embeddings.ipynb",
             "solutions/ch01_embeddings.py": "solutions/ch01_embeddings.md"}
    repo = "https://github.com/o/r/blob/main"
    text = ("[a](../solutions/ch01_embeddings.py) [b](../README.md#install) [c](../benchmarks/x.py) "
            "[d](https://arxiv.org/abs/1706.03762) [e](#local) ![f](attachment:g.png) [h](running.md#run-budgets)")
    assert rewrite_links(text, "notebooks/01_embeddings.ipynb", pages, repo) == (
        "[a](../solutions/ch01_embeddings.md) [b](../index.md#install) [c](https://github.com/o/r/blob/main/benchmarks/x.py) "
        "[d](https://arxiv.org/abs/1706.03762) [e](#local) ![f](attachment:g.png) "
        "[h](https://github.com/o/r/blob/main/notebooks/running.md#run-budgets)")
    assert rewrite_links("[h](running.md#run-budgets) [i](../README.md)", "docs/commands.md", pages, repo) == \
        "[h](running.md#run-budgets) [i](../index.md)"
    assert rewrite_links("[x](notebooks/01_embeddings.ipynb)", "README.md", pages, repo) == \
        "[x](notebooks/01_embeddings.ipynb)"
    with pytest.raises(SiteError, match="docs/running.md: the link ../../x leads outside the repository"):
        rewrite_links("[x](../../x)", "docs/running.md", pages, repo)


# ---- a small book: what the build refuses, naming what to fix


def _small_book(tmp_path, cells, alt="notebooks/01_x.ipynb:\n  'c1': ['A line plot of the loss falling']\n"):
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"language_info": {"name": "python"}, "kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, tmp_path / "notebooks" / "01_x.ipynb")
    (tmp_path / "book.yml").write_text("title: T\npackage: p\nrepository: o/r\nchapters:\n"
                                       "  - file: notebooks/01_x.ipynb\n    title: X\n    module: x\n", encoding="utf-8")
    (tmp_path / "README.md").write_text("# T\n\nRead [chapter 1](notebooks/01_x.ipynb).\n", encoding="utf-8")
    (tmp_path / "LICENSE").write_text("MIT\n", encoding="utf-8")
    if alt is not None:
        (tmp_path / "notebooks" / "alt_text.yml").write_text(alt, encoding="utf-8")
    return bk.load_book(tmp_path)


def _plot_cell(cell_id="c1"):
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    cell = nbformat.v4.new_code_cell("plot()", outputs=[nbformat.v4.new_output("display_data", {"image/png": png})])
    cell["id"] = cell_id
    return cell


def test_a_small_book_builds_and_a_figure_without_alt_text_is_refused_naming_its_cell(tmp_path):
    book = _small_book(tmp_path, [nbformat.v4.new_markdown_cell("# Chapter 1: X"), _plot_cell()])
    pages = build_site(book, tmp_path / "site", log=lambda *_: None)
    assert [p.kind for p in pages] == ["home", "chapter", "solution", "licence"] and pages[1].figures == 1
    soup = BeautifulSoup((tmp_path / "site" / "notebooks" / "01_x.html").read_text(encoding="utf-8"), "html.parser")
    assert soup.select_one("img.tb-figure")["alt"] == "A line plot of the loss falling"
    (tmp_path / "notebooks" / "alt_text.yml").write_text("notebooks/01_x.ipynb: {}\n", encoding="utf-8")
    with pytest.raises(SiteError, match=r"notebooks/01_x.ipynb cell 1 \(id c1\): figure 1 has no alt text; add it "
                                        r"under notebooks/01_x.ipynb: 'c1' in notebooks/alt_text.yml"):
        build_site(book, tmp_path / "site", log=lambda *_: None)
    (tmp_path / "notebooks" / "alt_text.yml").write_text("notebooks/01_x.ipynb:\n  'c1': [A plot]\n  'gone': [Old]\n",
                                                        encoding="utf-8")
    with pytest.raises(SiteError, match=r"alt_text.yml: notebooks/01_x.ipynb has no cell 'gone'"):
        build_site(book, tmp_path / "site", log=lambda *_: None)


def test_an_image_from_outside_the_site_and_a_broken_link_are_refused(tmp_path):
    book = _small_book(tmp_path, [nbformat.v4.new_markdown_cell("# X\n\n![a cat](https://example.org/cat.png)")],
                       alt="{}\n")
    with pytest.raises(SiteError, match=r"notebooks/01_x.ipynb cell 0 \(id \w+\): an image from https://example.org/cat.png"):
        build_site(book, tmp_path / "site", log=lambda *_: None)
    nb = nbformat.read(tmp_path / "notebooks" / "01_x.ipynb", as_version=4)
    nb.cells[0].source = "# X\n\nSee [the missing section](../README.md#no-such-heading)."
    nbformat.write(nb, tmp_path / "notebooks" / "01_x.ipynb")
    with pytest.raises(SiteError, match=r"Sphinx could not build the site:(.|\n)*no-such-heading"):
        build_site(book, tmp_path / "site", log=lambda *_: None)


def test_a_folder_the_build_did_not_write_and_a_failed_build_leave_what_was_there(tmp_path):
    book = _small_book(tmp_path, [nbformat.v4.new_markdown_cell("# X")], alt="{}\n")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(SiteError, match="is not a site this command built"):
        build_site(book, tmp_path / "mine", log=lambda *_: None)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    build_site(book, tmp_path / "site", log=lambda *_: None)
    before = {p: p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file()}
    (tmp_path / "notebooks" / "01_x.ipynb").write_text('{"cells": [', encoding="utf-8")
    with pytest.raises(SiteError, match="notebooks/01_x.ipynb is not a notebook nbformat can read"):
        build_site(book, tmp_path / "site", log=lambda *_: None)
    assert {p: p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file()} == before


# ---- a hostile copy of the book: nothing written outside the site, nothing loaded from outside, no code rewritten

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _folder(path):
    path.mkdir(parents=True)
    return path


def _md_cell(source, cell_id="m1", attachments=None):
    cell = nbformat.v4.new_markdown_cell(source)
    cell["id"] = cell_id
    if attachments:
        cell["attachments"] = attachments
    return cell


def _files(folder):
    return {p: p.read_bytes() for p in Path(folder).rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", ["/ABS/x.png", "../../x.png", "sub/x.png", "..", "x\\\\y.png"])
def test_an_attachment_named_by_a_path_is_refused_and_nothing_is_written_where_it_points(tmp_path, name):
    outside = tmp_path / "outside"
    name = name.replace("/ABS", str(outside))
    book = _small_book(_folder(tmp_path / "book"), [_md_cell(f"# X\n\n![d](attachment:{name})", "c9",
                                                    {name: {"image/png": PNG}})], alt="{}\n")
    with pytest.raises(SiteError, match=rf"notebooks/01_x.ipynb cell 0 \(id c9\): the attachment {re.escape(repr(name))} "
                                        "is not a plain file name"):
        assemble(book, tmp_path / "src")
    assert not outside.exists() and not (tmp_path / "x.png").exists() and not (tmp_path / "src" / "x.png").exists()


def test_two_chapters_attachments_of_one_name_do_not_collide(tmp_path):
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# X\n\n![a diagram](attachment:d.png)", "c1",
                                                    {"d.png": {"image/png": PNG}})], alt="{}\n")
    nb = nbformat.read(book.root / "notebooks" / "01_x.ipynb", as_version=4)
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"/></svg>'
    nb.cells = [_md_cell("# Y\n\n![another](attachment:d.png)", "c1", {"d.png": {"image/svg+xml": svg}})]
    nbformat.write(nb, book.root / "notebooks" / "02_y.ipynb")
    (book.root / "book.yml").write_text("title: T\npackage: p\nrepository: o/r\nchapters:\n"
                                        "  - {file: notebooks/01_x.ipynb, title: X, module: x}\n"
                                        "  - {file: notebooks/02_y.ipynb, title: Y, module: y}\n", encoding="utf-8")
    assemble(bk.load_book(book.root), tmp_path / "src")
    static = tmp_path / "src" / "_static" / "attachments"
    assert (static / "01_x" / "c1" / "d.png").read_bytes()[:4] == b"\x89PNG"
    assert (static / "02_y" / "c1" / "d.png.png").read_bytes()[:4] == b"\x89PNG"  # an SVG is published drawn
    assert not (static / "02_y" / "c1" / "d.png").exists()
    text = (tmp_path / "src" / "notebooks" / "02_y.ipynb").read_text()
    assert "../_static/attachments/02_y/c1/d.png.png" in text


@pytest.mark.parametrize("cell_id", ["../../up", "a/b", "x y"])
def test_a_cell_id_that_is_not_plain_is_refused_before_it_names_a_file(tmp_path, cell_id):
    book = _small_book(_folder(tmp_path / "book"), [_plot_cell("c1")], alt="{}\n")
    path = book.root / "notebooks" / "01_x.ipynb"  # nbformat.write would refuse the id: the file is written as is
    path.write_text(path.read_text().replace('"id": "c1"', f'"id": {json.dumps(cell_id)}'))
    with pytest.raises(SiteError, match=rf"cell 0 \(id {re.escape(cell_id)}\): the cell id .* is not letters"):
        assemble(book, tmp_path / "src")
    assert not (tmp_path / "up-0.png").exists() and not list(tmp_path.glob("**/up-0.png"))


@pytest.mark.parametrize("file", ["/ABS/x.ipynb", "../x.ipynb", "notebooks/../../x.ipynb", "notebooks\\\\x.ipynb"])
def test_a_chapter_outside_the_book_is_refused_by_load_book(tmp_path, file):
    file = file.replace("/ABS", str(tmp_path))
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# X")], alt="{}\n")
    (book.root / "book.yml").write_text(f"title: T\npackage: p\nrepository: o/r\nchapters:\n"
                                        f"  - {{file: '{file}', title: X, module: x}}\n", encoding="utf-8")
    with pytest.raises(bk.BookError, match=rf"book.yml: chapter 1: file {re.escape(repr(file))} must be a path inside "
                                           "the book"):
        bk.load_book(book.root)


def test_a_chapter_linked_outside_the_book_is_refused_and_the_site_never_writes_into_the_book(tmp_path):
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# X")], alt="{}\n")
    (tmp_path / "elsewhere.ipynb").write_text((book.root / "notebooks" / "01_x.ipynb").read_text())
    (book.root / "notebooks" / "02_y.ipynb").symlink_to(tmp_path / "elsewhere.ipynb")
    (book.root / "book.yml").write_text("title: T\npackage: p\nrepository: o/r\nchapters:\n"
                                        "  - {file: notebooks/02_y.ipynb, title: X, module: x}\n", encoding="utf-8")
    with pytest.raises(bk.BookError, match=r"chapter 1: file 'notebooks/02_y.ipynb' leads outside the book"):
        bk.load_book(book.root)
    # a Book made by hand skips load_book: the site still reads only the book and writes only its own folder
    before = _files(tmp_path)
    for file in (str(book.root / "notebooks" / "01_x.ipynb"), "../elsewhere.ipynb"):
        hostile = bk.Book(book.root, "T", "p", (bk.Chapter(file, "X", "x"),), "o/r")
        with pytest.raises(SiteError):
            assemble(hostile, tmp_path / "src")
        shutil.rmtree(tmp_path / "src", ignore_errors=True)
    with pytest.raises(SiteError, match="holds the book"):
        assemble(book, tmp_path)
    assert _files(tmp_path) == before


def test_every_write_goes_through_one_guard_that_stays_inside_the_folder(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "link").symlink_to(tmp_path)
    for rel in ("../x", "/x", "a/../../x", "link/x", "", "a\\\\b"):
        with pytest.raises(SiteError):
            site_module._write(tmp_path / "site", rel, "x")
    site_module._write(tmp_path / "site", "a/b.txt", "x")
    with pytest.raises(SiteError, match="two files of the site would be written to a/b.txt"):
        site_module._write(tmp_path / "site", "a/b.txt", "y")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    # nothing in the site's modules (site.py, site_safety.py, ...) writes but _write: no write_text, write_bytes,
    # open(..., "w"), copy or nbformat.write
    modules = sorted(Path(site_module.__file__).parent.glob("site*.py"))
    assert len(modules) > 1 and sum("def _write(" in m.read_text(encoding="utf-8") for m in modules) == 1
    for module in modules:
        body = module.read_text(encoding="utf-8")
        if "def _write(" in body:
            body = body[body.index("def _write("):]
            body = body[body.index("\n\ndef "):]
        assert not re.search(r"\.write_(?:text|bytes)\(|shutil\.copy\(|nbformat\.write\(|open\([^)]*[\"'][wa]",
                             body), module.name


HOSTILE_HTML = [
    '<script src="https://x.example/a.js"></script>', '<img srcset="a.png 1x, //x.example/b.png 2x">',
    "<style>.a { background: url(https://x.example/c.png) }</style>", "<style>@import 'https://x.example/d.css';</style>",
    '<p style="background-image: url(//x.example/e.png)">p</p>', '<video poster="http://x.example/f.jpg"></video>',
    '<iframe src="https://x.example/g"></iframe>', '<link rel="stylesheet" href="https://x.example/h.css">',
    '<object data="https://x.example/i.swf"></object>', '<embed src="https://x.example/j">',
    '<picture><source srcset="https://x.example/k.webp"></picture>', '<audio src="https://x.example/l.mp3"></audio>',
    '<svg><image href="https://x.example/m.png"/></svg>', '<svg><image xlink:href="https://x.example/n.png"/></svg>',
    '<svg><use href="https://x.example/o.svg#a"/></svg>', '<img src="&#104;ttps://x.example/p.png">',
    '<img src=" \\\\x.example/q.png">', '<p style="background: u\\72 l(https://x.example/r.png)">p</p>',
    '<img src="https://x.example/s.png" onerror="fetch(1)">', '<base href="https://x.example/">',
    '<meta http-equiv="refresh" content="0; url=https://x.example/">',
]


def _address_in(snippet):
    m = re.search(r"(?:https?:)?//x\.example/[\w./#-]*|\\\\x\.example/\w+\.png|&#104;ttps://x\.example/\w+\.png", snippet)
    return m.group(0).replace("&#104;", "h").replace("\\\\", "//") if m else None


@pytest.mark.parametrize("snippet", HOSTILE_HTML)
def test_raw_html_the_allowlist_would_cut_is_refused_in_cells_pages_and_outputs(tmp_path, snippet):
    """Each form the allowlist cuts is an error naming where it stands and what was cut: the address where an
    attribute carries it, the element where an element is the problem (a <style>, a <base>, a <meta>)."""
    cut = refused(snippet)
    assert cut, snippet
    address = _address_in(snippet)
    named = re.escape(address) if address and any(address in piece for piece in cut) else re.escape(cut[0])
    cases = {
        "cell": lambda root: None,
        "readme": lambda root: (root / "README.md").write_text(f"# T\n\n{snippet}\n", encoding="utf-8"),
        "doc": lambda root: (root / "docs").mkdir() or (root / "docs" / "a.md").write_text(f"# A\n\n{snippet}\n"),
        "output": lambda root: None,
    }
    for where, change in cases.items():
        root = tmp_path / where
        cells = [_md_cell("# X" + (f"\n\n{snippet}\n" if where == "cell" else ""))]
        if where == "output":
            out = nbformat.v4.new_output("display_data", {"text/html": snippet})
            cells.append(nbformat.v4.new_code_cell("show()", outputs=[out], id="o1"))
        book = _small_book(_folder(root), cells, alt="{}\n")
        change(root)
        expected = {"cell": r"notebooks/01_x.ipynb cell 0 \(id m1\): ", "readme": "README.md: ", "doc": "docs/a.md: ",
                    "output": r"notebooks/01_x.ipynb cell 1 \(id o1\): an output \(text/html\) "}[where]
        # the allowlist's message, or, for a picture from outside, the link check's, which comes first
        said = r"(?:raw HTML )?with what the site's allowlist leaves out: .*" if "<img" not in snippet else r".*"
        with pytest.raises(SiteError, match=rf"{expected}{said}{named}"):
            assemble(book, tmp_path / f"src-{where}")


def test_the_allowlist_check_has_no_false_alarm_on_the_committed_book(tmp_path):
    pages = assemble(bk.load_book(ROOT), tmp_path / "src")
    assert len([p for p in pages if p.kind == "chapter"]) == len(bk.load_book(ROOT).chapters)
    for html in ('<img src="data:image/png;base64,AAAA" alt="x">', '<a href="https://example.org">a link</a>',
                 '<table><tr><th scope="col" colspan="2">a &amp; b</th></tr></table>', '<details open><summary>s'
                 '</summary>x</details>', '<a href="?a=1&b=2">escaped on the way out, the same address</a>'):
        assert refused(html) == [], html


def test_an_svg_picture_names_nothing_outside_itself():
    """An SVG is drawn to a PNG, so its scripts never run; what drawing it might read is refused: an address in
    any href or src, a CSS url() or @import, an entity that could spell an address."""
    own = ('<svg xmlns="http://www.w3.org/2000/svg"><defs><linearGradient id="g"/></defs><use href="#a"/>'
           '<rect fill="url(#g)"/><image xlink:href="data:image/png;base64,AAAA"/></svg>')
    assert svg_loads(own) == []
    for svg, found in (('<svg><image href="https://x.example/m.png"/></svg>', "https://x.example/m.png"),
                       ("<svg><image a:href = 'file:///etc/x.png'/></svg>", "file:///etc/x.png"),
                       ('<svg><image href="&#102;ile:///x.png"/></svg>', "file:///x.png"),
                       ('<svg><image href="pic.png"/></svg>', "pic.png"),
                       ('<svg><rect style="fill: url(https://x.example/p)"/></svg>', "url(https://x.example/p)"),
                       ("<svg><style>@import 'x.css';</style></svg>", "@import"),
                       ('<!DOCTYPE svg [<!ENTITY a "file:///x.png">]><svg><image href="&a;"/></svg>', "<!ENTITY")):
        assert found in svg_loads(svg), svg


@pytest.mark.parametrize("text, message", [
    ('<a href="../../../outside">out</a>', "the link ../../../outside leads outside the repository"),
    ("[x](path:../../../etc/passwd)", "only http, https and mailto links"),
    ("[x](project:../../../etc/passwd)", "only http, https and mailto links"),
    ('<a href="javascript:alert(1)">x</a>', "javascript:alert"),
    ("```{include} /etc/passwd\n```", r"the MyST directive \{include\}"),
    (":::{raw} html\n<script>x()</script>\n:::", r"the MyST directive \{raw\}"),
    ("{download}`../../etc/passwd`", r"the MyST role \{download\}"),
    ("![missing](../docs/figures/none.png)", "the image ../docs/figures/none.png: docs/figures/none.png is missing"),
    ("![up](../../x.png)", "leads outside the repository"),
    ("![r][ref]\n\n[ref]: https://x.example/a.png", "an image from https://x.example/a.png"),
])
def test_markdown_that_links_or_loads_outside_or_runs_a_directive_is_refused(tmp_path, text, message):
    book = _small_book(_folder(tmp_path / "book"), [_md_cell(f"# X\n\n{text}\n")], alt="{}\n")
    with pytest.raises(SiteError, match=rf"notebooks/01_x.ipynb(?: cell 0 \(id m1\))?: .*{message}"):
        assemble(book, tmp_path / "src")


def test_front_matter_and_notebook_metadata_cannot_set_myst_options(tmp_path):
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# X\n\n{{ cycler.__init__.__globals__ }}")], alt="{}\n")
    nb = nbformat.read(book.root / "notebooks" / "01_x.ipynb", as_version=4)
    nb.metadata["myst"] = {"enable_extensions": ["substitution"]}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb.cells[0].metadata["mystnb"] = {"render_markdown_format": "myst"}
    nbformat.write(nb, book.root / "notebooks" / "01_x.ipynb")
    assemble(book, tmp_path / "src")
    page = nbformat.read(tmp_path / "src" / "notebooks" / "01_x.ipynb", as_version=4)
    assert set(page.metadata) <= {"kernelspec", "language_info"} and page.cells[0].metadata == {}
    config = (tmp_path / "src" / "_config.yml").read_text()
    assert "substitution" not in config and "nb_ipywidgets_js: {}" in config  # {{ }} is text, not Jinja
    (book.root / "README.md").write_text("---\nmyst:\n  enable_extensions: [substitution]\n---\n# T\n")
    with pytest.raises(SiteError, match=r"README.md: front matter"):
        assemble(book, tmp_path / "src2")


@pytest.mark.parametrize("output, message", [
    ({"application/javascript": "fetch('https://x.example')"}, "an output of type application/javascript"),
    ({"application/vnd.jupyter.widget-view+json": {"model_id": "a"}}, "application/vnd.jupyter.widget-view"),
    ({"text/markdown": "[secret](../../../../../../etc/passwd)"}, "leads outside the repository"),
    ({"text/markdown": "![r](https://x.example/a.png)"}, "an image from https://x.example/a.png"),
    ({"text/html": '<a href="../../../../etc/passwd">x</a>'}, "links to ../../../../etc/passwd"),
    ({"image/svg+xml": '<svg><image href="https://x.example/a.png"/></svg>'}, "https://x.example/a.png"),
])
def test_outputs_that_run_code_load_or_link_outside_are_refused(tmp_path, output, message):
    cell = nbformat.v4.new_code_cell("show()", outputs=[nbformat.v4.new_output("display_data", output)], id="o1")
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# X"), cell], alt="{}\n")
    with pytest.raises(SiteError, match=rf"notebooks/01_x.ipynb cell 1 \(id o1\): .*{re.escape(message)}"):
        assemble(book, tmp_path / "src")


def test_a_relative_image_is_copied_into_the_site_and_a_missing_one_is_refused(tmp_path):
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# X\n\n![d](../docs/figures/d.svg)")], alt="{}\n")
    (book.root / "docs" / "figures").mkdir(parents=True)
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"/></svg>'
    (book.root / "docs" / "figures" / "d.svg").write_text(svg)
    (book.root / "docs" / "a.md").write_text("# A\n\n![d](figures/d.svg) ![again](/docs/figures/d.svg)\n")
    (book.root / "README.md").write_text("# T\n\n![d](docs/figures/d.svg)\n")
    assemble(book, tmp_path / "src")
    src = tmp_path / "src"
    # an SVG is published as the PNG it draws: a file a browser opens as a picture only
    assert (src / "_static" / "repository" / "docs" / "figures" / "d.svg.png").read_bytes()[:4] == b"\x89PNG"
    assert not (src / "_static" / "repository" / "docs" / "figures" / "d.svg").exists()
    assert "![d](_static/repository/docs/figures/d.svg.png)" in (src / "index.md").read_text()
    assert "![again](../_static/repository/docs/figures/d.svg.png)" in (src / "docs" / "a.md").read_text()
    assert "](../_static/repository/docs/figures/d.svg.png)" in (src / "notebooks" / "01_x.ipynb").read_text()
    assert "github.com" not in (src / "index.md").read_text()
    (book.root / "README.md").write_text("# T\n\n![d](docs/figures/gone.png)\n")
    with pytest.raises(SiteError, match="README.md: the image docs/figures/gone.png: docs/figures/gone.png is missing"):
        assemble(book, tmp_path / "src2")
    (book.root / "docs" / "figures" / "d.svg").write_text('<svg><image href="https://x.example/a.png"/></svg>')
    (book.root / "README.md").write_text("# T\n\n![d](docs/figures/d.svg)\n")
    with pytest.raises(SiteError, match="README.md: the image docs/figures/d.svg loads https://x.example/a.png"):
        assemble(book, tmp_path / "src3")


def test_a_doc_linked_to_a_file_outside_the_book_is_refused(tmp_path):
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# X")], alt="{}\n")
    (tmp_path / "secret.md").write_text("# not the book's\n")
    (book.root / "docs").mkdir()
    (book.root / "docs" / "leak.md").symlink_to(tmp_path / "secret.md")
    with pytest.raises(SiteError, match=r"docs/leak.md leads outside the book"):
        assemble(book, tmp_path / "src")


def test_links_in_code_stay_as_written_and_a_leading_slash_is_the_repository_root():
    pages = {"docs/x.md": "docs/x.md", "README.md": "index.md"}
    repo = "https://github.com/o/r/blob/main"
    text = ("Call `layers[0](x)` or ``a `b` [c](d)``.\n\n```python\ny = layers[0](x)\n```\n\n~~~\n[e](f)\n~~~\n"
            "[g](/docs/x.md) [h](/benchmarks/b.py) [i](x.md)\n")
    assert rewrite_links(text, "docs/y.md", pages, repo) == text.replace("(/docs/x.md)", "(x.md)").replace(
        "(/benchmarks/b.py)", f"({repo}/benchmarks/b.py)")
    assert rewrite_links('<a href="/README.md#t">h</a>', "docs/y.md", pages, repo) == '<a href="../index.html#t">h</a>'


def test_the_link_pattern_is_linear_on_an_unclosed_bracket():
    """No nested unbounded quantifier, and a target cannot contain the "](" that starts the next try: each character
    is read by one attempt, so a long unclosed "](" run returns at once."""
    for pattern in (site_module._LINK, site_module._BADGE, site_module._DEFINITION, site_module._HTML_HREF):
        assert not re.search(r"\)[*+]|\)\{\d*,\}", pattern.pattern.replace(r"\)", "")), pattern.pattern
    assert r"([^()\[\]\s<>]+)" in site_module._LINK.pattern  # a target stops at the next "](" or "("
    for text in ("](" * 100_000, "[x](" + "a" * 200_000, "![Open In Colab](" * 20_000, "<a href=" * 30_000):
        assert rewrite_links(text, "docs/y.md", {}, "https://github.com/o/r/blob/main") is not None


def test_html_command_answers_one_line_for_a_file_in_the_out_path_and_a_missing_repository(tmp_path, capsys):
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# X")], alt="{}\n")
    (tmp_path / "file").write_text("a file")
    assert book_main(["--root", str(book.root), "html", "--out", str(tmp_path / "file" / "site")]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"error: {tmp_path / 'file' / 'site'}: {tmp_path / 'file'} is a file, not a "
                                        "folder; choose another --out"]
    for out in (book.root, tmp_path):
        assert book_main(["--root", str(book.root), "html", "--out", str(out)]) == 1
        assert "holds the book" in capsys.readouterr().err
    (book.root / "book.yml").write_text("title: T\npackage: p\nchapters:\n"
                                        "  - {file: notebooks/01_x.ipynb, title: X, module: x}\n", encoding="utf-8")
    assert book_main(["--root", str(book.root), "html", "--out", str(tmp_path / "site")]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"error: {book.root / 'book.yml'}: missing key 'repository' (GitHub owner/name), "
                                        "which the website links to; add it"]
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("key, value", [("repository", 'o/r" onmouseover="alert(1)'), ("repository", "o"),
                                        ("branch", "main/../../x"), ("branch", "<b>")])
def test_a_repository_or_branch_that_is_not_a_name_is_refused(tmp_path, key, value):
    book = _small_book(tmp_path, [_md_cell("# X")], alt="{}\n")
    text = (book.root / "book.yml").read_text().replace("repository: o/r\n", "")
    (book.root / "book.yml").write_text(text + f"{key}: '{value}'\n")
    with pytest.raises(bk.BookError, match=rf"book.yml: {key} must be"):
        bk.load_book(book.root)


def test_alt_text_with_quotes_stays_an_attribute(tmp_path):
    alt = """notebooks/01_x.ipynb:\n  'c1': ['A plot" onerror="alert(1)" x="<script>alert(2)</script>']\n"""
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# X"), _plot_cell()], alt=alt)
    assemble(book, tmp_path / "src")
    nb = nbformat.read(tmp_path / "src" / "notebooks" / "01_x.ipynb", as_version=4)
    soup = BeautifulSoup(nb.cells[1].outputs[0]["data"]["text/html"], "html.parser")
    assert soup.select_one("img")["alt"].startswith('A plot" onerror=') and not soup.select("script")
    assert not soup.select_one("img").has_attr("onerror")


def test_a_hostile_title_is_escaped_and_the_site_holds_no_build_state(tmp_path):
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# X"), _plot_cell()])
    title = "<script>alert(1)</script> & co"
    (book.root / "book.yml").write_text((book.root / "book.yml").read_text().replace("title: T", f"title: '{title}'"))
    book = bk.load_book(book.root)
    build_site(book, tmp_path / "site", log=lambda *_: None)
    out = tmp_path / "site"
    for path in _all_html(out):
        text = path.read_text(encoding="utf-8")
        assert "<script>alert(1)" not in text, path.relative_to(out)
        soup = BeautifulSoup(text, "html.parser")
        assert not [s for s in soup.select("script") if "alert(1)" in (s.string or "")], path.relative_to(out)
    sidebar = BeautifulSoup((out / "index.html").read_text(encoding="utf-8"), "html.parser").select_one(".logo__title")
    assert sidebar.get_text() == title
    state = [p.relative_to(out) for p in out.rglob("*") if p.name in (".doctrees", ".buildinfo")
             or p.suffix in (".pickle", ".doctree")]
    assert state == []
    for path in (p for p in out.rglob("*") if p.is_file()):  # nothing names the folder it was built in
        assert b"transformer-book-site." not in path.read_bytes(), path.relative_to(out)


# ---- the build, opened in headless Chromium over file://

# The page's problems as the browser lays it out: elements that hide content wider than themselves (a clipped code
# cell, table or output), the page wider than the window, images not loaded, charts not drawn, math not typeset,
# and text or code below WCAG AA contrast (4.5:1) against the background it is drawn on.
PAGE_PROBLEMS_JS = r"""
const problems = [];
const article = document.querySelector("article") || document.body;
for (const e of article.querySelectorAll("*")) {
  const style = getComputedStyle(e);
  if (["hidden", "clip"].includes(style.overflowX) && e.scrollWidth > e.clientWidth + 2 && e.clientWidth > 0
      && !e.closest("mjx-container")) {
    problems.push("clipped: " + e.tagName.toLowerCase() + "." + e.className + " (" + e.scrollWidth + " > "
                  + e.clientWidth + ")");
  }
}
const width = arguments[0];  // the window's width as the test set it (a phone's layout grows past it if the page is wider)
if (document.documentElement.scrollWidth > width + 1 || window.innerWidth > width + 1) {
  problems.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " > " + width);
}
for (const h of article.querySelectorAll("h2, h3, h4")) {  // every deeper section is folded, under its own heading
  if (/^\s*Deeper:/.test(h.textContent) && !h.closest("details.tb-deeper")) problems.push("not folded: " + h.textContent);
}
for (const img of document.images) {
  if (!(img.complete && img.naturalWidth > 0) && img.loading !== "lazy") problems.push("image not loaded: " + img.src);
}
for (const chart of document.querySelectorAll(".tb-chart")) {
  if (!chart.querySelector(".tb-chart-drawn svg")) problems.push("chart not drawn");
}
for (const math of document.querySelectorAll("span.math, div.math")) {
  if (!math.querySelector("mjx-container")) problems.push("math left as TeX: " + math.textContent.slice(0, 40));
}
function rgb(c) { const m = c.match(/[\d.]+/g).map(Number); return m.length > 3 ? m : m.concat([1]); }
function lum(c) {
  const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
}
function background(e) {
  for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c[3] > 0.5) return c; }
  return [255, 255, 255, 1];
}
const sample = Array.from(article.querySelectorAll("p, li, td, pre span, pre")).filter(
  e => e.offsetParent !== null && e.textContent.trim() && Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim()));
for (const e of sample) {
  const a = lum(rgb(getComputedStyle(e).color)), b = lum(background(e));
  const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  if (ratio < 4.5) problems.push("contrast " + ratio.toFixed(2) + ":1 for " + e.tagName.toLowerCase() + "."
                                 + e.className + " '" + e.textContent.trim().slice(0, 30) + "'");
}
return [problems.slice(0, 12), sample.length];
"""


def _served(out):
    """The built site served over http from a thread, as the README's `python -m http.server` serves it, quietly;
    the caller shuts it down."""
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(out)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("no Chromium and chromedriver on PATH (Debian: apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--no-first-run", "--disable-background-networking", "--disable-component-update"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def _opens(browser, button, shows, page):
    """Clicking the visible `button` shows an element matching `shows` that was not on screen before."""
    from selenium.webdriver.support.ui import WebDriverWait

    on_screen = ("return Array.from(document.querySelectorAll(arguments[0])).some(e => { const r = "
                 "e.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth "
                 "&& r.top >= 0 && r.bottom <= window.innerHeight && getComputedStyle(e).visibility !== 'hidden'; })")
    assert not browser.execute_script(on_screen, shows), (page, shows, "on screen before the click")
    visible = [b for b in browser.find_elements("css selector", button) if b.is_displayed()]
    assert len(visible) == 1, (page, button, len(visible))
    visible[0].click()
    WebDriverWait(browser, 5, poll_frequency=POLL).until(lambda b: b.execute_script(on_screen, shows), (page, button))


def _requests(browser):
    requests, failed = [], []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.loadingFailed" and not message["params"].get("canceled"):
            failed.append(message["params"].get("errorText"))
    return requests, failed


def _weight(requests) -> int:
    """The bytes a page loaded: every file it requested, its pictures and scripts included (pictures below the screen
    and the chart library load later, as the reader comes to them)."""
    files = {Path(urllib.request.url2pathname(urllib.parse.urlparse(u).path)) for u in requests if u.startswith("file:")}
    return sum(f.stat().st_size for f in files if f.is_file())


@pytest.mark.parametrize("width, height, theme", [(1280, 900, "light"), (390, 844, "dark")])
def test_every_page_reads_cleanly_in_headless_chromium(site, width, height, theme):
    """Every page at this width and theme: at most 2 MB as it opens, no console error, no request leaving the site or
    failing, nothing clipped, no sideways scroll, every image loaded, every chart drawn once near, math typeset, text
    and code at AA contrast."""
    from selenium.webdriver.support.ui import WebDriverWait

    _, out, pages = site
    browser = _browser()
    report = {}
    try:
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
        # the theme follows the reader's system until they pick one: this reader's system is set to `theme`
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                {"features": [{"name": "prefers-color-scheme", "value": theme}]})
        browser.get_log("performance")
        browser.get_log("browser")
        for page in pages:
            browser.get((out / page.html).as_uri())
            WebDriverWait(browser, 60, poll_frequency=POLL).until(lambda b: b.execute_script(
                "return document.readyState === 'complete' && "
                "(!window.MathJax || !MathJax.startup || !MathJax.startup.promise || MathJax.typesetDone !== false)"))
            browser.execute_script("return window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
            requests, failed = _requests(browser)
            weight = _weight(requests)  # as the page opens, before the reader scrolls: 2 MB at most
            assert weight <= 2_000_000, (page.html, weight, sorted(requests, key=len)[-3:])
            # every chart is drawn once the reader comes near one, a chart in a folded section too
            browser.execute_script("document.querySelectorAll('details').forEach(d => { d.open = true; });"
                                   "document.querySelectorAll('.tb-chart').forEach(c => c.scrollIntoView());")
            WebDriverWait(browser, 60, poll_frequency=POLL).until(lambda b: b.execute_script(
                "return document.querySelectorAll('.tb-chart').length === "
                "document.querySelectorAll('.tb-chart[data-drawn]').length"))
            browser.execute_script("window.scrollTo(0, 0)")
            assert browser.execute_script("return document.documentElement.dataset.theme") == theme, page.html
            problems, sampled = browser.execute_script(PAGE_PROBLEMS_JS, width)
            assert problems == [], (page.html, width, problems)
            more, failed_later = _requests(browser)
            requests, failed = requests + more, failed + failed_later
            outside = [u for u in requests if urllib.parse.urlparse(u).scheme not in ("file", "data", "blob")]
            assert outside == [] and failed == [], (page.html, outside[:3], failed[:3])
            errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == [], (page.html, errors[:3])
            report[page.html] = {"requests": len(requests), "bytes as it opens": weight,
                                 "text sampled for contrast": sampled}
            if width < 600 and page.kind == "chapter":  # the menu and contents buttons open what they name
                _opens(browser, "button.primary-toggle", "nav.bd-links a", page.html)
                browser.get((out / page.html).as_uri())
                _opens(browser, "button.secondary-toggle", "#pst-page-toc-nav a", page.html)
                again, failed = _requests(browser)  # the reload's, so that the next page's weight is its own
                assert [u for u in again if not u.startswith(("file:", "data:", "blob:"))] == [] and failed == [], page.html
            if (width, page.html) in ((1280, "notebooks/07_decoding.html"), (390, "notebooks/02_attention.html")):
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                browser.save_screenshot(str(SCREENSHOTS / f"{Path(page.html).stem}-{width}px-{theme}.png"))
    finally:
        browser.quit()
    assert len(report) == len(pages)
    (SCREENSHOTS / f"report-{width}px.json").write_text(json.dumps(report, indent=1))


def test_search_over_file_finds_the_chapter_that_teaches_each_query_first(site):
    """Over file://, each query's first result is the chapter that teaches it, and for a query a section is named
    after, a link to that section (not the page's top)."""
    from selenium.webdriver.support.ui import WebDriverWait

    _, out, _ = site
    browser = _browser()
    found = {}
    try:
        for query in SEARCHES:
            browser.get((out / "search.html").as_uri() + "?q=" + urllib.parse.quote(query))
            WebDriverWait(browser, 30, poll_frequency=POLL).until(lambda b: b.execute_script(
                "const s = document.querySelector('#search-results .search-summary');"
                "return !!s && s.textContent.indexOf('found') >= 0"))
            links = [a.get_attribute("href") for a in
                     browser.find_elements("css selector", "#search-results ul.search li > a")]
            found[query] = [urllib.parse.urlparse(link) for link in links[:3]]
            errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == [], (query, errors[:3])  # no request the browser refuses over file://
        # the search box's icon ends before the box's text begins (at a desk and on a phone)
        for width in (1280, 390):
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": width, "height": 844, "deviceScaleFactor": 1, "mobile": width < 600})
            browser.get((out / "search.html").as_uri() + "?q=warmup")
            gap = browser.execute_script(
                "const box = Array.from(document.querySelectorAll('form.bd-search input')).find(i => i.offsetParent);"
                "const icon = box.parentElement.querySelector('i.fa-magnifying-glass').getBoundingClientRect();"
                "const style = getComputedStyle(box);"
                "return box.getBoundingClientRect().left + parseFloat(style.borderLeftWidth) + "
                "parseFloat(style.paddingLeft) - icon.right")
            assert gap >= 2, (width, gap)
    finally:
        browser.quit()
    first = {q: (f[0].path.rsplit("/", 1)[-1].split(".")[0], f[0].fragment or None) if f else None
             for q, f in found.items()}
    assert {q: (page, anchor if SEARCHES[q][1] else None) for q, (page, anchor) in first.items()} == SEARCHES, first


def test_a_deeper_section_folds_closed_under_its_heading_and_a_link_into_it_opens_it(tmp_path):
    """The fold works in a browser: one <details> per deeper section, closed, titled by its `Deeper:` heading, holding
    its prose, code and subsections (a `Deeper:` one too) and nothing of the main path or the next deeper section
    after it; a link to a heading inside opens it."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    deeper = {"tags": ["deeper"]}
    cells = [md("# Chapter 1: X\n\n## 1. The idea\n\nThe idea, on the main path."),
             md("### Deeper: proof against PyTorch\n\nThe proof.", metadata=deeper), code("proof = 1", metadata=deeper),
             md("#### A pitfall inside\n\nThe pitfall.", metadata=deeper), code("pitfall = 2", metadata=deeper),
             md("Back on the main path."), md("## 2. Next\n\nMore of the path."),
             md("### Deeper: a first section in a row\n\nFirst in a row.", metadata=deeper),
             md("#### Deeper: a subsection of its own\n\nInside it.", metadata=deeper),
             md("## Deeper: measurements at length\n\nThe measurements.", metadata=deeper)]
    book = _small_book(tmp_path, cells, alt="{}\n")
    build_site(book, tmp_path / "site", log=lambda *_: None)
    page = tmp_path / "site" / "notebooks" / "01_x.html"
    browser = _browser()
    try:
        browser.get(page.as_uri())
        folds = browser.execute_script(
            "return Array.from(document.querySelectorAll('details.tb-deeper')).map(d => [d.open, "
            "d.querySelector('summary').textContent.trim(), d.textContent])")
        assert [(o, s.rstrip('#').strip()) for o, s, _ in folds] == [
            (False, "Deeper: proof against PyTorch"), (False, "Deeper: a first section in a row"),
            (False, "Deeper: measurements at length")]  # two deeper sections in a row fold apart
        assert "Inside it." in folds[1][2] and "The measurements." not in folds[1][2]
        first = folds[0][2]
        assert "The proof." in first and "proof = 1" in first and "The pitfall." in first and "pitfall = 2" in first
        assert "Back on the main path." not in first and "More of the path." not in first
        visible = browser.execute_script("return document.querySelector('article').innerText")
        assert "Back on the main path." in visible and "The proof." not in visible
        assert browser.execute_script("return new Set(Array.from(document.querySelectorAll('[id]')).map(e => e.id))"
                                      ".size === document.querySelectorAll('[id]').length")
        browser.get(page.as_uri() + "#a-pitfall-inside")
        assert browser.execute_script("return document.querySelector('details.tb-deeper').open")
    finally:
        browser.quit()


def test_on_a_phone_chapters_are_cards_and_printed_tables_keep_their_lines(site):
    """At 390 px the home page's chapter table is a card per chapter, each module name on one line, and chapter 2's
    printed tables scroll inside their box instead of wrapping; at a desk the module names stay whole too."""
    from selenium.webdriver.support.ui import WebDriverWait

    _, out, _ = site
    browser = _browser()
    measure = """
    const rows = Array.from(document.querySelectorAll('section#chapters tbody tr'));
    const codes = Array.from(document.querySelectorAll('section#chapters td:nth-child(3) code'));
    const wide = Array.from(document.querySelectorAll('section#chapters td code')).filter(
      c => c.getBoundingClientRect().right > c.closest('td').getBoundingClientRect().right + 1).map(c => c.textContent);
    return [rows.length, rows.map(r => getComputedStyle(r).display), Math.max(...rows.map(r => r.getBoundingClientRect().right)),
            codes.filter(c => c.getClientRects().length > 1 || c.getBoundingClientRect().height > 30).map(c => c.textContent),
            document.querySelector('section#chapters table').getBoundingClientRect().height, wide]"""
    try:
        found = {}
        for width in (390, 1280):
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": width, "height": 844, "deviceScaleFactor": 1, "mobile": width < 600})
            browser.get((out / "index.html").as_uri())
            WebDriverWait(browser, 30, poll_frequency=POLL).until(
                lambda b: b.execute_script("return document.readyState === 'complete'"))
            found[width] = browser.execute_script(measure)
            if width == 390:
                browser.get((out / "notebooks" / "02_attention.html").as_uri())
                WebDriverWait(browser, 30, poll_frequency=POLL).until(
                    lambda b: b.execute_script("return document.readyState === 'complete'"))
                outputs = browser.execute_script(
                    "return Array.from(document.querySelectorAll('div.cell_output .output pre')).map(p => "
                    "[getComputedStyle(p).whiteSpace, p.scrollWidth > p.clientWidth])")
    finally:
        browser.quit()
    rows, displays, right, broken, height, wide = found[390]
    assert rows == 11 and set(displays) == {"block"} and right <= 390 and wide == [], found[390]
    assert broken == [] and found[1280][3] == [], (broken, found[1280][3])
    assert height < 4500, height  # the table was about 5,700 px tall before it became cards
    assert outputs and {w for w, _ in outputs} == {"pre"} and any(scrolls for _, scrolls in outputs), outputs


# Every figure of the page at a phone's width, every fold open and every picture loaded: how wide it is shown against
# its column, whether a box around it scrolls sideways, and its full-size view (site.js's, as a tap opens it): the
# width it is shown at there, whether the page then scrolls sideways, and whether the close button closes it. Each
# drawn chart: its width against its column, and its smallest label in its full-size view, in CSS px.
FIGURES_JS = r"""
const done = arguments[arguments.length - 1];
document.querySelectorAll("details").forEach(d => { d.open = true; });
const article = document.querySelector("article");
const column = article.getBoundingClientRect();
const imgs = Array.from(article.querySelectorAll("img")).filter(i => !i.closest(".tb-chart"));
imgs.forEach(i => { i.loading = "eager"; });
Promise.all(imgs.map(i => i.decode().catch(() => null))).then(() => {
  function scrolls(e) {
    for (e = e.parentElement; e && e !== article; e = e.parentElement) {
      if (e.scrollWidth > e.clientWidth + 1) { return true; }
    }
    return false;
  }
  // opens the view, measures what it shows (`measure` of the picture or chart in it), closes it with its button
  function view(open, measure) {
    const overlay = open();
    const wide = document.documentElement.scrollWidth;
    const inside = overlay.getBoundingClientRect();
    const measured = measure(overlay.querySelector(".tb-zoom-box > img, .tb-zoom-box > svg"));
    const fits = inside.width <= window.innerWidth + 1 && inside.height <= window.innerHeight + 1;
    overlay.querySelector(".tb-zoom-close").click();
    return [measured, wide, fits, !document.querySelector(".tb-zoom")];
  }
  const pictures = imgs.map(img => {
    const r = img.getBoundingClientRect();
    const [zoomed, wide, fits, closed] = view(() => tbZoom.picture(img), shown => shown.getBoundingClientRect().width);
    return [img.getAttribute("src").split("/").pop(), r.left >= column.left - 1 && r.right <= column.right + 1,
            r.width > 0, scrolls(img), zoomed, wide, fits, closed];
  });
  const charts = Array.from(article.querySelectorAll(".tb-chart-drawn svg")).map(svg => {
    const r = svg.getBoundingClientRect();
    const [label, wide, fits, closed] = view(() => tbZoom.chart(svg, "chart"), shown => {
      const scale = shown.getBoundingClientRect().width / shown.width.baseVal.value;
      const sizes = Array.from(shown.querySelectorAll("text")).map(t => parseFloat(getComputedStyle(t).fontSize))
        .filter(s => s > 0);
      return sizes.length ? Math.min(...sizes) * scale : 0;
    });
    return [r.right <= column.right + 1, scrolls(svg), label, wide, fits, closed];
  });
  done([pictures, charts, document.documentElement.scrollWidth]);
});
"""


def test_on_a_phone_every_figure_is_whole_and_opens_full_size_with_labels_of_9_css_px(site):
    """At 390 px every figure of every chapter is seen whole in its column (no box scrolls sideways, nor the page),
    and its full-size view, as a tap opens it, shows it at least as wide as its smallest label needs to be 9 CSS px
    tall: a diagram of docs/figures/ by its SVG's labels, an animation by its frames', a matplotlib plot by its cell's
    smallest font size (or matplotlib's 10 points) at its PNG's dpi, a drawn chart by its SVG's text. The view fits
    the window (it scrolls inside), leaves the page as wide as the window, and its close button closes it.
    A formula scrolls only when it is wider than its line."""
    from selenium.webdriver.support.ui import WebDriverWait

    from transformer_lib.diagrams import FIGURES_DIR, animation, readable_width

    book, out, pages = site
    svgs = {p.stem + ".png": p.read_text(encoding="utf-8") for p in (ROOT / FIGURES_DIR).glob("*.svg")}
    animations = {name + ".png" for name in animation.ANIMATIONS}
    plots = {}  # the site's name of each plot -> (its PNG, its cell's source)
    for chapter in book.chapters:
        for cell in nbformat.read(ROOT / chapter.file, as_version=4).cells:
            pictures = [o["data"] for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
            for n, data in enumerate(pictures):  # numbered as the builder numbers them, charts' pictures included
                if not any("vegalite" in k for k in data):
                    plots[f"{Path(chapter.file).stem}-{cell.id}-{n}.png"] = (base64.b64decode(data["image/png"]),
                                                                            cell.source)

    def needed(name):
        if name in plots:
            return _plot_width(*plots[name])
        if name in animations:  # its frames are WIDTH wide and no label is under SMALL (test_animation)
            return animation.WIDTH * 9 / animation.SMALL
        return readable_width(svgs[name]) if name in svgs else None

    browser = _browser()
    problems, seen, charts = [], set(), 0
    try:
        browser.set_script_timeout(60)
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        for page in (p for p in pages if p.kind == "chapter"):
            browser.get((out / page.html).as_uri())
            browser.execute_script("document.querySelectorAll('details').forEach(d => { d.open = true; });"
                                   "document.querySelectorAll('.tb-chart').forEach(c => c.scrollIntoView());")
            WebDriverWait(browser, 60, poll_frequency=POLL).until(lambda b: b.execute_script(
                "return document.readyState === 'complete' && document.querySelectorAll('.tb-chart').length === "
                "document.querySelectorAll('.tb-chart[data-drawn]').length"))
            pictures, drawn, scroll_width = browser.execute_async_script(FIGURES_JS)
            for name, inside, shown_at_all, scrolls, zoomed, wide, fits, closed in pictures:
                seen.add(name)
                least = needed(name)
                if not (inside and shown_at_all) or scrolls:
                    problems.append((page.html, name, "not whole in its column"))
                if least is not None and zoomed < least - 0.5:
                    problems.append((page.html, name, "full size", round(zoomed), "needs", least))
                if wide > 390 or not fits or not closed:
                    problems.append((page.html, name, "the full-size view", wide, fits, closed))
            for inside, scrolls, label, wide, fits, closed in drawn:
                charts += 1
                if not inside or scrolls or label < 8.99 or wide > 390 or not fits or not closed:
                    problems.append((page.html, "chart", inside, scrolls, round(label, 1), wide, fits, closed))
            if scroll_width > 390:
                problems.append((page.html, "the page scrolls sideways", scroll_width))
            bars = browser.execute_script(
                "return Array.from(document.querySelectorAll('article span.math')).filter(m => m.scrollWidth > "
                "m.clientWidth + 1 && m.querySelector('mjx-math') && m.querySelector('mjx-math')"
                ".getBoundingClientRect().width <= m.clientWidth + 1).map(m => m.textContent.slice(0, 30))")
            problems += [(page.html, "a formula that fits scrolls", text) for text in bars]
    finally:
        browser.quit()
    assert len(seen & set(svgs)) >= 50 and charts >= 4 and animations <= seen, (sorted(seen), charts)
    assert set(plots) <= seen, set(plots) - seen
    assert problems == [], problems


def test_a_tap_on_a_figure_opens_it_full_size_and_escape_or_the_close_button_closes_it(site):
    """The full-size view as a reader meets it at 390 px: a tap on a diagram opens it over the page, a dialog that
    names the figure; Escape closes it and gives the focus back; the close button closes it too; a chart's button
    opens the chart."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    _, out, _ = site
    browser = _browser()
    overlay = "return document.querySelector('.tb-zoom')"
    try:
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        browser.get((out / "notebooks" / "02_attention.html").as_uri())
        link = browser.find_element("css selector", "article a.tb-figure-link")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
        alt = link.find_element("css selector", "img").get_attribute("alt")
        link.click()
        WebDriverWait(browser, 5, poll_frequency=POLL).until(lambda b: b.execute_script(overlay))
        assert browser.execute_script("return document.querySelector('.tb-zoom').getAttribute('aria-label')") == alt
        assert browser.current_url.endswith("02_attention.html")  # the page stays; the view is over it
        browser.switch_to.active_element.send_keys(Keys.ESCAPE)
        assert browser.execute_script(overlay) is None
        link.click()
        browser.find_element("css selector", ".tb-zoom-close").click()
        assert browser.execute_script(overlay) is None
        browser.get((out / "notebooks" / "07_decoding.html").as_uri())
        browser.execute_script("const chart = document.querySelector('.tb-chart'); const fold = chart.closest('details');"
                               "if (fold) { fold.open = true; } chart.scrollIntoView();")
        WebDriverWait(browser, 60, poll_frequency=POLL).until(
            lambda b: b.find_elements("css selector", ".tb-chart[data-drawn] button.tb-chart-open"))
        button = browser.find_element("css selector", ".tb-chart[data-drawn] button.tb-chart-open")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
        button.click()
        assert browser.execute_script("return !!document.querySelector('.tb-zoom svg')")
    finally:
        browser.quit()


def test_a_plots_readable_width_follows_its_smallest_font_and_its_dpi():
    """matplotlib's PNG at 100 dpi: 10 points are 13.9 px, so a 1,000-px plot keeps its ticks 9 px tall down to 648 px;
    a legend at fontsize=7 (9.7 px) needs 926 px, "small" (8.33 points) 778 px; a picture not from matplotlib, none."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    fig, ax = plt.subplots(figsize=(10, 2), dpi=100)
    ax.plot([0, 1])
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)  # no tight crop: 1,000 px wide
    plt.close(fig)
    png = out.getvalue()
    assert Image.open(io.BytesIO(png)).width == 1000
    assert _plot_width(png, "ax.plot(x)") == 648
    assert _plot_width(png, 'ax.plot(x)\nax.legend(fontsize=7)\nax.title.set_fontsize(9)') == 926
    assert _plot_width(png, 'ax.legend(fontsize="small")') == 778
    plain = io.BytesIO()
    Image.new("RGB", (1000, 200)).save(plain, format="PNG")
    assert _plot_width(plain.getvalue(), "ax.legend(fontsize=7)") is None



# ---- safe by construction: forms that a parser other than the browser's reads differently, planted in a chapter's
# Markdown and in its outputs of every kind the builder passes on. Each would run a script (setting window.planted),
# load from outside (the port 9 of this machine, closed: a request there is seen as leaving the site) or leave a live
# javascript: link. The builder's scan may refuse some with a message; whatever it lets through must be inert.
OUTSIDE = "http://127.0.0.1:9"
PLANTED = {
    "a comment a browser closes early": "<!--><script>window.planted = 'comment'</script><!-- -->",
    "a CDATA-like section": "<![CDATA[><script>window.planted = 'cdata'</script>]]>",
    "a script in an attribute inside noscript":
        "<noscript><p title=\"</noscript><img src=x onerror=window.planted='noscript'>\"></p></noscript>",
    "an iframe of a data: SVG that loads from outside":
        f"<iframe src=\"data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'%3E%3Cimage "
        f"href='{OUTSIDE}/iframe.png'/%3E%3C/svg%3E\"></iframe>",
    "an object of a data: SVG": f"<object data=\"data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'%3E"
                                 f"%3Cimage href='{OUTSIDE}/object.png'/%3E%3C/svg%3E\"></object>",
    "an embed of a data: SVG": f"<embed src=\"data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'%3E"
                               f"%3Cimage href='{OUTSIDE}/embed.png'/%3E%3C/svg%3E\">",
    "an event handler in an SVG": "<svg><rect width=\"9\" height=\"9\" onload=\"window.planted='svg'\"/></svg>",
    "a javascript: link": "<a href=\"javascript:window.planted='link'\">click</a>",
    "a javascript: link with entities": "<a href=\"jav&#x09;ascript:window.planted='entity'\">click</a>",
    "a style that loads from outside": f"<div style=\"background: url({OUTSIDE}/style.png)\">styled</div>",
    "a form posting outside": f"<form action=\"{OUTSIDE}/form\"><button id=\"planted-submit\">go</button></form>",
    "a base that moves every link": f"<base href=\"{OUTSIDE}/\">",
    "a meta refresh": f"<meta http-equiv=\"refresh\" content=\"0; url={OUTSIDE}/refresh\">",
}
PLANTED_TEX = {  # MathJax's html extension: a link that runs, a style that loads
    "\\href to javascript:": "$\\href{javascript:window.planted='href'}{x}$",
    "\\style loading from outside": f"$\\style{{background-image: url({OUTSIDE}/tex.png)}}{{y}}$",
    "\\require of the html extension": "$\\require{html}\\href{javascript:window.planted='require'}{z}$",
}


def _planted_book(tmp_path, planted):
    """A chapter with each (place, form) of `planted`: place "markdown" or an output's type."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [md("# Chapter 1: X\n\n## 1. The planted forms")]
    for n, (place, form) in enumerate(planted):
        if place == "markdown":
            cells.append(md(f"Form {n} in Markdown:\n\n{form}\n\nafter it."))
        else:
            body = form if place != "image/svg+xml" else f"<svg xmlns=\"http://www.w3.org/2000/svg\">{form}</svg>"
            cells.append(code("show()", outputs=[nbformat.v4.new_output("display_data", {place: body})]))
    for n, cell in enumerate(cells):
        cell["id"] = f"p{n}"
    return _small_book(tmp_path, cells, alt="{}\n")


def test_planted_scripts_outside_loads_and_javascript_links_are_inert_on_the_built_site(tmp_path, monkeypatch):
    """The build refuses every planted HTML form with a message naming the cell (the allowlist's check); and with that
    check switched off, every form reaches the page and is inert in headless Chromium all the same (the sanitizer and
    the policy alone): no script it carries runs (on load or on a click of what it draws), nothing loads from outside
    the site, no link leads to javascript:, no form posts outside; and every page carries the site's policy."""
    from selenium.webdriver.support.ui import WebDriverWait

    from transformer_lib.book import site_chapters, site_markdown
    from transformer_lib.book.site_policy import POLICY

    tries = [(place, form) for form in PLANTED.values()
             for place in ("markdown", "text/html", "text/markdown", "image/svg+xml")]
    tries += [(place, form) for form in PLANTED_TEX.values() for place in ("markdown", "text/latex")]
    let_through = []
    for n, planted in enumerate(tries):  # each alone: which ones does the build refuse?
        (tmp_path / f"try{n}").mkdir()
        try:
            assemble(_planted_book(tmp_path / f"try{n}", [planted]), tmp_path / f"try{n}" / "src")
        except SiteError as err:  # refused with a message naming the cell: never reaches a page
            assert "notebooks/01_x.ipynb cell" in str(err), (planted, str(err))
            continue
        let_through.append(planted)
    # through: the TeX (MathJax's configuration holds it) and the entity-spelled link, which is no link to a browser's
    # URL parser either until the tab is dropped, so the builder points it at the repository like any relative link
    assert {form for _, form in let_through} <= {*PLANTED_TEX.values(), PLANTED["a javascript: link with entities"]}
    for module in (site_chapters, site_markdown):  # the build's own checks off: the page alone must hold
        monkeypatch.setattr(module, "refused", lambda html: [])
        monkeypatch.setattr(module, "_hrefs", lambda html: ([], []))
    let_through = [(place, form) for place, form in tries if place != "image/svg+xml"]  # an SVG is published as a PNG
    (tmp_path / "book").mkdir()
    book = _planted_book(tmp_path / "book", let_through)
    tex = [f for place, f in let_through if f in PLANTED_TEX.values()]
    removed = []
    build_site(book, tmp_path / "site", log=removed.append)
    page = tmp_path / "site" / "notebooks" / "01_x.html"
    text = page.read_text(encoding="utf-8")
    assert 'http-equiv="Content-Security-Policy"' in text and POLICY.split(";")[0] in text
    assert any("removed" in line for line in removed), removed  # what the sanitizer took out is said
    browser = _browser()
    try:
        browser.get_log("performance")
        browser.get(page.as_uri())
        WebDriverWait(browser, 30, poll_frequency=POLL).until(lambda b: b.execute_script(
            "return document.readyState === 'complete' && (!window.MathJax || !MathJax.startup || "
            "!MathJax.startup.promise || MathJax.typesetDone !== false)"))
        browser.execute_script("return window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
        live = browser.execute_script(
            "return [window.planted || null, Array.from(document.querySelectorAll('a[href], [href], [src], [action]'))"
            ".map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action'))"
            ".filter(u => /^\\s*(javascript|data:text\\/html)/i.test(u) || u.indexOf('127.0.0.1:9') >= 0), "
            "document.querySelectorAll('article iframe, article object, article embed, article script:not([src]), "
            "base, meta[http-equiv=refresh]').length, document.querySelectorAll('.math mjx-container').length]")
        # a click on whatever the forms drew (links are checked above: none leads to javascript:)
        for element in browser.find_elements("css selector", "article svg, article svg *, article button, "
                                             "mjx-container, mjx-container *"):
            try:
                browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", element)
            except Exception:  # an element the click removed or moved: the others still count
                pass
        clicked = browser.execute_script("return window.planted || null")
        requests, _ = _requests(browser)
        on_page = browser.current_url
    finally:
        browser.quit()
    planted, links, elements, typeset = live
    assert planted is None and clicked is None, (planted, clicked)
    assert links == [] and elements == 0, (links, elements)
    assert [u for u in requests if "127.0.0.1:9" in u or urllib.parse.urlparse(u).scheme in ("http", "https")] == []
    assert on_page.startswith((tmp_path / "site").as_uri() + "/"), on_page  # nothing took the reader off the site
    assert typeset >= len(tex), typeset  # the TeX is typeset (its html extension's macros as errors, inert)



@pytest.mark.parametrize("html, kept, gone", [
    ('<p class="x" id="y">text <code>a &lt; b</code> <a href="../a.html#b" title="t">link</a></p>',
     ['class="x"', 'id="y"', "a &lt; b", 'href="../a.html#b"'], []),
    ('<a href="https://arxiv.org/abs/1706.03762">a</a><a href="mailto:a@b.c">m</a>', ["https://arxiv.org", "mailto:"], []),
    ('<img src="../_images/a.png" alt="a map" loading="lazy" data-readable="600">',
     ['src="../_images/a.png"', 'alt="a map"', 'data-readable="600"'], []),
    ('<img src="data:image/png;base64,AAAA" alt="x">', ["data:image/png"], []),
    ('<table border="1"><tr><td colspan="2">1</td></tr></table>', ["<td", 'colspan="2"'], []),
    ('<script>window.planted = 1</script><p>after</p>', ["<p>after</p>"], ["<script", "planted"]),
    ('<style>p { color: red }</style><p style="background: url(https://x.example/a.png)">s</p>', ["<p>s</p>"],
     ["<style", "style=", "x.example"]),
    ('<a href="javascript:alert(1)">x</a><a href="jav&#x09;ascript:alert(1)">y</a>', [">x</a>", ">y</a>"],
     ["javascript", "href"]),
    ('<a href="data:text/html,<script>alert(1)</script>">d</a>', [">d</a>"], ["data:", "alert"]),
    ('<img src="https://x.example/a.png" onerror="alert(1)" alt="a">', ['alt="a"'], ["x.example", "onerror"]),
    ('<iframe src="data:text/html,<script>alert(1)</script>"></iframe><object data="a.svg"></object><embed src="b">',
     [], ["iframe", "object", "embed", "alert"]),
    ('<svg><rect onload="alert(1)"/></svg><math><mi>x</mi></math>', [], ["<svg", "onload", "<math"]),
    ('<!--><script>alert(1)</script><!-- -->', [], ["<script", "alert"]),
    ('<noscript><p title="</noscript><img src=x onerror=alert(1)>"></p></noscript>', [], ["onerror", "alert"]),
    ('<form action="https://x.example/post"><input name="q"></form><form action="search.html"></form>',
     ['action="search.html"', 'name="q"'], ["x.example"]),
    ('<base href="https://x.example/"><meta http-equiv="refresh" content="0; url=https://x.example">', [],
     ["<base", "<meta", "x.example"]),
])
def test_the_sanitizer_keeps_what_the_book_uses_and_nothing_that_runs_or_leaves(html, kept, gone):
    """The allowlist: the markup the theme and the book write stays, a script, style, frame, handler or address
    that leaves the site does not, however it is written."""
    from transformer_lib.book.site_policy import sanitize

    clean = sanitize(html)
    assert [k for k in kept if k not in clean] == [] and [g for g in gone if g in clean] == [], clean


def test_the_policy_hashes_the_heads_scripts_and_reports_what_the_sanitizer_removes():
    """A page's policy lets the scripts of its head run by their hash and nothing else inline; the body's planted
    script goes, and the report names it; a page without the theme's layout is refused, naming it."""
    import base64
    import hashlib

    from transformer_lib.book.site_policy import _policy_page

    head_script = "document.documentElement.dataset.mode = 'auto';"
    page = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\" /><script>" + head_script + "</script></head>"
            "<body><p>text</p><script>window.planted = 1</script><button onclick=\"window.print()\">p</button>"
            "<a href=\"x\" onclick=\"steal()\">a</a>\n<script defer src=\"../_static/scripts/bootstrap.js\"></script>"
            "\n</body>\n</html>\n")
    out, removed = _policy_page(page, "notebooks/p.html")
    digest = base64.b64encode(hashlib.sha256(head_script.encode()).digest()).decode()
    assert f"script-src 'self' 'sha256-{digest}';" in out and "unsafe-inline'; img" in out and "unsafe-eval" not in out
    assert "window.planted" not in out and 'data-tb-action="print"' in out and "steal" not in out
    assert '<script defer src="../_static/scripts/bootstrap.js"></script>' in out  # the theme's own, kept
    assert removed == ["<script>", "onclick="], removed
    with pytest.raises(SiteError, match="notebooks/q.html: no <body> and theme scripts"):
        _policy_page("<html><head><meta charset='utf-8'></head><p>x</p><script>evil()</script></html>",
                     "notebooks/q.html")


def test_two_builds_of_one_book_are_byte_identical(tmp_path):
    """Every file of the site, the cut icon fonts included, is the same bytes when the book is built again."""
    book = _small_book(_folder(tmp_path / "book"), [_md_cell("# Chapter 1: X\n\n$x^2$ and text."), _plot_cell()])
    for n in (1, 2):
        build_site(book, tmp_path / f"site{n}", log=lambda *_: None)
    files = {p.relative_to(tmp_path / "site1") for p in (tmp_path / "site1").rglob("*") if p.is_file()}
    assert files == {p.relative_to(tmp_path / "site2") for p in (tmp_path / "site2").rglob("*") if p.is_file()}
    differ = sorted(str(f) for f in files if (tmp_path / "site1" / f).read_bytes() != (tmp_path / "site2" / f).read_bytes())
    assert differ == [], differ
    assert any(f.suffix == ".woff2" for f in files)


def test_the_live_translator_translates_in_the_browser_as_the_book_does(site):
    """docs/translator.md's page, served over http as the README serves the site: nothing of the model loads until
    the reader asks; then the page's translation of a caption is translate()'s on the page's weights (on_page), the
    steps go forward, and in Chromium the engine gives translate_tokens' tokens for 30 test2016 sentences greedy and
    10 with 5 beams. Fits a phone's width. Prints the milliseconds a greedy step takes here."""
    from selenium.webdriver.support.ui import WebDriverWait

    from transformer_lib.book.live import on_page
    from transformer_lib.data import load_translation_data
    from transformer_lib.decoding import translate_tokens
    from transformer_lib.translation import pretrained, translate

    _, out, _ = site

    server = _served(out)
    model = on_page(pretrained().model)
    src_tok, _ = model.tokenizers
    src_vocab, tgt_vocab = model.vocabs
    texts = [de for de, _ in load_translation_data("test2016")[0][:30]]
    browser = _browser()
    try:
        browser.get(f"http://127.0.0.1:{server.server_port}/docs/translator.html")
        WebDriverWait(browser, 60, poll_frequency=POLL).until(lambda b: b.find_elements("css selector", ".tb-live-go"))
        assert not [u for u in _requests(browser)[0] if "weights.bin" in u or "assets.json" in u]
        caption = browser.find_element("css selector", ".tb-live-input").get_attribute("value")
        browser.find_element("css selector", ".tb-live-go").click()
        WebDriverWait(browser, 300, poll_frequency=POLL).until(
            lambda b: b.find_elements("css selector", ".tb-live-piece"))
        while browser.find_element("css selector", ".tb-live-next").is_enabled():
            browser.find_element("css selector", ".tb-live-next").click()
        shown = browser.find_element("css selector", ".tb-live-english").text.split("English so far: ", 1)[1]
        assert shown == translate(model, caption, beam_size=1)
        browser.set_window_size(390, 844)
        assert browser.execute_script("const b = document.querySelector('.tb-live-translator'); "
                                      "return b.scrollWidth <= b.clientWidth + 1 && "
                                      "document.documentElement.scrollWidth <= window.innerWidth + 1")
        browser.set_script_timeout(600)
        page = browser.execute_async_script(
            "const [texts, done] = arguments; tbLive.load(document.createElement('p')).then((e) => {"
            "  const t0 = performance.now(); let steps = 0;"
            "  const greedy = texts.map((t) => { const s = e.model.greedy(e.tok.encode(t)); steps += s.length;"
            "                                     return s.map((x) => x.token); });"
            "  const ms = (performance.now() - t0) / steps;"
            "  const beam = texts.slice(0, 10).map((t) => e.model.beam(e.tok.encode(t), 5, 0.6).tokens);"
            "  done({greedy, beam, ms}); });", texts)
    finally:
        browser.quit()
        server.shutdown()
    assert [tgt_vocab.decode(g) for g in page["greedy"]] == translate_tokens(model, texts, src_tok, src_vocab, tgt_vocab,
                                                                             beam_size=1)
    assert [tgt_vocab.decode(b) for b in page["beam"]] == translate_tokens(model, texts[:10], src_tok, src_vocab,
                                                                           tgt_vocab, beam_size=5)
    print(f"a greedy step in Chromium: {page['ms']:.1f} ms")
