# Hand-written tool module (not generated from a notebook).
"""Where and how the book runs: the device, the run budget, the random seed, the processes of a distributed run.

Every chapter starts with::

    device = default_device()   # CUDA, else Apple MPS, else CPU
    budget = run_budget()       # "smoke", "cpu" or "full"
    seed_everything(0)
"""
from __future__ import annotations

import functools
import os
import random
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from transformer_lib.checks.core import check_ints

__all__ = ["BUDGETS", "BUDGET_ENV", "default_device", "torch_threads", "run_budget", "seed_everything", "world_size", "all_reduce_sum",
           "machine", "report", "share_cores", "free_threads", "busy_seconds",
           "process_seconds", "own_cpus", "other_cores", "SHARE_ENV", "share_cores_in_command", "cpu_has_bf16",
           "cpu_has_vnni",
           "matmul_peak", "StepBar", "eval_mode"]

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

            try:
                data = yaml.safe_load(manifest.read_text(encoding="utf-8")) or {}
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
                where = getattr(err, "problem_mark", None)
                at = f" at line {where.line + 1}" if where is not None else ""
                raise ValueError(f"{manifest} cannot be read for its default_budget{at} ({type(err).__name__}); "
                                 f"fix it, or set ${BUDGET_ENV}") from None
            if not isinstance(data, dict):
                raise ValueError(f"{manifest} is a {type(data).__name__}, not a mapping with a default_budget; fix "
                                 f"it, or set ${BUDGET_ENV}")
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


@contextmanager
def eval_mode(model: torch.nn.Module):
    """The model in eval mode inside the block, given back in the mode it came in (whether the block raised or not)."""
    training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(training)


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


def busy_seconds(cpus) -> float | None:
    """Seconds the CPUs numbered in `cpus` have spent busy since boot, every process together (Linux's /proc/stat:
    user, nice, system, interrupts and time stolen by the hypervisor, not idle or waiting on a disk); None where
    /proc/stat cannot be read (macOS, Windows)."""
    try:
        lines = Path("/proc/stat").read_text(encoding="ascii", errors="replace").splitlines()
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    wanted, ticks = {int(c) for c in cpus}, 0
    for line in lines:
        name, *fields = line.split()
        if name[3:].isdigit() and name.startswith("cpu") and int(name[3:]) in wanted and len(fields) >= 8:
            user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
            ticks += user + nice + system + irq + softirq + steal
    return ticks / tick


def process_seconds(pid: int) -> float | None:
    """CPU seconds process `pid` has used, all its threads and the children it waited for (Linux's
    /proc/PID/stat); None where that cannot be read."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text(encoding="ascii", errors="replace")
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces; fields[0] is field 3
    return sum(int(f) for f in fields[11:15]) / tick  # utime, stime, cutime, cstime


def own_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity where the system says, else all of them)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def other_cores(before: tuple, after: tuple) -> float | None:
    """Cores other processes kept busy between two samples (seconds, busy_seconds of our CPUs, our own CPU seconds),
    on average; None where a sample could not be read or no time passed."""
    if None in (*before, *after) or after[0] <= before[0]:
        return None
    return max(0.0, (after[1] - before[1] - (after[2] - before[2])) / (after[0] - before[0]))


def free_threads(cores: int, others: float, most: int) -> int:
    """How many threads torch should run: the cores this process may use less those other processes kept busy
    (`others`, in cores), rounded, at least 1 and at most `most` (torch's own choice on an idle machine)."""
    return max(1, min(most, int(cores - others + 0.5)))


class _CoreShare:
    """Watches how busy other processes keep the cores and says how many threads torch should run.

    A thread samples every `every` seconds; the count changes when two samples in a row agree. `apply` sets it, and
    must run on the thread that runs torch (a thread count is per calling thread), so the hooks call it there.
    """

    def __init__(self, most: int, every: float = 1.0, busy=busy_seconds, own=time.process_time, clock=time.monotonic):
        self.cpus = own_cpus()
        self.most, self.every, self.busy, self.own, self.clock = most, every, busy, own, clock
        self.wanted = self._seen = most
        self.others = 0.0
        self._last = (clock(), busy(self.cpus), own())
        self._stop = threading.Event()
        self._handles = []

    def observe(self) -> int:
        """Take a sample: the cores other processes kept busy since the last one. Returns the threads wanted."""
        sample = self.clock(), self.busy(self.cpus), self.own()
        others, self._last = other_cores(self._last, sample), sample
        if others is None:
            return self.wanted
        self.others = others
        threads = free_threads(len(self.cpus), self.others, self.most)
        if threads == self._seen:
            self.wanted = threads
        self._seen = threads
        return self.wanted

    def apply(self, *_args, **_kwargs) -> None:
        if torch.get_num_threads() != self.wanted:
            torch.set_num_threads(self.wanted)

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            self.observe()

    def start(self, forward: bool = False) -> "_CoreShare":
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        threading.Thread(target=self._watch, name="share_cores", daemon=True).start()
        self._handles.append(register_optimizer_step_pre_hook(self.apply))
        if forward:  # before each module's forward pass: commands that only translate step no optimizer
            self._handles.append(torch.nn.modules.module.register_module_forward_pre_hook(self.apply))
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython ships with the book's requirements
            get_ipython = None
        shell = get_ipython() if get_ipython is not None else None
        if shell is not None:
            shell.events.register("pre_run_cell", self.apply)
            self._handles.append(_Unregister(shell, self.apply))
        return self

    def stop(self) -> None:
        self._stop.set()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        torch.set_num_threads(self.most)


class _Unregister:
    def __init__(self, shell, callback):
        self.shell, self.callback = shell, callback

    def remove(self):
        self.shell.events.unregister("pre_run_cell", self.callback)


_SHARING: _CoreShare | None = None


def share_cores(on: bool = True, every: float = 1.0, forward: bool = False) -> bool:
    """Let torch use only the cores other processes leave free, from now on in this process.

    On a CPU that other programs keep busy, torch's threads wait for each other while the process they wait for is
    off its core, and a chapter can take ten times as long; one thread then runs far faster. A background thread
    measures how busy other processes keep this process's cores (Linux), and each optimizer step and each Jupyter
    cell (with `forward`, also each module's forward pass) sets torch's thread count to the cores left free, between
    1 and the count torch chose. `book run` calls this in every chapter's kernel, the commands in their main()
    (share_cores_in_command). It does nothing (returns False) where the machine cannot be measured, when
    $OMP_NUM_THREADS fixes the count, or with `on=False`, which stops an earlier call and restores the count.
    Returns whether cores are being shared.
    """
    global _SHARING
    if isinstance(every, bool) or not isinstance(every, (int, float)) or not every > 0:
        raise ValueError(f"every must be a positive number of seconds, got {every!r}")
    if _SHARING is not None:
        if on:
            return True
        _SHARING.stop()
        _SHARING = None
        return False
    if not on or os.environ.get("OMP_NUM_THREADS") or busy_seconds([0]) is None:
        return False
    _SHARING = _CoreShare(torch.get_num_threads(), every).start(forward)
    return True


SHARE_ENV = "BOOK_SHARE_CORES"  # 0 (or off, no, false): the commands leave torch's thread count alone


def share_cores_in_command() -> bool:
    """What each command's main() (train, translate, evaluate, serve) calls first: share_cores(), unless
    $BOOK_SHARE_CORES is 0/off/no/false. $OMP_NUM_THREADS, a count the user fixed, wins (share_cores does nothing).
    Exits with one line when $BOOK_SHARE_CORES is something else. Returns whether cores are being shared."""
    if os.environ.get("WORLD_SIZE", "1").strip() not in ("", "1"):
        return False  # torchrun's processes divide the cores among themselves (train multi30k)
    value = os.environ.get(SHARE_ENV, "").strip().lower()
    if value not in ("", "1", "on", "yes", "true", "0", "off", "no", "false"):
        raise SystemExit(f"error: ${SHARE_ENV}={os.environ[SHARE_ENV]!r}: use 1 to share the cores with other "
                         "processes (the default) or 0 to leave torch's thread count alone")
    return share_cores(value not in ("0", "off", "no", "false"), forward=True)


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> str:
    """The CPU's feature flags as Linux lists them ("" where /proc/cpuinfo cannot be read), read once."""
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_has_bf16() -> bool:
    """True where this CPU multiplies bfloat16 matrices in hardware (AMX or AVX512-BF16)."""
    flags = _cpu_flags()
    return " amx_bf16" in flags or " avx512_bf16" in flags


def cpu_has_vnni() -> bool:
    """True where this CPU adds int8 products straight into 32 bits (AVX512-VNNI), so that fbgemm's int8 kernel
    takes full 8-bit inputs without overflowing 16 bits (chapter 9, section 9)."""
    return " avx512_vnni" in _cpu_flags()


def matmul_peak(dtype=torch.float32, size: int = 1024, repeats: int = 10, device="cpu") -> float:
    """Measured FLOP/s of a square matrix multiplication on `device` (the best of `repeats`)."""
    check_ints(size=size, repeats=repeats)
    a, b = (torch.randn(size, size, device=device).to(dtype) for _ in range(2))
    a @ b  # warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        if a.device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best


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
    against them. Outside Jupyter the text is printed. Returns the values. Every result records the run budget it
    was measured under: `budget`, the one in force (run_budget()) unless the call names it.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an identifier, got {name!r}")
    import json

    values = {"budget": run_budget(), **values}

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



class StepBar:
    """The progress of a training loop, one optimizer step at a time: a tqdm bar of its own (progress=True), none
    (False), or an outer run's tqdm bar to advance and leave open. Each step shows its loss, the target tokens a
    second so far and the learning rate. `with StepBar(...) as bar:` closes a bar of its own at the end."""

    def __init__(self, progress=True, desc: str = "train"):
        from tqdm import tqdm

        self.own = not isinstance(progress, tqdm)
        self.bar = tqdm(desc=desc, unit="step", disable=not progress, mininterval=1.0) if self.own else progress
        self.tokens, self.start = 0, time.perf_counter()

    def step(self, loss: float, n_tokens: int, lr: float) -> None:
        self.tokens += n_tokens
        self.bar.update()
        per_second = self.tokens / max(time.perf_counter() - self.start, 1e-9)
        self.bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{per_second:,.0f}", lr=f"{lr:.1e}", refresh=False)

    def close(self) -> None:
        if self.own:
            self.bar.close()

    def __enter__(self) -> "StepBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
