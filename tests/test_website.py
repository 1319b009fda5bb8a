"""The book as a website (python -m transformer_lib.book html): built from the committed notebooks, offline, and
opened page by page in a real browser (headless Chromium) that must see no error, no failed request and no request
leaving localhost, every figure loaded and every interactive chart drawn.

The browser test needs Chromium and its driver (Debian: apt-get install chromium chromium-driver); where they are
missing it is skipped, saying so. Its screenshots go to build/screenshots/.
"""
import functools
import http.server
import json
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest
from bs4 import BeautifulSoup

import transformer_lib.book as bk
from transformer_lib.charts import CHART_MIME, chart_bundle, compact
from transformer_lib.website import SiteError, build_site, markdown_math_to_mathml

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "build" / "screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    book = bk.load_book(ROOT)
    pages = build_site(book, out, log=lambda *_: None)
    return book, out, pages


# ---- the build, read as files


def test_every_chapter_has_a_page_in_book_order_with_navigation(site):
    book, out, pages = site
    assert [p.chapter for p in pages] == [c.file for c in book.chapters]
    index = (out / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'<li><a href="([^"]+)"', index) == [p.file for p in pages]
    for i, page in enumerate(pages):
        text = (out / page.file).read_text(encoding="utf-8")
        soup = BeautifulSoup(text, "html.parser")
        assert soup.title.string == f"{page.title} | {book.title}"
        assert [a["href"] for a in soup.select("nav.site-nav li.current a")] == [page.file]
        assert [a["href"] for a in soup.select("a[rel=prev]")] == ([pages[i - 1].file] if i else [])
        assert [a["href"] for a in soup.select("a[rel=next]")] == ([pages[i + 1].file] if i + 1 < len(pages) else [])
        assert "#| export" not in text and "#| default_exp" not in text  # directives are for the exporter


def test_no_page_loads_anything_from_outside_the_site(site):
    _, out, pages = site
    for path in [out / "index.html"] + [out / p.file for p in pages]:
        text = path.read_text(encoding="utf-8")
        loads = re.findall(r"<(?:script|img|link|iframe)\b[^>]*?(?:src|href)\s*=\s*[\"']?((?:https?:)?//[^\"'\s>]+)",
                           text, re.I)
        assert loads == [], (path.name, loads[:3])
        for script in re.findall(r"<script\b[^>]*>(.*?)</script>", text, re.S | re.I):
            if not script.lstrip().startswith("{"):  # a chart's JSON spec may name its schema
                assert "://" not in script, (path.name, script[:200])


def test_equations_are_mathml_and_every_formula_was_converted(site):
    book, out, pages = site
    for page in pages:
        text = (out / page.file).read_text(encoding="utf-8")
        assert text.count("<math ") == page.equations
    assert sum(p.equations for p in pages) > 200
    assert (out / "01_embeddings.html").read_text(encoding="utf-8").count("<msqrt>") >= 1


def test_charts_carry_their_spec_and_a_picture_and_the_bundle_is_written(site):
    _, out, pages = site
    charted = [p for p in pages if p.charts]
    assert [p.file for p in charted] == ["01_embeddings.html", "05_training.html", "07_decoding.html"]
    for page in charted:
        text = (out / page.file).read_text(encoding="utf-8")
        assert text.count('class="vega-chart"') == text.count('class="chart-fallback"') == page.charts
    bundle = (out / "assets" / "vega.js").read_text(encoding="utf-8")
    assert "window.vegaEmbed" in bundle and "://cdn" not in bundle[-2000:]


def test_search_index_points_at_headings_that_exist(site):
    _, out, pages = site
    entries = json.loads((out / "search.json").read_text(encoding="utf-8"))
    assert len(entries) > 100
    for entry in entries[::10]:
        page, anchor = entry["url"].split("#")
        assert f'id="{anchor}"' in (out / page).read_text(encoding="utf-8")
    assert any("label smoothing" in e["text"] and e["url"].startswith("05_training.html") for e in entries)


@pytest.mark.parametrize("chapter, n_charts", [("01_embeddings", 1), ("05_training", 1), ("07_decoding", 2)])
def test_charts_are_stored_as_spec_and_png_not_as_html_that_fetches_vega(chapter, n_charts):
    nb = nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "data" in o]
    charts = [o for o in outputs if CHART_MIME in o["data"]]
    assert len(charts) == n_charts and all("image/png" in o["data"] for o in charts)
    assert not [o for o in outputs if "://" in str(o["data"].get("text/html", ""))]


def test_chart_bundle_has_spec_png_and_refuses_what_is_not_a_chart():
    spec = {"data": {"values": [{"x": 1, "y": 2}, {"x": 2, "y": 1}]}, "mark": "line",
            "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"}}}
    bundle = chart_bundle(spec)
    assert bundle[CHART_MIME] == spec and bundle["image/png"].startswith("iVBORw0KGgo")  # base64 of a PNG header
    with pytest.raises(TypeError, match="chart must be an altair chart or a vega-lite spec"):
        chart_bundle([1, 2, 3])


def test_compact_specs_draw_the_same_chart_from_one_csv_line():
    """Rows become one CSV string (a comma, a quote and a space inside a label included) and the drawing is the same."""
    import altair as alt
    import pandas as pd
    import vl_convert

    frame = pd.DataFrame({"layer": [1, 1, 2, 2], "query": ['0 <s>', '1 ,', '2 "a"', "3 b c"], "weight": [0.1, 0.7, 0.25, 1.0]})
    chart = (alt.Chart(frame).mark_rect().encode(x="layer:O", y=alt.Y("query:N", sort=None), color="weight:Q")
             .facet(column="layer:O"))
    spec = chart.to_dict()
    small = compact(spec)
    assert "datasets" not in small and small["data"]["format"] == {"type": "csv", "parse": {"layer": "number",
                                                                                                 "weight": "number"}}
    assert small["data"]["values"].count("\n") == len(frame) + 1
    def svg(s):  # gradient ids count up from one drawing to the next
        return re.sub(r"gradient_\d+", "gradient", vl_convert.vegalite_to_svg(s))

    assert svg(small) == svg(spec)
    assert chart_bundle(chart)[CHART_MIME] == small


def _book_with(tmp_path, cells):
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(cells=cells)
    nbformat.write(nb, tmp_path / "notebooks" / "01_x.ipynb")
    (tmp_path / "book.yml").write_text("title: T\npackage: p\nchapters:\n  - file: notebooks/01_x.ipynb\n"
                                       "    title: X\n    module: x\n", encoding="utf-8")
    return bk.load_book(tmp_path)


def test_a_chart_that_fetches_vega_from_a_cdn_is_refused_naming_the_cell(tmp_path):
    cell = nbformat.v4.new_code_cell("chart", outputs=[nbformat.v4.new_output(
        "display_data", {"text/html": '<div></div><script>requirejs.config({paths: {"vega": '
                                      '"https://cdn.jsdelivr.net/npm/vega@6?noext"}});</script>'})])
    book = _book_with(tmp_path, [nbformat.v4.new_markdown_cell("# X"), cell])
    with pytest.raises(SiteError, match=r"notebooks/01_x.ipynb cell 1: an HTML output loads https://cdn.jsdelivr"):
        build_site(book, tmp_path / "site", log=lambda *_: None)


def test_a_formula_mathml_cannot_express_is_refused_naming_the_cell(tmp_path):
    book = _book_with(tmp_path, [nbformat.v4.new_markdown_cell("# X\n\nSee $\\frac{1}{$ here.")])
    with pytest.raises(SiteError, match=r"cell 0: cannot convert"):
        build_site(book, tmp_path / "site", log=lambda *_: None)


def test_a_folder_the_build_did_not_write_is_left_alone(tmp_path):
    book = _book_with(tmp_path, [nbformat.v4.new_markdown_cell("# X")])
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(SiteError, match="is not a site this command built"):
        build_site(book, tmp_path / "mine", log=lambda *_: None)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    build_site(book, tmp_path / "built", log=lambda *_: None)
    build_site(book, tmp_path / "built", log=lambda *_: None)  # its own folder: rebuilt in place


def test_a_failed_build_leaves_the_old_site_as_it_was(tmp_path):
    """A notebook listed in book.yml that is missing or damaged fails the build naming it, and the site built
    before is still there, whole."""
    book = _book_with(tmp_path, [nbformat.v4.new_markdown_cell("# X")])
    build_site(book, tmp_path / "site", log=lambda *_: None)
    before = {p.name: p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file()}
    notebook = tmp_path / "notebooks" / "01_x.ipynb"
    notebook.write_text('{"cells": [', encoding="utf-8")
    with pytest.raises(SiteError, match="notebooks/01_x.ipynb is not a notebook nbformat can read"):
        build_site(book, tmp_path / "site", log=lambda *_: None)
    notebook.unlink()
    with pytest.raises(SiteError, match="notebooks/01_x.ipynb is listed in book.yml but missing"):
        build_site(book, tmp_path / "site", log=lambda *_: None)
    assert {p.name: p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site")) == []

def test_math_outside_code_only():
    text, n = markdown_math_to_mathml("cost $O(n^2)$, code `$x$`, a price of 5 dollars\n\n```\n$y$\n```\n")
    assert n == 1 and "`$x$`" in text and "\n$y$\n" in text and "<msup>" in text


# ---- the build, opened in a real browser


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


@pytest.fixture(scope="module")
def served(site):
    _, out, pages = site
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", pages
    server.shutdown()


def test_every_page_loads_cleanly_in_headless_chromium(served):
    base, pages = served
    browser = _browser()
    from selenium.webdriver.support.ui import WebDriverWait

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    report = {}
    try:
        for name in ["index.html"] + [p.file for p in pages]:
            browser.get(f"{base}/{name}")
            charts = browser.execute_script("return document.querySelectorAll('.vega-chart').length")
            WebDriverWait(browser, 60).until(lambda b: b.execute_script(
                "return document.readyState === 'complete' && "
                "document.querySelectorAll('.vega-chart[data-drawn]').length === arguments[0]", charts))
            images = browser.execute_script(
                "return Array.from(document.images).map(i => [i.complete && i.naturalWidth > 0, i.src.slice(0, 40)])")
            assert all(ok for ok, _ in images), (name, [src for ok, src in images if not ok])
            drawn = browser.execute_script(
                "return Array.from(document.querySelectorAll('.vega-chart')).map(d => !!d.querySelector('svg, canvas'))")
            assert all(drawn), name
            maths = browser.execute_script(
                "return Array.from(document.querySelectorAll('math')).map(m => m.getBoundingClientRect().width > 0)")
            assert all(maths), (name, maths.count(False))  # MathML laid out, not raw text
            requests, failed = [], []
            for entry in browser.get_log("performance"):
                message = json.loads(entry["message"])["message"]
                if message["method"] == "Network.requestWillBeSent":
                    requests.append(message["params"]["request"]["url"])
                elif message["method"] == "Network.loadingFailed" and not message["params"].get("canceled"):
                    failed.append(message["params"])
            outside = [u for u in requests if urlparse(u).scheme in ("http", "https", "ws", "wss")
                       and urlparse(u).hostname not in ("127.0.0.1", "localhost")]
            assert outside == [], (name, outside[:3])
            assert failed == [], (name, failed[:3])
            errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == [], (name, errors[:3])
            report[name] = {"requests": len(requests), "images": len(images), "charts": charts, "math": len(maths)}
            if name in ("02_attention.html", "07_decoding.html"):
                browser.save_screenshot(str(SCREENSHOTS / name.replace(".html", ".png")))
        # the search box finds a section of chapter 5
        browser.get(f"{base}/index.html")
        box = browser.find_element("id", "search")
        box.send_keys("label smoothing")
        WebDriverWait(browser, 20).until(lambda b: b.find_elements("css selector", "#search-results a"))
        links = [a.get_attribute("href") for a in browser.find_elements("css selector", "#search-results a")]
        assert any("/05_training.html#" in link for link in links), links
    finally:
        browser.quit()
    (SCREENSHOTS / "report.json").write_text(json.dumps(report, indent=1))
    assert len(report) == len(pages) + 1
    assert sum(r["charts"] for r in report.values()) >= 1
    assert (SCREENSHOTS / "02_attention.png").stat().st_size > 10_000
