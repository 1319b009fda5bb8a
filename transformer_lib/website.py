# Hand-written tool module (not generated from a notebook).
"""The book as a static website, built from the committed notebooks without running them and without a network.

    python -m transformer_lib.book html [--out site]

One page per chapter, in book.yml's order, and an index page: navigation, code, outputs and figures as the
committed notebooks hold them, equations as MathML (converted here, so the browser needs no MathJax), interactive
vega-lite charts drawn by a vega bundle written beside the pages, and a search box over the chapters' headings and
text. The pages load nothing from outside the site, so it reads the same offline and on any static host.

Why not Jupyter Book: its 1.x builds offline but loads MathJax and vega from CDNs unless they are vendored by hand, and
its 2.x fetches a theme at build time. nbconvert (already installed with Jupyter) renders the notebooks; the rest is
this file.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

__all__ = ["VEGALITE_MIMES", "SiteError", "Page", "build_site", "tex_to_mathml", "markdown_math_to_mathml"]

# the vega-lite mime types a chart output may carry, newest first (transformer_lib.charts writes v5, which
# JupyterLab 4 renders; altair 6's own renderer writes v6)
VEGALITE_MIMES = ("application/vnd.vegalite.v6.json", "application/vnd.vegalite.v6+json",
                  "application/vnd.vegalite.v5+json")
TEMPLATE_DIR = Path(__file__).parent / "site_template"
MARKER = ".transformer-book-site"  # a folder holding it may be replaced by the next build


class SiteError(ValueError):
    """A notebook the site cannot render as promised (an equation MathML cannot express, a chart that loads from a
    CDN); the message names the chapter and the cell."""


@dataclass(frozen=True)
class Page:
    file: str  # e.g. 01_embeddings.html
    title: str  # e.g. "1. Embeddings"
    chapter: str  # the notebook, e.g. notebooks/01_embeddings.ipynb
    charts: int  # interactive charts on the page
    equations: int


# ------------------------------------------------------------------------------------------------ equations
_FENCE = re.compile(r"(^```.*?^```[^\n]*$)", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$])\$(?!\s)([^$\n]+?)(?<![\s\\])\$(?!\$)")


def tex_to_mathml(tex: str, display: bool = False) -> str:
    """One TeX formula as a MathML element (latex2mathml); ValueError where it cannot be converted."""
    from latex2mathml.converter import convert

    try:
        return convert(tex.strip(), display="block" if display else "inline")
    except Exception as err:  # latex2mathml raises its own exception types for commands it does not know
        raise ValueError(f"cannot convert ${tex}$ to MathML: {type(err).__name__}: {err}") from None


def markdown_math_to_mathml(text: str) -> tuple[str, int]:
    """Markdown with its $...$ and $$...$$ (outside code) replaced by MathML; returns (text, formulas converted)."""
    count = 0

    def convert_text(part: str) -> str:  # code spans stay as they are
        out, last = [], 0
        for m in _CODE_SPAN.finditer(part):
            out += [convert_math(part[last:m.start()]), m.group(0)]
            last = m.end()
        return "".join(out + [convert_math(part[last:])])

    def convert_math(part: str) -> str:
        def display(m):
            nonlocal count
            count += 1
            return "\n\n" + tex_to_mathml(m.group(1), display=True) + "\n\n"

        def inline(m):
            nonlocal count
            count += 1
            return tex_to_mathml(m.group(1))

        return _INLINE.sub(inline, _DISPLAY.sub(display, part))

    parts = _FENCE.split(text)
    return "".join(p if i % 2 else convert_text(p) for i, p in enumerate(parts)), count


# ------------------------------------------------------------------------------------------------ one chapter
_BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\(([^)]+)\)")
_MD_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*((?:https?:)?//[^)\s]+)")
# tags whose src or href the browser fetches by itself (a link <a href> is fetched only when followed)
_REQUEST = re.compile(r"<(?:script|img|link|iframe|source|video|audio|embed|object)\b[^>]*?"
                      r"(?:src|href|data)\s*=\s*[\"']?((?:https?:)?//[^\"'\s>]+)", re.I)


def _script_url(text: str):
    """The first address a script in `text` mentions (a script that may fetch it), as a match; None if none."""
    for script in re.findall(r"<script\b[^>]*>(.*?)</script>", text, re.S | re.I):
        if m := re.search(r"[\"'`]((?:https?:)?//[^\"'`\s]+)", script):
            return m
    return None


def _chart_html(spec: dict, png: str | None, n: int) -> str:
    """A div site.js draws the chart into; the PNG inside shows until then, and where JavaScript is off."""
    img = f'<img class="chart-fallback" alt="the chart, as a picture" src="data:image/png;base64,{png}">' if png else ""
    data = json.dumps(spec).replace("</", "<\\/")  # no "</script>" inside the script element
    return f'<div class="vega-chart" id="chart-{n}">{img}<script type="application/json">{data}</script></div>'


def _prepare(nb, where: str) -> tuple[object, int, int]:
    """A copy of the notebook as the page shows it; returns (notebook, charts, equations)."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))  # a deep copy
    cells, charts, equations = [], 0, 0
    for index, cell in enumerate(nb.cells):
        at = f"{where} cell {index}"
        if cell.cell_type == "code":
            lines = cell.source.splitlines()
            if any(line.startswith(("#| default_exp", "#| hide")) for line in lines):
                continue  # the install cell (or a cell not meant for the page)
            cell.source = "\n".join(line for line in lines if not line.startswith("#| ")).strip("\n")
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                mime = next((m for m in VEGALITE_MIMES if m in data), None)
                if mime:
                    charts += 1
                    output["data"] = {"text/html": _chart_html(data[mime], data.get("image/png"), charts)}
                    output["metadata"] = {}
                elif "text/html" in data and (_REQUEST.search(data["text/html"]) or _script_url(data["text/html"])):
                    url = (_REQUEST.search(data["text/html"]) or _script_url(data["text/html"])).group(1)
                    raise SiteError(f"{at}: an HTML output loads {url}; a chart must carry its vega-lite spec "
                                    "(transformer_lib.charts.show), not a page that fetches vega from a CDN. "
                                    "Re-run the chapter.")
        elif cell.cell_type == "markdown":
            source = _BADGE.sub(r'<a class="colab" href="\1">Open in Colab</a>', cell.source)
            if _MD_IMAGE.search(source):
                raise SiteError(f"{at}: an image from {_MD_IMAGE.search(source).group(1)}; a page loads nothing "
                                "from outside the site")
            try:
                cell.source, n = markdown_math_to_mathml(source)
            except ValueError as err:
                raise SiteError(f"{at}: {err}") from None
            equations += n
        cells.append(cell)
    nb.cells = cells
    return nb, charts, equations


def _nav(book, pages: list[Page], current: str | None) -> str:
    items = "".join(f'<li class="{"current" if p.file == current else ""}"><a href="{p.file}">'
                    f'{html.escape(p.title.split(". ", 1)[1])}</a></li>' for p in pages)
    return (f'<nav class="site-nav"><a class="site-title" href="index.html">{html.escape(book.title)}</a>'
            '<input id="search" type="search" placeholder="Search the book" aria-label="Search the book">'
            f'<ul id="search-results" class="search-results"></ul><ol>{items}</ol></nav>')


def _pager(pages: list[Page], i: int) -> str:
    prev = f'<a rel="prev" href="{pages[i - 1].file}">&larr; {html.escape(pages[i - 1].title)}</a>' if i else "<span></span>"
    nxt = (f'<a rel="next" href="{pages[i + 1].file}">{html.escape(pages[i + 1].title)} &rarr;</a>'
           if i + 1 < len(pages) else '<a href="index.html">Contents</a>')
    return f'<nav class="site-pager">{prev}{nxt}</nav>'


def _sections(page_html: str, page: Page) -> list[dict]:
    """The search index's entries for one page: each heading with its section's text, lowercased."""
    from bs4 import BeautifulSoup

    main = BeautifulSoup(page_html, "html.parser").find("main")
    entries, current = [], None
    for element in main.find_all(["h1", "h2", "h3", "p", "li", "td"]):
        if element.name in ("h1", "h2", "h3") and element.get("id"):
            heading = element.get_text(" ", strip=True).rstrip("¶").strip()
            current = {"url": f"{page.file}#{element['id']}", "heading": heading, "chapter": page.title,
                       "text": heading.lower()}
            entries.append(current)
        elif current is not None:
            current["text"] += " " + element.get_text(" ", strip=True).lower()
    return entries


def build_site(book, out: Path, log=print) -> list[Page]:
    """Write the site into `out` (its old contents replaced whole, once the new site is ready): index.html, one page
    per chapter, search.json and assets/. Reads the committed notebooks; runs nothing and fetches nothing. A build
    that fails (a notebook missing or damaged) leaves the old site as it was."""
    from nbconvert import HTMLExporter

    from transformer_lib.files import write_folder_atomically

    start, out = time.perf_counter(), Path(out)
    if out.exists():
        if not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists()):
            raise SiteError(f"{out} exists and is not a site this command built; choose an empty or new folder")
    prepared, pages = [], []
    for number, chapter in enumerate(book.chapters, 1):
        nb, charts, equations = _prepare(_read_notebook(book.root / chapter.file, chapter.file), chapter.file)
        prepared.append(nb)
        pages.append(Page(Path(chapter.file).stem + ".html", f"{number}. {chapter.title}", chapter.file, charts,
                          equations))
    exporter = HTMLExporter(template_name="lab", template_file="site.html.j2", extra_template_paths=[str(TEMPLATE_DIR)],
                            exclude_input_prompt=True, exclude_output_prompt=True)  # embed_images would cut inline MathML apart
    bodies, index = [], []
    for i, (nb, page) in enumerate(zip(prepared, pages)):
        nb.metadata["title"] = f"{page.title} | {book.title}"
        resources = {"site": {"nav": _nav(book, pages, page.file), "pager": _pager(pages, i), "charts": page.charts}}
        body, _ = exporter.from_notebook_node(nb, resources=resources)
        # nbconvert rewrites a heading through ElementTree, which prefixes MathML's tags (ns0:math): undo that
        body = re.sub(r"<(/?)ns\d+:", r"<\1", re.sub(r' xmlns:ns\d+="http://www.w3.org/1998/Math/MathML"', "", body))
        if _REQUEST.search(body):
            raise SiteError(f"{page.chapter}: the page would load {_REQUEST.search(body).group(1)}")
        bodies.append(body)
        index += _sections(body, page)

    def write(folder: Path) -> None:
        (folder / "assets").mkdir()
        (folder / MARKER).write_text("written by python -m transformer_lib.book html; rebuilt (replaced) by it\n")
        for page, body in zip(pages, bodies):
            (folder / page.file).write_text(body, encoding="utf-8")
        _write_index(book, pages, folder)
        (folder / "search.json").write_text(json.dumps(index, ensure_ascii=False), encoding="utf-8")
        for name in ("site.css", "site.js", "favicon.svg"):
            shutil.copy(TEMPLATE_DIR / name, folder / "assets" / name)
        if any(p.charts for p in pages):
            import vl_convert

            (folder / "assets" / "vega.js").write_text(vl_convert.javascript_bundle(), encoding="utf-8")

    out.parent.mkdir(parents=True, exist_ok=True)
    write_folder_atomically(out, write)
    log(f"wrote {len(pages) + 1} pages to {out} in {time.perf_counter() - start:.1f}s "
        f"({sum(p.charts for p in pages)} interactive charts, {sum(p.equations for p in pages)} equations)")
    return pages


def _read_notebook(path: Path, name: str):
    """The committed notebook, or a SiteError naming it."""
    try:
        return nbformat.read(path, as_version=4)
    except FileNotFoundError:
        raise SiteError(f"{name} is listed in book.yml but missing; restore it (git checkout -- {name}) or remove it "
                        "from book.yml; the old site was left as it was") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise SiteError(f"{name} is not a notebook nbformat can read ({type(err).__name__}: {str(err)[:200]}); "
                        "restore it from git; the old site was left as it was") from None


def _write_index(book, pages: list[Page], out: Path) -> None:
    rows = "".join(f'<li><a href="{p.file}">{html.escape(p.title)}</a></li>' for p in pages)
    body = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1.0">'
            f'<title>{html.escape(book.title)}</title><link rel="stylesheet" href="assets/site.css">'
            '<link rel="icon" type="image/svg+xml" href="assets/favicon.svg"></head>'
            f'<body class="site">{_nav(book, pages, None)}<main class="site-main"><h1>{html.escape(book.title)}</h1>'
            '<p>A course that builds the Transformer of "Attention Is All You Need" in PyTorch, one chapter at a time: '
            "each chapter quotes the paper, gives the few lines of code that implement it, and shows the evidence. "
            "These pages are the committed notebooks; to run them, open a chapter in Jupyter or Colab.</p>"
            f'<h2 id="chapters">Chapters</h2><ol class="contents">{rows}</ol></main>'
            '<script src="assets/site.js"></script></body></html>')
    (out / "index.html").write_text(body, encoding="utf-8")
