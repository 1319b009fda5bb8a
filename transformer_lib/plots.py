# Hand-written tool module (not generated from a notebook).
"""Static pictures of what the chapters compute, drawn with matplotlib.

    from transformer_lib.plots import plot_attention_grid
    plot_attention_grid(maps, "cross", src_tokens, tgt_tokens, layers=[2])  # maps: chapter 7's attention_maps

Chapter 7 reads the grids; how they are drawn is a tool of the book, not part of the model, so it lives here.
"""
from __future__ import annotations

from transformer_lib.checks.core import check_int
from transformer_lib.checks.decoding import check_attention_kind, check_layers
from transformer_lib.data import SPACE
from transformer_lib.decoding import ATTENTION_AXES

__all__ = ["plot_attention_grid"]


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
