# Hand-written tool module (not generated from a notebook).
"""The model as a whole: the paper's Figure 1 redrawn, and the "where we are" maps that open the chapters."""
from __future__ import annotations

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, Drawing

# the parts of Figure 1 a map can point at
PARTS_OF_FIGURE_1 = {"embed", "tgt_embed", "pos", "self_attn", "masked_attn", "cross_attn", "ffn", "norm", "dec_ffn",
                     "dec_norm", "generator"}


def figure1(highlight=None, title="The Transformer (Figure 1 of the paper, redrawn)", caption=None) -> Drawing:
    """Encoder on the left, decoder on the right, shapes on the arrows in the book's names.

    highlight: None draws every part in colour; a set of names from PARTS_OF_FIGURE_1 fades the others and outlines
    these in the accent colour.
    """
    on = (lambda key: True) if highlight is None else (lambda key: key in highlight)
    dim = lambda key: not on(key)
    hl = lambda key: highlight is not None and on(key)
    d = Drawing(820, 822 if caption else 792, title)
    w = 210
    enc_x, dec_x = 140, 470  # left edges of the two columns

    def block(x, y, key, part, label, sub=None, h=34):
        return d.box(x, y, w, h, label, part=part, sub=sub, dim=dim(key), highlight=hl(key))

    def residual(x, y_from, y_to, side):
        """The residual path beside a sublayer, from below it to its add & norm (encoder left, decoder right)."""
        edge, out = (x, x - 24) if side == "left" else (x + w, x + w + 24)
        d.polyline([(x + w / 2, y_from), (out, y_from), (out, y_to), (edge, y_to)], stroke=INK, width=1.3)
        tip = 7 if side == "left" else -7
        d.path(f"M {edge} {y_to} l {-tip} -4 l 0 8 Z", stroke=INK, fill=INK, width=1)

    def positional(x_center, circle_x, key="pos"):
        """The positional encoding: a wave in a circle beside the embedding's sum."""
        plus = d.plus(x_center, 652, dim=dim(key))
        color = ACCENT if hl(key) else (MUTED if dim(key) else INK)
        d.circle(circle_x, 652, 17, "#FFFFFF", stroke=color, width=3 if hl(key) else 1.3)
        d.path(f"M {circle_x - 12} 652 q 6 -14 12 0 t 12 0", stroke=color, width=1.3)
        d.text(circle_x, 683, "positional", size=11, color=MUTED)
        d.text(circle_x, 696, "encoding", size=11, color=MUTED)
        start = circle_x + 18 if circle_x < x_center else circle_x - 18
        d.arrow([(start, 652), (x_center + (-11 if circle_x < x_center else 11), 652)], head=6)
        return plus

    # ---- encoder, bottom up
    d.text(enc_x + w / 2, 778, "source tokens", size=13)
    src_emb = block(enc_x, 702, "embed", "embed", "Input embedding", "x sqrt(d_model)", h=44)
    d.arrow([(enc_x + w / 2, 766), src_emb.bottom], label="src (B, Ls)", side="right")
    pe = positional(enc_x + w / 2, enc_x - 40)
    d.arrow([src_emb.top, pe.bottom], head=6)
    enc = d.rect(enc_x - 40, 318, w + 64, 292, "#F7F7F7", stroke="#999999", rx=10)
    d.text(enc.x - 12, enc.cy, "N x", size=15, weight="bold", anchor="end")
    d.text(enc.cx, enc.y - 16, "Encoder", size=14, weight="bold")
    e_attn = block(enc_x, 524, "self_attn", "attention", "Multi-head attention", "self: q = k = v = x", h=44)
    e_norm1 = block(enc_x, 466, "norm", "norm", "Add & norm")
    e_ffn = block(enc_x, 390, "ffn", "ffn", "Feed forward", "d_model -> d_ff -> d_model", h=44)
    e_norm2 = block(enc_x, 332, "norm", "norm", "Add & norm")
    d.arrow([pe.top, e_attn.bottom], label="(B, Ls, d_model)", side="right", label_at=0.2)
    residual(enc_x, 586, e_norm1.cy, "left")
    d.arrow([e_attn.top, e_norm1.bottom], head=6)
    d.arrow([e_norm1.top, e_ffn.bottom], head=6)
    residual(enc_x, 449, e_norm2.cy, "left")
    d.arrow([e_ffn.top, e_norm2.bottom], head=6)
    memory_y = 270
    d.polyline([e_norm2.top, (e_norm2.cx, memory_y)], width=1.4)
    d.text(enc_x + w / 2, memory_y - 14, "memory (B, Ls, d_model)", size=11.5, mono=True, color=MUTED)

    # ---- decoder, bottom up
    d.text(dec_x + w / 2, 778, "target tokens, shifted right", size=13)
    tgt_emb = block(dec_x, 702, "tgt_embed", "embed", "Output embedding", "x sqrt(d_model)", h=44)
    d.arrow([(dec_x + w / 2, 766), tgt_emb.bottom], label="tgt (B, Lt)", side="right")
    pe2 = positional(dec_x + w / 2, dec_x + w + 40)
    d.arrow([tgt_emb.top, pe2.bottom], head=6)
    dec = d.rect(dec_x - 24, 152, w + 64, 458, "#F7F7F7", stroke="#999999", rx=10)
    d.text(dec.x2 + 12, dec.cy, "N x", size=15, weight="bold", anchor="start")
    d.text(dec.x + 12, dec.y + 18, "Decoder", size=14, weight="bold", anchor="start")
    m_attn = block(dec_x, 524, "masked_attn", "attention", "Masked multi-head attention", "causal: sees j <= i",
                   h=44)
    d_norm1 = block(dec_x, 466, "dec_norm", "norm", "Add & norm")
    c_attn = block(dec_x, 390, "cross_attn", "attention", "Multi-head attention", "q: decoder; k = v: memory",
                   h=44)
    d_norm2 = block(dec_x, 332, "dec_norm", "norm", "Add & norm")
    d_ffn = block(dec_x, 256, "dec_ffn", "ffn", "Feed forward", "d_model -> d_ff -> d_model", h=44)
    d_norm3 = block(dec_x, 198, "dec_norm", "norm", "Add & norm")
    d.arrow([pe2.top, m_attn.bottom], label="(B, Lt, d_model)", side="left", label_at=0.2)
    residual(dec_x, 586, d_norm1.cy, "right")
    d.arrow([m_attn.top, d_norm1.bottom], head=6)
    d.arrow([d_norm1.top, c_attn.bottom], head=6)
    residual(dec_x, 449, d_norm2.cy, "right")
    d.arrow([c_attn.top, d_norm2.bottom], head=6)
    d.arrow([d_norm2.top, d_ffn.bottom], head=6)
    residual(dec_x, 317, d_norm3.cy, "right")
    d.arrow([d_ffn.top, d_norm3.bottom], head=6)
    # the memory enters the cross-attention of the decoder as its keys and values
    cross_color = ACCENT if hl("cross_attn") else INK
    d.arrow([(e_norm2.cx, memory_y), (dec_x - 12, memory_y), (dec_x - 12, c_attn.y + 32), (dec_x, c_attn.y + 32)],
            color=cross_color, head=7)

    # ---- output layer
    lin = block(dec_x, 92, "generator", "output", "Linear", "d_model -> tgt_vocab", h=40)
    soft = block(dec_x, 40, "generator", "output", "Log-softmax", h=32)
    d.arrow([d_norm3.top, lin.bottom], label="(B, Lt, d_model)", side="right")
    d.arrow([lin.top, soft.bottom], head=6)
    d.arrow([soft.top, (soft.cx, 8)], head=6)
    d.text(soft.cx - 8, 20, "(B, Lt, tgt_vocab) log-probabilities", size=11.5, mono=True, color=MUTED, anchor="end")
    if caption:
        d.text(410, 808, caption, size=14, color=ACCENT, weight="bold")
    return d


@diagram("figure-1-model", chapter=4)
def figure_1_model():
    return figure1()


MAPS = {
    1: ({"embed", "tgt_embed", "pos"}, "Chapter 1 builds the embeddings and positional encodings"),
    2: ({"self_attn", "masked_attn", "cross_attn"}, "Chapter 2 builds attention, used three ways"),
    3: ({"self_attn", "masked_attn", "cross_attn", "ffn", "norm", "dec_ffn", "dec_norm"},
        "Chapter 3 wraps attention into the layers"),
    5: (None, "Chapter 5 trains the whole model, end to end"),
    6: ({"embed", "tgt_embed", "generator"}, "Chapter 6 makes the token ids the model reads and writes"),
    7: ({"tgt_embed", "masked_attn", "cross_attn", "dec_ffn", "dec_norm", "generator"},
        "Chapter 7 runs the decoder one token at a time"),
    8: (None, "Chapter 8 trains the whole model to translate German into English"),
    9: ({"self_attn", "masked_attn", "cross_attn", "norm", "dec_norm", "generator"},
        "Chapter 9 gives attention, layer norm and the loss fast twins"),
}


def _map(chapter):
    parts, caption = MAPS[chapter]
    return figure1(parts, title=f"Where we are: {caption}", caption=caption)


for _chapter in MAPS:
    diagram(f"ch{_chapter:02d}-where-we-are", chapter=_chapter)(lambda c=_chapter: _map(c))
