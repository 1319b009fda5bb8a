"""Exercises never break their chapter: solved in place, they leave every earlier cell of the chapter runnable.

A learner solves the exercises at the end of a chapter, then scrolls back up and runs an experiment again. What
used to break: exercise 5.1's stub was `def rate(step, d_model, warmup)`, which hid the chapter's
`rate(step, d_model, factor, warmup)`, so that the learning-rate cell and the copy task, run again, failed with
"rate() takes 3 positional arguments but 4 were given"; chapter 5's learning-rate chart bound `d_model` and `warmup`
to altair parameters, so that a later cell reading them as numbers would fail; exercise 7.3's stub `greedy` hid
the list of that name in chapter 7.

- `test_no_exercise_cell_rebinds_a_name_of_its_chapter` reads the cells: no name an exercise cell binds (its
  stub, its imports) is bound at the top level by a code cell before the exercises.
- `test_solved_exercises_leave_the_chapter_runnable` runs each chapter in a fresh kernel under BOOK_BUDGET=smoke
  on the offline corpus, from a copy in an empty folder, as in Colab (a chapter reading a file beside it, or a name
  only another notebook made, fails here; only the benchmarks' records are where a checkout has them), with every
  exercise cell's stub replaced by its worked solution from solutions/chNN_*.py; each exercise cell must print that
  it passes. Every other cell is compared with its committed
  output as nbval compares it, a cell tagged corpus-dependent with its output on the offline corpus
  (notebooks/offline_outputs.json): this is the test command's run of the chapters as a newcomer without data or
  network meets them, and nbval runs them on Multi30k. Then, in the same kernel, it runs again, in order, every
  experiment before the exercises that an exercise could have changed: each code cell but the definition cells
  (`#| export`, `#| exporti`, whose running again would define afresh every name the chapter exports and hide an
  exercise that shadows one; a learner going back runs the experiment, not the library) that reads, itself or
  through a function the chapter defines, a name an exercise cell binds or an object of the chapter an exercise reads
  (modules and builtins aside; a star import counts as every name). What an exercise could change without naming
  it, it may not change at all: torch's defaults (dtype, device, gradients, threads, determinism) and every function
  and object of torch, torch.nn, torch.nn.functional and the library are the same after the exercises as before
  them. Throughout, no cell may rebind a name that holds a number to something that is not one. A failure names the
  chapter and the cell.
"""
import ast
import builtins
import contextlib
import copy
import importlib.util
import inspect
import json
import os
import re
import shutil
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbval.plugin import coalesce_streams, get_sanitize_patterns, transform_streams_for_comparison

from transformer_lib.book import corpus, load_book, parse_directives
from transformer_lib.book.runner import started_again_if_silent
from transformer_lib.multi30k import OFFLINE_ENV

ROOT = Path(__file__).resolve().parents[1]
BOOK = load_book(ROOT)
IDS = [Path(c.file).stem for c in BOOK.chapters]
_CHECK = re.compile(r'^check\("(\d+\.\d+)",\s*(\w+)\)\s*$', re.M)

# Run after each cell: the names of the reader's namespace that hold a number (bool aside), as one printed line.
_NUMBERS = ('import json as _j, numbers as _n\n'
            'print("@@numbers@@" + _j.dumps(sorted(_k for _k, _v in list(globals().items()) if not _k.startswith("_") '
            'and isinstance(_v, _n.Number) and not isinstance(_v, bool))))')


def _python(source: str) -> ast.Module:
    """A code cell's source as Python (IPython's magics and shell lines left out)."""
    return ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))


def _top_level_names(tree: ast.Module) -> set[str]:
    """The names a cell binds in the notebook's namespace: its top-level definitions, imports, assignments and loop
    variables (not the names local to a function, lambda, class or comprehension)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        else:
            names |= {n.id for n in _outside_scopes(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def _outside_scopes(node: ast.AST):
    """ast.walk, not entering a function, lambda, class or comprehension nested in the node."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
                                  ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            yield from _outside_scopes(child)


def _exercise_cells(nb) -> dict[int, tuple[str, str]]:
    """{cell index: (exercise number, the name its check is given)} for the chapter's exercise cells."""
    found = {i: _CHECK.findall(c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    return {i: hits[0] for i, hits in found.items() if len(hits) == 1}


@pytest.mark.parametrize("chapter", BOOK.chapters, ids=IDS)
def test_no_exercise_cell_rebinds_a_name_of_its_chapter(chapter):
    nb = nbformat.read(ROOT / chapter.file, as_version=4)
    exercises = _exercise_cells(nb)
    assert exercises, f"{chapter.file} has no exercise cells"
    first = min(exercises)
    bound = {}  # name -> the first cell before the exercises that binds it
    for i, cell in enumerate(nb.cells[:first]):
        if cell.cell_type == "code":
            for name in _top_level_names(_python(cell.source)):
                bound.setdefault(name, i)
    clashes = [f"exercise {exercises[i][0]}'s cell {i} binds `{name}`, which cell {bound[name]} binds"
               for i in sorted(exercises) for name in sorted(_top_level_names(_python(nb.cells[i].source)))
               if name in bound]
    assert not clashes, f"{chapter.file}: " + "; ".join(clashes)


def test_the_name_check_sees_the_shadowing_it_is_for():
    """The static check above finds a stub that rebinds a chapter's function, and leaves local names alone."""
    chapter = _python("def rate(step, d_model, factor=1.0, warmup=4000):\n    inner = 1\n    return inner\n"
                      "for d_model, warmup in ((512, 4000),):\n    pass\nsquares = [k * k for k in range(3)]\n"
                      "class Batch:\n    size = 3\n")
    assert _top_level_names(chapter) == {"rate", "d_model", "warmup", "squares", "Batch"}
    stub = _python("from transformer_lib.exercises import check\n\n\ndef rate(step, d_model, warmup):\n"
                   "    raise NotImplementedError\n\n\ncheck('5.1', rate)\n")
    assert _top_level_names(stub) & _top_level_names(chapter) == {"rate"}


# ------------------------------------------------------------------------------------ the chapters, solved
def _solutions(chapter_number: int):
    path = next((ROOT / "solutions").glob(f"ch{chapter_number:02d}_*.py"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path.read_text(encoding="utf-8")


def _solution_code(module, module_text: str, name: str) -> str:
    """The worked solution `name` as a learner would write it in the cell: the imports and the solution file's own
    private helpers it needs, then the function."""
    tree = ast.parse(module_text)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}

    def names_in(node):
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    helpers, used, todo = [], names_in(functions[name]), [name]
    while todo:  # private helpers, and the helpers they call
        for helper in sorted(names_in(functions[todo.pop()])):
            if helper.startswith("_") and helper in functions and helper not in helpers:
                helpers.append(helper)
                used |= names_in(functions[helper])
                todo.append(helper)
    parts = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a for a in node.names if (a.asname or a.name).split(".")[0] in used]
            if names:
                parts.append(ast.unparse(type(node)(**{**node.__dict__, "names": names})))
    parts += ["\n\n" + inspect.getsource(getattr(module, h)) for h in helpers]
    return "\n".join(parts) + "\n\n" + inspect.getsource(getattr(module, name))


def _solved(source: str, number: str, name: str, module, module_text: str) -> str:
    """The exercise cell's source with its stub replaced by the worked solution."""
    stub = re.compile(rf"^def {name}\(.*?\n    raise NotImplementedError[^\n]*\n", re.M | re.S)
    assert len(stub.findall(source)) == 1, f"exercise {number}: no stub `def {name}(...)` in its cell"
    assert hasattr(module, name), f"exercise {number}: the cell checks `{name}`, the solutions file has no `{name}`"
    return stub.sub(lambda _: _solution_code(module, module_text, name), source)


def _is_definition(cell) -> bool:
    directives, _ = parse_directives(cell.source)
    return "export" in directives or "exporti" in directives


def _names_in(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _star(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree))


def _run_again(nb, exercises) -> list[int]:
    """The experiments (code cells before the exercises, definition cells aside) that read, themselves or through a
    function or class the chapter defines, a name an exercise cell binds, or an object of the chapter it reads (what
    an exercise does to a module is probed whole, _STATE). An exercise's star import may bind anything: every
    experiment."""
    first = min(exercises)
    trees = {i: _python(c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    modules = {(a.asname or a.name).split(".")[0] for tree in trees.values() for n in ast.walk(tree)
               if isinstance(n, ast.Import) for a in n.names}
    touched, star = set(), False
    for i in exercises:  # what an exercise binds, and the chapter's objects it reads (not a module, not a builtin)
        touched |= _top_level_names(trees[i]) | (_names_in(trees[i]) - modules - set(dir(builtins)))
        star |= _star(trees[i])
    defined = {}  # a function or class the chapter defines before the exercises -> the names its body reads
    for i, tree in trees.items():
        if i < first:
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defined[node.name] = _names_in(node)

    def reads(names: set[str]) -> set[str]:
        seen, todo = set(), list(names)
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += defined.get(name, ())
        return seen

    return [i for i, tree in trees.items() if i < first and not _is_definition(nb.cells[i])
            and (star or reads(_names_in(tree)) & touched)]


# Printed before the first exercise and after the last: what an exercise could change without naming it.
_STATE = ('import json as _j, sys as _s, torch as _t\n'
          'print("@@state@@" + _j.dumps({"defaults": [str(_t.get_default_dtype()), str(_t.get_default_device()), '
          '_t.is_grad_enabled(), _t.get_num_threads(), _t.are_deterministic_algorithms_enabled()], '
          '"objects": {f"{_m}.{_k}": id(_v) for _m, _mod in list(_s.modules.items()) if _mod is not None and '
          '(_m in ("torch", "torch.nn", "torch.nn.functional") or _m.split(".")[0] == "transformer_lib") '
          'for _k, _v in list(vars(_mod).items()) if not _k.startswith("_")}}))')


def _changed_state(before: dict, after: dict) -> list[str]:
    """What differs between two _STATE probes: torch's defaults, or an object a module held under a name before (a
    module imported in between adds names, and is not a change)."""
    changes = [f"torch's defaults (dtype, device, gradients, threads, determinism) went from {before['defaults']} to "
               f"{after['defaults']}"] if before["defaults"] != after["defaults"] else []
    return changes + [f"`{name}` is another object" for name, ident in sorted(before["objects"].items())
                      if name in after["objects"] and after["objects"][name] != ident]


def test_the_experiments_run_again_are_those_an_exercise_could_change():
    """Run again: a cell that reads or binds a name an exercise touches, or calls a function that reads one; never a
    definition cell, nor an experiment the exercises cannot reach. A star import in an exercise reaches every one."""
    new = nbformat.v4
    exercise = 'from transformer_lib.exercises import check\n\ndef halve(x):\n    raise NotImplementedError\n\n'
    cells = [new.new_code_cell("#| export\ndef record(x):\n    history.append(x)"),
             new.new_code_cell("import torch\nhistory = []"),
             new.new_code_cell("record(torch.ones(1))"),
             new.new_code_cell("y = torch.zeros(2)\nprint(y)"),
             new.new_markdown_cell("## Exercises"),
             new.new_code_cell(exercise + 'history.clear()\ncheck("1.1", halve)')]
    nb = new.new_notebook(cells=cells)
    assert _run_again(nb, _exercise_cells(nb)) == [1, 2]
    cells[5].source = exercise + 'from math import *\ncheck("1.1", halve)'
    assert _run_again(nb, _exercise_cells(nb)) == [1, 2, 3]


def test_the_state_probe_sees_a_default_or_a_library_function_changed(capsys):
    import torch.nn.functional  # noqa: F401
    import transformer_lib.training  # noqa: F401

    exec(_STATE, {})
    before = json.loads(capsys.readouterr().out.split("@@state@@")[1])
    assert "transformer_lib.training.rate" in before["objects"] and "torch.nn.functional.softmax" in before["objects"]
    after = copy.deepcopy(before)
    after["objects"]["transformer_lib.training.rate"] += 1
    after["objects"]["transformer_lib.imported_later.name"] = 1  # a module imported in between: not a change
    assert _changed_state(before, after) == ["`transformer_lib.training.rate` is another object"]
    after["defaults"][0] = "torch.float64"
    assert "torch's defaults" in _changed_state(before, after)[0]
    assert _changed_state(before, before) == []


# ------------------------------------------------------------------------------------ outputs, as nbval compares them
# what nbval leaves out of a comparison (nbval.plugin.IPyNbFile.skip_compare; pictures too, as without nbdime)
_NOT_COMPARED = {"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                 "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"}
_SANITIZE = get_sanitize_patterns((ROOT / "tests" / "nbval_sanitize.cfg").read_text(encoding="utf-8"))


def _sanitized(value):
    if isinstance(value, str):
        for regex, replace in _SANITIZE:
            value = re.sub(regex, replace, value)
    return value


def _compared(outputs) -> dict[str, list]:
    """A cell's outputs as nbval compares them: the streams of one name joined, then every value listed under its key
    (a display's under its MIME type), in order, sanitized by tests/nbval_sanitize.cfg."""
    found = defaultdict(list)
    for output in transform_streams_for_comparison(coalesce_streams(copy.deepcopy(outputs))):
        for key, value in output.items():
            if key not in _NOT_COMPARED:
                for name, part in (value.items() if key == "data" else [(key, value)]):
                    if name not in _NOT_COMPARED:
                        found[name].append(_sanitized(part))
    return dict(found)


def _expected_outputs(file: str, nb) -> dict[int, list]:
    """{cell index: the outputs its run must show on the offline corpus} for the cells nbval compares: the code cells
    the committed file ran, but those tagged nbval-ignore-output; a cell tagged corpus-dependent shows its output on
    the offline corpus, recorded by `book offline`."""
    recorded = corpus.offline_outputs(ROOT)
    expected = {}
    for i, cell in enumerate(nb.cells):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or cell.execution_count is None or "nbval-ignore-output" in tags:
            continue
        expected[i] = (corpus.current_offline_outputs(recorded, file, cell) if corpus.TAG in tags
                       else copy.deepcopy(cell.outputs))
        assert expected[i] is not None, (f"{file}: cell {i} is tagged {corpus.TAG} but {corpus.OFFLINE_FILE} holds no "
                                         "output of its current source; run `python -m transformer_lib.book offline`")
    return expected


def _difference(expected: list, shown: list) -> str | None:
    """None where a cell showed what it should, as nbval compares; else the first key that differs, with both its
    values."""
    want, got = _compared(expected), _compared(shown)
    if want == got:
        return None
    key = next(k for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k))
    return f"{key}: committed {want.get(key)!r:.1500}\nshown now {got.get(key)!r:.1500}"


def test_outputs_are_compared_as_nbval_compares_them():
    """Streams split into pieces, another picture, another object address, an execution count: the same. Another
    number printed, another table, an output more: different."""
    out = nbformat.v4

    def shown(text="loss 0.25\n", png="AAAA", html="<table>1</table>", more=()):
        return [out.new_output("stream", name="stdout", text=text[:4]), out.new_output("stream", name="stdout",
                                                                                      text=text[4:]),
                out.new_output("display_data", data={"image/png": png, "text/plain": "<Figure at 0x7f3a2b1c0d90>"}),
                out.new_output("execute_result", data={"text/html": html}, execution_count=3), *more]

    committed = shown()
    committed[2]["data"]["text/plain"] = "<Figure at 0x55d1e2f3a4b0>"
    assert _difference(committed, shown(png="BBBB")) is None
    assert "stdout" in _difference(committed, shown(text="loss 0.26\n"))
    assert "text/html" in _difference(committed, shown(html="<table>2</table>"))
    assert _difference(committed, shown(more=[out.new_output("stream", name="stderr", text="warning\n")]))


@pytest.mark.parametrize("chapter", BOOK.chapters, ids=IDS)
def test_solved_exercises_leave_the_chapter_runnable(chapter, tmp_path, monkeypatch):
    module, module_text = _solutions(BOOK.chapters.index(chapter) + 1)
    # the chapter alone in its folder; beside that folder, as in a checkout, only the benchmarks' records, whose
    # tables some chapters show (in Colab they say where to make them)
    folder = tmp_path / "book" / "notebooks"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / chapter.file, folder / Path(chapter.file).name)
    (tmp_path / "book" / "benchmarks").mkdir()
    for record in (ROOT / "benchmarks").glob("*.json"):
        shutil.copy(record, tmp_path / "book" / "benchmarks" / record.name)
    monkeypatch.setenv("BOOK_BUDGET", os.environ.get("BOOK_BUDGET", "smoke"))
    # the offline corpus: what is tested is the chapter's code with the solutions in place, on any data (nbval runs
    # each chapter on Multi30k); chapter 6 runs in a fifth of its time on Multi30k
    monkeypatch.setenv(OFFLINE_ENV, "1")
    monkeypatch.delenv("MULTI30K_DIR", raising=False)
    nb = nbformat.read(folder / Path(chapter.file).name, as_version=4)
    expected = _expected_outputs(chapter.file, nb)
    exercises = _exercise_cells(nb)
    assert exercises, f"{chapter.file} has no exercise cells"
    for i, (number, name) in exercises.items():
        nb.cells[i].source = _solved(nb.cells[i].source, number, name, module, module_text)
    first, last = min(exercises), max(exercises)
    plan = [(i, nb.cells[i]) for i in range(len(nb.cells))]
    plan += [(i, nbformat.v4.new_code_cell(nb.cells[i].source)) for i in _run_again(nb, exercises)]

    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}})
    numbers = {}  # name -> the cell since which it holds a number
    with _kernel(client):
        for step, (i, cell) in enumerate(plan):
            where = (f"{chapter.file}: cell {i}, run again after the exercises were solved," if step >= len(nb.cells)
                     else f"{chapter.file}: exercise {exercises[i][0]}'s cell {i}, with its worked solution,"
                     if i in exercises else f"{chapter.file}: cell {i}")
            if step == first:
                before = _probe(client, nb, _STATE, "@@state@@")
            try:
                _run(client, nb, cell)
            except CellExecutionError as err:
                pytest.fail(f"{where} failed:\n{err}")
            if step == last:
                changed = _changed_state(before, _probe(client, nb, _STATE, "@@state@@"))
                assert not changed, f"{chapter.file}: the exercises, solved, changed " + "; ".join(changed)
            if i in exercises and step < len(nb.cells):
                printed = "".join(o.get("text", "") for o in cell.outputs)
                assert f"Exercise {exercises[i][0]}" in printed and "passes" in printed, f"{where} does not pass: {printed}"
            elif i in expected and step < len(nb.cells):
                differs = _difference(expected[i], cell.outputs)
                assert differs is None, (f"{where} shows other than its committed output on the offline corpus:\n"
                                         + differs)
            if cell.cell_type != "code":
                continue
            now = set(_probe(client, nb, _NUMBERS, "@@numbers@@"))
            lost = {n: numbers[n] for n in numbers if n not in now and n in _top_level_names(_python(cell.source))}
            assert not lost, f"{where} turned names that held numbers into something else: " + ", ".join(
                f"`{n}` (a number since cell {j})" for n, j in sorted(lost.items()))
            numbers = {n: numbers.get(n, i) for n in now}


@contextlib.contextmanager
def _kernel(client: NotebookClient):
    """client.setup_kernel(), started once more if the kernel never answers (runner.started_again_if_silent)."""
    with contextlib.ExitStack() as stack:
        started_again_if_silent(lambda: stack.enter_context(client.setup_kernel()))()
        yield


def _probe(client: NotebookClient, nb, source: str, marker: str):
    """Run `source` in the kernel; what it printed after `marker`, read as JSON."""
    probe = nbformat.v4.new_code_cell(source)
    _run(client, nb, probe)
    return json.loads("".join(o.get("text", "") for o in probe.outputs).split(marker)[1])


def _run(client: NotebookClient, nb, cell) -> None:
    """Execute one cell in the client's kernel (nbclient stores each executed cell back into the notebook)."""
    nb.cells.append(cell)
    try:
        client.execute_cell(cell, len(nb.cells) - 1)
    finally:
        nb.cells.pop()


def test_a_kernel_that_never_answers_is_started_once_more_and_other_failures_are_not_retried():
    """runner.started_again_if_silent, which `book run`, nbval's kernels and this test start kernels through: a silent
    kernel (two workers handed one port) gets a second start; a second silence, or any other error, is raised."""
    calls = []

    def start(outcomes):
        def attempt():
            calls.append(1)
            outcome = outcomes.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        return started_again_if_silent(attempt)

    assert start([RuntimeError("Kernel didn't respond in 60 seconds"), "kernel"])() == "kernel" and len(calls) == 2
    calls.clear()
    with pytest.raises(RuntimeError, match="didn't respond"):
        start([RuntimeError("Kernel didn't respond in 60 seconds")] * 3)()
    assert len(calls) == 2
    calls.clear()
    with pytest.raises(RuntimeError, match="No such kernel"):
        start([RuntimeError("No such kernel named python9"), "kernel"])()
    assert len(calls) == 1
