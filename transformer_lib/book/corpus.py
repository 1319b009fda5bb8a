# Hand-written tool module (not generated from a notebook).
"""Outputs that depend on which corpus a chapter read: Multi30k, or the offline corpus that stands in for it.

A code cell tagged `corpus-dependent` shows what only the corpus decides (how many sentences, words or pre-tokens;
the scores of a model trained on them). Its committed output is Multi30k's. `python -m transformer_lib.book offline`
runs the chapters that hold such cells at the `smoke` budget (the budget of the test command) with $MULTI30K_OFFLINE
set, and keeps what each tagged cell shows there in notebooks/offline_outputs.json, beside a hash of the cell's
source. Where Multi30k cannot be had, the test command (conftest.py) compares those cells with these outputs instead
of the committed ones, so the same command passes with the data and without it; every other cell is compared as
always. `book check` fails while a tagged cell has no offline output, or one recorded from another version of it.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

from transformer_lib.book import BookError

__all__ = ["TAG", "OFFLINE_FILE", "source_hash", "tagged_cells", "offline_outputs", "current_offline_outputs",
           "offline_problems", "multi30k_available", "record_offline", "OfflineFileError"]

TAG = "corpus-dependent"
OFFLINE_FILE = "notebooks/offline_outputs.json"


def source_hash(source: str) -> str:
    """A short hash of a cell's source: an offline output is stale once its cell changes."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def tagged_cells(book) -> dict[str, list]:
    """{chapter file: [its code cells tagged corpus-dependent]}, chapters without one left out."""
    import nbformat

    found = {}
    for chapter in book.chapters:
        nb = nbformat.read(book.root / chapter.file, as_version=4)
        cells = [c for c in nb.cells if c.cell_type == "code" and TAG in c.metadata.get("tags", [])]
        if cells:
            found[chapter.file] = cells
    return found


class OfflineFileError(BookError):
    """notebooks/offline_outputs.json cannot be read. Inside a pytest run it is also pytest's UsageError (see
    _unreadable), so that the test command's collection (conftest.py) ends with its one line, not a traceback."""


def _unreadable(why: str) -> BookError:
    message = (f"{OFFLINE_FILE}: {why}; run `python -m transformer_lib.book offline` to record it again, or "
               f"`git checkout {OFFLINE_FILE}` to restore the committed one")
    pytest = sys.modules.get("pytest")
    if pytest is not None and hasattr(pytest, "UsageError"):
        return type("OfflineFileError", (OfflineFileError, pytest.UsageError), {})(message)
    return OfflineFileError(message)


def offline_outputs(root) -> dict:
    """The recorded offline outputs: {chapter file: {cell id: {"source": hash, "outputs": [...]}}} ({} if none).
    A file that is not that (not UTF-8 JSON, another shape) is a BookError naming it and what to run."""
    path = Path(root) / OFFLINE_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        line = f" (line {err.lineno})" if isinstance(err, json.JSONDecodeError) else ""
        raise _unreadable(f"cannot be read as JSON{line}: {type(err).__name__}") from None
    if not isinstance(data, dict):
        raise _unreadable(f"holds a {type(data).__name__}, not an object keyed by chapter file")
    for file, kept in data.items():
        if not isinstance(kept, dict):
            raise _unreadable(f"{file!r} holds a {type(kept).__name__}, not an object keyed by cell id")
        for cell_id, entry in kept.items():
            if not (isinstance(entry, dict) and isinstance(entry.get("source"), str)
                    and isinstance(entry.get("outputs"), list) and all(isinstance(o, dict) for o in entry["outputs"])):
                raise _unreadable(f"{file!r} cell {cell_id!r} is not {{\"source\": hash, \"outputs\": [output, ...]}}")
    return data


def current_offline_outputs(recorded: dict, file: str, cell) -> list | None:
    """What a cell of `file` tagged corpus-dependent shows on the offline corpus, from `recorded` (offline_outputs),
    as notebook outputs; None where nothing was recorded from the cell's current source."""
    import nbformat

    entry = recorded.get(file, {}).get(cell.id)
    if entry is None or entry["source"] != source_hash(cell.source):
        return None
    return [nbformat.from_dict(output) for output in entry["outputs"]]


def offline_problems(book) -> list[str]:
    """What `book check` reports: tagged cells without an offline output or with a stale one, and outputs kept for
    cells that are gone or no longer tagged."""
    recorded, problems = offline_outputs(book.root), []
    tagged = tagged_cells(book)
    for file, cells in tagged.items():
        kept = recorded.get(file, {})
        for cell in cells:
            entry = kept.get(cell.id)
            if entry is None:
                problems.append(f"{file}: cell {cell.id} is tagged {TAG} but has no offline output in {OFFLINE_FILE}; "
                                "run `python -m transformer_lib.book offline`")
            elif entry["source"] != source_hash(cell.source):
                problems.append(f"{file}: cell {cell.id} changed since its offline output was recorded; run "
                                "`python -m transformer_lib.book offline`")
    for file, kept in recorded.items():
        ids = {cell.id for cell in tagged.get(file, [])}
        problems += [f"{file}: {OFFLINE_FILE} keeps an output for cell {cell_id}, which is not tagged {TAG} (or is "
                     "gone); run `python -m transformer_lib.book offline`" for cell_id in kept if cell_id not in ids]
    return problems


def multi30k_available() -> bool:
    """Whether the chapters will read Multi30k: every split found locally or downloaded (into the cache, verified),
    and $MULTI30K_OFFLINE not set."""
    from transformer_lib.multi30k import DataUnavailable, load_multi30k

    try:
        for split in ("train", "val", "test2016"):
            load_multi30k(split)
    except DataUnavailable:
        return False
    return True


def record_offline(book, files: list[str] | None = None, timeout: int = 600, log=print) -> Path:
    """Run the chapters with tagged cells (or `files` of them) at the smoke budget on the offline corpus, and write
    what their tagged cells show to notebooks/offline_outputs.json. The committed notebooks are not changed."""
    import nbformat
    from nbclient import NotebookClient

    from transformer_lib.files import write_atomically
    from transformer_lib.multi30k import OFFLINE_ENV
    from transformer_lib.runtime import BUDGET_ENV

    tagged = tagged_cells(book)
    try:
        recorded = {file: kept for file, kept in offline_outputs(book.root).items() if file in tagged}
    except OfflineFileError as err:
        if files:  # the other chapters' outputs are lost with the file: record them all
            raise OfflineFileError(f"{err} (naming no chapter: the other chapters' outputs are lost with the file)") \
                from None
        recorded = {}  # every chapter is recorded afresh
    saved = {key: os.environ.get(key) for key in (OFFLINE_ENV, BUDGET_ENV)}
    os.environ.update({OFFLINE_ENV: "1", BUDGET_ENV: "smoke"})  # the kernel inherits both
    try:
        for file in files or list(tagged):
            if file not in tagged:
                raise ValueError(f"{file} has no cell tagged {TAG}; chapters that do: {', '.join(tagged)}")
            log(f"{file}: running on the offline corpus, budget smoke ...")
            nb = nbformat.read(book.root / file, as_version=4)
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                    resources={"metadata": {"path": str((book.root / file).parent)}})
            with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as kernel_log:
                client.execute(stderr=kernel_log)  # the kernel's start-up notices, which no reader can act on
            recorded[file] = {c.id: {"source": source_hash(c.source), "outputs": c.outputs}
                              for c in nb.cells if c.cell_type == "code" and TAG in c.metadata.get("tags", [])}
            log(f"{file}: {len(recorded[file])} tagged cells recorded")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    path = book.root / OFFLINE_FILE
    text = json.dumps({file: recorded[file] for file in sorted(recorded)}, indent=1, ensure_ascii=False) + "\n"
    write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return path
