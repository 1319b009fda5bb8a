"""Chapter 8 with chapter 6's subwords: a recipe with `subwords` learns BPE from the training pairs, trains, and its
checkpoint brings the tokenizers back, so translate, the translate and evaluate commands and the CTranslate2 export
work with it; a checkpoint without tokenizers (the shipped model's kind) still loads as whole words."""
from dataclasses import replace

import pytest
import torch

import transformer_lib.translation as tr
from transformer_lib.runs import epoch_batches
from transformer_lib import evaluate as evaluate_cli
from transformer_lib import translate as translate_cli
from transformer_lib.data import SubwordTokenizer, Tokenizer, offline_corpus
from transformer_lib.translation import (Recipe, bleu, evaluate_bleu, load_checkpoint, save_checkpoint, translate,
                                         train_translation)

SUBWORDS = Recipe(n_layers=1, d_model=32, d_ff=64, n_heads=4, dropout=0.1, subwords=120, shared_vocab=True,
                  max_tokens=600, epochs=2, warmup=20, factor=2.0, beam_size=2, average_last=2, train_pairs=300,
                  eval_pairs=20)


def fake_splits(split, root=None, download=True):
    """The offline corpus as the three splits, so that no test depends on Multi30k."""
    seed = {"train": 0, "val": 1, "test2016": 2}[split]
    return offline_corpus(300 if split == "train" else 20, seed), f"offline {split}"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tr, "load_translation_data", fake_splits)
        data = tr.prepare_data(SUBWORDS)
    out = tmp_path_factory.mktemp("subword-run")
    return train_translation(SUBWORDS, out, data=data, progress=False, log=lambda *_: None, device="cpu")


def test_a_subword_recipe_learns_one_bpe_for_both_languages_and_every_symbol_gets_an_id(run):
    data = run.data
    assert isinstance(data.src_tok, SubwordTokenizer) and isinstance(data.tgt_tok, SubwordTokenizer)
    assert data.src_tok.bpe is data.tgt_tok.bpe and len(data.src_tok.bpe.merges) == 120
    assert data.src_vocab.itos == data.tgt_vocab.itos == data.src_tok.bpe.vocab().itos
    assert all(data.src_vocab.unk_idx not in src + tgt for src, tgt in data.train)  # no <unk> in training
    assert run.model.src_embed[0].embedding.weight is run.model.generator.proj.weight  # tied: one table for three


def test_separate_subword_vocabularies_learn_one_bpe_per_language(monkeypatch):
    monkeypatch.setattr(tr, "load_translation_data", fake_splits)
    data = tr.prepare_data(replace(SUBWORDS, shared_vocab=False))
    assert data.src_tok.bpe is not data.tgt_tok.bpe
    assert "hund" in "".join(data.src_vocab.itos) and "hund" not in "".join(data.tgt_vocab.itos)


def test_the_checkpoint_brings_back_the_subword_tokenizers_and_translates(run):
    model, src_vocab, tgt_vocab, info = load_checkpoint(run.path)
    src_tok, tgt_tok = model.tokenizers
    assert isinstance(src_tok, SubwordTokenizer) and src_tok.lang == "de" and tgt_tok.lang == "en"
    assert src_tok.bpe.merges == run.data.src_tok.bpe.merges and info["recipe"]["subwords"] == 120
    text = translate(model, "Ein kleiner Hund läuft im Park.", beam_size=2)
    assert isinstance(text, str) and text == translate(run.model, "Ein kleiner Hund läuft im Park.", beam_size=2)
    assert "▁" not in text and text[:1].isupper()


def test_bleu_of_subwords_scores_the_words_they_spell(run):
    tok = run.data.tgt_tok
    references = ["A dog runs in the park.", "Two children play with a ball on the beach."]
    score = bleu([tok(r) for r in references], references, tgt_tok=tok)
    assert round(score.sacrebleu, 6) == round(score.tokenized, 6) == 100.0
    words = bleu([Tokenizer("en")(r) for r in references[:1]] + [["two", "children", "play"]], references)
    subwords = bleu([tok(references[0]), tok("two children play")], references, tgt_tok=tok)
    assert subwords.tokenized == pytest.approx(words.tokenized)
    val = evaluate_bleu(run.model, run.data.val, run.data.src_tok, run.data.src_vocab, run.data.tgt_vocab, 1,
                        tgt_tok=run.data.tgt_tok)
    assert 0 <= val.sacrebleu <= 100 and 0 <= val.tokenized <= 100


def test_the_translate_and_evaluate_commands_read_the_tokenizers_from_the_checkpoint(run, monkeypatch, capsys):
    assert translate_cli.main(["--checkpoint", str(run.path), "--beam", "1", "Ein Hund spielt."]) == 0
    out = capsys.readouterr().out.strip()
    model = load_checkpoint(run.path)[0]
    assert out == translate(model, "Ein Hund spielt.", beam_size=1)
    monkeypatch.setattr("transformer_lib.data.load_multi30k", lambda split: offline_corpus(20, 1))
    assert evaluate_cli.main(["--checkpoint", str(run.path), "--split", "val", "--beam", "1"]) == 0
    assert "sacreBLEU" in capsys.readouterr().out


def test_the_ctranslate2_export_of_a_subword_model_translates_like_ours(run, tmp_path):
    from transformer_lib.serve import CTranslate2Model, to_ctranslate2

    model, src_vocab, tgt_vocab, _ = load_checkpoint(run.path)
    served = CTranslate2Model(to_ctranslate2(model, src_vocab, tgt_vocab, tmp_path / "ct2"))
    sentences = [de for de, _ in offline_corpus(12, 5)]
    assert served.translate(sentences, beam_size=1) == translate(model, sentences, beam_size=1)


def test_a_checkpoint_without_tokenizers_loads_as_whole_words(tmp_path):
    from safetensors.torch import save_file

    from transformer_lib.data import Vocab
    from transformer_lib.files import read_safetensors, write_safetensors
    from transformer_lib.model import make_model

    src_vocab, tgt_vocab = Vocab.build([["ein", "hund"]], 1), Vocab.build([["a", "dog"]], 1)
    model = make_model(len(src_vocab), len(tgt_vocab), n_layers=1, d_model=16, d_ff=32, n_heads=2)
    tensors, metadata = read_safetensors(save_checkpoint(tmp_path / "new.safetensors", model, src_vocab, tgt_vocab))
    # a file from before checkpoints stored their tokenizers: today's metadata without that entry, signed again
    old = {k: v for k, v in metadata.items() if k not in ("tokenizers", "sha256")}
    assert set(metadata) - set(old) == {"tokenizers", "sha256"}
    path = write_safetensors(tmp_path / "old.safetensors", lambda tmp, meta: save_file(tensors, str(tmp), meta), old)
    loaded = load_checkpoint(path)[0]
    src_tok, tgt_tok = loaded.tokenizers
    assert type(src_tok) is Tokenizer and type(tgt_tok) is Tokenizer
    assert src_tok.lang == "de" and tgt_tok.lang == "en" and src_tok.lower is True
    assert isinstance(translate(loaded, "Ein Hund.", beam_size=1), str)


def test_the_vocabulary_benchmark_runs_and_records(tmp_path, monkeypatch, capsys):
    import json
    import sys
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import subwords as bench

    monkeypatch.setattr(tr, "load_translation_data", fake_splits)
    record = tmp_path / "subwords.json"
    names = ["words, one per language", "BPE 4,000, shared and tied"]
    args = ["--budget", "smoke", "--epochs", "1", "--only", *names, "--seeds", "3", "4", "--record", str(record)]
    assert bench.main(args) == 0
    recorded = json.loads(record.read_text())
    assert [v["name"] for v in recorded["variants"]] == names and recorded["recipe"]["epochs"] == 1
    assert recorded["seeds"] == [3, 4] and recorded["jobs"] == 1
    words, bpe = recorded["variants"]
    assert bpe["vocab_sizes"][0] == bpe["vocab_sizes"][1] and bpe["unk_en"] == 0 and words["subwords"] is None
    for v in recorded["variants"]:
        assert [r["seed"] for r in v["runs"]] == [3, 4] and all(len(r["history"]) == 1 for r in v["runs"])
        assert all(0 <= r["val_sacrebleu"] <= 100 for r in v["runs"])
        assert v["val_sacrebleu"]["n"] == 2 and v["val_sacrebleu"]["min"] <= v["val_sacrebleu"]["mean"] <= v["val_sacrebleu"]["max"]
    assert words["runs"][0]["history"] != words["runs"][1]["history"]  # another seed, another run
    out = capsys.readouterr().out
    assert "BPE 4,000, shared and tied     seed 4" in out and "2 seeds)" in out
    sys.modules.pop("subwords", None)


def test_the_recipe_benchmark_chooses_on_validation_and_scores_test_for_the_chosen_run_alone(tmp_path, monkeypatch,
                                                                                           capsys):
    import json
    import shutil
    import sys
    from pathlib import Path


    from transformer_lib import record_tables


    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import recipes as bench

    monkeypatch.setattr(tr, "load_translation_data", fake_splits)
    monkeypatch.setattr(bench, "BASE", replace(SUBWORDS, epochs=1))
    monkeypatch.setattr(bench, "CANDIDATES", {"two epochs": dict(epochs=2), "BPE-dropout": dict(bpe_dropout=0.2)})
    monkeypatch.setattr(bench, "run_workers", lambda names, out, threads: [  # in this process, one after the other
        bench.train_one(name, out, threads) or 0 for name in names])
    before = {"name": "before", "train_seconds": 60.0, "val_sacrebleu": -1.0, "val_tokenized": -1.0, "kept": "last",
              "scores": {}, "history": []}
    monkeypatch.setattr(bench, "base_run", lambda record: before)  # below every candidate
    record = tmp_path / "recipes.json"
    args = ["--out", str(tmp_path / "runs"), "--record", str(record)]
    assert bench.main(args) == 0
    recorded = json.loads(record.read_text())
    runs = record_tables.recipe_runs(recorded)
    assert [r["name"] for r in runs] == ["before", "two epochs", "BPE-dropout"]
    chosen = max(runs, key=lambda r: r["val_sacrebleu"])
    assert recorded["winner"] == chosen["name"] and [r for r in runs if "test_sacrebleu" in r] == [chosen]
    assert [len(r["history"]) for r in runs[1:]] == [2, 1] and recorded["candidates"][1]["changes"] == {"bpe_dropout": 0.2}
    shown = record_tables.recipes_markdown(recorded)
    assert shown.count("**") == 2 and "| BPE-dropout | `bpe_dropout=0.2` |" in shown and "not scored" in shown
    assert bench.main(args) == 0
    assert f"chosen on validation: {chosen['name']}" in capsys.readouterr().out
    assert json.loads(record.read_text())["candidates"] == recorded["candidates"]  # finished runs read back
    monkeypatch.setattr(bench, "base_run", lambda record: {**before, "val_sacrebleu": 101.0})  # nothing beats it
    assert bench.main(args) == 0
    again = json.loads(record.read_text())
    assert again["winner"] == "before" and not any("test_sacrebleu" in r for r in record_tables.recipe_runs(again))
    # a candidate added later trains alone (--only); the others keep their recorded rows, and the seeds stay
    monkeypatch.setattr(bench, "base_run", lambda record: before)
    seeds = {"seeds": [0, 1, 2], "recipes": [{"name": recorded["winner"], "val_sacrebleu": {"mean": 1.0}}]}
    record.write_text(json.dumps({**recorded, "seeds": seeds}))
    monkeypatch.setitem(bench.CANDIDATES, "later", dict(epochs=2, smoothing=0.0))
    shutil.rmtree(tmp_path / "runs" / "two-epochs")  # read from the record, never trained again
    assert bench.main(args + ["--only", "later"]) == 0
    later = json.loads(record.read_text())
    assert [r["name"] for r in later["candidates"]] == ["two epochs", "BPE-dropout", "later"]
    assert later["seeds"] == seeds and not (tmp_path / "runs" / "two-epochs").exists()
    for old, new in zip(recorded["candidates"], later["candidates"]):
        assert {k: v for k, v in old.items() if not k.startswith("test_")} == {
            k: v for k, v in new.items() if not k.startswith("test_")}
    runs = record_tables.recipe_runs(later)
    leader = max(runs, key=lambda r: r["val_sacrebleu"])
    # from one seed, "later" never replaces the run chosen before (not in the seeds): it waits for them
    assert later["winner"] == chosen["name"] and [r for r in runs if "test_sacrebleu" in r] == [
        next(r for r in later["candidates"] if r["name"] == chosen["name"])]
    assert later.get("awaiting_seeds") == ("later" if leader["name"] == "later" else None)
    assert next(r for r in later["candidates"] if r["name"] == chosen["name"])["test_sacrebleu"] == chosen[
        "test_sacrebleu"]  # as recorded by the call that chose it
    sys.modules.pop("recipes", None)


def test_a_candidate_that_leads_from_one_seed_replaces_the_chosen_run_only_when_its_mean_over_seeds_leads_too(
        monkeypatch):
    import sys
    from pathlib import Path


    from transformer_lib import record_tables


    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import recipes as bench

    def run(name, val):
        return {"name": name, "val_sacrebleu": val, "val_tokenized": val, "train_seconds": 60.0, "kept": "last"}

    def seeds(**means):
        return {"seeds": {"recipes": [{"name": n, "val_sacrebleu": {"mean": m}} for n, m in means.items()]}}

    before, chosen, new = run("before", 41.0), run("chosen", 43.0), run("new", 44.0)
    assert bench.choose([chosen, new], before, {"winner": "chosen"}) == (new, None)  # no seeds yet: validation alone
    waits = {"winner": "chosen", **seeds(before=42.0, chosen=42.5)}
    assert bench.choose([chosen, new], before, waits) == (chosen, "new")  # not compared from seeds yet
    assert bench.choose([chosen, new], before, {**waits, **seeds(before=42.0, chosen=42.5, new=42.4)}) == (
        chosen, "new")  # its mean trails
    assert bench.choose([chosen, new], before, {**waits, **seeds(before=42.0, chosen=42.5, new=42.6)}) == (new, None)
    assert bench.choose([chosen, run("new", 42.0)], before, waits) == (chosen, None)  # trails from its one seed
    assert bench.choose([chosen, new], before, {"winner": "gone", **seeds(chosen=42.5)}) == (new, None)
    shown = record_tables.recipes_markdown({"machine": "here", "processes": 2, "threads": 1, "base": bench.BASE.to_dict(),
                                     "base_run": before, "candidates": [chosen, new], "winner": "chosen",
                                     "awaiting_seeds": "new"})
    assert "new leads on validation from this one seed (44.00 against 43.00)" in shown
    assert "| last | **43.00 / 43.00** |" in shown  # the chosen run stays in bold
    sys.modules.pop("recipes", None)


def test_the_recipe_benchmark_trains_every_recipe_from_each_seed_and_adds_them_to_the_record(tmp_path, monkeypatch,
                                                                                         capsys):
    import json
    import sys
    from pathlib import Path



    from transformer_lib import comparisons

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import recipes as bench

    monkeypatch.setattr(tr, "load_translation_data", fake_splits)
    monkeypatch.setattr(bench, "BASE", replace(SUBWORDS, epochs=1))
    monkeypatch.setattr(bench, "CANDIDATES", {"two epochs": dict(epochs=2, fast=True)})
    record = tmp_path / "recipes.json"
    kept = {"winner": "two epochs", "candidates": [{"name": "two epochs"}], "base_run": None}
    record.write_text(json.dumps(kept))
    args = ["--seeds", "0", "1", "--float32", "--out", str(tmp_path / "runs"), "--record", str(record)]
    assert bench.main(args) == 0
    recorded = json.loads(record.read_text())
    assert {k: recorded[k] for k in kept} == kept  # the runs that made the shipped model stay as they were
    seeds = recorded["seeds"]
    assert seeds["seeds"] == [0, 1] and seeds["float32"] is True
    assert [r["name"] for r in seeds["recipes"]] == [bench.BEFORE, "two epochs"]
    for r in seeds["recipes"]:
        assert [run["seed"] for run in r["runs"]] == [0, 1]
        assert r["val_sacrebleu"] == comparisons.seed_summary(run["val_sacrebleu"] for run in r["runs"])
    assert [len(run["val_bleu_by_epoch"]) for run in seeds["recipes"][1]["runs"]] == [2, 2]
    before = bench.slug(bench.BEFORE)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        f"{before}-seed0", f"{before}-seed1", "two-epochs-seed0", "two-epochs-seed1"]
    close, beaten = comparisons.recipe_seeds_verdict(recorded)
    assert close + beaten == [bench.BEFORE]
    shown = comparisons.recipe_seeds_markdown(recorded)
    assert "| two epochs |" in shown and "2 seeds)" in shown and "float32 throughout" in shown
    assert "validation sacreBLEU" in capsys.readouterr().out
    sys.modules.pop("recipes", None)


def test_the_train_command_trains_on_subwords_when_asked(tmp_path, monkeypatch, capsys):
    from transformer_lib import train as train_cli

    monkeypatch.setattr(tr, "load_translation_data", fake_splits)
    monkeypatch.setitem(tr.RECIPES, "smoke", replace(SUBWORDS, subwords=None, shared_vocab=False, epochs=1))
    out = tmp_path / "run"
    assert train_cli.main(["multi30k", "--budget", "smoke", "--subwords", "80", "--out", str(out), "--quiet"]) == 0
    model, _, _, info = load_checkpoint(out / "model.safetensors")
    assert info["recipe"]["subwords"] == 80 and info["recipe"]["shared_vocab"] is True
    assert isinstance(model.tokenizers[0], SubwordTokenizer) and len(model.tokenizers[0].bpe.merges) == 80
    assert "test2016 (20 pairs)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        train_cli.main(["multi30k", "--budget", "smoke", "--subwords", "-1", "--out", str(out)])


def test_bpe_dropout_gives_every_epoch_its_own_cut_and_a_resumed_run_ends_where_an_uninterrupted_one_does(
        monkeypatch, tmp_path):
    monkeypatch.setattr(tr, "load_translation_data", fake_splits)
    recipe = replace(SUBWORDS, bpe_dropout=0.2)
    data = tr.prepare_data(recipe)
    assert data.train_text == fake_splits("train")[0] and len(data.train_text) == len(data.train)
    epoch_1, epoch_1_again, epoch_2 = (epoch_batches(recipe, data, e, 0, 1, "cpu") for e in (1, 1, 2))
    plain = epoch_batches(SUBWORDS, data, 1, 0, 1, "cpu")
    ids = lambda batches: sorted(tuple(row[row != 1].tolist()) for b in batches for row in b.src)  # noqa: E731
    assert ids(epoch_1) == ids(epoch_1_again) != ids(epoch_2)
    assert ids(plain) == sorted(tuple(src) for src, _ in data.train)  # no dropout: the cut prepare_data made
    assert sum(map(len, ids(epoch_1))) > sum(map(len, ids(plain)))  # merges left out: more, smaller pieces
    texts = sorted(data.src_tok.decode(data.src_vocab.decode(row)) for row in ids(epoch_2))
    assert texts == sorted(de.lower() for de, _ in data.train_text)  # every cut spells its sentence
    quiet = lambda *_: None  # noqa: E731
    whole = train_translation(recipe, tmp_path / "whole", data=data, progress=False, log=quiet, device="cpu")
    train_translation(replace(recipe, epochs=1), tmp_path / "half", data=data, progress=False, log=quiet, device="cpu")
    resumed = train_translation(recipe, tmp_path / "half", data=data, progress=False, log=quiet, device="cpu")
    for a, b in zip(resumed.model.state_dict().values(), whole.model.state_dict().values()):
        assert torch.equal(a, b)
    assert load_checkpoint(whole.path)[3]["recipe"]["bpe_dropout"] == 0.2


def test_bpe_dropout_needs_subwords_and_the_raw_training_pairs(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="bpe_dropout=0.1 leaves out BPE merges, but subwords is None"):
        replace(SUBWORDS, subwords=None, bpe_dropout=0.1)
    with pytest.raises(ValueError, match="bpe_dropout must be a probability"):
        replace(SUBWORDS, bpe_dropout=1.0)
    monkeypatch.setattr(tr, "load_translation_data", fake_splits)
    data = replace(tr.prepare_data(SUBWORDS), train_text=[])
    with pytest.raises(ValueError, match="data.train_text holds 0 of the 300"):
        train_translation(replace(SUBWORDS, bpe_dropout=0.1), tmp_path, data=data, progress=False, device="cpu")


def test_a_seed_comparison_merges_into_the_recorded_one_only_when_measured_alike(monkeypatch):
    import sys
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import recipes as bench

    def comparison(machine, **means):
        return {"machine": machine, "device": "cuda", "float32": True, "seeds": [0, 1, 2],
                "recipes": [{"name": n, "val_sacrebleu": {"mean": m}} for n, m in means.items()]}

    recorded = comparison("H200", before=42.0, chosen=42.5, other=41.0)
    again = comparison("H200", before=42.1, new=42.6)  # before trained again, new added, chosen and other kept
    merged = bench.merged_seeds(recorded, again)
    assert [(r["name"], r["val_sacrebleu"]["mean"]) for r in merged["recipes"]] == [
        ("before", 42.1), ("chosen", 42.5), ("other", 41.0), ("new", 42.6)]
    assert {k: v for k, v in merged.items() if k != "recipes"} == {k: v for k, v in again.items() if k != "recipes"}
    assert [r["name"] for r in recorded["recipes"]] == ["before", "chosen", "other"]  # the record read is untouched
    for field, value in (("machine", "A100"), ("device", "cpu"), ("float32", False), ("seeds", [0, 1])):
        assert bench.merged_seeds(recorded, {**again, field: value}) == {**again, field: value}  # means don't mix
    assert bench.merged_seeds(None, again) is again
    sys.modules.pop("recipes", None)


# ---- a subword model's tokenizers and vocabularies, and what goes wrong when others are passed


def shipped():
    from transformer_lib.checkpoint import pretrained_path

    return load_checkpoint(pretrained_path())


PAIRS = [("Ein Hund rennt durch den Schnee.", "A dog runs through the snow."),
         ("Zwei Männer spielen Fußball.", "Two men play soccer.")]


def test_evaluate_bleu_scores_a_subword_model_with_its_own_tokenizers_or_refuses_whole_words():
    model, src_vocab, tgt_vocab, _ = shipped()
    src_tok, tgt_tok = model.tokenizers
    left = evaluate_bleu(model, PAIRS, src_tok, src_vocab, tgt_vocab, 1)  # tgt_tok left at its default
    given = evaluate_bleu(model, PAIRS, src_tok, src_vocab, tgt_vocab, 1, tgt_tok=tgt_tok)
    assert left == given and given.sacrebleu > 30
    with pytest.raises(ValueError, match="^tgt_tok cuts whole words, but the vocabulary holds subword symbols"):
        evaluate_bleu(model, PAIRS, src_tok, src_vocab, tgt_vocab, 1, tgt_tok=Tokenizer("en"))
    del model.tokenizers  # a model that carries none: the whole-word default is refused, not scored
    with pytest.raises(ValueError, match="^tgt_tok=None cuts whole words"):
        evaluate_bleu(model, PAIRS, src_tok, src_vocab, tgt_vocab, 1)
    hyps = [["▁a", "▁dog"], ["▁two", "▁men"]]
    with pytest.raises(ValueError, match="subword symbols .* tgt_tok"):
        bleu(hyps, [en for _, en in PAIRS])


def test_translate_tokens_refuses_a_tokenizer_that_does_not_cut_the_models_symbols(run):
    from transformer_lib.data import BPE
    from transformer_lib.decoding import translate_tokens

    model, src_vocab, tgt_vocab, _ = load_checkpoint(run.path)
    with pytest.raises(ValueError, match="^src_tok cuts whole words, but the vocabulary holds subword symbols"):
        translate_tokens(model, ["Ein Hund rennt."], Tokenizer("de"), src_vocab, tgt_vocab, 1)
    other = SubwordTokenizer("de", BPE(run.data.src_tok.bpe.merges[:50], run.data.src_tok.bpe.alphabet))
    with pytest.raises(ValueError, match="^src_tok's BPE makes .* symbols that are not the vocabulary's"):
        translate_tokens(model, ["Ein Hund rennt."], other, src_vocab, tgt_vocab, 1)


def test_vocabularies_other_than_the_ones_a_model_carries_are_refused_naming_the_argument(run, tmp_path):
    from transformer_lib.data import Vocab
    from transformer_lib.decoding import translate_tokens

    model, src_vocab, tgt_vocab, _ = load_checkpoint(run.path)
    src_tok, tgt_tok = model.tokenizers
    other = Vocab([*Vocab.SPECIALS, *reversed(tgt_vocab.itos[4:])])  # another model's: the same size, other ids
    assert len(other) == len(tgt_vocab)
    for call in (lambda: translate(model, "Ein Hund.", src_vocab=src_vocab, tgt_vocab=other),
                 lambda: translate_tokens(model, ["Ein Hund."], src_tok, src_vocab, other, 1),
                 lambda: evaluate_bleu(model, PAIRS, src_tok, src_vocab, other, 1),
                 lambda: save_checkpoint(tmp_path / "m.safetensors", model, src_vocab, other)):
        with pytest.raises(ValueError, match="^tgt_vocab is not the vocabulary the model carries"):
            call()
    with pytest.raises(ValueError, match="^src_vocab is not the vocabulary the model carries"):
        translate(model, "Ein Hund.", src_vocab=other, tgt_vocab=tgt_vocab)
    assert not (tmp_path / "m.safetensors").exists()
    same = Vocab(list(tgt_vocab.itos))  # equal, though not the same object: accepted
    assert translate(model, "Ein Hund.", 1, src_vocab, same) == translate(model, "Ein Hund.", 1)


def test_a_loaded_subword_model_saved_again_loads_with_its_merges(tmp_path):
    model, src_vocab, tgt_vocab, _ = shipped()
    model.lower = False  # what the model carries goes into the file, not the default
    path = save_checkpoint(tmp_path / "again.safetensors", model, *model.vocabs)
    again, *_ = load_checkpoint(path)
    assert [t.to_dict() for t in again.tokenizers] == [t.to_dict() for t in model.tokenizers] and again.lower is False
    model.lower = True
    sentence = "Eine Frau liest ein Buch im Park."
    assert translate(again, sentence, 1, lower=True) == translate(model, sentence, 1)
    with pytest.raises(ValueError, match=r"^tokenizers\[0\] cuts whole words"):  # refused before a file is written
        save_checkpoint(tmp_path / "words.safetensors", model, *model.vocabs,
                        tokenizers=(Tokenizer("de"), Tokenizer("en")))
    with pytest.raises(ValueError, match=r"^tokenizers\[0\] is for lang='en'"):
        save_checkpoint(tmp_path / "words.safetensors", model, *model.vocabs, tokenizers=model.tokenizers[::-1])
    assert not (tmp_path / "words.safetensors").exists()
