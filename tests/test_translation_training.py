"""Chapter 8, training and evaluation: recipes, resumable training, averaging, BLEU, translate, the shipped model.

Everything runs on the offline corpus or on tiny models, so no test needs Multi30k or a network.
"""
import json
import shutil
from dataclasses import replace

import pytest
import sacrebleu
import torch

import transformer_lib.data as D
import transformer_lib.translation as tr
from transformer_lib import runs
from transformer_lib import train as train_cli
from transformer_lib import translate as translate_cli
from transformer_lib.attention import padding_mask
from transformer_lib.data import SubwordTokenizer, Tokenizer, Vocab, detokenize, encode_pairs, offline_corpus
from transformer_lib.decoding import beam_search, translate_tokens
from transformer_lib.files import safetensors_digest
from transformer_lib.model import make_model
from transformer_lib.translation import (
    RECIPES, Recipe, TranslationData, average_checkpoints, bleu, evaluate_bleu, load_checkpoint, save_checkpoint,
    train_translation, translate,
)

TINY = Recipe(n_layers=1, d_model=32, d_ff=64, n_heads=4, dropout=0.1, shared_vocab=False, max_tokens=400, epochs=2, warmup=20,
              factor=2.0, beam_size=2, average_last=2, train_pairs=300, eval_pairs=20)


def offline_data(recipe: Recipe = TINY) -> TranslationData:
    """prepare_data's result, built from the offline corpus (deterministic, no files needed)."""
    train, val, test = offline_corpus(recipe.train_pairs, 0), offline_corpus(recipe.eval_pairs, 1), offline_corpus(10, 2)
    src_tok, tgt_tok = Tokenizer("de"), Tokenizer("en")
    src_vocab = Vocab.build([src_tok(d) for d, _ in train], min_freq=1)
    tgt_vocab = Vocab.build([tgt_tok(e) for _, e in train], min_freq=1)
    examples = encode_pairs(train, src_tok, tgt_tok, src_vocab, tgt_vocab)
    return TranslationData(src_tok, tgt_tok, src_vocab, tgt_vocab, examples, val, test, "offline corpus (test)")


@pytest.fixture(scope="module")
def data():
    return offline_data()


def quiet(*_):
    pass


# ---- recipes


def test_every_budget_has_a_recipe():
    assert set(RECIPES) == {"smoke", "cpu", "full"}
    assert RECIPES["smoke"].train_pairs is not None  # CI trains on a slice


@pytest.mark.parametrize("field, value", [("d_model", 0), ("epochs", -1), ("beam_size", 1.5), ("train_pairs", 0),
                                          ("dropout", 1.0), ("smoothing", -0.1), ("fast", "yes"),
                                          ("ema", 0.0), ("ema", "0.99"), ("short_first", -1)])
def test_recipe_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises((ValueError, TypeError), match=field):
        replace(TINY, **{field: value})


def test_recipe_round_trips_and_rejects_unknown_fields():
    assert Recipe.from_dict(json.loads(json.dumps(TINY.to_dict()))) == TINY
    with pytest.raises(ValueError, match="unknown Recipe fields"):
        Recipe.from_dict({**TINY.to_dict(), "learning_rate": 1e-3})


def test_prepare_data_builds_vocabularies_from_the_training_slice_only(monkeypatch):
    monkeypatch.setattr(tr, "load_translation_data", lambda split, root=None, download=True: (
        {"train": [("Ein Hund.", "A dog."), ("Ein Hund.", "A dog.")], "val": [("Eine Katze.", "A cat.")] * 2,
         "test2016": [("Ein Vogel.", "A bird.")] * 2}[split], f"fake {split}"))
    data = tr.prepare_data(replace(TINY, train_pairs=None, eval_pairs=1))
    assert "hund" in data.src_vocab.stoi and "katze" not in data.src_vocab.stoi  # val never shapes the vocabulary
    assert "bird" not in data.tgt_vocab.stoi and len(data.val) == len(data.test) == 1
    shared = tr.prepare_data(replace(TINY, shared_vocab=True))
    assert shared.src_vocab is shared.tgt_vocab and {"hund", "dog"} <= shared.src_vocab.stoi.keys()


# ---- training, resuming, averaging


@pytest.fixture(scope="module")
def finished_run(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    return train_translation(TINY, out, data=data, progress=False, log=quiet, device="cpu")


def test_training_writes_checkpoints_history_and_the_kept_model(finished_run):
    run = finished_run
    assert [h["epoch"] for h in run.history] == [1, 2]
    assert all({"step", "seconds", "train_loss", "val_loss", "val_bleu"} <= h.keys() for h in run.history)
    assert run.history[1]["val_loss"] < run.history[0]["val_loss"]
    names = sorted(p.name for p in run.path.parent.iterdir())
    assert names == ["epoch_001.safetensors", "epoch_002.safetensors", "model.safetensors", "state.safetensors"]
    assert run.scores["kept"] in ("last", "average of 2")
    model, _, _, info = load_checkpoint(run.path)
    assert info["history"] == run.history and info["scores"] == run.scores and info["recipe"] == TINY.to_dict()
    for a, b in zip(model.state_dict().values(), run.model.state_dict().values()):
        assert torch.equal(a, b)


def test_only_the_last_average_last_epoch_checkpoints_are_kept(data, tmp_path):
    run = train_translation(replace(TINY, epochs=3), tmp_path, data=data, progress=False, log=quiet, device="cpu")
    assert sorted(p.name for p in tmp_path.glob("epoch_*")) == ["epoch_002.safetensors", "epoch_003.safetensors"]
    assert len(run.history) == 3


def test_a_resumed_run_ends_exactly_where_an_uninterrupted_one_does(data, finished_run, tmp_path):
    lines = []
    train_translation(replace(TINY, epochs=1), tmp_path, data=data, progress=False, log=quiet, device="cpu")
    resumed = train_translation(TINY, tmp_path, data=data, progress=False, log=lines.append, device="cpu")
    assert lines[0].startswith(f"resuming {tmp_path} after epoch 1")
    assert [{k: v for k, v in h.items() if k != "seconds"} for h in resumed.history] == \
           [{k: v for k, v in h.items() if k != "seconds"} for h in finished_run.history]
    # the epoch's line ends with the watched caption, translated greedily by the model the epoch ended with
    last = load_checkpoint(tmp_path / "epoch_002.safetensors")[0]  # the run keeps an average; the epoch, its own
    watched = translate_tokens(last, [runs.WATCHED], data.src_tok, data.src_vocab, data.tgt_vocab, 1)[0]
    epoch_line = next(line for line in lines if line.startswith("epoch 2,"))
    assert epoch_line.endswith(f"\n    {runs.WATCHED} -> {data.tgt_tok.detokenize(watched)}")
    for a, b in zip(resumed.model.state_dict().values(), finished_run.model.state_dict().values()):
        assert torch.equal(a, b)


def test_short_first_epochs_take_their_batches_shortest_first_and_the_rest_shuffled(data):
    def lengths(recipe, epoch):
        return [b.tgt_in.shape[1] for b in runs.epoch_batches(recipe, data, epoch, 0, 1, "cpu")]

    curriculum = replace(TINY, short_first=1)
    assert lengths(curriculum, 1) == sorted(lengths(curriculum, 1))
    assert lengths(curriculum, 2) == lengths(TINY, 2) != sorted(lengths(TINY, 2))  # epoch 2 shuffled as before
    assert lengths(TINY, 1) != sorted(lengths(TINY, 1))


def test_the_moving_average_follows_every_optimizer_step():
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    average = runs.moving_average(replace(TINY, ema=0.75), model, optimizer)
    by_hand = None
    for _ in range(4):
        optimizer.zero_grad()
        model(torch.randn(5, 3)).square().sum().backward()
        optimizer.step()
        now = [p.detach().clone() for p in model.parameters()]
        by_hand = now if by_hand is None else [0.75 * a + 0.25 * w for a, w in zip(by_hand, now)]
    for a, b in zip(average.module.parameters(), by_hand):
        torch.testing.assert_close(a, b)
    assert not torch.equal(average.module.weight, model.weight)  # an average, not a copy of the last step
    assert runs.moving_average(TINY, model, optimizer) is None  # no ema: no average


def test_a_moving_average_is_kept_scored_and_resumed_exactly(data, tmp_path):
    recipe = replace(TINY, ema=0.9)
    whole = train_translation(recipe, tmp_path / "whole", data=data, progress=False, log=quiet, device="cpu")
    names = sorted(p.name for p in (tmp_path / "whole").iterdir())
    assert names == ["ema_002.safetensors", "epoch_001.safetensors", "epoch_002.safetensors", "model.safetensors",
                     "state.safetensors"]
    assert {"last", "average of 2", "moving average"} < whole.scores.keys()
    train_translation(replace(recipe, epochs=1), tmp_path / "resumed", data=data, progress=False, log=quiet,
                      device="cpu")
    resumed = train_translation(recipe, tmp_path / "resumed", data=data, progress=False, log=quiet, device="cpu")
    assert resumed.scores == whole.scores
    ours, theirs = (load_checkpoint(tmp_path / f / "ema_002.safetensors")[0] for f in ("resumed", "whole"))
    last = load_checkpoint(tmp_path / "whole" / "epoch_002.safetensors")[0]
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), theirs.state_dict().values()))
    assert not all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), last.state_dict().values()))


def test_resuming_without_the_moving_average_names_the_missing_file(data, tmp_path):
    recipe = replace(TINY, ema=0.9)
    train_translation(replace(recipe, epochs=1), tmp_path, data=data, progress=False, log=quiet, device="cpu")
    (tmp_path / "ema_001.safetensors").unlink()
    with pytest.raises(ValueError, match="ema_001.safetensors is missing"):
        train_translation(recipe, tmp_path, data=data, progress=False, log=quiet, device="cpu")


def test_resuming_with_another_runs_moving_average_names_the_file_and_the_weight(data, tmp_path):
    """A moving-average file of a model of another width (another run's, copied in) is refused before anything is
    restored, naming the file and the first weight whose shape differs, not with PyTorch's state-dict error."""
    recipe = replace(TINY, ema=0.9)
    train_translation(replace(recipe, epochs=1), tmp_path / "run", data=data, progress=False, log=quiet, device="cpu")
    train_translation(replace(recipe, epochs=1, d_model=2 * TINY.d_model), tmp_path / "wide", data=data,
                      progress=False, log=quiet, device="cpu")
    own = (tmp_path / "run" / "ema_001.safetensors").read_bytes()
    (tmp_path / "run" / "ema_001.safetensors").write_bytes((tmp_path / "wide" / "ema_001.safetensors").read_bytes())
    state = (tmp_path / "run" / "state.safetensors").read_bytes()
    with pytest.raises(ValueError, match=r"ema_001\.safetensors is not this run's moving average: its \S+ is \(\d+"):
        train_translation(recipe, tmp_path / "run", data=data, progress=False, log=quiet, device="cpu")
    assert (tmp_path / "run" / "state.safetensors").read_bytes() == state  # nothing restored or written over
    (tmp_path / "run" / "ema_001.safetensors").write_bytes(own)
    train_translation(recipe, tmp_path / "run", data=data, progress=False, log=quiet, device="cpu")  # its own resumes


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-1", "0"])
def test_a_forecast_file_with_a_number_no_measurement_gives_is_refused_naming_it(data, tmp_path, value):
    """forecast.json's numbers must be positive and finite: NaN, an infinity, zero or a negative number is refused,
    naming the file and the number, and the file is left as it was."""
    import json

    from transformer_lib import runs

    runs.forecast_run(tmp_path, TINY, data, torch.device("cpu"), steps=2)
    kept = json.loads((tmp_path / "forecast.json").read_text())
    kept["forecast"]["minutes"] = float(value)
    (tmp_path / "forecast.json").write_text(json.dumps(kept))
    before = (tmp_path / "forecast.json").read_text()
    with pytest.raises(ValueError, match=r"forecast\.json: not a forecast this package wrote .*minutes is .*delete it"):
        runs.forecast_run(tmp_path, TINY, data, torch.device("cpu"), steps=2)
    assert (tmp_path / "forecast.json").read_text() == before


@pytest.mark.parametrize("bf16", [False, True])
def test_a_fast_recipe_trains_like_the_readable_one(data, finished_run, tmp_path, monkeypatch, bf16):
    """Recipe(fast=True) trains on chapter 9's twins (bfloat16 autocast where the hardware has it, forced here both
    ways): other kernels and dropout masks, so not the same bits, but close losses (here 0.5% apart in training,
    4.5% in validation). One autocast weight cache for a whole epoch would reuse the first step's weights in every
    step: validation loss 3.5 against 1.2."""
    import transformer_lib.fast as fast

    monkeypatch.setattr(fast, "cpu_has_bf16", lambda: bf16)
    run = train_translation(replace(TINY, fast=True), tmp_path, data=data, progress=False, log=quiet, device="cpu",
                            speedup=fast.speed_up)
    for ours, readable in zip(run.history, finished_run.history):
        for key, rel in (("train_loss", 0.03), ("val_loss", 0.1)):
            assert ours[key] == pytest.approx(readable[key], rel=rel), (key, ours, readable)
    model, _, _, info = load_checkpoint(run.path)  # the twins share the readable modules' parameters
    assert info["recipe"]["fast"] is True and type(model.encoder.layers[0].self_attn).__name__ == "MultiHeadAttention"


def test_resuming_with_another_recipe_is_an_error_naming_what_differs(data, finished_run):
    with pytest.raises(ValueError, match=r"different recipe \(d_model differ\)"):
        train_translation(replace(TINY, d_model=64), finished_run.path.parent, data=data, progress=False, log=quiet)


def test_a_finished_run_resumed_with_another_beam_search_scores_its_kept_model_again(data, finished_run, tmp_path):
    """beam_size and length_penalty change no training step: the finished run's epochs are reused, not retrained,
    and the last epoch and the average are scored again with the new search, not read back from the kept model
    the old search chose."""
    for f in finished_run.path.parent.iterdir():
        shutil.copy(f, tmp_path / f.name)
    lines = []
    again = train_translation(replace(TINY, length_penalty=1.4, beam_size=3), tmp_path, data=data, progress=False,
                              log=lines.append, device="cpu")
    assert lines[0].startswith(f"resuming {tmp_path} after epoch 2")
    assert again.history == finished_run.history  # no epoch trained again
    assert any(line.startswith("validation, beam 3, last") for line in lines)
    assert load_checkpoint(again.path)[3]["recipe"]["length_penalty"] == 1.4
    expected = evaluate_bleu(load_checkpoint(tmp_path / "epoch_002.safetensors")[0], data.val, data.src_tok,
                             data.src_vocab, data.tgt_vocab, 3, 1.4, TINY.lower, data.tgt_tok)
    assert again.scores["last"]["sacrebleu"] == round(expected.sacrebleu, 2)


def test_a_corrupt_training_state_is_reported(data, tmp_path):
    (tmp_path / "state.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="not a readable training state"):
        train_translation(TINY, tmp_path, data=data, progress=False, log=quiet)


def test_a_training_state_damaged_after_writing_is_refused_by_its_sha256(data, finished_run, tmp_path):
    raw = bytearray((finished_run.path.parent / "state.safetensors").read_bytes())
    raw[-5] ^= 0x01  # one bit of one tensor: the file still parses, only the digest can tell
    (tmp_path / "state.safetensors").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="is corrupt: its contents do not match the sha256"):
        train_translation(TINY, tmp_path, data=data, progress=False, log=quiet)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.safetensors"]  # nothing written, nothing removed


def test_average_of_checkpoints_is_the_mean_of_their_weights(finished_run, tmp_path):
    a, src_vocab, tgt_vocab, _ = load_checkpoint(finished_run.path)
    b, *_ = load_checkpoint(finished_run.path)
    with torch.no_grad():
        for p in b.parameters():
            p.add_(1.0)
    save_checkpoint(tmp_path / "a.safetensors", a, src_vocab, tgt_vocab)
    save_checkpoint(tmp_path / "b.safetensors", b, src_vocab, tgt_vocab)
    mean, *_ = average_checkpoints([tmp_path / "a.safetensors", tmp_path / "b.safetensors"])
    for name, p in mean.named_parameters():
        assert torch.allclose(p, dict(a.named_parameters())[name] + 0.5, atol=1e-6), name


def test_averaging_checkpoints_of_different_models_is_an_error(finished_run, tmp_path):
    a, src_vocab, tgt_vocab, _ = load_checkpoint(finished_run.path)
    other = make_model(len(src_vocab), len(tgt_vocab), 1, 16, 32, 2)
    save_checkpoint(tmp_path / "other.safetensors", other, src_vocab, tgt_vocab)
    with pytest.raises(ValueError, match="does not share the config"):
        average_checkpoints([tmp_path / "other.safetensors", finished_run.path])
    with pytest.raises(ValueError, match="paths is empty"):
        average_checkpoints([])


# ---- BLEU and translate


def test_bleu_matches_sacrebleu_and_reports_both_signatures():
    refs = ["A man is riding a bike down the street.", "Two dogs are playing in the snow."]
    hyps = [Tokenizer("en")("a man rides a bike on the street ."), Tokenizer("en")("two dogs play in snow .")]
    score = bleu(hyps, refs)
    expected = sacrebleu.corpus_bleu([detokenize(h) for h in hyps], [refs], lowercase=True).score
    assert score.sacrebleu == pytest.approx(expected)
    tokenized = sacrebleu.corpus_bleu([" ".join(h) for h in hyps], [[" ".join(Tokenizer("en")(r)) for r in refs]],
                                      tokenize="none").score
    assert score.tokenized == pytest.approx(tokenized)
    assert "case:lc" in score.signature and "tok:13a" in score.signature and "tok:none" in score.tokenized_signature
    assert 0 < score.tokenized < 100
    perfect = bleu([Tokenizer("en")(r) for r in refs], refs)
    assert perfect.sacrebleu == pytest.approx(100) and perfect.tokenized == pytest.approx(100)


def test_bleu_rejects_mismatched_or_empty_inputs():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        bleu([["a"], ["b"]], ["a"])
    with pytest.raises(ValueError, match="references is empty"):
        bleu([], [])


def test_batched_translation_keeps_each_sentence_in_its_place(finished_run):
    model, data = finished_run.model, finished_run.data
    sentences = [de for de, _ in offline_corpus(9, seed=7)] + ["Ein Hund."]
    together = translate_tokens(model, sentences, data.src_tok, data.src_vocab, data.tgt_vocab, beam_size=2,
                                batch_size=4)
    alone = [translate_tokens(model, [s], data.src_tok, data.src_vocab, data.tgt_vocab, beam_size=2)[0]
             for s in sentences]
    assert together == alone
    ids = data.src_vocab.encode(data.src_tok(sentences[0]))
    src = torch.tensor([ids])
    best = beam_search(model, src, padding_mask(src, data.src_vocab.pad_idx), int(1.5 * len(ids)) + 10,
                       data.tgt_vocab.bos_idx, data.tgt_vocab.eos_idx, beam_size=2)[0]
    assert together[0] == data.tgt_vocab.decode(best)


def test_translate_takes_text_and_uses_the_vocabularies_the_model_carries(finished_run):
    model, *_ = load_checkpoint(finished_run.path)
    one = translate(model, "Ein kleiner Hund läuft im Schnee.", beam_size=1)
    many = translate(model, ["Ein kleiner Hund läuft im Schnee.", "Zwei Katzen schlafen."], beam_size=1)
    assert isinstance(one, str) and one == many[0] and len(many) == 2
    with pytest.raises(TypeError, match="list of strings"):
        translate_tokens(model, "Ein Hund.", *model.vocabs[:0], Tokenizer("de"), *model.vocabs)
    with pytest.raises(TypeError, match="sentence must be a string"):
        translate(model, [1, 2])
    bare = make_model(5, 5, 1, 16, 32, 2)
    with pytest.raises(ValueError, match="carries no vocabularies"):
        translate(bare, "Ein Hund.")


# ---- command lines


def test_train_and_translate_commands(tmp_path, monkeypatch, capsys, data):
    monkeypatch.setattr(tr, "prepare_data", lambda recipe, root=None, download=True: data)
    monkeypatch.setitem(tr.RECIPES, "smoke", replace(TINY, epochs=1))
    assert train_cli.main(["multi30k", "--budget", "smoke", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "offline corpus test split, NOT Multi30k test2016 (10 pairs), beam 2: sacreBLEU" in out  # not Multi30k's
    assert "the same one the model trained on, and some test pairs are training pairs" in out  # what its score means
    assert f"model: {tmp_path / 'run' / 'model.safetensors'}" in out
    assert translate_cli.main(["--checkpoint", str(tmp_path / "run" / "model.safetensors"), "--beam", "1",
                               "Ein Hund.", "Zwei Katzen."]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 2


def test_translate_command_without_a_model_says_how_to_get_one(tmp_path, monkeypatch):
    monkeypatch.setattr(tr, "pretrained_path", lambda: tmp_path / "missing.safetensors")
    with pytest.raises(SystemExit, match="train one with `python -m transformer_lib.train multi30k"):
        translate_cli.main(["Ein Hund."])
    with pytest.raises(SystemExit, match="no such file"):
        translate_cli.main(["--checkpoint", "missing.safetensors", "Ein Hund."])


def test_commands_report_a_damaged_checkpoint_in_one_line(finished_run, tmp_path, monkeypatch):
    from transformer_lib import evaluate as evaluate_cli

    damaged = tmp_path / "model.safetensors"
    damaged.write_bytes(finished_run.path.read_bytes()[:-100])
    with pytest.raises(SystemExit, match=r"^error: .*model.safetensors is not a readable checkpoint"):
        translate_cli.main(["--checkpoint", str(damaged), "Ein Hund."])
    monkeypatch.setattr(D, "load_multi30k", lambda split, root=None, download=True: offline_corpus(4, seed=5))
    with pytest.raises(SystemExit, match=r"^error: .*model.safetensors is not a readable checkpoint"):
        evaluate_cli.main(["--checkpoint", str(damaged)])


def test_train_command_reports_a_damaged_training_state_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(tr, "prepare_data", lambda recipe, root=None, download=True: offline_data())
    monkeypatch.setitem(tr.RECIPES, "cpu", replace(tr.RECIPES["cpu"], subwords=None, shared_vocab=False))  # the data's
    monkeypatch.setattr(tr, "CPU_FLOAT32", replace(tr.CPU_FLOAT32, subwords=None, shared_vocab=False))  # no bfloat16
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "state.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(SystemExit, match=r"^error: .*state.safetensors is not a readable training state"):
        train_cli.main(["multi30k", "--budget", "cpu", "--out", str(tmp_path / "run"), "--quiet"])  # two vocabularies
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["state.safetensors"]


def test_a_shared_vocabulary_recipe_needs_data_with_one_vocabulary(data, tmp_path):
    with pytest.raises(ValueError, match="shared_vocab is True but data has two vocabularies"):
        train_translation(replace(TINY, shared_vocab=True), tmp_path, data=data, progress=False, log=quiet)


# ---- distributed data parallel


def _ddp_worker(rank, world, init_file, recipe, out_dir):
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        train_translation(recipe, out_dir, data=offline_data(recipe), progress=False, log=quiet, device="cpu")
    finally:
        dist.destroy_process_group()


def test_two_processes_train_like_one_process_with_both_batches(data, tmp_path):
    import torch.multiprocessing as mp

    recipe = replace(TINY, dropout=0.0)  # dropout masks differ between processes; without it all is deterministic
    mp.spawn(_ddp_worker, args=(2, str(tmp_path / "init"), recipe, str(tmp_path / "ddp")), nprocs=2, join=True)
    single = train_translation(replace(recipe, accum_steps=2), tmp_path / "single", data=data, progress=False,
                               log=quiet, device="cpu")
    ddp_model, _, _, info = load_checkpoint(tmp_path / "ddp" / "epoch_002.safetensors")
    one_model, _, _, one_info = load_checkpoint(tmp_path / "single" / "epoch_002.safetensors")
    assert info["step"] == one_info["step"] == single.history[-1]["step"]
    assert info["train_loss"] == pytest.approx(one_info["train_loss"], abs=2e-4)
    assert info["val_loss"] == pytest.approx(one_info["val_loss"], abs=2e-4)
    # A key bias adds the same score to every key of a query, which softmax ignores: its gradient is zero up to
    # rounding, and Adam scales that rounding noise, different in 1 and 2 processes, into full-size steps. The
    # key biases are therefore compared through the outputs, which they cannot change.
    differ = [name for (name, p), q in zip(ddp_model.named_parameters(), one_model.parameters())
              if not name.endswith("w_k.bias") and not torch.allclose(p, q, atol=1e-4)]
    assert not differ, differ
    src, tgt = torch.tensor([[4, 5, 6, 7]]), torch.tensor([[2, 4, 5]])
    assert torch.allclose(ddp_model(src, tgt), one_model(src, tgt), atol=1e-4)
    assert (tmp_path / "ddp" / "model.safetensors").is_file()


def test_evaluate_command_prints_both_metrics(finished_run, tmp_path, monkeypatch, capsys):
    from transformer_lib import evaluate as evaluate_cli

    monkeypatch.setattr(D, "load_multi30k", lambda split, root=None, download=True: offline_corpus(12, seed=5))
    assert evaluate_cli.main(["--checkpoint", str(finished_run.path), "--split", "val", "--beam", "2"]) == 0
    out = capsys.readouterr().out
    assert "Multi30k val (12 pairs), beam 2" in out
    assert "sacreBLEU" in out and "nrefs:1|case:lc|eff:no|tok:13a" in out and "tok:none" in out
    unavailable = D.DataUnavailable("put the files in X")
    monkeypatch.setattr(D, "load_multi30k", lambda *a, **k: (_ for _ in ()).throw(unavailable))
    with pytest.raises(SystemExit, match="put the files in X"):
        evaluate_cli.main(["--checkpoint", str(finished_run.path)])


# ---- the shipped model


def test_the_shipped_model_carries_a_sha256_of_its_contents():
    from safetensors import safe_open

    path = tr.pretrained_path()
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    assert metadata["sha256"] == safetensors_digest(path)


def test_float16_checkpoint_halves_the_file_and_loads_back_as_float32(finished_run, tmp_path):
    model, src_vocab, tgt_vocab, _ = load_checkpoint(finished_run.path)
    full = save_checkpoint(tmp_path / "full.safetensors", model, src_vocab, tgt_vocab)
    half = save_checkpoint(tmp_path / "half.safetensors", model, src_vocab, tgt_vocab, dtype=torch.float16, note=1)
    assert half.stat().st_size < 0.6 * full.stat().st_size
    loaded, _, _, info = load_checkpoint(half)
    assert info == {"note": 1}
    for (name, p), q in zip(model.named_parameters(), loaded.parameters()):
        assert q.dtype == torch.float32 and torch.equal(p.half().float(), q), name
    assert next(model.parameters()).dtype == torch.float32  # the saved model itself is untouched


def test_the_shipped_model_loads_without_pickle_and_translates():
    from safetensors import safe_open

    path = tr.pretrained_path()
    assert path.is_file() and path.stat().st_size < 30e6
    with safe_open(str(path), "pt") as handle:
        assert {handle.get_slice(k).get_dtype() for k in handle.keys()} == {"F16"}
    best = tr.pretrained()
    assert not best.model.training and next(best.model.parameters()).dtype == torch.float32
    assert tr.Recipe.from_dict(best.info["recipe"]).to_dict() == RECIPES["full"].to_dict()  # fields added since: defaults
    assert isinstance(best.src_tok, SubwordTokenizer) and best.src_tok.bpe.merges == best.tgt_tok.bpe.merges  # shared
    assert len(best.src_tok.bpe.merges) == RECIPES["full"].subwords
    assert best.src_tok.decode(best.src_tok("Ein Hund.")) == "ein hund."  # subwords decode to the text, lowercased
    english = translate(best.model, "Ein Hund rennt durch den Schnee.").lower()
    assert "dog" in english and "snow" in english


def test_ship_writes_a_full_run_as_float16_with_its_metadata_and_refuses_other_recipes(finished_run, tmp_path,
                                                                                       monkeypatch, capsys):
    from safetensors import safe_open

    monkeypatch.setitem(tr.RECIPES, "full", TINY)  # the finished run stands for a full run
    target = tmp_path / "shipped.safetensors"
    assert train_cli.main(["ship", str(finished_run.path), "--to", str(target)]) == 0
    assert "float16" in capsys.readouterr().out
    with safe_open(str(target), "pt") as handle:
        assert {handle.get_slice(k).get_dtype() for k in handle.keys()} == {"F16"}
    model, src_vocab, _, info = load_checkpoint(target)
    _, _, _, made = load_checkpoint(finished_run.path)
    assert info == made and src_vocab.itos == finished_run.data.src_vocab.itos  # recipe, history and scores kept
    for a, b in zip(model.state_dict().values(), finished_run.model.state_dict().values()):
        torch.testing.assert_close(a, b.half().float())  # the same weights, rounded to float16
    epoch = finished_run.path.parent / "epoch_002.safetensors"
    with pytest.raises(SystemExit, match="epoch's checkpoint, not the model a finished run kept"):
        train_cli.main(["ship", str(epoch), "--to", str(tmp_path / "x.safetensors")])
    monkeypatch.setitem(tr.RECIPES, "full", replace(TINY, epochs=3))
    with pytest.raises(SystemExit, match=r"another recipe than RECIPES\['full'\] \(they differ in epochs\)"):
        train_cli.main(["ship", str(finished_run.path), "--to", str(tmp_path / "y.safetensors")])
    with pytest.raises(SystemExit, match="gone.safetensors"):
        train_cli.main(["ship", str(tmp_path / "gone.safetensors"), "--to", str(tmp_path / "z.safetensors")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shipped.safetensors"]  # a refusal writes nothing


def test_a_missing_shipped_model_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(tr, "pretrained_path", lambda: tmp_path / "gone.safetensors")
    with pytest.raises(FileNotFoundError, match="installed without its data"):
        tr.pretrained()


def test_translate_command_uses_the_shipped_model_by_default(capsys):
    assert translate_cli.main(["--beam", "1", "Zwei Hunde spielen im Schnee."]) == 0
    assert "snow" in capsys.readouterr().out.lower()


def test_ctrl_c_in_the_middle_of_an_epoch_loses_only_that_epoch(data, finished_run, tmp_path, monkeypatch):
    real_train_epoch, calls = tr.train_epoch, []

    def interrupted(*args, **kwargs):  # epoch 2 is stopped by Ctrl-C halfway through its batches
        calls.append(1)
        if len(calls) == 2:
            real_train_epoch(args[0], args[1][: len(args[1]) // 2], *args[2:], **kwargs)
            raise KeyboardInterrupt
        return real_train_epoch(*args, **kwargs)

    monkeypatch.setattr(tr, "train_epoch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_translation(TINY, tmp_path, data=data, progress=False, log=quiet, device="cpu")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch_001.safetensors", "state.safetensors"]
    monkeypatch.setattr(tr, "train_epoch", real_train_epoch)
    resumed = train_translation(TINY, tmp_path, data=data, progress=False, log=quiet, device="cpu")
    for a, b in zip(resumed.model.state_dict().values(), finished_run.model.state_dict().values()):
        assert torch.equal(a, b)


def test_a_second_training_on_a_run_folder_is_refused_while_the_first_writes_it(data, tmp_path, monkeypatch):
    """Two trainings on one folder would leave a model.safetensors whose history and weights belong to another run
    than state.safetensors and the epoch files: the folder is locked while a training writes it."""
    import socket
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / ".lock").write_text(f"{holder.pid} {socket.gethostname()}\n")
        with pytest.raises(ValueError, match=f"{tmp_path} is being written by another training .process {holder.pid}"):
            train_translation(TINY, tmp_path, data=data, progress=False, log=quiet, device="cpu")
        assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]  # nothing written, the lock left to its holder
        monkeypatch.setattr(tr, "prepare_data", lambda recipe, root=None, download=True: offline_data())
        with pytest.raises(SystemExit, match=r"^error: .*is being written by another training"):
            train_cli.main(["multi30k", "--budget", "cpu", "--out", str(tmp_path), "--quiet"])
    finally:
        holder.kill()
        holder.wait()
    # the holder has ended: its lock is stale, taken over, and removed when the run ends
    run = train_translation(replace(TINY, epochs=1), tmp_path, data=data, progress=False, log=quiet, device="cpu")
    assert run.history and not (tmp_path / ".lock").exists()


def test_a_run_folder_lock_names_a_holder_on_another_host_and_a_broken_lock_file(data, tmp_path):
    (tmp_path / ".lock").write_text("123 some-other-host\n")
    with pytest.raises(ValueError, match="process 123 on some-other-host.*delete .*\\.lock"):
        train_translation(TINY, tmp_path, data=data, progress=False, log=quiet, device="cpu")
    (tmp_path / ".lock").write_text("")
    with pytest.raises(ValueError, match="holds no process id"):
        train_translation(TINY, tmp_path, data=data, progress=False, log=quiet, device="cpu")


def test_a_finished_run_resumed_with_fewer_epochs_is_refused_and_its_record_kept(finished_run, tmp_path, monkeypatch,
                                                                               data):
    """Two epochs' model, history and scores must not be written again under a recipe that says one."""
    folder = tmp_path / "run"
    shutil.copytree(finished_run.path.parent, folder)
    before = (folder / "model.safetensors").read_bytes()
    with pytest.raises(ValueError, match="holds a run of 2 epochs, more than the recipe's epochs=1; ask for epochs=2"):
        train_translation(replace(TINY, epochs=1), folder, data=data, progress=False, log=quiet, device="cpu")
    monkeypatch.setattr(tr, "prepare_data", lambda recipe, root=None, download=True: data)
    monkeypatch.setitem(tr.RECIPES, "smoke", TINY)
    with pytest.raises(SystemExit, match="^error: .*holds a run of 2 epochs"):
        train_cli.main(["multi30k", "--budget", "smoke", "--epochs", "1", "--out", str(folder), "--quiet"])
    assert (folder / "model.safetensors").read_bytes() == before and not (folder / ".lock").exists()


def test_the_train_command_without_multi30k_labels_its_test_score_as_the_offline_corpus(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MULTI30K_OFFLINE", "1")
    monkeypatch.delenv("MULTI30K_DIR", raising=False)
    monkeypatch.setitem(tr.RECIPES, "smoke", replace(TINY, epochs=1))
    assert train_cli.main(["multi30k", "--budget", "smoke", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "OFFLINE CORPUS, NOT Multi30k" in out and "; test2016 (" not in out
    assert "offline corpus test split, NOT Multi30k test2016 (20 pairs)" in out


def test_a_second_training_from_the_same_process_is_refused_and_leaves_the_first_ones_lock(data, tmp_path):
    from transformer_lib.files import locked_folder

    with locked_folder(tmp_path):
        lock = (tmp_path / ".lock").read_text()
        with pytest.raises(ValueError, match="already being written by a training in this process"):
            train_translation(TINY, tmp_path, data=data, progress=False, log=quiet, device="cpu")
        assert (tmp_path / ".lock").read_text() == lock  # still the first one's
        assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]
    assert not (tmp_path / ".lock").exists()
    with locked_folder(tmp_path):  # free again
        pass


def _race_for_the_lock(folder, start, tried, results):
    """One racer: wait for the others, try the lock, and hold it (if won) until every racer has tried."""
    from transformer_lib.files import locked_folder

    start.wait()
    try:
        with locked_folder(folder):
            results.put("in")
            tried.wait()
    except ValueError:
        results.put("refused")
        tried.wait()


def test_of_several_processes_taking_over_one_stale_lock_exactly_one_gets_in(tmp_path):
    import multiprocessing
    import socket
    import subprocess
    import sys

    context = multiprocessing.get_context("fork")
    racers = 4
    for round in range(3):
        folder = tmp_path / f"run{round}"
        folder.mkdir()
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        (folder / ".lock").write_text(f"{gone.pid} {socket.gethostname()}\n")  # its writer is dead: stale
        start, tried, results = context.Barrier(racers), context.Barrier(racers), context.Queue()
        processes = [context.Process(target=_race_for_the_lock, args=(folder, start, tried, results))
                     for _ in range(racers)]
        for process in processes:
            process.start()
        outcomes = sorted(results.get() for _ in processes)
        for process in processes:
            process.join()
        assert outcomes == ["in"] + ["refused"] * (racers - 1)
        assert [p.exitcode for p in processes] == [0] * racers and list(folder.iterdir()) == []


def test_the_translate_command_refuses_an_encoding_that_is_not_for_text(capsys):
    for encoding, what in (("hex", "not a text encoding"), ("rot13", "not a text encoding"),
                           ("no-such-codec", "not an encoding Python knows")):
        with pytest.raises(SystemExit) as stopped:
            translate_cli.main(["--encoding", encoding])
        assert stopped.value.code == 2
        err = capsys.readouterr().err
        assert f"error: --encoding {encoding!r} is {what}; use a text encoding such as utf-8" in err


def test_the_translate_command_reports_a_failure_while_reading_instead_of_exiting_0(monkeypatch, capsys):
    import io

    def broken(stream, encoding, max_bytes):
        yield 1, "Ein Hund.", None
        raise OSError("the pipe broke")

    model = make_model(8, 8, 1, 16, 32, 2)
    model.vocabs = Vocab([*Vocab.SPECIALS, *"abcd"]), Vocab([*Vocab.SPECIALS, *"abcd"])
    with pytest.raises(OSError, match="the pipe broke"):
        translate_cli.translate_lines(model, broken(None, "utf-8", 10), 1, 4, io.StringIO(), io.StringIO())


def _taker(folder, slow, checking, a_tried, b_tried, results):
    """Take the run folder's lock; `slow`: pause between finding the lock stale and taking it, until the other
    process has tried. Whoever gets in holds the lock until the other has tried."""
    from transformer_lib import files

    if slow:
        alive = files._alive

        def slow_alive(pid):
            checking.set()
            a_tried.wait(120)
            return alive(pid)

        files._alive = slow_alive
    mine, other = (b_tried, a_tried) if slow else (a_tried, b_tried)
    try:
        with files.locked_folder(folder):
            results.put("in")
            mine.set()
            other.wait(120)
    except ValueError:
        results.put("refused")
        mine.set()


def test_a_stale_lock_taken_over_by_another_process_meanwhile_lets_one_in(tmp_path):
    """B finds the lock stale; before B takes it, A tries too. Only one of them may get in, whatever the order."""
    import multiprocessing
    import socket
    import subprocess
    import sys

    context = multiprocessing.get_context("fork")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / ".lock").write_text(f"{gone.pid} {socket.gethostname()}\n")
    checking, a_tried, b_tried, results = context.Event(), context.Event(), context.Event(), context.Queue()
    b = context.Process(target=_taker, args=(tmp_path, True, checking, a_tried, b_tried, results))
    b.start()
    assert checking.wait(120)  # B has read the stale lock and is about to take it
    a = context.Process(target=_taker, args=(tmp_path, False, checking, a_tried, b_tried, results))
    a.start()
    outcomes = sorted(results.get(timeout=120) for _ in range(2))
    a.join()
    b.join()
    assert outcomes == ["in", "refused"] and list(tmp_path.iterdir()) == []


def test_a_forecast_times_the_recipes_model_and_leaves_the_run_as_it_would_be(data, finished_run, tmp_path):
    """runs.forecast: a few timed steps of a throwaway model give tokens a second and the minutes of the recipe's
    epochs; the run trained after it ends with the very weights of a run trained without it."""
    from transformer_lib.fast import speed_up
    from transformer_lib.runs import epoch_batches, forecast

    ahead = forecast(TINY, data, torch.device("cpu"), steps=3)
    assert ahead["steps"] == 3 and ahead["tokens_per_second"] > 0
    padded = sum(b.src.numel() + b.tgt_in.numel() for b in epoch_batches(TINY, data, 1, 0, 1, torch.device("cpu")))
    assert ahead["epoch_tokens"] == padded
    assert ahead["epoch_seconds"] == pytest.approx(padded / ahead["tokens_per_second"])
    assert ahead["minutes"] == pytest.approx(ahead["epoch_seconds"] * TINY.epochs / 60)
    after = train_translation(TINY, tmp_path, data=data, progress=False, log=quiet, device="cpu")
    for a, b in zip(after.model.state_dict().values(), finished_run.model.state_dict().values()):
        assert torch.equal(a, b)
    cooled = forecast(replace(TINY, cooldown=0.3, fast=True), data, torch.device("cpu"), speedup=speed_up, steps=1)
    assert cooled["steps"] == 1 and cooled["minutes"] > 0  # a recipe with a cooldown, on the fast path
    for steps, error in ((0, ValueError), (2.5, TypeError)):
        with pytest.raises(error, match="steps must be"):
            forecast(TINY, data, torch.device("cpu"), steps=steps)
    with pytest.raises(ValueError, match="recipe.fast=True trains on chapter 9's fast path: pass speedup=speed_up"):
        forecast(replace(TINY, fast=True), data, torch.device("cpu"))


def test_a_fast_recipe_with_bf16_off_trains_in_float32_on_any_hardware(data):
    from transformer_lib.fast import has_bf16, speed_up
    from transformer_lib.runs import build

    cpu = torch.device("cpu")
    assert build(replace(TINY, fast=True, bf16=False), data, cpu, speed_up)[4] is False
    assert build(replace(TINY, fast=True), data, cpu, speed_up)[4] == has_bf16(cpu)
    assert tr.Recipe.from_dict({k: v for k, v in TINY.to_dict().items() if k != "bf16"}).bf16  # older files: True
    with pytest.raises(TypeError, match="bf16"):
        replace(TINY, bf16="no")


def test_a_runs_forecast_is_kept_in_its_folder_and_given_back_for_that_run(data, tmp_path):
    """runs.forecast_run: measured before a fresh run and kept in its folder, so the run's minutes meet the forecast
    made before them; a run older than its forecast is measured now and says so; a damaged file is refused."""
    from transformer_lib.runs import forecast_run

    cpu, folder = torch.device("cpu"), tmp_path / "run"
    first = forecast_run(folder, TINY, data, cpu, steps=1)
    kept = json.loads((folder / "forecast.json").read_text())
    assert first["kept"] is False and first["before_run"] is True and kept["recipe"] == TINY.to_dict()
    train_translation(TINY, folder, data=data, progress=False, log=quiet, device="cpu")
    assert forecast_run(folder, TINY, data, cpu, steps=1) == {**first, "kept": True}
    other = forecast_run(folder, replace(TINY, dropout=0.0), data, cpu, steps=1)  # another recipe: measured now
    assert (other["kept"], other["before_run"]) == (False, False)
    assert json.loads((folder / "forecast.json").read_text()) == kept  # the run's own forecast stays
    (folder / "forecast.json").unlink()  # a run from before forecasts were kept
    older = forecast_run(folder, TINY, data, cpu, steps=1)
    assert older["before_run"] is False and not (folder / "forecast.json").exists()
    (folder / "forecast.json").write_text('{"recipe": {}, "forecast": {"minutes": "soon"}}')
    with pytest.raises(ValueError, match=r"forecast\.json: not a forecast this package wrote .*delete it"):
        forecast_run(folder, TINY, data, cpu, steps=1)
    assert "soon" in (folder / "forecast.json").read_text()  # refused, not overwritten


def test_the_train_command_forecasts_a_fresh_run_and_not_a_resumed_one(data, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tr, "prepare_data", lambda recipe: data)
    monkeypatch.setitem(tr.RECIPES, "smoke", replace(TINY, epochs=1))
    argv = ["multi30k", "--budget", "smoke", "--out", str(tmp_path / "run"), "--no-test", "--quiet"]
    assert train_cli.main(argv) == 0
    said = capsys.readouterr().out
    assert "forecast on this machine:" in said and "for 1 epoch of training (BLEU scoring aside)" in said
    assert json.loads((tmp_path / "run" / "forecast.json").read_text())["recipe"]["epochs"] == 1
    assert train_cli.main(argv[:2] + ["smoke", "--out", str(tmp_path / "other"), "--no-test", "--quiet",
                                      "--no-forecast"]) == 0
    assert "forecast" not in capsys.readouterr().out
