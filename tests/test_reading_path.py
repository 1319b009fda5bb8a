"""The reading path: chapters a learner can read top to bottom, classes as short as the idea they teach.

BOOK_PLAN's limits: no code cell over 60 lines, no generated module over about 450 lines, MultiHeadAttention about
35 lines of code, input checks one call into transformer_lib.checks, and no chapter reaching into another
chapter's private helpers.
"""
import ast
import re
from pathlib import Path

import nbformat
import pytest

from transformer_lib.book import load_book, parse_directives

ROOT = Path(__file__).resolve().parents[1]
BOOK = load_book(ROOT)
MAX_CELL_LINES = 60
MAX_MODULE_LINES = 450


def code_lines(source: str, node: ast.AST) -> int:
    """Lines of a class or function that hold code: no docstrings, comments or blank lines."""
    docstrings = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.body and isinstance(n.body[0], ast.Expr) \
                and isinstance(n.body[0].value, ast.Constant) and isinstance(n.body[0].value.value, str):
            docstrings.update(range(n.body[0].lineno, n.body[0].end_lineno + 1))
    lines = source.splitlines()
    return sum(1 for i in range(node.lineno, node.end_lineno + 1)
               if i not in docstrings and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))


def definitions(module: str) -> tuple[str, dict[str, ast.AST]]:
    source = (ROOT / "transformer_lib" / f"{module}.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    return source, {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}


@pytest.mark.parametrize("chapter", BOOK.chapters, ids=[c.file for c in BOOK.chapters])
def test_no_code_cell_is_longer_than_60_lines(chapter):
    nb = nbformat.read(ROOT / chapter.file, as_version=4)
    long = [(i, len(c.source.splitlines())) for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and len(c.source.splitlines()) > MAX_CELL_LINES]
    assert not long, f"{chapter.file}: cells (index, lines) over {MAX_CELL_LINES} lines: {long}"


@pytest.mark.parametrize("chapter", BOOK.chapters, ids=[c.module for c in BOOK.chapters])
def test_no_generated_module_is_longer_than_450_lines(chapter):
    lines = len(BOOK.module_path(chapter).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{chapter.module}.py has {lines} lines"


def test_multi_head_attention_is_as_short_as_the_best_tutorials():
    source, defs = definitions("attention")
    assert code_lines(source, defs["MultiHeadAttention"]) <= 35


@pytest.mark.parametrize("module, name, limit", [
    ("embeddings", "TokenEmbedding", 15), ("embeddings", "PositionalEncoding", 12),
    ("blocks", "LayerNorm", 15), ("blocks", "PositionwiseFeedForward", 12), ("blocks", "SublayerConnection", 12),
    ("blocks", "EncoderLayer", 15), ("blocks", "DecoderLayer", 15),
    ("model", "Encoder", 12), ("model", "Decoder", 12), ("model", "Generator", 8), ("model", "EncoderDecoder", 20),
])
def test_core_classes_stay_short(module, name, limit):
    source, defs = definitions(module)
    assert code_lines(source, defs[name]) <= limit


@pytest.mark.parametrize("module, name", [
    ("embeddings", "TokenEmbedding"), ("embeddings", "PositionalEncoding"), ("attention", "MultiHeadAttention"),
    ("blocks", "LayerNorm"), ("blocks", "PositionwiseFeedForward"), ("blocks", "EncoderLayer"),
    ("blocks", "DecoderLayer"), ("model", "EncoderDecoder"), ("gpt", "GPT"), ("gpt", "KVCache"),
    ("modern", "RMSNorm"), ("modern", "SwiGLU"), ("modern", "Attention"), ("modern", "Block"), ("modern", "ModernGPT"),
])
def test_a_core_class_spends_at_most_a_line_or_two_on_checks(module, name):
    """Each method calls into transformer_lib.checks at most twice and raises nothing itself."""
    _, defs = definitions(module)
    for method in (n for n in defs[name].body if isinstance(n, ast.FunctionDef)):
        calls = [n for n in ast.walk(method) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id.startswith("check_")]
        raises = [n for n in ast.walk(method) if isinstance(n, ast.Raise)]
        assert len(calls) <= 2 and not raises, f"{name}.{method.name}: {len(calls)} checks, {len(raises)} raises"


@pytest.mark.parametrize("chapter", BOOK.chapters, ids=[c.file for c in BOOK.chapters])
def test_chapters_import_no_private_helper_of_another_module(chapter):
    """Checks come from transformer_lib.checks; nothing reaches for another chapter's `_private` names."""
    nb = nbformat.read(ROOT / chapter.file, as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        _, code = parse_directives(cell.source)
        private = re.findall(r"from transformer_lib\.\w+ import [^\n]*\b(_\w+)", code)
        assert not private, f"{chapter.file} cell {index} imports private names {private}"
        assert "def _check" not in code, f"{chapter.file} cell {index} defines a check: it belongs in transformer_lib/checks/"


def test_chapter_1_opens_with_the_idea_not_with_checks():
    nb = nbformat.read(ROOT / BOOK.chapters[0].file, as_version=4)
    exported = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(("#| export", "#| exporti"))]
    first_definition = next(c for c in exported if re.search(r"^(class|def) ", c.source, re.M))
    assert "class TokenEmbedding" in first_definition.source


# Chapters 1 to 8, from embeddings to a trained translator; chapters 9 to 11 build fast paths and other models.
SHORT_CHAPTERS = BOOK.chapters[:8]


@pytest.mark.parametrize("chapter", SHORT_CHAPTERS, ids=[c.module for c in SHORT_CHAPTERS])
def test_no_function_or_class_a_learner_reads_holds_more_than_30_lines_of_code(chapter):
    """The idea before the machinery: every definition of the chapter's module, helpers included, at most 30 lines of
    code (docstrings, comments and blank lines aside); file plumbing and processes live in hand-written modules."""
    source, defs = definitions(chapter.module)
    long = {name: code_lines(source, node) - len(fields(node)) for name, node in defs.items()
            if code_lines(source, node) - len(fields(node)) > 30}
    assert not long, f"{chapter.module}: {long}"


def fields(node: ast.AST) -> list:
    """A dataclass's field declarations (`name: type = default`, one a line): a list of settings to read, not code to
    trace, so the 30 lines count its methods and not its fields (chapter 8's Recipe holds one for every knob)."""
    if not isinstance(node, ast.ClassDef):
        return []
    declared = [n for n in node.body if isinstance(n, ast.AnnAssign)]
    assert len({n.lineno for n in declared}) == len(declared) == sum(n.end_lineno - n.lineno + 1 for n in declared), \
        f"{node.name}: one field a line"
    return declared


def test_a_recipe_is_counted_by_its_code_and_its_fields_one_a_line():
    source, defs = definitions("translation")
    assert len(fields(defs["Recipe"])) >= 28 and code_lines(source, defs["Recipe"]) - len(fields(defs["Recipe"])) <= 3
    with pytest.raises(AssertionError, match="one field a line"):
        fields(ast.parse("class R:\n    a: int = 1; b: int = 2\n").body[0])


def test_the_line_count_sees_a_long_definition():
    source = "def f(x):\n    '''Doc.\n\n    More doc.'''\n" + "".join(f"    x += {i}  # step\n" for i in range(31)) + \
             "\n    # a comment\n    return x\n"
    node = ast.parse(source).body[0]
    assert code_lines(source, node) == 33  # the def, 31 steps and the return


@pytest.mark.parametrize("module, machinery", [("training", "def train_epoch"), ("translation", "def train_translation")])
def test_a_training_chapter_shows_the_short_loop_before_its_machinery(module, machinery):
    """Chapters 5 and 8 run the bare training loop (forward, backward, step; at most 15 lines) on their data, with a
    printed result, before the cell that defines the loop the rest of the book uses."""
    chapter = next(c for c in BOOK.chapters if c.module == module)
    cells = [c for c in nbformat.read(ROOT / chapter.file, as_version=4).cells if c.cell_type == "code"]
    grown = next(i for i, c in enumerate(cells) if machinery in c.source)
    short = [c for c in cells[:grown] if ".backward()" in c.source and not c.source.startswith("#| export")]
    assert short, f"{chapter.file}: no training loop runs before {machinery}"
    loop = ast.parse(short[0].source).body
    loop = next(n for n in loop if isinstance(n, ast.For))
    assert loop.end_lineno - loop.lineno + 1 <= 15
    assert any(o.output_type == "stream" and o.text.strip() for o in short[0].outputs), "the loop shows no result"
