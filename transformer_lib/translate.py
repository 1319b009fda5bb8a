# Hand-written tool module (not generated from a notebook).
"""Translate German to English from the command line.

    python -m transformer_lib.translate "Ein Hund rennt durch den Schnee."
    echo "Zwei Männer spielen Fußball." | python -m transformer_lib.translate --checkpoint runs/multi30k-cpu/model.safetensors

Sentences come from the arguments, else one per line from standard input. The model is the checkpoint given
with --checkpoint, else the first of DEFAULT_CHECKPOINTS that exists (written by
`python -m transformer_lib.train multi30k`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_CHECKPOINTS = [Path("runs/multi30k-full/model.safetensors"), Path("runs/multi30k-cpu/model.safetensors")]


def find_checkpoint(path: str | None) -> Path:
    """The checkpoint to use: `path`, else the first default that exists; SystemExit saying what to do otherwise."""
    if path is not None:
        if not Path(path).is_file():
            raise SystemExit(f"error: --checkpoint {path}: no such file")
        return Path(path)
    for candidate in DEFAULT_CHECKPOINTS:
        if candidate.is_file():
            return candidate
    raise SystemExit("error: no trained model found at " + " or ".join(map(str, DEFAULT_CHECKPOINTS)) +
                     "; train one with `python -m transformer_lib.train multi30k --budget cpu`, "
                     "or pass --checkpoint PATH")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_lib.translate", description=__doc__.split("\n")[0])
    parser.add_argument("sentences", nargs="*", help="German sentences (default: read lines from stdin)")
    parser.add_argument("--checkpoint", default=None, help="a model.safetensors written by the train command")
    parser.add_argument("--beam", type=int, default=5, help="beam size; 1 for greedy decoding (default 5)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"], default="auto",
                        help="where to run (default auto: CUDA, else MPS, else CPU)")
    args = parser.parse_args(argv)
    if args.beam < 1:
        parser.error("--beam must be a positive int")
    sentences = args.sentences or [line.strip() for line in sys.stdin if line.strip()]
    if not sentences:
        parser.error("no sentences: give them as arguments or on standard input")
    from transformer_lib.train import _device
    from transformer_lib.translation import load_checkpoint, translate

    model, *_ = load_checkpoint(find_checkpoint(args.checkpoint), _device(args.device))
    for text in translate(model, sentences, beam_size=args.beam):
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
