"""The bibliography (docs/references.yml) and the chapters' citations (transformer_lib.book.references)."""
import re
from pathlib import Path

import nbformat
import pytest
import yaml

from transformer_lib import book as bk
from transformer_lib.book import cli
from transformer_lib.book.references import (cited, first_mentions, load_references, stale_references,
                                             write_references)

ROOT = Path(__file__).resolve().parents[1]
BOOK = bk.load_book(ROOT)
REFS = load_references(ROOT)


def _markdown(chapter) -> list:
    return [c for c in nbformat.read(ROOT / chapter.file, as_version=4).cells if c.cell_type == "markdown"]


def test_every_entry_is_cited_in_the_cell_where_the_book_first_names_its_subject():
    first = first_mentions(BOOK, REFS)
    assert set(first) == set(REFS), f"entries no chapter names (drop them or cite them): {sorted(set(REFS) - set(first))}"
    for key, (file, index) in first.items():
        cell = nbformat.read(ROOT / file, as_version=4).cells[index]
        assert REFS[key].link in cell.source, f"{file} cell {index} first names {key}'s subject: cite {REFS[key].link}"


def test_every_chapter_that_follows_the_paper_cites_it():
    paper = REFS["vaswani2017"]
    for chapter in BOOK.chapters:
        text = "\n".join(c.source for c in _markdown(chapter))
        if re.search(r"the paper|Attention Is All You Need", text):
            assert paper.link in text, f"{chapter.file} follows the paper without citing it"


def test_each_chapter_closes_with_what_it_cites_and_the_bibliography_is_current():
    assert stale_references(BOOK) == []
    for chapter in BOOK.chapters:
        cells = _markdown(chapter)
        keys = cited("\n".join(c.source for c in cells[:-1]), REFS)
        assert keys and cells[-1].source.startswith("## References"), chapter.file
        for key in keys:
            assert REFS[key].url in cells[-1].source


def test_code_blamed_for_a_mistake_is_named_with_a_permalink_to_its_lines():
    permalink = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+#L\d+")
    for chapter in BOOK.chapters:
        in_pitfalls = False
        for cell in _markdown(chapter):
            heading = re.match(r"##\s+(\d+\.\s+)?(.*)", cell.source)
            if heading and not cell.source.startswith("###"):
                in_pitfalls = "Pitfalls" in heading.group(2)
            elif cell.source.startswith("**Where this code departs"):  # the chapter's closing summary
                in_pitfalls = False
            assert not re.search(r"\b(popular|some|many)\s+(from-scratch\s+)?implementations?\b", cell.source, re.I), \
                f"{chapter.file}: blames unnamed code: {cell.source[:80]!r}"
            if in_pitfalls and re.search(r"Annotated Transformer|GluonTS|transformers'|Llama", cell.source):
                assert permalink.search(cell.source), f"{chapter.file}: names other code without a permalink"


def _small_book(tmp_path, cells: dict[str, list[str]], entries: dict) -> bk.Book:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("# Hand-written tool module (not generated from a notebook).\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "docs").mkdir()
    chapters = []
    for stem, sources in cells.items():
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_markdown_cell(s) for s in sources] + [nbformat.v4.new_code_cell(f"#| default_exp {stem[3:]}")]
        nbformat.write(nb, tmp_path / "notebooks" / f"{stem}.ipynb")
        chapters.append({"file": f"notebooks/{stem}.ipynb", "title": stem, "module": stem[3:]})
    (tmp_path / "book.yml").write_text(yaml.safe_dump({"title": "t", "package": "pkg", "chapters": chapters}))
    (tmp_path / "docs" / "references.yml").write_text(yaml.safe_dump(entries, allow_unicode=True))
    return bk.load_book(tmp_path)


ENTRY = {"authors": ["A. Author", "B. Author"], "year": 2020, "title": "A Paper", "venue": "arXiv preprint",
         "url": "https://arxiv.org/abs/2001.00001", "cite": "Author et al., 2020", "mentions": ["widgets"]}


def test_references_cells_are_written_kept_current_and_checked(tmp_path):
    small = _small_book(tmp_path, {"01_a": ["Widgets ([Author et al., 2020](https://arxiv.org/abs/2001.00001))."],
                                   "02_b": ["No citation here."]}, {"author2020": ENTRY})
    assert any("References cell is not what it cites" in p or "last cell" in p for p in stale_references(small))
    bk.export(small)
    assert cli.main(["--root", str(tmp_path), "check"]) == 1  # the command reports stale references
    assert write_references(small) == ["notebooks/01_a.ipynb", "docs/references.md"]
    assert stale_references(small) == [] and write_references(small) == []
    assert cli.main(["--root", str(tmp_path), "check"]) == 0
    nb = nbformat.read(tmp_path / "notebooks" / "01_a.ipynb", as_version=4)
    assert nb.cells[-1].source == ("## References\n\n- A. Author and B. Author (2020). *A Paper*. arXiv preprint. "
                                   "<https://arxiv.org/abs/2001.00001>")
    assert "Chapters: [1](../notebooks/01_a.ipynb)." in (tmp_path / "docs" / "references.md").read_text()
    nb.cells[0].source = "Nothing cited any more."  # a citation removed: the References cell is now stale
    nbformat.write(nb, tmp_path / "notebooks" / "01_a.ipynb")
    assert stale_references(small)
    write_references(small)
    nb = nbformat.read(tmp_path / "notebooks" / "01_a.ipynb", as_version=4)
    assert not any(c.source.startswith("## References") for c in nb.cells)
    assert "Chapters: none yet." in (tmp_path / "docs" / "references.md").read_text()


def test_a_citation_under_other_words_is_refused():
    with pytest.raises(bk.BookError, match=r"cites vaswani2017 under other words: write \[Vaswani et al., 2017\]"):
        cited("as [the paper](https://arxiv.org/abs/1706.03762) says", REFS)
    assert cited("[a tool](https://example.org) and [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)", REFS) \
        == ["vaswani2017"]


@pytest.mark.parametrize("change, message", [
    ({"url": "https://example.org/paper.pdf"}, "is not a stable link"),
    ({"year": "2020"}, "year must be a number"),
    ({"authors": "A. Author"}, "authors must be a list of names"),
    ({"mentions": ["(unclosed"]}, "is not a regular expression"),
    ({"venue": None}, "title, venue, url and cite must be text"),
])
def test_a_wrong_entry_is_named(tmp_path, change, message):
    _small_book(tmp_path, {"01_a": ["x"]}, {"author2020": {**ENTRY, **change}})
    with pytest.raises(bk.BookError, match=rf"docs/references.yml: author2020: .*{re.escape(message)}"):
        load_references(tmp_path)


def test_a_missing_field_or_a_cite_used_twice_is_named(tmp_path):
    entry = dict(ENTRY)
    del entry["venue"]
    _small_book(tmp_path, {"01_a": ["x"]}, {"author2020": entry})
    with pytest.raises(bk.BookError, match="author2020: an entry has exactly the fields"):
        load_references(tmp_path)
    (tmp_path / "docs" / "references.yml").write_text(yaml.safe_dump(
        {"one": ENTRY, "two": {**ENTRY, "url": "https://arxiv.org/abs/2001.00002"}}))
    with pytest.raises(bk.BookError, match="two: cite 'Author et al., 2020' is also one's"):
        load_references(tmp_path)


DOI = {**ENTRY, "url": "https://doi.org/10.1016/S0022-2836(81)90087-5", "cite": "Doi et al., 1981", "year": 1981}


@pytest.mark.parametrize("prose", [
    "Widgets ([Author et al.,\n2020](https://arxiv.org/abs/2001.00001)).",  # wrapped over two lines
    'Widgets ([Author et al., 2020](https://arxiv.org/abs/2001.00001 "A Paper")).',  # with a title
    "Widgets ([Author et al., 2020](<https://arxiv.org/abs/2001.00001>)).",  # in angle brackets
    "Widgets ([Author et al., 2020](\n  https://arxiv.org/abs/2001.00001\n)).",  # its target on a line of its own
])
def test_a_citation_wrapped_or_with_a_title_is_read(tmp_path, prose):
    small = _small_book(tmp_path, {"01_a": [prose]}, {"author2020": ENTRY})
    write_references(small)
    assert "<https://arxiv.org/abs/2001.00001>" in nbformat.read(tmp_path / "notebooks" / "01_a.ipynb", as_version=4).cells[-1].source


def test_a_doi_holding_parentheses_is_read(tmp_path):
    small = _small_book(tmp_path, {"01_a": [f"Widgets ([Doi et al., 1981]({DOI['url']}))."]}, {"doi1981": DOI})
    assert write_references(small) == ["notebooks/01_a.ipynb", "docs/references.md"]
    assert DOI["url"] in nbformat.read(tmp_path / "notebooks" / "01_a.ipynb", as_version=4).cells[-1].source


@pytest.mark.parametrize("prose, message", [
    ("See [Author et al., 2020] on widgets.", r"\[Author et al., 2020\] is not followed by \(its url\)"),
    ("See [Author et al., 2020](https://arxiv.org/abs/2001.00001v2).", r"links to https://arxiv.org/abs/2001.00001v2"),
    ('See [Author et al., 2020](https://arxiv.org/abs/2001.00001 "unclosed).', "links to a target that cannot be read"),
    ("See [the widget paper](https://arxiv.org/abs/2001.00001 'a).", r"\[the widget paper\]\(\.\.\.\) cannot be read as a link"),
    ("See [Author et al., 2020][1].\n\n[1]: https://arxiv.org/abs/2001.00001", "is not followed by"),
])
def test_what_looks_like_a_citation_but_cannot_be_read_names_the_notebook_and_cell(tmp_path, prose, message):
    small = _small_book(tmp_path, {"01_a": ["# A", prose]}, {"author2020": ENTRY})
    for command in (write_references, stale_references):
        with pytest.raises(bk.BookError, match=rf"^notebooks/01_a.ipynb cell 1 line \d: .*{message}"):
            command(small)
    assert cli.main(["--root", str(tmp_path), "references"]) == 1


def test_a_citation_in_code_is_not_a_citation():
    assert cited("`[Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)` is how a chapter cites", REFS) == []
    assert cited("```\n[Vaswani et al., 2017]\n```", REFS) == []
