"""Worked solutions to the exercises of chapter 9 (notebooks/09_fast.ipynb). Try them first."""
import math

import torch
from torch import nn


def fuse_qkv(q_proj: nn.Linear, k_proj: nn.Linear, v_proj: nn.Linear) -> nn.Linear:
    """Exercise 9.1: the three weights stacked along the output dimension, and the three biases."""
    d = q_proj.in_features
    fused = nn.Linear(d, 3 * q_proj.out_features)
    with torch.no_grad():
        fused.weight.copy_(torch.cat([q_proj.weight, k_proj.weight, v_proj.weight], dim=0))
        fused.bias.copy_(torch.cat([q_proj.bias, k_proj.bias, v_proj.bias]))
    return fused


def bf16_spacing(x: float) -> float:
    """Exercise 9.2: 7 bits after the binary point, so the gap in [2^e, 2^(e+1)) is 2^(e - 7)."""
    return 2.0 ** (math.floor(math.log2(abs(x))) - 7)


def quantize_asymmetric(x: torch.Tensor):
    """Exercise 9.3: 256 levels from min(x, 0) to max(x, 0); the zero-point is the integer that stands for 0.0."""
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = (hi - lo) / 255 or 1.0
    zero_point = round(-128 - lo / scale)
    q = torch.clamp(torch.round(x / scale) + zero_point, -128, 127).to(torch.int8)
    return q, scale, zero_point


def smoothed_kl(log_probs: torch.Tensor, target: torch.Tensor, smoothing: float, pad: int) -> float:
    """Exercise 9.4: C - (1 - s) log p_y - s / (V - 2) (sum_j log p_j - log p_pad - log p_y), over real rows."""
    V = log_probs.size(1)
    confidence, other = 1 - smoothing, smoothing / (V - 2)
    constant = confidence * math.log(confidence) + smoothing * math.log(other)
    log_p_y = log_probs.gather(1, target[:, None]).squeeze(1)
    rest = log_probs.sum(1) - log_probs[:, pad] - log_p_y
    loss = constant - confidence * log_p_y - other * rest
    return float(loss[target != pad].sum())
