# Hand-written benchmark (not generated from a notebook).
"""How the embedding tables are initialized, measured on Multi30k: chapter 1's N(0, 1/d_model) against Xavier.

    python benchmarks/init.py [--epochs 1] [--seeds 0 1 2] [--jobs 1] [--threads 1] [--record [FILE]]

`make_model` draws every weight matrix from Xavier's uniform distribution but keeps the embedding tables at
chapter 1's N(0, 1/d_model), so that the token vectors, scaled by sqrt(d_model), start with unit variance. The
Annotated Transformer runs Xavier over the embedding tables too. This script trains chapter 8's `cpu` recipe both
ways, once per seed (each seed gives both the same batches), for a few epochs, on the default device (CUDA, else MPS,
else the CPU), and prints the validation loss and greedy validation BLEU of each run, then each way's mean and spread
over the seeds. `--record` writes them to benchmarks/init.json, which chapter 4 shows.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile

import torch
from torch import nn

import transformer_lib.runs as runs
import transformer_lib.translation as translation
from transformer_lib.comparisons import seed_summary, with_spread
from transformer_lib.fast import speed_up  # the cpu recipe trains on chapter 9's fast path
from transformer_lib.model import make_model
from transformer_lib.runtime import default_device, machine

from recording import add_common_options, add_seed_options, require_at_least_one, run_jobs, save_record

VARIANTS = ("embeddings N(0, 1/d_model) (make_model)", "Xavier everywhere (the Annotated Transformer)")


def xavier_everywhere(*args, **kwargs):
    """make_model, then Xavier over every matrix, the embedding tables included."""
    model = make_model(*args, **kwargs)
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    pad = model.config.pad_idx
    if pad is not None:
        with torch.no_grad():
            for table in (model.src_embed[0].embedding, model.tgt_embed[0].embedding):
                table.weight[pad].zero_()
    return model


def train_one(name: str, seed: int, epochs: int) -> dict:
    """One run: the cpu recipe for `epochs` from `seed`, with the embedding tables initialized as `name` says."""
    recipe = dataclasses.replace(translation.RECIPES["cpu"], epochs=epochs, bleu_every=1, average_last=1, seed=seed)
    original = runs.make_model  # the model a run builds (transformer_lib.runs.build)
    runs.make_model = original if name == VARIANTS[0] else xavier_everywhere
    try:
        with tempfile.TemporaryDirectory() as out:
            run = translation.train_translation(recipe, out, progress=False, log=lambda *a, **k: None,
                                                device=default_device(), speedup=speed_up)
    finally:
        runs.make_model = original
    last = run.history[-1]
    print(f"{name:<48} seed {seed}: validation loss {last['val_loss']:.3f}, greedy validation BLEU "
          f"{last['val_bleu']:.2f}", flush=True)
    return {"seed": seed, "val_loss": last["val_loss"], "val_bleu": last["val_bleu"], "data": run.data.source,
            "history": [{k: h[k] for k in ("epoch", "val_loss", "val_bleu")} for h in run.history]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=1, help="epochs of the cpu recipe per variant (default 1)")
    add_seed_options(parser)
    add_common_options(parser, "init.json")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "epochs", "jobs", "threads")
    torch.set_num_threads(args.threads)
    device = default_device()
    print(f"the cpu recipe for {args.epochs} epoch(s), seeds {args.seeds}, {args.jobs} run(s) at a time on {device}; "
          f"{machine()}", flush=True)
    tasks = [(name, seed, args.epochs) for name in VARIANTS for seed in args.seeds]
    runs = run_jobs(train_one, tasks, args.jobs, args.threads)
    recipe = dataclasses.replace(translation.RECIPES["cpu"], epochs=args.epochs, bleu_every=1, average_last=1)
    record = {"machine": machine(), "device": str(device), "epochs": args.epochs, "data": runs[0]["data"],
              "seeds": args.seeds, "recipe": {k: v for k, v in recipe.to_dict().items() if k != "seed"},
              "variants": []}
    for name in VARIANTS:
        mine = [{k: v for k, v in run.items() if k != "data"} for (n, _, _), run in zip(tasks, runs) if n == name]
        row = {"name": name, "val_loss": seed_summary(r["val_loss"] for r in mine),
               "val_bleu": seed_summary(r["val_bleu"] for r in mine), "runs": mine}
        record["variants"].append(row)
        print(f"{name:<48} validation loss {with_spread(row['val_loss'], '.3f')}, greedy validation BLEU "
              f"{with_spread(row['val_bleu'])}")
    if args.record:
        save_record(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
