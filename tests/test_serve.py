"""transformer_lib.serve: a checkpoint exported to CTranslate2 computes what our model computes.

CTranslate2 is the optional `serve` dependency; requirements.txt installs it, so CI runs every test here.
"""
import io
import json

import pytest
import torch

from transformer_lib import serve
from transformer_lib.data import Tokenizer, Vocab, detokenize, offline_corpus
from transformer_lib.decoding import translate_tokens
from transformer_lib.model import make_model
from transformer_lib.translation import save_checkpoint

import ctranslate2  # noqa: E402 - in requirements.txt: these tests always run

PAIRS = offline_corpus(30, seed=4)


def vocabularies():
    de, en = Tokenizer("de"), Tokenizer("en")
    src = Vocab.build([de(d) for d, _ in PAIRS], min_freq=1)
    tgt = Vocab.build([en(e) for _, e in PAIRS], min_freq=1)
    return src, tgt


def model_of(src, tgt, **options):
    torch.manual_seed(0)
    model = make_model(len(src), len(tgt), n_layers=2, d_model=32, d_ff=64, n_heads=4, dropout=0.1,
                       pad_idx=tgt.pad_idx, max_len=64, **options).eval()
    return model


OPTIONS = [{}, {"norm_first": True}, {"learned_positions": True}, {"share_embeddings": True, "norm_first": True}]


@pytest.mark.parametrize("options", OPTIONS, ids=["post-norm", "pre-norm", "learned positions", "shared"])
def test_exported_model_scores_targets_like_ours(tmp_path, options):
    src, tgt = vocabularies()
    if options.get("share_embeddings"):
        src = tgt = Vocab.build([Tokenizer("de")(d) + Tokenizer("en")(e) for d, e in PAIRS], min_freq=1)
    model = model_of(src, tgt, **options)
    folder = serve.to_ctranslate2(model, src, tgt, tmp_path / "ct2")
    translator = ctranslate2.Translator(str(folder), device="cpu")
    de, en = Tokenizer("de"), Tokenizer("en")
    sources, targets = [de(d) for d, _ in PAIRS[:8]], [en(e) for _, e in PAIRS[:8]]
    theirs = translator.score_batch(sources, targets)
    for s, t, result in zip(sources, targets, theirs):
        src_ids = torch.tensor([src.encode(s)])
        tgt_ids = torch.tensor([tgt.encode(t, add_bos_eos=True)])
        with torch.no_grad():
            from transformer_lib.attention import subsequent_mask

            log_probs = model(src_ids, tgt_ids[:, :-1], None, subsequent_mask(tgt_ids.size(1) - 1))[0]
        ours = log_probs.gather(-1, tgt_ids[0, 1:, None]).squeeze(-1)  # each target token, </s> included
        assert torch.allclose(torch.tensor(result.log_probs), ours, rtol=1e-4, atol=1e-4), (s, t)


def test_greedy_translations_are_token_identical_in_float32(tmp_path):
    src, tgt = vocabularies()
    model = model_of(src, tgt, norm_first=True)
    model.vocabs, model.lower = (src, tgt), True
    served = serve.CTranslate2Model(serve.to_ctranslate2(model, src, tgt, tmp_path / "ct2"))
    sentences = [d for d, _ in PAIRS]
    ours = translate_tokens(model, sentences, Tokenizer("de"), src, tgt, beam_size=1)
    assert served.translate_tokens(sentences, beam_size=1) == ours
    alone = translate_tokens(model, sentences[:1], Tokenizer("de"), src, tgt, beam_size=1)[0]  # its own length limit
    assert served.translate(sentences[0], beam_size=1) == detokenize(alone)


def test_int8_export_is_smaller_and_translates(tmp_path):
    src, tgt = vocabularies()
    model = model_of(src, tgt)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fp32 = serve.to_ctranslate2(model, src, tgt, tmp_path / "fp32")
    int8 = serve.to_ctranslate2(model, src, tgt, tmp_path / "int8", quantization="int8")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the export copies, never edits
    assert (int8 / "model.bin").stat().st_size < 0.5 * (fp32 / "model.bin").stat().st_size
    assert json.loads((int8 / "transformer_lib.json").read_text())["quantization"] == "int8"
    out = serve.CTranslate2Model(int8, compute_type="int8").translate_tokens([d for d, _ in PAIRS[:4]], beam_size=2)
    assert len(out) == 4 and all(isinstance(t, str) for hyp in out for t in hyp)


def test_export_and_translate_commands(tmp_path, capsys, monkeypatch):
    src, tgt = vocabularies()
    model = model_of(src, tgt, norm_first=True)
    checkpoint = save_checkpoint(tmp_path / "model.safetensors", model, src, tgt, lower=True)
    assert serve.main(["export", str(tmp_path / "ct2"), "--checkpoint", str(checkpoint)]) == 0
    assert "float32" in capsys.readouterr().out
    assert serve.main(["translate", str(tmp_path / "ct2"), PAIRS[0][0], PAIRS[1][0], "--beam", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    model.vocabs, model.lower = (src, tgt), True
    from transformer_lib.translation import translate

    assert lines == translate(model, [PAIRS[0][0], PAIRS[1][0]], beam_size=1)
    # with no sentence given, one per line from standard input, as the translate command reads them
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{PAIRS[0][0]}\n\n{PAIRS[1][0]}\n"))
    assert serve.main(["translate", str(tmp_path / "ct2"), "--beam", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [lines[0], "", lines[1]]


def test_bad_exports_and_folders_are_named(tmp_path):
    src, tgt = vocabularies()
    model = model_of(src, tgt)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="out_dir=.*file.* is a file"):
        serve.to_ctranslate2(model, src, tgt, tmp_path / "file")
    with pytest.raises(ValueError, match="tgt_vocab has"):
        serve.to_ctranslate2(model, src, src, tmp_path / "ct2")
    with pytest.raises(FileNotFoundError, match="is not a model folder written by"):
        serve.CTranslate2Model(tmp_path)
    with pytest.raises(SystemExit, match="is not a model folder"):
        serve.main(["translate", str(tmp_path), "Ein Hund."])


def test_the_serving_benchmark_runs_and_records(tmp_path, monkeypatch, capsys):
    import sys
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import serve as bench

    src, tgt = vocabularies()
    checkpoint = save_checkpoint(tmp_path / "model.safetensors", model_of(src, tgt, norm_first=True), src, tgt)
    monkeypatch.setattr(bench, "load_multi30k", lambda split: PAIRS[:12])
    record = tmp_path / "serve.json"
    assert bench.main(["--checkpoint", str(checkpoint), "--sentences", "6", "--repeats", "1", "--record",
                       str(record)]) == 0
    recorded = json.loads(record.read_text())
    assert recorded["greedy_identical"] == recorded["bleu_sentences"] == 12 and recorded["sentences"] == 6
    fast = (["float32", "bfloat16"] if bench.cpu_has_bf16() else ["float32"]) + ["int8"]
    assert [v["name"] for v in recorded["variants"]] == [
        name for mode in ("greedy", "beam 5") for name in (
            f"ours ({mode})", *(f"ours, FastBeamSearch {d} ({mode})" for d in fast), f"CTranslate2 float32 ({mode})",
            f"CTranslate2 int8 ({mode})")]
    same = {v["name"]: v["same_as_ours"] for v in recorded["variants"]}
    assert same["ours, FastBeamSearch float32 (greedy)"] == same["ours, FastBeamSearch float32 (beam 5)"] == 12
    assert "12 of 12 translations token-identical" in capsys.readouterr().out
    sys.modules.pop("serve", None)


def test_exporting_again_replaces_the_whole_folder(tmp_path):
    """An export over an earlier one leaves no file of it: CTranslate2 would read an old shared_vocabulary.json in
    preference to the new source and target vocabularies, and translate with the wrong words, silently."""
    src, tgt = vocabularies()
    shared = Vocab.build([Tokenizer("de")(d) + Tokenizer("en")(e) for d, e in PAIRS], min_freq=1)
    folder = serve.to_ctranslate2(model_of(shared, shared, share_embeddings=True), shared, shared, tmp_path / "ct2")
    before = sorted(p.name for p in folder.iterdir())
    model = model_of(src, tgt, norm_first=True)
    model.vocabs, model.lower = (src, tgt), True
    serve.to_ctranslate2(model, src, tgt, folder)
    after = sorted(p.name for p in folder.iterdir())
    assert "shared_vocabulary.json" in before and "shared_vocabulary.json" not in after
    assert not list(tmp_path.glob(".ct2*")), "no temporary folder is left behind"
    sentences = [d for d, _ in PAIRS[:6]]
    ours = translate_tokens(model, sentences, Tokenizer("de"), src, tgt, beam_size=1)
    assert serve.CTranslate2Model(folder).translate_tokens(sentences, beam_size=1) == ours


def test_export_refuses_a_folder_of_other_files_and_names_unwritable_targets(tmp_path, capsys):
    src, tgt = vocabularies()
    model = model_of(src, tgt)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="holds files that are not a model written by export"):
        serve.to_ctranslate2(model, src, tgt, tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    checkpoint = save_checkpoint(tmp_path / "model.safetensors", model, src, tgt, lower=True)
    (tmp_path / "file").write_text("x")
    for target in (tmp_path / "file" / "below", tmp_path / "mine"):
        with pytest.raises(SystemExit, match=f"error: cannot write {target}"):
            serve.main(["export", str(target), "--checkpoint", str(checkpoint)])


def test_blank_input_translates_to_an_empty_line(tmp_path):
    src, tgt = vocabularies()
    model = model_of(src, tgt, norm_first=True)
    served = serve.CTranslate2Model(serve.to_ctranslate2(model, src, tgt, tmp_path / "ct2"))
    got = served.translate_tokens(["", "  \t", PAIRS[0][0], " "], beam_size=2)
    assert got[0] == got[1] == got[3] == [] and got[2]
    assert served.translate("", beam_size=1) == ""


def test_a_damaged_folder_and_a_too_long_sentence_are_named(tmp_path):
    src, tgt = vocabularies()
    model = model_of(src, tgt)
    folder = serve.to_ctranslate2(model, src, tgt, tmp_path / "ct2")
    served = serve.CTranslate2Model(folder)
    with pytest.raises(ValueError, match="sentence 1 has 70 tokens, more than the model's 64 positions"):
        served.translate_tokens(["Ein Hund.", " ".join(["Hund"] * 70)])
    (folder / "model.bin").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="is not a model folder CTranslate2 can read"):
        serve.CTranslate2Model(folder)
    with pytest.raises(SystemExit, match="error: .* is not a model folder CTranslate2 can read"):
        serve.main(["translate", str(folder), "Ein Hund."])
    (folder / "transformer_lib.json").write_text("[" * 100_000)
    with pytest.raises(ValueError, match="is not a model folder CTranslate2 can read"):
        serve.CTranslate2Model(folder)


def test_exporting_again_never_deletes_a_file_export_did_not_write(tmp_path):
    """A user's file beside an export's own files is refused, not deleted with the old export."""
    src, tgt = vocabularies()
    model = model_of(src, tgt)
    folder = serve.to_ctranslate2(model, src, tgt, tmp_path / "ct2")
    assert set(json.loads((folder / "transformer_lib.json").read_text())["files"]) >= {"model.bin", "config.json"}
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="holds notes.txt, not written there by export.*nothing was changed"):
        serve.to_ctranslate2(model, src, tgt, folder)
    assert (folder / "notes.txt").read_text() == "keep me" and (folder / "model.bin").is_file()
    checkpoint = save_checkpoint(tmp_path / "model.safetensors", model, src, tgt)
    with pytest.raises(SystemExit, match="^error: cannot write .*holds notes.txt"):
        serve.main(["export", str(folder), "--checkpoint", str(checkpoint)])
    assert (folder / "notes.txt").read_text() == "keep me"


def test_an_export_removes_the_temporary_folders_a_killed_export_left(tmp_path):
    """A killed export leaves .ct2.PID.XXXXXXXX.tmp (or .old) beside its folder; the next export removes those whose
    process is gone, and nothing else."""
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = [tmp_path / f".ct2.{gone.pid}.abcd1234.tmp", tmp_path / f".ct2.{gone.pid}.wxyz5678.old"]
    for folder in left:
        folder.mkdir()
        (folder / "model.bin").write_bytes(b"half")
    kept = [tmp_path / f".ct2.{gone.pid}.user.tmp", tmp_path / f".ct2.{gone.pid}.abcd1234.txt"]
    kept[0].mkdir()
    kept[1].write_text("a user's")
    src, tgt = vocabularies()
    serve.to_ctranslate2(model_of(src, tgt), src, tgt, tmp_path / "ct2")
    assert not any(folder.exists() for folder in left) and all(path.exists() for path in kept)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ct2", *(p.name for p in kept)])


def test_export_refuses_another_models_vocabularies_and_a_subword_model_without_tokenizers(tmp_path):
    src, tgt = vocabularies()
    model = model_of(src, tgt)
    model.vocabs = (src, tgt)
    other = Vocab([*Vocab.SPECIALS, *reversed(src.itos[4:])])  # the same size, other words
    with pytest.raises(ValueError, match="src_vocab is not the vocabulary the model carries"):
        serve.to_ctranslate2(model, other, tgt, tmp_path / "ct2")
    subwords = Vocab([*Vocab.SPECIALS, *(f"\u2581w{i}" for i in range(len(src) - 4))])
    bare = model_of(subwords, tgt)
    with pytest.raises(ValueError, match="src_vocab holds subword symbols, but model carries no tokenizers"):
        serve.to_ctranslate2(bare, subwords, tgt, tmp_path / "ct2")
    assert not (tmp_path / "ct2").exists()
