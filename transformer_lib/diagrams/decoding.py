# Hand-written tool module (not generated from a notebook).
"""Chapter 7's diagrams: one decoding step with a key/value cache, the work it saves against recomputing the
prefix, greedy decoding as a loop, and the tree of a beam search on a toy next-token table (the table chapter 7
walks by hand, searched here by the same rules as its `beam_search`)."""
from __future__ import annotations

import math

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, PARTS, Drawing, shade, text_width

# the toy of chapter 7, section 2: the last token -> {next token: probability}; a model that ignores the source
TOY_TABLE = {
    "<s>": {"a": 0.5, "the": 0.4, "dog": 0.1},
    "a": {"dog": 0.55, "cat": 0.45},
    "the": {"dog": 0.9, "cat": 0.1},
    "dog": {"</s>": 0.52, "runs": 0.48},
    "cat": {"</s>": 0.6, "runs": 0.4},
    "runs": {"</s>": 1.0},
}


def toy_table() -> dict:
    """A copy of the toy table the beam-search tree is drawn from."""
    return {token: dict(nexts) for token, nexts in TOY_TABLE.items()}


def length_penalty(tokens: tuple, alpha: float) -> float:
    """((5 + |y|) / 6) ** alpha, |y| counting the tokens after <s>, </s> included."""
    return ((5 + len(tokens) - 1) / 6) ** alpha


def toy_beam_steps(beam_size: int = 2, max_len: int = 6):
    """The plain beam search of chapter 7 on TOY_TABLE, step by step: per step its candidates, each
    (tokens, score, kept), best first; a finished hypothesis is carried over unchanged (not listed again)."""
    beams, steps = [(("<s>",), 0.0)], []
    for _ in range(max_len):
        carried = [b for b in beams if b[0][-1] == "</s>"]
        fresh = [(tokens + (t,), score + math.log(p)) for tokens, score in beams if tokens[-1] != "</s>"
                 for t, p in TOY_TABLE[tokens[-1]].items()]
        beams = sorted(carried + fresh, key=lambda c: c[1], reverse=True)[:beam_size]
        steps.append([(tokens, score, (tokens, score) in beams)
                      for tokens, score in sorted(fresh, key=lambda c: c[1], reverse=True)])
        if all(tokens[-1] == "</s>" for tokens, _ in beams):
            break
    return steps, beams


# ---------------------------------------------------------------- 1. the key/value cache

def _cache(d: Drawing, x, y, rows, cols, cell, name, new_values, seed):
    """A cache of `rows` rows, positions 1, 2, ..., t-1 and t (the last one new, outlined in the accent), of `cols`
    cells; returns its box."""
    values = [[0.15 + 0.1 * ((r * 5 + c * seed) % 4) for c in range(cols)] for r in range(rows - 1)] + [new_values]
    box = d.grid(x, y, values, cell=cell)
    d.rect(box.x, box.y, box.w, box.h - cell, "none", stroke="#999999", width=1)
    d.rect(box.x, box.y2 - cell, box.w, cell, "none", stroke=ACCENT, width=2.4)
    # the rows are target positions, named as the prose names them: 1, 2, 3, ..., t - 1 from the earlier steps, t new
    labels = [str(r + 1) for r in range(rows - 3)] + ["⋮", "t-1", "t"]
    for r, label in enumerate(labels):
        d.text(x - 7, y + r * cell + cell / 2, label, size=11.5, anchor="end", mono=label != "⋮",  # mono lacks ⋮
               color=ACCENT if r == rows - 1 else MUTED)
    d.text(box.cx, y - 32, name, size=13, mono=True)
    d.text(box.cx, y - 15, "(B, n_heads, t, d_k)", size=11.5, mono=True, color=MUTED)
    return box


@diagram("ch07-kv-cache", chapter=7)
def kv_cache() -> Drawing:
    d = Drawing(800, 480, "One decoding step with a key/value cache: only the newest token is projected")
    cols, cell, rows = 6, 18, 6
    new = {"k": [0.7, 0.45, 0.85, 0.3, 0.6, 0.5], "v": [0.4, 0.8, 0.55, 0.7, 0.35, 0.9]}
    # ---- the newest token, embedded at its position t
    tok = d.box(40, 44, 130, 44, "newest token", part="tensor", sub="(B, 1)")
    emb = d.box(40, 124, 130, 50, "embedding", part="embed", sub="+ position t")
    d.arrow([tok.bottom, emb.top], head=7)
    d.text(tok.cx, 24, "step t", size=13, weight="bold")
    # ---- the three projections
    xs = {"q": 300, "k": 480, "v": 660}
    boxes = {name: d.box(x - 45, 70, 90, 36, f"w_{name}", part="attention", mono=True) for name, x in xs.items()}
    bus_y = 44
    d.polyline([(emb.x2, emb.cy), (205, emb.cy), (205, bus_y), (xs["v"], bus_y)], width=1.4)
    for name in xs:
        d.arrow([(xs[name], bus_y), boxes[name].top], head=7)
    d.text(215, bus_y - 12, "x (B, 1, d_model)", size=11.5, anchor="start", mono=True, color=MUTED)
    # ---- q: the newest position's query, one row
    q_box = d.grid(xs["q"] - cols * cell / 2, 150, [[0.5, 0.75, 0.3, 0.6, 0.85, 0.4]], cell=cell)
    d.rect(q_box.x, q_box.y, q_box.w, q_box.h, "none", stroke=ACCENT, width=2.4)
    d.arrow([boxes["q"].bottom, q_box.top], head=7)
    d.text(q_box.cx, q_box.y2 + 14, "q (B, n_heads, 1, d_k)", size=11.5, mono=True, color=MUTED)
    # ---- k and v: one new row each, appended to the bottom of the caches
    caches = {}
    for name, label, seed in (("k", "K cache", 3), ("v", "V cache", 1)):
        b = boxes[name]
        c = caches[name] = _cache(d, xs[name] - cols * cell / 2, 170, rows, cols, cell, label, new[name], seed)
        side = c.x2 + 26
        d.arrow([b.bottom, (b.cx, b.y2 + 10), (side, b.y2 + 10), (side, c.y2 - cell / 2), (c.x2 + 2, c.y2 - cell / 2)],
                color=ACCENT, head=7)
        d.text(c.cx, c.y2 + 16, f"{name}: (B, n_heads, 1, d_k)", size=11.5, mono=True, color=ACCENT)
        d.text(c.cx, c.y2 + 32, "appended as row t", size=11, color=ACCENT)
    d.text(caches["k"].x - 44, caches["k"].y + (rows - 1) * cell / 2, "kept: 1..t-1", size=11,
           color=MUTED, rotate=-90)
    # ---- attention of the one query over every cached key and value
    att = d.box(300, 372, 480, 50, "softmax(q K^T / sqrt(d_k)) V", part="attention", mono=True,
                sub="weights (B, n_heads, 1, t): one query, all t keys")
    d.arrow([(q_box.cx, q_box.y2 + 26), (q_box.cx, att.y)], head=7)
    for c in caches.values():
        d.arrow([(c.cx, c.y2 + 42), (c.cx, att.y)], head=7)
    # ---- out
    out = d.box(40, 376, 110, 42, "w_o", part="attention", mono=True)
    d.arrow([att.left, out.right], head=7)
    d.text((out.x2 + att.x) / 2, att.cy - 14, "(B, n_heads, 1, d_k)", size=11, mono=True, color=MUTED)
    d.text((out.x2 + att.x) / 2, att.cy + 14, "heads joined", size=11, color=MUTED)
    d.arrow([out.top, (out.cx, 250)], head=7)
    d.text(out.cx, 228, "(B, 1, d_model)", size=11.5, mono=True, color=MUTED)
    d.text(out.cx, 210, "to the layer's next sublayer", size=11, color=MUTED)
    d.text(400, 456, "Outlined in red: computed at this step. No causal mask: the cache holds only the past.",
           size=12.5)
    return d


@diagram("ch07-recompute-vs-cache", chapter=7)
def recompute_vs_cache() -> Drawing:
    """Which target positions each decoder layer computes at each step, without and with the cache."""
    steps, cell = 7, 30
    d = Drawing(760, 430, "Recomputing the prefix does a triangle of work; the cache does one position per step")
    for panel, (x0, title, sub) in enumerate(((90, "recompute the prefix", "greedy_decode: model.decode on all t tokens"),
                                              (450, "key/value cache", "DecoderCache.step: the newest token only"))):
        d.text(x0 + steps * cell / 2, 24, title, size=14, weight="bold")
        d.text(x0 + steps * cell / 2, 44, sub, size=11.5, mono=True, color=MUTED)
        y0 = 100
        for t in range(1, steps + 1):
            y = y0 + (t - 1) * cell
            d.text(x0 - 10, y + cell / 2, f"step {t}", size=11.5, anchor="end", color=MUTED)
            for p in range(1, t + 1):
                x = x0 + (p - 1) * cell
                if p == t:  # the newest position: computed either way
                    d.rect(x + 1, y + 1, cell - 2, cell - 2, PARTS["attention"][0], stroke=ACCENT, width=2.2, rx=3)
                elif panel == 0:  # computed again, the same as at the step before
                    d.rect(x + 1, y + 1, cell - 2, cell - 2, PARTS["tensor"][0], stroke=PARTS["tensor"][1],
                           width=1, rx=3)
                else:  # read from the cache: its keys and values, not recomputed
                    d.rect(x + 1, y + 1, cell - 2, cell - 2, "#FFFFFF", stroke="#AAAAAA", width=1, rx=3, dash="3 2")
        for p in range(1, steps + 1):
            d.text(x0 + (p - 1) * cell + cell / 2, y0 - 10, str(p), size=11, color=MUTED)
        d.text(x0 + steps * cell / 2, y0 - 26, "target position", size=11.5, color=MUTED)
        d.text(x0 + steps * cell / 2, y0 + steps * cell + 20,
               "step t computes t positions" if panel == 0 else "step t computes 1 position", size=12.5)
    y = 100 + steps * cell + 56
    for i, (fill, stroke, width, dash, label) in enumerate((
            (PARTS["attention"][0], ACCENT, 2.2, None, "the newest position: computed at this step"),
            (PARTS["tensor"][0], PARTS["tensor"][1], 1, None, "an earlier position: computed again, as before"),
            ("#FFFFFF", "#AAAAAA", 1, "3 2", "an earlier position: its keys and values read from the cache"))):
        d.rect(90, y + i * 22 - 7, 14, 14, fill, stroke=stroke, width=width, rx=3, dash=dash)
        d.text(112, y + i * 22, label, size=12, anchor="start")
    return d


# ---------------------------------------------------------------- greedy decoding

@diagram("ch07-greedy-loop", chapter=7)
def greedy_loop() -> Drawing:
    d = Drawing(780, 400, "Greedy decoding: feed the newest token, take the argmax, stop at </s>")
    top, low = 30, 150
    start = d.box(30, top + 6, 110, 50, "<s>", part="tensor", mono=True, sub="start_symbol")
    dec = d.box(250, top, 200, 62, "decoder step", sub="cache.step(ys[:, -1:])")
    arg = d.box(580, top + 6, 170, 50, "argmax", part="output", sub="over tgt_vocab")
    app = d.box(580, low + 6, 170, 50, "append", part="tensor", sub="ys = cat([ys, next])")
    stop = d.box(250, low, 200, 62, "every row done?", sub="</s> produced, or max_len")
    ret = d.box(30, low + 6, 110, 50, "return ys", part="tensor", mono=True)
    d.arrow([start.right, dec.left], label="ys (B, 1)", side="above")
    d.arrow([dec.right, arg.left], label="(B, tgt_vocab)", side="above")
    d.text((dec.x2 + arg.x) / 2, dec.cy + 14, "log-probabilities", size=11, color=MUTED)
    d.arrow([arg.bottom, app.top], label="next_token (B,)", side="left")
    d.arrow([app.left, stop.right], label="ys (B, t + 1)", side="above")
    d.arrow([(stop.cx, stop.y), (stop.cx, dec.y2)], color=ACCENT, width=2)
    d.text(stop.cx + 8, (stop.y + dec.y2) / 2 - 9, "no: feed the newest token", size=12, anchor="start", color=ACCENT)
    d.text(stop.cx + 8, (stop.y + dec.y2) / 2 + 9, "ys[:, -1:] (B, 1)", size=11.5, anchor="start", mono=True,
           color=MUTED)
    d.arrow([stop.left, ret.right], label="yes", side="above", mono=False)
    # ---- the tape: what one sentence feeds and produces, step by step
    # the subword tokens the chapter prints for this sentence, ▁ marking a space before (chapter 6)
    steps = [("<s>", "a"), ("a", "▁girl"), ("▁girl", "▁is"), ("▁is", "▁sleeping"), None, ("▁park", "."),
             (".", "</s>")]
    y_in, y_out, w, gap, x = 290, 350, 80, 14, 110
    header = "One sentence step by step:  Ein Mädchen schläft in der Sonne im Park."
    d.text(30, 252, header, size=12.5, anchor="start")
    d.text(44 + text_width(header, 12.5), 252, "(subwords: ▁ marks a space before)", size=12, anchor="start",
           color=MUTED)
    d.text(x - 12, y_in + 14, "fed", size=12, anchor="end", color=MUTED)
    d.text(x - 12, y_out + 14, "argmax", size=12, anchor="end", color=MUTED)
    for i, step in enumerate(steps):
        if step is None:  # the steps left out
            d.text(x + w / 2, (y_in + y_out + 28) / 2, "...", size=16, color=MUTED)
            x += w + gap
            continue
        a, b = step
        d.box(x, y_in, w, 28, a, part="tensor", size=12, mono=True)
        d.box(x, y_out, w, 28, b, part="output", size=12, mono=True, highlight=b == "</s>")
        d.arrow([(x + w / 2, y_in + 28), (x + w / 2, y_out)], head=6, width=1.2)
        if i + 1 < len(steps) and steps[i + 1] is not None:  # the token produced is the next step's input
            d.arrow([(x + w - 8, y_out), (x + w + gap + 8, y_in + 28)], color=ACCENT, head=6, width=1.2)
        x += w + gap
    return d


# ---------------------------------------------------------------- beam search on the toy table

@diagram("ch07-beam-tree", chapter=7)
def beam_tree() -> Drawing:
    beam_size, alpha = 2, 0.6
    steps, final = toy_beam_steps(beam_size)
    best = max(final, key=lambda b: b[1] / length_penalty(b[0], alpha))[0]
    nodes = {("<s>",): (0.0, True)}  # tokens -> (score, kept)
    for step in steps:
        nodes.update({tokens: (score, kept) for tokens, score, kept in step})
    children = {}
    for tokens in nodes:
        if len(tokens) > 1:
            children.setdefault(tokens[:-1], []).append(tokens)
    # a tidy tree: leaves take consecutive rows in depth-first order (best child first), a parent sits at the
    # middle of its children
    slot, ys, y0 = [0], {}, 84

    def place(tokens):
        kids = sorted(children.get(tokens, []), key=lambda t: -nodes[t][0])
        for kid in kids:
            place(kid)
        if kids:
            ys[tokens] = (ys[kids[0]] + ys[kids[-1]]) / 2
        else:
            ys[tokens] = y0 + slot[0] * 46
            slot[0] += 1
    place(("<s>",))
    height = y0 + slot[0] * 46 + 44
    d = Drawing(800, height, "Beam search with beam_size 2 on the toy table: kept, pruned and finished hypotheses")
    col_x, w, h = [20, 124, 236, 348, 460], 88, 36
    on_best = lambda tokens: best[: len(tokens)] == tokens
    for t in range(1, len(steps) + 1):
        d.text(col_x[t] + w / 2, 30, f"step {t}", size=13, weight="bold")
    d.text((col_x[1] + col_x[-1] + w) / 2, 52, f"under each token: the sum of log-probabilities so far; each step keeps "
           f"the {beam_size} best", size=11.5, color=MUTED)
    for tokens, (score, kept) in nodes.items():  # edges first, boxes on top
        if len(tokens) > 1:
            parent = tokens[:-1]
            px, cx = col_x[len(parent) - 1] + w, col_x[len(tokens) - 1]
            color, width = (ACCENT, 2.2) if on_best(tokens) else ((INK, 1.3) if kept else ("#BBBBBB", 1.1))
            d.polyline([(px, ys[parent]), (cx, ys[tokens])], stroke=color, width=width)
    for tokens, (score, kept) in nodes.items():
        x, y = col_x[len(tokens) - 1], ys[tokens]
        finished = tokens[-1] == "</s>"
        if finished and kept:  # a second outline: finished hypotheses leave the search
            d.rect(x - 4, y - h / 2 - 4, w + 8, h + 8, "none", stroke=INK, width=1.2, rx=8)
        label = tokens[-1]
        sub = "" if len(tokens) == 1 else f"{score:.2f}"
        d.box(x, y - h / 2, w, h, label, part="output", sub=sub or None, mono=True, size=13, dim=not kept,
              highlight=on_best(tokens) and len(tokens) > 1)
    # ---- the finished hypotheses, compared after the length penalty
    fx = 590
    d.text(fx + 90, 30, "finished: sum ÷ length penalty", size=12, weight="bold")
    d.text(fx + 90, 52, "((5 + |y|) / 6) ** 0.6", size=11.5, mono=True, color=MUTED)
    for tokens, score in final:
        y = ys[tokens]
        end = col_x[len(tokens) - 1] + w + (4 if len(tokens) - 1 < len(steps) else 0)
        if len(tokens) - 1 < len(steps):  # finished early: carried over unchanged by the later steps
            d.polyline([(end + 4, y), (fx - 10, y)], stroke=MUTED, width=1.3, dash="5 4")
            d.text((end + fx) / 2, y - 10, "carried over", size=11, color=MUTED)
        else:
            d.polyline([(end, y), (fx - 10, y)], stroke=MUTED, width=1.3, dash="5 4")
        is_best = tokens == best
        color = ACCENT if is_best else INK
        penalty = length_penalty(tokens, alpha)
        words = " ".join(tokens[1:])
        d.text(fx, y - 9, words, size=12.5, anchor="start", mono=True, color=color,
               weight="bold" if is_best else "normal")
        d.text(fx + 12 + text_width(words, 12.5, mono=True), y - 9, f"|y| = {len(tokens) - 1}", size=11.5,
               anchor="start", mono=True, color=MUTED)
        d.text(fx, y + 10, f"{score:.2f} ÷ {penalty:.2f} = {score / penalty:.2f}", size=12, anchor="start",
               mono=True, color=color)
        if is_best:
            d.text(fx + 156, y + 10, "best", size=12, anchor="start", color=ACCENT, weight="bold")
    # ---- legend
    y = height - 30
    d.rect(20, y - 8, 16, 16, PARTS["output"][0], stroke=PARTS["output"][1], rx=3)
    d.text(42, y, "kept in the beam", size=12, anchor="start")
    d.rect(170, y - 8, 16, 16, PARTS["output"][0], stroke=PARTS["output"][1], rx=3, opacity=0.3)
    d.text(192, y, "pruned", size=12, anchor="start")
    d.rect(264, y - 9, 18, 18, "none", stroke=INK, width=1.2, rx=5)
    d.rect(267, y - 6, 12, 12, PARTS["output"][0], stroke=PARTS["output"][1], rx=3)
    d.text(290, y, "finished (</s>)", size=12, anchor="start")
    d.rect(410, y - 8, 16, 16, PARTS["output"][0], stroke=ACCENT, width=2.4, rx=3)
    d.text(432, y, "the best hypothesis, after the length penalty", size=12, anchor="start")
    return d
