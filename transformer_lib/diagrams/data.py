# Hand-written tool module (not generated from a notebook).
"""Chapter 6's pictures: one sentence through the data pipeline, byte-pair encoding learning its merges, and
length-bucketed batches against random ones. The merges and the batches are computed by the chapter's own code
(transformer_lib.data), imported when a picture is drawn."""
from __future__ import annotations

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, PARTS, Drawing, text_width

PAD_FILL, PAD_STROKE = PARTS["padding"]  # padding: the positions a batch wastes


def _chip_width(text, size=12, least=30, pad=14):
    return max(least, text_width(text, size, mono=True) + pad)


# ---- the pipeline of one sentence

SENTENCE = "A dachshund is sniffing a snowman."  # the chapter's own example sentence
PRE_TOKENS = ["a", "\u2581dachshund", "\u2581is", "\u2581sniffing", "\u2581a", "\u2581snowman", "."]
PIECES = [["a"], ["\u2581dach", "sh", "und"], ["\u2581is"], ["\u2581sniff", "ing"], ["\u2581a"],
          ["\u2581snow", "man"], ["."]]
# ids of <s>, the pieces and </s> in section 4's shared vocabulary (8,000 merges learned on Multi30k's training
# split); two shorter sentences share the batch: "Two dogs play in the snow." and "A dog runs."
# tests/test_diagrams.py learns that vocabulary again and checks these ids, and the pieces against the chapter's output
ROWS = [[2, 36, 2500, 483, 226, 197, 7450, 158, 110, 553, 564, 17, 3],
        [2, 271, 927, 273, 159, 181, 553, 17, 3],
        [2, 36, 340, 1357, 17, 3]]
PAD_ID = 1


@diagram("ch06-pipeline", chapter=6)
def pipeline():
    d = Drawing(820, 420, "One sentence through the chapter: text, pre-tokens, BPE pieces, ids, a padded batch")
    gap, h = 4, 30
    pieces = ["<s>", *(p for group in PIECES for p in group), "</s>"]
    widths = [max(_chip_width(p), *(_chip_width(str(row[k])) for row in ROWS if k < len(row))) + 2
              for k, p in enumerate(pieces)]
    total = sum(widths) + gap * (len(widths) - 1)
    x0 = 96 + (724 - total) / 2
    xs = [x0 + sum(widths[:k]) + gap * k for k in range(len(widths))]

    def step(y, code, what):
        d.text(20, y, code, size=12, anchor="start", mono=True)
        d.text(20 + text_width(code, 12, mono=True) + 14, y, what, size=12, anchor="start", color=MUTED)

    step(18, "text", "a sentence, here an English one: the target side")
    d.box(x0, 32, total, h, SENTENCE, part="plain", size=13)
    step(88, "pre_tokens(tok_en, text)", "spaCy's tokens, lowercased; \u2581 marks a space before")
    k = 1
    for word, group in zip(PRE_TOKENS, PIECES):
        left, right = xs[k], xs[k + len(group) - 1] + widths[k + len(group) - 1]
        d.box(left, 102, right - left, h, word, part="embed", mono=True, size=12)
        k += len(group)
    step(158, "bpe.encode_word(w)", "each pre-token cut into pieces by the learned merges")
    for k, p in enumerate(pieces):
        special = p in ("<s>", "</s>")
        if special:
            d.rect(xs[k], 172, widths[k], h, "#FFFFFF", stroke=MUTED, dash="4 3", rx=6)
            d.text(xs[k] + widths[k] / 2, 172 + h / 2, p, size=11.5, mono=True, color=MUTED)
        else:
            d.box(xs[k], 172, widths[k], h, p, part="tensor", mono=True, size=12)
    step(228, "shared_vocab.encode(pieces, add_bos_eos=True)", "ids, <s> = 2 and </s> = 3 around them; then")
    step(246, "pad_batch(examples, pad_idx=1).tgt", "(B, Lt + 1) = (3, 13): every row padded to the longest")
    y = 262
    for r, row in enumerate(ROWS):
        for k in range(len(xs)):
            real = k < len(row)
            fill, stroke = PARTS["tensor"] if real else PARTS["padding"]
            d.rect(xs[k], y + r * (h + gap), widths[k], h, fill, stroke=stroke, width=1.1, rx=4)
            d.text(xs[k] + widths[k] / 2, y + r * (h + gap) + h / 2, str(row[k] if real else PAD_ID), size=11.5,
                   mono=True, color=INK if real else ACCENT)
        d.text(xs[0] - 10, y + r * (h + gap) + h / 2, f"row {r}", size=11.5, anchor="end", color=MUTED)
    d.text(410, 380, "rows 1 and 2: \"Two dogs play in the snow.\" and \"A dog runs.\"", size=12, color=MUTED)
    d.legend(250, 404, [("tensor", "a token's id"), ("padding", "padding, <pad> = 1")])
    return d


# ---- byte-pair encoding, merge by merge

TOY_COUNTS = {"\u2581running": 5, "\u2581runs": 4, "\u2581sitting": 3, "\u2581sits": 2}
N_MERGES = 7


def _pair_counts(words, counts):
    pairs = {}
    for w, symbols in words.items():
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] = pairs.get(pair, 0) + counts[w]
    return pairs


@diagram("ch06-bpe-merges", chapter=6)
def bpe_merges():
    """learn_bpe on four pre-tokens: each row is one merge, the most frequent adjacent pair at its turn."""
    from transformer_lib.data import initial_symbols, learn_bpe, merge_pair

    merges = learn_bpe(TOY_COUNTS, N_MERGES)
    words = {w: initial_symbols(w) for w in TOY_COUNTS}
    history = [(None, None, dict(words))]
    for pair in merges:
        count = _pair_counts(words, TOY_COUNTS)[pair]
        words = {w: merge_pair(s, pair) for w, s in words.items()}
        history.append((pair, count, dict(words)))

    row_h, top, cell_gap, word_gap = 40, 78, 3, 22

    def width(symbol):  # a merged symbol is as wide as the characters it joined, so the columns stay aligned
        parts = initial_symbols(symbol)
        return sum(_chip_width(c, least=21, pad=8) for c in parts) + cell_gap * (len(parts) - 1)

    d = Drawing(820, top + row_h * len(history) + 50, "Byte-pair encoding learning its first merges")
    col_x, x = {}, 212
    for w in TOY_COUNTS:
        col_x[w] = x
        x += width(w) + word_gap
    col_w = {w: width(w) for w in TOY_COUNTS}
    d.text(20, 22, "merges learned, in order", size=13, weight="bold", anchor="start")
    d.text(20, 42, "pair (its count)", size=12, color=MUTED, anchor="start")
    for w, c in TOY_COUNTS.items():
        d.text(col_x[w] + col_w[w] / 2, 22, w, size=13, mono=True, weight="bold")
        d.text(col_x[w] + col_w[w] / 2, 42, f"occurs {c} times", size=12, color=MUTED)
    d.polyline([(20, 58), (800, 58)], stroke="#CCCCCC", width=1)
    for r, (pair, count, state) in enumerate(history):
        y = top + r * row_h
        if pair is None:
            d.text(20, y + 14, "start: characters", size=12.5, anchor="start", color=MUTED)
        else:
            label = f"{r}. {pair[0]} + {pair[1]}"
            d.text(20, y + 14, label, size=12.5, anchor="start", mono=True, color=ACCENT)
            d.text(28 + text_width(label, 12.5, mono=True), y + 14, f"({count})", size=12.5, anchor="start",
                   color=MUTED)
        for w, symbols in state.items():
            sx = col_x[w]
            for s in symbols:
                new = pair is not None and s == pair[0] + pair[1]
                d.box(sx, y, width(s), 28, s, part="tensor", mono=True, size=12, highlight=new)
                sx += width(s) + cell_gap
    bottom = top + row_h * len(history)
    d.text(410, bottom + 8, "Each row joins the most frequent adjacent pair everywhere, counting each word as often as",
           size=12, color=MUTED)
    d.text(410, bottom + 26, "it occurs; a tie goes to the pair that sorts first (u + n before \u2581r + u).", size=12,
           color=MUTED)
    return d


# ---- batches: random against length-bucketed

LENGTHS = [12, 5, 18, 9, 7, 15, 4, 11, 21, 8, 6, 13, 10, 16, 5, 9]  # tokens per sentence, in a random order
RANDOM_BATCH, MAX_TOKENS = 4, 40


def _padding(groups):
    slots = sum(len(g) * max(g) for g in groups)
    return 1 - sum(map(sum, groups)) / slots


@diagram("ch06-bucketing", chapter=6)
def bucketing():
    from transformer_lib.data import bucket_batches

    examples = [([5] * n, [5] * n) for n in LENGTHS]
    batches = bucket_batches(examples, max_tokens=MAX_TOKENS, pad_idx=1, shuffle=False)
    ordered, bucketed = sorted(LENGTHS), []
    for b in batches:  # unshuffled batches come in the sorted order
        bucketed.append(ordered[:b.src.size(0)])
        ordered = ordered[b.src.size(0):]
    random_groups = [LENGTHS[i:i + RANDOM_BATCH] for i in range(0, len(LENGTHS), RANDOM_BATCH)]

    unit, bar_h, row_gap, batch_gap, top = 12, 13, 3, 12, 88
    height = top + len(LENGTHS) * (bar_h + row_gap) + len(bucketed) * batch_gap + 70
    d = Drawing(820, height, "Random batches against length-bucketed batches: padding")

    def panel(x, groups, title, sub):
        d.text(x + 190, 22, title, size=14, weight="bold")
        d.text(x + 190, 42, sub, size=12, color=MUTED)
        y = top
        for k, g in enumerate(groups):
            longest = max(g)
            d.text(x + 74, y + len(g) * (bar_h + row_gap) / 2 - 2, f"{len(g)} x {longest}", size=11.5, mono=True,
                   anchor="end", color=MUTED)
            for n in g:
                d.rect(x + 84, y, n * unit, bar_h, PARTS["tensor"][0], stroke=PARTS["tensor"][1], width=1)
                if n < longest:
                    d.rect(x + 84 + n * unit, y, (longest - n) * unit, bar_h, PAD_FILL, stroke=PAD_STROKE, width=0.8)
                y += bar_h + row_gap
            y += batch_gap
        share = _padding(groups)
        d.text(x + 78, 66, "size x longest", size=11, anchor="end", color=MUTED)
        d.text(x + 190, bottom, f"{len(groups)} batches, {share:.0%} of the slots are padding", size=12.5,
               color=ACCENT, weight="bold")

    bottom = height - 48
    panel(16, random_groups, "Random batches", f"{RANDOM_BATCH} sentences each, in random order")
    panel(430, bucketed, "Length-bucketed batches", f"sorted by length, size x longest <= {MAX_TOKENS} tokens")
    d.polyline([(418, 14), (418, height - 34)], stroke="#CCCCCC", width=1)
    d.legend(290, height - 14, [("tensor", "tokens of a sentence"), ("padding", "padding to the batch's longest")])
    return d
