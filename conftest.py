"""The test command's settings for the chapters: the run budget, and which corpus they read.

Tests marked `cuda` run wherever CUDA is present and are skipped, with that reason, where it is not.

The notebooks are executed by nbval in the same pytest run as tests/; their kernels inherit this process's
environment, so the run budget defaults to `smoke` here (CI's budget), whichever folder pytest is given.

Where Multi30k can be had (found, or downloaded into the cache), nbval compares every cell with its committed output,
which Multi30k made. Where it cannot (no files and no network), this sets $MULTI30K_OFFLINE for the chapters' kernels
alone (never for this process, whose unit tests build their own files), so that they read the offline corpus at once, and compares each cell tagged corpus-dependent with what it showed on
that corpus (notebooks/offline_outputs.json, recorded by `python -m transformer_lib.book offline`); every other cell
is compared as always. See transformer_lib/book/corpus.py.

Each notebook writes only where docs/robustness.md says (Re-running): its kernel starts with a home folder and a
temporary folder of its own, and when the notebook ends, its last cell's teardown fails on any file left outside the
documented places in either, and on any file it added or changed in the repository but chapter 8's checkpoints
(notebooks/runs/) and Python's caches.

The tests run in parallel (pytest-xdist; pyproject.toml sets `-n auto`, a worker a core, at most four; `-n 0` runs
them in this process). A notebook's cells stay in one worker and in order, and so do a test file's tests, which may
share a fixture, except in the files of SPREAD, whose tests share nothing. The longest files start first, and each
worker gives torch, and every kernel and command it starts, its share of the cores. A notebook's kernel that never
answers is started once more (two workers' kernels can be handed one port).
"""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
os.environ.setdefault("BOOK_BUDGET", "smoke")
# what the notebooks' kernels get beside this process's environment, and no test of tests/ sees
KERNEL_ENV: dict[str, str] = {}


def own_cores() -> int:
    """The cores this process may run on (not transformer_lib.runtime's: that imports torch, which reads
    OMP_NUM_THREADS once, and a worker must set it first)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get("OMP_NUM_THREADS"):
    # a worker of a parallel run, and every kernel and command it starts, takes its share of the cores: torch's
    # threads on more cores than are free wait for each other, and a chapter of seconds took minutes
    os.environ["OMP_NUM_THREADS"] = str(max(1, own_cores() // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))


# test files whose tests run one at a time wherever a worker is free: they share no fixture, and each is long
SPREAD = ("tests/test_exercises_in_chapter.py",)
# what a parallel run starts first (node ids starting so), the longest work: the workers then end together
_SOLVED = "tests/test_exercises_in_chapter.py::test_solved_exercises_leave_the_chapter_runnable"
LONGEST = (f"{_SOLVED}[05_training]", f"{_SOLVED}[09_fast]", "tests/test_rerun.py", "tests/test_speedrun.py",
           "tests/test_training.py", "notebooks/09_fast.ipynb", "notebooks/05_training.ipynb", "tests/test_website.py",
           f"{_SOLVED}[08", f"{_SOLVED}[07", f"{_SOLVED}[10", f"{_SOLVED}[11", "tests/test_fast.py",
           "notebooks/08_translation.ipynb", "notebooks/06_data.ipynb", "notebooks/07_decoding.ipynb")


# the lanes: `-m quick` proves an install in about two minutes (CPU_MINUTES below); `slow` is the rest: the chapters
# under nbval, whole chapters run again, training runs, the website, benchmarks run for real (node ids starting so)
SLOW = ("notebooks/", "tests/test_exercises_in_chapter.py", "tests/test_speedrun.py", "tests/test_rerun.py",
        "tests/test_training.py", "tests/test_website.py", "tests/test_book.py", "tests/test_diagrams.py",
        "tests/test_fast.py::test_the_candidates_benchmark", "tests/test_fast.py::test_the_speed_benchmark",
        "tests/test_files.py::test_many_writers", "tests/test_gpu_record.py::test_the_command_records",
        "tests/test_offline.py::test_a_chapter_passes", "tests/test_offline.py::test_the_offline_switch_reaches",
        "tests/test_live.py::test_the_page_translates")


def pytest_report_header(config):
    return ["the whole command takes 10 to 25 minutes on 2 cores; the longest tests (whole chapters) start first, so the "
            "count moves slowly at first. `python -m pytest -m quick` proves an install in about two minutes."]


def _lane(item) -> None:
    item.add_marker(pytest.mark.slow if item.nodeid.startswith(SLOW) else pytest.mark.quick)


def _rank(nodeid: str) -> int:
    return next((i for i, start in enumerate(LONGEST) if nodeid.startswith(start)), len(LONGEST))


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(session, config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: _rank(item.nodeid))  # stable: a file's tests, a notebook's cells keep their order
    for item in items:
        _lane(item)
    _skip_cuda_tests_without_cuda(items)
    cells = [item for item in items if type(item).__name__ == "IPyNbCell"]
    if not cells:
        return
    from transformer_lib.book import corpus
    from transformer_lib.multi30k import OFFLINE_ENV

    if corpus.multi30k_available():
        config._book_corpus = "Multi30k"
        return
    config._book_corpus = "the offline corpus"
    # the notebooks' kernels, started later, get it (no download tried in each chapter); this process does not, so
    # the unit tests of the same worker still find the files they make themselves (_NotebookPlaces.environment)
    KERNEL_ENV[OFFLINE_ENV] = "1"
    recorded = corpus.offline_outputs(ROOT)
    for item in cells:
        if corpus.TAG not in item.cell.metadata.get("tags", []):
            continue
        file = Path(str(item.parent.fspath)).resolve().relative_to(ROOT).as_posix()
        outputs = corpus.current_offline_outputs(recorded, file, item.cell)
        if outputs is None:
            raise pytest.UsageError(f"{file}: cell {item.cell.id} is tagged {corpus.TAG} but has no current output on "
                                    f"the offline corpus in {corpus.OFFLINE_FILE}; run `python -m transformer_lib.book "
                                    "offline`")
        item.cell.outputs = outputs


def pytest_collection_finish(session):
    """No chapter left to run (`-m quick`, or tests/ alone): no line about the corpus the chapters read."""
    if not any(type(item).__name__ == "IPyNbCell" for item in session.items):
        session.config.__dict__.pop("_book_corpus", None)


def _skip_cuda_tests_without_cuda(items) -> None:
    """Tests marked `cuda` run wherever CUDA is present; elsewhere each is skipped with the reason, never hidden."""
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if not marked:
        return
    import torch

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (marked cuda); none is present")
        for item in marked:
            item.add_marker(skip)


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput") and hasattr(session.config, "_book_corpus"):
        session.config.workeroutput["book_corpus"] = session.config._book_corpus  # to the controller, below


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    which = getattr(config, "_book_corpus", None)
    if which is not None:
        terminalreporter.write_line(f"the chapters read {which}" + (
            "; cells tagged corpus-dependent were compared with their outputs on it" if "offline" in which else ""))


# ------------------------------------------------------------------------------ a parallel run (pytest-xdist)
try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover - pytest-xdist is in requirements.txt; without it the tests run in one process
    LoadScopeScheduling = None

if LoadScopeScheduling is not None:
    class _Groups(LoadScopeScheduling):
        """A notebook's cells, and a test file's tests, go to one worker, in order; a test of SPREAD goes alone."""

        def _split_scope(self, nodeid: str) -> str:
            return nodeid if _file(nodeid) in SPREAD else _file(nodeid)

    # optional: with `-p no:xdist` pytest knows no such hooks
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(config, log):
        config.option.loadscopereorder = False  # the order pytest_collection_modifyitems gave: the longest first
        return _Groups(config, log)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_auto_num_workers(config):
        """`-n auto`: a worker a core, at most four (each holds a chapter's kernel and its memory)."""
        return max(1, min(4, own_cores()))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(node, error):
        which = getattr(node, "workeroutput", {}).get("book_corpus")
        if which is not None:
            node.config._book_corpus = which


# ------------------------------------------------------------------------------ a kernel that never answers
from transformer_lib.book.runner import started_again_if_silent  # noqa: E402 (imports torch: after the threads are set)

try:  # nbval's kernels (nbval.kernel.RunningKernel calls the module's start_new_kernel)
    import nbval.kernel as _nbval_kernel

    _nbval_kernel.start_new_kernel = started_again_if_silent(_nbval_kernel.start_new_kernel)
except ImportError:  # pragma: no cover - nbval is in requirements.txt
    pass


# ------------------------------------------------------------------------------ where a notebook may write
# Outside the repository: the book's own cache (Multi30k), and the folders Jupyter, IPython and matplotlib keep in
# every home (docs/robustness.md, Re-running). tests/test_rerun.py holds `book run` to the same places.
ALLOWED_IN_HOME = (".cache/transformer_lib", ".cache/matplotlib", ".config/matplotlib", ".local/share/jupyter",
                   ".ipython", ".jupyter")
# In the repository: chapter 8's checkpoints, and Python's caches
ALLOWED_IN_REPO = ("notebooks/runs/",)
# settings that would send a kernel's files somewhere else than its home folder
ELSEWHERE = ("XDG_", "JUPYTER_", "IPYTHONDIR", "MPLCONFIGDIR")


def _files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def _repository_state() -> set[str] | None:
    """git's view of the checkout, every untracked and ignored file named; None outside a git work tree."""
    try:
        done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--ignored=matching"],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return set(done.stdout.splitlines()) if done.returncode == 0 else None


class _NotebookPlaces:
    """A notebook's own home and temporary folders, and the repository as it was before the notebook ran."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="nbval-"))
        self.home, self.tmp = self.folder / "home", self.folder / "tmp"
        self.home.mkdir()
        self.tmp.mkdir()
        self.before = _repository_state()

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(ELSEWHERE)}
        env.update(HOME=str(self.home), TMPDIR=str(self.tmp), **KERNEL_ENV)
        return env

    def problems(self) -> list[str]:
        """What the notebook left where it may not, after its kernel stopped."""
        found = [f"~/{p}" for p in _files_under(self.home) if not p.startswith(ALLOWED_IN_HOME)]
        found += [f"$TMPDIR/{p}" for p in _files_under(self.tmp)]
        after = _repository_state()
        if self.before is not None and after is not None:
            found += [line for line in sorted(after - self.before)
                      if not line[3:].startswith(ALLOWED_IN_REPO) and "__pycache__" not in line]
        return found


_PLACES: dict[str, _NotebookPlaces] = {}


def _notebook(item) -> str | None:
    return str(item.parent.fspath) if type(item).__name__ == "IPyNbCell" else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """A notebook's kernel, started in its first cell's setup, gets the notebook's own home and temporary folder."""
    notebook = _notebook(item)
    if notebook is None:
        return (yield)
    places = _PLACES.get(notebook)
    if places is None:
        places = _PLACES[notebook] = _NotebookPlaces()
        _multi30k_from_the_real_home()
    saved, saved_tempdir, kernels = dict(os.environ), tempfile.tempdir, places.environment()
    os.environ.clear()
    os.environ.update(kernels)
    try:
        return (yield)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        tempfile.tempdir = saved_tempdir


def _multi30k_from_the_real_home() -> None:
    """Multi30k found in the user's cache is still found by a kernel with a home of its own."""
    from transformer_lib.multi30k import MULTI30K_ENV, OFFLINE_ENV, multi30k_dirs

    if os.environ.get(MULTI30K_ENV) or os.environ.get(OFFLINE_ENV) or KERNEL_ENV.get(OFFLINE_ENV):
        return
    cache = multi30k_dirs()[-1]
    if cache.is_dir():
        os.environ[MULTI30K_ENV] = str(cache)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a notebook's last cell, its kernel stopped: anything it left where it may not fails that teardown."""
    result = yield
    notebook = _notebook(item)
    if notebook is not None and (nextitem is None or _notebook(nextitem) != notebook) and notebook in _PLACES:
        places = _PLACES.pop(notebook)
        problems = places.problems()
        shutil.rmtree(places.folder, ignore_errors=True)
        assert not problems, (f"{Path(notebook).name} wrote outside the places docs/robustness.md names "
                              f"(Re-running): {problems}")
    return result
