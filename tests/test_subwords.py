"""Byte-pair encoding (chapter 6, section 4): the learner against a from-scratch recount, encoding against replaying
every merge in order, and the exact way back from subwords to text, property-tested."""
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.data import (BPE, LONGEST_LEARNED, SPACE, SubwordTokenizer, Tokenizer, Vocab, initial_symbols,
                                  learn_bpe, merge_by_rank, merge_pair, offline_corpus, pre_tokens, tokenizer_from_dict)


def naive_learn(word_counts: dict, n_merges: int) -> list:
    """BPE as the textbook states it: count every pair again before every merge."""
    words = {w: initial_symbols(w) for w in word_counts}
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for w, symbols in words.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += word_counts[w]
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        words = {w: merge_pair(s, best) for w, s in words.items()}
    return merges


def replay(word: str, merges) -> list[str]:
    """A pre-token encoded by applying every merge, in the order learned."""
    symbols = initial_symbols(word)
    for pair in merges:
        symbols = merge_pair(symbols, pair)
    return symbols


@pytest.fixture(scope="module")
def corpus():
    de, en = Tokenizer("de"), Tokenizer("en")
    pairs = offline_corpus(400, seed=1)
    counts = Counter(w for a, b in pairs for w in [*pre_tokens(de, a), *pre_tokens(en, b)])
    rng = random.Random(0)  # and made-up words, so that rare pairs and ties occur
    for _ in range(300):
        counts[rng.choice(["", SPACE]) + "".join(rng.choice("abcdeäöß") for _ in range(rng.randint(1, 9)))] += 1
    return counts


@pytest.fixture(scope="module")
def bpe(corpus):
    return BPE.learn(corpus, 300)


def test_incremental_learner_equals_recounting_every_pair_before_every_merge(corpus):
    assert learn_bpe(corpus, 300) == naive_learn(corpus, 300)


def test_merges_do_not_depend_on_the_order_of_the_counts(corpus):
    items = list(corpus.items())
    random.Random(3).shuffle(items)
    assert learn_bpe(dict(items), 200) == learn_bpe(corpus, 200)


def test_learning_stops_when_no_pair_is_left():
    assert learn_bpe({"ab": 2}, 10) == [("a", "b")]
    assert learn_bpe({"a": 5}, 10) == []


def test_encoding_equals_replaying_every_merge_in_order(corpus, bpe):
    rng = random.Random(1)
    unseen = ["".join(rng.choice("abcdeäößxyz ") for _ in range(rng.randint(1, 12))) for _ in range(300)]
    for word in [*corpus, *unseen, *(SPACE + w for w in unseen)]:
        assert bpe.encode_word(word) == replay(word, bpe.merges), word



def priority_merge(word: str, rank: dict) -> list[str]:
    """BPE._merge's loop without dropout: while a pair of symbols is a merge, join every occurrence of the one of
    lowest rank."""
    symbols = initial_symbols(word)
    while pairs := [p for p in zip(symbols, symbols[1:]) if p in rank]:
        symbols = merge_pair(symbols, min(pairs, key=rank.__getitem__))
    return symbols


PIECES = st.sampled_from(["a", "b", "c", "▁a", "aa", "ab", "ba", "aab", "bb"])
PRE_TOKENS = st.builds(lambda space, text: space + text, st.sampled_from(["", SPACE]),
                       st.text(alphabet="abc", min_size=1, max_size=80))


@settings(max_examples=500, deadline=None)
@given(word=PRE_TOKENS, merges=st.lists(st.tuples(PIECES, PIECES), max_size=12))
def test_the_heap_encoder_for_long_words_equals_bpes_own_loop_for_any_ranks(word, merges):
    """merge_by_rank (pre-tokens over 64 characters) cuts as BPE._merge's loop does, on words full of repeats and
    overlaps (aaa, abab) and ranks in any order, even ones learn_bpe could not have learned ("ba" + "a" ranked before
    "b" + "a", which check_bpe refuses in a BPE)."""
    rank = {}
    for i, pair in enumerate(merges):
        rank.setdefault(pair, i)
    assert merge_by_rank(initial_symbols(word), rank) == priority_merge(word, rank)


@settings(max_examples=200, deadline=None)
@given(counts=st.dictionaries(PRE_TOKENS, st.integers(1, 5), min_size=1, max_size=8), n_merges=st.integers(0, 15),
       word=PRE_TOKENS)
def test_with_learned_merges_the_heap_encoder_equals_replaying_them(counts, n_merges, word):
    bpe = BPE.learn(counts, n_merges)
    assert merge_by_rank(initial_symbols(word), bpe.rank) == replay(word, bpe.merges) == bpe._merge(word)


def test_long_pre_tokens_encode_like_short_ones_and_teach_no_merge(bpe):
    rng = random.Random(5)
    for n in (65, 300, 5000):
        word = SPACE + "".join(rng.choice("abcdeäöß") for _ in range(n))
        assert bpe.encode_word(word) == replay(word, bpe.merges)  # the heap path, past 64 characters
    assert bpe.encode_word("a" * 3000) == replay("a" * 3000, bpe.merges)
    long = "ab" * LONGEST_LEARNED
    assert learn_bpe({"▁ab": 2, long: 1000}, 5) == learn_bpe({"▁ab": 2}, 5) == [("▁a", "b")]

def test_every_training_pre_token_is_fewer_symbols_than_characters_or_equal(corpus, bpe):
    assert all(len(bpe.encode_word(w)) <= len(initial_symbols(w)) for w in corpus)
    assert sum(len(bpe.encode_word(w)) * c for w, c in corpus.items()) < sum(len(w) * c for w, c in corpus.items())


def test_vocabulary_holds_every_character_alone_and_with_space_and_every_merge(bpe):
    vocab = bpe.vocab()
    assert vocab.itos[:4] == list(Vocab.SPECIALS)
    for c in bpe.alphabet:
        assert c in vocab.stoi and SPACE + c in vocab.stoi
    assert all(a + b in vocab.stoi for a, b in bpe.merges)
    assert len(vocab) == 4 + len(set(bpe.symbols))


TEXT_CHARS = "abcdefghijklmnopqrstuvwxyzäöüß .,!?'-()0123"


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=TEXT_CHARS, max_size=60))
def test_any_text_over_the_training_characters_decodes_to_itself_without_unk(text):
    tok = _text_tokenizer()
    vocab = tok.bpe.vocab()
    ids = vocab.encode(tok(text))
    assert vocab.unk_idx not in ids
    assert tok.decode(vocab.decode(ids)) == text


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="ABCDEFGHÄÖÜabc  .", max_size=40))
def test_uppercase_text_decodes_to_its_lowercase(text):
    assert _text_tokenizer().decode(_text_tokenizer()(text)) == text.lower()


_TOKENIZER = []


def _text_tokenizer() -> SubwordTokenizer:
    """A tokenizer whose BPE saw every character of TEXT_CHARS (a few sentences of them), built once."""
    if not _TOKENIZER:
        en = Tokenizer("en")
        rng = random.Random(0)
        sentences = ["".join(rng.choice(TEXT_CHARS) for _ in range(50)) for _ in range(200)]
        counts = Counter(w for s in sentences for w in pre_tokens(en, s))
        _TOKENIZER.append(SubwordTokenizer("en", BPE.learn(counts, 150)))
    return _TOKENIZER[0]


def test_a_character_never_seen_is_unk_and_a_literal_space_mark_never_becomes_a_space():
    tok = _text_tokenizer()
    vocab = tok.bpe.vocab()
    ids = vocab.encode(tok("a € b"))
    assert ids.count(vocab.unk_idx) == 1
    pieces = tok(f"a{SPACE}b c")
    assert pieces.count(Vocab.UNK) == 1
    assert tok.decode(pieces) == "ab c"  # the mark is unknown and left out; it does not become a space


def test_detokenize_trims_and_capitalizes_like_the_word_tokenizer():
    tok = _text_tokenizer()
    assert tok.detokenize(tok("a dog. ")) == "A dog."
    assert Tokenizer("en").detokenize(["a", "dog", "."]) == "A dog."


def test_tokenizers_come_back_from_to_dict_and_bpe_from_its_file(tmp_path, bpe):
    sub = SubwordTokenizer("de", bpe, lower=False)
    again = tokenizer_from_dict(sub.to_dict())
    assert isinstance(again, SubwordTokenizer) and again.lower is False and again.lang == "de"
    assert again.bpe.merges == bpe.merges and again.bpe.alphabet == bpe.alphabet
    words = tokenizer_from_dict(Tokenizer("en").to_dict())
    assert type(words) is Tokenizer and words("A dog.") == ["a", "dog", "."]
    bpe.save(tmp_path / "bpe.json")
    loaded = BPE.load(tmp_path / "bpe.json")
    text = "ein kleiner hund läuft im schnee."
    assert SubwordTokenizer("de", loaded)(text) == SubwordTokenizer("de", bpe)(text)


# BPE-dropout (chapter 6): merges left out at random while encoding, for training only


def dropout_replay(word: str, bpe: BPE, kept) -> list[str]:
    """BPE-dropout as its definition states it: at each step, of the merges that apply, those `kept(pair)` says
    survive; the earliest learned of them is applied; none surviving ends the word."""
    symbols = initial_symbols(word)
    while True:
        applicable = [p for p in zip(symbols, symbols[1:]) if p in bpe.rank]
        surviving = [p for p in applicable if kept(p)]
        if not surviving:
            return symbols
        symbols = merge_pair(symbols, min(surviving, key=lambda p: bpe.rank[p]))


def test_bpe_dropout_draws_one_number_per_applicable_merge_per_step_like_its_definition(corpus, bpe):
    words = sorted(corpus)[:200]
    for p in (0.1, 0.5):
        ours, theirs = random.Random(3), random.Random(3)
        for w in words:
            assert bpe.encode_word(w, p, ours) == dropout_replay(w, bpe, lambda _: not theirs.random() < p), w


def test_no_dropout_is_plain_encoding_and_dropout_never_touches_the_cache(corpus, bpe):
    words = sorted(corpus)[:100]
    plain = {w: list(bpe.encode_word(w)) for w in words}
    rng = random.Random(0)
    for w in words:
        bpe.encode_word(w, 0.5, rng)
    assert {w: bpe.encode_word(w) for w in words} == plain
    assert {w: bpe.encode_word(w, 0.0, random.Random(1)) for w in words} == plain


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=TEXT_CHARS, max_size=60), st.sampled_from([0.05, 0.1, 0.5, 0.9]), st.integers(0, 10**6))
def test_any_cut_by_bpe_dropout_is_in_the_vocabulary_and_decodes_to_the_text(text, p, seed):
    tok = _text_tokenizer()
    pieces = tok(text, p, random.Random(seed))
    assert all(s in tok.bpe.vocab().stoi for s in pieces)
    assert tok.decode(pieces) == text


def test_bpe_dropout_cuts_finer_the_higher_p_and_a_seed_gives_the_same_cut(bpe):
    tok = SubwordTokenizer("de", bpe)
    text = " ".join(de for de, _ in offline_corpus(100, seed=9))
    lengths = [len(tok(text, p, random.Random(0))) for p in (0.0, 0.1, 0.5, 0.99)]
    assert lengths == sorted(lengths) and lengths[0] < lengths[1] < lengths[2] < lengths[3]
    initial = sum(len(initial_symbols(w)) for w in pre_tokens(tok, text))
    assert lengths[3] > 0.95 * initial  # nearly every merge left out: nearly the characters BPE starts from
    assert tok(text, 0.1, random.Random(5)) == tok(text, 0.1, random.Random(5)) != tok(text, 0.1, random.Random(6))


def test_bpe_dropout_needs_a_probability_and_subword_tokenizers():
    from transformer_lib.data import encode_pairs

    tok = _text_tokenizer()
    vocab = tok.bpe.vocab()
    with pytest.raises(ValueError, match="dropout must be a probability"):
        tok("a b", 1.0)
    with pytest.raises(ValueError, match="src_tok is a Tokenizer"):
        encode_pairs([("a b", "a b")], Tokenizer("de"), tok, vocab, vocab, dropout=0.1)
    assert encode_pairs([("ab", "ab")], Tokenizer("de"), Tokenizer("en"), vocab, vocab) == \
        [(vocab.encode(["ab"]), vocab.encode(["ab"], add_bos_eos=True))]


def test_the_long_input_benchmark_runs_and_records(tmp_path):
    import json

    from benchmark_module import load_benchmark  # tests/ is on the path

    module = load_benchmark("long_input")
    assert module.main(["--repeats", "1", "--record", str(tmp_path / "r.json")]) == 0
    record = json.loads((tmp_path / "r.json").read_text())
    assert len(record["results"]) == 3 and all(r["median_s"] >= 0 for r in record["results"].values())
