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
    d = Drawing(780, 390, "Step 1: the score matrix is every word's vector dotted with every word's vector")
    c, y = 32, 96
    vec = d.grid(70, y, VECTORS, cell=c, fmt=_num, size=12)
    _rows(d, vec.x, y, c, WORDS)
    _cols(d, vec.x, y - 14, c, KINDS, size=11, color=MUTED)
    _outline(d, vec.x, y + CAT * c, 4 * c, c)
    d.text(vec.x2 + 22, vec.cy, "@", size=18)
    vt = d.grid(vec.x2 + 44, y + c, [list(col) for col in zip(*VECTORS)], cell=c, fmt=_num, size=12)
    _cols(d, vt.x, vt.y - 14, c, WORDS, size=12)
    for j, k in enumerate(KINDS):
        d.text(vt.x2 + 6, vt.y + (j + 0.5) * c, k, size=11, anchor="start", color=MUTED)
    _outline(d, vt.x + 5 * c, vt.y, c, 4 * c)
    d.text(vt.x2 + 62, vec.cy, "=", size=20)
    s = d.grid(vt.x2 + 118, y, SCORES, cell=c, fmt=_num, size=12)
    _rows(d, s.x, y, c, WORDS)
    _cols(d, s.x, y - 14, c, WORDS, size=12)
    _outline(d, s.x + 5 * c, y + CAT * c, c, c)
    for g, name, shape in ((vec, "vectors", "(L, d_model) = (6, 4)"), (vt, "vectors.T", "(d_model, L) = (4, 6)"),
                           (s, "scores", "(L, L) = (6, 6)")):
        d.text(g.cx, 40, name, size=13.5, mono=True)
        d.text(g.cx, vec.y2 + 20, shape, size=11.5, mono=True, color=MUTED)
    d.text(390, 342, "scores[cat, mat] = cat · mat = 1: both are nouns", size=13, color=ACCENT)
    d.text(390, 366, "row: the word asking (query); column: the word asked (key)", size=12.5, color=MUTED)
    return d


@diagram("ch02-step-softmax", chapter=2)
def step_softmax():
    d = Drawing(760, 310, "Step 2: softmax turns the row of scores of cat into weights that sum to 1")
    c = 46
    x, y = 150, 70
    row = SCORES[CAT]
    total = sum(math.exp(s) for s in row)
    lines = [("scores[cat]", row, lambda v: _num(v)), ("exp", [math.exp(s) for s in row], lambda v: f"{v:.2f}"),
             (f"÷ sum = {total:.2f}", [math.exp(s) / total for s in row], lambda v: f"{v:.2f}")]
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
    # every row at once: the table the cell prints
    wx, wy, wc = 534, 70, 30
    w = d.grid(wx, wy, WEIGHTS, cell=wc, fmt=lambda v: _num(v)[:3], size=11)
    _rows(d, wx, wy, wc, WORDS, size=11.5)
    _cols(d, wx, wy - 14, wc, WORDS, size=11)
    _outline(d, wx, wy + CAT * wc, 6 * wc, wc)
    d.text(w.cx, 30, "weights = scores.softmax(dim=-1)", size=11.5, mono=True)
    d.text(w.cx, w.y2 + 20, "(L, L): every row sums to 1", size=11.5, color=MUTED)
    d.text(w.cx, w.y2 + 38, "the row of cat is worked out on the left", size=11.5, color=MUTED)
    return d


@diagram("ch02-step-weighted-sum", chapter=2)
def step_weighted_sum():
    d = Drawing(760, 350, "Step 3: the output of cat is the sum of the word vectors, each times cat's weight on it")
    c, x, y = 32, 150, 48
    vx = x + c + 36
    _cols(d, vx, y - 16, c, KINDS, size=11, color=MUTED)
    d.text(x + c / 2, y - 16, "weight", size=11, color=MUTED)
    for i, word in enumerate(WORDS):
        top = y + i * (c + 5)
        d.grid(x, top, [[WEIGHTS[CAT][i]]], cell=c, fmt=_num, size=11)
        d.text(x + c + 18, top + c / 2, "×", size=14)
        d.grid(vx, top, [VECTORS[i]], cell=c, fmt=_num, size=11.5)
        d.text(x - 10, top + c / 2, word, size=12.5, anchor="end")
        if i:
            d.text(vx + 4 * c + 16, top - 2.5, "+", size=15, color=MUTED)
    line_y = y + 6 * (c + 5) + 2
    d.polyline([(x - 40, line_y), (vx + 4 * c + 10, line_y)], width=1.2)
    oy = line_y + 10
    d.grid(vx, oy, [OUTPUTS[CAT]], cell=c, fmt=_num, size=11)
    _outline(d, vx, oy, 4 * c, c)
    d.text(x - 10, oy + c / 2, "output of cat", size=12.5, anchor="end", color=ACCENT)
    d.text(vx + 4 * c + 14, oy + c / 2, "mostly noun: cat read cat and mat", size=12.5, anchor="start",
           color=ACCENT)
    # every word at once: one matrix product
    mx, my, mc = 456, 100, 15
    d.text(596, 40, "every word at once, one matrix product:", size=12.5)
    d.text(596, 62, "outputs = weights @ vectors", size=12, mono=True)
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
        b = d.box(150, cy - 23, 170, 46, f"to_{name}", part="attention", sub="nn.Linear(d_model, d_k)", mono=True)
        d.arrow([(x.x2 + 4, x.cy), (120, x.cy), (120, cy), (b.x - 1, cy)], head=7)
        g = d.grid(362, cy - 36, [[0.45] * 2 for _ in range(6)], cell=12)
        d.arrow([b.right, (g.x - 3, cy)], head=7)
        d.text(g.x2 + 8, cy - 9, name, size=14, mono=True, anchor="start", weight="bold")
        d.text(g.x2 + 8, cy + 9, "(L, d_k)", size=11, mono=True, color=MUTED, anchor="start")
        ends[name] = (g.x2 + 72, cy)
    op = d.box(480, 95, 150, 50, "q @ k.T", part="attention", sub="/ math.sqrt(d_k)", mono=True)
    d.arrow([ends["q"], (op.cx, 70), (op.cx, op.y - 1)], head=7)
    d.arrow([ends["k"], (op.cx, 170), (op.cx, op.y2 + 1)], head=7)
    s = d.grid(672, 84, [[0.3] * 6 for _ in range(6)], cell=12)
    d.text(s.cx, s.y - 14, "scores_qk", size=12, mono=True)
    d.text(s.cx + 4, s.y2 + 14, "(L, L)", size=11, mono=True, color=MUTED, anchor="start")
    d.arrow([op.right, (s.x - 3, op.cy)], head=7)
    mix = d.box(480, 245, 150, 50, "softmax(dim=-1)", part="attention", sub="then @ v", mono=True)
    d.arrow([ends["v"], (mix.x - 1, 270)], head=7)
    d.arrow([(s.cx, s.y2 + 4), (s.cx, 270), (mix.x2 + 1, 270)], head=7)
    d.arrow([mix.bottom, (mix.cx, 335)], head=7)
    d.text(mix.cx + 10, 326, "out_qkv (L, d_k)", size=11.5, mono=True, color=MUTED, anchor="start")
    d.text(20, 316, "L = 6 words, d_model = 4, d_k = 2", size=12, anchor="start", color=MUTED)
    d.text(20, 336, "to_q, to_k, to_v are learned; untrained, random", size=12, anchor="start", color=MUTED)
    return d


# the weights step 5's cell prints (seed 0, to_q and to_k of step 4): each row sums to 1, 0 above the diagonal;
# tests/test_diagrams.py checks them against that cell's committed output
CAUSAL_WEIGHTS = [[1.00],
                  [0.49, 0.51],
                  [0.32, 0.32, 0.36],
                  [0.22, 0.23, 0.28, 0.28],
                  [0.20, 0.20, 0.20, 0.20, 0.20],
                  [0.16, 0.17, 0.17, 0.17, 0.16, 0.17]]


@diagram("ch02-step-causal", chapter=2)
def step_causal():
    d = Drawing(800, 320, "Step 5: the causal mask hides later words before the softmax")
    c, y = 28, 90
    lower = [[j <= i for j in range(6)] for i in range(6)]
    panels = [(56, "causal", "= ones(6, 6).tril(), bool", "teal, True: key j <= query i"),
              (310, "hidden", "= scores_qk.masked_fill(~causal, -inf)", "s: a score of step 4; later keys: -inf"),
              (586, "weights_causal", "= hidden.softmax(dim=-1)", "0 above the diagonal; rows sum to 1")]
    for x, title, code, note in panels:
        _rows(d, x, y, c, WORDS, size=11.5)
        _cols(d, x, y - 13, c, WORDS, size=11)
        d.text(x + 3 * c, 26, title, size=12.5, mono=True)
        d.text(x + 3 * c, 46, code, size=11, mono=True, color=MUTED)
        d.text(x + 3 * c, y + 6 * c + 18, note, size=11.5, color=MUTED)
    d.grid(56, y, lower, cell=c, colors=ALLOWED, stroke=GRID)
    d.rect(56, y, 6 * c, 6 * c, "none", stroke="#999999", width=1)
    d.grid(310, y, [[0.25 if ok else 0 for ok in row] for row in lower], cell=c, stroke=GRID,
           labels=[["s" if ok else "-∞" for ok in row] for row in lower], size=11)
    d.rect(310, y, 6 * c, 6 * c, "none", stroke="#999999", width=1)
    weights = [row + [0.0] * (6 - len(row)) for row in CAUSAL_WEIGHTS]
    d.grid(586, y, weights, cell=c, stroke=GRID, fmt=_num, size=11)
    d.rect(586, y, 6 * c, 6 * c, "none", stroke="#999999", width=1)
    d.arrow([(56 + 6 * c + 8, y + 3 * c), (310 - 36, y + 3 * c)], head=7)
    d.arrow([(310 + 6 * c + 8, y + 3 * c), (586 - 40, y + 3 * c)], label="softmax", side="above", mono=True, head=7)
    d.text(400, 302, "\"the\", the first word, sees only itself; \"mat\", the last, sees every word", size=12.5,
           color=ACCENT)
    return d


@diagram("ch02-split-heads", chapter=2)
def split_heads():
    d = Drawing(800, 480, "Splitting d_model into heads and merging back are reshapes")
    c, L, h, dk = 26, 6, 2, 2
    levels = [0.22, 0.62]  # head 0 light, head 1 dark
    block = lambda head: ([[levels[head]] * dk for _ in range(L)], [[str(head * dk + j) for j in range(dk)]] * L)
    y = 112
    shape_y = y + L * c + 44  # the shapes under every panel
    # (B, L, d_model): the sentence of step 6 (B = 1), a row per word, a column per feature
    full = d.grid(86, y, [[levels[j // dk] for j in range(h * dk)] for _ in range(L)], cell=c,
                  labels=[[str(j) for j in range(h * dk)]] * L, size=11)
    _rows(d, full.x, y, c, WORDS, size=11.5)
    d.text(full.cx, 34, "x = w_q(sentence)", size=12.5, mono=True)
    d.text(full.cx, 54, "B = 1 sentence", size=11, color=MUTED)
    d.text(full.cx, y - 14, "features", size=11, color=MUTED)
    d.brace(full.x, full.y2 + 4, full.x2, "d_model", size=11)
    d.text(full.cx, shape_y, "(B, L, d_model)", size=11.5, mono=True, color=MUTED)
    d.text(full.cx, shape_y + 17, "(1, 6, 4)", size=11.5, mono=True, color=MUTED)
    # view: the same numbers, each row's columns grouped into n_heads blocks of d_k
    x1, gap = 300, 12
    for head in range(h):
        gx = x1 + head * (dk * c + gap)
        values, labels = block(head)
        d.grid(gx, y, values, cell=c, labels=labels, size=11)
        d.brace(gx, y - 4, gx + dk * c, f"head {head}", below=False, size=11, mono=False)
    d.brace(x1, y + L * c + 4, x1 + dk * c, "d_k", size=11)
    view_w = h * dk * c + (h - 1) * gap
    d.text(x1 + view_w / 2, 34, ".view(B, L, n_heads, d_k)", size=12, mono=True)
    d.text(x1 + view_w / 2, 54, "no copy", size=11, color=MUTED)
    d.text(x1 + view_w / 2, shape_y, "(B, L, n_heads, d_k)", size=11.5, mono=True, color=MUTED)
    d.text(x1 + view_w / 2, shape_y + 17, "(1, 6, 2, 2)", size=11.5, mono=True, color=MUTED)
    d.arrow([(full.x2 + 8, full.cy), (x1 - 10, full.cy)], head=7)
    # transpose(1, 2): one (L, d_k) matrix per head
    x2, hgap = 580, 46
    for head in range(h):
        gx = x2 + head * (dk * c + hgap)
        values, labels = block(head)
        d.grid(gx, y, values, cell=c, labels=labels, size=11)
        _rows(d, gx, y, c, WORDS, size=11, color=MUTED)
        d.text(gx + dk * c / 2, y - 16, f"head {head}", size=11.5)
    heads_cx = x2 + (2 * dk * c + hgap) / 2
    d.brace(x2, y + L * c + 4, x2 + dk * c, "d_k", size=11)
    d.text(heads_cx, 34, ".transpose(1, 2)", size=12, mono=True)
    d.text(heads_cx, 54, "heads to the front", size=11, color=MUTED)
    d.text(heads_cx, shape_y, "(B, n_heads, L, d_k)", size=11.5, mono=True, color=MUTED)
    d.text(heads_cx, shape_y + 17, "(1, 2, 6, 2)", size=11.5, mono=True, color=MUTED)
    d.arrow([(x1 + view_w + 10, full.cy), (x2 - 40, full.cy)], head=7)
    # merging back
    by = shape_y + 58
    d.arrow([(heads_cx, shape_y + 28), (heads_cx, by), (full.cx, by), (full.cx, shape_y + 28)], head=8,
            color=ACCENT)
    mid = (full.cx + heads_cx) / 2
    d.text(mid, by - 14, "after attention in each head, back to (B, L, d_model):", size=12)
    d.text(mid, by + 18, ".transpose(1, 2).reshape(B, L, d_model)", size=12, mono=True)
    d.text(mid, by + 38, "step 6: torch.cat(heads, dim=-1), (6, 2) x 2 -> (6, 4)", size=11.5, mono=True,
           color=MUTED)
    d.text(400, by + 68, "head h at position t holds the columns h*d_k .. (h+1)*d_k - 1 of x[:, t]", size=12.5,
           color=ACCENT)
    d.text(400, by + 88, "here step 6's sizes: L = 6, d_model = 4, n_heads = 2, d_k = 2", size=11.5, color=MUTED)
    return d


# ------------------------------------------------------------------------------- sections 2 to 4, the exported code
@diagram("ch02-scaled-dot-product", chapter=2)
def scaled_dot_product():
    d = Drawing(800, 580, "Scaled dot-product attention (Figure 2, left, of the paper) with the shapes of the code")
    cx, w = 320, 200
    bx = cx - w / 2
    steps = [(450, "MatMul", ["query @ key.transpose(-2, -1)"], "attention"),
             (370, "Scale", ["/ math.sqrt(d_k)"], "attention"),
             (290, "Mask (optional)", ["masked_fill(~mask, float('-inf'))", "a hidden score becomes -inf"], "mask"),
             (210, "Softmax", ["softmax(dim=-1), over the keys", "each row sums to 1 (0 if no key allowed)"],
              "attention"),
             (130, "MatMul", [], "attention")]
    boxes = []
    for top, label, notes, part in steps:
        boxes.append(d.box(bx, top, w, 40, label, part=part, size=13.5))
        for i, note in enumerate(notes):
            y = top + 20 + (i - (len(notes) - 1) / 2) * 18
            d.text(bx + w + 16, y, note, size=11.5 if i == 0 else 11, mono=i == 0, anchor="start", color=MUTED)
    matmul, scale, mask, softmax, out = boxes
    q = d.box(cx - 100, 530, 90, 34, "query", part="tensor", mono=True)
    k = d.box(cx + 10, 530, 90, 34, "key", part="tensor", mono=True)
    d.arrow([q.top, (q.cx, matmul.y2 + 1)], label="(B, n_heads, Lq, d_k)", side="left", head=7)
    d.arrow([k.top, (k.cx, matmul.y2 + 1)], label="(B, n_heads, Lk, d_k)", side="right", head=7)
    shape = "(B, n_heads, Lq, Lk)"
    d.arrow([matmul.top, scale.bottom], label=f"scores {shape}", side="left")
    d.arrow([scale.top, mask.bottom], label=shape, side="left")
    d.arrow([mask.top, softmax.bottom], label=shape, side="left")
    d.arrow([softmax.top, out.bottom], label=f"weights {shape}", side="left")
    # the values come in from the right, as in the paper; their shape is written in their box
    v = d.box(606, 524, 170, 46, "value", part="tensor", sub="(B, n_heads, Lk, d_k)", mono=True)
    d.arrow([v.top, (v.cx, out.cy), (out.x2 + 1, out.cy)], head=7)
    m = d.box(24, 293, 90, 34, "mask", part="mask", mono=True)
    d.arrow([m.right, (mask.x - 1, m.cy)], head=7)
    d.text(m.cx, 278, "True = may attend", size=11, color=MUTED)
    d.text(m.cx, 342, "e.g. (B, 1, 1, Lk)", size=11, mono=True, color=MUTED)
    d.text(bx - 14, out.cy - 9, "weights @ value", size=11.5, mono=True, anchor="end", color=MUTED)
    d.text(bx - 14, out.cy + 9, "(after dropout, if given)", size=11, anchor="end", color=MUTED)
    d.arrow([out.top, (cx, 34)], label="output (B, n_heads, Lq, d_k)", side="right", label_at=0.6)
    d.text(cx + 6, 94, "returned with the weights", size=11, color=MUTED, anchor="start")
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
    d.text(680, 272, "x n_heads", size=13, anchor="start", weight="bold")
    d.text(680, 292, "in one call", size=11, anchor="start", color=MUTED)
    m = d.box(14, 300, 80, 36, "mask", part="mask", mono=True)
    d.arrow([m.right, (att.x - 1, m.cy)], head=7)
    d.text(10, 354, "(B, 1, 1, Lk)", size=11, mono=True, color=MUTED, anchor="start")
    d.text(10, 370, "or", size=11, color=MUTED, anchor="start")
    d.text(10, 386, "(B, 1, Lq, Lk)", size=11, mono=True, color=MUTED, anchor="start")
    d.arrow([(570, 270), (570, 206)], head=7)
    d.text(578, 222, "weights, kept in self.attn", size=11.5, anchor="start")
    d.text(578, 240, "(B, n_heads, Lq, Lk)", size=11, mono=True, color=MUTED, anchor="start")
    merge = d.box(245, 170, 290, 44, "merge heads (concat)", part="tensor",
                  sub="transpose(1, 2).reshape(B, Lq, d_model)")
    d.arrow([(390, 270), merge.bottom], label="(B, n_heads, Lq, d_k)", side="right", head=7)
    out = d.box(300, 70, 180, 44, "w_o", part="attention", sub="Linear(d_model, d_model)", mono=True)
    d.arrow([merge.top, out.bottom], label="(B, Lq, d_model)", side="right", head=7)
    d.arrow([out.top, (390, 22)], label="output (B, Lq, d_model)", side="right", head=7)
    # the names of the shapes
    for i, line in enumerate(("d_k = d_model // n_heads", "Lq: positions of the query", "Lk: positions of key, value",
                              "self-attention: Lq = Lk")):
        d.text(16, 28 + i * 19, line, size=12, anchor="start", color=MUTED)
    return d


@diagram("ch02-masks", chapter=2)
def masks():
    d = Drawing(780, 390, "The three masks: padding hides key columns, causal keeps the lower triangle, "
                          "cross-attention hides source padding")
    c, y = 26, 96
    real = 3  # tokens of the sentence that are not padding
    panels = [
        (66, "padding_mask(tgt, pad)", ("(B, 1, 1, L)", "one row of keys per sentence,", "the same for every query"),
         [[j < real for j in range(6)] for _ in range(6)], ["6", "8", "2", "pad", "pad", "pad"], "query"),
        (322, "subsequent_mask(L)", ("(1, L, L)", "the same for every sentence", ""),
         [[j <= i for j in range(6)] for i in range(6)], [str(j) for j in range(6)], "query"),
        (586, "padding_mask(src, pad)", ("(B, 1, 1, S)", "T = 4 target queries,", "S = 6 source keys"),
         [[j < 4 for j in range(6)] for _ in range(4)], ["3", "5", "9", "4", "pad", "pad"], "target"),
    ]
    heads = ["padding (self-attention)", "causal (decoder self-attention)", "cross-attention, T != S"]
    for (x, code, note, values, keys, rows), head in zip(panels, heads):
        g = d.grid(x, y, values, cell=c, colors=ALLOWED, stroke=GRID)
        d.rect(x, y, g.w, g.h, "none", stroke="#999999", width=1)
        _cols(d, x, y - 12, c, keys, size=11)
        _rows(d, x, y, c, [str(i) for i in range(len(values))], size=11, color=MUTED)
        d.text(x + 3 * c, 26, head, size=13, weight="bold")
        d.text(x + 3 * c, 48, code, size=11.5, mono=True)
        d.text(x + 3 * c, 70, "keys: source" if rows == "target" else "keys", size=11, color=MUTED)
        d.text(x - 30, y + g.h / 2, f"queries: {rows}" if rows == "target" else "queries", size=11, color=MUTED,
               rotate=-90)
        d.text(x + 3 * c, g.y2 + 18, note[0], size=11.5, mono=True, color=MUTED)
        for k, line in enumerate(note[1:]):
            d.text(x + 3 * c, g.y2 + 36 + 17 * k, line, size=11.5, color=MUTED)
    d.legend(200, 346, [("mask", "True: may attend"), ("#FFFFFF", "False: hidden, its score becomes -inf")])
    d.text(390, 374, "a decoder's self-attention uses padding & causal; both broadcast to (B, n_heads, Lq, Lk)",
           size=11.5, color=MUTED)
    return d
