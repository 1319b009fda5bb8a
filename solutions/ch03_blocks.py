"""Worked solutions to the exercises of chapter 3 (notebooks/03_blocks.ipynb). Try them first."""
import torch


def layer_norm(x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """Exercise 3.1: centre, divide by sqrt(biased variance + eps), then scale and shift."""
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gain + bias


def sublayer(x: torch.Tensor, fn, norm, norm_first: bool) -> torch.Tensor:
    """Exercise 3.2: pre-norm adds fn(norm(x)) to x; post-norm normalizes x + fn(x)."""
    return x + fn(norm(x)) if norm_first else norm(x + fn(x))


def ffn_parameters(d_model: int, d_ff: int) -> int:
    """Exercise 3.3: w_1 is d_model x d_ff plus d_ff biases, w_2 d_ff x d_model plus d_model biases."""
    return 2 * d_model * d_ff + d_ff + d_model


def ffn_share(d_model: int, d_ff: int) -> float:
    """Exercise 3.4: attention has four d_model x d_model projections with biases, two layer norms 2 d_model each."""
    ffn = ffn_parameters(d_model, d_ff)
    attention = 4 * (d_model * d_model + d_model)
    norms = 2 * 2 * d_model
    return ffn / (ffn + attention + norms)
