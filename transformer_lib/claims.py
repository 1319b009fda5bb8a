# Hand-written tool module (not generated from a notebook).
"""Numbers the book quotes, read from where they were measured.

Three kinds of record hold every measured number the README and its documents in docs/ quote: the results that
chapters show with `runtime.report(name, text, **values)`, whose values ride in the output's metadata of the committed
notebook (`notebook_results`); how long each chapter took, written by `python -m transformer_lib.book run --record`
to docs/runs.json (`recorded_runs`); and the benchmarks' recorded runs, `python benchmarks/NAME.py --record`
(benchmarks/NAME.json).

`python -m transformer_lib.book readme` rewrites the generated blocks, each between
`<!-- begin NAME (python -m transformer_lib.book readme) -->` and `<!-- end NAME -->`, of every file in `DOCUMENTS`
(the README and the docs/ pages it links to) from those records; `book readme --check` and tests/test_claims.py fail
while one is stale, so the documents and the outputs cannot disagree.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from transformer_lib.comparisons import (best_subwords, recipe_seeds_markdown, recipe_seeds_verdict, seed_summary,
                                        speedrun_markdown, subwords_markdown, subwords_within_noise, with_spread,
                                        within_noise)
from transformer_lib.readme_blocks import load_markdown, marker_problems
from transformer_lib.runtime import RESULT_KEY

__all__ = ["DOCUMENTS", "notebook_results", "recorded_runs", "record_run", "chapter_minutes", "minutes_promise",
           "render_blocks", "readme_problems", "write_readme", "shipped_info", "speed_markdown", "RUNS_FILE",
           "SPEED_FILE", "SERVE_FILE", "serve_markdown", "subwords_markdown", "best_subwords", "SUBWORDS_FILE",
           "recipes_markdown", "recipe_runs", "RECIPES_FILE", "seed_summary", "marker_problems", "within_noise", "with_spread",
           "subwords_within_noise", "recipe_seeds_markdown", "recipe_seeds_verdict"]

# The files whose generated blocks `book readme` renders and checks, relative to the book's root.
DOCUMENTS = ("README.md", "docs/commands.md", "docs/running.md", "docs/speed.md", "docs/robustness.md",
             "docs/making.md")
RUNS_FILE = "docs/runs.json"
SPEED_FILE = "benchmarks/speed.json"
SERVE_FILE = "benchmarks/serve.json"
LOAD_FILE = "benchmarks/load.json"
SUBWORDS_FILE = "benchmarks/subwords.json"
RECIPES_FILE = "benchmarks/recipes.json"
SPEEDRUN_FILE = "benchmarks/speedrun.json"
_BLOCK = re.compile(r"(<!-- begin ([\w-]+) \(python -m transformer_lib\.book readme\) -->\n)(.*?)(<!-- end \2 -->)", re.S)


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


def _run_times(book, results) -> str:
    runs = recorded_runs(book)
    lines = [f"What `book run --record` measured for the committed notebooks ({RUNS_FILE}); book.yml promises "
             f"{minutes_promise(book)} under `cpu`:", "",
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


def shipped_info(book) -> dict:
    """The shipped model's metadata `info`: recipe, training history, validation scores."""
    from transformer_lib.files import read_safetensors_metadata

    path = book.package_dir / "pretrained" / "multi30k_de_en.safetensors"
    return json.loads(read_safetensors_metadata(path)["info"])


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
             for name in scores if name != "kept"}
    choice = "".join(f" over the {label[name]} ({scores[name]['tokenized']:.2f})" for name in others)
    norm = "pre-norm" if r.get("norm_first", True) else "post-norm"
    return (f"The recipe: {r['n_layers']}+{r['n_layers']} {norm} layers, d_model {r['d_model']}, d_ff {r['d_ff']}, "
            f"{r['n_heads']} heads, dropout {r['dropout']}, {vocab}, label smoothing {r['smoothing']}, warmup "
            f"{r['warmup']}, {r['epochs']} epochs. Tokenized validation BLEU (beam {r['beam_size']}) kept the {label[kept]} "
            f"({scores[kept]['tokenized']:.2f}){choice}.")


def speed_markdown(s: dict) -> str:
    """A recorded run of benchmarks/speed.py as Markdown: the training table, then greedy decoding."""
    load = f", load average {s['load']:.2f}" if s.get("load") is not None else ""
    lines = [f"{s['machine']}, {s['threads']} thread{'s' if s['threads'] != 1 else ''}{load}, device {s['device']}, "
             f"data {s['data']}: {s['repeats']} interleaved rounds of {s['batches']} steps of about "
             f"{s['tokens_per_batch']:,.0f} target tokens, 3+3 layers, d_model 256, d_ff 512, 8 heads, label "
             "smoothing 0.1 and the same Adam for every variant; medians, ± half the range of the rounds.", "",
             "| variant | tokens/s | vs nn.Transformer at the same dtype | share of the matmul peak at the model's "
             "shapes |", "|---|---|---|---|"]
    for v in s["variants"]:
        lines.append(f"| {v['name']} | {v['tokens_per_s']:,.0f} ±{v['spread']:.0%} | {v['ratio']:.2f}x | "
                     f"{v['peak_share']:.1%} of {v['peak_tflops']:.3f} TFLOP/s |")
    d = s["decoding"]
    lines += ["", f"Greedy decoding, {d['sentences']} sentences x {d['tokens']} tokens: {d['recompute_s']:.2f} s "
              f"recomputing the prefix, {d['cache_s']:.2f} s with the cache ({d['recompute_s'] / d['cache_s']:.1f}x), "
              f"{'identical' if d['identical'] else 'DIFFERENT'} output."]
    return "\n".join(lines) + "\n"


def _recorded(book, file: str, script: str, what: str, render) -> str:
    """A benchmark's recorded run rendered as Markdown, or how to record one when none is committed."""
    path = book.root / file
    if not path.is_file():
        return f"No {what} is recorded yet: run `python {script} --record`.\n"
    return f"Recorded by `python {script} --record` ({file}) on " + render(json.loads(path.read_text(encoding="utf-8")))


def _speed_table(book, results) -> str:
    return _recorded(book, SPEED_FILE, "benchmarks/speed.py", "benchmark run", speed_markdown)


def serve_markdown(s: dict) -> str:
    """A recorded run of benchmarks/serve.py as Markdown: sentences per second and BLEU of each engine."""
    load = f", load average {s['load']:.2f}" if s.get("load") is not None else ""
    lines = [f"{s['machine']}, {s['threads']} thread{'s' if s['threads'] != 1 else ''}{load}: the first "
             f"{s['sentences']:,} test2016 sentences in batches of 64, {s['repeats']} interleaved rounds (medians); "
             f"BLEU on all {s['bleu_sentences']:,}.", "",
             "| engine | sentences/s | sacreBLEU | tokenized BLEU | same as chapter 7's |", "|---|---|---|---|---|"]
    for v in s["variants"]:
        same = f"{v['same_as_ours']:,}" if "same_as_ours" in v else "n/a"
        lines.append(f"| {v['name']} | {v['sentences_per_s']:,.1f} ±{v['spread']:.0%} | {v['sacrebleu']:.2f} | "
                     f"{v['tokenized']:.2f} | {same} |")
    lines += ["", f"Greedy decoding: {s['greedy_identical']:,} of {s['bleu_sentences']:,} translations token-identical "
              "between ours and CTranslate2 in float32."]
    speed = {v["name"]: v["sentences_per_s"] for v in s["variants"]}
    for mode in ("greedy", "beam 5"):
        ours = {n: x for n, x in speed.items() if n.startswith("ours, FastBeamSearch") and n.endswith(f"({mode})")}
        engine = speed.get(f"CTranslate2 float32 ({mode})")
        if ours and engine:
            name, best = max(ours.items(), key=lambda item: item[1])
            lines.append(f"{name.removeprefix('ours, ')}: {best / engine:.2f}x the throughput of CTranslate2 float32.")
    return "\n".join(lines) + "\n"


def candidate_verdict(variant: dict, baseline: dict | None) -> str:
    """"pays", "costs" or "within noise": whether a candidate's ratio to its baseline clears the two spreads."""
    noise = variant.get("spread", 0.0) + (baseline or {}).get("spread", 0.0)
    if variant["ratio"] > 1 + noise:
        return "pays"
    if variant["ratio"] < 1 - noise:
        return "costs"
    return "within noise"


def candidates_markdown(c: dict, speed: dict | None = None) -> str:
    """A recorded run of benchmarks/candidates.py as Markdown: each candidate's ratio to the fast path of its dtype,
    and, with speed.json's record, the ratio to nn.Transformer a fast path of nothing but matrix multiplications
    would reach."""
    load = f", load average {c['load']:.2f}" if c.get("load") is not None else ""
    lines = [f"{c['machine']}, {c['threads']} thread{'s' if c['threads'] != 1 else ''}{load}: {c['repeats']} "
             f"interleaved rounds of {c['batches']} training steps (medians, ± half the range of the rounds).", "",
             "| dtype | change | s/step | vs our fast path | verdict |", "|---|---|---|---|---|"]
    baseline = {v["dtype"]: v for v in c["variants"] if v["change"] == "baseline"}
    paying = []
    for v in c["variants"]:
        spread = f" ±{v['spread']:.0%}" if "spread" in v else ""
        verdict = "" if v["change"] == "baseline" else candidate_verdict(v, baseline.get(v["dtype"]))
        if verdict == "pays":
            paying.append(f"{v['change']} ({v['dtype']})")
        lines.append(f"| {v['dtype']} | {v['change']} | {v['seconds_per_step']:.3f}{spread} | {v['ratio']:.2f}x "
                     f"| {verdict} |")
    lines += ["", "Verdict: " + (f"{', '.join(paying)} paid beyond the spread of the rounds; the rest did not."
                                  if paying else "no change paid beyond the spread of the rounds, so the fast path keeps "
                                  "its form."), ""]
    if "onednn" in c:
        m, k, n = c["onednn"]["shape"]
        lines += [f"No oneDNN (bfloat16): a {m:,} x {k} by {k} x {n} matrix multiplication takes "
                  f"{c['onednn']['slower_without']:.1f}x as long with oneDNN off.", ""]
    ratio = {v["name"]: v["ratio"] for v in (speed or {}).get("variants", [])}
    for tag, share in c["matmul_share"].items():
        now = ratio.get(f"ours, fast path ({tag})")
        line = f"In {tag}, matrix multiplications are {share:.0%} of the fast path's profiled time"
        if now is not None:
            line += (f": with everything else free, it would train at most {now / share:.2f}x as fast as "
                     f"nn.Transformer (recorded: {now:.2f}x)")
        lines.append(line + ".")
    return "\n".join(lines) + "\n"


def recipe_runs(record: dict) -> list[dict]:
    """The runs of a benchmarks/recipes.py record: the one the book shipped before (when recorded), then the
    candidates."""
    return ([record["base_run"]] if record.get("base_run") else []) + record["candidates"]


def recipes_markdown(record: dict) -> str:
    """A recorded run of benchmarks/recipes.py as Markdown: one row per run, the one chosen on validation in bold,
    test2016 for that one alone."""
    base = record["base"]
    lines = [f"{record['machine']}: the candidates trained side by side, {record['processes']} processes of "
             f"{record['threads']} thread{'s' if record['threads'] != 1 else ''}; the run before is the one that made "
             "the model the book shipped before. "
             f"Every run is the recipe before ({base['epochs']} epochs, readable path) with the fields shown changed, "
             f"and keeps its last epoch or the average of its last {base['average_last']}, whichever scores higher on "
             f"validation (beam {base['beam_size']}, length penalty {base['length_penalty']}). Test2016 is scored for "
             "the chosen run alone.", "",
             "| run | changed | training | kept | validation sacreBLEU / tokenized | test2016 sacreBLEU / tokenized |",
             "|---|---|---|---|---|---|"]
    for run in recipe_runs(record):
        changed = ", ".join(f"`{k}={v}`" for k, v in run.get("changes", {}).items()) or "nothing"
        val = f"{run['val_sacrebleu']:.2f} / {run['val_tokenized']:.2f}"
        chosen = run["name"] == record["winner"]
        test = f"{run['test_sacrebleu']:.2f} / {run['test_tokenized']:.2f}" if "test_sacrebleu" in run else "not scored here"
        lines.append(f"| {run['name']} | {changed} | {run['train_seconds'] / 60:.0f} min | {run['kept']} | "
                     f"{f'**{val}**' if chosen else val} | {test} |")
    if record.get("awaiting_seeds"):
        lead, chosen = (next(r for r in recipe_runs(record) if r["name"] == name)
                        for name in (record["awaiting_seeds"], record["winner"]))
        lines += ["", f"{lead['name']} leads on validation from this one seed ({lead['val_sacrebleu']:.2f} against "
                  f"{chosen['val_sacrebleu']:.2f}), but one seed is not a choice: the chosen run stays until the "
                  "comparison from seeds below includes it and its mean leads too."]
    if "seeds" in record:
        lines += ["", recipe_seeds_markdown(record)]
    return "\n".join(lines) + "\n"


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
