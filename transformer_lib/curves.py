# Hand-written tool module (not generated from a notebook).
"""Training curves and bars the chapters draw, with matplotlib. It imports no chapter's module, so chapter 5 draws
with it as well as chapter 10 (transformer_lib.plots draws what chapter 7's decoding computes).

    from transformer_lib.curves import plot_copy_losses
    plot_target_distribution(criterion.target_distribution(targets), targets, criterion)  # chapter 5's
    plot_copy_losses(result)  # chapter 5's CopyTaskResult
    plot_speedups({"readable": 1.0, "fast path": 1.3}, "What the fast path buys, here")  # chapter 9's
    plot_lm_history(history)  # chapter 10's train_lm
    plot_translation_history(run.history)  # chapter 8's train_translation
    plot_schedules({"noam": rates, "warmup-stable-decay": other_rates}, "two schedules")  # chapter 8's

The chapters read the pictures; how they are drawn is a tool of the book, not part of the model, so it lives here.
"""
from __future__ import annotations

import torch

__all__ = ["plot_copy_losses", "plot_lm_history", "plot_schedules", "plot_speedups", "plot_target_distribution",
           "plot_translation_history"]



def plot_target_distribution(dist: torch.Tensor, targets: torch.Tensor, criterion):
    """Chapter 5's smoothed targets as a heatmap: a row per target (dist (N, V) for targets (N,)), a column per token
    id, labelled with the criterion's padding id and smoothing."""
    import matplotlib.pyplot as plt

    if dist.dim() != 2 or dist.size(0) != len(targets):
        raise ValueError(f"dist must hold a row per target: got dist {tuple(dist.shape)} for {len(targets)} targets")
    pad = criterion.padding_idx
    fig, ax = plt.subplots(figsize=(5, 0.4 + 0.56 * len(targets)))
    image = ax.imshow(dist, cmap="Blues", vmin=0, vmax=1)
    ax.set(xlabel=f"token id ({pad} = padding)", ylabel="target position",
           title=f"Smoothed target distribution, smoothing {criterion.smoothing}")
    ax.set_yticks(range(len(targets)), [f"target {t}" + (" (pad)" if t == pad else "") for t in targets.tolist()])
    fig.colorbar(image, ax=ax, label="probability")
    return fig


def plot_copy_losses(result):
    """Chapter 5's copy-task run (a CopyTaskResult): the loss of every training batch and of every validation, on a
    log axis. A validation loss that rounds to 0 in float32 has no place on a log axis: it is drawn at 1e-6."""
    import matplotlib.pyplot as plt

    if not result.history:
        raise ValueError("result has no training steps to draw: its history is empty")
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.semilogy([h["step"] for h in result.history], [h["loss"] for h in result.history], alpha=0.6,
                label="training batch")
    ax.semilogy([e["step"] for e in result.evaluations], [max(e["val_loss"], 1e-6) for e in result.evaluations], "o-",
                label="validation")
    ax.set(xlabel="optimizer step", ylabel="loss per token", title="Copy task: loss")
    ax.legend(loc="lower left")
    return fig


def plot_speedups(speedups: dict, title: str):
    """Chapter 9's bars: each variant's speed relative to the first ({name: times as fast}), a bar each, top to
    bottom in the dict's order, labelled with its factor, and a dotted line at 1."""
    import matplotlib.pyplot as plt

    if not speedups or not all(isinstance(v, (int, float)) and v > 0 for v in speedups.values()):
        raise ValueError(f"speedups must map each variant to a positive factor, got {speedups!r}")
    names, values = list(speedups)[::-1], list(speedups.values())[::-1]  # barh draws from the bottom up
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.5 * len(names)))
    bars = ax.barh(names, values, color=[f"C{i}" for i in range(len(names))][::-1])
    ax.bar_label(bars, fmt="%.2fx", padding=3)
    ax.axvline(1.0, color="grey", linestyle=":")
    ax.set(xlabel="training steps per second, relative to the readable model", title=title, xlim=(0, max(values) * 1.2))
    fig.tight_layout()
    return fig


def plot_lm_history(history: list):
    """Chapter 10's train_lm history ({epoch, train_loss, val_perplexity} an epoch): the training loss and the
    validation perplexity, side by side, against the epoch."""
    import matplotlib.pyplot as plt

    if not history:
        raise ValueError("history must hold at least one epoch, got an empty list")
    epochs = [h["epoch"] for h in history]
    fig, (ax_loss, ax_ppl) = plt.subplots(1, 2, figsize=(10, 3.5))
    ax_loss.plot(epochs, [h["train_loss"] for h in history], "o-")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy per token", title="training loss (with dropout)", xticks=epochs)
    ax_ppl.plot(epochs, [h["val_perplexity"] for h in history], "o-", color="C2")
    ax_ppl.set(xlabel="epoch", ylabel="perplexity", title="validation perplexity", xticks=epochs)
    fig.tight_layout()
    return fig


def plot_translation_history(history: list, title: str = "", kept: float | None = None, every: int = 1):
    """Chapter 8's train_translation history ({epoch, train_loss, val_loss, val_bleu} an epoch): the label-smoothed
    losses, and the greedy validation BLEU, against the epoch; `kept`, the kept model's beam-search BLEU, a star at
    the last epoch; `every`, a tick every that many epochs. An epoch without a BLEU (bleu_every) leaves a gap."""
    import matplotlib.pyplot as plt

    if not history:
        raise ValueError("history must hold at least one epoch, got an empty list")
    epochs, ticks = [h["epoch"] for h in history], [h["epoch"] for h in history][every - 1 :: every]
    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(10, 3.5))
    ax_loss.plot(epochs, [h["train_loss"] for h in history], "o-", label="training (with dropout)")
    ax_loss.plot(epochs, [h["val_loss"] for h in history], "o-", label="validation")
    ax_loss.set(xlabel="epoch", ylabel="label-smoothed loss per token", title=f"{title}loss", xticks=ticks)
    ax_loss.legend()
    ax_bleu.plot(epochs, [h.get("val_bleu", float("nan")) for h in history], "o-", color="C2", label="greedy")
    if kept is not None:
        ax_bleu.plot([epochs[-1]], [kept], "*", color="C3", markersize=12, label="beam 5, the kept model")
    ax_bleu.set(xlabel="epoch", ylabel="BLEU (tokenized, lowercased)", title=f"{title}validation BLEU", xticks=ticks)
    ax_bleu.legend()
    fig.tight_layout()
    return fig


def plot_schedules(rates: dict, title: str):
    """Learning-rate schedules, {name: the rate at steps 1, 2, ...}, on one axis (chapter 8's noam and
    warmup-stable-decay)."""
    import matplotlib.pyplot as plt

    if not rates or not all(len(r) for r in rates.values()):
        raise ValueError("rates must hold at least one schedule, each with at least one step")
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for name, values in rates.items():
        ax.plot(range(1, len(values) + 1), values, label=name)
    ax.set(xlabel="optimizer step", ylabel="learning rate", title=title)
    ax.legend()
    fig.tight_layout()
    return fig
