# Hand-written tool module (not generated from a notebook).
"""Train from the command line.

    python -m transformer_lib.train copy [--steps N] [--seed S] [--device auto|cpu|cuda|mps]

`copy` trains chapter 5's copy task: a small Transformer learns to reproduce random sequences, and the
command prints its progress and the exact-sequence accuracy on 1,000 held-out test sequences.
"""
from __future__ import annotations

import argparse
import sys

import torch
from tqdm import tqdm

from transformer_lib.runtime import default_device


def _device(name: str) -> torch.device:
    if name == "auto":
        return default_device()
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda, but no CUDA GPU is available (try --device auto)")
    if name == "mps" and not torch.backends.mps.is_available():
        raise SystemExit("error: --device mps, but Apple MPS is not available (try --device auto)")
    return torch.device(name)


def copy_command(args: argparse.Namespace) -> int:
    from transformer_lib.training import train_copy_task

    device = _device(args.device)
    print(f"copy task on {device}, seed {args.seed}, at most {args.steps} steps "
          "(stops after two validation checks at 100%)", flush=True)

    def report(e: dict) -> None:  # tqdm.write keeps the progress bar below the printed lines
        tqdm.write(f"step {e['step']:5d}: val loss {e['val_loss']:.4f}, val accuracy {e['val_accuracy']:6.1%}, "
              f"{e['seconds']:5.1f}s")

    result = train_copy_task(max_steps=args.steps, seed=args.seed, device=device, eval_every=args.eval_every,
                             progress=not args.quiet, on_evaluation=report)
    print(f"test accuracy (1,000 held-out sequences): {result.test_accuracy:.1%} "
          f"after {len(result.history)} steps in {result.seconds:.1f}s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_lib.train", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="task", required=True)
    copy = sub.add_parser("copy", help="train the copy task of chapter 5")
    copy.add_argument("--steps", type=int, default=2000, help="most optimizer steps (default 2000)")
    copy.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    copy.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"], default="auto",
                      help="where to train (default auto: CUDA, else MPS, else CPU)")
    copy.add_argument("--eval-every", type=int, default=100, help="steps between validation checks (default 100)")
    copy.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.eval_every < 1:
        parser.error("--steps and --eval-every must be positive")
    return copy_command(args)


if __name__ == "__main__":
    sys.exit(main())
