"""Worked solutions to the exercises of chapter 10 (notebooks/10_gpt.ipynb). Try them first."""
import math

import torch


def shift(tokens: torch.Tensor):
    """Exercise 10.1: position t of the inputs predicts position t of the targets, the next token."""
    return tokens[:, :-1], tokens[:, 1:]


def corpus_perplexity(nll: list[float], tokens: list[int]) -> float:
    """Exercise 10.2: exp of the negative log-likelihood per token, pooled over the corpus."""
    return math.exp(sum(nll) / sum(tokens))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Exercise 10.3: -inf outside the fewest most probable tokens whose probabilities sum to at least p."""
    sorted_logits, order = logits.sort(-1, descending=True)
    probs = sorted_logits.softmax(-1)
    before = probs.cumsum(-1) - probs  # what the more probable tokens already hold
    sorted_logits = sorted_logits.masked_fill(before >= p, float("-inf"))
    return logits.scatter(-1, order, sorted_logits)


def sample_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Exercise 10.4: softmax(logits / temperature)."""
    return (logits / temperature).softmax(-1)


def cache_bytes(n_layers: int, d_model: int, tokens: int, dtype_bytes: int) -> int:
    """Exercise 10.5: a key and a value of d_model numbers per token and layer."""
    return 2 * n_layers * d_model * tokens * dtype_bytes
