"""transformer_lib.data (chapter 6): loading Multi30k, the offline corpus, tokenizing, vocabulary, batching.

Loader tests run on small files written here, so they need neither network nor Multi30k; one test reads
the real files when ../shared/data/multi30k is beside the checkout (as in CI).
"""
import gzip
import hashlib
from pathlib import Path

import pytest

import transformer_lib.data as D
import transformer_lib.multi30k as M
from transformer_lib.data import (
    DataUnavailable, Tokenizer, Vocab, bucket_batches, detokenize, encode_pairs, load_multi30k, load_translation_data,
    offline_corpus, padding_fraction,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


@pytest.fixture
def tiny_multi30k(tmp_path, monkeypatch):
    """A 3-pair 'val' split in tmp_path/data, registered with its real sha256 sums; no env var, cache in tmp."""
    folder = tmp_path / "data"
    folder.mkdir()
    files = []
    for name, lines in (("val.de.gz", ["Ein Hund.", "Eine Katze.", "Zwei Kinder."]),
                        ("val.en.gz", ["A dog.", "A cat.", "Two children."])):
        data = gzip.compress(("\n".join(lines) + "\n").encode())
        (folder / name).write_bytes(data)
        files.append((name, hashlib.sha256(data).hexdigest()))
    monkeypatch.setitem(M.MULTI30K_FILES, "val", tuple(files))
    monkeypatch.delenv(M.MULTI30K_ENV, raising=False)
    monkeypatch.setattr(M._pooch(), "os_cache", lambda project: tmp_path / "cache")  # the user cache, in tmp
    return folder


def test_loads_pairs_from_root(tiny_multi30k):
    assert load_multi30k("val", root=tiny_multi30k, download=False) == [
        ("Ein Hund.", "A dog."), ("Eine Katze.", "A cat."), ("Zwei Kinder.", "Two children.")]


def test_environment_variable_is_the_second_place_looked(tiny_multi30k, monkeypatch):
    monkeypatch.setenv(M.MULTI30K_ENV, str(tiny_multi30k))
    assert len(load_multi30k("val", download=False)) == 3


def test_checksum_mismatch_is_reported_not_used(tiny_multi30k):
    (tiny_multi30k / "val.en.gz").write_bytes(gzip.compress(b"A dog.\nA cat.\nTruncated"))
    with pytest.raises(DataUnavailable, match=r"val.en.gz is corrupt or not the published file \(sha256 mismatch\)"):
        load_multi30k("val", root=tiny_multi30k, download=False)


def test_missing_files_without_download_say_where_to_put_them(tmp_path, tiny_multi30k):
    with pytest.raises(DataUnavailable, match=r"val.de.gz not found in .*empty.*put the Multi30k files in one of them"):
        load_multi30k("val", root=tmp_path / "empty", download=False)


def test_failed_download_says_what_to_do(tmp_path, tiny_multi30k, monkeypatch):
    def refuse(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(M._pooch(), "retrieve", refuse)
    with pytest.raises(DataUnavailable, match=r"could not download .*val.de.gz \(ConnectionError: no network\).*by hand"):
        load_multi30k("val", root=tmp_path / "empty")


def test_a_download_without_network_says_so_in_one_line(tmp_path, tiny_multi30k, monkeypatch, capfd):
    """pooch for real, through a proxy that refuses: no "Downloading data from" notice, and no chain of requests'
    pools and resolver errors in the message."""
    monkeypatch.setattr(M, "multi30k_dirs", lambda root=None: [tmp_path / "empty"])
    for key in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(key, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with pytest.raises(DataUnavailable) as raised:
        load_multi30k("val")
    message = str(raised.value)
    assert "Error: the server could not be reached; is there a network?). Download the Multi30k" in message, message
    assert "Max retries" not in message and "\n" not in message
    printed = capfd.readouterr()
    assert "Downloading" not in printed.out + printed.err


def test_download_goes_through_pooch_with_the_sha256(tmp_path, tiny_multi30k, monkeypatch):
    calls = []

    def fake_retrieve(url, known_hash, fname, path, downloader):
        calls.append((url, known_hash))
        Path(path).mkdir(parents=True, exist_ok=True)
        target = Path(path) / fname
        target.write_bytes((tiny_multi30k / fname).read_bytes())
        return str(target)

    monkeypatch.setattr(M._pooch(), "retrieve", fake_retrieve)
    assert len(load_multi30k("val", root=tmp_path / "empty")) == 3
    assert calls[0][0] == M.MULTI30K_URL + "val.de.gz"
    assert calls[0][1] == "sha256:" + M.MULTI30K_FILES["val"][0][1]


def test_unknown_split_is_an_error():
    with pytest.raises(ValueError, match="split must be one of train, val, test2016"):
        load_multi30k("test2017")


@pytest.mark.skipif(not SHARED.is_dir(), reason="the Multi30k copy beside the checkout is not present")
def test_real_multi30k_sizes_and_checksums():
    sizes = {split: len(load_multi30k(split, root=SHARED, download=False)) for split in ("train", "val", "test2016")}
    assert sizes == {"train": 29000, "val": 1014, "test2016": 1000}


def test_fallback_to_the_offline_corpus_says_so(tmp_path, tiny_multi30k):
    pairs, source = load_translation_data("val", root=tmp_path / "empty", download=False, offline_size=500)
    assert source.startswith("OFFLINE CORPUS, NOT Multi30k") and len(pairs) == 50
    assert load_translation_data("val", root=tiny_multi30k, download=False)[1] == "Multi30k val"


def test_offline_corpus_is_deterministic_and_grammatical():
    pairs = offline_corpus(300, seed=4)
    assert pairs == offline_corpus(300, seed=4) and pairs != offline_corpus(300, seed=5)
    genders = {noun: gender for noun, _, gender in M._SUBJECTS}
    endings = {"m": "er", "f": "e", "n": "es", "p": "e"}
    for de, en in pairs:
        assert de.endswith(".") and en.endswith(".")
        words = de.split()
        assert words[0] == {"m": "Ein", "f": "Eine", "n": "Ein", "p": "Zwei"}[genders[words[2] if words[1].islower() else words[1]]]
        if words[1].islower():  # an adjective agrees with the noun's gender and number
            assert words[1].endswith(endings[genders[words[2]]]), de
        assert en.split()[0] == ("Two" if words[0] == "Zwei" else en.split()[0]) and en.split()[0] in ("A", "An", "Two")


def test_tokenizer_splits_punctuation_and_lowercases():
    assert Tokenizer("de")("Ein Hund, der rennt.") == ["ein", "hund", ",", "der", "rennt", "."]
    assert Tokenizer("en", lower=False)("A Dog's ball.") == ["A", "Dog", "'s", "ball", "."]


def test_vocab_specials_min_freq_and_round_trip(tmp_path):
    vocab = Vocab.build([["a", "b", "a"], ["a", "c", "b"], ["d"]], min_freq=2)
    assert vocab.itos == ["<unk>", "<pad>", "<s>", "</s>", "a", "b"]
    assert (vocab.unk_idx, vocab.pad_idx, vocab.bos_idx, vocab.eos_idx) == (0, 1, 2, 3)
    ids = vocab.encode(["a", "c", "b"], add_bos_eos=True)
    assert ids == [2, 4, 0, 5, 3]
    assert vocab.decode(ids + [4, 4]) == ["a", "<unk>", "b"]  # stops at </s>
    vocab.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json").itos == vocab.itos
    assert [p.name for p in tmp_path.iterdir()] == ["v.json"]  # no temporary file left behind


def test_vocab_rejects_malformed_token_lists():
    with pytest.raises(ValueError, match="must start with the specials"):
        Vocab(["a", "<unk>", "<pad>", "<s>", "</s>"])
    with pytest.raises(ValueError, match="unique"):
        Vocab(["<unk>", "<pad>", "<s>", "</s>", "a", "a"])


def test_bucketed_batches_keep_every_sentence_whole_with_little_padding():
    pairs = offline_corpus(2000, seed=0)
    de, en = Tokenizer("de"), Tokenizer("en")
    src_vocab = Vocab.build([de(a) for a, _ in pairs], min_freq=1)
    tgt_vocab = Vocab.build([en(b) for _, b in pairs], min_freq=1)
    examples = encode_pairs(pairs, de, en, src_vocab, tgt_vocab)
    batches = bucket_batches(examples, max_tokens=300, pad_idx=tgt_vocab.pad_idx, seed=1)
    seen = sorted((tuple(s[s != 1].tolist()), tuple(t[t != 1].tolist())) for b in batches for s, t in zip(b.src, b.tgt))
    assert seen == sorted((tuple(s), tuple(t)) for s, t in examples)  # each example exactly once, untruncated
    for b in batches:
        assert b.src.numel() <= 300 and b.tgt.numel() <= 300
    assert padding_fraction(batches) < 0.10


def test_a_sentence_longer_than_the_budget_gets_its_own_batch():
    examples = [([5] * 3, [2, 6, 3]), ([5] * 40, [2] + [6] * 50 + [3]), ([7] * 2, [2, 8, 3])]
    batches = bucket_batches(examples, max_tokens=20, pad_idx=1, shuffle=False)
    sizes = sorted(b.tgt.size(1) for b in batches)
    assert sizes[-1] == 52 and sum(b.src.size(0) for b in batches) == 3
    with pytest.raises(ValueError, match="max_tokens must be a positive int"):
        bucket_batches(examples, max_tokens=0, pad_idx=1)


def test_detokenize_glues_punctuation_hyphens_and_clitics():
    assert detokenize(["a", "dog", "'s", "t", "-", "shirt", "(", "red", ")", "is", "n't", "wet", ",", "ok", "."]) == \
        "A dog's t-shirt (red) isn't wet, ok."
    assert detokenize(["<s>", "two", "men", "</s>"]) == "Two men"


def test_vocab_files_with_tokens_that_are_not_strings_are_refused_naming_the_file(tmp_path):
    for tokens in ('["<unk>", "<pad>", "<s>", "</s>", 5]', '["<unk>", "<pad>", "<s>", "</s>", null]'):
        with pytest.raises(ValueError, match="^text is not a Vocab written by Vocab.to_json .*list of strings"):
            Vocab.from_json(f'{{"tokens": {tokens}}}')
        (tmp_path / "vocab.json").write_text(f'{{"tokens": {tokens}}}')
        with pytest.raises(ValueError, match=f"^{tmp_path / 'vocab.json'} is not a Vocab"):
            Vocab.load(tmp_path / "vocab.json")
    with pytest.raises(TypeError, match="^tokens must be a list of strings"):
        Vocab([*Vocab.SPECIALS, 5])


def test_subword_tokenizers_refuse_a_corpus_with_no_words_to_learn_from():
    from transformer_lib.data import subword_tokenizers

    for pairs in ([], [("", "")], iter([])):
        with pytest.raises(ValueError, match="^pairs hold no words to learn merges from"):
            subword_tokenizers(pairs, 10)
    with pytest.raises(TypeError, match=r"^pairs must be \(German, English\) sentence pairs"):
        subword_tokenizers(["Ein Hund.", "A dog."], 10)
