"""Running chapters with `book run`, and running them again, leaves the repository clean and writes only where
docs/robustness.md says; a chapter whose work does not depend on the budget comes out of a second run byte-identical
to its first run's file.

The run happens in a copy of this checkout (its files as they are now, committed in a fresh git repository), with
HOME and TMPDIR pointed into the test's folder, so that every file the chapters or the command write can be found
afterwards. It runs the chapters whose work never varies twice. Every chapter's own writes, chapter 8's
checkpoints among them, are checked where nbval runs it (conftest.py gives each notebook's kernel a home and a
temporary folder of its own and checks them, and the repository, when the notebook ends), so the whole book is not
run here again.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Where a run may leave files: outside the repository, the book's cache and the folders Jupyter, IPython and
# matplotlib keep in every home; in it, chapter 8's checkpoints (notebooks/runs/) and Python's caches (conftest.py)
from conftest import ALLOWED_IN_HOME, ALLOWED_IN_REPO as ALLOWED_IGNORED, ELSEWHERE, own_cores  # noqa: E402
# Chapters whose work is the same under every budget: run twice, the second run must leave the first run's file, byte
# for byte. Not the committed file: its last digits and its pictures come from the CPU that ran it, and another kind of
# CPU (AVX2 or AVX-512) rounds a sum differently.
SAME_TWICE = ("01_embeddings", "02_attention", "03_blocks", "04_model", "06_data")
# What book run prints: "[3/11] Title (file), budget smoke ...", then "... done in 4.2s", and nothing else
PROGRESS = re.compile(r"^\[[0-9]+/[0-9]+\] ")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_book_run_twice_leaves_git_clean_and_writes_only_documented_places(tmp_path):
    repo, home, tmp = tmp_path / "book", tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    for name in git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard").splitlines():
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=book", "-c", "user.email=book@example.invalid", "commit", "-q", "-m", "copy")

    env = {k: v for k, v in os.environ.items()
           if not k.startswith((*ELSEWHERE, "PYTEST_"))}
    env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONPATH=str(repo), BOOK_BUDGET="smoke")
    # the offline corpus: what is tested is where a run writes and that it repeats itself, on any data (nbval runs
    # each chapter on Multi30k), and chapter 6 runs in a fraction of its time on Multi30k
    env.pop("MULTI30K_DIR", None)
    env["MULTI30K_OFFLINE"] = "1"
    # a fixed thread count: book run's core sharing would follow whatever else the machine runs between the two runs,
    # and a sum over another number of threads rounds differently in the last digits
    # (a parallel test run has set this process's share of the cores: conftest.py)
    env.setdefault("OMP_NUM_THREADS", str(own_cores()))
    book = [sys.executable, "-m", "transformer_lib.book"]
    def path(stem: str) -> Path:
        return repo / "notebooks" / f"{stem}.ipynb"

    first = {}
    # the chapters whose work never varies, twice; then check
    for command in (["run", *SAME_TWICE], ["run", *SAME_TWICE], ["check"]):
        result = subprocess.run(book + command, cwd=repo, env=env, capture_output=True, text=True, timeout=1500)
        assert result.returncode == 0, result.stdout + result.stderr
        if command[0] == "run":  # a run prints its progress lines and nothing else (README, Run)
            stray = [line for line in (result.stdout + result.stderr).splitlines() if not PROGRESS.match(line)]
            assert not stray, f"book {' '.join(command)} printed besides its progress lines: {stray}"
        if not first:
            first = {stem: path(stem).read_bytes() for stem in SAME_TWICE}
    again = [stem for stem in SAME_TWICE if path(stem).read_bytes() != first[stem]]
    assert not again, f"a second run changed chapters whose work does not depend on the budget: {again}"

    changed = git(repo, "status", "--porcelain").splitlines()
    assert changed, "book run wrote no notebook"
    assert all(line.startswith(" M notebooks/") and line.endswith(".ipynb") for line in changed), changed
    ignored = [line[3:] for line in git(repo, "status", "--porcelain", "--ignored").splitlines()
               if line.startswith("!! ")]
    unexpected = [p for p in ignored if not p.startswith(ALLOWED_IGNORED) and "__pycache__" not in p]
    assert not unexpected, unexpected

    outside = [p for p in files_under(home) if not p.startswith(ALLOWED_IN_HOME)]
    assert not outside, f"written outside the repository and the documented caches: {outside}"
    assert files_under(tmp) == [], "temporary files left behind"


def test_nbval_fails_a_notebook_that_writes_outside_the_documented_places(tmp_path):
    """conftest.py gives each notebook's kernel a home and a temporary folder of its own, and its last cell's teardown
    names every file the notebook left outside the documented places: in that home, in that temporary folder, and in
    the repository. A notebook that writes only its allowed cache passes."""
    import nbformat

    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    git(tmp_path, "init", "-q")
    cells = {"stray": ['import os, tempfile\nopen(os.path.expanduser("~/stray.txt"), "w").close()',
                       "tempfile.mkstemp(suffix='.left')", 'open("made.txt", "w").close()'],
             "tidy": ['import os\nos.makedirs(os.path.expanduser("~/.cache/transformer_lib"), exist_ok=True)\n'
                      'open(os.path.expanduser("~/.cache/transformer_lib/kept"), "w").close()']}
    for name, sources in cells.items():
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    env = {**os.environ, "MULTI30K_OFFLINE": "1"}
    env.pop("MULTI30K_DIR", None)
    for name, fails in (("stray", True), ("tidy", False)):
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                               "-o", "addopts=", "--nbval-lax", f"{name}.ipynb"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        if fails:
            assert done.returncode == 1, done.stdout[-3000:]
            assert "error at teardown" in done.stdout.lower() and "stray.ipynb wrote outside" in done.stdout
            for found in ("~/stray.txt", ".left", "made.txt"):
                assert found in done.stdout, (found, done.stdout[-3000:])
        else:
            assert done.returncode == 0, done.stdout[-3000:]
