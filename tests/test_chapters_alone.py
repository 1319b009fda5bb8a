"""Each chapter runs alone, as in Colab: a fresh kernel, an empty folder, only the installed package.

nbval runs the chapters from notebooks/; here each one is copied into an empty folder first, so that a chapter
reading a file beside it, or a variable only an earlier notebook made, fails here.
"""
import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from transformer_lib.book import load_book

ROOT = Path(__file__).resolve().parents[1]
BOOK = load_book(ROOT)


@pytest.mark.parametrize("chapter", BOOK.chapters, ids=[Path(c.file).stem for c in BOOK.chapters])
def test_chapter_runs_alone_from_an_empty_folder(chapter, tmp_path, monkeypatch):
    folder = tmp_path / "colab"
    folder.mkdir()
    notebook = folder / Path(chapter.file).name
    shutil.copy(ROOT / chapter.file, notebook)
    monkeypatch.setenv("BOOK_BUDGET", os.environ.get("BOOK_BUDGET", "smoke"))
    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
