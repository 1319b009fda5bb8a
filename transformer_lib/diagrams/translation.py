# Hand-written tool module (not generated from a notebook).
"""Chapter 8's diagrams: the training run from recipe to shipped model, checkpoint averaging, and how BLEU
compares a translation's n-grams with a reference's."""
from __future__ import annotations

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, Drawing, shade, text_width


# ---------------------------------------------------------------- the training run

def _frame(d: Drawing, x, y, w, h, title, code):
    """A loop drawn as a frame, its title (and the function that runs it) at the top right."""
    d.rect(x, y, w, h, "#F7F7F7", stroke="#999999", rx=10)
    d.text(x + w - 14, y + 17, code, size=11.5, anchor="end", mono=True, color=MUTED)
    d.text(x + w - 22 - text_width(code, 11.5, mono=True), y + 17, title, size=12.5, anchor="end", weight="bold")


@diagram("ch08-training-run", chapter=8)
def training_run() -> Drawing:
    d = Drawing(800, 570, "A training run: recipe, data, the epoch loop, and the model that is kept")
    # ---- the recipe and its data
    recipe = d.box(30, 20, 150, 46, "Recipe", mono=True, sub="RECIPES[budget]")
    prep = d.box(260, 20, 180, 46, "prepare_data", mono=True, sub="tokenize, vocabularies")
    data = d.box(520, 14, 250, 58, "TranslationData", part="tensor", mono=True, sub="train ids; val, test pairs")
    d.arrow([recipe.right, prep.left], head=7)
    d.arrow([prep.right, data.left], head=7)
    # ---- the epoch loop around the batch loop
    _frame(d, 20, 108, 760, 318, "for each epoch", "train_translation")
    _frame(d, 40, 136, 720, 136, "for each batch", "train_epoch (chapter 5)")
    y = 184
    batch = d.box(52, y, 112, 54, "batch", part="tensor", sub="runs.epoch_batches")
    model = d.box(272, y, 112, 54, "model", part="output", sub="EncoderDecoder")
    loss = d.box(526, y, 100, 54, "loss", sub="LabelSmoothing")
    step = d.box(644, y, 108, 54, "step", sub="Adam, schedule")
    d.arrow([(data.cx, data.y2), (data.cx, 88), (batch.cx, 88), batch.top], head=7)
    d.text(batch.cx + 8, 100, "train, in buckets of similar length, shuffled per epoch", size=11, anchor="start",
           color=MUTED)
    d.arrow([batch.right, model.left], head=7)
    d.text((batch.x2 + model.x) / 2, y + 12, "src (B, Ls)", size=11, mono=True, color=MUTED)
    d.text((batch.x2 + model.x) / 2, y + 42, "tgt_in (B, Lt)", size=11, mono=True, color=MUTED)
    d.arrow([model.right, loss.left], label="(B, Lt, tgt_vocab)", side="above", size=11)
    d.text((model.x2 + loss.x) / 2, y + 42, "log-probabilities", size=11, color=MUTED)
    d.arrow([loss.right, step.left], head=7)
    d.arrow([(step.cx, step.y2), (step.cx, 256), (batch.cx, 256), (batch.cx, batch.y2)], color=MUTED, head=7,
            width=1.2)
    d.text((step.cx + batch.cx) / 2, 247, "next batch", size=11, color=MUTED)
    # ---- the end of an epoch: validation, then the epoch's files
    val = d.box(56, 312, 270, 58, "validation", sub="loss; BLEU, greedy decoding")
    save = d.box(420, 312, 336, 58, "checkpoint of the epoch", part="tensor",
                 sub="epoch_NNN.safetensors, state.safetensors")
    d.arrow([(val.cx, 272), val.top], head=7)
    d.text(val.cx + 8, 290, "the epoch's last batch", size=11, anchor="start", color=MUTED)
    d.arrow([val.right, save.left], head=7)
    d.arrow([(save.x2 - 40, save.y), (save.x2 - 40, 272)], head=7, color=MUTED, width=1.2)
    d.text(save.x2 - 48, 292, "next epoch", size=11, anchor="end", color=MUTED)
    d.text(save.cx, 388, "only the last average_last checkpoints are kept;", size=11, color=MUTED)
    d.text(save.cx, 404, "state.safetensors lets a stopped run resume", size=11, color=MUTED)
    # ---- after the last epoch: average, choose, ship
    last = d.box(30, 460, 170, 38, "the last epoch", part="tensor")
    avg = d.box(30, 510, 170, 46, "average of the last", part="tensor", sub="average_last", size=13)
    d.arrow([(last.cx - 40, 426), (last.cx - 40, last.y)], head=7)
    d.text(last.cx - 32, 443, "after the last epoch", size=11, anchor="start", color=MUTED)
    fin = d.box(250, 478, 226, 58, "keep the better", mono=False, sub="runs.finish: val BLEU, beam search")
    kept = d.box(502, 484, 150, 46, "model.safetensors", part="tensor", size=12, mono=True)
    test = d.box(676, 484, 108, 46, "test2016", sub="BLEU, once")
    d.arrow([last.right, (235, last.cy), (235, fin.cy - 10), (fin.x, fin.cy - 10)], head=7)
    d.arrow([avg.right, (235, avg.cy), (235, fin.cy + 10), (fin.x, fin.cy + 10)], head=7)
    d.arrow([fin.right, kept.left], head=7)
    d.arrow([kept.right, test.left], head=6)
    d.text(kept.cx, kept.y - 14, "shipped (full recipe): pretrained()", size=11, color=MUTED)
    return d


# ---------------------------------------------------------------- checkpoint averaging

def _weights(epoch: int):
    """Made-up weights of one epoch's checkpoint: the same values plus a small epoch-dependent wobble."""
    base = [[0.30, 0.62, 0.45, 0.20], [0.75, 0.40, 0.58, 0.33], [0.50, 0.25, 0.68, 0.42]]
    return [[round(v + 0.06 * (((epoch * 7 + i * 3 + j * 5) % 5) - 2) / 2, 2) for j, v in enumerate(row)]
            for i, row in enumerate(base)]


def _weight_space(d: Drawing, cx, cy):
    """A sketch of the hope: the last epochs' weights circle a region of low loss, and their mean lies nearer its
    middle (a hope, not a rule: in chapter 8's runs the last epoch scored better)."""
    import math

    for rx, ry in ((112, 58), (74, 38), (36, 18)):
        d.path(f"M {cx - rx} {cy} a {rx} {ry} 0 1 0 {2 * rx} 0 a {rx} {ry} 0 1 0 {-2 * rx} 0", stroke="#CCCCCC",
               width=1.2)
    angles = [200, 255, 320, 30, 115]  # epochs 26..30 around the region
    points = [(cx + 70 * math.cos(math.radians(a)), cy - 36 * math.sin(math.radians(a))) for a in angles]
    d.polyline(points, stroke=MUTED, width=1, dash="3 3")
    for (x, y), a, e in zip(points, angles, range(26, 31)):
        d.circle(x, y, 4.5, shade(0.6), stroke=INK, width=1)
        d.text(x + 15 * math.cos(math.radians(a)), y - 13 * math.sin(math.radians(a)), str(e), size=11.5,
               color=MUTED)
    mx, my = sum(p[0] for p in points) / 5, sum(p[1] for p in points) / 5
    d.circle(mx, my, 5.5, ACCENT, stroke=ACCENT)
    d.text(mx, my - 13, "average", size=11.5, color=ACCENT)
    d.text(cx, cy - 82, "the hope, in weight space (a sketch):", size=11.5, color=MUTED)
    d.text(cx, cy - 67, "the last epochs around a valley of the loss", size=11.5, color=MUTED)


@diagram("ch08-checkpoint-averaging", chapter=8)
def checkpoint_averaging() -> Drawing:
    epochs, cell, pick = [26, 27, 28, 29, 30], 26, (1, 2)
    d = Drawing(800, 466, "Checkpoint averaging: the mean of the last epochs' weights, element by element")
    grids = {e: _weights(e) for e in epochs}
    mean = [[sum(grids[e][i][j] for e in epochs) / len(epochs) for j in range(4)] for i in range(3)]
    d.text(400, 22, "the last average_last = 5 checkpoints of a 30-epoch run", size=12.5, color=MUTED)
    tops = []
    for k, e in enumerate(epochs):
        x = 48 + k * 150
        d.text(x + 2 * cell, 48, f"epoch_{e:03d}", size=12, mono=True)
        box = d.grid(x, 62, grids[e], cell=cell)
        d.rect(box.x, box.y, box.w, box.h, "none", stroke="#999999", width=1)
        d.rect(x + pick[1] * cell, 62 + pick[0] * cell, cell, cell, "none", stroke=ACCENT, width=2.4)
        d.text(box.cx, box.y2 + 16, f"{grids[e][pick[0]][pick[1]]:.2f}", size=12, mono=True, color=ACCENT)
        tops.append((box.cx, box.y2 + 28))
    avg = d.box(250, 196, 300, 54, "mean of each weight, in float64", sub="(w_26 + w_27 + ... + w_30) / 5")
    for x, y in tops:
        d.arrow([(x, y), (avg.cx + (x - 400) * 0.35, avg.y)], head=7, width=1.2)
    x = 400 - 2 * cell
    box = d.grid(x, 290, mean, cell=cell)
    d.rect(box.x, box.y, box.w, box.h, "none", stroke="#999999", width=1)
    d.rect(x + pick[1] * cell, 290 + pick[0] * cell, cell, cell, "none", stroke=ACCENT, width=2.4)
    d.arrow([avg.bottom, (avg.cx, 288)], head=7)
    values = [grids[e][pick[0]][pick[1]] for e in epochs]
    d.text(box.cx, box.y2 + 18, f"({' + '.join(f'{v:.2f}' for v in values)}) / 5 = {sum(values) / 5:.2f}",
           size=12, mono=True, color=ACCENT)
    d.text(box.x - 14, box.cy - 9, "one model:", size=12.5, anchor="end")
    d.text(box.x - 14, box.cy + 9, "average of 5", size=12.5, anchor="end", mono=True)
    d.text(400, 428, "The checkpoints must share config and vocabularies; the average is kept if it scores higher",
           size=11.5, color=MUTED)
    d.text(400, 446, "on validation than the last epoch. Each square is one weight; darker is larger.", size=11.5,
           color=MUTED)
    _weight_space(d, 660, 338)
    return d


# ---------------------------------------------------------------- BLEU

@diagram("ch08-bleu-ngrams", chapter=8)
def bleu_ngrams() -> Drawing:
    hyp = "two young men are playing soccer on a grassy field .".split()
    ref = "two young men are playing soccer on a meadow .".split()
    d = Drawing(800, 424, "BLEU of one sentence: n-gram matches against the reference, n = 1 to 4")
    x0, w = 96, 58
    for row, (name, tokens, y) in enumerate((("model", hyp, 30), ("reference", ref, 76))):
        d.text(x0 - 12, y + 14, name, size=12.5, anchor="end", color=MUTED)
        for i, t in enumerate(tokens):
            d.box(x0 + i * w + 2, y, w - 4, 28, t, part="tensor" if row else "output", size=11, mono=True)
    refs = [{tuple(ref[i:i + n]) for i in range(len(ref) - n + 1)} for n in range(1, 5)]
    precisions = []
    top = 136
    d.text(x0 + len(hyp) * w / 2, top, "a square per n-gram of the model's translation, under its first token: "
           "dark when the reference has it", size=11.5, color=MUTED)
    for n in range(1, 5):
        y = top + 20 + (n - 1) * 38
        grams = [tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1)]
        hits = [g in refs[n - 1] for g in grams]
        precisions.append((sum(hits), len(grams)))
        d.text(x0 - 12, y + 14, f"n = {n}", size=12.5, anchor="end")
        for i, hit in enumerate(hits):
            d.rect(x0 + i * w + 2, y, w - 4, 28, shade(0.75 if hit else 0.04), stroke="#999999", width=1, rx=3)
        d.text(x0 + len(hyp) * w + 10, y + 14, f"{sum(hits)}/{len(grams)}", size=12.5, anchor="start", mono=True)
    # a 4-gram spelled out
    y4 = top + 20 + 3 * 38
    d.rect(x0 + 2 * w + 2, y4, w - 4, 28, "none", stroke=ACCENT, width=2.4, rx=3)
    d.brace(x0 + 2 * w + 4, y4 + 34, x0 + 6 * w - 4, None)
    d.text(x0 + 2 * w + 4, y4 + 54, "the 4-gram at men: men are playing soccer, which the reference has", size=11.5,
           color=ACCENT, anchor="start")
    score = 1.0
    for m, t in precisions:
        score *= m / t
    score = score ** 0.25
    parts = " · ".join(f"{m}/{t}" for m, t in precisions)
    d.text(400, 376, f"BLEU = 100 × BP × ({parts}) ^ 1/4 = 100 × 1 × {score:.3f} = {100 * score:.1f}",
           size=13,
           mono=True)
    d.text(400, 402, "BP, the brevity penalty, is 1: the translation (11 tokens) is not shorter than the "
           "reference (10)", size=11.5, color=MUTED)
    return d
