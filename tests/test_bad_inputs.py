"""Each bad input of tests/bad_inputs.py is rejected with the right exception and a message naming what was wrong;
rejected calls lose nothing; docs/bad_inputs.md shows the current messages."""
import pytest
import torch

import bad_inputs
from bad_inputs import CASES, DOC, ids, tiny_model, tiny_vocab
from transformer_lib import data as D
from transformer_lib import training as T
from transformer_lib import translation as X


@pytest.mark.parametrize("case", CASES, ids=[f"{c.entry} / {c.mistake}" for c in CASES])
def test_rejected_with_a_message_naming_it(case, tmp_path):
    with pytest.raises(case.error) as raised:
        case.call(tmp_path)
    message = str(raised.value)
    missing = [name for name in case.names if name not in message]
    assert not missing, f"message {message!r} lacks {missing}"


def test_every_public_module_is_audited():
    """Each module's public names appear in the table, so a new entry point needs a case (or an exemption)."""
    import transformer_lib.attention, transformer_lib.blocks, transformer_lib.embeddings, transformer_lib.fast  # noqa: E401
    import transformer_lib.data, transformer_lib.decoding, transformer_lib.model  # noqa: E401
    import transformer_lib.multi30k, transformer_lib.training, transformer_lib.translation  # noqa: E401
    import transformer_lib.gpt, transformer_lib.modern  # noqa: E401

    exempt = {  # constants, result records and helpers that take no input a learner could get wrong
        "MULTI30K_URL", "MULTI30K_ENV", "OFFLINE_ENV", "offline_forced", "MODERN_SIZES", "NEWTON_SCHULZ", "MULTI30K_FILES", "DataUnavailable", "multi30k_dirs", "load_translation_data",
        "encode_pairs", "padding_fraction", "DecoderCache", "detokenize", "BleuScore", "evaluate_bleu", "RECIPES", "CPU_FLOAT32",
        "TranslationData", "prepare_data", "TrainingRun", "PRETRAINED_FILE", "Pretrained", "pretrained_path",
        "pretrained", "ATTENTION_AXES", "CopyTaskResult", "loss_sum", "sequence_accuracy", "Encoder", "Decoder",
        "Generator", "EncoderDecoder", "build_model", "SublayerConnection",
        "FusedLayerNorm", "FastDropout", "cpu_has_bf16", "cpu_has_vnni", "SPACE", "initial_symbols", "merge_pair", "subword_tokenizers",
        "LONGEST_LEARNED",
        # the torch converters of the proofs: test_attention.py and test_blocks.py check what they refuse
        "mha_from_torch", "decoder_layer_from_torch",
        # chapter 10's loss and measures take what the model and lm_batches made; CaptionCorpus is a record
        "lm_loss", "perplexity", "leaks_future", "CaptionCorpus",
        # chapter 8's flag: a measured constant, the warning's class, and translate()'s helper fed by translate_tokens
        "UNFAMILIAR_BELOW", "UnfamiliarSentence", "warn_unfamiliar",
    }
    entries = " ".join(c.entry for c in CASES)
    for module in (transformer_lib.embeddings, transformer_lib.attention, transformer_lib.blocks,
                   transformer_lib.model, transformer_lib.training, transformer_lib.data, transformer_lib.decoding,
                   transformer_lib.translation, transformer_lib.fast, transformer_lib.multi30k, transformer_lib.gpt,
                   transformer_lib.modern):
        unaudited = [name for name in module.__all__ if name not in exempt and name not in entries]
        assert not unaudited, f"{module.__name__}: no bad-input case for {unaudited}"


def test_the_table_in_docs_is_current(tmp_path):
    assert DOC.read_text(encoding="utf-8") == bad_inputs.render(tmp_path), (
        "docs/bad_inputs.md is out of date: run `python tests/bad_inputs.py`")
    readme = (DOC.parent.parent / "README.md").read_text(encoding="utf-8")
    assert f"lists {len(CASES)} mistakes and the message each gets" in readme


# ------------------------------------------------------------------------------------- nothing is lost
def _snapshot(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("bad", [
    [(ids([2, 3]), ids([1, 2, 3]))],  # tuples, not Batches
    [T.Batch(ids([2, 3]))],  # no target
    [T.Batch(ids([2, 3]), ids([1, 0, 0]))],  # only padding to predict
])
def test_a_rejected_training_step_changes_no_weight(bad):
    model = tiny_model()
    optimizer, scheduler = T.make_optimizer(model, 8)
    before = _snapshot(model)
    with pytest.raises((TypeError, ValueError)):
        T.train_epoch(model, bad, T.LabelSmoothing(11, 0), optimizer, scheduler, progress=False)
    assert _same(before, _snapshot(model))
    assert not optimizer.state and scheduler.last_epoch == 0
    assert all(p.grad is None for p in model.parameters())


def test_a_rejected_checkpoint_leaves_the_old_one(tmp_path):
    path = X.save_checkpoint(tmp_path / "model.safetensors", tiny_model(), tiny_vocab(), tiny_vocab())
    good = path.read_bytes()
    with pytest.raises(ValueError):  # vocabularies of the wrong size
        X.save_checkpoint(path, tiny_model(), D.Vocab(list(D.Vocab.SPECIALS)), tiny_vocab())
    with pytest.raises(TypeError):  # info JSON cannot hold
        X.save_checkpoint(path, tiny_model(), tiny_vocab(), tiny_vocab(), loss=torch.tensor(1.0))
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]
    X.load_checkpoint(path)


def test_a_write_that_fails_halfway_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    import safetensors.torch

    path = X.save_checkpoint(tmp_path / "model.safetensors", tiny_model(), tiny_vocab(), tiny_vocab())
    good = path.read_bytes()

    def half_then_fail(model, filename, metadata=None):
        with open(filename, "wb") as handle:
            handle.write(good[: len(good) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(safetensors.torch, "save_model", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        X.save_checkpoint(path, tiny_model(n_layers=2), tiny_vocab(), tiny_vocab())
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]


def test_a_rejected_training_run_leaves_out_dir_as_it_was(tmp_path):
    notes = tmp_path / "run"
    notes.write_text("my notes")
    with pytest.raises(ValueError, match="out_dir"):
        X.train_translation(X.RECIPES["smoke"], notes)
    assert notes.read_text() == "my notes"
    with pytest.raises(TypeError, match="recipe"):
        X.train_translation("smoke", tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_use_fast_path_rejects_before_converting_anything():
    from transformer_lib.fast import use_fast_path

    with pytest.raises(TypeError):
        use_fast_path([tiny_model()])
    model = tiny_model()
    assert type(model.encoder.layers[0].self_attn).__name__ == "MultiHeadAttention"
