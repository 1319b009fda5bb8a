"""transformer_lib.translation: loading, the offline corpus, tokenizing, vocabulary, batching, decoding.

Loader tests run on small files written here, so they need neither network nor Multi30k; one test reads
the real files when ../shared/data/multi30k is beside the checkout (as in CI).
"""
import gzip
import hashlib
import itertools
from pathlib import Path

import pytest
import torch

import transformer_lib.translation as tr
from transformer_lib.attention import padding_mask, subsequent_mask
from transformer_lib.model import make_model
from transformer_lib.training import greedy_decode
from transformer_lib.translation import (
    DataUnavailable, DecoderCache, Tokenizer, Vocab, beam_search, bucket_batches, encode_pairs,
    greedy_decode_cached, load_checkpoint, load_multi30k, load_translation_data, offline_corpus, padding_fraction,
    save_checkpoint,
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
    monkeypatch.setitem(tr.MULTI30K_FILES, "val", tuple(files))
    monkeypatch.delenv(tr.MULTI30K_ENV, raising=False)
    monkeypatch.setattr(tr._pooch(), "os_cache", lambda project: tmp_path / "cache")  # the user cache, in tmp
    return folder


def test_loads_pairs_from_root(tiny_multi30k):
    assert load_multi30k("val", root=tiny_multi30k, download=False) == [
        ("Ein Hund.", "A dog."), ("Eine Katze.", "A cat."), ("Zwei Kinder.", "Two children.")]


def test_environment_variable_is_the_second_place_looked(tiny_multi30k, monkeypatch):
    monkeypatch.setenv(tr.MULTI30K_ENV, str(tiny_multi30k))
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

    monkeypatch.setattr(tr._pooch(), "retrieve", refuse)
    with pytest.raises(DataUnavailable, match=r"could not download .*val.de.gz \(ConnectionError: no network\).*by hand"):
        load_multi30k("val", root=tmp_path / "empty")


def test_download_goes_through_pooch_with_the_sha256(tmp_path, tiny_multi30k, monkeypatch):
    calls = []

    def fake_retrieve(url, known_hash, fname, path, downloader):
        calls.append((url, known_hash))
        Path(path).mkdir(parents=True, exist_ok=True)
        target = Path(path) / fname
        target.write_bytes((tiny_multi30k / fname).read_bytes())
        return str(target)

    monkeypatch.setattr(tr._pooch(), "retrieve", fake_retrieve)
    assert len(load_multi30k("val", root=tmp_path / "empty")) == 3
    assert calls[0][0] == tr.MULTI30K_URL + "val.de.gz"
    assert calls[0][1] == "sha256:" + tr.MULTI30K_FILES["val"][0][1]


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
    genders = {noun: gender for noun, _, gender in tr._SUBJECTS}
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


# Decoding: the key/value cache and beam search, on small untrained models (correctness needs no training).

PAD, BOS, EOS = 1, 2, 3


def small_model(**options):
    torch.manual_seed(0)
    return make_model(13, 13, n_layers=2, d_model=32, d_ff=64, n_heads=4, pad_idx=PAD, **options).eval()


def sources():
    torch.manual_seed(1)
    src = torch.randint(4, 13, (3, 7))
    src[1, 5:] = PAD
    return src, padding_mask(src, PAD)


@pytest.mark.parametrize("options", [{}, {"norm_first": True}, {"learned_positions": True, "max_len": 64}])
def test_cached_decoding_gives_the_same_log_probs_and_tokens_as_recomputing(options):
    model = small_model(**options)
    src, src_mask = sources()
    plain = greedy_decode(model, src, src_mask, max_len=12, start_symbol=BOS)
    assert torch.equal(greedy_decode_cached(model, src, src_mask, max_len=12, start_symbol=BOS), plain)
    memory = model.encode(src, src_mask)
    cache = DecoderCache(model, memory, src_mask)
    for t in range(plain.size(1) - 1):
        cached = cache.step(plain[:, t : t + 1])
        full = model.generator(model.decode(memory, src_mask, plain[:, : t + 1], subsequent_mask(t + 1)))[:, -1]
        assert (cached - full).abs().max() < 1e-5


def test_beam_of_one_is_greedy():
    model = small_model()
    src, src_mask = sources()
    greedy = greedy_decode(model, src, src_mask, max_len=12, start_symbol=BOS)[:, 1:].tolist()
    expected = [row[: row.index(EOS) + 1] if EOS in row else row for row in greedy]
    assert beam_search(model, src, src_mask, 12, BOS, EOS, beam_size=1, length_penalty=0.0) == expected


def sequence_log_prob(model, memory, src_mask, seq):
    ys = torch.tensor([[BOS, *seq]])
    log_probs = model.generator(model.decode(memory, src_mask, ys[:, :-1], subsequent_mask(len(seq))))
    return log_probs[0, torch.arange(len(seq)), ys[0, 1:]].sum().item()


@pytest.mark.parametrize("options", [{}, {"norm_first": True}])
def test_a_wide_beam_finds_the_exhaustive_best(options):
    """With beam_size >= V^(L-1) nothing is pruned, so the beam must return the most probable sequence."""
    model = small_model(**options)
    src, src_mask = sources()
    src, src_mask = src[:1], src_mask[:1]
    memory = model.encode(src, src_mask)
    candidates = set()
    for seq in itertools.product(range(13), repeat=3):
        seq = list(seq)
        candidates.add(tuple(seq[: seq.index(EOS) + 1] if EOS in seq else seq))  # nothing follows </s>
    best = max(candidates, key=lambda s: sequence_log_prob(model, memory, src_mask, list(s)))
    assert beam_search(model, src, src_mask, 3, BOS, EOS, beam_size=169, length_penalty=0.0)[0] == list(best)


def test_beam_search_rejects_a_non_positive_beam():
    model = small_model()
    src, src_mask = sources()
    with pytest.raises(ValueError, match="beam_size must be a positive int"):
        beam_search(model, src, src_mask, 5, BOS, EOS, beam_size=0)


# Checkpoints: one safetensors file with config and vocabularies, written atomically, loaded without pickle.


def vocab_of(n):
    return Vocab([*Vocab.SPECIALS, *(f"w{i}" for i in range(n - 4))])


@pytest.mark.parametrize("options", [{}, {"share_embeddings": True, "norm_first": True}])
def test_checkpoint_round_trip_gives_the_same_model(tmp_path, options):
    torch.manual_seed(0)
    model = make_model(13, 13, n_layers=2, d_model=32, d_ff=64, n_heads=4, pad_idx=PAD, **options).eval()
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab_of(13), vocab_of(13), step=7, val_loss=1.5)
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]  # the temporary file was renamed
    loaded, src_vocab, tgt_vocab, info = load_checkpoint(path)
    src, src_mask = sources()
    tgt = torch.randint(4, 13, (3, 5))
    with torch.no_grad():
        assert torch.equal(model(src, tgt, src_mask), loaded(src, tgt, src_mask))
    assert info == {"step": 7, "val_loss": 1.5} and tgt_vocab.itos == vocab_of(13).itos
    assert loaded.config == model.config
    if options.get("share_embeddings"):
        assert loaded.generator.proj.weight is loaded.src_embed[0].embedding.weight


def test_truncated_checkpoint_is_reported_never_used(tmp_path):
    model = small_model()
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab_of(13), vocab_of(13))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="is not a readable checkpoint .*truncated or corrupt"):
        load_checkpoint(path)


def test_checkpoint_whose_vocabularies_do_not_match_its_config_is_rejected(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import save_model

    model = small_model()
    with pytest.raises(ValueError, match="tgt_vocab has 20 tokens, but the model was built for tgt_vocab=13"):
        save_checkpoint(tmp_path / "m.safetensors", model, vocab_of(13), vocab_of(20))
    assert not list(tmp_path.iterdir())
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab_of(13), vocab_of(13))
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    metadata.pop("sha256")  # a file put together by hand, with another vocabulary
    save_model(model, str(path), {**metadata, "tgt_vocab": vocab_of(20).to_json()})
    with pytest.raises(ValueError, match="do not match the config's src_vocab=13, tgt_vocab=13"):
        load_checkpoint(path)


def test_saving_a_model_without_config_is_an_error(tmp_path):
    model = small_model()
    model.config = None
    with pytest.raises(ValueError, match="model has no config"):
        save_checkpoint(tmp_path / "m.safetensors", model, vocab_of(13), vocab_of(13))
