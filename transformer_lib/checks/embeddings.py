# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 1's classes and functions (transformer_lib.embeddings).

TokenEmbedding's sizes and the length of a sequence against a positional table.
"""
from __future__ import annotations

from transformer_lib.checks.core import check_int, check_ints, check_vectors

__all__ = ["check_embedding", "check_sequence"]


def check_embedding(vocab_size, d_model, padding_idx) -> None:
    """TokenEmbedding's arguments: positive sizes, padding_idx None or a token id."""
    check_ints(vocab_size=vocab_size, d_model=d_model)
    if padding_idx is not None:
        check_int("padding_idx", padding_idx, low=0)
        if padding_idx >= vocab_size:
            raise ValueError(f"padding_idx={padding_idx} is not a token id in [0, vocab_size={vocab_size})")


def check_sequence(x, d_model: int, max_len: int, owner: str) -> None:
    """Raise unless x is (B, L, d_model) with L <= max_len (owner: the class name, for the message)."""
    check_vectors("x", x, d_model)
    if x.size(1) > max_len:
        raise ValueError(
            f"sequence length {x.size(1)} is longer than max_len={max_len} of this {owner}; "
            f"build it with max_len >= {x.size(1)}"
        )
