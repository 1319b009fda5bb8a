"""Two layers in every chapter (BOOK_PLAN.md, "The reading path"): a main path within its reading budget that stands
alone, and deeper sections, each opening with a `Deeper:` heading, that the website folds closed.

The budgets are measured by transformer_lib.book.prose (its docstring documents the sentence splitter);
`python -m transformer_lib.book prose` prints the same table this test checks.
"""
import ast
import builtins
import re
from pathlib import Path

import nbformat
import pytest

import transformer_lib.book as bk
from transformer_lib.book.prose import BUDGET, chapter_prose, prose_problems, sentences, words, write_reading_times
from transformer_lib.book.site_chapters import _fold_deeper
from transformer_lib.book.site_safety import SiteError

ROOT = Path(__file__).resolve().parents[1]
BOOK = bk.load_book(ROOT)
CHAPTERS = [(c, nbformat.read(ROOT / c.file, as_version=4)) for c in BOOK.chapters]
IDS = [Path(c.file).stem for c, _ in CHAPTERS]


# ---- the splitter


def test_the_splitter_counts_prose_and_leaves_out_code_math_headings_tables_quotes_and_pictures():
    text = """## A heading that is not prose

The model reads `x` and $d_k$ numbers, e.g. ten of them. It uses [a link](https://example.org) once!
> "A quote from the paper. It is not our prose."

| a | table |
|---|---|
| 1 | 2 |

![A picture whose alt text is long and is not read as prose.](fig.png)
<img src="x.png" alt="neither is this">

```python
print("not prose. Not at all.")
```

$$
\\frac{a}{b}. \\quad Q K^T
$$

- a list item without a full stop
- another item. With two sentences
"""
    assert sentences(text) == [
        "The model reads Code and Math numbers, e.g. ten of them.",
        "It uses a link once!",
        "a list item without a full stop",
        "another item.",
        "With two sentences",
    ]
    assert words("It uses a link once! -- (x)") == ["It", "uses", "a", "link", "once!", "(x)"]


def test_a_sentence_ends_only_before_a_capital_a_digit_or_a_quote():
    assert sentences("Version 2.13.0 of torch. 3 numbers follow; see Vaswani et al. 2017 for more.") == [
        "Version 2.13.0 of torch.", "3 numbers follow; see Vaswani et al. 2017 for more."]
    assert sentences('It said "stop." Then it stopped.') == ['It said "stop."', "Then it stopped."]


def test_the_reading_time_counts_words_and_main_path_code_and_is_rendered_into_the_first_cell():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# T\n\n**Reading time:** about 99 minutes on the main path."),
                nbformat.v4.new_markdown_cell("Five words make a sentence. " * 200),
                nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in 50 * [0])),
                nbformat.v4.new_markdown_cell("## Deeper: more\n\n" + "Five words make a sentence. " * 1000, metadata={"tags": ["deeper"]})]
    prose = chapter_prose(nb, "t")
    assert prose.count("main") == 1000 + 9 and prose.count("deeper") == 5000
    assert prose.reading_minutes == 10  # 1,009 words at 200 a minute + 50 lines at 20 a minute = 7.5, rounded up to 5
    assert prose_problems([prose], [nb])[0] == ("t: the first cell says about 99 minutes, the main path reads in about "
                                                "10; run `python -m transformer_lib.book prose --write`")
    assert write_reading_times([prose], [nb]) == [0]
    assert "about 10 minutes" in nb.cells[0].source and prose_problems([prose], [nb]) == []


# ---- the book's numbers


def test_every_chapter_and_the_book_are_within_the_reading_budgets():
    chapters = [chapter_prose(nb, Path(c.file).stem) for c, nb in CHAPTERS]
    assert prose_problems(chapters, [nb for _, nb in CHAPTERS]) == []
    assert all(c.count("main") <= BUDGET["chapter_main_words"] for c in chapters)


# ---- deeper sections


def _runs(nb):
    """The runs of consecutive deeper cells, as lists of cell indexes."""
    runs, current = [], []
    for i, cell in enumerate(nb.cells):
        if "deeper" in cell.metadata.get("tags", []):
            current.append(i)
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


@pytest.mark.parametrize("chapter, nb", CHAPTERS, ids=IDS)
def test_every_chapter_has_deeper_sections_each_opening_with_a_heading_that_says_what_it_holds(chapter, nb):
    runs = _runs(nb)
    assert runs, f"{chapter.file}: no cell is tagged deeper"
    for run in runs:
        first = nb.cells[run[0]]
        assert first.cell_type == "markdown" and re.match(r"#{2,4} Deeper: \S.{8,}", first.source.split("\n", 1)[0]), (
            f"{chapter.file} cell {run[0]}: a deeper section opens with a heading '## Deeper: what it proves'")
    both = [i for i, cell in enumerate(nb.cells) if {"deeper", "exercise"} <= set(cell.metadata.get("tags", []))]
    assert both == [], f"{chapter.file}: cells {both} are tagged both deeper and exercise"


def _defined(tree) -> set[str]:
    """The names a cell binds at its top level (assignments, imports, definitions, loop and with targets)."""
    names = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return  # what a function or class binds inside stays inside
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)):
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def _free_reads(node, bound: frozenset = frozenset()) -> set[str]:
    """The names a cell reads from outside itself: at its top level, and inside its functions, lambdas and
    comprehensions less their own parameters and the names they bind (a function's `model` argument is no read)."""
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
              ast.GeneratorExp)
    if isinstance(node, scopes):
        inner = set()
        if not isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            a = node.args
            inner |= {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]}
        inner |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        bound = bound | inner
    load = isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    reads = {node.id} if load and node.id not in bound else set()
    for child in ast.iter_child_nodes(node):
        reads |= _free_reads(child, bound)
    return reads


def _tree(source: str):
    lines = [("pass" if line.lstrip().startswith(("%", "!")) else line) for line in source.splitlines()]
    return ast.parse("\n".join(lines))


@pytest.mark.parametrize("chapter, nb", CHAPTERS, ids=IDS)
def test_the_main_path_and_the_exercises_use_no_name_that_only_a_deeper_cell_set(chapter, nb):
    """Skipping every deeper cell leaves each name the main path and the exercises read set by a main-path cell."""
    set_by_deeper, set_on_main, problems = {}, set(), []  # a name the main path set earlier stays set without deeper
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tree, deeper = _tree(cell.source), "deeper" in cell.metadata.get("tags", [])
        own = _defined(tree)
        if not deeper:
            read = _free_reads(tree)
            for name in sorted(read - own - set(dir(builtins)) - set_on_main):
                if name in set_by_deeper:
                    problems.append(f"cell {i} reads {name}, set only by deeper cell {set_by_deeper[name]}")
        for name in own:
            if deeper:
                set_by_deeper[name] = i
            else:
                set_on_main.add(name)
    assert problems == [], f"{chapter.file}: " + "; ".join(problems)


# ---- the website's fold


def _cell(kind, source, tags=(), id_=None):
    make = nbformat.v4.new_markdown_cell if kind == "md" else nbformat.v4.new_code_cell
    return make(source, metadata={"tags": list(tags)} if tags else {}, id=id_)


def test_the_site_marks_where_each_deeper_section_ends_and_refuses_one_without_its_heading():
    cells = [_cell("md", "## 1. Idea", id_="a"), _cell("md", "### Deeper: proof against PyTorch", ["deeper"], "b"),
             _cell("code", "x = 1", ["deeper"], "c"), _cell("md", "Back on the path.", id_="d"),
             _cell("md", "## Deeper: measurements at length", ["deeper"], "e")]
    out = _fold_deeper(cells, "ch.ipynb")
    assert [c.get("id") for c in out] == ["a", "b", "c", "b-end", "d", "e", "e-end"]
    assert out[3].source == '<div class="tb-deeper-end" data-opened-by="b"></div>'
    with pytest.raises(SiteError, match=r"ch.ipynb cell id c: a run of cells tagged deeper must open with"):
        _fold_deeper([cells[0], cells[2], cells[3]], "ch.ipynb")


# ---- headings and tags agree: the two layers are the same in Jupyter, GitHub, Colab and on the website


def test_every_cell_under_a_deeper_heading_is_tagged_deeper_and_no_other():
    """Jupyter's outline, GitHub and Colab fold by headings, the website by the tag: they agree in every chapter."""
    assert bk.layer_problems(BOOK) == []


def _chapter(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell(kind, source, tags, f"c{i}") for i, (kind, source, tags) in enumerate(cells)]
    return nb


def test_a_cell_whose_tag_and_headings_disagree_is_named_with_its_chapter_and_cell():
    from transformer_lib.book.prose import layer_problems, under_deeper_headings

    nb = _chapter(("md", "# Chapter", ()), ("md", "## 1. Idea", ()), ("md", "### Deeper: the proof, in full", ["deeper"]),
                  ("code", "x = 1", ["deeper"]), ("md", "#### A sub-heading of the proof", ["deeper"]),
                  ("md", "Back on the path, with no heading.", ()),  # 5: under the Deeper heading, untagged
                  ("md", "### The next idea\n\nMain path again.", ()), ("code", "y = 2", ()),
                  ("md", "## Summary", ["deeper"]),  # 8: tagged, under no Deeper heading
                  ("md", "```\n## Deeper: a heading in fenced code is not one\n```", ()))
    assert under_deeper_headings(nb) == [False, False, True, True, True, True, False, False, False, False]
    first, second = layer_problems(nb, "notebooks/01_x.ipynb")
    assert first.startswith("notebooks/01_x.ipynb cell 5 (id c5, 'Back on the path, with no heading.'): under a "
                            "'Deeper:' heading but not tagged deeper")
    assert second.startswith("notebooks/01_x.ipynb cell 8 (id c8, '## Summary'): tagged deeper but under no 'Deeper:'")


def test_book_check_fails_on_a_chapter_whose_tag_and_headings_disagree(tmp_path):
    from test_book import make_book

    book = make_book(tmp_path, {"01_alpha": ["#| default_exp alpha", "x = 1"]})
    assert bk.layer_problems(book) == []
    path = tmp_path / "notebooks" / "01_alpha.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("## Deeper: a proof", metadata={"tags": ["deeper"]}))
    nb.cells.append(nbformat.v4.new_code_cell("y = 2"))
    nbformat.write(nb, path)
    (problem,) = [p for p in bk.check(book) if "Deeper" in p]
    assert problem.startswith(f"notebooks/01_alpha.ipynb cell {len(nb.cells) - 1} ") and "not tagged deeper" in problem


def test_the_main_path_code_budget_holds_a_chapter_over_it_at_its_count_and_names_the_way_out(monkeypatch):
    from transformer_lib.book import prose
    from transformer_lib.book.prose import CODE_LINES_HELD, ChapterProse, _code_problems

    assert all(held > BUDGET["chapter_main_code_lines"] for held in CODE_LINES_HELD.values())  # only one over it
    monkeypatch.setattr(prose, "CODE_LINES_HELD", {8: 291})  # a chapter held, as chapter 8 once was

    budget = BUDGET["chapter_main_code_lines"]
    assert _code_problems(ChapterProse("3. Blocks", main_code_lines=budget)) == []
    over = _code_problems(ChapterProse("3. Blocks", main_code_lines=budget + 1))
    assert len(over) == 1 and over[0].startswith(f"3. Blocks: the main path shows {budget + 1} code lines, over the "
                                                 f"budget of {budget}")
    number, held = 8, 291
    assert _code_problems(ChapterProse(f"{number:02d}_x", main_code_lines=held)) == []
    assert f"over the {held} it is held at" in _code_problems(ChapterProse(f"{number}. X", main_code_lines=held + 1))[0]
    mended = _code_problems(ChapterProse(f"{number}. X", main_code_lines=budget))
    assert len(mended) == 1 and f"take chapter {number} out of CODE_LINES_HELD" in mended[0]
