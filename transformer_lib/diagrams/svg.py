# Hand-written tool module (not generated from a notebook).
"""The book's drawing kit: a small SVG canvas with one palette, one font and the book's names on the arrows.

Every diagram of the book is a function that draws on a `Drawing` and returns it; `Drawing.svg()` writes plain SVG
text, rounded to a tenth of a pixel, so the same source gives the same file on every machine. Text is measured with
the DejaVu Sans font matplotlib ships, the font the pictures are drawn in.

Parts of the model keep one colour everywhere (`PARTS`): embeddings amber, attention salmon, feed-forward blue,
add & norm yellow, the output layer lavender, tensors grey, masks teal, padding pale red.
"""
from __future__ import annotations

import functools
import html
import math
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PARTS", "INK", "MUTED", "ACCENT", "FONT", "MONO", "Box", "Drawing", "text_width"]

FONT = "DejaVu Sans"
MONO = "DejaVu Sans Mono"
INK = "#222222"  # text and outlines
MUTED = "#777777"  # secondary text, dimmed parts
ACCENT = "#C0392B"  # the highlight of "where we are", the path a picture follows
BACKGROUND = "#FFFFFF"

# part -> (fill, stroke); the same part has the same colour in every picture of the book
PARTS = {
    "embed": ("#FBE3B0", "#B7791F"),
    "attention": ("#F8C4B4", "#B5452E"),
    "ffn": ("#BFE1F2", "#2A77A0"),
    "norm": ("#EDE8A8", "#8F861C"),
    "output": ("#DDD3F1", "#6A55A8"),
    "tensor": ("#ECECEC", "#666666"),
    "mask": ("#9FD8CE", "#2C8374"),
    "plain": ("#FFFFFF", "#444444"),
    "note": ("#FFF8E7", "#B7791F"),
    "padding": ("#F6D5D1", "#B5452E"),  # padding positions: what a batch wastes
}


@functools.lru_cache(maxsize=4)
def _font(mono: bool):
    import matplotlib
    from matplotlib.ft2font import FT2Font

    name = "DejaVuSansMono.ttf" if mono else "DejaVuSans.ttf"
    return FT2Font(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / name))


def text_width(text: str, size: float = 13, mono: bool = False) -> float:
    """The width in pixels of one line of text in the book's font."""
    if not text:
        return 0.0
    font = _font(mono)
    font.set_size(size, 72)  # at 72 dpi a point is a pixel
    font.set_text(text, 0.0)
    return font.get_width_height()[0] / 64


def _n(v: float) -> str:
    """A coordinate rounded to a tenth, without a trailing .0."""
    v = round(float(v), 1)
    return str(int(v)) if v == int(v) else f"{v:.1f}"


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    @property
    def top(self) -> tuple[float, float]:
        return (self.cx, self.y)

    @property
    def bottom(self) -> tuple[float, float]:
        return (self.cx, self.y + self.h)

    @property
    def left(self) -> tuple[float, float]:
        return (self.x, self.cy)

    @property
    def right(self) -> tuple[float, float]:
        return (self.x + self.w, self.cy)

    @property
    def x2(self) -> float:
        return self.x + self.w

    @property
    def y2(self) -> float:
        return self.y + self.h


class Drawing:
    """A canvas `width` x `height` pixels; methods add shapes and return what they drew."""

    def __init__(self, width: float, height: float, title: str):
        self.width, self.height, self.title = width, height, title
        self._items: list[str] = []

    # ---- primitives

    def _add(self, element: str) -> None:
        self._items.append(element)

    def text(self, x, y, s, size=13, anchor="middle", weight="normal", mono=False, color=INK, italic=False,
             baseline="central", rotate=None):
        """One line of text centred (anchor="middle"), started ("start") or ended ("end") at x; y is its middle."""
        family = MONO if mono else FONT
        extra = ' font-style="italic"' if italic else ""
        extra += f' font-weight="{weight}"' if weight != "normal" else ""
        extra += f' transform="rotate({_n(rotate)} {_n(x)} {_n(y)})"' if rotate else ""
        # a central baseline is written as a shift of a third of the size, which every renderer draws the same
        dy = size * 0.35 if baseline == "central" else 0
        self._add(f'<text x="{_n(x)}" y="{_n(y + dy)}" font-family="{family}" font-size="{_n(size)}" '
                  f'text-anchor="{anchor}" fill="{color}"{extra}>{html.escape(str(s))}</text>')

    def rect(self, x, y, w, h, fill, stroke=INK, width=1.2, rx=0.0, dash=None, opacity=None):
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        extra += f' opacity="{opacity}"' if opacity is not None else ""
        self._add(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="{_n(rx)}" fill="{fill}" '
                  f'stroke="{stroke}" stroke-width="{_n(width)}"{extra}/>')
        return Box(x, y, w, h)

    def circle(self, x, y, r, fill, stroke=INK, width=1.2):
        self._add(f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{_n(r)}" fill="{fill}" stroke="{stroke}" '
                  f'stroke-width="{_n(width)}"/>')
        return Box(x - r, y - r, 2 * r, 2 * r)

    def path(self, d: str, stroke=INK, width=1.4, fill="none", dash=None):
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self._add(f'<path d="{d}" fill="{fill}" stroke="{stroke}" stroke-width="{_n(width)}"{extra}/>')

    def polyline(self, points, stroke=INK, width=1.4, dash=None, fill="none"):
        d = "M " + " L ".join(f"{_n(x)} {_n(y)}" for x, y in points)
        self.path(d, stroke=stroke, width=width, dash=dash, fill=fill)

    # ---- the book's shapes

    def box(self, x, y, w, h, label=None, part="plain", sub=None, size=13, mono=False, dim=False,
            highlight=False, rx=6, weight="normal"):
        """A rounded box in the colour of `part`, with a label and an optional second line `sub` (smaller, grey).

        dim: drawn faded (the parts a "where we are" map does not point at); highlight: outlined in the accent.
        """
        fill, stroke = PARTS[part]
        opacity = 0.3 if dim else None
        self.rect(x, y, w, h, fill, ACCENT if highlight else stroke, width=3 if highlight else 1.3, rx=rx,
                  opacity=opacity)
        color = MUTED if dim else INK
        if label is not None and sub is not None:
            self.text(x + w / 2, y + h / 2 - size * 0.55, label, size=size, mono=mono, color=color, weight=weight)
            self.text(x + w / 2, y + h / 2 + size * 0.62, sub, size=size - 2, mono=True, color=MUTED)
        elif label is not None:
            self.text(x + w / 2, y + h / 2, label, size=size, mono=mono, color=color, weight=weight)
        return Box(x, y, w, h)

    def arrow(self, points, label=None, side="right", color=INK, width=1.4, dash=None, size=11.5, head=8,
              label_at=0.5, mono=True):
        """A line through `points` with an arrow head at the last one; `label` (a shape such as (B, L, d_model))
        is written beside the segment at `label_at` of the way, on `side` (right, left, above, below)."""
        points = [tuple(map(float, p)) for p in points]
        (x1, y1), (x2, y2) = points[-2], points[-1]
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        ux, uy = (x2 - x1) / length, (y2 - y1) / length
        tip = (x2, y2)
        base = (x2 - ux * head, y2 - uy * head)
        self.polyline(points[:-1] + [base] if head else points, stroke=color, width=width, dash=dash)
        if head:
            px, py = -uy * head * 0.45, ux * head * 0.45
            self.path(f"M {_n(tip[0])} {_n(tip[1])} L {_n(base[0] + px)} {_n(base[1] + py)} "
                      f"L {_n(base[0] - px)} {_n(base[1] - py)} Z", stroke=color, width=1, fill=color)
        if label:
            segments = list(zip(points[:-1], points[1:]))
            (ax, ay), (bx, by) = max(segments, key=lambda s: math.hypot(s[1][0] - s[0][0], s[1][1] - s[0][1]))
            mx, my = ax + (bx - ax) * label_at, ay + (by - ay) * label_at
            gap = 6
            if side == "right":
                self.text(mx + gap, my, label, size=size, anchor="start", mono=mono, color=MUTED)
            elif side == "left":
                self.text(mx - gap, my, label, size=size, anchor="end", mono=mono, color=MUTED)
            elif side == "above":
                self.text(mx, my - size * 0.9, label, size=size, mono=mono, color=MUTED)
            else:
                self.text(mx, my + size * 0.9, label, size=size, mono=mono, color=MUTED)

    def plus(self, x, y, r=10, dim=False):
        """The residual addition: a circle with a plus."""
        self.circle(x, y, r, "#FFFFFF", stroke=MUTED if dim else INK)
        self.polyline([(x - r * 0.55, y), (x + r * 0.55, y)], width=1.4, stroke=MUTED if dim else INK)
        self.polyline([(x, y - r * 0.55), (x, y + r * 0.55)], width=1.4, stroke=MUTED if dim else INK)
        return Box(x - r, y - r, 2 * r, 2 * r)

    def grid(self, x, y, values, cell=18, colors=None, labels=None, stroke="#FFFFFF", fmt=None, size=10.5):
        """A matrix of cells: values[i][j] picks colors[value] (or a shade of grey for a float in [0, 1]);
        labels[i][j], or fmt(value), is written in a cell. Returns the bounding box."""
        for i, row in enumerate(values):
            for j, v in enumerate(row):
                if colors is not None:
                    fill = colors[v]
                else:
                    fill = shade(float(v))
                cx, cy = x + j * cell, y + i * cell
                self.rect(cx, cy, cell, cell, fill, stroke=stroke, width=1)
                text = labels[i][j] if labels is not None else (fmt(v) if fmt else None)
                if text not in (None, ""):
                    dark = colors is None and float(v) > 0.55
                    self.text(cx + cell / 2, cy + cell / 2, text, size=size, color="#FFFFFF" if dark else INK)
        rows, cols = len(values), len(values[0]) if values else 0
        return Box(x, y, cols * cell, rows * cell)

    def brace(self, x1, y, x2, label=None, below=True, size=11.5, mono=True):
        """A square bracket under (or over) the span x1..x2 with a label: which axis a block of cells is."""
        d = 6 if below else -6
        self.polyline([(x1, y), (x1, y + d), (x2, y + d), (x2, y)], stroke=MUTED, width=1.2)
        if label:
            self.text((x1 + x2) / 2, y + d + (size * 0.9 if below else -size * 0.9), label, size=size, mono=mono,
                      color=MUTED)

    def legend(self, x, y, entries, size=12):
        """Colour swatches with their meaning, in a row from (x, y); entries are (part or colour, label)."""
        for key, label in entries:
            fill, stroke = PARTS.get(key, (key, INK))
            self.rect(x, y - 7, 14, 14, fill, stroke=stroke, width=1, rx=3)
            self.text(x + 20, y, label, size=size, anchor="start")
            x += 34 + text_width(label, size)
        return x

    # ---- output

    def svg(self) -> str:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(self.width)}" height="{_n(self.height)}" '
                f'viewBox="0 0 {_n(self.width)} {_n(self.height)}" role="img">')
        body = "\n".join(self._items)
        return (f"{head}\n<title>{html.escape(self.title)}</title>\n"
                f'<rect width="100%" height="100%" fill="{BACKGROUND}"/>\n{body}\n</svg>\n')


def shade(v: float) -> str:
    """A float in [0, 1] as a blue from white (0) to dark (1): the one colour scale for weights and values."""
    v = min(max(v, 0.0), 1.0)
    low, high = (247, 251, 255), (8, 69, 148)
    r, g, b = (round(lo + (hi - lo) * v) for lo, hi in zip(low, high))
    return f"#{r:02X}{g:02X}{b:02X}"
