# Hand-written tool module (not generated from a notebook).
"""The book's animations: a drawing per step, played as an animated PNG (APNG) that GitHub, Colab, JupyterLab and
the website all play, with the last frame as the still image of a viewer that plays none.

    python -m transformer_lib.book figures 8   # redraws docs/figures/ch08-decoder-at-work.png and attaches it
    python -m transformer_lib.book check       # ... fails while it is stale

An animation is a function registered with `@animation(name, chapter)` that returns `Frames`: `Drawing`s of the
book's drawing kit (transformer_lib.diagrams.svg) and how long each is shown. Its source is the frames' SVG text;
the APNG in docs/figures/<name>.png carries that text's sha256, as a diagram's PNG does, so the check redraws the
frames and names a file drawn from another version. A chapter shows it as `![what it shows](attachment:<name>.png)`.

Chapter 8's animation, `ch08-decoder-at-work`: the shipped model (transformer_lib.translation.pretrained) translating
one sentence greedily, a frame per decoding step: the German source shaded by that step's cross-attention (the last
decoder layer, the mean of its heads), the three likeliest next tokens, and the English output so far.
"""
from __future__ import annotations

import functools
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, PARTS, Drawing, shade, text_width

__all__ = ["Animation", "ANIMATIONS", "animation", "Frames", "Step", "Decoding", "decode_with_attention",
           "decoder_at_work", "alt_text", "SENTENCE", "TOP", "SCALE", "COLOURS", "WIDTH", "SMALL"]

SCALE = 1  # PNG pixels per SVG pixel: an 800-pixel frame, GitHub's width, light enough to play on a page
COLOURS = 96  # one palette shared by every frame: few colours, small files
SENTENCE = "Ein Hund rennt durch den Schnee."  # chapter 8's first own sentence; beam search gives the same output
TOP = 3  # candidates drawn per step
WIDTH, HEIGHT, MARGIN = 800, 500, 24
SMALL = 17  # the smallest label of a frame (the weights, the footnote): the website keeps it READABLE_PX tall
LABEL_X = 190  # where the candidates' tokens end, right-aligned before their bars
FIRST_MS, STEP_MS, LAST_MS = 3500, 2200, 6000  # how long a frame shows: time to read the first, the last longest


@dataclass
class Frames:
    """The drawings of an animation and the milliseconds each is shown."""
    drawings: list[Drawing]
    durations: list[int]

    def __post_init__(self):
        if not self.drawings or len(self.drawings) != len(self.durations):
            raise ValueError(f"an animation needs one duration per frame and at least one frame, got "
                             f"{len(self.drawings)} frames and {len(self.durations)} durations")
        if any(not isinstance(ms, int) or ms < 20 for ms in self.durations):
            raise ValueError(f"durations must be whole milliseconds of at least 20, got {self.durations}")
        if len({(d.width, d.height) for d in self.drawings}) != 1:
            raise ValueError("every frame of an animation must have the same size")

    def source(self) -> str:
        """The text the animation is drawn from: each frame's SVG with its duration."""
        return "".join(f"<!-- frame {i + 1}: {ms} ms -->\n{d.svg()}"
                       for i, (d, ms) in enumerate(zip(self.drawings, self.durations)))

    def sha(self) -> str:
        return hashlib.sha256(self.source().encode("utf-8")).hexdigest()

    def png(self) -> bytes:
        """The APNG: the frames rasterised like the diagrams (resvg, DejaVu fonts), one shared palette, looping;
        the last frame is also the still image a viewer without APNG shows. Carries the source's sha256."""
        import matplotlib
        import vl_convert
        from PIL import Image, PngImagePlugin

        from transformer_lib.diagrams import _SOURCE_KEY

        vl_convert.register_font_directory(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf"))
        images = [Image.open(io.BytesIO(vl_convert.svg_to_png(d.svg(), scale=SCALE))).convert("RGB")
                  for d in self.drawings]
        w, h = images[0].size
        sheet = Image.new("RGB", (w, h * len(images)))
        for i, image in enumerate(images):
            sheet.paste(image, (0, i * h))
        # the palette: the most frequent colours exactly (the book's fills, white, the text), ties broken by colour;
        # every other pixel (an anti-aliased edge) takes the nearest of them
        counts = sorted(sheet.getcolors(w * h * len(images)), key=lambda c: (-c[0], c[1]))[:COLOURS]
        palette = Image.new("P", (1, 1))
        palette.putpalette([v for _, rgb in counts for v in rgb])
        frames = [image.quantize(palette=palette, dither=Image.Dither.NONE) for image in images]
        info = PngImagePlugin.PngInfo()
        info.add_text(_SOURCE_KEY, self.sha())
        out = io.BytesIO()
        frames[-1].save(out, format="PNG", save_all=True, append_images=frames, default_image=True, loop=0,
                        duration=self.durations, disposal=0, blend=0, optimize=True,
                        pnginfo=info)
        return out.getvalue()


@dataclass(frozen=True)
class Animation:
    name: str
    chapter: int
    draw: Callable[[], Frames]

    @property
    def attachment(self) -> str:
        return f"{self.name}.png"


ANIMATIONS: dict[str, Animation] = {}


def animation(name: str, chapter: int):
    """Register a function returning `Frames` under `name` (the file docs/figures/<name>.png) for chapter `chapter`."""
    def register(draw):
        if name in ANIMATIONS:
            raise ValueError(f"animation {name!r} is registered twice")
        ANIMATIONS[name] = Animation(name, chapter, functools.lru_cache(maxsize=1)(draw))
        return draw
    return register


# ---------------------------------------------------------------- the numbers: one greedy decoding, watched


@dataclass(frozen=True)
class Step:
    """One decoding step: the cross-attention over the source tokens and the likeliest next tokens, best first
    (the first is the greedy choice)."""
    attention: tuple[float, ...]
    candidates: tuple[tuple[str, float], ...]

    @property
    def chosen(self) -> str:
        return self.candidates[0][0]


@dataclass(frozen=True)
class Decoding:
    sentence: str
    source: tuple[str, ...]  # the source tokens the model reads
    steps: tuple[Step, ...]  # one per output token, </s> included
    translation: str  # the output detokenized
    layer: int  # the decoder layer whose cross-attention is drawn, from 1
    heads: int  # that layer's heads, averaged
    vocab: int  # the target vocabulary the candidates are chosen from
    bos: str
    eos: str

    @property
    def output(self) -> list[str]:
        """The tokens greedy decoding wrote, </s> included."""
        return [s.chosen for s in self.steps]


@functools.lru_cache(maxsize=4)
def decode_with_attention(sentence: str = SENTENCE, layer: int | None = None, top: int = TOP) -> Decoding:
    """Greedy decoding of `sentence` by the shipped model with chapter 7's DecoderCache, keeping each step's
    cross-attention of decoder layer `layer` (1 to the number of layers; None: the last), averaged over its heads,
    and its `top` likeliest tokens.
    The same steps and limit as translate(model, sentence, beam_size=1)."""
    import torch

    from transformer_lib.attention import padding_mask
    from transformer_lib.decoding import DecoderCache
    from transformer_lib.translation import pretrained

    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError(f"sentence must be a non-blank string, got {sentence!r}")
    shipped = pretrained()
    model = shipped.model
    src_vocab, tgt_vocab = model.vocabs
    layers = len(model.decoder.layers)
    layer = layers if layer is None else layer
    if not isinstance(layer, int) or isinstance(layer, bool) or not 1 <= layer <= layers:
        raise ValueError(f"layer must be a decoder layer from 1 to {layers} (or None, the last), got {layer!r}")
    if not isinstance(top, int) or not 1 <= top <= len(tgt_vocab):
        raise ValueError(f"top must be a whole number from 1 to {len(tgt_vocab)}, got {top!r}")
    source = shipped.src_tok(sentence)
    src = torch.tensor([src_vocab.encode(source)])
    src_mask = padding_mask(src, src_vocab.pad_idx)
    attn = model.decoder.layers[layer - 1].src_attn
    max_len = min(int(1.5 * src.size(1)) + 10, model.tgt_embed[1].max_len)  # translate_tokens' limit
    steps, token = [], tgt_vocab.bos_idx
    model.eval()
    with torch.no_grad():
        cache = DecoderCache(model, model.encode(src, src_mask), src_mask)
        for _ in range(max_len):
            probs = cache.step(torch.tensor([[token]]))[0].exp()  # (vocab,)
            weights = attn.attn[0, :, 0].mean(dim=0)  # (h, Ls) for the newest position -> (Ls,)
            p, i = probs.topk(top)
            token = int(probs.argmax())
            if token != int(i[0]):
                raise AssertionError("topk and argmax disagree on the best token")  # a tie: nothing to draw
            steps.append(Step(tuple(weights.tolist()),
                              tuple((tgt_vocab.itos[j], float(q)) for q, j in zip(p.tolist(), i.tolist()))))
            if token == tgt_vocab.eos_idx:
                break
    ids = [tgt_vocab.stoi[s.chosen] for s in steps]
    translation = shipped.tgt_tok.detokenize(tgt_vocab.decode(ids))
    return Decoding(sentence, tuple(source), tuple(steps), translation, layer, attn.n_heads, len(tgt_vocab),
                    tgt_vocab.itos[tgt_vocab.bos_idx], tgt_vocab.itos[tgt_vocab.eos_idx])


# ---------------------------------------------------------------- the drawing of one step


def _shown(token: str) -> str:
    """A token as a reader sees it: the subword space mark ▁ dropped (these tokens are whole words)."""
    return token.replace("\u2581", "") or token


def _percent(p: float) -> str:
    return f"{p:.0%}" if p >= 0.095 else (f"{p:.1%}" if p >= 0.001 else "<0.1%")


def _row(tokens, size, x=None, width=WIDTH):
    """Boxes for `tokens` side by side (centred unless `x` is given); returns each box's (x, w)."""
    widths = [max(text_width(t, size, mono=True) + 22, 56) for t in tokens]
    gap = 10
    total = sum(widths) + gap * (len(widths) - 1)
    if total > width - 2 * MARGIN:
        raise ValueError(f"the tokens {tokens} are too wide for one row of the animation ({total:.0f} px)")
    x = (width - total) / 2 if x is None else x
    boxes = []
    for w in widths:
        boxes.append((x, w))
        x += w + gap
    return boxes


def _step_frame(dec: Decoding, t: int) -> Drawing:
    step, n = dec.steps[t], len(dec.steps)
    word = _shown(step.chosen)
    last = t == n - 1
    title = (f"Step {t + 1} of {n}: {dec.eos} ends the translation" if last
             else f"Step {t + 1} of {n}: the decoder writes \u201c{word}\u201d")
    d = Drawing(WIDTH, HEIGHT, f"{title} (greedy decoding of {dec.sentence})")
    d.text(MARGIN, 30, title, size=24, anchor="start", weight="bold")
    # ---- the source, shaded by this step's cross-attention
    d.text(MARGIN, 70, f"German source, shaded by cross-attention (layer {dec.layer}, mean of {dec.heads} heads)",
           size=18, anchor="start", color=MUTED)
    src_y, tok_size, box_h = 88, 22, 50
    weights = [round(w, 2) for w in step.attention]  # what the picture shows: whole percents
    top = max(range(len(weights)), key=weights.__getitem__)
    src_boxes = _row([_shown(s) for s in dec.source], tok_size)
    for (x, w), token, weight, j in zip(src_boxes, dec.source, weights, range(len(weights))):
        d.rect(x, src_y, w, box_h, shade(weight), stroke=PARTS["tensor"][1], width=1.2, rx=6)
        d.text(x + w / 2, src_y + box_h / 2, _shown(token), size=tok_size, mono=True,
               color="#FFFFFF" if weight > 0.55 else INK)
        d.text(x + w / 2, src_y + box_h + 17, f"{weight:.0%}", size=SMALL, color=INK if j == top else MUTED,
               weight="bold" if j == top else "normal")
    # ---- the output so far: <s>, the tokens chosen before, and this step's choice
    out_y = 252
    tokens = [dec.bos, *(_shown(s.chosen) for s in dec.steps[:t]), word if not last else dec.eos]
    out_boxes = _row(tokens, tok_size, x=MARGIN)
    slot_x, slot_w = out_boxes[-1]
    for (x, w), j in zip(src_boxes, range(len(weights))):  # the attention flows to the token being chosen
        if weights[j] >= 0.02:
            d.polyline([(x + w / 2, src_y + box_h + 30), (slot_x + slot_w / 2, out_y - 4)],
                       stroke=shade(0.3 + 0.7 * weights[j]), width=1 + 9 * weights[j])
    for (x, w), token, j in zip(out_boxes, tokens, range(len(tokens))):
        new = j == len(tokens) - 1
        d.box(x, out_y, w, box_h, token, part="output" if new else "tensor", size=tok_size, mono=True,
              highlight=new)
    if last:
        d.text(MARGIN, out_y + box_h + 24, f"Translation: {dec.translation}", size=20, anchor="start",
               weight="bold", color=ACCENT)
    else:
        d.text(MARGIN, out_y + box_h + 24, "English so far; the chosen token is fed back in at the next step",
               size=18, anchor="start", color=MUTED)
    # ---- the candidates: the likeliest next tokens, the greedy choice outlined
    d.text(MARGIN, 366, f"The {len(step.candidates)} likeliest next tokens of {dec.vocab:,}",
           size=18, anchor="start", color=MUTED)
    bar_x, bar_w, row_h = LABEL_X + 14, 360, 30
    for k, (token, p) in enumerate(step.candidates):
        y = 384 + k * (row_h + 8)
        chosen = k == 0
        d.text(LABEL_X, y + row_h / 2, _shown(token), size=tok_size, mono=True, anchor="end",
               weight="bold" if chosen else "normal")
        length = max(bar_w * round(p, 3), 2)
        fill, stroke = PARTS["output"]
        d.rect(bar_x, y, length, row_h, fill, stroke=ACCENT if chosen else stroke, width=3 if chosen else 1.2,
               rx=4)
        d.text(bar_x + length + 10, y + row_h / 2, _percent(p), size=19, anchor="start")
        if chosen:
            d.text(bar_x + length + 20 + text_width(_percent(p), 19), y + row_h / 2, "\u2190 greedy choice",
                   size=SMALL, anchor="start", color=ACCENT)
    return d


@animation("ch08-decoder-at-work", chapter=8)
def decoder_at_work() -> Frames:
    """The shipped model translating SENTENCE, a frame per decoding step."""
    dec = decode_with_attention(SENTENCE)
    n = len(dec.steps)
    durations = [FIRST_MS if t == 0 else LAST_MS if t == n - 1 else STEP_MS for t in range(n)]
    return Frames([_step_frame(dec, t) for t in range(n)], durations)


def alt_text(dec: Decoding | None = None) -> str:
    """What the animation shows, in words: the alt text of the markdown cell that shows it."""
    dec = dec or decode_with_attention(SENTENCE)
    return (f"An animation of the shipped model translating \u201c{dec.sentence}\u201d greedily, one frame per decoding "
            f"step, {len(dec.steps)} in all. Each frame shades the German tokens by the cross-attention of decoder layer "
            f"{dec.layer} (the mean of its {dec.heads} heads), shows bars for the {TOP} likeliest next tokens with the "
            f"greedy choice outlined in red, and grows the English output token by token until the end token closes "
            f"it: \u201c{dec.translation}\u201d")
