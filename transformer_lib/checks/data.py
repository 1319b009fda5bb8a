# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 6's classes and functions (transformer_lib.data).

Splits, text, vocabularies, token lists, examples for batching, and BPE's merges and tokenizers.
"""
from __future__ import annotations

import functools

from transformer_lib.checks.core import check_int, check_probability, check_unicode

__all__ = [
    "check_split", "check_text", "check_vocab_tokens", "check_token_lists", "check_token_list", "check_symbols",
    "check_vocab_id", "check_vocab_ids",
    "check_examples", "check_word_counts", "check_bpe", "check_dropout_tokenizers", "check_tokenizer_dict",
    "blank_pipeline", "check_pairs", "check_words_to_learn",
]


@functools.cache
def blank_pipeline(lang: str):
    """Tokenizer's spaCy pipeline: spacy.blank(lang), made once a process and shared (making one takes a third of a
    second); a ValueError naming `lang` where spaCy has no such language."""
    import spacy

    try:
        return spacy.blank(lang)
    except (ImportError, TypeError) as err:  # spaCy raises ImportError for a language it does not have
        raise ValueError(f"lang={lang!r} is not a language spaCy knows; use a code such as 'de' or 'en' "
                         f"({type(err).__name__}: {err})") from None


def check_pairs(pairs) -> list:
    """subword_tokenizers' training pairs as a list, each a (German, English) pair."""
    pairs = list(pairs)
    if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
        raise TypeError("pairs must be (German, English) sentence pairs, the training split")
    return pairs


def check_words_to_learn(word_counts, n_pairs: int) -> None:
    """subword_tokenizers' counted pre-tokens: some, or BPE would learn nothing and cut every word to letters."""
    if not word_counts:
        raise ValueError(f"pairs hold no words to learn merges from ({n_pairs} pairs); pass the training pairs")


def check_split(split, splits) -> None:
    """load_multi30k's split: one of the splits it knows."""
    if split not in splits:
        raise ValueError(f"split must be one of {', '.join(splits)}, got {split!r}")


def check_text(text) -> None:
    """A tokenizer's input: one sentence as a str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (one sentence), got {type(text).__name__}")
    check_unicode("text", text)


def check_vocab_tokens(tokens, specials) -> None:
    """Vocab's token list: strings (a file's [5, null] refused), the specials first, no token twice."""
    if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
        raise TypeError(f"tokens must be a list of strings, got {str(tokens)[:60]!r}")
    if list(tokens[:len(specials)]) != list(specials):
        raise ValueError(f"tokens must start with the specials {specials}")
    if len(set(tokens)) != len(tokens):
        raise ValueError("tokens must be unique")


def check_token_lists(sentences, min_freq: int = 1) -> list:
    """Vocab.build's sentences (lists of token strings, not raw text) as a list, and its min_freq (a positive int)."""
    check_int("min_freq", min_freq)
    sentences = list(sentences)
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str) or not all(isinstance(t, str) for t in sentence):
            raise TypeError(f"sentences must be lists of token strings (tokenize first); sentence {i} is "
                            f"{type(sentence).__name__} {str(sentence)[:40]!r}")
    return sentences


def check_token_list(tokens) -> None:
    """Vocab.encode's tokens: a list of str, not the sentence itself."""
    if isinstance(tokens, str):
        raise TypeError("tokens must be a list of str, one per token (tokenize the sentence first), got a str")


def check_symbols(symbols) -> None:
    """merge_by_rank's symbols: a list of str (initial_symbols of a pre-token), not the pre-token itself."""
    if not isinstance(symbols, (list, tuple)) or not all(isinstance(s, str) for s in symbols):
        got = "a str" if isinstance(symbols, str) else type(symbols).__name__
        raise TypeError(f"symbols must be a list of str, one per character (initial_symbols(word)), got {got}")


def check_vocab_id(i: int, size: int) -> None:
    """Vocab.decode's ids: each in [0, size)."""
    if not 0 <= i < size:
        raise ValueError(f"ids must lie in [0, {size}), the vocabulary's size; got {i}")


def check_vocab_ids(ids: list, size: int) -> None:
    """Vocab.decode's ids (up to </s>): each in [0, size)."""
    for i in ids:
        check_vocab_id(i, size)


def check_examples(examples) -> None:
    """(source ids, target ids) examples to batch: some, each with a source and a target of <s>, words, </s>."""
    if not len(examples):
        raise ValueError("examples is empty: nothing to batch")
    for i, (src, tgt) in enumerate(examples):
        if len(src) == 0:
            raise ValueError(f"examples[{i}] has an empty source; drop empty sentences before batching")
        if len(tgt) < 2:
            raise ValueError(f"examples[{i}] has a target of {len(tgt)} ids; it needs <s>, the words and </s>")


def check_word_counts(word_counts) -> None:
    """learn_bpe's input: a mapping from pre-token (a non-empty str) to how often it occurs (an int >= 1)."""
    if not hasattr(word_counts, "items") or isinstance(word_counts, str):
        raise TypeError(f"word_counts must map each pre-token to its count (a dict or Counter), got "
                        f"{type(word_counts).__name__}")
    for word, count in word_counts.items():
        if not isinstance(word, str) or not word:
            raise ValueError(f"word_counts keys must be non-empty strings (pre-tokens), got {word!r}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"word_counts[{word!r}] must be a count >= 1, got {count!r}")


def check_bpe(merges, alphabet, space: str) -> None:
    """BPE's merges and alphabet: the alphabet a str of characters (without `space`), each merge a pair of symbols
    that the alphabet and the merges before it can make (a merge list from another tokenizer fails here)."""
    if not isinstance(alphabet, str):
        raise TypeError(f"alphabet must be a str of the characters seen in training, got {type(alphabet).__name__}")
    if space in alphabet:
        raise ValueError(f"alphabet must not hold {space!r}, the character that marks a following space")
    if isinstance(merges, (str, bytes)) or not hasattr(merges, "__iter__"):
        raise TypeError(f"merges must be a list of (left, right) symbol pairs, got {type(merges).__name__}")
    known = {*alphabet, space, *(space + c for c in alphabet)}
    for i, pair in enumerate(merges):
        if (isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2
                or not all(isinstance(s, str) and s for s in pair)):
            raise ValueError(f"merges[{i}] must be a pair of non-empty symbol strings, got {pair!r}")
        missing = [s for s in pair if s not in known]
        if missing:
            raise ValueError(f"merges[{i}] {tuple(pair)!r} joins {missing[0]!r}, a symbol that neither the alphabet "
                             "nor an earlier merge makes: these merges were not learned with this alphabet")
        known.add(pair[0] + pair[1])


def check_dropout_tokenizers(dropout, src_tok, tgt_tok, subword_type: type) -> None:
    """encode_pairs' BPE-dropout: a probability, and only for subword tokenizers (whole words have no merges)."""
    check_probability("dropout", dropout)
    for name, tok in (("src_tok", src_tok), ("tgt_tok", tgt_tok)):
        if dropout and not isinstance(tok, subword_type):
            raise ValueError(f"dropout={dropout} cuts subwords, but {name} is a {type(tok).__name__}, which has no "
                             "merges to leave out; give SubwordTokenizers or dropout=0")


def check_tokenizer_dict(values) -> None:
    """tokenizer_from_dict's input: what Tokenizer.to_dict or SubwordTokenizer.to_dict wrote."""
    if not isinstance(values, dict):
        raise TypeError(f"values must be a dict written by a tokenizer's to_dict, got {type(values).__name__}")
    kind = values.get("kind")
    if kind not in ("words", "bpe"):
        raise ValueError(f"values['kind'] must be 'words' or 'bpe', got {kind!r}")
    needed = ("lang", "lower") + (("merges", "alphabet") if kind == "bpe" else ())
    missing = [k for k in needed if k not in values]
    if missing:
        raise ValueError(f"values has no {missing[0]!r}: it was not written by a tokenizer's to_dict")
    unknown = sorted(set(values) - {"kind", *needed})
    if unknown:
        raise ValueError(f"values has {unknown}, which a {kind!r} tokenizer does not have: it was not written by "
                         "its to_dict")
    if not isinstance(values["lower"], bool):
        raise ValueError(f"values['lower'] must be true or false, got {values['lower']!r}")
