"""The test command's settings for the chapters: the run budget, and which corpus they read.

Tests marked `cuda` run wherever CUDA is present and are skipped, with that reason, where it is not.

The notebooks are executed by nbval in the same pytest run as tests/; their kernels inherit this process's
environment, so the run budget defaults to `smoke` here (CI's budget), whichever folder pytest is given.

Where Multi30k can be had (found, or downloaded into the cache), nbval compares every cell with its committed output,
which Multi30k made. Where it cannot (no files and no network), this sets $MULTI30K_OFFLINE for the chapters' kernels,
so that they read the offline corpus at once, and compares each cell tagged corpus-dependent with what it showed on
that corpus (notebooks/offline_outputs.json, recorded by `python -m transformer_lib.book offline`); every other cell
is compared as always. See transformer_lib/book/corpus.py.
"""
import os
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent
os.environ.setdefault("BOOK_BUDGET", "smoke")


def pytest_collection_modifyitems(session, config, items):
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
    os.environ[OFFLINE_ENV] = "1"  # the kernels, started later, inherit it: no download tried in each chapter
    recorded = corpus.offline_outputs(ROOT)
    for item in cells:
        if corpus.TAG not in item.cell.metadata.get("tags", []):
            continue
        file = Path(str(item.parent.fspath)).resolve().relative_to(ROOT).as_posix()
        entry = recorded.get(file, {}).get(item.cell.id)
        if entry is None or entry["source"] != corpus.source_hash(item.cell.source):
            raise pytest.UsageError(f"{file}: cell {item.cell.id} is tagged {corpus.TAG} but has no current output on "
                                    f"the offline corpus in {corpus.OFFLINE_FILE}; run `python -m transformer_lib.book "
                                    "offline`")
        item.cell.outputs = [nbformat.from_dict(output) for output in entry["outputs"]]


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


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    which = getattr(config, "_book_corpus", None)
    if which is not None:
        terminalreporter.write_line(f"the chapters read {which}" + (
            "; cells tagged corpus-dependent were compared with their outputs on it" if "offline" in which else ""))
