"""Worked solutions to the exercises of chapter 6 (notebooks/06_data.ipynb). Try them first."""
from collections import Counter

from transformer_lib.data import Vocab, initial_symbols, merge_pair


def build_vocab(sentences: list[list[str]], min_freq: int) -> list[str]:
    """Exercise 6.1: specials, then tokens seen at least min_freq times, most frequent first, ties alphabetical."""
    counts = Counter(t for sentence in sentences for t in sentence)
    kept = [t for t, n in counts.items() if n >= min_freq and t not in Vocab.SPECIALS]
    return [*Vocab.SPECIALS, *sorted(kept, key=lambda t: (-counts[t], t))]


def count_pairs(word_counts: dict[str, int]) -> Counter:
    """Exercise 6.2: each adjacent pair of a pre-token's initial symbols, weighted by the pre-token's count."""
    pairs = Counter()
    for word, n in word_counts.items():
        symbols = initial_symbols(word)
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += n
    return pairs


def encode_word(word: str, merges: list[tuple[str, str]]) -> list[str]:
    """Exercise 6.3: the merges replayed in the order learned; a merge can only use symbols made before it."""
    symbols = initial_symbols(word)
    for pair in merges:
        symbols = merge_pair(symbols, pair)
    return symbols


def padding_share(batches: list[list[int]]) -> float:
    """Exercise 6.4: padding over all slots, each batch padded to its own longest sequence."""
    slots = sum(len(b) * max(b) for b in batches)
    return sum(max(b) - n for b in batches for n in b) / slots
