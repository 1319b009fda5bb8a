# Hand-written tool module (not generated from a notebook).
"""The README's generated blocks: numbers the book quotes, rendered from where they were measured.

The records are read by transformer_lib.records (chapter results, run times, benchmark runs) and shown as tables by
transformer_lib.record_tables.

`python -m transformer_lib.book readme` rewrites the generated blocks, each between
`<!-- begin NAME (python -m transformer_lib.book readme) -->` and `<!-- end NAME -->`, of every file in `DOCUMENTS`
(the README and the docs/ pages it links to) from those records; `book readme --check` and tests/test_claims.py fail
while one is stale, so the documents and the outputs cannot disagree.
"""
from __future__ import annotations

import json
import re

from transformer_lib.comparisons import speedrun_markdown, subwords_markdown
from transformer_lib.record_tables import load_markdown, recipes_markdown, serve_markdown, speed_markdown
from transformer_lib.records import (LOAD_FILE, RECIPES_FILE, RUNS_FILE, SERVE_FILE, SPEED_FILE, SPEEDRUN_FILE,
                                     SUBWORDS_FILE, _write_atomic, minutes_promise, notebook_results, recorded_runs,
                                     shipped_info)

__all__ = ["DOCUMENTS", "BLOCKS", "render_blocks", "readme_problems", "write_readme", "marker_problems"]

# The files whose generated blocks `book readme` renders and checks, relative to the book's root.
DOCUMENTS = ("README.md", "docs/chapters.md", "docs/commands.md", "docs/running.md", "docs/speed.md", "docs/robustness.md",
             "docs/making.md")
_BLOCK = re.compile(r"(<!-- begin ([\w-]+) \(python -m transformer_lib\.book readme\) -->\n)(.*?)(<!-- end \2 -->)", re.S)
_MARKER = re.compile(r"<!--\s*(begin|end)\b\s*([\w-]*)")


def marker_problems(text: str, file: str = "README.md") -> list[str]:
    """Markers of generated blocks that do not pair up, each naming the block and its line in `file`: a begin marker
    without its end (or not written as `<!-- begin NAME (python -m transformer_lib.book readme) -->` alone on its
    line), an end marker without its begin. Markers quoted in `code` are prose, not markers."""
    problems, open_ = [], None  # the block begun and not yet ended: (name, line number)
    for number, line in enumerate(text.splitlines(), 1):
        for kind, name in _MARKER.findall(re.sub(r"`[^`]*`", "", line)):
            if kind == "begin":
                if open_ is not None:
                    problems.append(f"{file} line {open_[1]}: block {open_[0]!r} has no `<!-- end {open_[0]} -->` "
                                    f"before the next block begins (line {number})")
                if line.strip() != f"<!-- begin {name} (python -m transformer_lib.book readme) -->":
                    problems.append(f"{file} line {number}: block {name!r}: write its begin marker alone on its line "
                                    f"as `<!-- begin {name} (python -m transformer_lib.book readme) -->`")
                open_ = (name, number)
            elif open_ is not None and name == open_[0] and f"<!-- end {name} -->" in line:
                open_ = None
            else:
                problems.append(f"{file} line {number}: `<!-- end {name} -->` ends no block begun above it" +
                                (f" (block {open_[0]!r} begun at line {open_[1]} is still open)" if open_ else ""))
    if open_ is not None:
        problems.append(f"{file} line {open_[1]}: block {open_[0]!r} has no end marker `<!-- end {open_[0]} -->`; "
                        "add it where the generated text should end")
    return problems


def _run_times(book, results) -> str:
    runs = recorded_runs(book)
    lines = [f"What `book run --record` measured ({RUNS_FILE}). The committed notebooks hold the `cpu` runs, and "
             f"book.yml promises {minutes_promise(book)} under `cpu`:", "",
             "| chapter | budget | minutes | machine | cores other processes kept busy |", "|---|---|---|---|---|"]
    for number, chapter in enumerate(book.chapters, 1):
        for budget, run in runs.get(chapter.file, {}).items():
            others = run.get("other_cores_busy")
            load = "not measured" if others is None else f"{others:.1f}"
            lines.append(f"| {number}. {chapter.title} | `{budget}` | {run['seconds'] / 60:.1f} | {run['machine']} "
                         f"| {load} |")
        if not runs.get(chapter.file):
            lines.append(f"| {number}. {chapter.title} | not recorded | | | |")
    return "\n".join(lines) + "\n"


def _copy_task(book, results) -> str:
    r = results["training.copy_task"]
    return (f"In the committed run of chapter 5 (budget `{r['budget']}`, {r['machine']}), the copy task reached "
            f"{r['test_accuracy']:.1%} exact-sequence accuracy on 1,000 held-out sequences after {r['steps']:,} steps "
            f"and {r['seconds']:.0f} s (seed 0). Another machine takes other seconds, and its floating-point rounding can "
            "change the number of steps.\n")


def _shipped(book, results) -> str:
    r, info = results["translation.shipped"], shipped_info(book)
    history = info["history"]
    epochs = sorted(b["seconds"] - a["seconds"] for a, b in zip(history, history[1:]))
    median = epochs[len(epochs) // 2]
    return ("| split | sacreBLEU (`" + r["signature"].replace("|", "\\|") + "`) | tokenized lowercased BLEU |\n"
            "|---|---|---|\n"
            f"| test2016 ({r['test_pairs']:,} pairs) | **{r['test_sacrebleu']:.2f}** | **{r['test_tokenized']:.2f}** |\n"
            f"| val ({r['val_pairs']:,} pairs) | {r['val_sacrebleu']:.2f} | {r['val_tokenized']:.2f} |\n\n"
            f"Its {len(history)} epochs took {history[-1]['seconds'] / 60:.0f} minutes of wall-clock time "
            f"{_where_trained(book, history)}; the median epoch took {median / 60:.1f} minutes. {_recipe_sentence(info)}\n")


def _where_trained(book, history: list) -> str:
    """Where the shipped model's run trained: the recorded comparison of recipes when it is one of its runs."""
    path = book.root / RECIPES_FILE
    if path.is_file():
        record = json.loads(path.read_text(encoding="utf-8"))
        if any(run["history"] == history for run in record["candidates"]):
            threads = f"{record['threads']} thread{'s' if record['threads'] != 1 else ''}"
            return (f"on {record['machine']}, as one of {record['processes']} runs of benchmarks/recipes.py training "
                    f"side by side with {threads} each, pauses of that machine included")
    return "on a 2-core CPU, pauses of that machine included"


def _recipe_sentence(info: dict) -> str:
    """The shipped model's recipe and which candidate its run kept, in words, from its metadata."""
    r, scores = info["recipe"], info["scores"]
    vocab = (f"BPE with {r['subwords']:,} merges and one vocabulary for both languages, its embeddings tied"
             if r.get("subwords") else "whole words, one vocabulary per language")
    kept, others = scores["kept"], [name for name in scores if name not in ("kept", scores["kept"])]
    label = {name: "last epoch" if name == "last" else name.replace("average of", "average of the last") + " epochs"
             if name.startswith("average of") else name + " of the weights" for name in scores if name != "kept"}
    choice = "".join(f" over the {label[name]} ({scores[name]['tokenized']:.2f})" for name in others)
    norm = "pre-norm" if r.get("norm_first", True) else "post-norm"
    return (f"The recipe: {r['n_layers']}+{r['n_layers']} {norm} layers, d_model {r['d_model']}, d_ff {r['d_ff']}, "
            f"{r['n_heads']} heads, dropout {r['dropout']}, {vocab}, label smoothing {r['smoothing']}, warmup "
            f"{r['warmup']}, {r['epochs']} epochs. Tokenized validation BLEU (beam {r['beam_size']}) kept the {label[kept]} "
            f"({scores[kept]['tokenized']:.2f}){choice}.")


def _recorded(book, file: str, script: str, what: str, render) -> str:
    """A benchmark's recorded run rendered as Markdown, or how to record one when none is committed."""
    path = book.root / file
    if not path.is_file():
        return f"No {what} is recorded yet: run `python {script} --record`.\n"
    return f"Recorded by `python {script} --record` ({file}) on " + render(json.loads(path.read_text(encoding="utf-8")))


def _speed_table(book, results) -> str:
    return _recorded(book, SPEED_FILE, "benchmarks/speed.py", "benchmark run", speed_markdown)


def _recipes_table(book, results) -> str:
    return _recorded(book, RECIPES_FILE, "benchmarks/recipes.py", "comparison of recipes", recipes_markdown)


def _serve_table(book, results) -> str:
    return _recorded(book, SERVE_FILE, "benchmarks/serve.py", "serving benchmark", serve_markdown)


def _load_table(book, results) -> str:
    path = book.root / LOAD_FILE
    if not path.is_file():
        return "No run under load is recorded yet: run `python benchmarks/load.py chapters --record` (and `steps`).\n"
    return (f"Recorded by `python benchmarks/load.py chapters --record`, `... steps --record` and `... commands --record` "
            f"({LOAD_FILE}) on " + load_markdown(json.loads(path.read_text(encoding="utf-8"))))


def _subwords_table(book, results) -> str:
    return _recorded(book, SUBWORDS_FILE, "benchmarks/subwords.py", "comparison of vocabularies", subwords_markdown)


def _speedrun_table(book, results) -> str:
    return _recorded(book, SPEEDRUN_FILE, "benchmarks/speedrun.py NAME", "speedrun", speedrun_markdown)


BLOCKS = {"run-times": _run_times, "copy-task": _copy_task, "shipped-scores": _shipped, "speed": _speed_table,
          "serving": _serve_table, "subwords": _subwords_table, "recipes": _recipes_table, "load": _load_table,
          "speedrun": _speedrun_table}


def render_blocks(book, text: str, file: str = "README.md") -> str:
    """`text` (the contents of `file`, named in errors) with every generated block rendered from the records.
    ValueError naming the block and the line when a block's markers do not pair up (marker_problems)."""
    problems = marker_problems(text, file)
    if problems:
        raise ValueError(problems[0])
    results = notebook_results(book)

    def fill(match):
        name = match.group(2)
        if name not in BLOCKS:
            raise ValueError(f"{file}: no generated block called {name!r}; known: {', '.join(BLOCKS)}")
        return match.group(1) + BLOCKS[name](book, results) + match.group(4)

    return _BLOCK.sub(fill, text)


def _problems(book, file: str, text: str) -> list[str]:
    if marker_problems(text, file):
        return marker_problems(text, file)
    try:
        rendered = render_blocks(book, text, file)
    except (KeyError, ValueError) as err:
        return [f"{file}: cannot render its generated blocks: {err!r}"]
    problems = []
    for have, want in zip(_BLOCK.finditer(text), _BLOCK.finditer(rendered)):
        if have.group(3) != want.group(3):
            problems.append(f"{file}: block {have.group(2)!r} disagrees with the recorded results; "
                            "run `python -m transformer_lib.book readme`")
    return problems


def readme_problems(book, text: str | None = None, file: str = "README.md") -> list[str]:
    """Generated blocks that disagree with the records (empty when all are current): those of every file in
    `DOCUMENTS`, or, given `text`, those of `text` read as the contents of `file`."""
    if text is not None:
        return _problems(book, file, text)
    problems = []
    for name in DOCUMENTS:
        path = book.root / name
        if path.is_file():
            problems += _problems(book, name, path.read_text(encoding="utf-8"))
    return problems


def write_readme(book) -> bool:
    """Rewrite the generated blocks of every file in `DOCUMENTS`; True when something changed."""
    changed = False
    for name in DOCUMENTS:
        path = book.root / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        rendered = render_blocks(book, text, name)
        if rendered != text:
            _write_atomic(path, rendered)
            changed = True
    return changed
