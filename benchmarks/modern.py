# Hand-written benchmark (not generated from a notebook).
"""Each modern change to the 2017 block, on several seeds: chapter 11's section 6, measured as the book chooses.

    python benchmarks/modern.py [--budget cpu] [--seeds 0 1 2] [--jobs 1] [--threads 1] [--record [FILE]]

Every variant of `one_change_variants` (the 2017 block, RMSNorm, SwiGLU, RoPE, grouped- and multi-query attention,
no biases, all of them) is the language model of MODERN_SIZES[budget] on chapter 10's captions and BPE, trained by
chapter 10's `train_lm` once per seed (initialization, batch order and dropout). The record keeps each run's
validation perplexity after the last epoch and, per variant, their mean and spread; chapter 11 renders it and calls
a change "within noise" of the 2017 block where the ranges of their seeds overlap. `--record` writes
benchmarks/modern.json.
"""
from __future__ import annotations

import argparse
import sys

import torch

from transformer_lib.comparisons import seed_summary, with_spread
from transformer_lib.gpt import caption_corpus, train_lm
from transformer_lib.modern import MODERN_SIZES, BlockConfig, ModernGPT, one_change_variants
from transformer_lib.runtime import machine, seed_everything

from recording import add_common_options, add_seed_options, require_at_least_one, run_jobs, save_record

_CORPUS = {}  # budget -> its caption corpus, made once per process


def corpus_and_variants(budget: str):
    """The captions of `budget`'s size and the variants of its base block."""
    sizes = MODERN_SIZES[budget]
    if budget not in _CORPUS:
        _CORPUS[budget] = caption_corpus(sizes["train"], sizes["merges"], context=64)
    corpus = _CORPUS[budget]
    base = BlockConfig(len(corpus.vocab), sizes["n_layers"], sizes["d_model"], sizes["n_heads"], sizes["d_ff"], 0.1, 64)
    return corpus, one_change_variants(base)


def train_one(name: str, seed: int, budget: str) -> dict:
    """One variant trained from one seed, as chapter 11 trains it: its validation perplexity and parameters."""
    sizes = MODERN_SIZES[budget]
    corpus, variants = corpus_and_variants(budget)
    seed_everything(seed)
    model = ModernGPT(variants[name])
    history = train_lm(model, corpus.train, corpus.val, sizes["epochs"], corpus.vocab.pad_idx, warmup=sizes["warmup"],
                       seed=seed, log=lambda *_: None)
    print(f"{name:<28} seed {seed}: validation perplexity {history[-1]['val_perplexity']:.2f}", flush=True)
    return {"seed": seed, "val_perplexity": history[-1]["val_perplexity"], "seconds": history[-1]["seconds"],
            "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad), "data": corpus.source}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", choices=sorted(MODERN_SIZES), default="cpu",
                        help="the size of model and training (default cpu, what chapter 11 runs on a laptop)")
    add_seed_options(parser)
    add_common_options(parser, "modern.json")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "jobs", "threads")
    torch.set_num_threads(args.threads)
    _, variants = corpus_and_variants(args.budget)
    print(f"{machine()}: budget {args.budget} ({MODERN_SIZES[args.budget]}), seeds {args.seeds}, {args.jobs} run(s) "
          f"at a time of {args.threads} thread(s)", flush=True)
    tasks = [(name, seed, args.budget) for name in variants for seed in args.seeds]
    done = run_jobs(train_one, tasks, args.jobs, args.threads)
    rows = []
    for name in variants:
        runs = [{k: v for k, v in run.items() if k not in ("data", "parameters")}
                for (n, *_), run in zip(tasks, done) if n == name]
        parameters = next(run["parameters"] for (n, *_), run in zip(tasks, done) if n == name)
        rows.append({"name": name, "parameters": parameters,
                     "val_perplexity": seed_summary(r["val_perplexity"] for r in runs), "runs": runs})
        print(f"{name:<28} validation perplexity {with_spread(rows[-1]['val_perplexity'])}")
    record = {"machine": machine(), "threads": args.threads, "jobs": args.jobs, "budget": args.budget,
              "sizes": MODERN_SIZES[args.budget], "data": done[0]["data"], "seeds": args.seeds, "variants": rows}
    if args.record:
        save_record(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
