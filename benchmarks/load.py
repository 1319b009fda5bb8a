# Hand-written benchmark (not generated from a notebook).
"""The book on a busy machine: chapters and training steps with other processes competing for the cores.

    python benchmarks/load.py steps [--busy 2] [--rounds 2] [--record]
    python benchmarks/load.py chapters [--busy 2] [--chapters 5 7 8] [--record]
    python benchmarks/load.py commands [--busy 2] [--rounds 1] [--steps 300] [--sentences 300] [--record]

`steps` times 10 training steps of chapter 8's `cpu` model (3+3 layers, d_model 256) on random batches, each
variant in a fresh process (the OpenMP settings are read when torch loads): torch's defaults (OMP_WAIT_POLICY
unset), its OpenMP threads made to spin while they wait for each other (ACTIVE) or to sleep (PASSIVE), and one
thread; idle, and with --busy processes that each keep a core busy. Variants and loads are interleaved, round after round, and the medians kept.

`chapters` runs `python -m transformer_lib.book run --budget cpu` on a copy of the book for each chapter, idle and
with --busy processes, and records the seconds each took (the chapters in the repository are not touched);
--env sets the runs' environment (e.g. OMP_WAIT_POLICY=PASSIVE).

`commands` times the commands as a reader types them: `python -m transformer_lib.train copy --steps N` and
`python -m transformer_lib.translate` of --sentences German sentences (Multi30k's test2016, else the offline corpus)
with the shipped model, on the CPU, idle and with --busy processes, each with the cores shared (the commands'
default, runtime.share_cores_in_command) and not ($BOOK_SHARE_CORES=0); loads and settings are interleaved, round
after round, and the medians kept.

`--record` writes benchmarks/load.json (each part kept beside the others); docs/running.md renders it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recording import HERE, save_record  # noqa: E402

ROOT = HERE.parent
STEP = r"""
import time, torch
from transformer_lib.model import make_model
from transformer_lib.training import Batch, LabelSmoothing, loss_sum
torch.manual_seed(0)
model = make_model(6000, 6000, n_layers=3, d_model=256, d_ff=512, n_heads=8, dropout=0.1, pad_idx=1)
criterion, opt = LabelSmoothing(6000, 1, 0.1), torch.optim.Adam(model.parameters(), lr=1e-4)
batch = Batch(torch.randint(4, 6000, (100, 12)), torch.randint(4, 6000, (100, 14)), pad_idx=1)
def step():
    loss = loss_sum(model, batch, criterion) / batch.n_tokens
    loss.backward(); opt.step(); opt.zero_grad()
warm = time.perf_counter()
step()
while time.perf_counter() - warm < 3:  # long enough for share_cores to have measured the machine
    step()
start = time.perf_counter()
for _ in range({n}):
    step()
print((time.perf_counter() - start) / {n})
"""
VARIANTS = {  # name -> (environment, what to run first)
    "torch's defaults (OMP_WAIT_POLICY unset)": ({}, ""),
    "spinning threads (OMP_WAIT_POLICY=ACTIVE)": ({"OMP_WAIT_POLICY": "ACTIVE"}, ""),
    "sleeping threads (OMP_WAIT_POLICY=PASSIVE)": ({"OMP_WAIT_POLICY": "PASSIVE"}, ""),
    "one thread": ({}, "import torch; torch.set_num_threads(1)"),
    "the free cores (runtime.share_cores, as book run does)": ({}, "from transformer_lib.runtime import share_cores; share_cores()"),
}


@contextmanager
def busy(n: int):
    """n processes that each keep one core busy, for as long as the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5 if n else 0)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def step_seconds(env: dict, first: str, n: int = 10) -> float:
    code = first + "\n" + STEP.format(n=n)
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def steps(args) -> dict:
    times = {(name, load): [] for name in VARIANTS for load in (0, args.busy)}
    for r in range(args.rounds):
        for load in (0, args.busy):
            with busy(load):
                for name in args.variants:
                    times[name, load].append(step_seconds(*VARIANTS[name]))
                    print(f"round {r + 1}, {load} busy, {name}: {times[name, load][-1]:.3f} s/step", flush=True)
    return {name: {"idle_s_per_step": round(statistics.median(times[name, 0]), 3),
                   "loaded_s_per_step": round(statistics.median(times[name, args.busy]), 3),
                   "slowdown": round(statistics.median(times[name, args.busy]) / statistics.median(times[name, 0]), 2)}
            for name in args.variants}


def chapters(args) -> dict:
    env = {**os.environ, **dict(item.split("=", 1) for item in args.env)}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "book"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "runs", "site", "build", "__pycache__"))
        for chapter in args.chapters:
            row = {}
            for load in (0, args.busy):
                with busy(load):
                    start = time.perf_counter()
                    subprocess.run([sys.executable, "-m", "transformer_lib.book", "--root", str(copy), "run",
                                    "--budget", "cpu", str(chapter)], check=True, stdout=subprocess.DEVNULL, env=env)
                    row["idle_s" if load == 0 else "loaded_s"] = round(time.perf_counter() - start, 1)
                shutil.rmtree(copy / "notebooks" / "runs", ignore_errors=True)  # chapter 8 trains afresh each time
                print(f"chapter {chapter}, {load} busy: {row['idle_s' if load == 0 else 'loaded_s']} s", flush=True)
            row["slowdown"] = round(row["loaded_s"] / row["idle_s"], 2)
            results[str(chapter)] = row
    return results


SHARING = {"shared": "1", "not shared": "0"}  # $BOOK_SHARE_CORES for each setting


def _german(n: int) -> list[str]:
    """n German sentences: Multi30k's test2016 where it can be had, else the offline corpus."""
    from transformer_lib.multi30k import DataUnavailable, load_multi30k, offline_corpus

    try:
        pairs = load_multi30k("test2016")
    except DataUnavailable:
        pairs = offline_corpus(n)
    return [de for de, _ in pairs[:n]]


def command_seconds(argv: list[str], sharing: str, text: str | None = None) -> float:
    """Wall seconds of `python -m ARGV...` with $BOOK_SHARE_CORES as `sharing` says, `text` on its standard input."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env["BOOK_SHARE_CORES"] = SHARING[sharing]
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", *argv], input=text, env=env, check=True, text=True,
                   stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def commands(args) -> dict:
    text = "\n".join(_german(args.sentences)) + "\n"
    runs = {f"train copy --steps {args.steps}": (["transformer_lib.train", "copy", "--steps", str(args.steps),
                                                 "--seed", "3", "--device", "cpu", "--quiet"], None),
            f"translate < {args.sentences} German sentences": (["transformer_lib.translate", "--device", "cpu"], text)}
    times = {(name, sharing, load): [] for name in runs for sharing in SHARING for load in (0, args.busy)}
    for r in range(args.rounds):
        for load in (0, args.busy):
            with busy(load):
                for name, (argv, stdin) in runs.items():
                    for sharing in SHARING:
                        times[name, sharing, load].append(round(command_seconds(argv, sharing, stdin), 1))
                        print(f"round {r + 1}, {load} busy, {name}, cores {sharing}: "
                              f"{times[name, sharing, load][-1]} s", flush=True)
    return {f"{name}, cores {sharing}": {
        "idle_s": statistics.median(times[name, sharing, 0]),
        "loaded_s": statistics.median(times[name, sharing, args.busy]),
        "slowdown": round(statistics.median(times[name, sharing, args.busy]) / statistics.median(times[name, sharing, 0]), 2)}
        for name in runs for sharing in SHARING}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=["steps", "chapters", "commands"])
    parser.add_argument("--busy", type=int, default=2, help="processes keeping a core busy each (default 2)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="steps, commands: rounds of every variant (default 2 for steps, 1 for commands)")
    parser.add_argument("--steps", type=int, default=300, help="commands: train copy's --steps (default 300)")
    parser.add_argument("--sentences", type=int, default=300, help="commands: sentences translated (default 300)")
    parser.add_argument("--note", default=None, help="a sentence kept with the record, e.g. what else ran")
    parser.add_argument("--chapters", type=int, nargs="+", default=[5, 7, 8], help="chapters: which (default 5 7 8)")
    parser.add_argument("--env", nargs="*", default=[], metavar="NAME=VALUE",
                        help="chapters: environment for the runs, e.g. OMP_WAIT_POLICY=ACTIVE (default: as it is)")
    parser.add_argument("--record", nargs="?", const=HERE / "load.json", default=None, type=Path, metavar="FILE",
                        help="write the results as JSON (default FILE: benchmarks/load.json)")
    parser.add_argument("--only", nargs="+", type=int, metavar="N", help="steps: only these variants (1 to "
                        f"{len(VARIANTS)}, in the order {'; '.join(VARIANTS)}), e.g. for a quick look")
    args = parser.parse_args(argv)
    names = list(VARIANTS)
    if args.only and not all(1 <= n <= len(names) for n in args.only):
        parser.error(f"--only takes variant numbers from 1 to {len(names)}")
    args.variants = [names[n - 1] for n in args.only] if args.only else names
    if args.rounds is None:
        args.rounds = 1 if args.part == "commands" else 2
    if args.busy < 1 or args.rounds < 1 or args.steps < 1 or args.sentences < 1:
        parser.error("--busy, --rounds, --steps and --sentences must be at least 1")
    from transformer_lib.runtime import machine

    results = {"steps": steps, "chapters": chapters, "commands": commands}[args.part](args)
    print(json.dumps(results, indent=2))
    if args.record:
        record = json.loads(args.record.read_text()) if args.record.exists() else {}
        record[args.part] = {"machine": machine(), "busy": args.busy, "results": results}
        if args.part == "commands":
            record[args.part].update(rounds=args.rounds, note=args.note)
        save_record(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
