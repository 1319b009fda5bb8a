"""Worked solutions to the exercises of chapter 7 (notebooks/07_decoding.ipynb). Try them first."""
import torch


def length_penalty(length: int, alpha: float) -> float:
    """Exercise 7.1: ((5 + length) / 6) ** alpha; a hypothesis is ranked by its log-probability over this."""
    return ((5 + length) / 6) ** alpha


def top_k_beams(scores: torch.Tensor, k: int):
    """Exercise 7.2: the k best (beam, token) continuations of a (beams, vocab) score table, best first."""
    best, flat = scores.flatten().topk(k)
    return flat // scores.size(1), flat % scores.size(1), best


def greedy_search(step, bos: int, eos: int, max_len: int) -> list[int]:
    """Exercise 7.3: the most probable next token until the end symbol (kept) or max_len tokens."""
    prefix = [bos]
    while len(prefix) - 1 < max_len:
        token = int(step(prefix).argmax())
        prefix.append(token)
        if token == eos:
            break
    return prefix[1:]


def decoder_positions(n: int, cached: bool) -> int:
    """Exercise 7.4: 1 + 2 + ... + n positions without the cache, one per step with it."""
    return n if cached else n * (n + 1) // 2
