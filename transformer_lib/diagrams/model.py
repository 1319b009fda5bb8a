# Hand-written tool module (not generated from a notebook).
"""The model as a whole: the paper's Figure 1 redrawn, and the "where we are" maps that open chapters 1 to 5 and 7."""
from __future__ import annotations

from transformer_lib.diagrams import diagram
from transformer_lib.diagrams.svg import ACCENT, INK, MUTED, Drawing

# the parts of Figure 1 a map can point at
PARTS_OF_FIGURE_1 = {"embed", "pos", "self_attn", "masked_attn", "cross_attn", "ffn", "norm", "generator"}


def figure1(highlight=None, title="The Transformer (Figure 1 of the paper, redrawn)", caption=None) -> Drawing:
    """Encoder on the left, decoder on the right, shapes on the arrows in the book's names.

    highlight: None draws every part in colour; a set of names from PARTS_OF_FIGURE_1 fades the others and outlines
    these in the accent colour.
    """
    on = (lambda key: True) if highlight is None else (lambda key: key in highlight)
    dim = lambda key: not on(key)
    hl = lambda key: highlight is not None and on(key)
    d = Drawing(760, 800 if caption else 770, title)
    w = 200
    enc_x, dec_x = 110, 450  # left edges of the two columns

    def block(x, y, key, part, label, sub=None, h=34):
        return d.box(x, y, w, h, label, part=part, sub=sub, dim=dim(key), highlight=hl(key))

    def residual(x, y_from, y_to, key):
        """The residual path on the left of a sublayer: from below it to its add & norm."""
        color = MUTED if dim(key) else INK
        d.polyline([(x + w / 2, y_from), (x - 22, y_from), (x - 22, y_to), (x - 1, y_to)], stroke=color, width=1.3)
        d.path(f"M {x - 1} {y_to} l -7 -4 l 0 8 Z", stroke=color, fill=color, width=1)

    # ---- encoder, bottom up
    d.text(enc_x + w / 2, 748, "source tokens", size=13)
    src_emb = block(enc_x, 676, "embed", "embed", "Input embedding", "x sqrt(d_model)", h=44)
    d.arrow([(enc_x + w / 2, 736), src_emb.bottom], label="src (B, S)", side="right")
    pe = d.plus(enc_x + w / 2, 636, dim=dim("pos"))
    d.circle(enc_x - 36, 636, 16, "#FFFFFF", stroke=ACCENT if hl("pos") else (MUTED if dim("pos") else INK),
             width=3 if hl("pos") else 1.3)
    d.path(f"M {enc_x - 48} 636 q 6 -14 12 0 t 12 0", stroke=MUTED if dim("pos") else INK, width=1.3)
    d.text(enc_x - 36, 600, "positional", size=11, color=MUTED)
    d.text(enc_x - 36, 612, "encoding", size=11, color=MUTED)
    d.arrow([(enc_x - 20, 636), (enc_x + w / 2 - 10, 636)], head=6)
    d.arrow([src_emb.top, pe.bottom], head=6)
    enc = d.rect(enc_x - 34, 316, w + 58, 290, "#F7F7F7", stroke="#999999", rx=10)
    d.text(enc.x - 20, enc.cy, "N x", size=15, weight="bold", anchor="end")
    e_attn = block(enc_x, 520, "self_attn", "attention", "Multi-head attention", "self: q = k = v = x", h=44)
    e_norm1 = block(enc_x, 462, "norm", "norm", "Add & norm")
    e_ffn = block(enc_x, 386, "ffn", "ffn", "Feed forward", "d_model -> d_ff -> d_model", h=44)
    e_norm2 = block(enc_x, 328, "norm", "norm", "Add & norm")
    d.arrow([pe.top, (pe.cx, 592), e_attn.bottom], label="(B, S, d_model)", side="right", label_at=0.2)
    residual(enc_x, 580, e_norm1.cy, "norm")
    d.arrow([e_attn.top, e_norm1.bottom], head=6)
    d.arrow([e_norm1.top, e_ffn.bottom], head=6)
    residual(enc_x, 445, e_norm2.cy, "norm")
    d.arrow([e_ffn.top, e_norm2.bottom], head=6)
    memory_y = 290
    d.polyline([e_norm2.top, (e_norm2.cx, memory_y)], width=1.4)
    d.text(enc_x + w / 2 + 8, 304, "memory (B, S, d_model)", size=11.5, anchor="start", mono=True, color=MUTED)

    # ---- decoder, bottom up
    d.text(dec_x + w / 2, 748, "target tokens, shifted right", size=13)
    tgt_emb = block(dec_x, 676, "embed", "embed", "Output embedding", "x sqrt(d_model)", h=44)
    d.arrow([(dec_x + w / 2, 736), tgt_emb.bottom], label="tgt (B, T)", side="right")
    pe2 = d.plus(dec_x + w / 2, 636, dim=dim("pos"))
    d.circle(dec_x + w + 36, 636, 16, "#FFFFFF", stroke=ACCENT if hl("pos") else (MUTED if dim("pos") else INK),
             width=3 if hl("pos") else 1.3)
    d.path(f"M {dec_x + w + 24} 636 q 6 -14 12 0 t 12 0", stroke=MUTED if dim("pos") else INK, width=1.3)
    d.text(dec_x + w + 36, 600, "positional", size=11, color=MUTED)
    d.text(dec_x + w + 36, 612, "encoding", size=11, color=MUTED)
    d.arrow([(dec_x + w + 20, 636), (dec_x + w / 2 + 10, 636)], head=6)
    d.arrow([tgt_emb.top, pe2.bottom], head=6)
    dec = d.rect(dec_x - 34, 150, w + 58, 456, "#F7F7F7", stroke="#999999", rx=10)
    d.text(dec.x2 + 20, dec.cy, "N x", size=15, weight="bold", anchor="start")
    m_attn = block(dec_x, 520, "masked_attn", "attention", "Masked multi-head attention", "causal: sees j <= i",
                   h=44)
    d_norm1 = block(dec_x, 462, "norm", "norm", "Add & norm")
    c_attn = block(dec_x, 386, "cross_attn", "attention", "Multi-head attention", "q from decoder, k = v = memory",
                   h=44)
    d_norm2 = block(dec_x, 328, "norm", "norm", "Add & norm")
    d_ffn = block(dec_x, 252, "ffn", "ffn", "Feed forward", "d_model -> d_ff -> d_model", h=44)
    d_norm3 = block(dec_x, 194, "norm", "norm", "Add & norm")
    d.arrow([pe2.top, (pe2.cx, 592), m_attn.bottom], label="(B, T, d_model)", side="right", label_at=0.2)
    residual(dec_x, 580, d_norm1.cy, "norm")
    d.arrow([m_attn.top, d_norm1.bottom], head=6)
    d.arrow([d_norm1.top, c_attn.bottom], head=6)
    residual(dec_x, 445, d_norm2.cy, "norm")
    d.arrow([c_attn.top, d_norm2.bottom], head=6)
    d.arrow([d_norm2.top, d_ffn.bottom], head=6)
    residual(dec_x, 313, d_norm3.cy, "norm")
    d.arrow([d_ffn.top, d_norm3.bottom], head=6)
    # memory into the cross-attention's keys and values
    cross_color = ACCENT if hl("cross_attn") else INK
    d.arrow([(e_norm2.cx, memory_y), (dec_x - 60, memory_y), (dec_x - 60, 444), (dec_x + 40, 444),
             (dec_x + 40, c_attn.y2)], color=cross_color, head=7)

    # ---- output layer
    lin = block(dec_x, 96, "generator", "output", "Linear", "d_model -> tgt_vocab", h=40)
    soft = block(dec_x, 44, "generator", "output", "Log-softmax", h=32)
    d.arrow([d_norm3.top, lin.bottom], label="(B, T, d_model)", side="right")
    d.arrow([lin.top, soft.bottom], head=6)
    d.arrow([soft.top, (soft.cx, 12)], label="(B, T, tgt_vocab) log-probabilities", side="right", label_at=0.6,
            head=6)
    d.text(enc_x + w / 2, 30, "Encoder (chapter 3 layers, stacked in 4)", size=12, color=MUTED)
    d.text(enc_x + w / 2, 50, "reads the whole source at once", size=12, color=MUTED)
    if caption:
        d.text(380, 784, caption, size=14, color=ACCENT, weight="bold")
    return d


@diagram("figure-1-model", chapter=4)
def figure_1_model():
    return figure1()


MAPS = {
    1: ({"embed", "pos"}, "Chapter 1 builds the embeddings and positional encodings"),
    2: ({"self_attn", "masked_attn", "cross_attn"}, "Chapter 2 builds attention, used three ways"),
    3: ({"self_attn", "masked_attn", "cross_attn", "ffn", "norm"}, "Chapter 3 wraps attention into the layers"),
    5: ({"generator"}, "Chapter 5 trains the whole model through its output layer"),
    7: ({"masked_attn", "cross_attn", "generator", "embed"},
        "Chapter 7 runs the decoder one token at a time"),
}


def _map(chapter):
    parts, caption = MAPS[chapter]
    return figure1(parts, title=f"Where we are: {caption}", caption=caption)


for _chapter in MAPS:
    diagram(f"ch{_chapter:02d}-where-we-are", chapter=_chapter)(lambda c=_chapter: _map(c))
