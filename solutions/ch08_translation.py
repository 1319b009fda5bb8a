"""Worked solutions to the exercises of chapter 8 (notebooks/08_translation.ipynb). Try them first."""
import math
from collections import Counter


def _ngrams(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def modified_precision(hyp: list[str], ref: list[str], n: int) -> tuple[int, int]:
    """Exercise 8.1: (clipped matches, hypothesis n-grams); each n-gram counts at most as often as the reference has it."""
    h, r = _ngrams(hyp, n), _ngrams(ref, n)
    return sum(min(c, r[g]) for g, c in h.items()), sum(h.values())


def brevity_penalty(hyp_len: int, ref_len: int) -> float:
    """Exercise 8.2: 1 for a hypothesis at least as long as the reference, exp(1 - r / c) otherwise."""
    return 1.0 if hyp_len >= ref_len else math.exp(1 - ref_len / hyp_len)


def corpus_bleu(hyps: list[list[str]], refs: list[list[str]]) -> float:
    """Exercise 8.3: counts pooled over the corpus, geometric mean of four precisions, one brevity penalty, times 100."""
    matches, totals = [0] * 4, [0] * 4
    for hyp, ref in zip(hyps, refs):
        for n in range(1, 5):
            m, t = modified_precision(hyp, ref, n)
            matches[n - 1] += m
            totals[n - 1] += t
    if min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / 4
    c, r = sum(map(len, hyps)), sum(map(len, refs))
    return 100 * brevity_penalty(c, r) * math.exp(log_precision)


def average_state_dicts(state_dicts: list[dict]) -> dict:
    """Exercise 8.4: the mean of each floating-point tensor; other entries from the last state dict."""
    last = state_dicts[-1]
    return {k: sum(d[k] for d in state_dicts) / len(state_dicts) if v.is_floating_point() else v
            for k, v in last.items()}
