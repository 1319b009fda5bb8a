# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 6's exercises (notebooks/06_data.ipynb)."""

from __future__ import annotations

from collections import Counter

from transformer_lib.exercises.core import Wrong, _exercise, _trying, _unpredictable

_SENTENCES = (("a", "dog", "runs", "."), ("a", "cat", "runs", "."), ("the", "dog", "sits", "."), ("a", "man", "."),
              ("two", "dogs", "run", "."), ("the", "cat", "sits", "."), ("a", "man", "runs", "."))  # never changed
_WORDS = {"▁low": 5, "▁lower": 2, "▁newest": 6, "▁widest": 3, "▁banana": 4, "aaa": 2, "▁ban": 1}


@_exercise("6.1", "build the vocabulary")
def _(build_vocab):
    import random

    from transformer_lib.data import Vocab
    counts = Counter(t for s in _SENTENCES for t in s)
    for min_freq in (2, 1, 3):
        want = Vocab.build(_SENTENCES, min_freq).itos
        got = list(build_vocab([list(s) for s in _SENTENCES], min_freq))
        if got[:4] != want[:4]:
            raise Wrong(f"the four specials come first, in this order: {want[:4]} (ids 0 to 3), got {got[:4]}")
        missing = [t for t in want if t not in got]
        if missing and all(counts[t] == min_freq for t in missing):
            raise Wrong(f"a token seen exactly min_freq={min_freq} times is kept: {missing} are missing")
        if sorted(got) != sorted(want):
            raise Wrong(f"with min_freq={min_freq} expected the tokens {want}, got {got}")
        # the same sentences in other orders: the prompt asks that shuffling them cannot change any id
        orders = [list(range(len(_SENTENCES)))[::-1]]
        orders += [random.Random(seed).sample(range(len(_SENTENCES)), len(_SENTENCES)) for seed in range(4)]
        for order in orders:
            shuffled = list(build_vocab([list(_SENTENCES[i]) for i in order], min_freq))
            if shuffled != got:
                moved = next((t for t, u in zip(got, shuffled) if t != u and t in shuffled), None)
                change = (f"{moved!r} has id {got.index(moved)} in the given order and id {shuffled.index(moved)} with "
                          f"the sentences in the order {order}" if moved is not None else
                          f"the given order gives {got[4:]}, the order {order} gives {shuffled[4:]}")
                raise Wrong(f"shuffling the sentences changed the ids: with min_freq={min_freq}, {change}; break ties "
                            "by the token itself, never by where it first appears (Vocab.build: most frequent first, "
                            "ties in alphabetical order)")
        if got != want:
            raise Wrong(f"with min_freq={min_freq} the right tokens, and the same ids in every order of the sentences, "
                        f"but not Vocab.build's: most frequent first, ties in alphabetical order; expected {want[4:]}, "
                        f"got {got[4:]}")
    draw = _unpredictable()  # and sentences drawn afresh, which no answer can know
    sentences = [[draw.choice("abcdefgh") * draw.randint(1, 2) for _ in range(draw.randint(1, 8))]
                 for _ in range(draw.randint(1, 12))]
    min_freq = draw.randint(1, 3)
    want, got = Vocab.build(sentences, min_freq).itos, list(build_vocab([list(s) for s in sentences], min_freq))
    if got != want:
        raise Wrong(f"for the sentences {sentences} with min_freq={min_freq} expected {want}, got {got}")
    return "It equals Vocab.build: the same ids for the same tokens, whatever order the sentences come in (5 tried)."


@_exercise("6.2", "count the pairs")
def _(count_pairs):
    from transformer_lib.data import initial_symbols
    want = Counter()
    for word, n in _WORDS.items():
        symbols = initial_symbols(word)
        for pair in zip(symbols, symbols[1:]):
            want[pair] += n
    got = Counter(count_pairs(dict(_WORDS)))
    if got == want:
        draw = _unpredictable()  # then pre-tokens drawn afresh, which no answer can know
        drawn = {"▁" * (draw.random() < 0.7) + "".join(draw.choice("abn") for _ in range(draw.randint(1, 7))):
                 draw.randint(1, 9) for _ in range(draw.randint(1, 6))}
        drawn_want = Counter()
        for word, n in drawn.items():
            symbols = initial_symbols(word)
            for pair in zip(symbols, symbols[1:]):
                drawn_want[pair] += n
        _trying(f"count_pairs({drawn})")
        drawn_got = Counter(count_pairs(dict(drawn)))
        if +drawn_got != +drawn_want:
            raise Wrong(f"for the pre-tokens {drawn} the pairs are {dict(drawn_want)}, got {dict(drawn_got)}: "
                        "count every adjacent pair of initial_symbols, each pre-token as often as it occurs")
        return f"{len(want)} pairs; the most frequent, {max(want, key=want.get)}, is the first merge BPE learns."
    once_per_token, once_per_place = Counter(), Counter()  # what two likely slips count
    for word, n in _WORDS.items():
        symbols = initial_symbols(word)
        once_per_token.update(zip(symbols, symbols[1:]))
        once_per_place.update({pair: n for pair in set(zip(symbols, symbols[1:]))})
    for pair in sorted(want, key=lambda p: (-want[p], p)):
        if got[pair] != want[pair]:
            holders = {w: n for w, n in _WORDS.items() if pair in zip(initial_symbols(w), initial_symbols(w)[1:])}
            slip = ("this looks like each pre-token counted once: weigh each by how often it occurs (its count in "
                    "the dict)" if got == once_per_token else "this looks like a pair counted once per pre-token: "
                    "a pair that occurs twice in one pre-token counts twice" if got == once_per_place else
                    "each pre-token counted as often as it occurs, every place in it counted")
            raise Wrong(f"the pair {pair} occurs {want[pair]} times (in {holders}), got {got[pair]}: {slip}")
    extra = next(p for p in got if got[p] != want[p])
    raise Wrong(f"{extra} is not an adjacent pair of initial_symbols of any pre-token (the first symbol keeps its ▁)")


def _replay(word: str, merges: list[tuple[str, str]]) -> list[str]:
    from transformer_lib.data import initial_symbols, merge_pair

    symbols = initial_symbols(word)
    for pair in merges:
        symbols = merge_pair(symbols, pair)
    return symbols


# (pre-token, merges, what a tempting wrong encoder gives, the hint for it): cases the learned merges above miss
_TRAPS = [
    ("▁abc", [("b", "c"), ("▁a", "b")], ["▁ab", "c"],
     "the longest known piece first (as WordPiece cuts) is not BPE; ('b', 'c') was learned first, so 'b' is taken "
     "before ('▁a', 'b') can join it"),
    ("aaa", [("a", "a")], ["a", "aa"],
     "join a pair's occurrences from left to right: in 'aaa' the first two symbols merge and the last one stays"),
    ("aaaaa", [("a", "a"), ("aa", "a")], ["a", "aa", "aa"],
     "join a pair's occurrences from left to right, then the next merge"),
]


def _encodes_as_bpe(encode_word, bpe, word: str) -> None:
    want, got = bpe.encode_word(word), list(encode_word(word, list(bpe.merges)))
    if got != want:
        raise Wrong(f"for the pre-token {word!r} BPE gives {want}, got {got}: replay the merges in the order they "
                    "were learned, each joining every occurrence of its pair")


@_exercise("6.3", "encode with the merges")
def _(encode_word):
    from transformer_lib.data import BPE
    bpe = BPE.learn(dict(_WORDS), 12)
    for word in ("▁lowest", "▁banana", "▁bananas", "aaaa", "▁newer", "▁owl", "▁wide", "▁nab"):
        _encodes_as_bpe(encode_word, bpe, word)
    for word, merges, wrong, hint in _TRAPS:  # before the drawn pre-tokens, so that a slip they catch is named
        want, got = _replay(word, merges), list(encode_word(word, [tuple(m) for m in merges]))
        if got != want:
            hint = hint if got == wrong else "replay the merges in the order they were learned"
            raise Wrong(f"for the pre-token {word!r} and the merges {merges} BPE gives {want}, got {got}: {hint}")
    draw = _unpredictable()  # and pre-tokens drawn afresh from the letters the merges know
    for _ in range(3):
        _encodes_as_bpe(encode_word, bpe, "▁" * (draw.random() < 0.6) + "".join(draw.choice("lowernsidba")
                                                                               for _ in range(draw.randint(1, 9))))
    return f"It cuts as BPE.encode_word does with the {len(bpe.merges)} merges {bpe.merges[:3]}..."


@_exercise("6.4", "how much is padding")
def _(padding_share):
    draw = _unpredictable()  # and batches drawn afresh
    drawn = [[draw.randint(1, 60) for _ in range(draw.randint(1, 6))] for _ in range(draw.randint(1, 5))]
    for batches in ([[5, 5, 5]], [[3, 7], [10, 2, 4]], [[1], [8, 8, 8, 1]], drawn):
        slots = sum(len(b) * max(b) for b in batches)
        want = sum(max(b) - n for b in batches for n in b) / slots
        got = float(padding_share([list(b) for b in batches]))
        if abs(got - want) <= 1e-9:
            continue
        real = sum(sum(b) for b in batches)
        if real and abs(got - (slots - real) / real) <= 1e-9:
            raise Wrong(f"for batches of lengths {batches} divide the padding by all the slots ({slots}), not by the "
                        f"real tokens ({real})")
        longest = max(max(b) for b in batches)
        every = sum(len(b) for b in batches) * longest
        if abs(got - (every - real) / every) <= 1e-9:
            raise Wrong(f"for batches of lengths {batches}: each batch is padded to its own longest sequence, not to "
                        f"the longest of all ({longest})")
        slips = [(slots - real, "this looks like the number of padding slots: divide it by all the slots, "
                  f"{slots}"),
                 (1 - want, "this looks like the share of real tokens: the padding's share is what is left, 1 minus it"),
                 (sum((max(b) * len(b) - sum(b)) / (max(b) * len(b)) for b in batches) / len(batches),
                  "this looks like the mean of each batch's share: pool the slots of all batches first, so that a "
                  "big batch weighs more than a small one")]
        slip = next((why for value, why in slips if abs(got - value) <= 1e-9), None)
        raise Wrong(f"for batches of lengths {batches} the share of padding is {want:.4f}, got {got:.4f}"
                    + (f": {slip}" if slip else ""))
    return "Sorting by length before cutting batches is what brings this number down (section 5 measures it)."
