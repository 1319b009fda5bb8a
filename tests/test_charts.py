"""transformer_lib.charts: a chart is stored as its vega-lite spec with a PNG beside it, and a chart with controls
draws its PNG from a static chart that shows what the controls would."""
import base64
import io

import pytest
from PIL import Image

from transformer_lib.charts import CHART_MIME, chart_bundle


def _line(width: int, values: list[dict], **extra) -> dict:
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "width": width, "height": 40,
            "data": {"values": values}, "mark": "line",
            "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"}},
            **extra}


def _png_width(bundle: dict) -> int:
    return Image.open(io.BytesIO(base64.b64decode(bundle["image/png"]))).width


def test_the_png_is_drawn_from_static_and_the_spec_stays_the_interactive_chart():
    slider = {"name": "k", "value": 1, "bind": {"input": "range", "min": 1, "max": 3, "step": 1}}
    interactive = _line(100, [{"x": 0, "y": 0}, {"x": 1, "y": 1}], params=[slider])
    panels = _line(400, [{"x": 0, "y": 0}, {"x": 1, "y": 2}])
    alone, with_static = chart_bundle(interactive), chart_bundle(interactive, static=panels)
    assert with_static[CHART_MIME] == alone[CHART_MIME] == interactive  # JupyterLab and the website draw the controls
    assert _png_width(with_static) > 300 > _png_width(alone)  # GitHub and Colab show the static chart


def test_a_static_that_is_no_chart_is_an_error_naming_it():
    with pytest.raises(TypeError, match="static must be an altair chart or a vega-lite spec"):
        chart_bundle(_line(100, [{"x": 0, "y": 0}]), static="not a chart")
