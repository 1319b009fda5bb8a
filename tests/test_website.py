"""The book as a website (python -m transformer_lib.book html, Jupyter Book 1): built from the committed notebooks,
offline, then read as files and opened page by page in headless Chromium over file://, at a desk's 1280x900 (light
theme) and a phone's 390x844 (dark theme).

The browser tests need Chromium and its driver (Debian: apt-get install chromium chromium-driver); where they are
missing they are skipped, saying so. Screenshots of a desktop and a phone page go to build/screenshots/.
"""
import json
import re
import shutil
import urllib.parse
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

import transformer_lib.book as bk
from transformer_lib.book.site import SiteError, build_site, rewrite_links

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "build" / "screenshots"
SEARCHES = {"RoPE": "11_modern", "beam search": "07_decoding", "label smoothing": "05_training", "BPE": "06_data",
            "key/value cache": "07_decoding"}
PLACEHOLDER_ALT = re.compile(r"^(?:|image|figure|picture|plot|chart|output|png|no description.*|[\w./-]+\.(?:png|svg|jpe?g))$",
                             re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    book = bk.load_book(ROOT)
    pages = build_site(book, out, log=lambda *_: None)
    return book, out, pages


def _soup(out, page):
    return BeautifulSoup((out / page.html).read_text(encoding="utf-8"), "html.parser")


def _all_html(out):
    return sorted(p for p in out.rglob("*.html") if "_static" not in p.parts)


# ---- the build, read as files


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
        soup = BeautifulSoup(text, "html.parser")
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
            ids[path] = {e["id"] for e in BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
                         .select("[id]")}
        return ids[path]

    followed = 0
    for path in _all_html(out):
        soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        for a in soup.select("a[href]"):
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
            spec = json.loads(chart.select_one("script[type='application/json']").string)
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
        soup = BeautifulSoup(text, "html.parser")
        assert len(text.encode()) <= 600_000, path.relative_to(out)
        assert sum(len(s.get_text()) for s in soup.select("style")) < 2_000, path.relative_to(out)
        assert any("_static/" in link["href"] for link in soup.select("link[rel=stylesheet]"))


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
    with pytest.raises(SiteError, match=r"notebooks/01_x.ipynb: an image from https://example.org/cat.png"):
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
    WebDriverWait(browser, 5).until(lambda b: b.execute_script(on_screen, shows), (page, button))


def _requests(browser):
    requests, failed = [], []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.loadingFailed" and not message["params"].get("canceled"):
            failed.append(message["params"].get("errorText"))
    return requests, failed


@pytest.mark.parametrize("width, height, theme", [(1280, 900, "light"), (390, 844, "dark")])
def test_every_page_reads_cleanly_in_headless_chromium(site, width, height, theme):
    """Every page at this width and theme: no console error, no request leaving the site or failing, nothing clipped,
    no sideways scroll, every image loaded, every chart drawn, math typeset, text and code at AA contrast."""
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
            WebDriverWait(browser, 60).until(lambda b: b.execute_script(
                "return document.readyState === 'complete' && document.querySelectorAll('.tb-chart').length === "
                "document.querySelectorAll('.tb-chart[data-drawn]').length && "
                "(!window.MathJax || !MathJax.startup || !MathJax.startup.promise || MathJax.typesetDone !== false)"))
            browser.execute_script("return window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
            assert browser.execute_script("return document.documentElement.dataset.theme") == theme, page.html
            problems, sampled = browser.execute_script(PAGE_PROBLEMS_JS, width)
            assert problems == [], (page.html, width, problems)
            requests, failed = _requests(browser)
            outside = [u for u in requests if urllib.parse.urlparse(u).scheme not in ("file", "data", "blob")]
            assert outside == [] and failed == [], (page.html, outside[:3], failed[:3])
            errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == [], (page.html, errors[:3])
            report[page.html] = {"requests": len(requests), "text sampled for contrast": sampled}
            if width < 600 and page.kind == "chapter":  # the menu and contents buttons open what they name
                _opens(browser, "button.primary-toggle", "nav.bd-links a", page.html)
                browser.get((out / page.html).as_uri())
                _opens(browser, "button.secondary-toggle", "#pst-page-toc-nav a", page.html)
            if (width, page.html) in ((1280, "notebooks/07_decoding.html"), (390, "notebooks/02_attention.html")):
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                browser.save_screenshot(str(SCREENSHOTS / f"{Path(page.html).stem}-{width}px-{theme}.png"))
    finally:
        browser.quit()
    assert len(report) == len(pages)
    (SCREENSHOTS / f"report-{width}px.json").write_text(json.dumps(report, indent=1))


def test_search_over_file_finds_the_chapter_that_teaches_each_query_first(site):
    from selenium.webdriver.support.ui import WebDriverWait

    _, out, _ = site
    browser = _browser()
    found = {}
    try:
        for query in SEARCHES:
            browser.get((out / "search.html").as_uri() + "?q=" + urllib.parse.quote(query))
            WebDriverWait(browser, 30).until(lambda b: b.execute_script(
                "const s = document.querySelector('#search-results .search-summary');"
                "return !!s && s.textContent.indexOf('found') >= 0"))
            links = [a.get_attribute("href") for a in
                     browser.find_elements("css selector", "#search-results ul.search li > a")]
            found[query] = [urllib.parse.urlparse(link).path.rsplit("/", 1)[-1] for link in links[:3]]
            errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == [], (query, errors[:3])  # no request the browser refuses over file://
    finally:
        browser.quit()
    assert {q: f[0].split(".")[0] if f else None for q, f in found.items()} == SEARCHES, found
