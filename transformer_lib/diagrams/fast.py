# Hand-written tool module (not generated from a notebook).
"""Chapter 9's pictures: the packed query/key/value projection with the fused attention call, the readable modules
and their fast twins that `use_fast_path` switches between, and the cheaper dropout mask."""
from __future__ import annotations

import math

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, PARTS, Drawing, text_width


def _weights(seed: int, rows: int, cols: int) -> list[list[float]]:
    """A fixed pattern of weight-like values in [0.08, 0.7] (the same on every machine)."""
    def noise(i, j):
        v = math.sin(seed * 91.7 + i * 12.9898 + j * 78.233) * 43758.5453
        return v - math.floor(v)
    return [[0.08 + 0.62 * noise(i, j) for j in range(cols)] for i in range(rows)]


def _tensor(d: Drawing, x, y, w, h, label, mono=True, size=13):
    return d.box(x, y, w, h, label, part="tensor", mono=mono, size=size)


@diagram("ch09-packed-projections", chapter=9)
def packed_projections():
    d = Drawing(800, 584, "Three projections against one packed projection, and the fused attention call")
    left, right = 200, 590  # the centres of the two columns
    cell, n = 9, 6  # a (d_model, d_model) matrix drawn as n x n cells
    side = n * cell
    d.text(left, 22, "MultiHeadAttention (chapter 2)", size=14, weight="bold")
    d.text(right, 22, "FusedMultiHeadAttention", size=14, weight="bold")
    d.text(right, 42, "self-attention (cross-attention stacks w_k, w_v alone)", size=11.5, color=MUTED)
    d.polyline([(400, 14), (400, 572)], stroke="#999999", width=1, dash="3 5")
    for cx in (left, right):
        d.text(cx, 68, "x  (B, Lq, d_model)", size=12.5, mono=True)

    # ---- left: three weight matrices, three matrix multiplications
    xs = [left - 110, left, left + 110]
    top = 142
    for k, (cx, name) in enumerate(zip(xs, ("w_q", "w_k", "w_v"))):
        d.arrow([(left, 80), (left, 100), (cx, 100), (cx, top - 20)], head=6)
        d.text(cx, top - 11, f"{name}.weight", size=11.5, mono=True)
        d.grid(cx - side / 2, top, _weights(k + 1, n, n), cell=cell)
    d.text(left, top + side + 20, "three (d_model, d_model) matrices,", size=12, color=MUTED)
    d.text(left, top + side + 36, "three matrix multiplications", size=12, color=MUTED)
    qkv_y = 356
    for cx, name in zip(xs, "qkv"):
        d.arrow([(cx, top + side + 50), (cx, qkv_y)], head=6, label=f"w_{name}(x)", side="right", size=11.5)
        _tensor(d, cx - 30, qkv_y, 60, 28, name)

    # ---- right: one (3*d_model, d_model) matrix, one matrix multiplication, split in three
    gx, gtop = right - side / 2, 92
    d.arrow([(right, 80), (right, gtop - 3)], head=6)
    for k, name in enumerate(("w_q", "w_k", "w_v")):
        y = gtop + k * side
        d.grid(gx, y, _weights(k + 1, n, n), cell=cell)  # the same three matrices, stacked
        d.rect(gx, y, side, side, "none", stroke=INK, width=1)
        d.text(gx - 10, y + side / 2, name, size=11.5, mono=True, anchor="end", color=MUTED)
    d.rect(gx - 2, gtop - 2, side + 4, 3 * side + 4, "none", stroke=ACCENT, width=2)
    tx = gx + side + 16
    d.text(tx, gtop + 22, "weight = torch.cat(", size=11.5, mono=True, anchor="start")
    d.text(tx, gtop + 38, "\u00a0\u00a0[w_q, w_k, w_v])", size=11.5, mono=True, anchor="start")  # kept indent
    d.text(tx, gtop + 58, "(3*d_model, d_model)", size=11.5, mono=True, anchor="start", color=ACCENT)
    d.text(tx, gtop + 76, "the biases stacked alike", size=11.5, anchor="start", color=MUTED)
    d.text(tx, gtop + 104, "one F.linear:", size=12, anchor="start", color=MUTED)
    d.text(tx, gtop + 120, "one matrix multiplication", size=12, anchor="start", color=MUTED)
    bar_y, bar_w = 282, 210
    bx = right - bar_w / 2
    d.arrow([(right, gtop + 3 * side + 2), (right, bar_y)], label="(B, Lq, 3*d_model)", side="right", head=6)
    for k, name in enumerate("qkv"):
        d.rect(bx + k * bar_w / 3, bar_y, bar_w / 3, 18, PARTS["tensor"][0], stroke=PARTS["tensor"][1], width=1.2)
        d.text(bx + k * bar_w / 3 + bar_w / 6, bar_y + 9, name, size=11, mono=True, color=MUTED)
    d.text(right, bar_y + 34, ".split(d_model, dim=-1)", size=11.5, mono=True)
    for k, name in enumerate("qkv"):
        cx = xs[k] + right - left
        d.arrow([(bx + k * bar_w / 3 + bar_w / 6, bar_y + 46), (cx, qkv_y)], head=6)
        _tensor(d, cx - 30, qkv_y, 60, 28, name)

    # ---- both: heads, attention, output projection
    att_y = 450
    for cx in (left, right):
        d.text(cx, qkv_y + 42, "each (B, Lq, d_model)", size=11.5, mono=True, color=MUTED)
        d.arrow([(cx, qkv_y + 54), (cx, att_y)], head=6)
        d.text(cx - 8, qkv_y + 72, "split_heads", size=11.5, mono=True, anchor="end")
        d.text(cx + 8, qkv_y + 72, "(B, n_heads, Lq, d_k)", size=11.5, mono=True, anchor="start", color=MUTED)
    d.box(left - 180, att_y, 360, 50, "scaled_dot_product_attention", part="attention", mono=True,
          sub="q @ k^T / sqrt(d_k), mask, softmax, dropout, @ v", size=12.5)
    d.box(right - 180, att_y, 360, 50, "F.scaled_dot_product_attention", part="attention", mono=True,
          sub="one fused kernel where it can; self.attn = None", size=12.5, highlight=True)
    out_y = 530
    for cx in (left, right):
        d.arrow([(cx, att_y + 50), (cx, out_y)], label="(B, n_heads, Lq, d_k)", side="right", head=6)
        d.box(cx - 90, out_y, 180, 42, "heads joined, w_o", size=12.5, part="attention", sub="-> (B, Lq, d_model)")
    return d


TWINS = [  # readable, twin, part, what they share, how they are checked (two lines)
    ("MultiHeadAttention", "FusedMultiHeadAttention", "attention", "w_q, w_k, w_v, w_o",
     "outputs and input gradients equal", "self- and cross-attention, atol 1e-5"),
    ("LayerNorm", "FusedLayerNorm", "norm", "weight, bias, eps", "outputs equal", "atol 1e-5"),
    ("nn.Dropout", "FastDropout", "plain", "p", "the same in distribution",
     "kept near 1 - p, mean near 1; eval returns x"),
]


@diagram("ch09-fast-twins", chapter=9)
def fast_twins():
    d = Drawing(800, 474, "Each readable module and its fast twin, switched by use_fast_path")
    lx, rx, w, h = 20, 570, 210, 48
    d.text(lx + w / 2, 22, "readable", size=14, weight="bold")
    d.text(rx + w / 2, 22, "fast twin (its subclass)", size=14, weight="bold")
    # the switch, both ways
    d.text(400, 30, "use_fast_path(model)", size=13, mono=True, color=ACCENT)
    d.arrow([(250, 46), (550, 46)], color=ACCENT, head=8, width=2)
    d.arrow([(550, 66), (250, 66)], head=8, width=1.4)
    d.text(400, 82, "use_fast_path(model, False)", size=12.5, mono=True)

    def row(y, readable, fast, part, shared, check, detail, dim=False):
        d.box(lx, y, w, h, readable, part=part, mono=True, sub=shared, size=13)
        d.box(rx, y, w, h, fast, part=part, mono=True, sub=shared, size=13)
        d.polyline([(lx + w, y + h / 2), (rx, y + h / 2)], stroke=MUTED, width=1.2, dash="5 4" if dim else None)
        d.text(400, y + h / 2 - 11, check, size=12.5)
        d.text(400, y + h / 2 + 11, detail, size=11.5, color=MUTED)

    y = 112
    for entry in TWINS:
        row(y, *entry)
        y += h + 22
    box = d.rect(lx - 8, 104, 780 - lx + 16, y - 22 - 104 + 16, "none", stroke=ACCENT, width=1.2, rx=10, dash="5 4")
    label = "the three use_fast_path switches"
    lw = text_width(label, 12) + 16
    d.rect(400 - lw / 2, box.y2 - 9, lw, 18, "#FFFFFF", stroke="#FFFFFF", width=0)
    d.text(400, box.y2, label, size=12, color=ACCENT)
    y += 24
    d.text(400, y - 4, "not a module of the model: the training loop picks the criterion", size=12, color=MUTED)
    row(y + 10, "LabelSmoothing", "FastLabelSmoothing", "output", "smoothing, padding_idx", "loss and gradient equal",
        "closed form: no (tokens, vocab) target", dim=True)
    y += 10 + h + 34
    d.text(400, y, "use_fast_path sets module.__class__ to the twin: the parameters and buffers stay,", size=12.5)
    d.text(400, y + 20, "so the state dict, checkpoints and an optimizer built before the switch keep working",
           size=12.5)
    return d


@diagram("ch09-fast-dropout", chapter=9)
def fast_dropout():
    d = Drawing(760, 330, "FastDropout: one 64-bit random integer gives the keep decisions of four elements")
    cw, x0 = 140, 125  # the width of one 16-bit quarter; the left edge of the integer
    values = [-24127, 5910, -31250, 12003]  # four 16-bit quarters, as .view(torch.int16) reads them
    threshold = round(0.1 * 65536)  # p = 0.1
    scale = 65536 / (65536 - threshold)
    d.brace(x0, 40, x0 + 4 * cw, "one random int64 for every four elements", below=False, mono=False, size=12.5)
    d.rect(x0, 46, 4 * cw, 36, "#FFFFFF", stroke=INK, width=1.6)
    d.text(x0 - 12, 56, "bits", size=12.5, mono=True, anchor="end")
    d.text(x0 - 12, 73, ".view(int16)", size=11, mono=True, anchor="end", color=MUTED)
    d.text(x0 - 12, 160, "keep", size=12.5, mono=True, anchor="end")
    d.text(x0 - 12, 234, "out", size=12.5, mono=True, anchor="end")
    for k, v in enumerate(values):
        x = x0 + k * cw
        if k:
            d.polyline([(x, 46), (x, 82)], stroke=INK, width=1.2)
        d.text(x + cw / 2, 64, str(v), size=13, mono=True)
        d.text(x + cw / 2, 100, "16 bits", size=11, color=MUTED)
        keep = v >= threshold - 32768
        d.arrow([(x + cw / 2, 110), (x + cw / 2, 142)], head=6, label=">= -26214?", side="right", mono=True,
                size=11)
        d.box(x + 25, 143, cw - 50, 34, "keep" if keep else "drop", part="mask" if keep else "plain",
              highlight=not keep)
        d.arrow([(x + cw / 2, 179), (x + cw / 2, 216)], head=6)
        d.box(x + 15, 217, cw - 30, 34, f"x[{k}] * {scale:.3f}" if keep else "0", part="tensor", mono=True, size=12)
    d.text(x0 + 2 * cw, 280, f"p = 0.1: threshold = round(p * 65536) = {threshold}; an int16 is kept where it is "
           f">= {threshold} - 32768 = {threshold - 32768}", size=12, color=MUTED)
    d.text(x0 + 2 * cw, 302, f"so p becomes {threshold} / 65536 = {threshold / 65536:.6f}; kept elements are scaled by "
           f"65536 / (65536 - {threshold}) = {scale:.3f}", size=12, color=MUTED)
    return d
