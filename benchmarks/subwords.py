# Hand-written benchmark (not generated from a notebook).
"""Words or subwords: chapter 8's recipe trained with each kind of vocabulary, on the same budget, in one run.

    python benchmarks/subwords.py [--budget cpu] [--epochs N] [--seeds 0 1 2] [--jobs 1] [--threads 1] [--record]

Every variant is the budget's recipe (RECIPES[budget], chapter 8) with one change to its vocabulary: whole words
(one per language, or one shared by both with tied embeddings), or chapter 6's BPE with a few numbers of merges,
one BPE shared by both languages with tied embeddings. Each is trained once per seed on the same data (the recipe's
seed: initialization, batch order and dropout), on the default device (CUDA, else MPS, else the CPU), and reports what
the chapter's table shows: parameters, the <unk> rate and tokens per sentence on test2016, and per seed the training
seconds and sacreBLEU with beam search on validation and on test2016, with their mean and spread over the seeds.
Validation BLEU is the one to choose by (the training run's own beam-search score of its last epoch); test2016 is
reported, never tuned on. `--record` writes benchmarks/subwords.json, which chapter 6 renders.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import replace

import torch

from transformer_lib.comparisons import seed_summary, with_spread
from transformer_lib.fast import speed_up  # the cpu recipe trains on chapter 9's fast path
from transformer_lib.runtime import default_device, machine, torch_threads
from transformer_lib.translation import RECIPES, evaluate_bleu, prepare_data, train_translation

from recording import add_common_options, add_seed_options, require_at_least_one, run_jobs, save_record

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


def measure(name: str, budget: str, epochs: int | None, seed: int) -> dict:
    """Train one variant from one seed and score it: that seed's part of the table's row."""
    base = RECIPES[budget]
    recipe = replace(base, epochs=epochs or base.epochs, average_last=1, seed=seed, **VARIANTS[name])
    device = default_device()
    data = prepare_data(recipe)
    de, en = [d for d, _ in data.test], [e for _, e in data.test]
    with tempfile.TemporaryDirectory() as out:
        run = train_translation(recipe, out, data=data, progress=False, log=lambda *_: None, device=device,
                                speedup=speed_up)
        test = evaluate_bleu(run.model, data.test, data.src_tok, data.src_vocab, data.tgt_vocab, recipe.beam_size,
                             recipe.length_penalty, recipe.lower, data.tgt_tok)
    row = {"name": name, "subwords": recipe.subwords, "shared_vocab": recipe.shared_vocab,
           "vocab_sizes": [len(data.src_vocab), len(data.tgt_vocab)],
           "parameters": sum(p.numel() for p in run.model.parameters()),
           "unk_de": round(unknown_rate(data.src_tok, data.src_vocab, de), 6),
           "unk_en": round(unknown_rate(data.tgt_tok, data.tgt_vocab, en), 6),
           "tokens_per_sentence_en": round(sum(len(data.tgt_tok(s)) for s in en) / len(en), 2),
           "run": {"seed": seed, "train_seconds": run.history[-1]["seconds"],
                   "val_sacrebleu": run.scores["last"]["sacrebleu"], "test_sacrebleu": round(test.sacrebleu, 2),
                   "test_tokenized": round(test.tokenized, 2), "history": run.history}}
    r = row["run"]
    print(f"{name:<30} seed {seed} {row['vocab_sizes'][0]:>6,}/{row['vocab_sizes'][1]:<6,} {row['parameters']:>11,} "
          f"{row['unk_de']:>7.2%} {row['unk_en']:>7.2%} {row['tokens_per_sentence_en']:>6.1f} "
          f"{r['train_seconds']:>8.0f} {r['val_sacrebleu']:>8.2f} {r['test_sacrebleu']:>8.2f}", flush=True)
    return row


def variant_row(seeds: list[dict]) -> dict:
    """One variant's row of the record from its runs (one per seed): what does not depend on the seed, each run, and
    the mean and spread of training seconds and BLEU."""
    first = seeds[0]
    runs = [s["run"] for s in seeds]
    return {**{k: v for k, v in first.items() if k != "run"},
            **{key: seed_summary(r[key] for r in runs)
               for key in ("train_seconds", "val_sacrebleu", "test_sacrebleu", "test_tokenized")},
            "runs": runs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", choices=sorted(RECIPES), default="cpu", help="whose recipe (default cpu)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs (default: the recipe's)")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), default=list(VARIANTS), metavar="NAME",
                        help="run only these variants")
    add_seed_options(parser)
    add_common_options(parser, "subwords.json")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "threads", "jobs", *(["epochs"] if args.epochs is not None else []))
    with torch_threads(args.threads):
        return _run(args)


def _run(args) -> int:
    base = RECIPES[args.budget]
    base = replace(base, epochs=args.epochs or base.epochs, average_last=1)  # the last epoch, for every variant
    device = default_device()
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    print(f"machine: {machine()}, {torch.get_num_threads()} thread(s) a run, {args.jobs} run(s) at a time, device "
          f"{device}, load average {load}; recipe {args.budget} with {base.epochs} epochs, beam {base.beam_size}, "
          f"seeds {args.seeds}")
    print(f"{'vocabulary':<30} {'seed':>6} {'sizes de/en':>13} {'parameters':>11} {'<unk>de':>7} {'<unk>en':>7} "
          f"{'tok/en':>6} {'train s':>8} {'val':>8} {'test':>8}")
    tasks = [(name, args.budget, args.epochs, seed) for name in args.only for seed in args.seeds]
    done = run_jobs(measure, tasks, args.jobs, args.threads)
    rows = [variant_row([row for row in done if row["name"] == name]) for name in args.only]
    for row in rows:
        print(f"{row['name']:<30} validation {with_spread(row['val_sacrebleu'])}, test2016 "
              f"{with_spread(row['test_sacrebleu'])}")
    record = {"machine": machine(), "threads": torch.get_num_threads(), "jobs": args.jobs, "device": str(device),
              "load": load, "budget": args.budget, "seeds": args.seeds, "recipe": base.to_dict(), "variants": rows}
    if args.record:
        save_record(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
