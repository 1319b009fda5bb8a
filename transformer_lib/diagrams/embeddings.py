# Hand-written tool module (not generated from a notebook).
"""Chapter 1's diagrams: the token embedding as a table lookup, the sinusoidal table added to it, and a shift by k
positions as one rotation per (sin, cos) pair."""
from __future__ import annotations

import math

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, PARTS, Drawing


def _frame(d: Drawing, box, color="#999999", width=1.0):
    """An outline around a grid, so that white (zero) cells still show their edges."""
    d.rect(box.x, box.y, box.w, box.h, "none", stroke=color, width=width)


def _row(token: int, j: int) -> float:
    """A made-up small value for component j of token's row of the table, in [0.12, 0.45]: N(0, 1/d_model) looks
    pale next to the scaled output."""
    return 0.0 if token == 0 else 0.12 + 0.33 * ((token * 37 + j * 11) % 13) / 12


@diagram("ch01-token-embedding", chapter=1)
def token_embedding() -> Drawing:
    d = Drawing(780, 416, "Token embedding: a table lookup scaled by sqrt(d_model)")
    tokens = [5, 42, 7, 0, 0]
    cols = 8
    # ---- the token ids (B = 1, L = 5), one per row
    tx, ty, tc = 60, 90, 34
    d.text(tx + tc / 2, 22, "tokens", size=13)
    d.text(tx + tc / 2, 42, "(B, L)", size=12, mono=True, color=MUTED)
    token_rows = []
    for i, t in enumerate(tokens):
        y = ty + i * 48
        d.rect(tx, y, tc, tc, PARTS["tensor"][0], stroke=PARTS["tensor"][1], rx=3)
        d.text(tx + tc / 2, y + tc / 2, str(t), size=13, mono=True)
        d.text(tx - 10, y + tc / 2, f"{i}", size=11, anchor="end", color=MUTED)
        token_rows.append(y + tc / 2)
    d.text(tx - 10, ty - 14, "pos", size=11, anchor="end", color=MUTED)
    d.text(tx + tc / 2, ty + 5 * 48 + 8, "B = 1, L = 5", size=11, color=MUTED)

    # ---- the table (vocab, d_model): a few of its rows
    gx, cell = 250, 20
    shown = [0, 1, 2, 3, 4, 5, 6, 7, 8, None, 41, 42, 43, None, "vocab - 1"]
    d.text(gx + cols * cell / 2, 22, "embedding.weight", size=13, mono=True)
    d.text(gx + cols * cell / 2, 42, "(vocab, d_model)", size=12, mono=True, color=MUTED)
    y, row_y = 62, {}
    for r in shown:
        if r is None:
            d.text(gx + cols * cell / 2, y + 7, "...", size=12, color=MUTED)
            y += 16
            continue
        token = 99 if r == "vocab - 1" else r
        box = d.grid(gx, y, [[_row(token, j) for j in range(cols)]], cell=cell)
        hit = r in tokens
        _frame(d, box, ACCENT if hit else "#BBBBBB", 2.2 if hit else 0.8)
        d.text(gx - 8, y + cell / 2, str(r), size=11, anchor="end", mono=True, color=INK if hit else MUTED)
        row_y[r] = y + cell / 2
        y += cell
    d.brace(gx, y + 6, gx + cols * cell, "d_model")
    d.text(gx + cols * cell / 2, y + 40, "row 0 = padding_idx: zeros, no gradient", size=11, color=MUTED)
    # token id -> its row
    for i, t in enumerate(tokens):
        d.arrow([(tx + tc + 4, token_rows[i]), (gx - 44, row_y[t])], color=ACCENT, width=1.3, head=7)

    # ---- the output (B, L, d_model): the rows picked, times sqrt(d_model)
    ox = 600
    d.text(ox + cols * cell / 2, 22, "output", size=13)
    d.text(ox + cols * cell / 2, 42, "(B, L, d_model)", size=12, mono=True, color=MUTED)
    for i, t in enumerate(tokens):
        yy = token_rows[i] - cell / 2
        box = d.grid(ox, yy, [[min(1.0, 2.0 * _row(t, j)) for j in range(cols)]], cell=cell)
        _frame(d, box)
        d.text(ox - 8, token_rows[i], f"row {t}", size=11, anchor="end", mono=True, color=MUTED)
    d.brace(ox, token_rows[-1] + cell / 2 + 6, ox + cols * cell, "d_model")
    # one arrow for the whole step: look up, then scale
    ay, mid = token_rows[2] + 24, (gx + cols * cell + ox - 50) / 2
    d.arrow([(gx + cols * cell + 12, ay), (ox - 62, ay)], head=8)
    d.text(mid, ay - 16, "x sqrt(d_model)", size=12, mono=True)
    d.text(mid, ay + 16, "look up, scale", size=11, color=MUTED)
    return d


def _diverging(v: float) -> str:
    """A value in [-1, 1] in the colours of the chapter's heatmap of the table (matplotlib's RdBu): red -1, white 0,
    blue +1."""
    from matplotlib import colormaps

    r, g, b, _ = colormaps["RdBu"]((min(max(v, -1.0), 1.0) + 1) / 2)
    return f"#{round(255 * r):02X}{round(255 * g):02X}{round(255 * b):02X}"


def _pe(pos: int, dim: int, d_model: int) -> float:
    """PE(pos, dim) of section 3.5."""
    angle = pos / 10000 ** ((dim - dim % 2) / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


def _wave(d: Drawing, x, y, w, h, pair, d_model, positions):
    """Dimensions 2i (sin, solid) and 2i + 1 (cos, dashed) over `positions`, in a w x h panel at (x, y)."""
    d.rect(x, y, w, h, "#FAFAFA", stroke="#CCCCCC", width=0.8)
    d.polyline([(x, y + h / 2), (x + w, y + h / 2)], stroke="#DDDDDD", width=0.8)
    for dim, dash in ((2 * pair, None), (2 * pair + 1, "4 3")):
        pts = [(x + w * p / positions, y + h / 2 - (h / 2 - 3) * _pe(p, dim, d_model))
               for p in [q / 4 for q in range(4 * positions + 1)]]
        d.polyline(pts, stroke=PARTS["embed"][1], width=1.6, dash=dash)


@diagram("ch01-positional-encoding", chapter=1)
def positional_encoding() -> Drawing:
    d_model, rows, L = 16, 16, 10
    d = Drawing(800, 540, "The sinusoidal table and how it is added to the token embeddings")
    # ---- the table, first rows
    gx, gy, cell = 80, 84, 15
    values = [[_diverging(_pe(p, j, d_model)) for j in range(d_model)] for p in range(rows)]
    box = d.grid(gx, gy, values, cell=cell, colors={c: c for row in values for c in row})
    _frame(d, box)
    d.text(box.cx, 22, "pe: (1, max_len, d_model)", size=13, mono=True)
    d.text(box.cx, 42, "here d_model = 16", size=11, color=MUTED)
    for i in range(d_model // 2):
        d.brace(gx + 2 * i * cell + 2, gy - 4, gx + (2 * i + 2) * cell - 2, None, below=False)
        d.text(gx + (2 * i + 1) * cell, gy - 20, str(i), size=11, mono=True, color=MUTED)
    d.text(gx - 8, gy - 20, "pair i", size=11, anchor="end", color=MUTED)
    for p in range(0, rows, 3):
        d.text(gx - 8, gy + p * cell + cell / 2, str(p), size=11, anchor="end", mono=True, color=MUTED)
    d.text(gx - 44, box.cy, "pos", size=12, color=MUTED, rotate=-90)
    d.text(box.cx, box.y2 + 12, "...", size=12, color=MUTED)
    d.text(box.cx, box.y2 + 32, "max_len rows in all", size=11, color=MUTED)
    d.text(box.cx, box.y2 + 50, "column 2i: sin, column 2i + 1: cos", size=11, color=MUTED)
    # colour scale: the diverging one of the heatmap below, red -1, white 0, blue +1
    sx, sy = box.cx - 100, box.y2 + 68
    for k in range(11):
        d.rect(sx + k * 200 / 11, sy, 200 / 11, 10, _diverging(-1 + k / 5), stroke="none", width=0)
    d.rect(sx, sy, 200, 10, "none", stroke="#BBBBBB", width=0.8)
    for t, at in (("-1", 0), ("0", 100), ("+1", 200)):
        d.text(sx + at, sy + 22, t, size=11, color=MUTED)
    # the first L rows are what a sequence of length L gets
    bx, y_end = box.x2 + 6, gy + L * cell
    d.polyline([(bx, gy), (bx + 7, gy), (bx + 7, y_end), (bx, y_end)], stroke=ACCENT, width=1.6)
    d.text(bx + 12, gy + 10, "first L rows", size=11, anchor="start", color=ACCENT)

    # ---- three pairs as waves: the same frequency for sin and cos, slower with i
    wx, ww, wh, positions = 470, 300, 54, 40
    d.text(wx + ww / 2, 22, "pairs (2i, 2i + 1) over pos = 0 ... 40", size=13)
    d.polyline([(wx + 50, 46), (wx + 74, 46)], stroke=PARTS["embed"][1], width=1.6)
    d.text(wx + 80, 46, "sin (2i)", size=11, anchor="start")
    d.polyline([(wx + 160, 46), (wx + 184, 46)], stroke=PARTS["embed"][1], width=1.6, dash="4 3")
    d.text(wx + 190, 46, "cos (2i + 1)", size=11, anchor="start")
    for n, pair in enumerate((0, 1, 5)):
        y = 70 + n * 88
        _wave(d, wx, y, ww, wh, pair, d_model, positions)
        wavelength = 2 * math.pi * 10000 ** (2 * pair / d_model)
        d.text(wx, y + wh + 13, f"i = {pair}: dims {2 * pair}, {2 * pair + 1}", size=11.5, anchor="start", mono=True)
        d.text(wx + ww, y + wh + 13, f"wavelength {wavelength:,.0f}", size=11.5, anchor="end", color=MUTED)

    # ---- the addition: x + pe[:, :L], then dropout
    fy, px = 470, 420
    x_box = d.box(40, fy - 22, 170, 44, "x", part="embed", sub="token embeddings")
    plus = d.plus(px, fy, r=12)
    drop = d.box(530, fy - 20, 110, 40, "dropout", part="plain")
    d.arrow([x_box.right, (plus.x - 2, fy)], label="(B, L, d_model)", side="above")
    d.arrow([(bx + 7, (gy + y_end) / 2), (px, (gy + y_end) / 2), (px, plus.y - 2)], color=ACCENT, head=7,
            label="pe[:, :L]  (1, L, d_model)", side="right", label_at=0.78)
    d.arrow([(plus.x2 + 2, fy), drop.left], head=7)
    d.arrow([drop.right, (780, fy)], label="(B, L, d_model)", side="above")
    d.text(px, fy + 30, "broadcast over B", size=11, color=MUTED)
    return d


@diagram("ch01-shift-rotation", chapter=1)
def shift_rotation() -> Drawing:
    d_model, k, r = 16, 2, 72
    d = Drawing(780, 390, "A shift by k positions rotates each (sin, cos) pair by the angle ω_i k")
    starts = (0, 3)
    for n, pair in enumerate((0, 1, 2)):
        omega = 10000 ** (-2 * pair / d_model)
        cx, cy = 130 + n * 260, 160
        d.circle(cx, cy, r, "#FFFFFF", stroke="#BBBBBB", width=1)
        d.polyline([(cx - r - 14, cy), (cx + r + 22, cy)], stroke="#DDDDDD", width=0.8)
        d.polyline([(cx, cy + r + 14), (cx, cy - r - 14)], stroke="#DDDDDD", width=0.8)
        d.text(cx + r + 26, cy, "sin", size=11, anchor="start", color=MUTED)
        d.text(cx, cy - r - 24, "cos", size=11, color=MUTED)
        point = lambda p: (cx + r * math.sin(omega * p), cy - r * math.cos(omega * p))
        for p in range(6):
            x, y = point(p)
            d.circle(x, y, 4, PARTS["embed"][0], stroke=PARTS["embed"][1], width=1.2)
        for start in starts:  # the same arc, wherever it starts
            arc = [(cx + (r + 12) * math.sin(omega * t), cy - (r + 12) * math.cos(omega * t))
                   for t in [start + k * q / 16 for q in range(17)]]
            d.arrow(arc, color=ACCENT, width=1.8, head=7)
        for p in range(6) if pair == 0 else (0, 5):  # every position where the dots are apart, else the ends
            x, y = point(p)
            d.text(cx + (x - cx) * 0.72, cy + (y - cy) * 0.72, str(p), size=11, mono=True, color=MUTED)
        d.text(cx, cy + r + 40, f"pair i = {pair}", size=13, mono=True)
        d.text(cx, cy + r + 60, f"ω_{pair} k = {omega * k:.2f} rad", size=12, color=MUTED)
    d.text(390, 22, "dots: (sin, cos) of one pair at pos = 0 ... 5; red: a shift by k = 2 from pos 0 and from pos 3",
           size=12)
    d.text(390, 336, "PE(pos + k) = M_k PE(pos): M_k turns pair i by ω_i k, the same angle from every pos", size=13)
    d.text(390, 360, "ω_i = 10000^(-2i / d_model), here d_model = 16", size=12, color=MUTED)
    return d
