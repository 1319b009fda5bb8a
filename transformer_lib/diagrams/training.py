# Hand-written tool module (not generated from a notebook).
"""Chapter 5's pictures: teacher forcing against greedy decoding, the smoothed target, the batch's masks, and one
optimizer step of the training loop. Names and shapes are those of transformer_lib.training (Batch, LabelSmoothing,
train_epoch, greedy_decode)."""
from __future__ import annotations

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, PARTS, Drawing, shade

MASK_ON, MASK_OFF = PARTS["mask"][0], "#FFFFFF"


def _tokens(d, x, y, tokens, w=48, h=30, step=60, part="tensor", accent=None, mono=True):
    """A row of token cells from x (left edge of the first), each `w` wide, `step` apart; returns their centres."""
    centres = []
    for k, t in enumerate(tokens):
        d.box(x + k * step, y, w, h, t, part=part, mono=mono, highlight=(k == accent))
        centres.append(x + k * step + w / 2)
    return centres


@diagram("ch05-teacher-forcing", chapter=5)
def teacher_forcing():
    d = Drawing(820, 450, "Training with teacher forcing against inference with greedy decoding")
    # ---- left: training, every position at once
    d.text(205, 22, "Training: teacher forcing", size=14, weight="bold")
    d.text(205, 42, "the whole target goes in, every position predicts at once", size=12, color=MUTED)
    x0, step, w = 40, 60, 48
    label_x = x0 + 2 * step + w + 18
    _tokens(d, x0, 66, ["a", "b", "c"], part="plain")
    d.text(label_x, 74, "tgt_out = tgt[:, 1:]", size=11.5, anchor="start", mono=True)
    d.text(label_x, 90, "(B, Lt): the answers", size=11.5, anchor="start", mono=True, color=MUTED)
    probs = _tokens(d, x0, 150, ["(V,)"] * 3, part="output")
    d.text(label_x, 158, "log_probs", size=11.5, anchor="start", mono=True)
    d.text(label_x, 174, "(B, Lt, V)", size=11.5, anchor="start", mono=True, color=MUTED)
    for cx in probs:
        d.polyline([(cx, 150), (cx, 96)], stroke=ACCENT, width=1.4, dash="4 3")
    d.text(label_x, 116, "loss: LabelSmoothing,", size=11.5, anchor="start", mono=True, color=ACCENT)
    d.text(label_x, 132, "summed / n_tokens", size=11.5, anchor="start", mono=True, color=ACCENT)
    box = d.rect(x0 - 12, 210, 2 * step + w + 24, 96, "#F7F7F7", stroke="#999999", rx=8)
    stroke = PARTS["attention"][1]
    low, high = box.y2 - 14, box.y + 14
    for i, top in enumerate(probs):  # causal: output position i reads input positions j <= i
        for j in range(i + 1):
            d.polyline([(probs[j], low), (top, high)], stroke=stroke, width=1.3)
    for cx in probs:
        d.circle(cx, low, 4, PARTS["attention"][0], stroke=stroke)
        d.circle(cx, high, 4, PARTS["attention"][0], stroke=stroke)
        d.arrow([(cx, high - 4), (cx, 180)], head=6)
    d.text(label_x, 230, "model(src, tgt_in,", size=11.5, anchor="start", mono=True)
    d.text(label_x, 246, "  src_mask, tgt_mask)", size=11.5, anchor="start", mono=True)
    d.text(label_x, 268, "position i reads", size=12, anchor="start", color=MUTED)
    d.text(label_x, 284, "tgt_in up to i only", size=12, anchor="start", color=MUTED)
    tgt_in = _tokens(d, x0, 340, ["<s>", "a", "b"])
    for cx in tgt_in:
        d.arrow([(cx, 340), (cx, low + 4)], head=6)
    d.text(label_x, 348, "tgt_in = tgt[:, :-1]", size=11.5, anchor="start", mono=True)
    d.text(label_x, 364, "(B, Lt): what it reads", size=11.5, anchor="start", mono=True, color=MUTED)
    d.text(205, 400, "tgt = <s> a b c   (B, Lt + 1)", size=12, mono=True)
    d.text(205, 422, "one forward pass gives all Lt predictions", size=12, color=MUTED)
    d.polyline([(410, 16), (410, 436)], stroke="#CCCCCC", width=1)

    # ---- right: inference, one token per step
    d.text(615, 22, "Inference: greedy_decode", size=14, weight="bold")
    d.text(615, 42, "one token per step, each prediction fed back", size=12, color=MUTED)
    d.box(440, 60, 350, 44, "memory = model.encode(src, src_mask)", part="plain", mono=True, size=13,
          sub="(B, Ls, d_model), computed once")
    cell, gap, x1 = 36, 40, 470
    rows = [140, 222, 304]
    made = ["a", "b", "c"]
    d.text(x1 + 58, 122, "ys (B, t)", size=11.5, mono=True, color=MUTED)
    d.text(778, 122, "(B,)", size=11.5, mono=True, color=MUTED)
    for t, y in enumerate(rows, 1):
        d.text(424, y + 16, f"t = {t}", size=12, anchor="start", color=MUTED)
        for k, tok in enumerate(["<s>", *made[:t - 1]]):
            d.box(x1 + k * gap, y, cell, 32, tok, part="tensor", mono=True, size=12,
                  highlight=(k == t - 1 and t > 1))
        dec = d.rect(598, y - 6, 152, 44, "#FFFFFF", stroke=PARTS["plain"][1], width=1.3, rx=6)
        d.text(dec.cx, dec.cy - 8, "decode(memory, ys)", size=12, mono=True)
        d.text(dec.cx, dec.cy + 9, "generator(out[:, -1])", size=11, mono=True, color=MUTED)
        d.arrow([(x1 + (t - 1) * gap + cell + 2, y + 16), (dec.x, y + 16)], head=6)
        d.arrow([(dec.x2, y + 16), (758, y + 16)], head=6)
        d.box(760, y, 36, 32, made[t - 1], part="tensor", mono=True, size=12, highlight=True)
        if t < len(rows):  # the new token is appended to ys for the next step
            nxt = x1 + t * gap + cell / 2
            mid = (y + 38 + rows[t]) / 2
            d.arrow([(778, y + 32), (778, mid), (nxt, mid), (nxt, rows[t])], color=ACCENT, head=6)
    d.text(615, 370, "out (B, t, d_model); generator(out[:, -1]) (B, V)", size=11.5, mono=True, color=MUTED)
    d.text(615, 388, "argmax -> next_token (B,); cat -> ys (B, t + 1)", size=11.5, mono=True, color=MUTED)
    d.text(615, 422, "up to max_len steps, each a decoder pass over ys", size=12, color=MUTED)
    return d


@diagram("ch05-label-smoothing", chapter=5)
def label_smoothing():
    """One target, id 2, in a vocabulary of 7 where 0 is padding: the chapter's own example (smoothing 0.4)."""
    d = Drawing(800, 370, "A one-hot target against the label-smoothed target")
    vocab, target, pad, eps = 7, 2, 0, 0.4
    others = vocab - 2
    smooth = [0.0 if i == pad else (1 - eps if i == target else eps / others) for i in range(vocab)]
    onehot = [1.0 if i == target else 0.0 for i in range(vocab)]
    base, scale, bar, step = 262, 190, 32, 44

    def panel(x, values, title, sub):
        d.text(x + step * vocab / 2 - 6, 22, title, size=14, weight="bold")
        d.text(x + step * vocab / 2 - 6, 42, sub, size=12, color=MUTED)
        d.polyline([(x - 8, base), (x + step * vocab - 4, base)], stroke=INK, width=1.2)
        for i, v in enumerate(values):
            bx = x + i * step
            if v > 0:
                d.rect(bx, base - v * scale, bar, v * scale, shade(0.35 + 0.5 * v),
                       stroke=ACCENT if i == target else PARTS["ffn"][1], width=2.4 if i == target else 1)
            d.text(bx + bar / 2, base - v * scale - 11, f"{v:g}", size=11.5,
                   color=ACCENT if i == target else INK)
            d.text(bx + bar / 2, base + 14, str(i), size=12, mono=True, color=ACCENT if i == target else INK)
        d.text(x + pad * step + bar / 2, base + 30, "pad", size=11, color=MUTED)
        d.text(x + target * step + bar / 2, base + 30, "target", size=11, color=ACCENT)
        d.text(x + step * vocab / 2 - 6, base + 56, "token id", size=12, color=MUTED)

    panel(50, onehot, "One-hot target", "all of the probability on the right id")
    panel(440, smooth, "Smoothed target, smoothing 0.4", "what LabelSmoothing compares the model with")
    d.polyline([(410, 14), (410, 326)], stroke="#CCCCCC", width=1)
    d.text(440 + target * step + bar + 10, base - (1 - eps) * scale + 8, "1 - 0.4 = 0.6 on the target", size=12,
           anchor="start", color=ACCENT)
    d.text(440 + target * step + bar + 10, 180, "0.4 / 5 = 0.08 on each of", size=12, anchor="start")
    d.text(440 + target * step + bar + 10, 196, "the 5 other real ids (7 - 2:", size=12, anchor="start")
    d.text(440 + target * step + bar + 10, 212, "not the target, not padding)", size=12, anchor="start")
    d.text(400, 350, "A target that is padding (id 0) gets a row of zeros: it adds nothing to the loss.", size=12,
           color=MUTED)
    return d


def _mask_grid(d, x, y, rows, cols, on, cell, col_labels=None, row_labels=None):
    """A boolean mask as cells, True (may attend) in the mask colour, written 1 / 0 as PyTorch prints it."""
    values = [[bool(on(i, j)) for j in range(cols)] for i in range(rows)]
    box = d.grid(x, y, values, cell=cell, colors={True: MASK_ON, False: MASK_OFF}, stroke=PARTS["mask"][1],
                 labels=[["1" if v else "0" for v in row] for row in values], size=12)
    for j, label in enumerate(col_labels or []):
        d.text(x + j * cell + cell / 2, y - 12, label, size=11.5, mono=True, color=MUTED)
    for i, label in enumerate(row_labels or []):
        d.text(x - 8, y + i * cell + cell / 2, label, size=11.5, mono=True, anchor="end", color=MUTED)
    return box


@diagram("ch05-masks", chapter=5)
def masks():
    """The masks of sentence 1 of the chapter's example batch: src [9, 4, 0, 0], tgt [1, 9, 4, 0, 0], pad 0."""
    d = Drawing(800, 410, "The batch's masks: source padding, and target padding combined with the causal mask")
    cell = 34
    src, tgt_in = ["9", "4", "0", "0"], ["1", "9", "4", "0"]
    d.text(30, 28, "src_mask = padding_mask(src, pad_idx)", size=12.5, mono=True, anchor="start")
    d.text(30, 46, "(B, 1, 1, Ls): hides source padding from every query", size=12, anchor="start", color=MUTED)
    row = _mask_grid(d, 110, 80, 1, 4, lambda i, j: src[j] != "0", cell, col_labels=src)
    d.text(row.x - 12, row.cy, "src", size=11.5, mono=True, anchor="end", color=MUTED)
    d.text(row.x2 + 14, row.cy, "the padding keys hidden", size=12, anchor="start", color=MUTED)

    y = 216
    d.text(30, 148, "tgt_mask = padding_mask(tgt_in, pad_idx) & subsequent_mask(Lt)", size=12.5, mono=True,
           anchor="start")
    d.text(30, 166, "(B, 1, Lt, Lt): hides target padding and the future; row i is query position i, column j key j",
           size=12, anchor="start", color=MUTED)
    a = _mask_grid(d, 80, y + 1.5 * cell, 1, 4, lambda i, j: tgt_in[j] != "0", cell, col_labels=tgt_in)
    d.text(a.cx, a.y2 + 18, "padding_mask", size=11, mono=True, color=MUTED)
    d.text(a.cx, a.y2 + 32, "(B, 1, 1, Lt)", size=11, mono=True, color=MUTED)
    d.text(a.x2 + 24, y + 2 * cell, "&", size=20, weight="bold")
    b = _mask_grid(d, a.x2 + 80, y, 4, 4, lambda i, j: j <= i, cell, col_labels=tgt_in, row_labels=tgt_in)
    d.text(b.cx, b.y2 + 18, "subsequent_mask", size=11, mono=True, color=MUTED)
    d.text(b.cx, b.y2 + 32, "(1, Lt, Lt)", size=11, mono=True, color=MUTED)
    d.text(b.x2 + 24, y + 2 * cell, "=", size=20, weight="bold")
    c = _mask_grid(d, b.x2 + 80, y, 4, 4, lambda i, j: j <= i and tgt_in[j] != "0", cell, col_labels=tgt_in,
                   row_labels=tgt_in)
    d.text(c.cx, c.y2 + 18, "tgt_mask[1, 0]", size=11, mono=True, color=MUTED)
    d.text(c.cx, c.y2 + 32, "(Lt, Lt) of (B, 1, Lt, Lt)", size=11, mono=True, color=MUTED)
    d.rect(c.x2 - cell, c.y, cell, 4 * cell, "none", stroke=ACCENT, width=2.4)
    d.text(c.x2 + 12, c.y2 - 30, "padding:", size=11.5, anchor="start", color=ACCENT)
    d.text(c.x2 + 12, c.y2 - 14, "never seen", size=11.5, anchor="start", color=ACCENT)
    for g in (b, c):  # which axis is which: a row is a query position, a column a key position
        d.text(g.cx, g.y - 30, "key j (tgt_in) \u2192", size=11.5, color=MUTED)
        d.text(g.x - 30, g.cy, "query i \u2192", size=11.5, color=MUTED, rotate=90)
    d.legend(470, 92, [("mask", "1 = True, may attend"), ("#FFFFFF", "0 = hidden")])
    return d


@diagram("ch05-train-step", chapter=5)
def train_step():
    """One optimizer step of train_epoch, with accum_steps micro-batches."""
    d = Drawing(800, 300, "One optimizer step of train_epoch")
    h = 52

    def node(x, y, w, label, sub, part="plain"):
        return d.box(x, y, w, h, label, part=part, sub=sub, mono=True, size=13)

    batch = node(10, 60, 152, "Batch", "src, tgt_in, tgt_out", part="tensor")
    model = node(190, 60, 204, "model(src, tgt_in, ...)", "log_probs (B, Lt, V)", part="output")
    loss = node(428, 60, 178, "criterion(...)", "vs tgt_out: summed loss")
    back = node(640, 60, 144, "loss / n_tokens", ".backward()")
    clip = node(640, 200, 144, "clip_grad_norm_", "to norm 1.0")
    opt = node(428, 200, 178, "optimizer.step()", "then zero_grad()")
    sched = node(190, 200, 204, "scheduler.step()", "the next lr, from rate()")
    d.arrow([batch.right, model.left], head=7)
    d.arrow([model.right, loss.left], head=7)
    d.arrow([loss.right, back.left], head=7)
    d.arrow([back.bottom, clip.top], head=7, label="after accum_steps batches", side="left", size=11.5)
    d.arrow([clip.left, opt.right], head=7)
    d.arrow([opt.left, sched.right], head=7)
    d.arrow([sched.left, (batch.cx, sched.cy), batch.bottom], head=7)
    d.text(batch.cx + 8, (batch.y2 + sched.cy) / 2, "next step", size=12, anchor="start", color=MUTED)
    # the accumulation loop: more micro-batches before the step
    d.arrow([(back.cx, back.y), (back.cx, 30), (batch.cx, 30), batch.top], head=7, color=ACCENT, dash="5 4")
    d.text(410, 20, "accum_steps > 1: the next micro-batch; gradients add up", size=12, color=ACCENT)
    d.text(400, 284, "n_tokens: the real target tokens of all the step's batches, so accum_steps micro-batches "
           "= one big batch", size=12, color=MUTED)
    return d
