# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 10's classes and functions (transformer_lib.gpt).

GPTConfig, token batches against the context, sampling's options and generate's inputs.
"""
from __future__ import annotations

from transformer_lib.checks.core import check_int, check_ints, check_number, check_token_batch, check_token_ids
from transformer_lib.checks.attention import check_heads

__all__ = ["check_gpt_config", "check_gpt_tokens", "check_sampling", "check_generate", "check_logits",
           "check_cache_batch"]


def check_gpt_config(config) -> None:
    """GPTConfig: positive sizes, n_heads dividing d_model, a dropout probability."""
    check_ints(vocab_size=config.vocab_size, n_layers=config.n_layers, d_model=config.d_model, d_ff=config.d_ff,
               context=config.context)
    check_heads(config.d_model, config.n_heads, config.dropout)


def check_gpt_tokens(tokens, config, already: int = 0) -> None:
    """A decoder-only model's input: (B, T) ids in its vocabulary, and no more positions than its context."""
    check_token_batch("tokens", tokens)
    check_token_ids("tokens", tokens, config.vocab_size)
    if already + tokens.size(1) > config.context:
        held = f" after the {already} already read" if already else ""
        n = tokens.size(1)
        count = f"{n} tokens{held} go" if n != 1 else f"1 token{held} goes"
        raise ValueError(f"tokens: {count} past the model's context={config.context} positions; feed fewer, or "
                         "build the model with a larger context")


def check_sampling(temperature, top_k, top_p) -> None:
    """Sampling knobs: temperature > 0, top_k a positive int or None, top_p in (0, 1]."""
    check_number("temperature", temperature)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}; for the most probable token, use greedy=True")
    if top_k is not None:
        check_int("top_k", top_k)
    check_number("top_p", top_p)
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must lie in (0, 1], got {top_p!r}")


def check_logits(logits) -> None:
    """filter_logits' logits: one row of scores per sequence, (B, V)."""
    import torch

    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or not logits.dtype.is_floating_point:
        got = f"shape {tuple(logits.shape)}, {logits.dtype}" if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a float tensor (B, V), one row of scores per sequence (e.g. model(tokens)"
                         f"[:, -1]), got {got}")


def check_cache_batch(tokens, batch: int | None) -> None:
    """KVCache: every call after the first feeds the same number of sequences."""
    if batch is not None and tokens.size(0) != batch:
        raise ValueError(f"tokens: a batch of {tokens.size(0)} sequences, but this cache holds {batch}; feed the same "
                         "rows as the first call, or start a new KVCache")


def check_generate(model, prompt, max_new_tokens, end=None) -> None:
    """generate's inputs: a prompt the model can read, room in its context for the new tokens, an end token id."""
    check_int("max_new_tokens", max_new_tokens)
    if end is not None:
        check_int("end", end, low=0)
        if end >= model.config.vocab_size:
            raise ValueError(f"end={end} is not a token id of the model's vocab_size={model.config.vocab_size}")
    check_gpt_tokens(prompt, model.config)
    needed = prompt.size(1) + max_new_tokens - 1  # the last new token is written, never read
    if needed > model.config.context:
        raise ValueError(f"a prompt of {prompt.size(1)} tokens and max_new_tokens={max_new_tokens} need {needed} "
                         f"positions, past the model's context={model.config.context}")
