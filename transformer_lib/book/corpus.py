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
import tempfile
from pathlib import Path

__all__ = ["TAG", "OFFLINE_FILE", "source_hash", "tagged_cells", "offline_outputs", "offline_problems",
           "multi30k_available", "record_offline"]

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


def offline_outputs(root) -> dict:
    """The recorded offline outputs: {chapter file: {cell id: {"source": hash, "outputs": [...]}}} ({} if none)."""
    path = Path(root) / OFFLINE_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


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
    recorded = {file: kept for file, kept in offline_outputs(book.root).items() if file in tagged}
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
