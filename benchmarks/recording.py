# Hand-written helper of the benchmarks (not generated from a notebook).
"""What the benchmarks share: the --threads and --record options, the --seeds and --jobs of the comparisons that train
(each variant on several seeds, several runs at a time), the check that counts are at least 1, and writing a run's
record whole (atomically), where `python -m transformer_lib.book readme` and the chapters read it."""
from __future__ import annotations

import argparse
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from transformer_lib.comparisons import check_distinct_seeds
from transformer_lib.files import write_atomically

HERE = Path(__file__).resolve().parent


def add_common_options(parser: argparse.ArgumentParser, record_name: str,
                       threads_help: str = "torch CPU threads (default 1)") -> None:
    """--threads N (default 1) and --record [FILE] (default FILE: benchmarks/<record_name>)."""
    parser.add_argument("--threads", type=int, default=1, help=threads_help)
    parser.add_argument("--record", nargs="?", const=HERE / record_name, default=None, type=Path, metavar="FILE",
                        help=f"write the results as JSON (default FILE: benchmarks/{record_name})")


class DistinctSeeds(argparse.Action):
    """--seeds S [S ...], refusing a seed given twice (a usage error naming it): a repeated seed trains the same run,
    which a record would count as another seed with no spread."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            check_distinct_seeds(values, option_string or "--seeds")
        except ValueError as err:
            parser.error(str(err))
        setattr(namespace, self.dest, values)


def add_seed_options(parser: argparse.ArgumentParser, default: tuple[int, ...] = (0, 1, 2)) -> None:
    """--seeds S [S ...] (each variant trains once per seed, each seed once) and --jobs N (runs at a time, a process
    each)."""
    parser.add_argument("--seeds", type=int, nargs="+", default=list(default), metavar="SEED", action=DistinctSeeds,
                        help="train every variant once per seed"
                        + (f" (default {' '.join(map(str, default))})" if default else ""))
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at a time, a process each with --threads threads (default 1: one after the other)")


def _start_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def run_jobs(fn, tasks: list[tuple], jobs: int, threads: int) -> list:
    """fn(*task) for every task, in the order of `tasks`: here one after the other when jobs is 1, else in `jobs`
    spawned processes at a time (spawned, not forked: safe with CUDA), each with `threads` torch threads. `fn` must
    be a module-level function of an importable module (the benchmark script itself is)."""
    if jobs <= 1 or len(tasks) <= 1:
        return [fn(*task) for task in tasks]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=context, initializer=_start_worker,
                             initargs=(threads,)) as pool:
        return list(pool.map(fn, *zip(*tasks)))


def require_at_least_one(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Exit with a usage error naming the options unless every one of `names` is at least 1."""
    if min(getattr(args, name) for name in names) < 1:
        listed = ", ".join(f"--{name}" for name in names[:-1]) + f" and --{names[-1]}"
        parser.error(f"{listed} must be at least 1")


def save_record(path: Path, record: dict, after: str = "") -> None:
    """Write `record` as indented JSON to `path`; a reader never sees half a file."""
    write_atomically(path, lambda tmp: Path(tmp).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8"))
    print(f"recorded in {path}{after}")
