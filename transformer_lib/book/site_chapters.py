# Hand-written tool module (not generated from a notebook).
"""A chapter as its website page shows it (transformer_lib.book.site): a copy of the notebook without the exporter's
`#|` lines, raw cells or metadata other than the kernel's, attachments and figures written into the site's _static/
(each figure with its alt text from notebooks/alt_text.yml and a link to its full size, each chart with its vega-lite
spec), every output checked to load nothing from outside the site.
"""
from __future__ import annotations

import base64
import html
import json
import math
import os
import re
from pathlib import Path

import nbformat
import yaml

from transformer_lib.book.prose import DEEPER_HEADING
from transformer_lib.book.site_markdown import _check_markdown, _markdown, _Place
from transformer_lib.book.site_policy import refused, svg_as_png
from transformer_lib.book.site_safety import _MEDIA, SiteError, _address, _hrefs, _source, _write, svg_loads

__all__ = ["ALT_TEXT_FILE", "VEGALITE_MIMES"]

ALT_TEXT_FILE = "notebooks/alt_text.yml"
VEGALITE_MIMES = ("application/vnd.vegalite.v6.json", "application/vnd.vegalite.v6+json",
                  "application/vnd.vegalite.v5+json")


# ------------------------------------------------------------------------------------------------ chapters
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_CELL_ID = re.compile(r"[A-Za-z0-9_-]+")
_SAFE_OUTPUTS = {"text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/svg+xml",
                 *VEGALITE_MIMES}


# matplotlib's font sizes by name, in points (its default font.size is 10)
_NAMED_SIZES = {"xx-small": 5.79, "x-small": 6.94, "small": 8.33, "medium": 10.0, "large": 12.0, "x-large": 14.4,
                "xx-large": 17.28}
_FONT_SIZE = re.compile(r"""fontsize\s*[=(]\s*(?:([0-9.]+)|["']([a-z-]+)["'])""")


def _plot_width(png: bytes, source: str) -> int | None:
    """The narrowest width, in CSS pixels, at which a matplotlib plot shows its smallest text READABLE_PX tall: the
    smallest size the cell's source gives (`fontsize=7`, `set_fontsize(9)`, "small") or matplotlib's default of 10
    points, at the dpi the PNG carries. None for a picture matplotlib did not write."""
    import io

    from PIL import Image

    from transformer_lib.diagrams import READABLE_PX

    image = Image.open(io.BytesIO(png))
    if not str(image.info.get("Software", "")).startswith("Matplotlib"):
        return None
    sizes = [float(n) if n else _NAMED_SIZES.get(name, 10.0) for n, name in _FONT_SIZE.findall(source)]
    dpi = round(float(image.info.get("dpi", (100,))[0]), 1)  # PNG keeps pixels a metre: 100 dpi reads 99.9998
    smallest = min(sizes + [10.0]) * dpi / 72  # points to the PNG's pixels
    return math.ceil(round(image.width * READABLE_PX / smallest, 6))


def _figure_html(png_b64: str, site: Path, to_static: str, name: str, alt: str, chart: dict | None = None,
                 source: str = "") -> str:
    """An output's figure as a file in _static/figures and the HTML that shows it, linked to its full size. A chart
    also has its spec written to _static/charts/<name>.js, which site.js loads and draws over the picture (the page
    holds the chart's name, data-chart, never a script). `to_static`: the page's way to _static/. A plot fits its
    column; its full-size view (site.js) is at least as wide as its smallest text needs to be READABLE_PX tall
    (`source`: its cell's code), a width it carries as data-readable."""
    png = base64.b64decode(png_b64)
    _write(site, f"_static/figures/{name}", png)
    src = f"{to_static}/figures/{name}"
    width = None if chart is not None else _plot_width(png, source)
    readable = f' data-readable="{width}"' if width else ""
    img = (f'<a class="tb-figure-link" href="{src}" title="Open the figure at full size">'
           f'<img class="tb-figure" src="{src}" alt="{html.escape(alt, quote=True)}" loading="lazy"{readable}></a>')
    if chart is None:
        return f'<div class="tb-figure-box">{img}</div>'
    stem = Path(name).stem
    _write(site, f"_static/charts/{stem}.js", "window.tbCharts = window.tbCharts || {};\n"
           f"window.tbCharts[{json.dumps(stem)}] = {json.dumps(chart)};\n")
    return (f'<div class="tb-chart" role="figure" aria-label="{html.escape(alt, quote=True)}" data-chart="{stem}">'
            f'{img}</div>')


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _chapter(nb, where: str, alt: dict, site: Path, place: _Place, site_pages: set[str]):
    """A copy of the chapter as its page shows it; returns (notebook, figures)."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))  # a deep copy
    # only what the page needs: other metadata (myst options, widget state) would change how MyST builds the page
    nb.metadata = {k: nb.metadata[k] for k in ("kernelspec", "language_info") if k in nb.metadata}
    stem = re.sub(r"[^A-Za-z0-9_.-]", "-", Path(where).stem)
    to_static = place.from_page("_static")
    cells, figures = [], 0
    for index, cell in enumerate(nb.cells):
        cell_id = cell.get("id", "?")
        at = place.at = f"{where} cell {index} (id {cell_id})"
        cell.metadata = {"tags": list(cell.metadata["tags"])} if isinstance(cell.metadata.get("tags"), list) else {}
        if cell.cell_type not in ("markdown", "code"):
            continue  # raw cells are not part of the reading (and would pass their text to the page as is)
        if not isinstance(cell_id, str) or not _CELL_ID.fullmatch(cell_id):
            raise SiteError(f"{at}: the cell id {cell_id!r} is not letters, digits, - and _; give the cell a plain id")
        if cell.cell_type == "markdown":
            source = _markdown(cell.source, place)
            for name, bundle in (cell.pop("attachments", None) or {}).items():
                if not isinstance(name, str) or not _PLAIN_NAME.fullmatch(name) or name.strip(".") == "":
                    raise SiteError(f"{at}: the attachment {name!r} is not a plain file name (letters, digits, "
                                    ". - _); rename it")
                mime = next((m for m in ("image/png", "image/svg+xml", "image/jpeg") if m in bundle), None)
                if mime is None or f"attachment:{name}" not in source:
                    continue
                data = _text(bundle[mime])
                if mime == "image/svg+xml" and (found := svg_loads(data)):
                    raise SiteError(f"{at}: the attachment {name} loads {', '.join(found[:4])}; a page loads "
                                    "nothing from outside the site")
                site_path = f"_static/attachments/{stem}/{cell_id}/{name}"
                if mime == "image/svg+xml":  # published as a picture only (site_policy)
                    picture, site_path = svg_as_png(data, f"{at}: the attachment {name}"), site_path + ".png"
                else:
                    picture = base64.b64decode(data)
                _write(site, site_path, picture)
                source = source.replace(f"attachment:{name}", place.from_page(site_path))
            if m := re.search(r"attachment:([^()\s]+)", source):
                raise SiteError(f"{at}: the picture {m.group(1)} is not attached to its cell")
            _check_markdown(source, place, at, site_pages)
            cell.source = source
        elif cell.cell_type == "code":
            lines = cell.source.splitlines()
            if any(line.startswith(("#| default_exp", "#| hide")) for line in lines):
                continue  # the install cell, or a cell not meant for the page
            cell.source = "\n".join(line for line in lines if not line.startswith("#| ")).strip("\n")
            texts, n = alt.get(cell_id, []), 0
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                unknown = sorted(set(data) - _SAFE_OUTPUTS)
                if unknown:
                    raise SiteError(f"{at}: an output of type {unknown[0]}, which the site does not show (scripts "
                                    "and widgets would load code); clear it")
                _check_output(data, place, at, site_pages)
                svg = data.pop("image/svg+xml", None)  # published as a picture only (site_policy)
                if svg is not None and "image/png" not in data:
                    png = svg_as_png(_text(svg), f"{at}: an output (image/svg+xml)")
                    data["image/png"] = base64.b64encode(png).decode()
                if "image/png" not in data:
                    continue
                if n >= len(texts) or not str(texts[n]).strip():
                    raise SiteError(f"{at}: figure {n + 1} has no alt text; add it under {where}: "
                                    f"'{cell_id}' in {ALT_TEXT_FILE}")
                chart = next((data[m] for m in VEGALITE_MIMES if m in data), None)
                output["data"] = {"text/html": _figure_html(_text(data["image/png"]), site, to_static,
                                                            f"{stem}-{cell_id}-{n}.png", str(texts[n]), chart,
                                                            cell.source)}
                output["metadata"] = {}
                n, figures = n + 1, figures + 1
            if n < len(texts):
                raise SiteError(f"{ALT_TEXT_FILE}: {where} '{cell_id}' has {len(texts)} alt texts for "
                                f"{n} figures")
        cells.append(cell)
    unknown = sorted(set(alt) - {cell.get("id") for cell in nb.cells})
    if unknown:
        raise SiteError(f"{ALT_TEXT_FILE}: {where} has no cell {', '.join(map(repr, unknown))}; remove its alt text "
                        "or give it the id of the cell that draws the figure")
    nb.cells = _fold_deeper(cells, where)
    return nb, figures




def _fold_deeper(cells: list, where: str) -> list:
    """Mark where each run of `deeper` cells ends, for site.js to fold it closed under its `Deeper:` heading. A
    `Deeper:` heading at the level of the run's own, or above it, ends the run and opens the next: two deeper
    sections in a row fold apart."""
    out, inside, level = [], None, 0
    for cell in cells:
        deeper = "deeper" in cell.metadata.get("tags", [])
        first = cell.source.split("\n", 1)[0] if cell.cell_type == "markdown" else ""
        heading, depth = DEEPER_HEADING.match(first), len(first) - len(first.lstrip("#"))
        if deeper and inside is not None and heading and depth <= level:
            out.append(_deeper_end(inside))
            inside = None
        if deeper and inside is None:
            if not heading:
                raise SiteError(f"{where} cell id {cell.get('id')}: a run of cells tagged deeper must open with a "
                                "Markdown cell whose first line is a heading '## Deeper: what it proves'")
            inside, level = cell.get("id"), depth
        elif not deeper and inside is not None:
            out.append(_deeper_end(inside))
            inside = None
        out.append(cell)
    if inside is not None:
        out.append(_deeper_end(inside))
    return out


def _deeper_end(opened_by: str):
    return nbformat.v4.new_markdown_cell(f'<div class="tb-deeper-end" data-opened-by="{opened_by}"></div>',
                                         id=f"{opened_by}-end")


def _check_output(data: dict, place: _Place, at: str, site_pages: set[str]) -> None:
    """An output's HTML, SVG and Markdown load nothing and link nowhere outside; Markdown links are rewritten."""
    for mime in ("text/html", "image/svg+xml"):
        if mime in data:
            text = _text(data[mime])
            if mime == "image/svg+xml" and (found := svg_loads(text)):
                raise SiteError(f"{at}: an output (image/svg+xml) that names {', '.join(found[:4])} outside itself; "
                                "a picture draws only from what it holds")
            if mime == "text/html" and (found := refused(text)):
                raise SiteError(f"{at}: an output (text/html) with what the site's allowlist leaves out: "
                                f"{', '.join(found[:4])}; a page shows and loads only what the allowlist keeps")
            links, pictures = _hrefs(text)
            if mime == "text/html" and (found := [a for a in pictures if not _MEDIA.match(_address(a))]):
                raise SiteError(f"{at}: an output (text/html) shows the picture {found[0]}; an output's pictures are "
                                "data: pictures")
            for href in links:
                if not re.match(r"^(?:https?:|mailto:|#|$)", _address(href), re.I):
                    raise SiteError(f"{at}: an output ({mime}) links to {href}; outputs link only to web addresses "
                                    "and anchors")
    if "text/markdown" in data:
        data["text/markdown"] = _markdown(_text(data["text/markdown"]), place, at, site_pages)


def _read_notebook(book, name: str):
    if not os.path.lexists(book.root / name):
        raise SiteError(f"{name} is listed in book.yml but missing; restore it (git checkout -- {name}) or remove it "
                        "from book.yml; the old site was left as it was")
    path = _source(book, name)
    try:
        return nbformat.read(path, as_version=4)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise SiteError(f"{name} is not a notebook nbformat can read ({type(err).__name__}: {str(err)[:200]}); "
                        "restore it from git; the old site was left as it was") from None


def _alt_texts(book) -> dict:
    try:
        data = yaml.safe_load(_source(book, ALT_TEXT_FILE).read_text(encoding="utf-8")) or {}
    except SiteError:
        raise SiteError(f"{ALT_TEXT_FILE} is missing: it holds the alt text of every figure the chapters draw") from None
    except yaml.YAMLError as err:
        raise SiteError(f"{ALT_TEXT_FILE} is not valid YAML: {err}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SiteError(f"{ALT_TEXT_FILE} must map each chapter's notebook to {{cell id: [alt text, ...]}}")
    unknown = set(data) - {c.file for c in book.chapters}
    if unknown:
        raise SiteError(f"{ALT_TEXT_FILE} names notebooks that are not chapters: {', '.join(sorted(unknown))}")
    return {k: {str(cell): v if isinstance(v, list) else [v] for cell, v in cells.items()} for k, cells in data.items()}


def _diagram_widths(book) -> str:
    """CSS giving each diagram of docs/figures/ the width at which its smallest label is READABLE_PX tall, as the
    property --tb-readable (a plot carries its own as data-readable): the diagram fits its column, and its full-size
    view (site.js) is at least that wide."""
    from transformer_lib.diagrams import FIGURES_DIR, READABLE_PX, animation, readable_width

    rules = []
    for svg in sorted((book.root / FIGURES_DIR).glob("*.svg")):
        try:
            width = readable_width(svg.read_text(encoding="utf-8"))
        except ValueError as err:
            raise SiteError(f"{svg.relative_to(book.root).as_posix()}: {err}") from None
        if width is not None:  # a picture without labels keeps the theme's sizing
            rules.append(f'article img[src$="/{svg.stem}.png"] {{ --tb-readable: {width}px; }}')
    for name in sorted(animation.ANIMATIONS):  # an animation's frames: WIDTH wide, no label under SMALL
        width = math.ceil(animation.WIDTH * READABLE_PX / animation.SMALL)
        rules.append(f'article img[src$="/{name}.png"] {{ --tb-readable: {width}px; }}')
    head = f"/* written by the builder: the width at which each diagram's labels are {READABLE_PX} CSS px */\n"
    return (head + "\n".join(rules) + "\n") if rules else ""

