# Hand-written tool module (not generated from a notebook).
"""The book's runner: execute chapters in order under a run budget and write them back with their outputs.

    python -m transformer_lib.book run [--budget smoke|cpu|full] [--record] [CHAPTER ...]
"""
from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import tempfile
import time

import nbformat

from transformer_lib.book import CORPUS_OUTPUT_TAG, Book, BookError, Chapter, _write_atomic
from transformer_lib.runtime import BUDGET_ENV, busy_seconds, other_cores, own_cpus, process_seconds, run_budget

__all__ = ["settle_streams", "run"]


def settle_streams(outputs: list) -> list:
    """Outputs as a terminal would leave them: consecutive pieces of one stream joined, and each line only what
    follows its last carriage return, so that a progress bar is kept as its final state, not as every redraw."""
    settled = []
    for output in outputs:
        if output.get("output_type") == "stream" and settled and settled[-1].get("output_type") == "stream" \
                and settled[-1].get("name") == output.get("name"):
            settled[-1]["text"] += output["text"]
        else:
            settled.append(output)
    for output in settled:
        if output.get("output_type") == "stream" and "\r" in output["text"]:
            output["text"] = "\n".join(line.rsplit("\r", 1)[-1] for line in output["text"].split("\n"))
    return settled


class _Progress:
    """Which cell of a chapter runs, and for how long: a line every `every` seconds while one cell runs long."""

    def __init__(self, label: str, cells: list, out, every: float = 60.0, recorded: float | None = None):
        import threading

        self.label, self.out, self.every, self.recorded = label, out, every, recorded
        self.cells = cells
        self.code = [i for i, c in enumerate(cells) if c.cell_type == "code"]
        self.index, self.cell, self.started = None, None, time.perf_counter()
        self.cell_started = self.started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def on_cell_start(self, cell, cell_index, **_):
        self.index, self.cell, self.cell_started = cell_index, cell, time.perf_counter()

    def _number(self):
        return self.code.index(self.index) + 1 if self.index in self.code else "?"

    def where(self) -> str:
        if self.index is None:
            return "before the first cell"
        number = self._number()
        first = next((line for line in self.cell.source.splitlines() if line.strip() and not line.startswith("#")), "")
        return f"cell {self.index} (code cell {number} of {len(self.code)}: {first.strip()[:60]})"

    def doing(self) -> str:
        """What the running cell does, in the book's words: the heading of its section, else its first comment."""
        for cell in reversed(self.cells[: self.index]):
            if cell.cell_type == "markdown":
                heading = next((line for line in cell.source.splitlines() if line.startswith("#")), None)
                if heading:
                    return re.sub(r"^#+\s*(\d+\.\s+)?", "", heading).strip()  # "## 4. Decoding" -> "Decoding"
        comment = next((line for line in self.cell.source.splitlines() if line.startswith("# ")), "")
        return comment[2:].strip() or "the first section"

    def line(self, now: float) -> str | None:
        """What to print at time `now` (perf_counter seconds): None unless a cell has run `every` seconds."""
        cell = now - self.cell_started
        if self.index is None or cell < self.every:
            return None
        number = self._number()
        recorded = (f"; the recorded run took {self.recorded / 60:.1f} min for the whole chapter"
                    if self.recorded is not None else "")
        return (f"{self.label}: {_clock(now - self.started)} in, \"{self.doing()}\" (code cell {number} of "
                f"{len(self.code)}) running for {_clock(cell)}{recorded}")

    def _beat(self):
        while not self._stop.wait(self.every):
            line = self.line(time.perf_counter())
            if line:
                print(line, file=self.out, flush=True)


# run silently in each chapter's kernel before its first cell: torch uses only the cores other processes leave free
SHARE_CORES = "__import__('transformer_lib.runtime', fromlist=['share_cores']).share_cores()"


class _Kernel:
    """What the runner does in a chapter's kernel besides its cells: start core sharing there (SHARE_CORES), and
    measure how many cores other processes kept busy while the chapter ran (Linux; None elsewhere)."""

    def __init__(self, client):
        self.client, self.pid, self.start, self.end = client, None, None, None
        self.cpus = own_cpus()

    def _sample(self):
        kernel = process_seconds(self.pid) if self.pid is not None else None
        busy = busy_seconds(self.cpus)
        return time.monotonic(), busy, None if kernel is None or busy is None else kernel + time.process_time()

    async def on_notebook_start(self, notebook, **_):
        self.pid = getattr(self.client.km.provisioner, "pid", None)
        self.start = self._sample()
        reply = await self.client.async_wait_for_reply(
            self.client.kc.execute(SHARE_CORES, silent=True, store_history=False))
        content = (reply or {}).get("content", {})
        if content.get("status") != "ok":
            raise BookError(f"the kernel could not start sharing cores: {content.get('ename', 'no reply')}: "
                            f"{content.get('evalue', '')}")

    def on_cell_executed(self, **_):
        self.end = self._sample()

    def others(self) -> float | None:
        """Cores other processes kept busy, on average, from the kernel's start to the end of its last cell."""
        return None if self.start is None or self.end is None else other_cores(self.start, self.end)


def _client_class():
    """nbclient's NotebookClient, made to stop once however many signals arrive. Its own handler for SIGINT and
    SIGTERM starts a clean-up of the kernel at each signal, and the failed cell's clean-up starts another: run
    together they fail, and at exit Python prints "Task exception was never retrieved" with their tracebacks."""
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    class Client(NotebookClient):
        _stopping = None

        async def _async_cleanup_kernel(self) -> None:
            if self._stopping is None:  # the first clean-up does the work; the others wait for it
                self._stopping = asyncio.ensure_future(super()._async_cleanup_kernel())
            await asyncio.wait([self._stopping])
            if getattr(self, "_async_cleanup_kernel_future", None) is None:  # no signal: a failure is news
                self._stopping.result()
            elif not self._stopping.cancelled():
                self._stopping.exception()  # stopped by a signal: the kernel is gone either way, say nothing more

        async def _async_check_alive(self) -> None:
            if self.kc is None:  # shut down by a signal while a cell ran
                raise DeadKernelError("the kernel was shut down")
            await super()._async_check_alive()

    return Client


def _interrupt(*_):
    raise KeyboardInterrupt  # SIGTERM ends the run as Ctrl-C does, with one line


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s"


def _failure(err: BaseException, where: str, timeout: int) -> str:
    """One line saying why a cell stopped the run."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    if isinstance(err, CellTimeoutError):
        return f"{where} ran past the time-out of {timeout}s (--timeout)"
    if isinstance(err, DeadKernelError):
        return f"the kernel died in {where} (out of memory?)"
    if isinstance(err, KeyboardInterrupt):
        return f"interrupted {where if where.startswith('before') else 'in ' + where}"
    if isinstance(err, CellExecutionError):
        return f"{where} raised {err.ename}: {(err.evalue or '').splitlines()[0] if err.evalue else ''}".rstrip(": ")
    return f"{where}: {type(err).__name__}: {err}"


# what every kernel prints on start, that no reader can act on: the kernel listens on this machine alone
_KERNEL_NOISE = ("running over TCP without encryption",)


def _last_words(log, err: BaseException) -> str:
    """For a kernel that died: its last line on standard error (e.g. the signal that killed it), if it wrote one."""
    from nbclient.exceptions import DeadKernelError

    if not isinstance(err, DeadKernelError):
        return ""
    log.seek(0)
    lines = [line.strip() for line in log.read().splitlines()
             if line.strip() and not any(noise in line for noise in _KERNEL_NOISE)]
    return f" (the kernel's last words: {lines[-1][:200]})" if lines else ""


def _recorded(book: Book, recorded_runs) -> dict:
    """docs/runs.json as {chapter file: {budget: {"seconds": number, "machine": text, ...}}}, checked: a BookError
    naming the file and the entry that is not that."""
    from transformer_lib.records import RUNS_FILE

    fix = "fix it, or delete it (`book run --record` writes it again)"
    try:
        runs = recorded_runs(book)
    except (TypeError, AttributeError, KeyError) as err:
        raise BookError(f"{RUNS_FILE}: not {{chapter file: {{budget: record}}}} ({type(err).__name__}); {fix}") from None
    for file, by_budget in runs.items():
        if not isinstance(by_budget, dict):
            raise BookError(f"{RUNS_FILE}: {file} holds a {type(by_budget).__name__}, not {{budget: record}}; {fix}")
        for budget, run in by_budget.items():
            seconds = run.get("seconds") if isinstance(run, dict) else None
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf") \
                    or not isinstance(run.get("machine", ""), str):
                raise BookError(f"{RUNS_FILE}: {file} {budget}: expected {{\"seconds\": number, \"machine\": text}}, "
                                f"got {str(run)[:80]}; {fix}")
    return runs


def _set_signal(sig, handler):
    """signal.signal where it can be set (the main thread); returns the previous handler, or None."""
    try:
        return signal.signal(sig, handler) if handler is not None else None
    except ValueError:  # not the main thread: leave signals alone
        return None


def _silent(err: BaseException) -> bool:
    """Whether nbclient gave up on a kernel that never answered ("Kernel didn't respond in N seconds")."""
    return isinstance(err, RuntimeError) and "didn't respond" in str(err)


def started_again_if_silent(start):
    """`start` (a function that starts a kernel and waits for it), called a second time if the kernel never answers:
    two kernels started at the same moment (two test workers, or a test run beside `book run`) can be handed the same
    free port, and the one that loses it exits ("Address already in use") while its client waits. Any other failure
    is raised as it came. `book run`, nbval's kernels (conftest.py) and the exercises test start kernels through it."""
    def start_twice(*args, **kwargs):
        try:
            return start(*args, **kwargs)
        except RuntimeError as err:
            if not _silent(err):
                raise
            return start(*args, **kwargs)

    return start_twice


def run(book: Book, chapters: list[Chapter], budget: str | None = None, timeout: int = 1800, out=None,
        record: bool = False, every: float = 60.0) -> None:
    """Execute chapters in order with the given budget and write them back with outputs.

    Under the cpu and full budgets, a chapter with a recorded run under its budget (docs/runs.json keeps a time per
    chapter, none per cell) says at its start how long that took. While a cell runs longer than `every` seconds a
    line says which one and for how long. A failing cell, a time-out, a dead kernel, Ctrl-C or SIGTERM (however often
    sent) ends the run with a BookError naming the chapter and the cell; the chapter's file is left as it was. With
    `record`, each chapter's time goes into docs/runs.json (records.record_run), with the cores other processes kept
    busy meanwhile. Each kernel first calls runtime.share_cores, so that torch uses
    only the cores other processes leave free.
    """
    out = out or sys.stdout
    from nbclient.exceptions import CellControlSignal, DeadKernelError

    NotebookClient = _client_class()

    from transformer_lib.records import recorded_runs
    from transformer_lib.runtime import machine

    budget = run_budget(budget)
    recorded = _recorded(book, recorded_runs)  # docs/runs.json: how long each chapter took when last recorded
    previous = os.environ.get(BUDGET_ENV)
    os.environ[BUDGET_ENV] = budget  # the kernels inherit it
    on_term = _set_signal(signal.SIGTERM, _interrupt)
    chapter = None
    try:
        for number, chapter in enumerate(chapters, 1):
            _set_signal(signal.SIGTERM, _interrupt)  # nbclient's handler, removed after a chapter, leaves the default
            path = book.root / chapter.file
            label = f"[{number}/{len(chapters)}] {chapter.title} ({chapter.file}), budget {budget}"
            print(f"{label} ...", file=out, flush=True)
            last = recorded.get(chapter.file, {}).get(budget)
            if budget != "smoke" and last is not None:  # a long run says at its start how long it took when recorded
                print(f"[{number}/{len(chapters)}] {chapter.title}: recorded {_duration(last['seconds'])} under "
                      f"{budget} on {last.get('machine', 'an unnamed machine')}", file=out, flush=True)
            nb = nbformat.read(path, as_version=4)
            start = time.perf_counter()
            run = recorded.get(chapter.file, {}).get(budget) or {}  # this chapter's last run under this budget
            with _Progress(f"[{number}/{len(chapters)}] {chapter.title}", nb.cells, out, every,
                           run.get("seconds")) as progress:
                clients = []  # the client of each start; the last is the one that ran

                def execute():
                    client = NotebookClient(
                        nb, timeout=timeout, kernel_name="python3", record_timing=False,
                        resources={"metadata": {"path": str(path.parent)}}, on_cell_start=progress.on_cell_start,
                    )
                    kernel = _Kernel(client)
                    client.on_notebook_start, client.on_cell_executed = kernel.on_notebook_start, kernel.on_cell_executed
                    clients.append((client, kernel))
                    client.execute(stderr=log)  # the kernel's own messages go to a log, shown if it dies

                with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as log:
                    try:
                        try:
                            started_again_if_silent(execute)()  # a test run beside this one may take its port
                        except RuntimeError as err:
                            if not _silent(err):
                                raise
                            print(f"{label}: FAILED", file=out, flush=True)
                            raise BookError(f"{chapter.file}: two kernels in a row did not start ({err}); the file "
                                            "was left as it was") from None
                    except (CellControlSignal, DeadKernelError, KeyboardInterrupt, AssertionError) as err:
                        # On Ctrl-C nbclient's own signal handler shuts the kernel down mid-cell, and the cell then
                        # fails with DeadKernelError, its clean-up with AssertionError: say what happened, once
                        interrupted = bool(clients) and getattr(clients[-1][0], "_async_cleanup_kernel_future", None) is not None
                        err = KeyboardInterrupt() if interrupted else err
                        print(f"{label}: FAILED", file=out, flush=True)
                        raise BookError(f"{chapter.file} failed under budget {budget}: "
                                        f"{_failure(err, progress.where(), timeout)}{_last_words(log, err)}; the file "
                                        "was left as it was") from None
            seconds = time.perf_counter() - start
            for cell in nb.cells:
                if CORPUS_OUTPUT_TAG in cell.get("metadata", {}).get("tags", []):
                    cell.outputs = []  # shown to the reader who runs it, never committed
                elif cell.cell_type == "code":
                    cell.outputs = settle_streams(cell.outputs)
            _write_atomic(path, nbformat.writes(nb) + "\n")
            others = clients[-1][1].others()
            if record:
                from transformer_lib.records import record_run

                record_run(book, chapter, budget, seconds, machine(), others=others)
            beside = f" (other processes kept {others:.1f} cores busy)" if others is not None and others >= 0.1 else ""
            print(f"{label}: done in {seconds:.1f}s{beside}", file=out, flush=True)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM outside a cell: between chapters, while one is read or written
        where = f"{chapter.file} under budget {budget}" if chapter is not None else f"budget {budget}"
        raise BookError(f"interrupted ({where}); the chapter being written, if any, was left as it was") from None
    finally:
        _set_signal(signal.SIGTERM, on_term)
        if previous is None:
            os.environ.pop(BUDGET_ENV, None)
        else:
            os.environ[BUDGET_ENV] = previous
