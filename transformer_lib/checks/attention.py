# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 2's classes and functions (transformer_lib.attention).

Query, key and value shapes, masks that broadcast to the scores, and d_model against n_heads.
"""
from __future__ import annotations

import torch

from transformer_lib.checks.core import _shape, check_ints, check_probability, check_vectors

__all__ = ["check_qkv", "check_mask", "check_heads", "check_attention_inputs"]


def check_qkv(query, key, value) -> None:
    """scaled_dot_product_attention's inputs: (..., L, d) tensors, query and key sharing d_k, key and value a length."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            raise ValueError(f"{name} must be a tensor of shape (..., length, d_k), got {_shape(t)}")
    if query.size(-1) != key.size(-1):
        raise ValueError(f"query and key must share their last dimension d_k, got {query.size(-1)} and {key.size(-1)}")
    if key.size(-2) != value.size(-2):
        raise ValueError(f"key and value must have the same length, got {key.size(-2)} and {value.size(-2)}")


def check_mask(mask, scores_shape, name: str = "mask") -> None:
    """Raise unless mask is boolean and broadcasts to scores_shape without growing it."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        kind = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"{name} must be a boolean tensor (True where attention is allowed), got {kind}")
    # each of the mask's dimensions, matched from the right, must be 1 or the scores' size
    fits = mask.dim() <= len(scores_shape) and all(m in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores_shape)))
    if not fits:
        hint = " (a (B, Lq, Lk) mask needs .unsqueeze(1) to broadcast over heads)" if mask.dim() == 3 and len(scores_shape) == 4 else ""
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the attention scores' shape "
            f"{tuple(scores_shape)} (..., queries, keys){hint}"
        )


def check_heads(d_model, n_heads, dropout) -> None:
    """MultiHeadAttention's arguments: positive sizes, n_heads dividing d_model, a dropout probability."""
    check_ints(d_model=d_model, n_heads=n_heads)
    check_probability("dropout", dropout)
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}; each head needs d_model // n_heads dimensions")


def check_attention_inputs(d_model: int, n_heads: int, query, key, value, mask=None) -> None:
    """MultiHeadAttention's inputs: (B, L, d_model) each, one batch size, keys and values of one length, a mask that fits."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_vectors(name, t, d_model)
    if not query.size(0) == key.size(0) == value.size(0):
        raise ValueError(f"query, key and value must have the same batch size, got {query.size(0)}, {key.size(0)}, {value.size(0)}")
    if key.size(1) != value.size(1):
        raise ValueError(f"key and value must have the same length, got {key.size(1)} and {value.size(1)}")
    if mask is not None:
        check_mask(mask, (query.size(0), n_heads, query.size(1), key.size(1)))
