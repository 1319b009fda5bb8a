# Hand-written tool module (not generated from a notebook).
"""The book's bibliography (docs/references.yml): citations in the chapters and each chapter's References cell.

    python -m transformer_lib.book references   # rewrite every chapter's References cell from what it cites

A chapter cites an entry with a Markdown link, `[Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)`: the
entry's `cite` as the text and its `url` as the target, so that the citation reads and opens the same in Jupyter,
Colab, on GitHub and on the website. Each chapter closes with a cell headed "## References" that lists, in full,
the entries the chapter cites; `book check` reports a chapter whose list is out of date.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from transformer_lib.book import Book, BookError, _write_atomic

__all__ = ["REFERENCES_FILE", "REFERENCES_HEADING", "Reference", "load_references", "cited", "references_markdown",
           "stale_references", "write_references",
           "first_mentions", "bibliography_markdown", "BIBLIOGRAPHY_FILE"]

REFERENCES_FILE = "docs/references.yml"
REFERENCES_HEADING = "## References"
BIBLIOGRAPHY_FILE = "docs/references.md"
_FIELDS = ("authors", "year", "title", "venue", "url", "cite", "mentions")
_STABLE = ("https://arxiv.org/abs/", "https://aclanthology.org/", "https://doi.org/", "https://github.com/",
           "https://jmlr.org/papers/", "https://proceedings.mlr.press/", "https://cdn.openai.com/")


@dataclass(frozen=True)
class Reference:
    key: str
    authors: tuple[str, ...]
    year: int
    title: str
    venue: str
    url: str
    cite: str
    mentions: tuple[str, ...]

    @property
    def link(self) -> str:
        """How a chapter cites it."""
        return f"[{self.cite}]({self.url})"

    def markdown(self) -> str:
        """The full entry, as the References cell lists it."""
        names = list(self.authors)
        if len(names) > 1:
            names = [", ".join(names[:-1]) + (" and " if names[-1] != "and others" else " ") + names[-1]]
        venue = "" if self.venue == "software" else f" {self.venue}."
        return f"{names[0]} ({self.year}). *{self.title}*.{venue} <{self.url}>"


def load_references(root: Path) -> dict[str, Reference]:
    """The entries of docs/references.yml under `root`, checked: every field present and of its type, the link a
    stable one (arXiv, ACL Anthology, a DOI, a repository, the publisher's own copy), no `cite` or `url` twice."""
    import yaml

    path = Path(root) / REFERENCES_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise BookError(f"{REFERENCES_FILE}: cannot read it ({type(err).__name__}: {str(err).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise BookError(f"{REFERENCES_FILE}: expected a mapping of keys to entries")
    refs, seen = {}, {}
    for key, entry in data.items():
        where = f"{REFERENCES_FILE}: {key}"
        if not isinstance(entry, dict) or sorted(entry) != sorted(_FIELDS):
            raise BookError(f"{where}: an entry has exactly the fields {', '.join(_FIELDS)}")
        if not (isinstance(entry["authors"], list) and entry["authors"] and all(isinstance(a, str) for a in entry["authors"])):
            raise BookError(f"{where}: authors must be a list of names")
        if isinstance(entry["year"], bool) or not isinstance(entry["year"], int):
            raise BookError(f"{where}: year must be a number")
        if not all(isinstance(entry[f], str) and entry[f].strip() for f in ("title", "venue", "url", "cite")):
            raise BookError(f"{where}: title, venue, url and cite must be text")
        if not entry["url"].startswith(_STABLE):
            raise BookError(f"{where}: {entry['url']} is not a stable link (arXiv, ACL Anthology, DOI, ...)")
        if not (isinstance(entry["mentions"], list) and entry["mentions"]):
            raise BookError(f"{where}: mentions must list the patterns that name the subject in prose")
        for pattern in entry["mentions"]:
            try:
                re.compile(pattern)
            except (re.error, TypeError) as err:
                raise BookError(f"{where}: mention {pattern!r} is not a regular expression ({err})") from None
        for field in ("cite", "url"):
            if entry[field] in seen:
                raise BookError(f"{where}: {field} {entry[field]!r} is also {seen[entry[field]]}'s")
            seen[entry[field]] = key
        refs[key] = Reference(key, tuple(entry["authors"]), entry["year"], entry["title"], entry["venue"],
                              entry["url"], entry["cite"], tuple(entry["mentions"]))
    return refs


_FENCE = re.compile(r"^ {0,3}(```|~~~).*?(^ {0,3}\1[^\n]*$|\Z)", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)


def _without_code(text: str) -> str:
    """`text` with fenced code blocks and code spans blanked (same length, newlines kept): code cites nothing."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    return _CODE_SPAN.sub(blank, _FENCE.sub(blank, text))


def _brackets(text: str) -> dict[int, int]:
    """{index of a `[`: index of the `]` closing it} (nested brackets allowed, not across a blank line), in one pass:
    a hostile cell of many unclosed brackets costs no more than its length."""
    closing, open_, i = {}, [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            open_.append(i)
        elif c == "]" and open_:
            closing[open_.pop()] = i
        elif c == "\n" and text[i + 1:i + 1 + 80].lstrip(" \t").startswith("\n"):
            open_.clear()  # a paragraph ends: what it left open stays open
        i += 1
    return closing


_LONGEST_URL = 2000  # longer is no citation, and a target is never read further (a hostile cell stays linear)


def _target(text: str, start: int) -> tuple[str, int] | None:
    """The link destination in `text` from `start` (just after `](`), as CommonMark reads it: <url> or a url with
    balanced parentheses, then an optional "title", 'title' or (title), then `)`. (url, index after `)`) or None."""
    i = start
    while i < len(text) and text[i] in " \t\n":
        i += 1
    if text.startswith("<", i):
        end = text.find(">", i, i + _LONGEST_URL)
        if end < 0 or "\n" in text[i:end]:
            return None
        url, i = text[i + 1:end], end + 1
    else:
        depth, j, stop = 0, i, min(len(text), i + _LONGEST_URL)
        while j < stop and not text[j].isspace():
            if text[j] == "(":
                depth += 1
                if depth > 3:  # no url nests deeper; a hostile cell's `[a](` after `[a](` stops here
                    return None
            elif text[j] == ")":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        if depth or j == stop < len(text):
            return None
        url, i = text[i:j], j
    k = i
    while k < len(text) and text[k] in " \t\n":
        k += 1
    if k > i and k < len(text) and text[k] in "\"'(":
        close = ")" if text[k] == "(" else text[k]
        end = text.find(close, k + 1, k + 1 + _LONGEST_URL)
        if end < 0:
            return None
        k = end + 1
        while k < len(text) and text[k] in " \t\n":
            k += 1
    return (url, k + 1) if text.startswith(")", k) and url else None


def _links(text: str):
    """Each Markdown link of `text` outside code: (its words with whitespace collapsed, its url or None where the
    target after `](` cannot be read, or False where no `(` follows the brackets, the line it starts on, and the text
    after `](`)."""
    text = _without_code(text)
    closing, i, line, counted = _brackets(text), 0, 1, 0
    while True:
        i = text.find("[", i)
        if i < 0:
            return
        close = closing.get(i)
        if close is None or (i and text[i - 1] == "\\"):
            i += 1
            continue
        line, counted = line + text.count("\n", counted, i), i
        words = " ".join(text[i + 1:close].split())
        if text.startswith("(", close + 1):
            found = _target(text, close + 2)
            yield words, (found[0] if found else None), line, text[close + 2:close + 400].lstrip(" \t\n<")
            i = found[1] if found else close + 1
        else:
            yield words, False, line, ""
            i = close + 1


def cited(text: str, refs: dict[str, Reference], where: str = "") -> list[str]:
    """Keys of the entries `text` cites, in the order of their first citation. Citations may wrap over lines, carry
    a title or hold parentheses in their url (a DOI). What looks like a citation but cannot be read as one is a
    BookError naming `where` (e.g. "notebooks/01_embeddings.ipynb cell 12") and the line: a link to an entry's url
    under other words, an entry's `cite` linking elsewhere or to nothing, a link to an entry whose target cannot
    be read."""
    by_url = {r.url: r for r in refs.values()}
    by_cite = {" ".join(r.cite.split()): r for r in refs.values()}
    keys = []
    for words, url, line, after in _links(text):
        at = f"{where} line {line}: " if where else ""
        ref = by_url.get(url) if url else None
        if ref is None:
            named = by_cite.get(words)
            if named is not None:
                how = ("is not followed by (its url)" if url is False else
                       "links to a target that cannot be read" if url is None else f"links to {url}")
                raise BookError(f"{at}[{words}] {how}: write {named.link}")
            broken = next((r for u, r in by_url.items() if after.startswith(u)), None) if url is None else None
            if broken is not None:
                raise BookError(f"{at}[{words}](...) cannot be read as a link (an unclosed parenthesis or quote?); "
                                f"cite {broken.key} as {broken.link}")
            continue
        if words != " ".join(ref.cite.split()):
            raise BookError(f"{at}[{words}]({url}) cites {ref.key} under other words: write [{ref.cite}]({url})")
        if ref.key not in keys:
            keys.append(ref.key)
    return keys


def _is_references_cell(cell) -> bool:
    return cell.cell_type == "markdown" and cell.source.lstrip().startswith(REFERENCES_HEADING)


def _by_author(ref: Reference) -> tuple:
    """A bibliography's order: first author's surname, then year and title."""
    return ref.authors[0].split()[-1].lower(), ref.year, ref.title


def references_markdown(keys: list[str], refs: dict[str, Reference]) -> str:
    """The References cell of a chapter citing `keys`, sorted by first author and year."""
    entries = sorted((refs[k] for k in keys), key=_by_author)
    return "\n".join([REFERENCES_HEADING, "", *(f"- {r.markdown()}" for r in entries)])


def _chapter_keys(file: str, nb, refs: dict[str, Reference]) -> list[str]:
    """The entries a chapter's prose cites, in order; a BookError naming the file and cell for one it cannot read."""
    keys = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and not _is_references_cell(cell):
            keys += [k for k in cited(cell.source, refs, f"{file} cell {index}") if k not in keys]
    return keys


def stale_references(book: Book) -> list[str]:
    """One line for each chapter whose References cell is missing or is not what its citations render."""
    refs = load_references(book.root)
    problems = []
    for chapter in book.chapters:
        nb = nbformat.read(book.root / chapter.file, as_version=4)
        keys = _chapter_keys(chapter.file, nb, refs)
        cells = [c for c in nb.cells if _is_references_cell(c)]
        if not keys and not cells:
            continue
        if len(cells) != 1 or cells[0] is not nb.cells[-1]:
            problems.append(f"{chapter.file}: the last cell should be its one '{REFERENCES_HEADING}' cell")
        elif cells[0].source != references_markdown(keys, refs):
            problems.append(f"{chapter.file}: its References cell is not what it cites "
                            "(python -m transformer_lib.book references)")
    bibliography = book.root / BIBLIOGRAPHY_FILE
    if not bibliography.is_file() or bibliography.read_text(encoding="utf-8") != bibliography_markdown(book, refs):
        problems.append(f"{BIBLIOGRAPHY_FILE}: not what {REFERENCES_FILE} and the chapters give "
                        "(python -m transformer_lib.book references)")
    return problems


def write_references(book: Book) -> list[str]:
    """Rewrite every chapter's closing References cell from what the chapter cites; returns the files changed."""
    refs = load_references(book.root)
    changed = []
    for chapter in book.chapters:
        path = book.root / chapter.file
        nb = nbformat.read(path, as_version=4)
        keys = _chapter_keys(chapter.file, nb, refs)
        old = [c.source for c in nb.cells]
        cells = [c for c in nb.cells if _is_references_cell(c)]
        nb.cells = [c for c in nb.cells if not _is_references_cell(c)]
        if keys:
            cell = cells[0] if cells else nbformat.v4.new_markdown_cell()  # the same cell id where there was one
            cell.source = references_markdown(keys, refs)
            nb.cells.append(cell)
        if [c.source for c in nb.cells] != old:
            _write_atomic(path, nbformat.writes(nb) + "\n")
            changed.append(chapter.file)
    bibliography = book.root / BIBLIOGRAPHY_FILE
    text = bibliography_markdown(book, refs)
    if not bibliography.is_file() or bibliography.read_text(encoding="utf-8") != text:
        _write_atomic(bibliography, text)
        changed.append(BIBLIOGRAPHY_FILE)
    return changed


def first_mentions(book: Book, refs: dict[str, Reference]) -> dict[str, tuple[str, int]]:
    """For each entry, the chapter file and cell index where the book's prose first names its subject (outside
    code spans and link targets), in reading order; entries the prose never names are left out."""
    found = {}
    for chapter in book.chapters:
        nb = nbformat.read(book.root / chapter.file, as_version=4)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "markdown" or _is_references_cell(cell):
                continue
            prose = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("!["))
            prose = re.sub(r"\]\([^)]*\)|`[^`]*`", " ", prose)  # figures, link targets and code are not prose
            for key, ref in refs.items():
                if key not in found and any(re.search(p, prose, re.IGNORECASE) for p in ref.mentions):
                    found[key] = (chapter.file, index)
    return found


def bibliography_markdown(book: Book, refs: dict[str, Reference]) -> str:
    """docs/references.md: every entry in full, and the chapters that cite it."""
    where = {key: [] for key in refs}
    for number, chapter in enumerate(book.chapters, 1):
        nb = nbformat.read(book.root / chapter.file, as_version=4)
        for key in _chapter_keys(chapter.file, nb, refs):
            where[key].append(f"[{number}](../{chapter.file})")
    lines = ["# References", "",
             f"Every paper, data set and tool the book relies on ({REFERENCES_FILE}, rendered by "
             "`python -m transformer_lib.book references`), with the chapters that cite it.", ""]
    order = sorted(refs.values(), key=_by_author)
    for ref in order:
        chapters = ", ".join(where[ref.key]) or "none yet"
        lines.append(f"- {ref.markdown()} Chapters: {chapters}.")
    return "\n".join(lines) + "\n"
