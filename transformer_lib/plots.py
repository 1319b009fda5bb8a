# Hand-written tool module (not generated from a notebook).
"""Static pictures of what the chapters compute, drawn with matplotlib.

    from transformer_lib.plots import plot_attention_grid
    plot_attention_grid(maps, "cross", src_tokens, tgt_tokens, layers=[2])  # maps: chapter 7's attention_maps
    kept, rest = plot_sampling_filters(logits, vocab, {"top-k 5": dict(top_k=5)}, filter_logits)  # chapter 10's

The chapters read the pictures; how they are drawn is a tool of the book, not part of the model, so it lives here.
"""
from __future__ import annotations

import torch

from transformer_lib.checks.core import check_int
from transformer_lib.checks.decoding import check_attention_kind, check_layers
from transformer_lib.data import SPACE
from transformer_lib.decoding import ATTENTION_AXES

__all__ = ["plot_attention_grid", "plot_sampling_filters"]


# %% notebooks/07_decoding.ipynb cell 41
def _label(token: str) -> str:
    """A token as the grids label it: without its space mark ("▁men" reads "men")."""
    return token[1:] if token.startswith(SPACE) and len(token) > 1 else token


def plot_attention_grid(maps: dict, kind: str, src_tokens: list[str], tgt_tokens: list[str], layers=None,
                        per_row: int = 4, size: float = 2.3):
    """A static matplotlib grid of one kind of attention: a panel per head of each layer in `layers` (counting from
    1; all of them by default), `per_row` panels to a row, on one colour scale from 0 to 1.

    Rows of each panel are the queries, columns the keys (see ATTENTION_AXES). The tokens label the grid's left and
    bottom edges, without their space mark ▁.
    """
    import matplotlib.pyplot as plt

    check_attention_kind(kind, ATTENTION_AXES)
    layers, (rows, cols) = check_layers(layers, maps[kind].shape[0]), ATTENTION_AXES[kind]
    check_int("per_row", per_row)
    labels = {"source": [_label(t) for t in src_tokens], "target": [_label(t) for t in tgt_tokens]}
    panels = [(layer, head) for layer in layers for head in range(maps[kind].shape[1])]
    n_cols = min(per_row, len(panels))
    n_rows = (len(panels) + n_cols - 1) // n_cols  # rounded up
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(size * n_cols + 1.5, size * n_rows + 1.2), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= len(panels):  # a last row not full
            fig.delaxes(ax)
            continue
        (layer, head), left, bottom = panels[i], i % n_cols == 0, i + n_cols >= len(panels)
        image = ax.imshow(maps[kind][layer - 1, head].float().numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_xticks(range(len(labels[cols])), labels[cols], rotation=90, fontsize=11)
        ax.set_yticks(range(len(labels[rows])), labels[rows], fontsize=11)
        ax.tick_params(labelleft=left, labelbottom=bottom)  # the same tokens on every panel: label the edges
        ax.set_title(f"layer {layer}, head {head + 1}" if len(layers) > 1 else f"head {head + 1}", fontsize=11)
        ax.set_ylabel(f"{rows} (query)" if left else "", fontsize=11)
        ax.set_xlabel(f"{cols} (key)" if bottom else "", fontsize=11)
    heading = {"encoder": "encoder self-attention", "decoder": "decoder self-attention"}.get(kind, "cross-attention")
    where = f"layer {layers[-1]}" if len(layers) == 1 else f"layers {', '.join(map(str, layers[:-1]))} and {layers[-1]}"
    fig.suptitle(f"{heading}, {where}: a row per {rows} token attending, a column per {cols} token", fontsize=13)
    fig.tight_layout()
    fig.colorbar(image, ax=fig.axes, shrink=0.6, pad=0.01, label="attention weight")  # one scale for every panel
    return fig


def plot_sampling_filters(logits, vocab, settings: dict, filter_logits, n_shown: int = 12):
    """What a filter of logits (chapter 10's filter_logits) does to one next-token distribution (logits (1, V)): a
    panel per setting ({name: the filter's keyword arguments}), its n_shown most probable tokens as bars and every
    other token as one bar, the distribution as it was dashed behind (red where a filter cut the tokens). Returns,
    per setting, the tokens it keeps and the probability left to the tokens not shown: ({name: kept}, {name: rest})."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    check_int("n_shown", n_shown)
    if not 1 <= len(settings) <= 5:  # six panels: one for each setting, and the last for the legend
        raise ValueError("settings must hold 1 to 5 settings (a panel each, and one for the legend), "
                         f"got {len(settings)}")
    before = logits.softmax(-1)[0]  # (V,)
    shown = before.topk(n_shown).indices
    others = torch.ones(len(before), dtype=torch.bool).index_fill(0, shown, False)  # every token not shown
    blue, light, grey, red = "#7497C4", "#C9D7EA", "#777777", "#C0392B"  # the colours of chapter 10's toy picture
    x = list(range(n_shown)) + [n_shown + 1]  # the tokens shown, a gap, then every other token as one bar

    def word(t: str) -> str:  # ▁dog as dog; -s ends a word
        return t[1:] if t.startswith("▁") else ("-" + t if t.isalpha() else t)

    def shown_and_rest(p: torch.Tensor) -> list[float]:  # exactly 0 for the rest where a filter cut them all
        return p[shown].tolist() + [p[others].sum().item()]

    fig, axes = plt.subplots(2, 3, figsize=(12, 6.4), sharey=True)
    kept, rest = {}, {}
    for ax, (name, kw) in zip(axes.flat, settings.items()):
        filtered = filter_logits(logits, **kw)[0]  # (V,)
        alive = filtered > float("-inf")
        heights = shown_and_rest(filtered.softmax(-1))
        kept[name], rest[name] = int(alive.sum()), heights[-1]
        ax.bar(x, heights, color=[blue] * n_shown + [light], edgecolor=blue, hatch=[""] * n_shown + ["//"])
        if kw:  # the distribution as it was, dashed: grey where tokens stay, red where the filter cut them all
            cut = [not a for a in alive[shown].tolist()] + [bool(alive.sum() == alive[shown].sum())]
            ax.bar(x, shown_and_rest(before), fill=False, linestyle="--", edgecolor=[red if c else grey for c in cut])
        ax.set_xticks(x, [word(vocab.itos[i]) for i in shown.tolist()] + [f"other {len(vocab) - n_shown:,}"],
                      rotation=90)
        ax.set_title(f"{name}: {kept[name]:,} of {len(vocab):,} kept", fontsize=11)
    for ax in axes[:, 0]:
        ax.set_ylabel("probability")
    for ax in axes.flat[len(settings):]:
        ax.axis("off")
    axes.flat[-1].legend(handles=[Patch(color=blue, label="sampled from (renormalized)"),
                                  Patch(facecolor=light, edgecolor=blue, hatch="//",
                                        label="every other token, together"),
                                  Patch(fill=False, edgecolor=grey, linestyle="--", label="as it was"),
                                  Patch(fill=False, edgecolor=red, linestyle="--", label="cut: logit set to -inf")],
                         loc="center", frameon=False, fontsize=11)
    fig.tight_layout()
    return kept, rest
