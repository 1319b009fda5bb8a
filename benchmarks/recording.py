# Hand-written helper of the benchmarks (not generated from a notebook).
"""What the benchmarks share: the --threads and --record options, the check that counts are at least 1, and writing
a run's record whole (atomically), where `python -m transformer_lib.book readme` and the chapters read it."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from transformer_lib.files import write_atomically

HERE = Path(__file__).resolve().parent


def add_common_options(parser: argparse.ArgumentParser, record_name: str,
                       threads_help: str = "torch CPU threads (default 1)") -> None:
    """--threads N (default 1) and --record [FILE] (default FILE: benchmarks/<record_name>)."""
    parser.add_argument("--threads", type=int, default=1, help=threads_help)
    parser.add_argument("--record", nargs="?", const=HERE / record_name, default=None, type=Path, metavar="FILE",
                        help=f"write the results as JSON (default FILE: benchmarks/{record_name})")


def require_at_least_one(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Exit with a usage error naming the options unless every one of `names` is at least 1."""
    if min(getattr(args, name) for name in names) < 1:
        listed = ", ".join(f"--{name}" for name in names[:-1]) + f" and --{names[-1]}"
        parser.error(f"{listed} must be at least 1")


def save_record(path: Path, record: dict, after: str = "") -> None:
    """Write `record` as indented JSON to `path`; a reader never sees half a file."""
    write_atomically(path, lambda tmp: Path(tmp).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8"))
    print(f"recorded in {path}{after}")
