# Hand-written tool module (not generated from a notebook).
"""Chapter 11's pictures: the 2017 block beside today's with the five changes numbered, RMSNorm against layer norm,
SwiGLU against the ReLU feed-forward network, rotary positions as rotations of pairs, and grouped-query attention's
shared key/value heads."""
from __future__ import annotations

import math

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, PARTS, Drawing, shade, text_width

X = [3.8, 2.1, 4.6, 2.9, 3.3, 1.7, 4.1, 2.5]  # a vector whose mean is far from zero, where the two norms differ


def _bars(d: Drawing, x, y, values, scale, w=104, h=84, label=None):
    """A small bar chart of `values` in a w x h frame, its zero line in the middle; y is the frame's top."""
    zero = y + h / 2
    d.rect(x, y, w, h, "#FFFFFF", stroke="#999999", width=1, rx=4)
    d.polyline([(x + 4, zero), (x + w - 4, zero)], stroke=MUTED, width=1)
    bw = (w - 8) / len(values)
    for i, v in enumerate(values):
        bh = v / scale * (h / 2 - 5)
        d.rect(x + 4 + i * bw + 1.5, zero - max(bh, 0), bw - 3, abs(bh), shade(0.55), stroke=shade(0.55), width=0.5)
    if label:
        d.text(x + w / 2, y + h + 14, label, size=11.5, color=MUTED)


@diagram("ch11-norms", chapter=11)
def norms():
    d = Drawing(800, 340, "LayerNorm subtracts the mean and divides by the standard deviation; RMSNorm only "
                          "divides by the root mean square")
    n = len(X)
    mean = sum(X) / n
    centred = [v - mean for v in X]
    layer = [v / math.sqrt(sum(c * c for c in centred) / n + 1e-6) for v in centred]
    rmsed = [v / math.sqrt(sum(c * c for c in X) / n + 1e-6) for v in X]
    big, unit = max(X), 2.0  # the input's scale, and the scale of every normalized chart
    cols = [16, 280, 544]  # the charts' left edges

    def step(x1, x2, y, op):
        d.arrow([(x1 + 4, y + 42), (x2 - 4, y + 42)], head=7)
        w = max(96, text_width(op, 11.5, mono=True) + 16)
        d.box((x1 + x2) / 2 - w / 2, y + 28, w, 28, op, part="norm", mono=True, size=11.5)

    def last(y, op, params):
        d.text(cols[2] + 118, y + 30, op, size=12, mono=True, anchor="start")
        d.text(cols[2] + 118, y + 54, "parameters:", size=11.5, anchor="start", color=MUTED)
        d.text(cols[2] + 118, y + 70, params, size=11.5, mono=True, anchor="start", color=MUTED)

    y = 40
    d.text(16, y - 18, "LayerNorm (chapter 3)", size=14, weight="bold", anchor="start")
    _bars(d, cols[0], y, X, big, label=f"x: mean {mean:.3g}")
    step(cols[0] + 104, cols[1], y, "- mean")
    _bars(d, cols[1], y, centred, unit, label="mean 0")
    step(cols[1] + 104, cols[2], y, "/ sqrt(var + eps)")
    _bars(d, cols[2], y, layer, unit, label="variance 1")
    last(y, "* weight + bias", "weight, bias")

    y = 196
    d.text(16, y - 18, "RMSNorm", size=14, weight="bold", anchor="start")
    _bars(d, cols[0], y, X, big, label=f"x: mean {mean:.3g}")
    step(cols[0] + 104, cols[2], y, "/ sqrt(mean(x^2) + eps)")
    _bars(d, cols[2], y, rmsed, unit, label="mean(x^2) = 1, mean kept")
    last(y, "* weight", "weight only")
    d.text(400, 326, "over the last dimension, (..., d_model) in and out: two reductions (mean, variance) "
           "against one (the mean of squares)", size=12, color=MUTED)
    return d


def _activation(d: Drawing, x, y, w, h, label, fn, formula):
    """An activation's box: its name on the left, a small plot of fn on [-3, 3] on the right."""
    d.box(x, y, w, h, None, part="ffn")
    d.text(x + w * 0.3, y + h / 2 - 7, label, size=13, mono=True)
    d.text(x + w * 0.3, y + h / 2 + 9, formula, size=10.5, mono=True, color=MUTED)
    px, pw, ph = x + w * 0.6, w * 0.36, h - 10
    zx, zy = px + pw / 2, y + 5 + ph - 8
    d.polyline([(px, zy), (px + pw, zy)], stroke=PARTS["ffn"][1], width=0.8)
    d.polyline([(zx, y + 5), (zx, y + 5 + ph)], stroke=PARTS["ffn"][1], width=0.8)
    pts = [(zx + t / 3 * pw / 2, zy - fn(t) / 3 * (ph - 8)) for t in [i / 10 - 3 for i in range(61)]]
    d.polyline(pts, stroke=ACCENT, width=1.8)


@diagram("ch11-swiglu", chapter=11)
def swiglu():
    d = Drawing(800, 480, "The ReLU feed-forward network against SwiGLU, at the same number of parameters")
    relu, silu = (lambda t: max(t, 0.0)), (lambda t: t / (1 + math.exp(-t)))
    # ---- left: FeedForward, bottom up
    lc, w = 190, 210
    d.text(lc, 20, "FeedForward (ReLU)", size=14, weight="bold")
    d.text(lc, 40, "w_2(relu(w_1 x))", size=12, mono=True, color=MUTED)
    d.text(lc, 70, "2 * d_model * d_ff weights", size=12.5)
    d.text(lc, 90, "d_model 192, d_ff 768: 294,912", size=11.5, mono=True, color=MUTED)
    d.text(lc, 462, "x (B, T, d_model)", size=12, mono=True)
    w1 = d.box(lc - w / 2, 386, w, 40, "w_1", part="ffn", sub="d_model -> d_ff", mono=True)
    _activation(d, lc - w / 2, 266, w, 44, "ReLU", relu, "max(z, 0)")
    w2 = d.box(lc - w / 2, 152, w, 40, "w_2", part="ffn", sub="d_ff -> d_model", mono=True)
    d.arrow([(lc, 450), w1.bottom], head=6)
    d.arrow([w1.top, (lc, 310)], label="(B, T, d_ff)", side="right", head=6)
    d.arrow([(lc, 266), w2.bottom], label="(B, T, d_ff)", side="right", head=6)
    d.arrow([w2.top, (lc, 108)], label="(B, T, d_model)", side="right", head=6)
    d.polyline([(400, 12), (400, 472)], stroke="#999999", width=1, dash="3 5")

    # ---- right: SwiGLU, bottom up
    rc = 600
    d.text(rc, 20, "SwiGLU", size=14, weight="bold")
    d.text(rc, 40, "w_2(silu(w_1 x) * w_3 x)", size=12, mono=True, color=MUTED)
    d.text(rc, 70, "3 * d_model * d_hidden weights", size=12.5)
    d.text(rc, 90, "d_hidden = round(2 * 768 / 3) = 512: 294,912", size=11.5, mono=True, color=MUTED)
    d.text(rc, 462, "x (B, T, d_model)", size=12, mono=True)
    bw = 160
    gate_x, val_x = rc - 92, rc + 92  # the two branches' centres
    g1 = d.box(gate_x - bw / 2, 386, bw, 40, "w_1 (gate)", part="ffn", sub="d_model -> d_hidden", mono=True,
               size=12.5)
    g3 = d.box(val_x - bw / 2, 386, bw, 40, "w_3 (value)", part="ffn", sub="d_model -> d_hidden", mono=True,
               size=12.5)
    d.arrow([(rc, 450), (rc, 440), (gate_x, 440), g1.bottom], head=6)
    d.arrow([(rc, 440), (val_x, 440), g3.bottom], head=6)
    _activation(d, gate_x - bw / 2, 296, bw, 44, "SiLU", silu, "z*sigmoid(z)")
    d.arrow([g1.top, (gate_x, 340)], head=6)
    d.circle(rc, 240, 13, "#FFFFFF")
    d.circle(rc, 240, 3.2, INK, stroke=INK)  # the element-wise product
    d.text(rc - 20, 226, "element-wise *", size=11, color=MUTED, anchor="end")
    d.arrow([(gate_x, 296), (gate_x, 240), (rc - 14, 240)], head=6)
    d.arrow([g3.top, (val_x, 240), (rc + 14, 240)], head=6)
    s2 = d.box(rc - w / 2, 152, w, 40, "w_2", part="ffn", sub="d_hidden -> d_model", mono=True)
    d.arrow([(rc, 226), s2.bottom], label="(B, T, d_hidden)", side="right", head=6)
    d.arrow([s2.top, (rc, 108)], label="(B, T, d_model)", side="right", head=6)
    return d


def _pair(d: Drawing, cx, cy, r, angles, colors, width=2.0):
    """One pair of dimensions as a plane: a faint circle, its axes and a vector at each angle (radians)."""
    d.circle(cx, cy, r, "#FFFFFF", stroke="#999999", width=1)
    d.polyline([(cx - r - 3, cy), (cx + r + 3, cy)], stroke="#999999", width=0.6, dash="2 3")
    d.polyline([(cx, cy - r - 3), (cx, cy + r + 3)], stroke="#999999", width=0.6, dash="2 3")
    for a, color in zip(angles, colors):
        d.arrow([(cx, cy), (cx + r * math.cos(a), cy - r * math.sin(a))], color=color, width=width, head=7)


@diagram("ch11-rope", chapter=11)
def rope():
    d = Drawing(800, 430, "RoPE turns each pair of a query or key by its position times the pair's frequency")
    d_k, start = 8, math.radians(25)  # a head of 8 dimensions: 4 pairs; the vector's direction at position 0
    # ---- left: one vector at positions 0..4, each pair turning at its own speed
    x0, y0, step, r = 128, 88, 64, 23
    d.text(x0 + 2 * step, 20, "one query (or key) at positions p = 0 .. 4", size=13, weight="bold")
    for p in range(5):
        d.text(x0 + p * step, 50, f"p = {p}", size=11.5, mono=True, color=MUTED)
    for i in range(d_k // 2):
        omega = 10000 ** (-2 * i / d_k)
        cy = y0 + i * 72
        d.text(x0 - 38, cy - 8, f"pair {i}", size=12, anchor="end")
        d.text(x0 - 38, cy + 9, f"\u03c9_{i} = {omega:g}", size=11, mono=True, anchor="end", color=MUTED)
        for p in range(5):
            px = x0 + p * step
            _pair(d, px, cy, r, [], [])
            if p:  # where the pair pointed at p = 0, to see how far it turned
                d.polyline([(px, cy), (px + r * math.cos(start), cy - r * math.sin(start))], stroke=MUTED, width=1.2,
                           dash="3 2")
            a = start + p * omega
            d.arrow([(px, cy), (px + r * math.cos(a), cy - r * math.sin(a))], color=ACCENT if p else INK, width=1.8,
                    head=7)
    d.text(x0 + 2 * step - 20, y0 + 4 * 72 - 22, "pair i = dimensions (2i, 2i + 1), turned by p * \u03c9_i",
           size=11.5, color=MUTED)
    d.text(x0 + 2 * step - 20, y0 + 4 * 72 - 4, "\u03c9_i = 10000^(-2i / d_k), d_k = 8; dashed: p = 0", size=11.5,
           mono=True, color=MUTED)
    d.polyline([(460, 14), (460, 416)], stroke="#999999", width=1, dash="3 5")

    # ---- right: the score depends on the offset only
    rc = 630
    d.text(rc, 20, "the score sees only s - p", size=13, weight="bold")
    q0, k0, omega = math.radians(10), math.radians(-75), 1.0  # pair 0 of a query and a key, before rotation
    for n, (p, s) in enumerate(((1, 3), (4, 6))):
        cx, cy, R = rc - 82 + 164 * n, 140, 58
        qa, ka = q0 + p * omega, k0 + s * omega
        _pair(d, cx, cy, R, [qa, ka], [INK, PARTS["ffn"][1]])
        lo, hi = min(qa, ka), max(qa, ka)
        arc = [(cx + 26 * math.cos(lo + (hi - lo) * t / 20), cy - 26 * math.sin(lo + (hi - lo) * t / 20))
               for t in range(21)]
        d.polyline(arc, stroke=ACCENT, width=2)
        d.text(cx, cy + R + 30, f"q at p = {p}", size=12, mono=True)
        d.text(cx, cy + R + 48, f"k at s = {s}", size=12, mono=True, color=PARTS["ffn"][1])
        for name, a, color in (("q", qa - 0.3, INK), ("k", ka + 0.3, PARTS["ffn"][1])):  # beside each tip
            d.text(cx + (R + 12) * math.cos(a), cy - (R + 12) * math.sin(a), name, size=13, mono=True, color=color,
                   weight="bold")
    d.text(rc, 284, "offset s - p = 2 in both: the same angle", size=12.5, color=ACCENT)
    d.text(rc, 302, "between them, the same dot product", size=12.5, color=ACCENT)
    d.text(rc, 330, "(R_p q) . (R_s k) = q^T R_(s-p) k", size=12.5, mono=True)
    d.text(rc, 348, "R_p turns every pair i by p * \u03c9_i", size=11.5, color=MUTED)
    d.text(rc, 376, "apply_rope on q and k, (B, h, T, d_k),", size=11.5, mono=True)
    d.text(rc, 394, "after the heads are split; never on v", size=11.5)
    return d


@diagram("ch11-gqa", chapter=11)
def gqa():
    d = Drawing(800, 360, "Multi-head, grouped-query and multi-query attention: query heads sharing key/value heads")
    n_heads, pw = 8, 250  # query heads; panel width
    cases = [("multi-head", 8), ("grouped-query", 2), ("multi-query", 1)]
    hw, hgap = 24, 5  # a head's width and the gap between heads
    for n, (name, g) in enumerate(cases):
        x0 = 20 + n * (pw + 15)
        cx = x0 + pw / 2
        group = n_heads // g
        d.text(cx, 22, name, size=14, weight="bold")
        d.text(cx, 42, f"n_kv_heads = {g}, group = {group}" if g < n_heads else "n_kv_heads = n_heads = 8",
               size=12, mono=True, color=MUTED)
        span = n_heads * hw + (n_heads - 1) * hgap
        qx = cx - span / 2
        qy, ky = 86, 200
        d.text(cx, qy - 14, "q heads (B, n_heads, T, d_k)", size=11, mono=True, color=MUTED)
        kv_w = group * hw + (group - 1) * hgap  # a key/value head spans its group of query heads
        for j in range(n_heads):
            x = qx + j * (hw + hgap)
            d.box(x, qy, hw, 30, str(j), part="attention", size=11.5, rx=3)
            kv = j // group  # repeat_interleave: head j reads key/value head j // group
            kx = qx + kv * (kv_w + hgap) + kv_w / 2
            d.polyline([(x + hw / 2, qy + 30), (kx, ky)], stroke=MUTED, width=1.2)
        for kv in range(g):
            x = qx + kv * (kv_w + hgap)
            d.box(x, ky, kv_w, 30, f"k, v head {kv}" if kv_w > 40 else str(kv), part="tensor", size=11.5, rx=3,
                  mono=True)
        d.text(cx, ky + 46, "k, v (B, n_kv_heads, T, d_k)", size=11, mono=True, color=MUTED)
        d.text(cx, ky + 76, "cache per token and layer:", size=12)
        d.text(cx, ky + 96, f"2 * {g} * d_k" + ("" if g == n_heads else f", {n_heads // g}x smaller"), size=12,
               mono=True, color=ACCENT if g < n_heads else INK)
    d.text(400, 336, "query head j reads key/value head j // group: k.repeat_interleave(group, 1), not k.repeat(...)",
           size=12, color=MUTED)
    return d


CHANGES = [  # (number, the BlockConfig switch, what it changes): the five changes of the chapter, in its order
    (1, 'norm="rms"', "RMSNorm: no mean, no bias (section 1)"),
    (2, 'ffn="swiglu"', "a gated feed-forward, same weights (section 2)"),
    (3, 'positions="rope"', "q and k rotated; nothing added to x (section 3)"),
    (4, "n_kv_heads=2", "fewer key/value heads, a smaller cache (section 4)"),
    (5, "bias=False", "no bias in any Linear (section 5)"),
]


def _mark(d: Drawing, x, y, n):
    """A change's number: a small accent disc."""
    d.circle(x, y, 9, ACCENT, stroke=ACCENT, width=1)
    d.text(x, y, str(n), size=11.5, weight="bold", color="#FFFFFF")


def _residual(d: Drawing, x_out, cx, y_from, y_to):
    """The residual path: from the stream at (cx, y_from) out to x_out, up to y_to, into the plus at (cx, y_to)."""
    d.polyline([(cx, y_from), (x_out, y_from), (x_out, y_to), (cx - 18, y_to)], width=1.3)
    d.path(f"M {cx - 10} {y_to} l -8 -4 l 0 8 Z", fill=INK, width=1)


@diagram("ch11-modern-block", chapter=11)
def modern_block():
    d = Drawing(800, 782, "Chapter 10's block and today's, side by side, each of the five changes numbered")
    w = 220
    d.text(175, 20, "chapter 10's GPT: the 2017 block", size=14, weight="bold")
    d.text(175, 40, "BlockConfig defaults (pre-norm)", size=11.5, color=MUTED)
    d.text(575, 20, "today's block", size=14, weight="bold")
    d.text(575, 40, "every BlockConfig switch on", size=11.5, color=MUTED)
    d.polyline([(380, 12), (380, 650)], stroke="#999999", width=1, dash="3 5")
    for cx, modern in ((175, False), (575, True)):
        x = cx - w / 2
        hl = modern  # the changed parts are outlined in the accent on the right
        norm_name = "RMSNorm" if modern else "LayerNorm"
        stack = d.rect(x - 34, 190, w + 80, 320, "#F7F7F7", stroke="#999999", rx=10)  # the n_layers blocks
        d.text(stack.x + 8, 205, "n_layers x", size=12.5, weight="bold", anchor="start")
        # bottom up: tokens, embedding, positions
        d.text(cx, 640, "tokens (B, T)", size=12, mono=True)
        d.arrow([(cx, 628), (cx, 606)], head=6)
        d.box(x, 570, w, 36, "embed", part="embed", sub="TokenEmbedding: x sqrt(d_model)", size=12.5, mono=True)
        if modern:
            d.arrow([(cx, 570), (cx, 478)], head=6, label="(B, T, d_model)", side="right", label_at=0.48)
            d.text(cx - 12, 546, "no positions added", size=11.5, color=ACCENT, anchor="end")
            _mark(d, cx - 26 - text_width("no positions added", 11.5), 546, 3)
        else:
            plus = d.plus(cx, 546)
            d.arrow([(cx, 570), (cx, 556)], head=6)
            sx = x - 30
            d.circle(sx, 546, 13, "#FFFFFF")
            d.path(f"M {sx - 9} 546 q 4.5 -11 9 0 t 9 0", width=1.3)
            d.text(sx, 572, "sinusoids", size=11, color=MUTED)
            d.arrow([(sx + 13, 546), (cx - 10, 546)], head=6)
            d.arrow([plus.top, (cx, 478)], head=6, label="(B, T, d_model)", side="right", label_at=0.17)
        n1 = d.box(x, 450, w, 28, norm_name, part="norm", size=12.5, mono=True, highlight=hl)
        attn_sub = "RoPE on q, k; fewer k, v heads" if modern else "n_heads heads for q, k and v"
        attn = d.box(x, 384, w, 46, "masked self-attention", part="attention", sub=attn_sub, size=12.5,
                     highlight=hl)
        p1 = d.plus(cx, 362)
        n2 = d.box(x, 312, w, 28, norm_name, part="norm", size=12.5, mono=True, highlight=hl)
        ffn = d.box(x, 246, w, 46, "SwiGLU" if modern else "FeedForward", part="ffn", mono=True, size=12.5,
                    sub="w_2(silu(w_1 x) * w_3 x)" if modern else "w_2(relu(w_1 x))", highlight=hl)
        p2 = d.plus(cx, 224)
        d.arrow([n1.top, attn.bottom], head=6)
        d.arrow([attn.top, (cx, 372)], head=6)
        d.arrow([p1.top, n2.bottom], head=6)
        d.arrow([n2.top, ffn.bottom], head=6)
        d.arrow([ffn.top, (cx, 234)], head=6)
        _residual(d, x - 18, cx, 494, 362)
        _residual(d, x - 18, cx, 346, 224)
        fin = d.box(x, 144, w, 28, norm_name + " (final)", part="norm", size=12.5, mono=True, highlight=hl)
        d.arrow([p2.top, fin.bottom], head=6)
        head = d.box(x, 84, w, 40, "lm_head", part="output", sub="tied to embed, no bias", size=12.5, mono=True)
        d.arrow([fin.top, head.bottom], head=6)
        d.arrow([head.top, (cx, 56)], head=6, label="(B, T, vocab_size)", side="right")
        if modern:
            mx = x + w + 22  # the numbers, right of the boxes
            for box, numbers in ((n1, [1]), (attn, [3, 4]), (n2, [1]), (ffn, [2]), (fin, [1])):
                for k, n in enumerate(numbers):
                    _mark(d, mx, box.cy + 11 * (2 * k - len(numbers) + 1), n)
            d.text(stack.x2 - 30, 205, "every Linear: no bias", size=11.5, color=ACCENT, anchor="end")
            _mark(d, stack.x2 - 16, 205, 5)
    # the legend: each switch and what it changes
    for k, (n, switch, what) in enumerate(CHANGES):
        y = 676 + k * 22
        _mark(d, 150, y, n)
        d.text(166, y, switch, size=12, mono=True, anchor="start")
        d.text(310, y, what, size=12, anchor="start", color=MUTED)
    return d
