"""Worked solutions to the exercises of chapter 5 (notebooks/05_training.ipynb). Try them first."""
import math

import torch


def noam_rate(step: int, d_model: int, warmup: int) -> float:
    """Exercise 5.1: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), steps counted from 1."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def smoothed(target: torch.Tensor, vocab_size: int, padding_idx: int, smoothing: float) -> torch.Tensor:
    """Exercise 5.2: 1 - smoothing on the target, smoothing / (V - 2) elsewhere, 0 for padding (column and rows)."""
    dist = torch.full((len(target), vocab_size), smoothing / (vocab_size - 2), dtype=torch.float64)
    dist[torch.arange(len(target)), target] = 1 - smoothing
    dist[:, padding_idx] = 0.0
    dist[target == padding_idx] = 0.0
    return dist


def floor(vocab_size: int) -> float:
    """Exercise 5.3: the best the model can do is probabilities (1, 0, ..., 0); softmax of those gives e / (e + V - 1)."""
    return math.log(math.e + vocab_size - 1) - 1


def micro_batch_weights(token_counts: list[int]) -> list[float]:
    """Exercise 5.4: each micro-batch's mean loss weighted by its share of the step's tokens."""
    total = sum(token_counts)
    return [n / total for n in token_counts]
