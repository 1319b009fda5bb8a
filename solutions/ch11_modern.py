"""Worked solutions to the exercises of chapter 11 (notebooks/11_modern.ipynb). Try them first."""
import torch


def rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    """Exercise 11.1: x / sqrt(mean(x^2) + eps) * gain, over the last dimension; no mean, no bias."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def swiglu_hidden(d_model: int, d_ff: int) -> int:
    """Exercise 11.2: 3 d_model h = 2 d_model d_ff, so h = 2/3 d_ff, rounded to the nearest whole number of units.
    Where 3 does not divide d_ff the two networks then differ by d_model weights, the least an integer h allows."""
    return round(2 * d_ff / 3)


def rope(x: torch.Tensor, base: float) -> torch.Tensor:
    """Exercise 11.3: pair (x[2i], x[2i+1]) at position p turned by p * base^(-2i / d_k)."""
    T, d_k = x.size(-2), x.size(-1)
    freqs = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * freqs  # (T, d_k / 2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)


def repeat_kv(k: torch.Tensor, group: int) -> torch.Tensor:
    """Exercise 11.4: each key/value head serves `group` consecutive query heads."""
    return k.repeat_interleave(group, dim=1)
