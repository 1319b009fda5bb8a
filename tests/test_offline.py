"""The test command with and without Multi30k: $MULTI30K_OFFLINE, the outputs of cells tagged corpus-dependent on
the offline corpus (transformer_lib.book.corpus, `book offline`), and the conftest that compares them."""
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from transformer_lib import book as bk
from transformer_lib.book import corpus
from transformer_lib.multi30k import OFFLINE_ENV, DataUnavailable, load_multi30k, offline_forced
from transformer_lib.translation import prepare_data, RECIPES

from test_book import make_book

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("value, forced", [("1", True), ("yes", True), ("0", False), ("", False), (" ", False)])
def test_the_offline_switch_reads_as_it_says(monkeypatch, value, forced):
    monkeypatch.setenv(OFFLINE_ENV, value)
    assert offline_forced() is forced


def test_offline_refuses_multi30k_at_once_even_where_its_files_are(monkeypatch, tmp_path):
    monkeypatch.setenv("MULTI30K_DIR", str(tmp_path))  # files or not, nothing is looked for
    monkeypatch.setenv(OFFLINE_ENV, "1")
    with pytest.raises(DataUnavailable, match=r"\$MULTI30K_OFFLINE is set"):
        load_multi30k("val")
    data = prepare_data(RECIPES["smoke"])  # the chapters' loader falls back, and says so
    assert data.source.startswith("OFFLINE CORPUS, NOT Multi30k")
    assert not corpus.multi30k_available()


def tagged_book(tmp_path):
    cells = ["#| default_exp alpha", "import os\nprint(os.environ.get('MULTI30K_OFFLINE'), os.environ.get('BOOK_BUDGET'))",
             "print('the same on every corpus')"]
    book = make_book(tmp_path, {"01_alpha": cells})
    path = tmp_path / "notebooks" / "01_alpha.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].metadata["tags"] = [corpus.TAG]
    nbformat.write(nb, path)
    return book, path


def test_book_offline_records_what_tagged_cells_show_on_the_offline_corpus(tmp_path, monkeypatch):
    monkeypatch.delenv(OFFLINE_ENV, raising=False)
    book, path = tagged_book(tmp_path)
    (problem,) = corpus.offline_problems(book)
    assert "tagged corpus-dependent but has no offline output" in problem and "book offline" in problem
    written = corpus.record_offline(book, log=lambda *_: None)
    assert written == tmp_path / corpus.OFFLINE_FILE and OFFLINE_ENV not in os.environ  # the switch is put back
    nb = nbformat.read(path, as_version=4)
    (entry,) = corpus.offline_outputs(tmp_path)["notebooks/01_alpha.ipynb"].values()
    assert entry["outputs"][0]["text"] == "1 smoke\n"  # offline, at the test command's budget
    assert entry["source"] == corpus.source_hash(nb.cells[2].source) and nb.cells[2].outputs == []  # not changed
    assert corpus.offline_problems(book) == []
    nb.cells[2].source += "  # edited"
    nbformat.write(nb, path)
    assert "changed since its offline output was recorded" in corpus.offline_problems(book)[0]
    nb.cells[2].metadata["tags"] = []
    nbformat.write(nb, path)
    (problem,) = corpus.offline_problems(book)
    assert "not tagged corpus-dependent (or is gone)" in problem
    with pytest.raises(ValueError, match="has no cell tagged corpus-dependent"):
        corpus.record_offline(book, ["notebooks/01_alpha.ipynb"], log=lambda *_: None)


def test_the_book_records_an_offline_output_for_every_tagged_cell():
    book = bk.load_book(ROOT)
    assert corpus.offline_problems(book) == []
    tagged = corpus.tagged_cells(book)
    assert "notebooks/06_data.ipynb" in tagged  # its counts of Multi30k's words and pre-tokens, at least
    for file, cells in tagged.items():  # a tagged cell is compared, never ignored wholesale
        assert all("nbval-ignore-output" not in c.metadata.get("tags", []) for c in cells), file


def test_a_chapter_passes_the_test_command_on_the_offline_corpus():
    """nbval over chapter 6 with $MULTI30K_OFFLINE set: its tagged cells are compared with their offline outputs,
    the others with the committed ones, and all of them pass."""
    env = {k: v for k, v in os.environ.items() if k != "MULTI30K_DIR"} | {OFFLINE_ENV: "1", "BOOK_BUDGET": "smoke"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                           "notebooks/06_data.ipynb"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "the chapters read the offline corpus; cells tagged corpus-dependent were compared" in done.stdout


def test_the_offline_switch_reaches_the_kernels_and_never_the_unit_tests(tmp_path):
    """The newcomer's condition (no Multi30k, no $MULTI30K_DIR, downloads refused, an empty home), one process for a
    notebook and a unit test, as a worker of the test command holds them: the notebook's kernel reads the offline
    corpus ($MULTI30K_OFFLINE is set there: its committed output says 1), while the unit test, collected beside it,
    does not see the switch, and still reads the files it makes itself."""
    (tmp_path / "conftest.py").write_text((ROOT / "conftest.py").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "test_unit.py").write_text(
        "import os\n\ndef test_the_switch_is_not_here():\n    assert 'MULTI30K_OFFLINE' not in os.environ\n",
        encoding="utf-8")
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("import os\nprint(os.environ.get('MULTI30K_OFFLINE'))", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "chapter.ipynb")
    (tmp_path / "home").mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("MULTI30K_DIR", OFFLINE_ENV, "XDG_CACHE_HOME", "NO_PROXY", "no_proxy")}
    env |= {"HOME": str(tmp_path / "home"), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
            "https_proxy": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9"}
    for order in (["chapter.ipynb", "test_unit.py"], ["test_unit.py", "chapter.ipynb"]):
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "--nbval",
                               *order], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        assert "2 passed" in done.stdout and "the chapters read the offline corpus" in done.stdout, done.stdout[-2000:]
