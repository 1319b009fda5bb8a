# Hand-written tool module (not generated from a notebook).
"""Translate German to English from the command line.

    python -m transformer_lib.translate "Ein Hund rennt durch den Schnee."
    echo "Zwei Männer spielen Fußball." | python -m transformer_lib.translate --checkpoint runs/multi30k-cpu/model.safetensors

Sentences come from the arguments, else one per line from standard input. The model is the checkpoint given
with --checkpoint (e.g. runs/multi30k-cpu/model.safetensors, written by `python -m transformer_lib.train
multi30k`), else the one shipped with the package (transformer_lib.translation.pretrained()).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

def find_checkpoint(path: str | None) -> Path:
    """The checkpoint to use: `path`, else the shipped model; SystemExit saying what to do otherwise."""
    from transformer_lib.translation import pretrained_path

    if path is not None:
        if not Path(path).is_file():
            raise SystemExit(f"error: --checkpoint {path}: no such file")
        return Path(path)
    if not pretrained_path().is_file():
        raise SystemExit(f"error: the shipped model {pretrained_path()} is missing; reinstall transformer_lib, "
                         "or train one with `python -m transformer_lib.train multi30k --budget cpu` and pass "
                         "--checkpoint runs/multi30k-cpu/model.safetensors")
    return pretrained_path()


def load_model(path: Path, device):
    """load_checkpoint's (model, src_vocab, tgt_vocab, info); SystemExit with its message for a damaged file."""
    from transformer_lib.translation import load_checkpoint

    try:
        return load_checkpoint(path, device)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_lib.translate", description=__doc__.split("\n")[0])
    parser.add_argument("sentences", nargs="*", help="German sentences (default: read lines from stdin)")
    parser.add_argument("--checkpoint", default=None,
                        help="a model.safetensors written by the train command (default: the shipped model)")
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
    from transformer_lib.translation import translate

    model, *_ = load_model(find_checkpoint(args.checkpoint), _device(args.device))
    for text in translate(model, sentences, beam_size=args.beam):
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
