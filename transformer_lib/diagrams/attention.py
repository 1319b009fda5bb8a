# Hand-written tool module (not generated from a notebook).
"""Chapter 2's pictures: attention step by step on a toy sentence, the paper's Figure 2 (both halves) with the
book's shapes, splitting into heads as a reshape, and the three masks."""
from __future__ import annotations

import math

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, PARTS, Drawing

# the toy sentence of section 1: one-hot vectors saying each word's kind
WORDS = ["the", "cat", "sat", "on", "the", "mat"]
KINDS = ["det", "noun", "verb", "prep"]
_KIND = {"the": 0, "cat": 1, "mat": 1, "sat": 2, "on": 3}
VECTORS = [[1.0 if _KIND[w] == j else 0.0 for j in range(4)] for w in WORDS]
SCORES = [[sum(a * b for a, b in zip(u, v)) for v in VECTORS] for u in VECTORS]
WEIGHTS = [[math.exp(s) / sum(math.exp(t) for t in row) for s in row] for row in SCORES]
OUTPUTS = [[sum(w * v[j] for w, v in zip(row, VECTORS)) for j in range(4)] for row in WEIGHTS]
CAT = 1  # the row the pictures follow
ALLOWED = {True: PARTS["mask"][0], False: "#FFFFFF"}
GRID = "#999999"  # cell lines of mask grids, which have white cells


def _num(v: float) -> str:
    """0.288 -> .29, 1.0 -> 1, 0.0 -> 0: short enough for a small cell."""
    if v == int(v):
        return str(int(v))
    return f"{v:.2f}".lstrip("0")


def _rows(d, x, y, cell, labels, size=12, color=INK):
    """Labels to the left of a grid's rows, ending at x."""
    for i, label in enumerate(labels):
        d.text(x - 6, y + (i + 0.5) * cell, label, size=size, anchor="end", color=color)


def _cols(d, x, y, cell, labels, size=12, color=INK, rotate=None):
    """Labels above a grid's columns, their middles at y."""
    for j, label in enumerate(labels):
        d.text(x + (j + 0.5) * cell, y, label, size=size, color=color, rotate=rotate)


def _outline(d, x, y, w, h, color=ACCENT, width=2.5):
    d.rect(x, y, w, h, "none", stroke=color, width=width)


# ------------------------------------------------------------------------------------------ section 1, the steps
@diagram("ch02-step-scores", chapter=2)
def step_scores():
    d = Drawing(740, 370, "Step 1: the score matrix is every word's vector dotted with every word's vector")
    c, y = 30, 96
    vec = d.grid(70, y, VECTORS, cell=c, fmt=_num, size=11.5)
    _rows(d, vec.x, y, c, WORDS)
    _cols(d, vec.x, y - 14, c, KINDS, size=10, color=MUTED)
    _outline(d, vec.x, y + CAT * c, 4 * c, c)
    d.text(vec.x2 + 22, vec.cy, "@", size=18)
    vt = d.grid(vec.x2 + 44, y + c, [list(col) for col in zip(*VECTORS)], cell=c, fmt=_num, size=11.5)
    _cols(d, vt.x, vt.y - 14, c, WORDS, size=12)
    for j, k in enumerate(KINDS):
        d.text(vt.x2 + 6, vt.y + (j + 0.5) * c, k, size=10, anchor="start", color=MUTED)
    _outline(d, vt.x + 5 * c, vt.y, c, 4 * c)
    d.text(vt.x2 + 64, vec.cy, "=", size=20)
    s = d.grid(vt.x2 + 120, y, SCORES, cell=c, fmt=_num, size=12)
    _rows(d, s.x, y, c, WORDS)
    _cols(d, s.x, y - 14, c, WORDS, size=12)
    _outline(d, s.x + 5 * c, y + CAT * c, c, c)
    for g, name, shape in ((vec, "vectors", "(L, d_model) = (6, 4)"), (vt, "vectors.T", "(d_model, L) = (4, 6)"),
                           (s, "scores", "(L, L) = (6, 6)")):
        d.text(g.cx, 40, name, size=13.5, mono=True)
        d.text(g.cx, vec.y2 + 20, shape, size=11.5, mono=True, color=MUTED)
    d.text(370, 322, "scores[cat, mat] = cat · mat = 1: both are nouns", size=13, color=ACCENT)
    d.text(370, 346, "row: the word asking (query); column: the word asked (key)", size=12.5, color=MUTED)
    return d


@diagram("ch02-step-softmax", chapter=2)
def step_softmax():
    d = Drawing(760, 290, "Step 2: softmax turns the row of scores of cat into weights that sum to 1")
    c = 46
    x, y = 150, 70
    row = SCORES[CAT]
    total = sum(math.exp(s) for s in row)
    lines = [("scores[cat]", row, lambda v: _num(v)), ("exp", [math.exp(s) for s in row], lambda v: f"{v:.2f}"),
             ("÷ sum = 9.44", [math.exp(s) / total for s in row], lambda v: f"{v:.2f}")]
    _cols(d, x, y - 16, c, WORDS, size=12)
    for i, (name, values, fmt) in enumerate(lines):
        top = y + i * 64
        d.grid(x, top, [[v / 3 if i == 1 else v for v in values]], cell=c, labels=[[fmt(v) for v in values]],
               size=12, stroke=PARTS["tensor"][0])
        d.rect(x, top, c * 6, c, "none", stroke="#999999", width=1)
        d.text(x - 10, top + c / 2, name, size=12.5, anchor="end", mono=True)
        if i:
            d.arrow([(x + 3 * c, top - 18), (x + 3 * c, top - 2)], head=6)
    d.brace(x, y + 2 * 64 + c + 4, x + 6 * c, "sum = 1.00, every weight > 0", size=12, mono=False)
    _outline(d, x, y + 128, 6 * c, c)
    # every row at once
    wx, wy, wc = 540, 70, 26
    w = d.grid(wx, wy, WEIGHTS, cell=wc, fmt=lambda v: _num(v)[:3], size=9.5)
    _rows(d, wx, wy, wc, WORDS, size=11)
    _cols(d, wx, wy - 14, wc, WORDS, size=10)
    _outline(d, wx, wy + CAT * wc, 6 * wc, wc)
    d.text(w.cx, 30, "weights = scores.softmax(dim=-1)", size=11.5, mono=True)
    d.text(w.cx, w.y2 + 22, "(L, L): every row sums to 1", size=11.5, color=MUTED)
    d.text(w.cx, w.y2 + 42, "the row of cat is worked out on the left", size=11.5, color=MUTED)
    return d


@diagram("ch02-step-weighted-sum", chapter=2)
def step_weighted_sum():
    d = Drawing(760, 350, "Step 3: the output of cat is the sum of the word vectors, each times cat's weight on it")
    c, x, y = 30, 150, 50
    vx = x + c + 36
    _cols(d, vx, y - 16, c, KINDS, size=10, color=MUTED)
    d.text(x + c / 2, y - 16, "weight", size=10, color=MUTED)
    for i, word in enumerate(WORDS):
        top = y + i * (c + 6)
        d.grid(x, top, [[WEIGHTS[CAT][i]]], cell=c, fmt=_num, size=10.5)
        d.text(x + c + 18, top + c / 2, "×", size=14)
        d.grid(vx, top, [VECTORS[i]], cell=c, fmt=_num, size=11)
        d.text(x - 10, top + c / 2, word, size=12.5, anchor="end")
        if i:
            d.text(vx + 4 * c + 16, top - 3, "+", size=15, color=MUTED)
    line_y = y + 6 * (c + 6) + 4
    d.polyline([(x - 40, line_y), (vx + 4 * c + 10, line_y)], width=1.2)
    oy = line_y + 12
    d.grid(vx, oy, [OUTPUTS[CAT]], cell=c, fmt=_num, size=10.5)
    _outline(d, vx, oy, 4 * c, c)
    d.text(x - 10, oy + c / 2, "output of cat", size=12.5, anchor="end", color=ACCENT)
    d.text(vx + 4 * c + 14, oy + c / 2, "mostly noun: cat read cat and mat", size=12.5, anchor="start",
           color=ACCENT)
    # every word at once: one matrix product
    mx, my, mc = 450, 100, 15
    d.text(590, 40, "every word at once, one matrix product:", size=12.5)
    d.text(590, 62, "outputs = weights @ vectors", size=12, mono=True)
    parts = [(mx, WEIGHTS, "weights", "(L, L)"), (mx + 124, VECTORS, "vectors", "(L, d_model)"),
             (mx + 220, OUTPUTS, "outputs", "(L, d_model)")]
    for gx, values, name, shape in parts:
        g = d.grid(gx, my, values, cell=mc)
        d.text(g.cx, my - 14, name, size=11, mono=True, color=MUTED)
        d.text(g.cx, g.y2 + 16, shape, size=11, mono=True, color=MUTED)
        if values is not VECTORS:  # the row of cat reads every row of vectors
            _outline(d, gx, my + CAT * mc, g.w, mc, width=1.8)
    d.text(mx + 107, my + 3 * mc, "@", size=15)
    d.text(mx + 202, my + 3 * mc, "=", size=15)
    return d


@diagram("ch02-step-projections", chapter=2)
def step_projections():
    d = Drawing(760, 350, "Step 4: trainable projections make queries, keys and values; scores are q k^T / sqrt(d_k)")
    x = d.grid(30, 128, [[0.15] * 4 for _ in range(6)], cell=14)
    d.text(x.cx, x.y - 14, "vectors", size=12.5, mono=True)
    d.text(x.cx, x.y2 + 16, "(L, d_model)", size=11, mono=True, color=MUTED)
    ends = {}
    for name, cy in (("q", 70), ("k", 170), ("v", 270)):
        b = d.box(150, cy - 23, 170, 46, f"to_{name}", part="attention", sub="nn.Linear(d_model, d_k)", mono=True,
                  size=12.5)
        d.arrow([(x.x2 + 4, x.cy), (120, x.cy), (120, cy), (b.x - 1, cy)], head=7)
        g = d.grid(362, cy - 36, [[0.45] * 2 for _ in range(6)], cell=12)
        d.arrow([b.right, (g.x - 3, cy)], head=7)
        d.text(g.x2 + 8, cy - 9, name, size=14, mono=True, anchor="start", weight="bold")
        d.text(g.x2 + 8, cy + 9, "(L, d_k)", size=11, mono=True, color=MUTED, anchor="start")
        ends[name] = (g.x2 + 72, cy)
    op = d.box(480, 95, 150, 50, "q @ k.T", part="attention", sub="/ math.sqrt(d_k)", mono=True, size=12.5)
    d.arrow([ends["q"], (op.cx, 70), (op.cx, op.y - 1)], head=7)
    d.arrow([ends["k"], (op.cx, 170), (op.cx, op.y2 + 1)], head=7)
    s = d.grid(676, 84, [[0.3] * 6 for _ in range(6)], cell=12)
    d.text(s.cx, s.y - 14, "scores", size=12, mono=True)
    d.text(s.cx + 4, s.y2 + 14, "(L, L)", size=11, mono=True, color=MUTED, anchor="start")
    d.arrow([op.right, (s.x - 3, op.cy)], head=7)
    mix = d.box(480, 245, 150, 50, "softmax, then", part="attention", sub="weights @ v", size=12.5)
    d.arrow([ends["v"], (mix.x - 1, 270)], head=7)
    d.arrow([(s.cx, s.y2 + 4), (s.cx, 270), (mix.x2 + 1, 270)], head=7)
    d.arrow([mix.bottom, (mix.cx, 335)], head=7)
    d.text(mix.cx + 10, 326, "output (L, d_k)", size=11.5, mono=True, color=MUTED, anchor="start")
    d.text(20, 316, "L = 6 words, d_model = 4, d_k = 2", size=12, anchor="start", color=MUTED)
    d.text(20, 336, "to_q, to_k, to_v are learned; untrained, random", size=12, anchor="start", color=MUTED)
    return d


@diagram("ch02-step-causal", chapter=2)
def step_causal():
    d = Drawing(780, 300, "Step 5: the causal mask hides later words before the softmax")
    c = 24
    y = 80
    lower = [[j <= i for j in range(6)] for i in range(6)]
    panels = [(70, "causal", "True: key j <= query i"), (320, "scores.masked_fill(~causal, -inf)", "hidden: -inf"),
              (580, "weights", "exactly 0 above the diagonal")]
    for x, title, note in panels:
        _rows(d, x, y, c, WORDS, size=11.5)
        _cols(d, x, y - 13, c, WORDS, size=10.5)
        d.text(x + 3 * c, y - 44, title, size=12, mono=True)
        d.text(x + 3 * c, y + 6 * c + 18, note, size=11.5, color=MUTED)
    d.grid(70, y, lower, cell=c, colors=ALLOWED, stroke=GRID)
    d.rect(70, y, 6 * c, 6 * c, "none", stroke="#999999", width=1)
    d.grid(320, y, [[0.25 if ok else 0 for ok in row] for row in lower], cell=c, stroke=GRID,
           labels=[["s" if ok else "-∞" for ok in row] for row in lower], size=10)
    weights = [[1 / (i + 1) if j <= i else 0.0 for j in range(6)] for i in range(6)]
    d.grid(580, y, [[w * 0.9 for w in row] for row in weights], cell=c, stroke=GRID,
           labels=[["1" if (i, j) == (0, 0) else ("0" if j > i else "") for j in range(6)] for i in range(6)],
           size=10.5)
    d.rect(580, y, 6 * c, 6 * c, "none", stroke="#999999", width=1)
    d.arrow([(70 + 6 * c + 10, y + 3 * c), (290, y + 3 * c)], head=7)
    d.arrow([(320 + 6 * c + 10, y + 3 * c), (545, y + 3 * c)], label="softmax", side="above", mono=True, head=7)
    for i in range(6):
        d.text(580 + 6 * c + 8, y + (i + 0.5) * c, "sum 1", size=10.5, anchor="start", color=MUTED)
    d.text(390, 270, "\"the\", the first word, sees only itself; \"mat\", the last, sees every word", size=12.5,
           color=ACCENT)
    return d


@diagram("ch02-split-heads", chapter=2)
def split_heads():
    d = Drawing(800, 430, "Splitting d_model into heads and merging back are reshapes")
    c, L, h, dk = 22, 4, 4, 2
    levels = [0.12, 0.35, 0.6, 0.85]
    block = lambda head: ([[levels[head]] * dk for _ in range(L)], [[str(head * dk + j) for j in range(dk)]] * L)
    positions = [f"t{t}" for t in range(L)]
    y = 90
    # (B, L, d_model): one batch element, a row per position, a column per feature
    full = d.grid(60, y, [[levels[j // dk] for j in range(h * dk)] for _ in range(L)], cell=c,
                  labels=[[str(j) for j in range(h * dk)]] * L, size=10)
    _rows(d, full.x, y, c, positions, size=11, color=MUTED)
    d.text(full.cx, y - 40, "x, one batch element", size=12.5)
    d.text(full.cx, y - 18, "columns: features 0 .. d_model - 1", size=10.5, color=MUTED)
    d.text(full.cx, full.y2 + 16, "(B, L, d_model)", size=11.5, mono=True, color=MUTED)
    # view: the same numbers, each row's columns grouped into n_heads blocks of d_k
    x1, gap = 290, 8
    for head in range(h):
        gx = x1 + head * (dk * c + gap)
        values, labels = block(head)
        d.grid(gx, y, values, cell=c, labels=labels, size=10)
        d.brace(gx, y - 4, gx + dk * c, f"h{head}", below=False, size=10.5)
    view_w = h * dk * c + (h - 1) * gap
    d.text(x1 + view_w / 2, full.y2 + 16, "(B, L, n_heads, d_k)", size=11.5, mono=True, color=MUTED)
    d.text(x1 + view_w / 2, y - 44, ".view(B, L, n_heads, d_k)", size=12, mono=True)
    d.arrow([(full.x2 + 8, full.cy), (x1 - 8, full.cy)], head=7)
    d.text((full.x2 + x1) / 2, full.cy + 16, "no copy", size=10.5, color=MUTED)
    # transpose(1, 2): one (L, d_k) matrix per head
    x2, y2 = 620, 60
    for head in range(h):
        gx, gy = x2 + (head % 2) * (dk * c + 50), y2 + (head // 2) * (L * c + 26)
        values, labels = block(head)
        d.grid(gx, gy + 16, values, cell=c, labels=labels, size=10)
        _rows(d, gx, gy + 16, c, positions, size=9.5, color=MUTED)
        d.text(gx + dk * c / 2, gy + 5, f"head {head}", size=11)
    stack_bottom = y2 + 2 * (L * c + 26) - 6
    d.text(x2 + 69, stack_bottom + 14, "(B, n_heads, L, d_k)", size=11.5, mono=True, color=MUTED)
    d.arrow([(x1 + view_w + 8, full.cy), (x2 - 22, full.cy)], head=7)
    d.text((x1 + view_w + x2 - 14) / 2, full.cy - 14, ".transpose(1, 2)", size=10.5, mono=True)
    # merging back
    by = 336
    d.arrow([(x2 + 69, stack_bottom + 28), (x2 + 69, by), (full.cx, by), (full.cx, full.y2 + 30)], head=8,
            color=ACCENT)
    mid = (full.cx + x2 + 69) / 2
    d.text(mid, by - 14, "after attention in each head, back:", size=12)
    d.text(mid, by + 16, ".transpose(1, 2).reshape(B, L, d_model)", size=12, mono=True)
    d.text(mid, by + 38, "(B, n_heads, L, d_k) -> (B, L, n_heads, d_k) -> (B, L, d_model)", size=11.5,
           mono=True, color=MUTED)
    d.text(400, 410, "head j at position t holds the columns j*d_k .. (j+1)*d_k - 1 of x[:, t]", size=12.5,
           color=ACCENT)
    return d


# ------------------------------------------------------------------------------- sections 2 to 4, the exported code
@diagram("ch02-scaled-dot-product", chapter=2)
def scaled_dot_product():
    d = Drawing(760, 560, "Scaled dot-product attention (Figure 2, left, of the paper) with the shapes of the code")
    cx, w = 300, 170
    bx = cx - w / 2
    steps = [(430, "MatMul", ["query @ key.transpose(-2, -1)"], "attention"),
             (350, "Scale", ["/ math.sqrt(d_k)"], "attention"),
             (270, "Mask (optional)", ["masked_fill(~mask, float('-inf'))", "a hidden score becomes -inf"], "mask"),
             (190, "Softmax", ["softmax(dim=-1), over the keys", "each row sums to 1 (0 if no key allowed)"],
              "attention"),
             (110, "MatMul", [], "attention")]
    boxes = []
    for top, label, notes, part in steps:
        boxes.append(d.box(bx, top, w, 40, label, part=part, size=13.5))
        for i, note in enumerate(notes):
            y = top + 20 + (i - (len(notes) - 1) / 2) * 18
            d.text(bx + w + 16, y, note, size=11.5 if i == 0 else 11, mono=i == 0, anchor="start", color=MUTED)
    matmul, scale, mask, softmax, out = boxes
    q = d.box(cx - 95, 510, 90, 34, "query", part="tensor", mono=True)
    k = d.box(cx + 5, 510, 90, 34, "key", part="tensor", mono=True)
    v = d.box(655, 510, 90, 34, "value", part="tensor", mono=True)
    d.arrow([q.top, (q.cx, matmul.y2 + 1)], label="(B, n_heads, Lq, d_k)", side="left", head=7)
    d.arrow([k.top, (k.cx, matmul.y2 + 1)], label="(B, n_heads, Lk, d_k)", side="right", head=7)
    shape = "(B, n_heads, Lq, Lk)"
    d.arrow([matmul.top, scale.bottom], label=f"scores {shape}", side="left")
    d.arrow([scale.top, mask.bottom], label=shape, side="left")
    d.arrow([mask.top, softmax.bottom], label=shape, side="left")
    d.arrow([softmax.top, out.bottom], label=f"weights {shape}", side="left")
    d.arrow([v.top, (v.cx, out.cy), (out.x2 + 1, out.cy)], head=7, label="(B, n_heads, Lk, d_k)", side="left",
            label_at=0.26)
    m = d.box(30, 273, 90, 34, "mask", part="mask", mono=True)
    d.arrow([m.right, (mask.x - 1, m.cy)], head=7)
    d.text(m.cx, 258, "True = may attend", size=11, color=MUTED)
    d.text(m.cx, 322, "e.g. (B, 1, 1, Lk)", size=11, mono=True, color=MUTED)
    d.text(bx - 16, out.cy, "weights @ value", size=11.5, mono=True, anchor="end", color=MUTED)
    d.arrow([out.top, (cx, 30)], label="output (B, n_heads, Lq, d_k)", side="right", label_at=0.45)
    d.text(cx + 6, 92, "returned with the weights", size=11, color=MUTED, anchor="start")
    return d


@diagram("ch02-multi-head", chapter=2)
def multi_head():
    d = Drawing(780, 640, "Multi-head attention (Figure 2, right, of the paper) with the shapes of the code")
    cols = {"q": 180, "k": 390, "v": 600}
    lengths = {"q": "Lq", "k": "Lk", "v": "Lk"}
    for name, cx in cols.items():
        full = {"q": "query", "k": "key", "v": "value"}[name]
        d.text(cx, 620, full, size=13, mono=True)
        lin = d.box(cx - 90, 510, 180, 44, f"w_{name}", part="attention", sub="Linear(d_model, d_model)", mono=True)
        d.arrow([(cx, 606), lin.bottom], label=f"(B, {lengths[name]}, d_model)", side="right", head=7)
        split = d.box(cx - 90, 400, 180, 44, "split_heads", part="tensor", sub="view, transpose(1, 2)", mono=True)
        d.arrow([lin.top, split.bottom], label=f"(B, {lengths[name]}, d_model)", side="right", head=7)
        d.arrow([split.top, (cx, 347)], label=f"(B, n_heads, {lengths[name]}, d_k)", side="right", head=7)
    for i in (2, 1):  # the heads behind the front one
        d.rect(130 + 10 * i, 290 - 10 * i, 520, 56, PARTS["attention"][0], stroke=PARTS["attention"][1], rx=6)
    att = d.box(130, 290, 520, 56, "Scaled dot-product attention", part="attention",
                sub="scaled_dot_product_attention(q, k, v, mask, self.dropout)", size=14)
    d.text(680, 276, "x n_heads", size=13, anchor="start", weight="bold")
    m = d.box(14, 300, 80, 36, "mask", part="mask", mono=True)
    d.arrow([m.right, (att.x - 1, m.cy)], head=7)
    d.text(10, 354, "(B, 1, 1, Lk)", size=10.5, mono=True, color=MUTED, anchor="start")
    d.text(10, 370, "(B, 1, Lq, Lk)", size=10.5, mono=True, color=MUTED, anchor="start")
    d.arrow([(570, 270), (570, 206)], head=7)
    d.text(578, 222, "self.attn", size=11.5, mono=True, anchor="start")
    d.text(578, 240, "(B, n_heads, Lq, Lk)", size=11, mono=True, color=MUTED, anchor="start")
    merge = d.box(245, 170, 290, 44, "merge heads (concat)", part="tensor",
                  sub="transpose(1, 2).reshape(B, Lq, d_model)")
    d.arrow([(390, 270), merge.bottom], label="(B, n_heads, Lq, d_k)", side="right", head=7)
    out = d.box(300, 70, 180, 44, "w_o", part="attention", sub="Linear(d_model, d_model)", mono=True)
    d.arrow([merge.top, out.bottom], label="(B, Lq, d_model)", side="right", head=7)
    d.arrow([out.top, (390, 22)], label="output (B, Lq, d_model)", side="right", head=7)
    d.text(20, 30, "n_heads heads, each of d_k = d_model // n_heads", size=12, anchor="start", color=MUTED)
    return d


@diagram("ch02-masks", chapter=2)
def masks():
    d = Drawing(780, 370, "The three masks: padding hides key columns, causal keeps the lower triangle, "
                          "cross-attention hides source padding")
    c, y = 24, 96
    real = 3  # tokens of the sentence that are not padding
    panels = [
        (70, "padding_mask(tgt, pad)", ("(B, 1, 1, L)", "hides the padding key columns"),
         [[j < real for j in range(6)] for _ in range(6)], ["6", "8", "2", "pad", "pad", "pad"], "query"),
        (330, "subsequent_mask(L)", ("(1, L, L)", "query i sees keys j <= i"),
         [[j <= i for j in range(6)] for i in range(6)], [str(j) for j in range(6)], "query"),
        (590, "padding_mask(src, pad)", ("(B, 1, 1, S)", "T = 4 queries, S = 6 keys"),
         [[j < 4 for j in range(6)] for _ in range(4)], ["3", "5", "9", "4", "pad", "pad"], "target"),
    ]
    heads = ["padding (self-attention)", "causal (decoder self-attention)", "cross-attention, T != S"]
    for (x, code, note, values, keys, rows), head in zip(panels, heads):
        g = d.grid(x, y, values, cell=c, colors=ALLOWED, stroke=GRID)
        d.rect(x, y, g.w, g.h, "none", stroke="#999999", width=1)
        _cols(d, x, y - 12, c, keys, size=10)
        _rows(d, x, y, c, [str(i) for i in range(len(values))], size=10.5, color=MUTED)
        d.text(g.cx, 28, head, size=13, weight="bold")
        d.text(g.cx, 50, code, size=11.5, mono=True)
        d.text(g.cx, 70, "keys: source" if rows == "target" else "keys", size=10.5, color=MUTED)
        d.text(x - 30, y + g.h / 2, f"queries: {rows}" if rows == "target" else "queries", size=10.5, color=MUTED,
               rotate=-90)
        d.text(g.cx, g.y2 + 18, note[0], size=11.5, mono=True, color=MUTED)
        d.text(g.cx, g.y2 + 36, note[1], size=11.5, color=MUTED)
    d.legend(200, 326, [("mask", "True: may attend"), ("#FFFFFF", "False: hidden, its score becomes -inf")])
    d.text(390, 354, "a decoder's self-attention uses padding & causal; both broadcast to (B, n_heads, Lq, Lk)",
           size=11.5, color=MUTED)
    return d
