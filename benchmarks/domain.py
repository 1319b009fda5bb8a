# Hand-written benchmark (not generated from a notebook).
"""How well the shipped model's own confidence tells captions from other German: the flag of translate().

    python benchmarks/domain.py [--checkpoint PATH] [--threads 1] [--record]

Each sentence is translated (greedy and beam 5), and its translation scored by `logprob_per_token`: the mean
log-probability the model gives its own tokens, fed them as in training. Three sets: Multi30k's test2016 (German
side; needed, from $MULTI30K_DIR or the cache), and two sets written for this book, committed beside this script:
benchmarks/domain/captions.de.txt (100 captions of imagined photographs, in Multi30k's style) and
benchmarks/domain/everyday.de.txt (100 everyday sentences no caption says). The threshold is test2016's 1st
percentile at beam 5, rounded to two decimals (translation.UNFAMILIAR_BELOW must equal it); the record gives, for
each set and search, the share of sentences below it, and the AUC: the chance that a caption scores above an everyday
sentence. `--record` writes benchmarks/domain.json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

from transformer_lib.data import load_multi30k
from transformer_lib.decoding import translate_tokens
from transformer_lib.runtime import machine, torch_threads
from transformer_lib.translate import find_checkpoint, load_model
from transformer_lib.translation import logprob_per_token

from recording import add_common_options, save_record

SETS = Path(__file__).resolve().parent / "domain"
PERCENTILE = 1  # the threshold: this percentile of test2016's scores at beam 5


def read_sentences(path: Path) -> list[str]:
    """One sentence a line, blank lines left out."""
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def scores(model, sentences: list[str], beam_size: int) -> list[float]:
    """logprob_per_token of each sentence's translation (translate_tokens, as translate() decodes)."""
    src_tok, _ = model.tokenizers
    src_vocab, tgt_vocab = model.vocabs
    tokens = translate_tokens(model, sentences, src_tok, src_vocab, tgt_vocab, beam_size)
    out = []
    for start in range(0, len(sentences), 64):
        out += logprob_per_token(model, [src_vocab.encode(src_tok(s)) for s in sentences[start:start + 64]],
                                 [tgt_vocab.encode(t) for t in tokens[start:start + 64]], src_vocab.pad_idx, tgt_vocab)
    return out


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile, linear between the nearest ranks (numpy's default)."""
    ordered = sorted(values)
    at = (len(ordered) - 1) * p / 100
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def auc(higher: list[float], lower: list[float]) -> float:
    """The chance that a score of `higher` is above one of `lower` (ties count half)."""
    return sum((a > b) + 0.5 * (a == b) for a in higher for b in lower) / (len(higher) * len(lower))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=None, help="a model.safetensors (default: the shipped model)")
    add_common_options(parser, "domain.json")
    args = parser.parse_args(argv)
    with torch_threads(args.threads):
        model, *_ = load_model(find_checkpoint(args.checkpoint), torch.device("cpu"))
        sets = {"test2016": [de for de, _ in load_multi30k("test2016")],
                "captions": read_sentences(SETS / "captions.de.txt"),
                "everyday": read_sentences(SETS / "everyday.de.txt")}
        found = {beam: {name: scores(model, sentences, beam) for name, sentences in sets.items()} for beam in (1, 5)}
    threshold = round(percentile(found[5]["test2016"], PERCENTILE), 2)
    record = {"machine": machine(), "checkpoint": str(args.checkpoint or "the shipped model"),
              "percentile": PERCENTILE, "threshold": threshold, "searches": {}}
    for beam, by_set in found.items():
        row = {name: {"sentences": len(values), "mean": round(statistics.mean(values), 4),
                      "flagged": sum(v < threshold for v in values), "flagged_share": round(
                          sum(v < threshold for v in values) / len(values), 4)} for name, values in by_set.items()}
        row["auc_captions_over_everyday"] = round(auc(by_set["captions"], by_set["everyday"]), 4)
        row["auc_test2016_over_everyday"] = round(auc(by_set["test2016"], by_set["everyday"]), 4)
        record["searches"][f"beam {beam}"] = row
        print(f"beam {beam}: " + "; ".join(f"{name} {r['flagged']}/{r['sentences']} flagged (mean {r['mean']:.2f})"
                                           for name, r in row.items() if isinstance(r, dict))
              + f"; AUC captions over everyday {row['auc_captions_over_everyday']:.3f}")
    print(f"threshold: {threshold:.2f} (test2016's {PERCENTILE}st percentile, beam 5)")
    if args.record:
        save_record(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
