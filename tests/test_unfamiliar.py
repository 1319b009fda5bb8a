"""The translator says when a sentence is beyond it (chapter 8, section 6): logprob_per_token, translate()'s
UnfamiliarSentence warning, the translate command's note, and the measured threshold (benchmarks/domain.py)."""
import gzip
import io
import json
import warnings
from pathlib import Path

import pytest
import torch

import transformer_lib.translate as translate_cli
from transformer_lib.attention import padding_mask, subsequent_mask
from transformer_lib.runs import WATCHED
from transformer_lib.translation import (UNFAMILIAR_BELOW, UnfamiliarSentence, logprob_per_token, pretrained,
                                         translate)

ROOT = Path(__file__).resolve().parents[1]
SETS = ROOT / "benchmarks" / "domain"
SHARED = ROOT.parent / "shared" / "data" / "multi30k"
CAPTION, EVERYDAY = "Die Katze schläft auf dem Sofa.", "Ich habe heute keine Zeit, weil ich arbeiten muss."


@pytest.fixture(scope="module")
def shipped():
    return pretrained()


def read(name: str) -> list[str]:
    return [line for line in (SETS / name).read_text(encoding="utf-8").splitlines() if line.strip()]


@torch.no_grad()
def step_by_step(model, sentence: str) -> float:
    """The mean log-probability of the greedy translation and its end token, decoded one token at a time by the
    whole model on the growing prefix (no cache, no batch, no padding): what logprob_per_token must give it."""
    src_tok, _ = model.tokenizers
    src_vocab, tgt_vocab = model.vocabs
    src = torch.tensor([src_vocab.encode(src_tok(sentence))])
    tgt, total = [tgt_vocab.bos_idx], []
    while len(tgt) < 40:
        out = model(src, torch.tensor([tgt]), padding_mask(src, src_vocab.pad_idx), subsequent_mask(len(tgt)))
        best = out[0, -1].max(-1)
        total.append(best.values.item())
        if best.indices.item() == tgt_vocab.eos_idx:
            break
        tgt.append(best.indices.item())
    return sum(total) / len(total), tgt[1:]


def test_logprob_per_token_is_the_mean_log_probability_of_each_token_and_the_end_token(shipped):
    """Batched with padding on both sides, it gives each sentence what decoding it alone, a token at a time, gives."""
    model = shipped.model
    src_tok, _ = model.tokenizers
    src_vocab, tgt_vocab = model.vocabs
    sentences = [CAPTION, EVERYDAY, "Ein Hund."]  # of three lengths: padding in every batch position
    expected = [step_by_step(model, s) for s in sentences]
    got = logprob_per_token(model, [src_vocab.encode(src_tok(s)) for s in sentences], [t for _, t in expected],
                            src_vocab.pad_idx, tgt_vocab)
    assert got == pytest.approx([m for m, _ in expected], abs=1e-5)
    alone = logprob_per_token(model, [src_vocab.encode(src_tok(EVERYDAY))], [expected[1][1]], src_vocab.pad_idx,
                              tgt_vocab)
    assert alone == pytest.approx([got[1]], abs=1e-5)


def test_translate_warns_for_a_sentence_unlike_the_captions_and_for_no_caption(shipped):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = translate(shipped.model, [CAPTION, "", EVERYDAY])
    assert out[0] == "The cat is sleeping on the couch." and out[1] == ""  # the translations are unchanged
    (warning,) = [w for w in caught if issubclass(w.category, UnfamiliarSentence)]
    assert warning.message.index == 2 and warning.message.score < UNFAMILIAR_BELOW
    assert str(warning.message).startswith(f"sentence 2 ({EVERYDAY!r}) is unlike the captions the model learned from")
    assert warning.filename == __file__  # it points at the caller's line, not into the library
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnfamiliarSentence)
        assert translate(shipped.model, CAPTION) == out[0]  # a caption: no warning


def test_a_model_without_a_measured_threshold_never_warns(shipped):
    model = shipped.model
    saved = model.unfamiliar_below
    del model.unfamiliar_below
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnfamiliarSentence)
            translate(model, EVERYDAY)
    finally:
        model.unfamiliar_below = saved


def test_the_command_notes_each_unfamiliar_line_on_standard_error_by_its_number(shipped):
    out, err = io.StringIO(), io.StringIO()
    lines = [(1, CAPTION, None), (2, "", None), (3, EVERYDAY, None)]
    assert translate_cli.translate_lines(shipped.model, iter(lines), 5, 64, out, err) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnfamiliarSentence)
        again = translate(shipped.model, EVERYDAY)
    assert out.getvalue().splitlines() == ["The cat is sleeping on the couch.", "", again]
    (note,) = err.getvalue().splitlines()
    assert note.startswith("note: line 3 is unlike the captions the model learned from (its translation scores -")
    assert note.endswith(f"below {UNFAMILIAR_BELOW:.2f}): the translation is likely wrong")


def test_the_threshold_is_the_recorded_percentile_and_the_record_separates_the_sets():
    record = json.loads((ROOT / "benchmarks" / "domain.json").read_text(encoding="utf-8"))
    assert UNFAMILIAR_BELOW == record["threshold"] and record["percentile"] == 1
    beam5 = record["searches"]["beam 5"]
    assert beam5["captions"]["sentences"] == beam5["everyday"]["sentences"] == 100
    assert beam5["test2016"]["sentences"] == 1000 and beam5["test2016"]["flagged_share"] <= 0.02  # out of the way
    assert beam5["everyday"]["flagged"] > 50 * beam5["captions"]["flagged"] + 50  # it separates them
    assert beam5["auc_captions_over_everyday"] > 0.95


def test_a_few_of_the_committed_sentences_score_as_the_record_says(shipped):
    """Ten of each set, translated again: no caption flagged (the record: none of 100), most everyday ones flagged."""
    model = shipped.model
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        translate(model, read("captions.de.txt")[:10] + read("everyday.de.txt")[:10])
    flagged = sorted(w.message.index for w in caught if issubclass(w.category, UnfamiliarSentence))
    assert all(i >= 10 for i in flagged) and len(flagged) >= 6, flagged


def test_the_two_sets_are_the_books_own_one_sentence_a_line_and_not_multi30k():
    captions, everyday = read("captions.de.txt"), read("everyday.de.txt")
    assert len(captions) == len(set(captions)) == 100 and len(everyday) == len(set(everyday)) == 100
    assert not set(captions) & set(everyday)
    if SHARED.is_dir():  # never a corpus sentence committed (where the corpus is at hand to compare)
        corpus = set()
        for name in ("train.de.gz", "val.de.gz", "test_2016_flickr.de.gz"):
            with gzip.open(SHARED / name, "rt", encoding="utf-8") as handle:
                corpus.update(line.strip() for line in handle)
        assert not (set(captions) | set(everyday)) & corpus
        assert WATCHED not in corpus  # chapter 8's caption, translated after every epoch (runs.WATCHED)
