# Hand-written tool module (not generated from a notebook).
"""Chapter 3's diagrams (post-norm against pre-norm, layer norm, the feed-forward network, the encoder and decoder
layers) and chapter 4's (the two stacks joined by the memory, the shared embedding table, where the parameters are)."""
from __future__ import annotations

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, PARTS, Drawing, shade


def _frame(d: Drawing, box, color="#999999", width=1.0):
    d.rect(box.x, box.y, box.w, box.h, "none", stroke=color, width=width)


def _dot(d: Drawing, x, y, color=INK):
    d.circle(x, y, 3, color, stroke=color, width=1)


def _box(d: Drawing, x, y, w, h, label, sub, part, size=12, sub_size=11):
    """A box of `part` with a code label and a second line in grey, the second line no smaller than sub_size."""
    box = d.box(x, y, w, h, None, part=part)
    d.text(x + w / 2, y + h / 2 - size * 0.55, label, size=size, mono=True)
    d.text(x + w / 2, y + h / 2 + size * 0.68, sub, size=sub_size, mono=True, color=MUTED)
    return box


# ---------------------------------------------------------------- chapter 3


@diagram("ch03-post-pre-norm", chapter=3)
def post_pre_norm() -> Drawing:
    d = Drawing(780, 660, "Post-norm against pre-norm: where the layer norm sits on the residual path")
    for panel, pre in enumerate((False, True)):
        sx = 110 + panel * 400  # the residual stream runs up this line
        bx = sx + 150  # the branch: the sublayer (and, in pre-norm, its norm)
        d.text(sx + 80, 22, "pre-norm (norm_first=True)" if pre else "post-norm (the paper)", size=14,
               weight="bold")
        d.text(sx + 80, 44, "x + dropout(sublayer(norm(x)))" if pre else "norm(x + dropout(sublayer(x)))",
               size=12, mono=True, color=MUTED)
        y0 = 600
        d.text(sx, y0 + 40, "x  (B, L, d_model)", size=12, mono=True)
        d.text(sx + 80, 68, "identity path: only additions on the stream" if pre
               else "a LayerNorm on the stream after every sublayer", size=12, color=ACCENT)
        d.polyline([(sx, y0 + 28), (sx, y0)], stroke=ACCENT, width=3)
        for unit, (part, name) in enumerate((("attention", "self-attention"), ("ffn", "feed-forward"))):
            top = y0 - 200
            _dot(d, sx, y0, ACCENT)
            d.polyline([(sx, y0), (bx, y0), (bx, y0 - 22)], width=1.4)
            if pre:
                nb = d.box(bx - 60, y0 - 58, 120, 34, "LayerNorm", part="norm")
                d.arrow([(bx, y0 - 22), nb.bottom], head=0)
                sub = d.box(bx - 70, y0 - 122, 140, 44, name, part=part)
                d.arrow([nb.top, sub.bottom], head=7)
            else:
                sub = d.box(bx - 70, y0 - 100, 140, 44, name, part=part)
                d.arrow([(bx, y0 - 22), sub.bottom], head=7)
            plus = (sx, y0 - 140)
            d.arrow([sub.top, (bx, plus[1]), (sx + 12, plus[1])], head=7, label="dropout", side="above",
                    label_at=0.5)
            d.polyline([(sx, y0), (sx, plus[1] + 10)], stroke=ACCENT, width=3)
            d.plus(*plus, r=10)
            if pre:
                d.polyline([(sx, plus[1] - 10), (sx, top)], stroke=ACCENT, width=3)
            else:
                nb = d.box(sx - 55, plus[1] - 50, 110, 30, "LayerNorm", part="norm", highlight=True)
                d.polyline([(sx, plus[1] - 10), (sx, nb.y2)], stroke=ACCENT, width=3)
                d.polyline([(sx, nb.y), (sx, top)], stroke=ACCENT, width=3)
            y0 = top
        if pre:
            fn = d.box(sx - 80, y0 - 40, 160, 30, "final LayerNorm", part="norm")
            d.polyline([(sx, y0), (sx, fn.y2)], stroke=ACCENT, width=3)
            d.arrow([(sx, fn.y), (sx, 112)], head=7)
            d.text(sx + 88, y0 - 33, "one per stack:", size=11, anchor="start", color=MUTED)
            d.text(sx + 88, y0 - 17, "Encoder.norm (ch. 4)", size=11, anchor="start", mono=True, color=MUTED)
        else:
            d.arrow([(sx, y0), (sx, 112)], head=7)
        d.text(sx, 100, "(B, L, d_model)", size=11.5, mono=True, color=MUTED)
    d.text(80, 300, "residual stream", size=11.5, color=ACCENT, rotate=-90)
    d.text(480, 300, "residual stream", size=11.5, color=ACCENT, rotate=-90)
    return d


@diagram("ch03-layer-norm", chapter=3)
def layer_norm() -> Drawing:
    d = Drawing(780, 360, "Layer norm: statistics over each position's d_model features, a gain and bias per feature")
    rows = [[3, 6, 1, 8, 4, 2, 7, 5], [9, 8, 9, 7, 9, 8, 8, 9], [1, 0, 2, 1, 0, 3, 1, 0], [5, 2, 8, 4, 6, 3, 7, 1]]
    cell, L, D = 20, 4, 8
    xx, gy = 70, 130
    # the input: a (B, L, d_model) block, one sheet per batch element
    d.grid(xx + 10, gy - 10, [[0.15] * D for _ in range(L)], cell=cell)
    _frame(d, d.grid(xx, gy, [[v / 10 for v in r] for r in rows], cell=cell))
    d.text(xx + D * cell / 2, 76, "x", size=14, mono=True)
    d.text(xx + D * cell / 2, 98, "(B, L, d_model)", size=12, mono=True, color=MUTED)
    for i in range(L):
        d.text(xx - 8, gy + i * cell + cell / 2, f"pos {i}", size=11, anchor="end", color=MUTED)
    row = 0  # the position the picture follows
    d.rect(xx - 1, gy + row * cell - 1, D * cell + 2, cell + 2, "none", stroke=ACCENT, width=2.4)
    d.brace(xx, gy + L * cell + 6, xx + D * cell, "dim=-1: over d_model")
    # the statistics, one number per position
    means = [sum(r) / D for r in rows]
    vars_ = [sum((v - m) ** 2 for v in r) / D for r, m in zip(rows, means)]
    mx = 320
    for k, (name, vals, top) in enumerate((("mean", means, 10), ("var", vars_, 12))):
        x = mx + k * 60
        _frame(d, d.grid(x, gy, [[v / top] for v in vals], cell=cell))
        d.rect(x - 1, gy + row * cell - 1, cell + 2, cell + 2, "none", stroke=ACCENT, width=2.4)
        d.text(x + cell / 2, 76, name, size=13, mono=True)
    d.text(mx + 40, 98, "(B, L, 1) each", size=11.5, mono=True, color=MUTED)
    d.text(mx + 40, gy + L * cell + 20, "var is biased:", size=11, color=MUTED)
    d.text(mx + 40, gy + L * cell + 36, "divides by d_model", size=11, color=MUTED)
    d.arrow([(xx + D * cell + 14, gy + cell / 2), (mx - 12, gy + cell / 2)], color=ACCENT, head=7)
    # the output: each row normalized, then scaled by weight and shifted by bias, feature by feature
    ox = 580
    gain = [0.9, 0.6, 0.8, 0.5, 0.7, 0.9, 0.6, 0.8]
    out = []
    for r, m, v in zip(rows, means, vars_):
        out.append([min(1.0, max(0.0, 0.5 + 0.18 * g * (x - m) / (v + 1e-6) ** 0.5)) for x, g in zip(r, gain)])
    _frame(d, d.grid(ox, gy, out, cell=cell))
    d.rect(ox - 1, gy + row * cell - 1, D * cell + 2, cell + 2, "none", stroke=ACCENT, width=2.4)
    d.text(ox + D * cell / 2, 76, "output", size=13)
    d.text(ox + D * cell / 2, 98, "(B, L, d_model)", size=12, mono=True, color=MUTED)
    d.arrow([(mx + 60 + cell + 12, gy + cell / 2), (ox - 12, gy + cell / 2)], color=ACCENT, head=7)
    py = gy + L * cell + 30
    for k, (name, vals) in enumerate((("weight", gain), ("bias", [0.3, 0.5, 0.2, 0.4, 0.6, 0.3, 0.5, 0.4]))):
        y = py + k * 30
        _frame(d, d.grid(ox, y, [vals], cell=cell))
        d.text(ox - 8, y + cell / 2, f"{name} (d_model,)", size=11.5, anchor="end", mono=True)
    d.text(ox + D * cell / 2, py + 72, "one gain and one bias per feature,", size=11, color=MUTED)
    d.text(ox + D * cell / 2, py + 88, "the same at every position", size=11, color=MUTED)
    d.text(390, 30, "weight * (x - mean) / sqrt(var + eps) + bias", size=13, mono=True)
    return d


@diagram("ch03-feed-forward", chapter=3)
def feed_forward() -> Drawing:
    d = Drawing(780, 330, "The position-wise feed-forward network: one small network applied to every position alike")
    L, cell, hc, dm, dff = 4, 18, 12, 4, 16
    rows_y = [74 + i * 44 for i in range(L)]
    ix, w1x, hx, w2x, ox = 90, 200, 304, 534, 640
    d.text(ix + dm * cell / 2, 24, "x", size=13, mono=True)
    d.text(hx + dff * hc / 2, 24, "relu(w_1(x)), then dropout", size=13, mono=True)
    d.text(hx + dff * hc / 2, 44, "white: zeroed by the ReLU", size=11, color=MUTED)
    d.text(ox + dm * cell / 2, 24, "output", size=13)
    for i, y in enumerate(rows_y):
        d.text(ix - 10, y + cell / 2, f"pos {i}", size=11, anchor="end", color=MUTED)
        _frame(d, d.grid(ix, y, [[((i * 5 + j * 3) % 7) / 8 + 0.1 for j in range(dm)]], cell=cell))
        hidden = [0.0 if (i * 7 + j * 5) % 3 == 0 else ((i + j * 7) % 9) / 11 + 0.2 for j in range(dff)]
        _frame(d, d.grid(hx, y + (cell - hc) / 2, [hidden], cell=hc))
        _frame(d, d.grid(ox, y, [[((i * 3 + j * 5) % 7) / 8 + 0.1 for j in range(dm)]], cell=cell))
        for a, b in ((ix + dm * cell + 4, w1x - 2), (w1x + 72, hx - 4), (hx + dff * hc + 4, w2x - 2),
                     (w2x + 72, ox - 4)):
            d.arrow([(a, y + cell / 2), (b, y + cell / 2)], head=6, width=1.2)
    top, bottom = rows_y[0] - 14, rows_y[-1] + cell + 14
    for x, name, sub in ((w1x, "w_1", "d_model -> d_ff"), (w2x, "w_2", "d_ff -> d_model")):
        d.box(x, top, 70, bottom - top, None, part="ffn")
        d.text(x + 35, (top + bottom) / 2 - 10, name, size=14, mono=True)
        d.text(x + 35, (top + bottom) / 2 + 12, "Linear", size=11, color=MUTED)
        d.text(x + 35, top - 12, sub, size=11, mono=True, color=MUTED)
    for x, w, shape in ((ix, dm * cell, "(B, L, d_model)"), (hx, dff * hc, "(B, L, d_ff)"),
                        (ox, dm * cell, "(B, L, d_model)")):
        d.brace(x, bottom + 2, x + w, shape)
    d.text(390, bottom + 56, "the same w_1 and w_2 at every position: positions never mix", size=12.5)
    d.text(390, bottom + 78, "here d_model = 4 and d_ff = 16: d_ff = 4 d_model, as in the paper (512 and 2048)",
           size=11.5, color=MUTED)
    return d


def _layer(d: Drawing, cx, y0, units, stream="(B, L, d_model)"):
    """Sublayer connections stacked bottom-up from y0, post-norm: sublayer, dropout, add, LayerNorm.

    units: (part, label, sub) per sublayer. Returns each sublayer's box and the y where the layer ends."""
    boxes = []
    for i, (part, label, sub) in enumerate(units):
        frame = d.rect(cx - 180, y0 - 168, 340, 176, "none", stroke="#AAAAAA", width=1, dash="5 4", rx=8)
        d.text(frame.x - 8, frame.cy - 18, f"sublayers[{i}]", size=11.5, anchor="end", mono=True)
        d.text(frame.x - 8, frame.cy, "SublayerConnection", size=11, anchor="end", color=MUTED)
        d.text(frame.x - 8, frame.cy + 16, "post-norm", size=11, anchor="end", color=MUTED)
        _dot(d, cx, y0)
        box = _box(d, cx - 140, y0 - 76, 280, 46, label, sub, part)
        d.arrow([(cx, y0), box.bottom], head=7)
        plus = d.plus(cx, y0 - 106, r=10)
        d.arrow([box.top, plus.bottom], head=6, label="dropout", side="right")
        d.arrow([(cx, y0), (cx - 160, y0), (cx - 160, plus.cy), plus.left], head=7, color=ACCENT)
        norm = d.box(cx - 60, y0 - 158, 120, 30, "LayerNorm", part="norm")
        d.arrow([plus.top, norm.bottom], head=6)
        boxes.append(box)
        y0 = norm.y - 44
        d.arrow([norm.top, (cx, y0)], head=0 if i < len(units) - 1 else 7,
                label=stream if i < len(units) - 1 else None, side="right")
    return boxes, y0


def _mask(d: Drawing, box, y, name, shape, code):
    """A mask (teal) entering an attention box from the right."""
    m = _box(d, box.x2 + 44, y - 21, 226, 42, f"{name} {shape}", code, "mask", size=11.5)
    d.arrow([m.left, (box.x2, y)], head=7)


@diagram("ch03-encoder-layer", chapter=3)
def encoder_layer() -> Drawing:
    d = Drawing(780, 520, "EncoderLayer: self-attention and feed-forward, each in its own sublayer connection")
    cx = 330
    d.text(cx, 500, "x  (B, L, d_model)", size=12.5, mono=True)
    d.arrow([(cx, 486), (cx, 450)], head=0)
    (attn, ffn), top = _layer(d, cx, 450, [
        ("attention", "self_attn(x, x, x, mask)", "q = k = v = x"),
        ("ffn", "feed_forward(x)", "d_model -> d_ff -> d_model"),
    ])
    _mask(d, attn, attn.cy, "mask", "(B, 1, 1, L)", "padding_mask(src)")
    d.text(cx + 8, top + 14, "(B, L, d_model)", size=11.5, anchor="start", mono=True, color=MUTED)
    d.text(30, 30, "EncoderLayer", size=14, mono=True, weight="bold", anchor="start")
    return d


@diagram("ch03-decoder-layer", chapter=3)
def decoder_layer() -> Drawing:
    d = Drawing(780, 730, "DecoderLayer: masked self-attention, cross-attention over the memory, feed-forward")
    cx = 330
    d.text(cx, 710, "x  (B, Lt, d_model), the target so far", size=12.5, mono=True)
    d.arrow([(cx, 696), (cx, 660)], head=0)
    (self_attn, src_attn, ffn), top = _layer(d, cx, 660, [
        ("attention", "self_attn(x, x, x, tgt_mask)", "masked: sees j <= i"),
        ("attention", "src_attn(x, memory, memory, src_mask)", "queries: x; keys, values: memory"),
        ("ffn", "feed_forward(x)", "d_model -> d_ff -> d_model"),
    ], stream="(B, Lt, d_model)")
    _mask(d, self_attn, self_attn.cy, "tgt_mask", "(B, 1, Lt, Lt)", "padding_mask & subsequent_mask")
    _mask(d, src_attn, src_attn.y + 12, "src_mask", "(B, 1, 1, Ls)", "padding_mask(src)")
    mem_y = src_attn.y2 - 10
    d.arrow([(src_attn.x2 + 260, mem_y), (src_attn.x2, mem_y)], head=8, color=INK, width=2)
    d.text(src_attn.x2 + 50, mem_y + 16, "memory (B, Ls, d_model)", size=12, anchor="start", mono=True)
    d.text(src_attn.x2 + 50, mem_y + 33, "the encoder's output: keys, values", size=11, anchor="start", color=MUTED)
    d.text(cx + 8, top + 14, "(B, Lt, d_model)", size=11.5, anchor="start", mono=True, color=MUTED)
    d.text(30, 30, "DecoderLayer", size=14, mono=True, weight="bold", anchor="start")
    return d


# ---------------------------------------------------------------- chapter 4


def _stack_layer(d: Drawing, x, y, w, bands, tag, tag_left):
    """One layer of a stack as bands, bottom-up; returns the y of each band's middle, bottom first."""
    h, mids = 26, []
    for k, (part, name) in enumerate(bands):
        top = y + (len(bands) - 1 - k) * h
        d.rect(x, top, w, h, PARTS[part][0], stroke=PARTS[part][1], width=1.2)
        d.text(x + w / 2, top + h / 2, name, size=11.5, mono=True)
        mids.append(top + h / 2)
    d.text(x - 8 if tag_left else x + w + 8, y + len(bands) * h / 2, tag, size=11.5, mono=True,
           anchor="end" if tag_left else "start")
    return mids


@diagram("ch04-stacks", chapter=4)
def stacks() -> Drawing:
    d = Drawing(780, 720, "The encoder and decoder stacks: the memory feeds the cross-attention of every decoder layer")
    ex, dx, w, bus = 120, 450, 180, 385
    enc_bands = [("attention", "self_attn"), ("ffn", "feed_forward")]
    dec_bands = [("attention", "self_attn"), ("attention", "src_attn"), ("ffn", "feed_forward")]
    for x, name, cls in ((ex, "encoder", "Encoder"), (dx, "decoder", "Decoder")):
        d.text(x + w / 2, 24, f"model.{name}", size=13.5, mono=True, weight="bold")
        d.text(x + w / 2, 44, f"{cls}: n_layers {cls}Layers", size=11.5, color=MUTED)
    # ---- embeddings
    for x, side, seq in ((ex, "src", "Ls"), (dx, "tgt", "Lt")):
        d.text(x + w / 2, 700, f"{side} (B, {seq})", size=12.5, mono=True)
        emb = d.box(x, 620, w, 44, f"{side}_embed", part="embed", sub="tokens + positions", mono=True)
        d.arrow([(x + w / 2, 686), emb.bottom], head=7)
        d.arrow([emb.top, (x + w / 2, 588)], head=7, label=f"(B, {seq}, d_model)", side="right", label_at=0.4)
    # ---- the encoder: n_layers layers, bottom-up
    tops = {}
    for i, (y, tag) in enumerate(((536, "layers[0]"), (446, "layers[1]"), (330, "layers[N-1]"))):
        _stack_layer(d, ex, y, w, enc_bands, tag, True)
        tops[i] = y
    d.arrow([(ex + w / 2, 536), (ex + w / 2, 500)], head=7)
    d.arrow([(ex + w / 2, 446), (ex + w / 2, 426)], head=0)
    d.text(ex + w / 2, 404, "...", size=14, color=MUTED)
    d.arrow([(ex + w / 2, 392), (ex + w / 2, 384)], head=0)
    enorm = _box(d, ex, 268, w, 40, "encoder.norm", "Identity in post-norm", "norm")
    d.arrow([(ex + w / 2, 330), enorm.bottom], head=7)
    # ---- the decoder: each layer reads the memory in its src_attn
    mids = []
    for y, tag in ((510, "layers[0]"), (394, "layers[1]"), (254, "layers[N-1]")):
        mids.append(_stack_layer(d, dx, y, w, dec_bands, tag, False)[1])
    d.arrow([(dx + w / 2, 510), (dx + w / 2, 472)], head=7)
    d.arrow([(dx + w / 2, 394), (dx + w / 2, 370)], head=0)
    d.text(dx + w / 2, 350, "...", size=14, color=MUTED)
    d.arrow([(dx + w / 2, 338), (dx + w / 2, 332)], head=0)
    dnorm = _box(d, dx, 188, w, 40, "decoder.norm", "Identity in post-norm", "norm")
    d.arrow([(dx + w / 2, 254), dnorm.bottom], head=7)
    gen = d.box(dx, 110, w, 44, "generator", part="output", sub="Linear, log_softmax", mono=True)
    d.arrow([dnorm.top, gen.bottom], head=7, label="(B, Lt, d_model)", side="right")
    d.arrow([gen.top, (dx + w / 2, 66)], head=7)
    d.text(dx + w / 2 + 8, 80, "(B, Lt, tgt_vocab)", size=11.5, anchor="start", mono=True, color=MUTED)
    # ---- the memory, once, into every decoder layer
    d.polyline([enorm.top, (ex + w / 2, 236), (bus, 236), (bus, mids[0])], stroke=ACCENT, width=2.4)
    for y in mids:
        _dot(d, bus, y, ACCENT)
        d.arrow([(bus, y), (dx - 1, y)], color=ACCENT, width=2.4, head=8)
    d.text(ex + w / 2 - 20, 222, "memory (B, Ls, d_model)", size=12, mono=True, color=ACCENT, anchor="start")
    d.text(bus - 8, 404, "keys and values", size=11, color=MUTED, anchor="end")
    d.text(bus - 8, 420, "of every src_attn", size=11, color=MUTED, anchor="end")
    d.text(ex + w / 2 + 8, 253, "computed once: encode()", size=11, color=MUTED, anchor="start")
    return d


@diagram("ch04-shared-embeddings", chapter=4)
def shared_embeddings() -> Drawing:
    d = Drawing(780, 410, "share_embeddings=True: one (vocab, d_model) table for both embeddings and the generator")
    gx, gy, cell = 336, 80, 18
    table = [[0.15 + 0.6 * ((i * 7 + j * 5) % 11) / 10 for j in range(6)] for i in range(10)]
    box = d.grid(gx, gy, table, cell=cell)
    d.rect(box.x - 2, box.y - 2, box.w + 4, box.h + 4, "none", stroke=ACCENT, width=2.4)
    d.text(box.cx, 28, "one Parameter", size=13.5, weight="bold")
    d.text(box.cx, 52, "(vocab, d_model)", size=12, mono=True, color=MUTED)
    d.brace(box.x, box.y2 + 6, box.x2, "d_model")
    d.text(box.x - 10, box.cy, "vocab", size=11.5, mono=True, color=MUTED, anchor="end")
    users = [(30, 70, "tgt_embed[0].embedding", "tgt (B, Lt) -> (B, Lt, d_model)", "embed"),
             (30, 210, "src_embed[0].embedding", "src (B, Ls) -> (B, Ls, d_model)", "embed"),
             (524, 140, "generator.proj", "(B, Lt, d_model) -> (B, Lt, vocab)", "output")]
    for x, y, name, sub, part in users:
        left = x < gx
        b = _box(d, x, y, 230 if left else 250, 50, name, sub, part, size=12.5)
        end = (b.x2 + 2, b.cy) if left else (b.x - 2, b.cy)
        start = (box.x - 4, b.cy) if left else (box.x2 + 4, b.cy)
        d.arrow([start, end], color=ACCENT, width=1.8, head=8)
        # (text, is code) under the box
        notes = [("rows by token id, then", False), ("TokenEmbedding x sqrt(d_model)", False)] if left else \
            [("x @ weight.T + bias", True), ("Linear(d_model, vocab).weight", True), ("is (vocab, d_model) too;", False),
             ("its bias (vocab,) stays its own", False)]
        for k, (note, code) in enumerate(notes):
            d.text(b.cx, b.y2 + 14 + k * 17, note, size=11.5 if code else 11, mono=code, color=MUTED)
    code = ["model.tgt_embed[0].embedding.weight = model.src_embed[0].embedding.weight",
            "model.generator.proj.weight = model.src_embed[0].embedding.weight"]
    for k, line in enumerate(code):
        d.text(390, 334 + k * 20, line, size=12, mono=True)
    d.text(390, 386, "one vocabulary for source and target; 2 x vocab x d_model parameters fewer", size=12,
           color=MUTED)
    return d


@diagram("ch04-parameters", chapter=4)
def parameters() -> Drawing:
    d = Drawing(780, 300, "Where the base model's parameters sit, with and without shared embeddings")
    vocab, dm, dff, n = 37000, 512, 2048, 6
    table = vocab * dm
    attn = 4 * (dm * dm + dm)  # four projections with biases
    ffn = dm * dff + dff + dff * dm + dm
    layers = [(n * attn, "attention", "enc attn"), (n * ffn, "ffn", "enc ffn"),
              (n * 2 * attn, "attention", "dec attn"), (n * ffn, "ffn", "dec ffn")]
    norms = n * 2 * 2 * dm + n * 3 * 2 * dm
    shared = [(table, "embed", "shared table")] + layers + [(vocab + norms, "norm", "")]
    untied = [(table, "embed", "src table"), (table, "embed", "tgt table")] + layers + \
             [(table + vocab, "output", "generator"), (norms, "norm", "")]
    scale = 560 / sum(v for v, _, _ in untied)
    for row, (name, segments) in enumerate((("share_embeddings=True", shared), ("share_embeddings=False", untied))):
        y, x = 60 + row * 84, 190
        total = sum(v for v, _, _ in segments)
        d.text(x - 10, y + 8, name, size=12, mono=True, anchor="end")
        d.text(x - 10, y + 26, f"{total / 1e6:.1f}M", size=12, anchor="end", color=MUTED)
        for value, part, label in segments:
            w = value * scale
            d.rect(x, y, w, 34, PARTS[part][0], stroke=PARTS[part][1], width=1)
            if w > 48:
                d.text(x + w / 2, y + 10, label, size=11)
                d.text(x + w / 2, y + 25, f"{value / 1e6:.1f}M", size=11, color=MUTED)
            elif w > 30:
                d.text(x + w / 2, y + 17, f"{value / 1e6:.1f}M", size=11, color=MUTED)
            x += w
        if row == 0:
            x0 = 190 + table * scale
            enc = x0 + (layers[0][0] + layers[1][0]) * scale
            d.brace(x0, y - 4, enc, f"encoder, {n} layers", below=False, mono=False)
            d.brace(enc, y - 4, enc + (layers[2][0] + layers[3][0]) * scale, f"decoder, {n} layers",
                    below=False, mono=False)
    d.legend(190, 220, [("embed", "embedding tables"), ("attention", "attention"), ("ffn", "feed-forward"),
                        ("output", "generator")], size=11.5)
    d.text(190, 252, f"the paper's base model: vocab = {vocab:,}, d_model = {dm}, d_ff = {dff}, N = {n}", size=11.5,
           anchor="start", color=MUTED)
    d.text(190, 272, "too thin to see: the layer norms, and with sharing the generator's bias (under 0.1M)",
           size=11.5, anchor="start", color=MUTED)
    return d
