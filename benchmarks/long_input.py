# Hand-written benchmark (not generated from a notebook).
"""Tokenizing hostile input: a 1 MB line of words, one 100,000-character word, and BPE learned from counts that
hold such a word, with the shipped model's subword tokenizer.

    python benchmarks/long_input.py [--repeats 3] [--record]

Each case is timed --repeats times, interleaved with the others; the record keeps the median and the slowest.
The goal (docs/bad_inputs.md): each in under a second on a 2-core CPU. The 100,000-character word is cut by
merge_by_rank (BPE's merges in O(n log n)); learn_bpe leaves pre-tokens longer than LONGEST_LEARNED characters
out, so a corpus holding one learns as fast as one without it. `--record` writes benchmarks/long_input.json.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recording import add_common_options, require_at_least_one, save_record  # noqa: E402

from transformer_lib.data import learn_bpe, offline_corpus, pre_tokens  # noqa: E402
from transformer_lib.runtime import machine, torch_threads  # noqa: E402
from transformer_lib.translation import pretrained  # noqa: E402


def cases(tok, seed: int = 0) -> dict:
    """name -> a function that does the work once, with the subword tokenizer `tok`."""
    rng = random.Random(seed)
    words = ["ein", "hund", "läuft", "durch", "den", "schnee", "zwei", "männer", "spielen", "fußball", "."]
    line = " ".join(rng.choice(words) for _ in range(1_000_000 // 6))[:1_000_000]
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzäöüß") for _ in range(100_000))
    counts = Counter(w for de, en in offline_corpus(2000, seed=seed) for w in [*pre_tokens(tok, de), *pre_tokens(tok, en)])
    counts[word] = 3
    return {
        "a 1 MB line of words": lambda: tok(line),
        "one 100,000-character word": lambda: tok(word.upper()),  # upper: not the cached lowercase word
        "learn_bpe, 2,000 merges, 2,000 sentence pairs and that word": lambda: learn_bpe(counts, 2000),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timings of each case, interleaved (default 3)")
    add_common_options(parser, "long_input.json")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "repeats", "threads")
    torch_threads(args.threads)
    tok = pretrained().src_tok
    work = cases(tok)
    times: dict[str, list[float]] = {name: [] for name in work}
    for _ in range(args.repeats):
        for name, run in work.items():
            tok.bpe._cached.cache_clear()  # every repeat cuts every word afresh
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    results = {name: {"median_s": round(statistics.median(t), 3), "slowest_s": round(max(t), 3)}
               for name, t in times.items()}
    for name, r in results.items():
        print(f"{name:<60} median {r['median_s']:.3f} s, slowest {r['slowest_s']:.3f} s")
    if args.record:
        save_record(args.record, {"machine": machine(), "repeats": args.repeats, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
