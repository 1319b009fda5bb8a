# Hand-written benchmark (not generated from a notebook).
"""Translation throughput and BLEU: our decoding against the same weights served by CTranslate2, in one run.

    python benchmarks/serve.py [--checkpoint PATH] [--sentences 200] [--repeats 3] [--threads 1] [--record]

The model (default: the shipped one) is exported with `python -m transformer_lib.serve export` in float32 and int8.
Our decoding runs as chapter 7 wrote it and through chapter 9's FastBeamSearch (float32, bfloat16 where the CPU
has it in hardware, and int8). Every variant translates the same first --sentences of test2016 in batches of 64,
greedy and with beam 5, interleaved
(round after round, so that a slow phase of the machine hits all of them); sentences per second are medians of the
rounds. BLEU is scored once per variant on the whole of test2016. Greedy outputs of ours and of CTranslate2 in
float32 are compared token by token. `--record` writes benchmarks/serve.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from transformer_lib.data import load_multi30k
from transformer_lib.decoding import translate_tokens
from transformer_lib.fast import FastBeamSearch, cpu_has_bf16
from transformer_lib.runtime import machine, torch_threads
from transformer_lib.serve import CTranslate2Model, to_ctranslate2
from transformer_lib.translate import find_checkpoint, load_model
from transformer_lib.translation import bleu

from recording import add_common_options, require_at_least_one, save_record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=None, help="a model.safetensors (default: the shipped model)")
    parser.add_argument("--sentences", type=int, default=200, help="test2016 sentences timed (default 200)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    add_common_options(parser, "serve.json", "CPU threads for every variant (default 1)")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "sentences", "repeats", "threads")
    with torch_threads(args.threads):
        return _run(args)


def _run(args) -> int:
    path = find_checkpoint(args.checkpoint)
    model, src_vocab, tgt_vocab, _ = load_model(path, "cpu")
    tok = model.tokenizers[0]  # words or subwords, as the checkpoint says
    pairs = load_multi30k("test2016")
    sources, references = [de for de, _ in pairs], [en for _, en in pairs]
    timed = sources[: args.sentences]
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    print(f"machine: {machine()}, {args.threads} thread(s), load average {load}; model {path}; "
          f"{len(timed)} sentences timed, BLEU on {len(sources)}")
    with tempfile.TemporaryDirectory() as tmp:
        served = {q: CTranslate2Model(to_ctranslate2(model, src_vocab, tgt_vocab, Path(tmp) / q,
                                                     None if q == "float32" else q), threads=args.threads)
                  for q in ("float32", "int8")}
        fast = {"float32": FastBeamSearch(model, torch.float32)}
        if cpu_has_bf16():
            fast["bfloat16"] = FastBeamSearch(model, torch.bfloat16)
        fast["int8"] = FastBeamSearch(model, torch.int8)  # chapter 9, section 9
        variants = {}
        for beam in (1, 5):
            mode = "greedy" if beam == 1 else f"beam {beam}"
            variants[f"ours ({mode})"] = (lambda s, b=beam: translate_tokens(model, s, tok, src_vocab, tgt_vocab, b))
            for dtype, search in fast.items():
                variants[f"ours, FastBeamSearch {dtype} ({mode})"] = (
                    lambda s, b=beam, f=search: translate_tokens(model, s, tok, src_vocab, tgt_vocab, b, search=f))
            for q, engine in served.items():
                variants[f"CTranslate2 {q} ({mode})"] = (lambda s, b=beam, e=engine: e.translate_tokens(s, b))
        with torch.inference_mode():
            outputs = {name: run(sources) for name, run in variants.items()}  # also the warm-up
            seconds = {name: [] for name in variants}
            for _ in range(args.repeats):
                for name, run in variants.items():
                    start = time.perf_counter()
                    run(timed)
                    seconds[name].append(time.perf_counter() - start)
    identical = sum(a == b for a, b in zip(outputs["ours (greedy)"], outputs["CTranslate2 float32 (greedy)"]))
    record = {"machine": machine(), "threads": args.threads, "load": load, "sentences": len(timed),
              "bleu_sentences": len(sources), "repeats": args.repeats, "greedy_identical": identical, "variants": []}
    print(f"\n{'variant':<44} {'sentences/s':>12} {'spread':>7} {'sacreBLEU':>10} {'tokenized':>10} {'same':>6}")
    for name, secs in seconds.items():
        med = statistics.median(secs)
        score = bleu(outputs[name], references, tgt_tok=model.tokenizers[1])
        spread = (max(secs) - min(secs)) / 2 / med
        mode = name[name.rindex("(") :]  # "(greedy)" or "(beam 5)"
        same = sum(a == b for a, b in zip(outputs[name], outputs[f"ours {mode}"]))  # as chapter 7's decoding
        print(f"{name:<44} {len(timed) / med:>12.1f} {spread:>6.0%} {score.sacrebleu:>10.2f} {score.tokenized:>10.2f} "
              f"{same:>6}")
        record["variants"].append({"name": name, "sentences_per_s": round(len(timed) / med, 2),
                                   "spread": round(spread, 3), "sacrebleu": round(score.sacrebleu, 2),
                                   "tokenized": round(score.tokenized, 2), "same_as_ours": same})
    print(f"greedy: {identical} of {len(sources)} translations token-identical between ours and CTranslate2 float32")
    if args.record:
        save_record(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
