# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 3's classes and functions (transformer_lib.blocks).

An encoder or decoder layer's input, memory and masks.
"""
from __future__ import annotations

from transformer_lib.checks.core import check_vectors
from transformer_lib.checks.attention import check_mask

__all__ = ["check_layer_inputs"]


def check_layer_inputs(attn, x, memory=None, **masks) -> None:
    """An encoder or decoder layer's inputs and masks, by the names the caller knows, before any attention runs.

    attn: the layer's self-attention (its d_model and n_heads give the shapes expected).
    """
    d_model, n_heads = attn.d_model, attn.n_heads
    check_vectors("x", x, d_model)
    B, L = x.shape[:2]
    keys = {"mask": L, "tgt_mask": L}
    if memory is not None:
        check_vectors("memory", memory, d_model)
        if memory.size(0) != B:
            raise ValueError(f"memory must have the batch size of x, {B}, got {memory.size(0)}")
        keys["src_mask"] = memory.size(1)
    for name, mask in masks.items():
        if mask is not None:
            check_mask(mask, (B, n_heads, L, keys[name]), name)
