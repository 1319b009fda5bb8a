# Hand-written tool module (not generated from a notebook).
"""Where the book's measured numbers are kept, and how to read and write them.

Three kinds of record: the results that chapters show with `runtime.report(name, text, **values)`, whose values ride in
the output's metadata of the committed notebook (`notebook_results`); how long each chapter took, written by
`python -m transformer_lib.book run --record` to docs/runs.json (`recorded_runs`, `record_run`); and the benchmarks'
recorded runs, `python benchmarks/NAME.py --record` (benchmarks/NAME.json, whose file names are here).
transformer_lib.record_tables renders the benchmarks' records as Markdown; transformer_lib.claims fills the README's
generated blocks from all three.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from transformer_lib.runtime import RESULT_KEY, run_budget

__all__ = ["RUNS_FILE", "SPEED_FILE", "SERVE_FILE", "LOAD_FILE", "SUBWORDS_FILE", "RECIPES_FILE", "SPEEDRUN_FILE",
           "notebook_results", "recorded_runs", "recorded_time", "chapter_budget", "record_run", "chapter_minutes",
           "minutes_promise", "shipped_info"]

RUNS_FILE = "docs/runs.json"
SPEED_FILE = "benchmarks/speed.json"
SERVE_FILE = "benchmarks/serve.json"
LOAD_FILE = "benchmarks/load.json"
SUBWORDS_FILE = "benchmarks/subwords.json"
RECIPES_FILE = "benchmarks/recipes.json"
SPEEDRUN_FILE = "benchmarks/speedrun.json"


def _write_atomic(path: Path, text: str) -> None:
    from transformer_lib.files import write_atomically

    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def notebook_results(book) -> dict[str, dict]:
    """{"module.name": values} of every result the committed chapters report."""
    import nbformat  # here, so that the benchmarks that import this module run without Jupyter installed

    results = {}
    for chapter in book.chapters:
        nb = nbformat.read(book.root / chapter.file, as_version=4)
        for index, cell in enumerate(nb.cells):
            for output in cell.get("outputs", []):
                record = output.get("metadata", {}).get(RESULT_KEY)
                if record is None:
                    continue
                key = f"{chapter.module}.{record['name']}"
                if key in results:
                    raise ValueError(f"{chapter.file} cell {index}: result {record['name']!r} is reported twice")
                results[key] = dict(record["values"])
    return results


def recorded_runs(book) -> dict[str, dict]:
    """{chapter file: {budget: {seconds, machine, other_cores_busy}}} from docs/runs.json, a record per budget a
    chapter was run under (empty when nothing was recorded)."""
    path = book.root / RUNS_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object keyed by chapter file")
    # a file written before records were kept per budget holds one record per chapter, naming its budget
    return {file: ({run["budget"]: {k: v for k, v in run.items() if k != "budget"}} if "budget" in run else run)
            for file, run in data.items()}


def recorded_time(budget: str, chapter: str, start: Path | None = None) -> str:
    """How long `chapter` (its file, e.g. "notebooks/08_translation.ipynb") took under `budget` when last recorded
    in docs/runs.json of the book at or above `start` (default: the working directory), in a sentence a chapter
    prints before a long run starts; where none is recorded, the sentence says so and how to record one."""
    from transformer_lib.book import BookError, find_root, load_book

    try:
        book = load_book(find_root(start))
    except BookError:  # a copy of one notebook, away from the book: nothing recorded to read
        return f"No run of {chapter} under `{budget}` is recorded here (no book.yml at or above this folder)."
    run = recorded_runs(book).get(chapter, {}).get(budget)
    number = next((n for n, c in enumerate(book.chapters, 1) if c.file == chapter), "N")
    if run is None:
        return (f"No run of {chapter} under `{budget}` is recorded in {RUNS_FILE} yet, so how long it takes is not "
                f"known; `python -m transformer_lib.book run {number} --budget {budget} --record` records it.")
    return (f"Under `{budget}` this chapter took {run['seconds'] / 60:.1f} minutes when last recorded "
            f"({run['machine']}; {RUNS_FILE}).")


def chapter_budget(chapter: str) -> str:
    """The run budget in force (runtime.run_budget), as a chapter's first cell takes it. Under `full`, where a run
    is long, it first prints how long `chapter` (its file, e.g. "notebooks/08_translation.ipynb") took when last
    recorded (recorded_time)."""
    if not isinstance(chapter, str) or not chapter.endswith(".ipynb"):
        raise ValueError(f"chapter must be the chapter's notebook as book.yml names it, e.g. "
                         f"'notebooks/08_translation.ipynb', got {chapter!r}")
    budget = run_budget()
    if budget == "full":
        print(recorded_time(budget, chapter))
    return budget


def record_run(book, chapter, budget: str, seconds: float, machine: str, others: float | None = None) -> None:
    """Write how long `chapter` took under `budget` into docs/runs.json (other chapters' records are kept), and
    `others`, the cores other processes kept busy meanwhile, where it was measured."""
    runs = recorded_runs(book)
    run = runs.setdefault(chapter.file, {})[budget] = {"seconds": round(seconds, 1), "machine": machine}
    if others is not None:
        run["other_cores_busy"] = round(others, 2)
    ordered = {c.file: runs[c.file] for c in book.chapters if c.file in runs}
    path = book.root / RUNS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, json.dumps(ordered, indent=2, ensure_ascii=False) + "\n")


def chapter_minutes(book, chapter: str | None = None) -> float:
    """The most minutes book.yml promises a chapter (a file) under the `cpu` budget: its entry in
    `cpu_minutes_by_chapter`, else `cpu_minutes`, which is also the answer for chapter None."""
    data = yaml.safe_load((book.root / "book.yml").read_text(encoding="utf-8"))
    return float((data.get("cpu_minutes_by_chapter") or {}).get(chapter, data["cpu_minutes"]))


def minutes_promise(book) -> str:
    """book.yml's promise as words: 'each chapter at most about 10 minutes', and '(chapter N about M)' for every
    chapter that cpu_minutes_by_chapter allows longer."""
    longer = [f"chapter {n} about {chapter_minutes(book, c.file):g}" for n, c in enumerate(book.chapters, 1)
              if chapter_minutes(book, c.file) != chapter_minutes(book)]
    return f"each chapter at most about {chapter_minutes(book):g} minutes" + (f" ({', '.join(longer)})" if longer else "")


def shipped_info(book) -> dict:
    """The shipped model's metadata `info`: recipe, training history, validation scores."""
    from transformer_lib.files import read_safetensors_metadata

    path = book.package_dir / "pretrained" / "multi30k_de_en.safetensors"
    return json.loads(read_safetensors_metadata(path)["info"])
