"""transformer_lib.translation (chapter 8), checkpoints: one safetensors file with config and vocabularies, written
atomically, loaded without pickle. Training, BLEU, translate and the shipped model: test_translation_training.py.
"""
import pytest
import torch

from transformer_lib.data import Vocab
from transformer_lib.translation import load_checkpoint, save_checkpoint

from test_decoding import PAD, small_model, sources  # noqa: E402 - the same small model and batch


def vocab_of(n):
    return Vocab([*Vocab.SPECIALS, *(f"w{i}" for i in range(n - 4))])


@pytest.mark.parametrize("options", [{}, {"share_embeddings": True, "norm_first": True}])
def test_checkpoint_round_trip_gives_the_same_model(tmp_path, options):
    model = small_model(**options)
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
    from transformer_lib.files import write_safetensors

    model = small_model()
    with pytest.raises(ValueError, match="tgt_vocab has 20 tokens, but the model was built for tgt_vocab=13"):
        save_checkpoint(tmp_path / "m.safetensors", model, vocab_of(13), vocab_of(20))
    assert not list(tmp_path.iterdir())
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab_of(13), vocab_of(13))
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    metadata.pop("sha256")  # a file put together by hand, and signed, with another vocabulary
    write_safetensors(path, lambda tmp, meta: save_model(model, str(tmp), meta),
                      {**metadata, "tgt_vocab": vocab_of(20).to_json()})
    with pytest.raises(ValueError, match="do not match the config's src_vocab=13, tgt_vocab=13"):
        load_checkpoint(path)


def test_saving_a_model_without_config_is_an_error(tmp_path):
    model = small_model()
    model.config = None
    with pytest.raises(ValueError, match="model has no config"):
        save_checkpoint(tmp_path / "m.safetensors", model, vocab_of(13), vocab_of(13))


@pytest.mark.parametrize("field, value, error, message", [
    ("seed", -1, ValueError, "seed must be an int >= 0, got -1"),
    ("seed", 1.5, TypeError, "seed must be an int, got float 1.5"),
    ("seed", 2**32, ValueError, r"seed must be in \[0, 2\*\*32\)"),
    ("factor", float("inf"), ValueError, "factor must be finite, got inf"),
    ("factor", "1.0", TypeError, "factor must be a number, got str '1.0'"),
    ("length_penalty", float("nan"), ValueError, "length_penalty must be finite"),
    ("clip_norm", "1", TypeError, "clip_norm must be a number, got str"),
    ("shared_vocab", 1, TypeError, "shared_vocab must be True or False, got int 1"),
    ("norm_first", "yes", TypeError, "norm_first must be True or False"),
    ("epochs", "3", TypeError, "epochs must be an int, got str '3'"),
])
def test_recipe_refuses_bad_values_at_construction(tmp_path, field, value, error, message):
    from transformer_lib.translation import Recipe

    with pytest.raises(error, match=message):
        Recipe(**{field: value})
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_empty_and_blank_input_translate_to_empty_lines():
    """The shipped subword model given nothing would still write a fluent sentence (it once answered "" with
    "A large group of people are hiking."): a blank sentence has no translation, in a list or alone."""
    from transformer_lib.translation import pretrained, translate

    model = pretrained().model
    assert translate(model, "") == "" and translate(model, " \t ") == ""
    assert translate(model, ["", "Ein Hund.", "   "], beam_size=1) == ["", translate(model, "Ein Hund.", 1), ""]
    assert translate(model, "Ein Hund.", 1)


def test_text_typed_in_nfd_form_tokenizes_as_nfc():
    """"ä" typed as "a" and a combining diaeresis (U+0308) is the word the training data spells with U+00E4."""
    import unicodedata

    from transformer_lib.data import pre_tokens
    from transformer_lib.translation import pretrained, translate

    best = pretrained()
    text = "Zwei Mädchen spielen Fußball auf einer Straße."
    typed = unicodedata.normalize("NFD", text)
    assert typed != text and "<unk>" not in best.src_tok(text)
    assert best.src_tok(typed) == best.src_tok(text) and pre_tokens(best.src_tok, typed) == pre_tokens(best.src_tok, text)
    assert translate(best.model, typed, 1) == translate(best.model, text, 1)
