# Hand-written benchmark (not generated from a notebook).
"""Choosing the shipped recipe on validation: candidate recipes for the `full` budget, trained side by side.

    python benchmarks/recipes.py [--only NAME ...] [--out runs/recipes] [--threads 1] [--record]
    python benchmarks/recipes.py --seeds 0 1 2 [--jobs 9] [--float32] [--out runs/recipe-seeds] [--record]

Each candidate is the recipe the book shipped before (BPE with 4,000 merges, one vocabulary, tied embeddings,
3+3 pre-norm layers, d_model 256, dropout 0.2, factor 0.7, warmup 800, 20 epochs) with a few fields changed. The
candidates train at the same time, one process each with --threads torch threads, from the same seed; a run
interrupted resumes from its folder under --out, and a finished one is only read back; with --only, the other
candidates keep the rows the record has of them (they trained in an earlier call). Each run keeps the better on
validation of its last epoch and the average of its last epochs (beam search), as every training run does.

The record also carries the run that made the model the book shipped before (BASE itself): its history and
validation scores, read from the shipped file while that is still BASE's, and kept from the previous record after.
The winner is the run, candidate or before, with the highest validation sacreBLEU; once the record holds the
comparison from seeds, a candidate that leads from one seed replaces the winner only when its mean over the seeds
leads too, and until then the record names it as awaiting them. Test2016 is scored for a winning candidate alone,
after the choice, and never used to choose. `--record` writes benchmarks/recipes.json, which chapter 8 renders;
the comparison from seeds (--seeds) already in it stays. --seeds --record replaces the recipes it trains in that
comparison and keeps the others, where the comparison was measured alike (machine, device, dtype and seeds);
otherwise it replaces the whole comparison and says so.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import torch

from transformer_lib.comparisons import check_distinct_seeds, seed_summary, with_spread
from transformer_lib.fast import speed_up
from transformer_lib.runtime import default_device, machine, torch_threads
from transformer_lib.translation import Recipe, evaluate_bleu, load_checkpoint, prepare_data, train_translation

from recording import add_common_options, add_seed_options, run_jobs, save_record

BASE = Recipe(subwords=4000, epochs=20, factor=0.7, warmup=800)  # what the book shipped before this comparison
CANDIDATES = {  # name -> the fields changed from BASE
    "fast path, 30 epochs": dict(fast=True, epochs=30),
    # BPE-dropout cuts words into more pieces: 25% more batches an epoch, so 24 epochs take the steps (and about the
    # time) of the 30 above
    "fast path, 24 epochs, BPE-dropout 0.1": dict(fast=True, epochs=24, bpe_dropout=0.1),
    # chapter 9's speedrun, carried to the long run: the rate cooled to zero over the last 30% of steps
    # (warmup-stable-decay), and then also batches of 1,500 tokens (about 1.7 times the steps of 2,500)
    "fast path, 30 epochs, warmup-stable-decay": dict(fast=True, epochs=30, cooldown=0.3),
    "fast path, 30 epochs, warmup-stable-decay, 1,500-token batches": dict(fast=True, epochs=30, cooldown=0.3,
                                                                            max_tokens=1500),
}


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-").replace("--", "-")


def train_one(name: str, out: Path, threads: int) -> None:
    """Train (or resume) one candidate in this process."""
    recipe, folder = replace(BASE, **CANDIDATES[name]), out / slug(name)
    with torch_threads(threads):
        train_translation(recipe, folder, progress=False, device=default_device(), speedup=speed_up,
                          log=lambda line: print(f"[{name}] {line}", flush=True))


BEFORE = f"before: {BASE.epochs} epochs, readable path"


def speed_up_float32(model, criterion, device):
    """speed_up's fast twins and loss, trained in float32 even where the device has bfloat16 in hardware."""
    model, criterion, _ = speed_up(model, criterion, device)
    return model, criterion, False


def train_seed(name: str, seed: int, out: str, float32: bool) -> dict:
    """Train (or resume) one recipe, the one before or a candidate, from `seed`; its validation scores."""
    changes = {} if name == BEFORE else CANDIDATES[name]
    recipe, folder = replace(BASE, seed=seed, **changes), Path(out) / f"{slug(name)}-seed{seed}"
    run = train_translation(recipe, folder, progress=False, device=default_device(),
                            speedup=speed_up_float32 if float32 else speed_up,
                            log=lambda line: print(f"[{name}, seed {seed}] {line}", flush=True))
    kept = run.scores["kept"]
    return {"seed": seed, "kept": kept, "val_sacrebleu": run.scores[kept]["sacrebleu"],
            "val_tokenized": run.scores[kept]["tokenized"], "train_seconds": run.history[-1]["seconds"],
            "val_bleu_by_epoch": [h.get("val_bleu") for h in run.history]}


def seed_comparison(args) -> int:
    """--seeds: every recipe once per seed; their mean and spread, added to the record as "seeds" (ValueError for a
    seed given twice, before anything trains: it would count as another seed)."""
    check_distinct_seeds(args.seeds)
    names = [BEFORE] + args.only
    tasks = [(name, seed, str(args.out), args.float32) for name in names for seed in args.seeds]
    device = default_device()
    print(f"machine: {machine()}, device {device}, {args.jobs} run(s) at a time of {args.threads} thread(s); "
          f"seeds {args.seeds}", flush=True)
    done = run_jobs(train_seed, tasks, args.jobs, args.threads)
    rows = []
    for name in names:
        runs = [run for (n, *_), run in zip(tasks, done) if n == name]
        rows.append({"name": name, "changes": {} if name == BEFORE else CANDIDATES[name],
                     "val_sacrebleu": seed_summary(r["val_sacrebleu"] for r in runs),
                     "train_seconds": seed_summary(r["train_seconds"] for r in runs), "runs": runs})
        print(f"{name:<45} validation sacreBLEU {with_spread(rows[-1]['val_sacrebleu'])}", flush=True)
    seeds = {"machine": machine(), "device": str(device), "float32": args.float32, "seeds": args.seeds,
             "recipes": rows}
    if args.record:
        record = json.loads(args.record.read_text(encoding="utf-8")) if args.record.is_file() else {}
        merged = merged_seeds(record.get("seeds"), seeds)
        if record.get("seeds") and merged is seeds:
            print("the comparison from seeds recorded before was measured otherwise (machine, device, dtype or "
                  "seeds): it is replaced, not merged", flush=True)
        save_record(args.record, {**record, "seeds": merged})
    return 0


def merged_seeds(before: dict | None, seeds: dict) -> dict:
    """The comparison from seeds to record: `seeds`, with the recipes of the one recorded `before` that it did not
    train again, where that one was measured alike (the same machine, device, dtype and seeds); else `seeds` alone,
    since means from different machines or seeds do not compare."""
    if not before or any(before.get(k) != seeds[k] for k in ("machine", "device", "float32", "seeds")):
        return seeds
    new = {r["name"]: r for r in seeds["recipes"]}
    recipes = [new.pop(r["name"], r) for r in before["recipes"]]  # retrained in place, the others as they were
    return {**seeds, "recipes": recipes + list(new.values())}


def run_workers(names: list[str], out: Path, threads: int) -> list[int]:
    """Train the candidates at the same time, a process each; their exit codes."""
    workers = [subprocess.Popen([sys.executable, __file__, "--train-one", name, "--out", str(out),
                                 "--threads", str(threads)]) for name in names]
    return [w.wait() for w in workers]


def run_row(name: str, info: dict) -> dict:
    """A finished run's row of the record, from the metadata of the model it kept."""
    kept = info["scores"]["kept"]
    return {"name": name, "train_seconds": info["history"][-1]["seconds"], "kept": kept,
            "val_sacrebleu": info["scores"][kept]["sacrebleu"], "val_tokenized": info["scores"][kept]["tokenized"],
            "scores": {k: v for k, v in info["scores"].items() if k != "kept"}, "history": info["history"]}


def base_run(record_path: Path | None) -> dict | None:
    """BASE's run as the shipped file's metadata tells it (while the package ships BASE's model), else as the
    previous record kept it."""
    from transformer_lib.translation import pretrained_path

    _, _, _, info = load_checkpoint(pretrained_path())
    if Recipe.from_dict(info["recipe"]).to_dict() == BASE.to_dict():
        return run_row(f"before: {BASE.epochs} epochs, readable path", info)
    if record_path is not None and record_path.is_file():
        return json.loads(record_path.read_text(encoding="utf-8")).get("base_run")
    return None


def choose(rows: list[dict], base: dict | None, previous: dict) -> tuple[dict, str | None]:
    """The run validation chooses, and the name of a candidate that leads it from one seed alone (else None).

    The best on validation is chosen, except once the record compares the recipes from several seeds (--seeds): then
    a candidate that leads from one seed replaces the run chosen before only where its mean over the seeds leads
    too, so that the shipped model never changes on one seed's luck."""
    runs = rows + ([base] if base else [])
    leader = max(runs, key=lambda row: row["val_sacrebleu"])
    chosen_before = next((row for row in runs if row["name"] == previous.get("winner")), None)
    if "seeds" not in previous or chosen_before is None or leader is chosen_before:
        return leader, None
    means = {r["name"]: r["val_sacrebleu"]["mean"] for r in previous["seeds"]["recipes"]}
    if leader["name"] in means and means[leader["name"]] > means.get(chosen_before["name"], float("-inf")):
        return leader, None
    return chosen_before, leader["name"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES), metavar="NAME",
                        help="train only these candidates; the others keep their rows in the record")
    parser.add_argument("--out", type=Path, default=Path("runs/recipes"),
                        help="the runs' folders (default runs/recipes)")
    parser.add_argument("--train-one", choices=list(CANDIDATES), help=argparse.SUPPRESS)  # a worker process
    add_seed_options(parser, default=())
    parser.add_argument("--float32", action="store_true",
                        help="with --seeds: the fast path in float32 even where bfloat16 is in hardware")
    add_common_options(parser, "recipes.json")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.jobs < 1:
        parser.error("--threads and --jobs must be at least 1")
    if args.seeds:
        return seed_comparison(args)
    if args.train_one:
        train_one(args.train_one, args.out, args.threads)
        return 0
    torch.set_num_threads(args.threads * len(args.only))  # the scoring after training has the cores to itself
    print(f"machine: {machine()}, {len(args.only)} processes x {args.threads} thread(s)", flush=True)
    if any(code != 0 for code in run_workers(args.only, args.out, args.threads)):
        print("a candidate failed; see its lines above", file=sys.stderr)
        return 1
    previous = json.loads(args.record.read_text(encoding="utf-8")) if args.record and args.record.is_file() else {}
    rows = []
    for name in CANDIDATES:
        if name in args.only:
            _, _, _, info = load_checkpoint(args.out / slug(name) / "model.safetensors")
            rows.append({**run_row(name, info), "changes": CANDIDATES[name]})
        else:  # trained by an earlier call: its row as the record kept it
            rows += [{k: v for k, v in row.items() if not k.startswith("test_")}
                     for row in previous.get("candidates", []) if row["name"] == name]
        if rows and rows[-1]["name"] == name:
            print(f"{name:<45} kept {rows[-1]['kept']:<14} validation sacreBLEU {rows[-1]['val_sacrebleu']:6.2f}, "
                  f"tokenized {rows[-1]['val_tokenized']:6.2f}, {rows[-1]['train_seconds'] / 60:.0f} min of training"
                  + ("" if name in args.only else " (recorded before)"), flush=True)
    base = base_run(args.record)
    winner, awaiting = choose(rows, base, previous)
    if awaiting:
        # name the chosen run's recipe too: --seeds keeps recorded recipes only where measured alike (merged_seeds)
        both = " ".join(f'"{name}"' for name in (winner["name"], awaiting) if name in CANDIDATES)
        print(f"{awaiting} leads on validation from one seed; it replaces {winner['name']} once its mean from the "
              f"seeds leads too: python benchmarks/recipes.py --seeds 0 1 2 --only {both} --record")
    if winner is base:
        print(f"chosen on validation: {winner['name']}, the model the book ships; no candidate beat it")
    elif winner["name"] not in args.only:  # chosen before: its test2016 score as recorded then
        winner.update({k: v for row in previous["candidates"] if row["name"] == winner["name"]
                       for k, v in row.items() if k.startswith("test_")})
        print(f"chosen on validation: {winner['name']}, recorded before; test2016 {winner.get('test_sacrebleu')}")
    else:
        recipe = replace(BASE, **winner["changes"])
        data = prepare_data(recipe)
        model, _, _, _ = load_checkpoint(args.out / slug(winner["name"]) / "model.safetensors")
        test = evaluate_bleu(model, data.test, data.src_tok, data.src_vocab, data.tgt_vocab, recipe.beam_size,
                             recipe.length_penalty, recipe.lower, data.tgt_tok)
        winner["test_sacrebleu"], winner["test_tokenized"] = round(test.sacrebleu, 2), round(test.tokenized, 2)
        print(f"chosen on validation: {winner['name']}; test2016 {test}")
    # no load average or wall time: a run that only reads finished runs back would record its own
    record = {"machine": machine(), "processes": len(args.only), "threads": args.threads, "base": BASE.to_dict(),
              "base_run": base,
              "candidates": rows, "winner": winner["name"], **({"awaiting_seeds": awaiting} if awaiting else {}),
              **({"seeds": previous["seeds"]} if "seeds" in previous else {})}  # the seeds comparison, if any, stays
    if args.record:
        save_record(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
