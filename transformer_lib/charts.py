# Hand-written tool module (not generated from a notebook).
"""Interactive charts that show everywhere: the vega-lite spec under its own mime type, and a PNG beside it.

    from transformer_lib.charts import show
    show(chart)   # an altair chart, or a vega-lite spec as a dict

JupyterLab draws the spec (interactive: sliders, tooltips); GitHub's notebook viewer, which runs no JavaScript,
shows the PNG; the book's website (`python -m transformer_lib.book html`) draws the spec with a vega bundle it
ships. Nothing is fetched from a CDN. The PNG is rendered offline by vl-convert; where vl-convert is not
installed, the output carries the spec alone.
"""
from __future__ import annotations

import base64

__all__ = ["CHART_MIME", "chart_bundle", "show"]

# the vega-lite mime type JupyterLab 4 renders (altair 6 writes its specs for Vega-Lite 6, which draws them the same)
CHART_MIME = "application/vnd.vegalite.v5+json"


def chart_bundle(chart, png_scale: float = 1.0) -> dict:
    """The mime bundle `show` displays: {CHART_MIME: spec, "image/png": base64 (with vl-convert), "text/plain"}."""
    spec = chart if isinstance(chart, dict) else getattr(chart, "to_dict", lambda: None)()
    if not isinstance(spec, dict):
        raise TypeError(f"chart must be an altair chart or a vega-lite spec (dict), got {type(chart).__name__}")
    bundle = {CHART_MIME: spec, "text/plain": "<an interactive vega-lite chart: JupyterLab draws it>"}
    try:
        import vl_convert
    except ImportError:
        return bundle
    png = vl_convert.vegalite_to_png(spec, scale=png_scale)
    bundle["image/png"] = base64.b64encode(png).decode("ascii")
    return bundle


def show(chart, png_scale: float = 1.0) -> None:
    """Display `chart` in a notebook as its vega-lite spec with a PNG beside it (see the module's docstring)."""
    from IPython.display import display

    display(chart_bundle(chart, png_scale), raw=True)
