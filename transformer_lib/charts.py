# Hand-written tool module (not generated from a notebook).
"""Interactive charts that show everywhere: the vega-lite spec under its own mime type, and a PNG beside it.

    from transformer_lib.charts import show
    show(chart)                  # an altair chart, or a vega-lite spec as a dict
    show(chart, static=panels)   # the PNG drawn from `panels`: what the interaction would show, side by side

JupyterLab draws the spec (interactive: sliders, tooltips); GitHub's notebook viewer, which runs no JavaScript, and
Colab show the PNG; the book's website (`python -m transformer_lib.book html`) draws the spec with a vega bundle it
ships. Nothing is fetched from a CDN. The PNG is rendered offline by vl-convert; where vl-convert is not installed,
the output carries the spec alone.

A slider's chart drawn as a picture shows one setting of the slider and hides the rest. So a chart with controls
passes `static`: a chart without them whose picture shows what the controls would (small multiples, several settings
in one image, axes fitted to the data). The spec stays the interactive chart; the PNG beside it is `static`'s.
"""
from __future__ import annotations

import base64
import csv
import io

__all__ = ["CHART_MIME", "compact", "chart_bundle", "show"]

# the vega-lite mime type JupyterLab 4 renders (altair 6 writes its specs for Vega-Lite 6, which draws them the same)
CHART_MIME = "application/vnd.vegalite.v5+json"


def compact(spec: dict) -> dict:
    """The spec with each table of rows altair stores (`datasets`) written inline as one CSV string.

    The chart is the same; the notebook is not: a notebook file puts every value of a JSON list on a line of its
    own, so 3,000 rows of 7 fields are some 20,000 lines, and as CSV they are one."""
    datasets = spec.get("datasets", {})
    tables = {name: rows for name, rows in datasets.items() if rows and isinstance(rows, list)
              and all(isinstance(r, dict) and list(r) == list(rows[0])
                      and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in r.values())
                      for r in rows)}
    if not tables:
        return spec

    def csv_text(rows):
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()

    def inline(node):
        if isinstance(node, dict):
            data = node.get("data")
            if isinstance(data, dict) and set(data) == {"name"} and data["name"] in tables:
                rows = tables[data["name"]]
                parse = {k: "number" for k, v in rows[0].items() if isinstance(v, (int, float))}
                node = {**node, "data": {"values": csv_text(rows), "format": {"type": "csv", "parse": parse}}}
            return {k: inline(v) if k != "datasets" else v for k, v in node.items()}
        return [inline(v) for v in node] if isinstance(node, list) else node

    out = inline(spec)
    out["datasets"] = {k: v for k, v in datasets.items() if k not in tables}
    if not out["datasets"]:
        del out["datasets"]
    return out


def _spec(name: str, chart) -> dict:
    spec = chart if isinstance(chart, dict) else getattr(chart, "to_dict", lambda: None)()
    if not isinstance(spec, dict):
        raise TypeError(f"{name} must be an altair chart or a vega-lite spec (dict), got {type(chart).__name__}")
    return compact(spec)


def chart_bundle(chart, png_scale: float = 1.0, static=None) -> dict:
    """The mime bundle `show` displays: {CHART_MIME: spec, "image/png": base64 (with vl-convert), "text/plain"}.

    The PNG is drawn from `static` (an altair chart or a spec) where given, else from `chart`."""
    spec = _spec("chart", chart)
    picture = spec if static is None else _spec("static", static)
    bundle = {CHART_MIME: spec, "text/plain": "<an interactive vega-lite chart: JupyterLab draws it>"}
    try:
        import vl_convert
    except ImportError:
        return bundle
    png = vl_convert.vegalite_to_png(picture, scale=png_scale)
    bundle["image/png"] = base64.b64encode(png).decode("ascii")
    return bundle


def show(chart, png_scale: float = 1.0, static=None) -> None:
    """Display `chart` in a notebook as its vega-lite spec with a PNG beside it, drawn from `static` where given
    (see the module's docstring)."""
    from IPython.display import display

    display(chart_bundle(chart, png_scale, static), raw=True)
