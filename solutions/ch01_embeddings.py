"""Worked solutions to the exercises of chapter 1 (notebooks/01_embeddings.ipynb). Try them first."""
import math

import torch


def sinusoidal(max_len: int, d_model: int) -> torch.Tensor:
    """Exercise 1.1: row p, column 2i holds sin(p / 10000^(2i/d)), column 2i+1 cos of the same angle."""
    p = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2], table[:, 1::2] = torch.sin(p * omega), torch.cos(p * omega)
    return table


def pe_dot(k: int, d_model: int) -> float:
    """Exercise 1.2: sin(a)sin(b) + cos(a)cos(b) = cos(a - b), so each pair contributes cos(k omega_i)."""
    return sum(math.cos(k * 10000.0 ** (-2 * i / d_model)) for i in range(d_model // 2))


def wavelengths(d_model: int) -> torch.Tensor:
    """Exercise 1.3: pair i turns once every 2 pi / omega_i = 2 pi 10000^(2i/d) positions."""
    i = torch.arange(d_model // 2, dtype=torch.float64)
    return 2 * math.pi * 10000.0 ** (2 * i / d_model)


def closest(table: torch.Tensor, p: int) -> int:
    """Exercise 1.4: the largest dot product with row p among the other rows."""
    scores = table @ table[p]
    scores[p] = -math.inf
    return int(scores.argmax())
