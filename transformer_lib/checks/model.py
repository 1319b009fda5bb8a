# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 4's classes and functions (transformer_lib.model).

The model's token batches, source against target, and ModelConfig.
"""
from __future__ import annotations

import torch

from transformer_lib.checks.core import (check_int, check_positive, check_probability, check_same_batch, check_token_batch,
                                         check_token_ids)
from transformer_lib.checks.attention import check_mask

__all__ = ["check_model_tokens", "check_src_tgt", "check_config"]


def check_model_tokens(name: str, tokens, embed: torch.nn.Module, mask=None, stack=None) -> None:
    """Token ids an embedding can take: (B, L), within its vocabulary, no longer than its positions; and their mask.

    `embed` is searched for a token table (a module with `vocab_size`) and a position table (one with `max_len`);
    the mask must fit the self-attention scores of `stack` (an Encoder: its layers' n_heads).
    """
    check_token_batch(name, tokens)
    for module in embed.modules():
        if hasattr(module, "vocab_size") and hasattr(module, "embedding"):
            check_token_ids(name, tokens, module.vocab_size, f"{name}_vocab")
        elif hasattr(module, "max_len") and tokens.size(1) > module.max_len:
            raise ValueError(f"{name} has length {tokens.size(1)}, longer than the model's max_len={module.max_len} "
                             f"positions; build the model with max_len >= {tokens.size(1)}")
    if mask is not None and stack is not None and len(stack.layers):
        L, n_heads = tokens.size(1), stack.layers[0].self_attn.n_heads
        check_mask(mask, (tokens.size(0), n_heads, L, L), f"{name}_mask")


def check_src_tgt(src, tgt) -> None:
    """A model's two token batches: each (B, L) integer ids, the same B."""
    check_token_batch("src", src)
    check_token_batch("tgt", tgt)
    check_same_batch("src", src, "tgt", tgt)


def check_config(c) -> None:
    """A ModelConfig's values, each by its field name."""
    for name in ("src_vocab", "tgt_vocab", "n_layers", "d_model", "d_ff", "n_heads", "max_len"):
        check_int(name, getattr(c, name))
    if c.d_model % c.n_heads:
        raise ValueError(f"d_model={c.d_model} is not divisible by n_heads={c.n_heads}")
    check_probability("dropout", c.dropout)
    if c.pad_idx is not None:
        check_int("pad_idx", c.pad_idx, low=0)
        if c.pad_idx >= min(c.src_vocab, c.tgt_vocab):
            raise ValueError(f"pad_idx={c.pad_idx} must be a token id of both vocabularies, "
                             f"in [0, {min(c.src_vocab, c.tgt_vocab)})")
    check_positive("eps", c.eps)
    if c.share_embeddings and c.src_vocab != c.tgt_vocab:
        raise ValueError(f"share_embeddings needs one vocabulary, got src_vocab={c.src_vocab}, tgt_vocab={c.tgt_vocab}")
