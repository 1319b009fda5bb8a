# Hand-written benchmark (not generated from a notebook).
"""How the embedding tables are initialized, measured on Multi30k: chapter 1's N(0, 1/d_model) against Xavier.

    python benchmarks/init.py [--epochs 1] [--threads 1] [--record [FILE]]

`make_model` draws every weight matrix from Xavier's uniform distribution but keeps the embedding tables at
chapter 1's N(0, 1/d_model), so that the token vectors, scaled by sqrt(d_model), start with unit variance. The
Annotated Transformer runs Xavier over the embedding tables too. This script trains chapter 8's `cpu` recipe both
ways, from the same seed, on the same batches, for a few epochs, and prints the validation loss and greedy
validation BLEU of each. `--record` writes them to benchmarks/init.json, which chapter 4 shows.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile

import torch
from torch import nn

import transformer_lib.translation as translation
from transformer_lib.model import make_model
from transformer_lib.runtime import machine

from recording import add_common_options, require_at_least_one, save_record

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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=1, help="epochs of the cpu recipe per variant (default 1)")
    add_common_options(parser, "init.json")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "epochs", "threads")
    torch.set_num_threads(args.threads)
    recipe = dataclasses.replace(translation.RECIPES["cpu"], epochs=args.epochs, bleu_every=1, average_last=1)
    data = translation.prepare_data(recipe)
    print(f"{data.source}: {len(data.train):,} training pairs; the cpu recipe for {args.epochs} epoch(s); {machine()}")
    record = {"machine": machine(), "epochs": args.epochs, "data": data.source, "variants": []}
    original = translation.make_model
    for name in VARIANTS:
        translation.make_model = original if name == VARIANTS[0] else xavier_everywhere
        try:
            with tempfile.TemporaryDirectory() as out:
                run = translation.train_translation(recipe, out, data=data, progress=False, log=lambda *a, **k: None)
        finally:
            translation.make_model = original
        last = run.history[-1]
        row = {"name": name, "val_loss": last["val_loss"], "val_bleu": last["val_bleu"],
               "history": [{k: h[k] for k in ("epoch", "val_loss", "val_bleu")} for h in run.history]}
        record["variants"].append(row)
        print(f"{name:<48} validation loss {row['val_loss']:.3f}, greedy validation BLEU {row['val_bleu']:.2f}")
    if args.record:
        save_record(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
