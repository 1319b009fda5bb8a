# Hand-written tool module (not generated from a notebook).
"""Where and how the book runs: the device, the run budget, the random seed, the processes of a distributed run.

Every chapter starts with::

    device = default_device()   # CUDA, else Apple MPS, else CPU
    budget = run_budget()       # "smoke", "cpu" or "full"
    seed_everything(0)
"""
from __future__ import annotations

import os
import random
from contextlib import contextmanager
from pathlib import Path

import torch

__all__ = ["BUDGETS", "BUDGET_ENV", "default_device", "torch_threads", "run_budget", "seed_everything", "world_size", "all_reduce_sum",
           "machine", "report"]

BUDGETS = ("smoke", "cpu", "full")
BUDGET_ENV = "BOOK_BUDGET"
RESULT_KEY = "book_result"  # the output-metadata key under which report() records a result


def default_device() -> torch.device:
    """CUDA when present, else Apple MPS, else CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _manifest_default_budget(start: Path) -> str | None:
    """`default_budget` from the nearest book.yml at or above `start`, if any."""
    for folder in (start, *start.parents):
        manifest = folder / "book.yml"
        if manifest.is_file():
            import yaml

            data = yaml.safe_load(manifest.read_text(encoding="utf-8")) or {}
            return data.get("default_budget")
    return None


def run_budget(name: str | None = None) -> str:
    """The run budget in force: `name` if given, else $BOOK_BUDGET, else book.yml.

    "auto" (book.yml's default) means "full" with a CUDA GPU and "cpu" otherwise.
    Raises ValueError naming the source when the budget is not one of BUDGETS.
    """
    source = "name"
    if name is None:
        name, source = os.environ.get(BUDGET_ENV) or None, f"${BUDGET_ENV}"
    if name is None:
        name, source = _manifest_default_budget(Path.cwd()) or "auto", "book.yml default_budget"
    if not isinstance(name, str):
        raise ValueError(f"{source}={name!r} is not a run budget; choose one of {', '.join(BUDGETS)} (or auto)")
    name = name.strip().lower()
    if name == "auto":
        return "full" if torch.cuda.is_available() else "cpu"
    if name not in BUDGETS:
        raise ValueError(f"{source}={name!r} is not a run budget; choose one of {', '.join(BUDGETS)} (or auto)")
    return name


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy (when installed) and torch on every device."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), what NumPy accepts, got {seed}")
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds CUDA and MPS
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with the book's requirements
        return
    np.random.seed(seed)


def world_size(model) -> int:
    """Number of processes `model` trains in: theirs under DistributedDataParallel, else 1."""
    return torch.distributed.get_world_size() if isinstance(model, torch.nn.parallel.DistributedDataParallel) else 1


def all_reduce_sum(value: float, device) -> float:
    """The sum of `value` over all processes of the default process group."""
    t = torch.tensor(value, dtype=torch.float64 if device.type != "mps" else torch.float32, device=device)
    torch.distributed.all_reduce(t)
    return t.item()


@contextmanager
def torch_threads(n: int):
    """Run the body with torch using n CPU threads, then restore the previous count (benchmarks set it explicitly:
    on a busy 2-core machine two threads can run far slower than one)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int (torch CPU threads), got {n!r}")
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(previous)


def machine() -> str:
    """A short description of the machine a number was measured on: CPU model and cores, or the GPU."""
    import platform

    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpu = " ".join((cpu or platform.processor() or platform.machine() or "unknown CPU").split())
    text = f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__.split('+')[0]}"
    if torch.cuda.is_available():
        text = f"{torch.cuda.get_device_name()} ({text})"
    return text


def report(name: str, text: str, **values) -> dict:
    """Show `text`, formatted with `values`, as Markdown under the cell, and record `values` as the result `name`.

    The values travel in the output's metadata, so the committed notebook carries the numbers its prose shows;
    `python -m transformer_lib.book readme` renders the results in README.md and docs/ from them, and tests check the prose
    against them. Outside Jupyter the text is printed. Returns the values.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an identifier, got {name!r}")
    import json

    json.dumps(values)  # refuse what the notebook's metadata cannot hold, here rather than at save time
    shown = text.format(**values)
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython ships with the book's requirements
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(Markdown(shown), metadata={RESULT_KEY: {"name": name, "values": values}})
    else:
        print(shown)
    return values

