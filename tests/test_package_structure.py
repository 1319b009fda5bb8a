"""The package is organised like the book: no import cycle, no module importing a later chapter, no module too long,
and no chapter importing what a later chapter builds.

The import graph is read from the source, every `import` and `from ... import` of transformer_lib counted, those
inside functions too (an import deferred to call time is still a dependency). A module belongs to a chapter when it
is the chapter's generated module or carries the chapter's name in a subpackage (`checks.attention`,
`diagrams.attention`, `exercises.ch02`); a hand-written module belongs to the latest chapter it reaches through its
imports. A module of chapter n may import nothing that reaches past chapter n.
"""
import ast
from pathlib import Path

import nbformat
import pytest

from transformer_lib.book import load_book

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "transformer_lib"
BOOK = load_book(ROOT)
CHAPTER = {c.module: n for n, c in enumerate(BOOK.chapters, 1)}  # generated module -> chapter number
MAX_LINES = 450


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, source: str) -> set[str]:
    """The package's modules that `source` (the module `name`) imports, anywhere in it."""
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # a relative import
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}  # `from package import module`
    return {m for m in found if m in MODULES and m != name and m != "transformer_lib"}


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    return {name: imports_of(name, text) for name, text in sources.items()}


def own_chapter(name: str) -> int | None:
    """The chapter a module belongs to by its name, or None for a hand-written module of no chapter."""
    parts = name.split(".")[1:]
    if len(parts) == 1 and parts[0] in CHAPTER:
        return CHAPTER[parts[0]]
    if len(parts) == 2 and parts[0] in ("checks", "diagrams") and parts[1] in CHAPTER:
        return CHAPTER[parts[1]]
    if len(parts) == 2 and parts[0] == "exercises" and parts[1].startswith("ch") and parts[1][2:].isdigit():
        return int(parts[1][2:])
    return None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of the graph, one per strongly connected component of more than one module."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def reach(graph: dict[str, set[str]]) -> dict[str, int]:
    """The latest chapter each module reaches: its own, or the latest of what it imports, whichever is later."""
    memo = {}

    def latest(v, seen=()):
        if v not in memo:
            own = own_chapter(v) or 0
            memo[v] = max([own] + [latest(w, seen + (v,)) for w in graph[v] if w not in seen])
        return memo[v]

    return {v: latest(v) for v in graph}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import by a module of chapter n of a module that reaches a later chapter."""
    reached = reach(graph)
    return [f"{v} (chapter {own_chapter(v)}) imports {w}, which reaches chapter {reached[w]}"
            for v in sorted(graph) if own_chapter(v) for w in sorted(graph[v]) if reached[w] > own_chapter(v)]


SOURCES = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}
GRAPH = import_graph(SOURCES)


def test_the_package_has_no_import_cycle():
    found = cycles(GRAPH)
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_no_module_imports_a_later_chapter():
    found = upward_imports(GRAPH)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_longer_than_450_lines(name):
    lines = len(SOURCES[name].splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(ROOT)} has {lines} lines (at most {MAX_LINES})"


def test_the_checks_are_organised_like_the_chapters():
    """One module of checks per chapter module that has inputs to check, and a core that imports no chapter."""
    checks = {n.split(".")[-1] for n in MODULES if n.startswith("transformer_lib.checks.")}
    assert {"core", "embeddings", "attention", "blocks", "model", "training", "data", "decoding", "translation",
            "gpt", "modern"} <= checks
    assert not GRAPH["transformer_lib.checks.core"], GRAPH["transformer_lib.checks.core"]
    assert not GRAPH["transformer_lib.checks"], "the package's __init__ imports nothing"


def notebook_imports(source: str) -> set[str]:
    """The package's modules a notebook cell imports (IPython's magics and shell lines left out)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m in MODULES and m != "transformer_lib"}


@pytest.mark.parametrize("chapter", BOOK.chapters, ids=[c.module for c in BOOK.chapters])
def test_a_chapter_imports_only_what_it_or_an_earlier_chapter_built(chapter):
    """Every import of every code cell, from the package, reaches no chapter after this one (book.yml's order)."""
    number, reached = CHAPTER[chapter.module], reach(GRAPH)
    nb = nbformat.read(ROOT / chapter.file, as_version=4)
    found = [f"cell {i} imports {m}, which reaches chapter {reached[m]}"
             for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             for m in sorted(notebook_imports(cell.source)) if reached[m] > number]
    assert not found, f"{chapter.file} (chapter {number}): " + "; ".join(found)


# ---------------------------------------------------------------------------------- the checks see what they are for
def test_a_notebook_import_of_a_later_chapter_is_found():
    cell = "%matplotlib inline\nfrom transformer_lib.translation import pretrained\nimport transformer_lib.fast\n"
    assert notebook_imports(cell) == {"transformer_lib.translation", "transformer_lib.fast"}
    assert reach(GRAPH)["transformer_lib.fast"] == CHAPTER["fast"]



def test_the_graph_reads_every_kind_of_import():
    sources = {"transformer_lib.attention": "from transformer_lib.checks.attention import check_qkv\n",
               "transformer_lib.checks.attention": "import torch\nfrom .core import check_int\n",
               "transformer_lib.checks.core": "",
               "transformer_lib.data": "def f():\n    from transformer_lib import training\n",
               "transformer_lib.training": "import transformer_lib.model\n", "transformer_lib.model": ""}
    global MODULES
    saved = MODULES
    MODULES = {**saved, **{n: PACKAGE / "x.py" for n in sources if n not in saved}}
    try:
        graph = import_graph(sources)
    finally:
        MODULES = saved
    assert graph == {"transformer_lib.attention": {"transformer_lib.checks.attention"},
                     "transformer_lib.checks.attention": {"transformer_lib.checks.core"},
                     "transformer_lib.checks.core": set(), "transformer_lib.data": {"transformer_lib.training"},
                     "transformer_lib.training": {"transformer_lib.model"}, "transformer_lib.model": set()}


def test_a_cycle_and_an_upward_import_are_found():
    graph = {"transformer_lib.checks": set(), "transformer_lib.checks.core": set(),
             "transformer_lib.attention": {"transformer_lib.checks.attention"},
             "transformer_lib.checks.attention": {"transformer_lib.checkpoint"},  # a hand-written module that ...
             "transformer_lib.checkpoint": {"transformer_lib.data"},  # ... reaches chapter 6
             "transformer_lib.data": {"transformer_lib.training"}, "transformer_lib.training": {"transformer_lib.data"}}
    assert cycles(graph) == [["transformer_lib.data", "transformer_lib.training"]]
    assert upward_imports(graph) == [
        "transformer_lib.attention (chapter 2) imports transformer_lib.checks.attention, which reaches chapter 6",
        "transformer_lib.checks.attention (chapter 2) imports transformer_lib.checkpoint, which reaches chapter 6",
        "transformer_lib.training (chapter 5) imports transformer_lib.data, which reaches chapter 6"]
