# Hand-written benchmark (not generated from a notebook).
"""The Multi30k speedrun: how fast chapter 8's translator reaches a validation sacreBLEU, one recipe change at a time.

    python benchmarks/speedrun.py NAME [--on RECORD] [--set FIELD=VALUE ...] [--seeds 0 1 2]
                                       [--out runs/speedrun] [--record [FILE]]
    python benchmarks/speedrun.py NAME --again [--on RECORD] [--seeds 0 1 2] [--record [FILE]]
    python benchmarks/speedrun.py --refresh-commands [--record FILE]

NAME is the entry's name. Its recipe is BASELINE (chapter 8's first `cpu` recipe, 2 epochs) changed by the fields
of the record it builds on (--on, default: the last record) and then by --set. Every seed trains by the command a
learner types, which names the fields where the recipe differs from today's RECIPES["cpu"]:

    python -m transformer_lib.train multi30k --budget cpu --seed S --set FIELD=VALUE ... --no-test

in one process with a torch thread per core (two processes under torchrun measured no faster on two cores), one
seed after the other, so that each run has the machine's cores to itself. On a CPU without bfloat16 in hardware,
`--budget cpu` starts from CPU_FLOAT32 (chapter 8's budget_recipe): an entry whose command would train another recipe
there is refused before it trains. A run stopped half-way resumes from its folder under --out, and a finished one
is only read back. Per seed the entry keeps:

- the training seconds (validation is off the clock) and the greedy validation sacreBLEU after every epoch: the
  curve, and the first second at which it reaches each milestone (25, 30, 35, 40);
- the validation sacreBLEU (beam search) of the model the run kept, which alone decides whether the entry is a
  record: its mean over at least 3 seeds must beat the mean of the record it builds on;
- test2016 sacreBLEU (beam search), reported, never used to choose.

An entry that changes only the beam search of the record it builds on (its length penalty or beam size) trains
nothing again where that record's run folders (the --out of its recorded commands) are here: each seed's command
resumes a copy of its folder after the last epoch, so its seconds and curve are the record's, and the kept model is
chosen and scored again with the new search.

A trained seed whose epochs are more than PACE_LIMIT times slower than its base's, where the entry's changes leave
the work of an epoch as it was (SAME_WORK), stops the entry before it is recorded: the machine is slower than the
one that recorded the base, though machine() may name both alike, and its minutes would not compare.

--again trains a record again as it is (the entry keeps NAME and the record's changes, and is never a record), with
no pace check: on a machine other than the record's, its minutes are what an entry measured there compares with.
--on may name such an entry, so that a change measured on that machine builds on the record's runs there.

--record writes the entry into benchmarks/speedrun.json (an entry of the same name is replaced), with the command of
every seed, so that anyone can run it again; entries that did not pay stay, with their numbers. When RECIPES["cpu"]
changes, --refresh-commands writes every recorded command again against it (tests/test_speedrun.py checks that each
one still trains its entry's recipe).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from transformer_lib.checks.translation import DECODING_FIELDS
from transformer_lib.comparisons import check_distinct_seeds, seed_summary, with_spread
from transformer_lib.runtime import busy_seconds, machine, other_cores, own_cpus
from transformer_lib.train import recipe_changes
from transformer_lib.fast import has_bf16
from transformer_lib.translation import RECIPES, Recipe, budget_recipe, evaluate_bleu, load_checkpoint, prepare_data

# where the speedrun starts: chapter 8's `cpu` budget before it (two epochs of chapter 5's rate, about 22 on validation)
BASELINE = Recipe(n_layers=3, d_model=256, d_ff=512, n_heads=8, dropout=0.1, subwords=4000, epochs=2, factor=0.5,
                  warmup=400, average_last=2)

from recording import HERE, DistinctSeeds, save_record

MILESTONES = (25, 30, 35, 40)
LIMIT = 600  # seconds of training a speedrun recipe may take
MIN_SEEDS = 3  # the fewest seeds a record rests on
# Recipe fields that leave the work of an epoch as it was (its batches, its model, its path): an entry changing only
# these trains an epoch about as fast as its base on the same machine, and PACE_LIMIT times slower means another one.
SAME_WORK = {"seed", "epochs", "warmup", "factor", "cooldown", "smoothing", "dropout", "clip_norm", "beam_size",
             "length_penalty", "average_last", "ema", "short_first"}  # ema: one small average a step
PACE_LIMIT = 1.5
PACE_MIN_SECONDS = 10.0  # shorter epochs (tiny test recipes) vary too much from run to run to compare


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


def recipe_of(changes: dict) -> Recipe:
    """The recipe of an entry: BASELINE with `changes` (ValueError or TypeError on a bad one)."""
    return Recipe(**{**BASELINE.to_dict(), **changes})


def command(changes: dict, seed: int, out: Path) -> list[str]:
    """The command that trains one seed of an entry: `--budget cpu` and the fields where its recipe differs."""
    wanted, cpu = recipe_of(changes).to_dict(), RECIPES["cpu"].to_dict()
    sets = [f"{k}={json.dumps(v)}" for k, v in wanted.items() if v != cpu[k] and k != "seed"]
    return [sys.executable, "-m", "transformer_lib.train", "multi30k", "--budget", "cpu", "--seed", str(seed), "--out", str(out),
                    "--no-test", "--quiet"] + (["--set", *sets] if sets else [])


def check_command_trains(changes: dict, cmd: list[str]) -> None:
    """Refuse, before training, a command that would train another recipe than the entry's on this machine: where the
    CPU has no bfloat16 in hardware, `--budget cpu` starts from CPU_FLOAT32 (eight epochs), not RECIPES["cpu"]."""
    bf16 = has_bf16(torch.device("cpu"))
    start = budget_recipe("cpu", bf16).to_dict()
    sets = recipe_changes(cmd[cmd.index("--set") + 1:]) if "--set" in cmd else {}
    wanted = recipe_of(changes).to_dict()
    differ = [k for k, v in {**start, **sets}.items() if v != wanted[k] and k != "seed" and (bf16 or k != "bf16")]
    if differ:
        raise SystemExit(f"error: on this CPU ({machine()}, no bfloat16 in hardware) `--budget cpu` starts from "
                         f"CPU_FLOAT32, so the entry's command would train a recipe that differs in {', '.join(differ)}: "
                         "measure it on a CPU that multiplies bfloat16 in hardware")


def decoding_only(changes: dict, base: dict | None) -> bool:
    """Whether an entry changes only how the runs of its base choose and decode their kept model (DECODING_FIELDS)."""
    if base is None:
        return False
    ours, theirs = recipe_of(changes).to_dict(), recipe_of(base["changes"]).to_dict()
    changed = {k for k in ours if ours[k] != theirs[k]}
    return bool(changed) and changed <= set(DECODING_FIELDS)


def reuse_epochs(base_run: dict, folder: Path) -> bool:
    """Copy a base run's folder, all but its kept model, into `folder`: the entry's command then resumes after the
    last epoch and only chooses and scores its kept model again. False (train instead) when that folder is not here
    or `folder` already exists."""
    words = shlex.split(base_run["command"])
    source = Path(words[words.index("--out") + 1])
    if folder.exists() or not (source / "state.safetensors").is_file():
        return False
    folder.mkdir(parents=True)
    for f in source.iterdir():
        if f.name != "model.safetensors":
            shutil.copy2(f, folder / f.name)
    return True


def pace_error(changes: dict, base: dict | None, row: dict) -> str | None:
    """Why a trained seed's minutes cannot join the record (None: they can). Where the entry does the base's work per
    epoch (SAME_WORK), an epoch more than PACE_LIMIT times slower than the base's measures a slower machine, not the
    change: machine() names a CPU model's family, and two machines of one name can differ widely."""
    if base is None or "curve" not in row:
        return None
    ours, theirs = recipe_of(changes).to_dict(), recipe_of(base["changes"]).to_dict()
    if any(ours[k] != theirs[k] for k in ours if k not in SAME_WORK):
        return None
    paces = [r["train_seconds"] / len(r["curve"]) for r in base["runs"]]
    pace, expected = row["train_seconds"] / len(row["curve"]), sum(paces) / len(paces)
    if expected < PACE_MIN_SECONDS or pace <= PACE_LIMIT * expected:
        return None
    return (f"seed {row['seed']} trained an epoch in {pace:.1f} s, {pace / expected:.1f} times the {expected:.1f} s of "
            f"{base['name']!r}, whose recipe does the same work per epoch: this machine ({machine()}) is slower than "
            f"the one that recorded it, and its minutes do not compare with the record's. Run the entry on that "
            f"machine, or train the records it builds on again here; nothing was recorded")


def milestones(history: list[dict]) -> dict:
    """The first training second at which the greedy validation sacreBLEU reached each milestone (None: never)."""
    reached = {}
    for goal in MILESTONES:
        hits = [h["seconds"] for h in history if h.get("val_sacrebleu", -1) >= goal]
        reached[str(goal)] = hits[0] if hits else None
    return reached


def run_seed(changes: dict, seed: int, folder: Path) -> dict:
    """Train one seed (or read a finished run back) and score it."""
    cmd = command(changes, seed, folder)
    check_command_trains(changes, cmd)
    print("$ " + shlex.join(cmd), flush=True)
    cpus = own_cpus()

    def sample() -> tuple:  # (seconds, busy seconds of our CPUs, CPU seconds of the children waited for)
        t = os.times()
        return t.elapsed, busy_seconds(cpus), t.children_user + t.children_system

    before = sample()
    done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(len(cpus)))})
    if done.returncode != 0:
        raise SystemExit(f"error: seed {seed} failed (exit {done.returncode}); its output is above")
    others = other_cores(before, sample())  # cores other processes kept busy meanwhile
    model, _, _, info = load_checkpoint(folder / "model.safetensors")
    recipe = Recipe.from_dict(info["recipe"])
    data = prepare_data(recipe)
    test = evaluate_bleu(model, data.test, data.src_tok, data.src_vocab, data.tgt_vocab, recipe.beam_size,
                         recipe.length_penalty, recipe.lower, data.tgt_tok)
    kept, history = info["scores"]["kept"], info["history"]
    row = {"seed": seed, "command": shlex.join(cmd).replace(sys.executable, "python"),
           "train_seconds": history[-1]["seconds"], "kept": kept,
           "val_sacrebleu": info["scores"][kept]["sacrebleu"], "test_sacrebleu": round(test.sacrebleu, 2),
           "milestones": milestones(history),
           "curve": [[h["seconds"], h.get("val_sacrebleu")] for h in history], "data": info.get("data")}
    if others is not None:
        row["other_cores_busy"] = round(others, 2)
    print(f"seed {seed}: {row['train_seconds']:.0f} s of training, validation sacreBLEU {row['val_sacrebleu']}, "
          f"test2016 {row['test_sacrebleu']}, milestones {row['milestones']}", flush=True)
    return row


def entry_of(name: str, base: dict | None, changes: dict, rows: list[dict]) -> dict:
    """The record's entry: the runs, their summaries, and whether it beats `base` on validation (ValueError for a seed
    run twice: it would count as another seed)."""
    check_distinct_seeds([r["seed"] for r in rows], "the runs' seeds")
    summary = {key: seed_summary(r[key] for r in rows) for key in ("val_sacrebleu", "test_sacrebleu", "train_seconds")}
    entry = {"name": name, "on": base["name"] if base else None, "changes": changes,
             "machine": machine(), **summary, "runs": rows}
    entry["within_limit"] = all(r["train_seconds"] <= LIMIT for r in rows)
    if base:
        # + 0.0: a tie is recorded as 0.0, never -0.0
        entry["gain"] = round(summary["val_sacrebleu"]["mean"] - base["val_sacrebleu"]["mean"], 2) + 0.0
    entry["record"] = entry["within_limit"] and len(rows) >= MIN_SEEDS and (base is None or entry["gain"] > 0)
    return entry


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", nargs="?", help="the entry's name, e.g. 'decay to zero'")
    parser.add_argument("--on", default=None, help="the record this entry changes (default: the last record)")
    parser.add_argument("--set", nargs="+", default=[], metavar="FIELD=VALUE",
                        help="the recipe fields this entry changes (values read as JSON)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], metavar="SEED", action=DistinctSeeds,
                        help="train the entry once per seed, each seed once (default 0 1 2)")
    parser.add_argument("--out", type=Path, default=Path("runs/speedrun"), help="the runs' folders")
    parser.add_argument("--record", nargs="?", const=HERE / "speedrun.json", default=None, type=Path,
                        metavar="FILE", help="write the entry into FILE (default benchmarks/speedrun.json)")
    parser.add_argument("--again", action="store_true",
                        help="train the record (--on, default the last) again as it is, to compare entries on this "
                             "machine; never a record, and the pace check does not apply")
    parser.add_argument("--refresh-commands", action="store_true",
                        help="write every command of the record (--record FILE) again against RECIPES['cpu'], and stop")
    args = parser.parse_args(argv)
    path = args.record or HERE / "speedrun.json"
    if args.refresh_commands:
        return refresh_commands(path)
    if not args.name:
        parser.error("NAME is required: the entry's name, e.g. 'decay to zero'")
    entries = json.loads(path.read_text(encoding="utf-8"))["entries"] if path.is_file() else []
    records = [e for e in entries if e["record"] and e["name"] != args.name]
    bases = records + [e for e in entries if e.get("again") and e["name"] != args.name]  # what --on may name
    base = next((e for e in bases if e["name"] == args.on), None) if args.on else (records[-1] if records else None)
    if args.on and base is None:
        parser.error(f"--on {args.on!r}: no record, nor a record trained --again, of that name in {path}")
    if args.again and (base is None or args.set):
        parser.error("--again trains a record as it is: name it with --on (default the last), and give no --set")
    try:
        changes = {**(base["changes"] if base else {}), **recipe_changes(args.set)}
        recipe_of(changes)  # refuse a bad value before training
    except (TypeError, ValueError) as err:
        parser.error(f"--set: {err}")
    torch.set_num_threads(len(own_cpus()))
    print(f"machine: {machine()}; {args.name!r} on {base['name'] if base else 'the baseline'!r}, changes {changes}",
          flush=True)
    rows, reuse = [], decoding_only(changes, base)
    for seed in args.seeds:
        folder = args.out / f"{slug(args.name)}-seed{seed}"
        base_run = next((r for r in base["runs"] if r["seed"] == seed), None) if reuse else None
        if base_run and reuse_epochs(base_run, folder):
            print(f"seed {seed}: only the beam search changes: the epochs of {base['name']!r} are scored again",
                  flush=True)
        rows.append(run_seed(changes, seed, folder))
        error = None if args.again else pace_error(changes, base, rows[-1])
        if error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    entry = entry_of(args.name, base, changes, rows)
    if args.again:  # the same recipe on another machine: its minutes are the yardstick for entries measured here
        entry.update(again=True, record=False)
    print(f"{args.name}: validation {with_spread(entry['val_sacrebleu'])}, test2016 "
          f"{with_spread(entry['test_sacrebleu'])}, {with_spread(entry['train_seconds'], '.0f')} s; "
          f"{'a record' if entry['record'] else 'not a record'}", flush=True)
    if args.record:
        kept = [e for e in entries if e["name"] != args.name]
        save_record(args.record, {"limit_seconds": LIMIT, "milestones": list(MILESTONES), "entries": kept + [entry]})
    return 0


def refresh_commands(path: Path) -> int:
    """Write every recorded command of `path` again against today's RECIPES["cpu"] (same seed, same folder)."""
    record = json.loads(path.read_text(encoding="utf-8"))
    for entry in record["entries"]:
        for run in entry["runs"]:
            words = shlex.split(run["command"])
            out = words[words.index("--out") + 1]
            run["command"] = shlex.join(command(entry["changes"], run["seed"], Path(out))).replace(sys.executable, "python")
    save_record(path, record)
    print(f"{path}: {sum(len(e['runs']) for e in record['entries'])} commands written against RECIPES['cpu']")
    return 0


if __name__ == "__main__":
    sys.exit(main())
