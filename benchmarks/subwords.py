# Hand-written benchmark (not generated from a notebook).
"""Words or subwords: chapter 8's recipe trained with each kind of vocabulary, on the same budget, in one run.

    python benchmarks/subwords.py [--budget cpu] [--epochs N] [--threads 1] [--record]

Every variant is the budget's recipe (RECIPES[budget], chapter 8) with one change to its vocabulary: whole words
(one per language, or one shared by both with tied embeddings), or chapter 6's BPE with a few numbers of merges,
one BPE shared by both languages with tied embeddings. Each is trained from the same seed on the same
data, and reports what the chapter's table shows: parameters, the <unk> rate and tokens per sentence on test2016,
training seconds, sacreBLEU with beam search on validation and on test2016. Validation BLEU is the one to choose
by (the training run's own beam-search score of its last epoch); test2016 is reported, never tuned on.
`--record` writes benchmarks/subwords.json, which chapter 6 renders.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import replace

import torch

from transformer_lib.runtime import default_device, machine, torch_threads
from transformer_lib.translation import RECIPES, evaluate_bleu, prepare_data, train_translation

from recording import add_common_options, require_at_least_one, save_record

VARIANTS = {  # name -> the recipe's vocabulary fields
    "words, one per language": dict(subwords=None, shared_vocab=False),
    "words, shared and tied": dict(subwords=None, shared_vocab=True),
    "BPE 4,000, shared and tied": dict(subwords=4000, shared_vocab=True),
    "BPE 8,000, shared and tied": dict(subwords=8000, shared_vocab=True),
    "BPE 16,000, shared and tied": dict(subwords=16000, shared_vocab=True),
}


def unknown_rate(tok, vocab, sentences: list[str]) -> float:
    tokens = [t for s in sentences for t in tok(s)]
    return sum(vocab.stoi.get(t, vocab.unk_idx) == vocab.unk_idx for t in tokens) / len(tokens)


def measure(name: str, recipe, device) -> dict:
    """Train one variant and score it; the row of the table."""
    data = prepare_data(recipe)
    de, en = [d for d, _ in data.test], [e for _, e in data.test]
    with tempfile.TemporaryDirectory() as out:
        run = train_translation(recipe, out, data=data, progress=False, log=lambda *_: None, device=device)
        test = evaluate_bleu(run.model, data.test, data.src_tok, data.src_vocab, data.tgt_vocab, recipe.beam_size,
                             recipe.length_penalty, recipe.lower, data.tgt_tok)
    row = {"name": name, "subwords": recipe.subwords, "shared_vocab": recipe.shared_vocab,
           "vocab_sizes": [len(data.src_vocab), len(data.tgt_vocab)],
           "parameters": sum(p.numel() for p in run.model.parameters()),
           "unk_de": round(unknown_rate(data.src_tok, data.src_vocab, de), 6),
           "unk_en": round(unknown_rate(data.tgt_tok, data.tgt_vocab, en), 6),
           "tokens_per_sentence_en": round(sum(len(data.tgt_tok(s)) for s in en) / len(en), 2),
           "train_seconds": run.history[-1]["seconds"], "val_sacrebleu": run.scores["last"]["sacrebleu"],
           "test_sacrebleu": round(test.sacrebleu, 2), "test_tokenized": round(test.tokenized, 2),
           "history": run.history}
    print(f"{name:<30} {row['vocab_sizes'][0]:>6,}/{row['vocab_sizes'][1]:<6,} {row['parameters']:>11,} "
          f"{row['unk_de']:>7.2%} {row['unk_en']:>7.2%} {row['tokens_per_sentence_en']:>6.1f} "
          f"{row['train_seconds']:>8.0f} {row['val_sacrebleu']:>8.2f} {row['test_sacrebleu']:>8.2f}", flush=True)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", choices=sorted(RECIPES), default="cpu", help="whose recipe (default cpu)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs (default: the recipe's)")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), default=list(VARIANTS), metavar="NAME",
                        help="run only these variants")
    add_common_options(parser, "subwords.json")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "threads", *(["epochs"] if args.epochs is not None else []))
    with torch_threads(args.threads):
        return _run(args)


def _run(args) -> int:
    base = RECIPES[args.budget]
    base = replace(base, epochs=args.epochs or base.epochs, average_last=1)  # the last epoch, for every variant
    device = default_device()
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    print(f"machine: {machine()}, {torch.get_num_threads()} thread(s), device {device}, load average {load}; "
          f"recipe {args.budget} with {base.epochs} epochs, beam {base.beam_size}")
    print(f"{'vocabulary':<30} {'sizes de/en':>13} {'parameters':>11} {'<unk>de':>7} {'<unk>en':>7} {'tok/en':>6} "
          f"{'train s':>8} {'val':>8} {'test':>8}")
    rows = [measure(name, replace(base, **VARIANTS[name]), device) for name in args.only]
    record = {"machine": machine(), "threads": torch.get_num_threads(), "device": str(device), "load": load,
              "budget": args.budget, "recipe": base.to_dict(), "variants": rows}
    if args.record:
        save_record(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
