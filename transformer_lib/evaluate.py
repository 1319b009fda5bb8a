# Hand-written tool module (not generated from a notebook).
"""Score a trained German-English model on a Multi30k split, both BLEU metrics.

    python -m transformer_lib.evaluate [--checkpoint PATH] [--split test2016|val] [--beam 5]

Prints sacreBLEU on detokenized output (with its signature) and the tokenized, lowercased BLEU of the tutorials.
The checkpoint defaults to the one `python -m transformer_lib.translate` uses.
"""
from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_lib.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=None, help="a model.safetensors (default: as translate)")
    parser.add_argument("--split", choices=["test2016", "val", "train"], default="test2016",
                        help="the Multi30k split to score (default test2016, the paper's test set)")
    parser.add_argument("--beam", type=int, default=5, help="beam size; 1 for greedy decoding (default 5)")
    parser.add_argument("--length-penalty", type=float, default=0.6, help="beam search length penalty (default 0.6)")
    parser.add_argument("--limit", type=int, default=None, help="score only the first N pairs")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"], default="auto",
                        help="where to run (default auto: CUDA, else MPS, else the CPU)")
    args = parser.parse_args(argv)
    from transformer_lib.runtime import share_cores_in_command

    share_cores_in_command()  # torch on the cores other processes leave free ($BOOK_SHARE_CORES=0: not)
    if args.beam < 1 or (args.limit is not None and args.limit < 1):
        parser.error("--beam and --limit must be positive")
    from transformer_lib.train import _device
    from transformer_lib.translate import find_checkpoint, load_model
    from transformer_lib.data import DataUnavailable, load_multi30k
    from transformer_lib.translation import evaluate_bleu

    path = find_checkpoint(args.checkpoint)
    model, src_vocab, tgt_vocab, _ = load_model(path, _device(args.device))
    try:
        pairs = load_multi30k(args.split)[: args.limit]
    except DataUnavailable as err:
        raise SystemExit(f"error: {err}") from None
    start = time.perf_counter()
    src_tok, tgt_tok = model.tokenizers  # words or subwords, as the checkpoint says
    score = evaluate_bleu(model, pairs, src_tok, src_vocab, tgt_vocab, args.beam, args.length_penalty, model.lower,
                          tgt_tok)
    print(f"{path}, Multi30k {args.split} ({len(pairs):,} pairs), beam {args.beam}, "
          f"{time.perf_counter() - start:.0f}s:")
    print(f"  sacreBLEU                {score.sacrebleu:6.2f}   {score.signature}")
    print(f"  tokenized lowercased BLEU {score.tokenized:5.2f}   {score.tokenized_signature}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
