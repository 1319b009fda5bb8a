# Hand-written tool module (not generated from a notebook).
"""Chapter 10's pictures: where we are (a decoder layer without cross-attention, under the causal mask), the
decoder-only model beside chapter 4's encoder-decoder, the next-token objective, the key/value cache with its prefill,
and what temperature, top-k and top-p do to a distribution."""
from __future__ import annotations

import math

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, PARTS, Drawing, shade, text_width


def _residual(d: Drawing, x_left: float, cx: float, y_from: float, y_to: float, to_x: float):
    """A residual path: from the stream at (cx, y_from) out to the left at x_left, up to y_to, into (to_x, y_to)."""
    d.polyline([(cx, y_from), (x_left, y_from), (x_left, y_to), (to_x - 9, y_to)], width=1.3)
    d.path(f"M {to_x - 1} {y_to} l -8 -4 l 0 8 Z", fill=INK, width=1)


def _sine(d: Drawing, x: float, y: float):
    d.circle(x, y, 14, "#FFFFFF")
    d.path(f"M {x - 10} {y} q 5 -12 10 0 t 10 0", width=1.3)


@diagram("ch10-decoder-only", chapter=10)
def decoder_only():
    d = Drawing(800, 680, "GPT, a decoder-only stack, beside chapter 4's encoder-decoder")
    # ---- left: chapter 4's model, compact
    ew, ex, dx = 140, 24, 208  # box width, encoder and decoder left edges
    d.text(190, 18, "Chapter 4: encoder-decoder", size=14, weight="bold")
    d.text(190, 40, "(residuals and norms not drawn)", size=11.5, color=MUTED)
    d.text(ex + ew / 2, 652, "src (B, S)", size=12, mono=True)
    d.text(dx + ew / 2, 652, "tgt_in (B, T)", size=12, mono=True)
    for x, name in ((ex, "src_embed"), (dx, "tgt_embed")):
        d.arrow([(x + ew / 2, 640), (x + ew / 2, 610)], head=6)
        d.box(x, 570, ew, 40, name, part="embed", sub="+ positions", size=12.5, mono=True)
    enc = d.rect(ex - 8, 372, ew + 16, 176, "#F7F7F7", stroke="#999999", rx=10)
    dec = d.rect(dx - 8, 290, ew + 16, 258, "#F7F7F7", stroke="#999999", rx=10)
    for x in (ex, dx):
        d.arrow([(x + ew / 2, 570), (x + ew / 2, 522)], head=6)
    for box in (enc, dec):
        d.text(box.x + 8, box.y + 14, "N x", size=12, weight="bold", anchor="start")
    d.box(ex, 478, ew, 44, "self-attention", part="attention", sub="q = k = v", size=12.5)
    d.box(ex, 400, ew, 44, "feed-forward", part="ffn", size=12.5)
    d.arrow([(ex + ew / 2, 478), (ex + ew / 2, 444)], head=6)
    d.box(dx, 478, ew, 44, "masked self-attn", part="attention", sub="causal", size=12.5)
    d.box(dx, 398, ew, 44, "cross-attention", part="attention", sub="k = v = memory", size=12.5, highlight=True)
    d.box(dx, 318, ew, 44, "feed-forward", part="ffn", size=12.5)
    d.arrow([(dx + ew / 2, 478), (dx + ew / 2, 442)], head=6)
    d.arrow([(dx + ew / 2, 398), (dx + ew / 2, 362)], head=6)
    d.arrow([(ex + ew / 2, 400), (ex + ew / 2, 340), (ex + ew + 18, 340), (ex + ew + 18, 420), (dx - 1, 420)],
            color=ACCENT, head=7)
    d.text(ex + ew / 2, 326, "memory (B, S, d_model)", size=11.5, mono=True, color=MUTED)
    d.rect(ex - 16, 304, ew + 40, 314, "none", stroke=ACCENT, width=1.4, rx=12, dash="6 4")  # what GPT drops
    d.text(ex + ew / 2, 250, "GPT keeps neither", size=12, color=ACCENT)
    d.text(ex + ew / 2, 266, "the encoder nor", size=12, color=ACCENT)
    d.text(ex + ew / 2, 282, "cross-attention", size=12, color=ACCENT)
    d.arrow([(dx + ew / 2, 318), (dx + ew / 2, 164)], label="(B, T, d_model)", side="left", head=6)
    d.box(dx, 120, ew, 44, "generator", part="output", sub="Linear, log-softmax", size=12.5, mono=True)
    d.arrow([(dx + ew / 2, 120), (dx + ew / 2, 60)], label="(B, T, tgt_vocab)", side="left", head=6)
    d.polyline([(398, 10), (398, 670)], stroke="#999999", width=1, dash="3 5")

    # ---- right: GPT, with shapes
    w, x = 220, 520
    cx = x + w / 2
    d.text(610, 18, "Chapter 10: GPT, decoder-only", size=14, weight="bold")
    d.text(cx, 652, "tokens (B, T)", size=12, mono=True)
    d.arrow([(cx, 640), (cx, 610)], head=6)
    emb = d.box(x, 570, w, 40, "embed", part="embed", sub="TokenEmbedding: x sqrt(d_model)", size=12.5, mono=True)
    plus = d.plus(cx, 542)
    d.arrow([emb.top, (cx, 552)], head=6)
    _sine(d, x - 40, 542)
    d.arrow([(x - 26, 542), (cx - 10, 542)], head=6)
    d.text(x - 40, 518, "positions", size=11, color=MUTED, mono=True)
    stack = d.rect(x - 38, 182, w + 58, 330, "#F7F7F7", stroke="#999999", rx=10)
    d.arrow([plus.top, (cx, 492)], label="(B, T, d_model)", side="right", head=6, label_at=0.3)
    d.text(stack.x + 8, 196, "n_layers x", size=12.5, weight="bold", anchor="start")
    d.text(stack.x2 - 8, 196, "EncoderLayer(norm_first=True)", size=10.5, mono=True, anchor="end", color=MUTED)
    n1 = d.box(x, 462, w, 28, "LayerNorm", part="norm", size=12.5, mono=True)
    attn = d.box(x, 396, w, 44, "masked self-attention", part="attention", sub="subsequent_mask(T): (1, T, T)",
                 size=12.5)
    p1 = d.plus(cx, 370)
    d.arrow([n1.top, attn.bottom], head=6)
    d.arrow([attn.top, (cx, 380)], head=6)
    _residual(d, x - 18, cx, 502, 370, cx - 10)
    n2 = d.box(x, 318, w, 28, "LayerNorm", part="norm", size=12.5, mono=True)
    ffn = d.box(x, 252, w, 44, "feed-forward", part="ffn", sub="d_model -> d_ff -> d_model", size=12.5)
    p2 = d.plus(cx, 226)
    d.arrow([p1.top, n2.bottom], head=6)
    d.arrow([n2.top, ffn.bottom], head=6)
    d.arrow([ffn.top, (cx, 236)], head=6)
    _residual(d, x - 18, cx, 353, 226, cx - 10)
    fin = d.box(x, 136, w, 28, "norm (final LayerNorm)", part="norm", size=12.5)
    d.arrow([p2.top, fin.bottom], head=6)
    head = d.box(x, 72, w, 44, "lm_head", part="output", sub="Linear(d_model, vocab_size)", size=12.5, mono=True)
    d.arrow([fin.top, head.bottom], head=6)
    d.arrow([head.top, (cx, 36)], label="(B, T, vocab_size) logits", side="left", head=6)
    # tied weights: one table reads and writes tokens (in the output's colour: red marks what GPT drops)
    tx, tie = x + w + 30, PARTS["output"][1]
    d.polyline([(x + w, 94), (tx, 94), (tx, 590), (x + w, 590)], stroke=tie, width=1.6, dash="6 4")
    d.text(tx + 13, 342, "tied: lm_head.weight = embed.embedding.weight", size=11.5, mono=True, color=tie, rotate=90)
    return d


ALLOWED = {True: PARTS["mask"][0], False: "#FFFFFF"}  # mask cells: True where attention may look


@diagram("ch10-what-changes", chapter=10)
def what_changes():
    d = Drawing(800, 404, "Where we are: a decoder layer without its cross-attention is an encoder layer, "
                          "and the causal mask makes it a decoder")
    w, h = 200, 46  # a sublayer's box
    ys = {"ffn": 100, "cross": 176, "self": 252}  # the three sublayers' tops, bottom up: self, cross, ffn
    # ---- left: chapter 3's DecoderLayer, as the translator uses it
    lc = 170
    d.text(lc, 22, "DecoderLayer (chapter 3)", size=14, weight="bold")
    d.text(lc, 42, "chapters 4 to 8: the translator's decoder", size=11.5, color=MUTED)
    d.text(lc, 352, "x (B, T, d_model)", size=12, mono=True)
    d.arrow([(lc, 340), (lc, ys["self"] + h)], head=6)
    d.box(lc - w / 2, ys["self"], w, h, "masked self-attention", part="attention", sub="causal mask", size=12.5)
    cross = d.box(lc - w / 2, ys["cross"], w, h, "cross-attention", part="attention", sub="k = v = memory",
                  size=12.5, dim=True)
    d.polyline([(cross.x + 6, cross.y + 4), (cross.x2 - 6, cross.y2 - 4)], stroke=ACCENT, width=1.6)
    d.polyline([(cross.x + 6, cross.y2 - 4), (cross.x2 - 6, cross.y + 4)], stroke=ACCENT, width=1.6)
    d.box(lc - w / 2, ys["ffn"], w, h, "feed-forward", part="ffn", size=12.5)
    d.arrow([(lc, ys["self"]), (lc, ys["cross"] + h)], head=6)
    d.arrow([(lc, ys["cross"]), (lc, ys["ffn"] + h)], head=6)
    d.arrow([(lc, ys["ffn"]), (lc, 62)], head=6)
    d.arrow([(14, cross.cy), (cross.x, cross.cy)], head=6, color=MUTED, dash="4 3")
    d.text(16, cross.cy - 14, "memory", size=11, color=MUTED, anchor="start", mono=True)
    d.text(lc, 374, "no encoder, so no memory:", size=12, color=ACCENT)
    d.text(lc, 391, "the cross-attention goes", size=12, color=ACCENT)

    # ---- the step between
    d.arrow([(290, 199), (350, 199)], color=ACCENT, width=2, head=9)
    # ---- middle: chapter 3's EncoderLayer, called with the causal mask
    mc = 470
    d.text(mc, 22, "EncoderLayer (chapter 3)", size=14, weight="bold")
    d.text(mc, 42, "GPT's layer: norm_first=True", size=11.5, color=MUTED)
    d.text(mc, 352, "x (B, T, d_model)", size=12, mono=True)
    d.arrow([(mc, 340), (mc, ys["self"] + h)], head=6)
    attn = d.box(mc - w / 2, ys["self"], w, h, "self-attention", part="attention", sub="mask from the caller",
                 size=12.5, highlight=True)
    d.rect(mc - w / 2, ys["cross"], w, h, "none", stroke="#BBBBBB", width=1.2, rx=6, dash="4 4")
    d.text(mc + w / 2 - 8, ys["cross"] + h / 2, "nothing here", size=11, color=MUTED, anchor="end")
    d.box(mc - w / 2, ys["ffn"], w, h, "feed-forward", part="ffn", size=12.5)
    d.arrow([(mc, ys["self"]), (mc, ys["ffn"] + h)], head=6)
    d.arrow([(mc, ys["ffn"]), (mc, 62)], label="(B, T, d_model)", side="right", head=6)
    d.text(mc, 374, "the two sublayers that stay", size=12, color=MUTED)
    d.text(mc, 391, "(residuals and norms not drawn)", size=12, color=MUTED)

    # ---- right: the mask that makes it a decoder
    gc, T = 15, 6
    gx, gy = 660, 200
    mask = [[j <= i for j in range(T)] for i in range(T)]
    d.text(gx + T * gc / 2, gy - 34, "subsequent_mask(T)", size=12, mono=True)
    d.text(gx + T * gc / 2, gy - 16, "key j", size=11, color=MUTED)
    d.text(gx - 10, gy + T * gc / 2, "query i", size=11, color=MUTED, rotate=-90)
    d.grid(gx, gy, mask, cell=gc, colors=ALLOWED, stroke="#999999")
    d.text(gx + T * gc / 2, gy + T * gc + 14, "(1, T, T)", size=11, mono=True, color=MUTED)
    d.text(gx + T * gc / 2, gy + T * gc + 30, "teal = True: j <= i", size=11, color=MUTED)
    d.arrow([(gx - 22, attn.cy), (attn.x2, attn.cy)], label="mask", side="above", head=7, color=ACCENT,
            width=1.8, mono=True, size=12)
    d.text(gx + T * gc / 2, 92, "what makes it", size=12.5, color=ACCENT)
    d.text(gx + T * gc / 2, 110, "a decoder:", size=12.5, color=ACCENT)
    d.text(gx + T * gc / 2, 128, "chapter 2's causal mask", size=12.5, color=ACCENT)
    return d
CAPTION = ["<s>", "a", "dog", "runs", "on", "the", "grass", "</s>"]


def _tokens(d: Drawing, x, y, tokens, cell, part="tensor", highlight=()):
    for i, t in enumerate(tokens):
        d.box(x + i * cell + 2, y, cell - 4, 30, t, part=part, mono=True, size=12.5, rx=4, highlight=i in highlight)


@diagram("ch10-next-token", chapter=10)
def next_token():
    d = Drawing(800, 400, "The next-token objective: inputs and targets are the same caption, shifted by one")
    cell, x0 = 60, 140
    n = len(CAPTION)
    # the caption and the two slices of it
    d.text(x0 - 14, 64, "a caption", size=12.5, anchor="end")
    _tokens(d, x0, 49, CAPTION, cell)
    d.brace(x0 + cell + 2, 43, x0 + n * cell - 2, "tgt_out = caption[1:]", below=False)
    d.brace(x0 + 2, 85, x0 + (n - 1) * cell - 2, "tgt_in = caption[:-1]", below=True)
    # the model at every position at once
    T = n - 1
    top, model_y, bottom = 140, 206, 290
    d.text(x0 - 14, top + 8, "targets", size=12.5, anchor="end")
    d.text(x0 - 14, top + 26, "tgt_out (B, T)", size=11, mono=True, anchor="end", color=MUTED)
    d.text(x0 - 14, model_y - 8, "logits", size=12, anchor="end", color=MUTED)
    d.text(x0 - 14, model_y + 10, "(B, T, vocab_size)", size=11, mono=True, anchor="end", color=MUTED)
    d.text(x0 - 14, bottom + 8, "inputs", size=12.5, anchor="end")
    d.text(x0 - 14, bottom + 26, "tgt_in (B, T)", size=11, mono=True, anchor="end", color=MUTED)
    _tokens(d, x0, top, CAPTION[1:], cell, part="output", highlight=(3,))
    _tokens(d, x0, bottom, CAPTION[:-1], cell)
    width = T * cell
    d.box(x0 + 2, model_y + 16, width - 4, 40, "GPT: row t reads tokens 0 .. t only", part="attention", size=13)
    for i in range(T):
        cx = x0 + i * cell + cell / 2
        d.arrow([(cx, bottom), (cx, model_y + 58)], head=6)
        d.arrow([(cx, model_y + 16), (cx, top + 32)], head=6, color=ACCENT if i == 3 else INK)
    for i in range(4):  # what row 3 reads
        d.rect(x0 + i * cell + 2, bottom, cell - 4, 30, "none", stroke=ACCENT, width=2.4, rx=4)
    d.brace(x0 + 2, bottom + 36, x0 + 4 * cell - 2, "position 3 sees these four", below=True, mono=False)
    # the causal mask, True where query i may read key j
    gc, gx, gy = 15, 655, 160
    mask = [[j <= i for j in range(T)] for i in range(T)]
    d.grid(gx, gy, mask, cell=gc, colors=ALLOWED, stroke="#999999")
    d.rect(gx, gy + 3 * gc, T * gc, gc, "none", stroke=ACCENT, width=2)
    d.text(gx + T * gc / 2, gy - 30, "subsequent_mask(T)", size=11.5, mono=True)
    d.text(gx + T * gc / 2, gy - 13, "key j", size=11, color=MUTED)
    d.text(gx - 10, gy + T * gc / 2, "query i", size=11, color=MUTED, rotate=-90)
    d.text(gx + T * gc / 2, gy + T * gc + 14, "(1, T, T)", size=11, mono=True, color=MUTED)
    d.text(gx + T * gc / 2, gy + T * gc + 30, "teal = True: j <= i", size=11, color=MUTED)
    d.text(400, 378, "lm_loss: cross-entropy of every target, padding left out; all T positions train at once",
           size=12.5, color=MUTED)
    return d


@diagram("ch10-kv-cache", chapter=10)
def kv_cache():
    d = Drawing(800, 394, "KVCache: the prompt in one call (prefill), then one token a call")
    cx0 = 95  # the call column's centre
    sx, sc = 200, 50  # the cache strip's left edge and cell width
    mx, mc = 486, 17  # the mask grid's left edge and cell size
    ox = 616  # the output column
    d.text(cx0, 22, "the call", size=13, weight="bold")
    d.text(sx + 5 * sc / 2, 22, "self.kv[i]: keys and values kept", size=13, weight="bold")
    d.text(mx + 5 * mc / 2, 22, "mask (L, t + L)", size=13, weight="bold")
    d.text(ox + 86, 22, "returns", size=13, weight="bold")
    for p in range(5):
        d.text(sx + p * sc + sc / 2, 44, f"{p}", size=11, color=MUTED)
    d.text(sx - 8, 44, "position", size=11, color=MUTED, anchor="end")
    calls = [("cache(prompt)", "prefill: (B, L), L = 3", 0, 3, "runs"),
             ("cache(token)", "(B, 1)", 3, 1, "on"),
             ("cache(token)", "(B, 1)", 4, 1, "the")]
    y = 64
    for k, (call, shape, t, L, sampled) in enumerate(calls):
        h = max(L * mc, 30)
        cy = y + h / 2
        d.text(cx0, cy - 9, call, size=13, mono=True)
        d.text(cx0, cy + 10, shape, size=11, mono=True, color=MUTED)
        d.text(cx0, cy + 27, f"t = {t} kept before", size=11, color=MUTED)
        for p in range(t + L):
            new = p >= t
            d.box(sx + p * sc + 2, cy - 15, sc - 4, 30, CAPTION[p], part="tensor", mono=True, size=12, rx=4,
                  highlight=new, dim=not new)
        d.text(sx + 5 * sc / 2, cy + 28, f"(B, h, {t + L}, d_k) after the call", size=11, mono=True, color=MUTED)
        mask = [[j <= t + i for j in range(t + L)] for i in range(L)]
        d.grid(mx, cy - L * mc / 2, mask, cell=mc, colors=ALLOWED, stroke="#999999")
        d.text(mx + 5 * mc / 2, cy + max(L * mc / 2, 15) + 13, f"({L}, {t + L})", size=11, mono=True, color=MUTED)
        d.arrow([(ox - 26, cy), (ox, cy)], head=6)
        d.text(ox + 6, cy - 9, "logits of the last row", size=12, anchor="start")
        d.text(ox + 6, cy + 9, "(B, vocab_size)", size=11, mono=True, anchor="start", color=MUTED)
        d.text(ox + 6, cy + 30, f"sample: {sampled}", size=12, mono=True, anchor="start", color=ACCENT)
        if k + 1 < len(calls):  # the sampled token is the next call's input
            d.arrow([(ox + 150, cy + 30), (ox + 164, cy + 30), (ox + 164, y + h + 44), (cx0, y + h + 44),
                     (cx0, y + h + 62)], color=ACCENT, head=6, width=1.3)
        y += h + 70
    d.text(400, 372, "new tokens (outlined) add their keys and values; earlier ones are read from the cache, "
           "never recomputed", size=12, color=MUTED)
    return d


TOY = [0.35, 0.2, 0.15, 0.1, 0.08, 0.06, 0.04, 0.02]  # a next-token distribution over eight tokens, sorted


def _filtered(probs, temperature=1.0, top_k=None, top_p=1.0):
    """What filter_logits(...).softmax(-1) gives, in plain Python: (probabilities, which tokens were kept)."""
    logits = [math.log(p) / temperature for p in probs]
    keep = [True] * len(probs)
    if top_k is not None:
        kth = sorted(logits, reverse=True)[top_k - 1]
        keep = [k and v >= kth for k, v in zip(keep, logits)]
    if top_p < 1.0:
        order = sorted(range(len(logits)), key=lambda i: -logits[i])
        z = sum(math.exp(logits[i]) for i in order if keep[i])
        before = 0.0
        for i in order:
            if not keep[i]:
                continue
            p = math.exp(logits[i]) / z
            if before >= top_p:  # the tokens before this one already reach top_p
                keep[i] = False
            before += p
    z = sum(math.exp(v) for v, k in zip(logits, keep) if k)
    return [math.exp(v) / z if k else 0.0 for v, k in zip(logits, keep)], keep


SETTINGS = [("as it is", {}, "temperature = 1"),
            ("temperature 0.5", dict(temperature=0.5), "sharper"),
            ("temperature 2", dict(temperature=2.0), "flatter"),
            ("top-k, k = 3", dict(top_k=3), "the k most probable"),
            ("top-p, p = 0.75", dict(top_p=0.75), "the fewest reaching p")]


@diagram("ch10-sampling", chapter=10)
def sampling():
    d = Drawing(800, 346, "Temperature, top-k and top-p on one toy distribution")
    pw, gap, x0 = 144, 12, 20  # panel width, gap, left edge
    base, height, top = 240, 150, 0.6  # the bars' baseline, the height of probability `top`
    bw = pw / len(TOY)
    blue = shade(0.55)
    for n, (title, kw, note) in enumerate(SETTINGS):
        x = x0 + n * (pw + gap)
        probs, keep = _filtered(TOY, **kw)
        d.text(x + pw / 2, 30, title, size=13, weight="bold")
        d.text(x + pw / 2, 50, note, size=11, color=MUTED)
        d.polyline([(x, base), (x + pw, base)], stroke=INK, width=1.2)
        for i, (p0, p, k) in enumerate(zip(TOY, probs, keep)):
            bx = x + i * bw + 2
            if k:
                d.rect(bx, base - p * height / top, bw - 4, p * height / top, blue, stroke=blue, width=1)
            if n:  # the distribution as it was, dashed: grey where a token stays, red where it is cut
                d.rect(bx, base - p0 * height / top, bw - 4, p0 * height / top, "none",
                       stroke=MUTED if k else ACCENT, width=1.3, dash="3 2")
            if not k:
                d.text(bx + (bw - 4) / 2, base + 12, "x", size=11, color=ACCENT)
        kept, mass = sum(keep), sum(p for p, k in zip(TOY, keep) if k)
        d.text(x + pw / 2, base + 32, f"{kept} of {len(TOY)} kept" if kept < len(TOY) else "all 8 kept", size=11.5)
        if kept < len(TOY):
            d.text(x + pw / 2, base + 64, f"they held {mass:.2f}", size=11, color=MUTED)
        d.text(x + pw / 2, base + 48, f"largest {max(probs):.2f}", size=11, mono=True, color=MUTED)
    lx = 150
    lx = d.legend(lx, 332, [(blue, "sampled from (renormalized)")], size=11.5)
    d.rect(lx, 325, 14, 14, "none", stroke=MUTED, width=1.3, dash="3 2")
    d.text(lx + 20, 332, "as it was", size=11.5, anchor="start")
    lx += 34 + text_width("as it was", 11.5)
    d.rect(lx, 325, 14, 14, "none", stroke=ACCENT, width=1.3, dash="3 2")
    d.text(lx + 20, 332, "cut: logit set to -inf", size=11.5, anchor="start")
    return d
