"""Worked solutions to the exercises of chapter 2 (notebooks/02_attention.ipynb). Try them first."""
import math

import torch


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Exercise 2.1: -inf where masked, softmax, then zeros where masked (a fully masked row is all NaN before)."""
    weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return weights.masked_fill(~mask, 0.0)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Exercise 2.2: softmax over the keys of q k^T / sqrt(d_k), then the weighted sum of the values."""
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1)
    return weights @ v, weights


def causal_mask(size: int) -> torch.Tensor:
    """Exercise 2.3: True on and below the diagonal."""
    return torch.ones(size, size, dtype=torch.bool).tril()


def score_variance(d_k: int, n: int = 20000, seed: int = 0) -> float:
    """Exercise 2.4: the sample variance of q . k for n pairs of vectors with unit-variance entries."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(n, d_k, generator=g), torch.randn(n, d_k, generator=g)
    return (q * k).sum(-1).var().item()


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Exercise 2.5: (B, T, d) -> (B, T, h, d_k) -> (B, h, T, d_k)."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)
