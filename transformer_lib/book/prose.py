# Hand-written tool module (not generated from a notebook).
"""How much the book asks a reader to read: words, sentences and reading time of each chapter's prose.

`python -m transformer_lib.book prose` prints the table; `--write` renders each chapter's reading time into its first
cell; `--check` exits 1 when a chapter is over budget or its reading time is stale. The splitter, in order:

1. Prose is the Markdown cells of the chapters. The References cell (its heading is `References`) is a bibliography,
   not prose, and is left out.
2. Left out of every cell: fenced code, display math (`$$ ... $$`), HTML comments and tags (an `<img>` and its alt
   text whole), pictures (`![alt](...)`), headings, table rows and block quotes (the paper's words, quoted).
3. What stays counts as written: a link counts as its text, inline code and inline math as one word each.
4. Blocks are paragraphs (split at blank lines) and list items (a line opening with `-`, `*`, `+` or `1.`); a block
   always ends a sentence.
5. Inside a block a sentence ends at `.`, `!` or `?` (closing quotes and brackets included) before a space and a
   capital letter, a digit, a quote or a bracket; abbreviations such as "e.g." and "et al." do not end one.
6. A word is a run of characters between spaces with at least one letter or digit in it.

Cells tagged `deeper` are the deeper layer; cells tagged `exercise` are the exercises. The **main path** is every
other Markdown cell. Its reading time counts prose at 200 words a minute and the code cells of the main path (less
the install and import boilerplate, `#| hide` cells and comment lines) at 20 lines a minute, rounded up to 5 minutes.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

__all__ = ["BUDGET", "CODE_LINES_HELD", "ChapterProse", "chapter_prose", "sentences", "words", "prose_problems", "prose_table",
           "write_reading_times", "READING_LINE", "DEEPER_HEADING", "under_deeper_headings", "layer_problems"]

# the budgets of the reading path (BOOK_PLAN.md, "The reading path")
BUDGET = {"chapter_main_words": 2000, "book_main_words": 17000, "mean_sentence_words": 19.0, "long_share": 0.03,
          "long_words": 40, "chapter_main_code_lines": 250}
# Chapters whose main path still shows more code than the budget, by number: each held at most at the count it had
# when the budget came in, until its machinery moves out. A count may only fall; at the budget, the entry goes.
CODE_LINES_HELD: dict[int, int] = {}  # every chapter within the budget
WORDS_A_MINUTE, LINES_A_MINUTE = 200, 20
# the reading-time line each chapter's first cell carries, rendered by `prose --write`
READING_LINE = re.compile(r"\*\*Reading time:\*\* about (\d+) minutes")

_ABBREVIATIONS = ("e.g.", "i.e.", "et al.", "vs.", "cf.", "Fig.", "Eq.", "approx.", "etc.", "No.", "Sec.", "resp.")
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
_DISPLAY_MATH = re.compile(r"\$\$.*?\$\$|\\begin\{(\w+\*?)\}.*?\\end\{\1\}", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_IMG_TAG = re.compile(r"<img\b[^>]*>", re.I | re.S)
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_PICTURE = re.compile(r"!\[(?:[^\[\]]|\[[^\[\]]*\])*\]\([^()\s]*(?:\s+\"[^\"]*\")?\)")
_LINK = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)")
_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_MATH = re.compile(r"(?<![\\$])\$(?!\s)(?:\\\$|[^$\n])+?(?<!\s)\$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_END = re.compile(r"([.!?][\"'”’)\]*_]*)\s+(?=[\"'“‘(\[*_]*[A-Z0-9])")


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def blocks(markdown: str) -> list[str]:
    """The paragraphs and list items of a Markdown cell's prose, each on one line."""
    text = _FENCE.sub("\n", markdown)
    text = _DISPLAY_MATH.sub("\n", text)
    text = _COMMENT.sub(" ", text)
    text = _IMG_TAG.sub(" ", text)
    text = _PICTURE.sub(" ", text)
    text = _CODE.sub(" Code ", text)
    text = _MATH.sub(" Math ", text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _TAG.sub(" ", text)
    out, current = [], []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "|", ">")) or re.fullmatch(r"[-*_=]{3,}", stripped):
            if current:
                out.append(" ".join(current))
            current = []
            continue
        if _ITEM.match(line):
            if current:
                out.append(" ".join(current))
            current = [_ITEM.sub("", line).strip()]
        else:
            current.append(stripped)
    if current:
        out.append(" ".join(current))
    return [" ".join(b.split()) for b in out if words(b)]


def words(text: str) -> list[str]:
    """The words of `text`: runs between spaces with a letter or digit in them."""
    return [w for w in text.split() if re.search(r"[A-Za-z0-9À-ÿ]", w)]


def sentences(markdown: str) -> list[str]:
    """The sentences of a Markdown cell's prose, by the splitter of this module's docstring."""
    out = []
    for block in blocks(markdown):
        protected = block
        for i, abbr in enumerate(_ABBREVIATIONS):
            protected = re.sub(rf"(?<![A-Za-z]){re.escape(abbr)}", f"\0{i}\0", protected)
        for piece in _END.sub("\\1\x01", protected).split("\x01"):
            piece = re.sub(r"\0(\d+)\0", lambda m: _ABBREVIATIONS[int(m.group(1))], piece).strip()
            if words(piece):
                out.append(piece)
    return out


def _tags(cell) -> list:
    tags = cell.get("metadata", {}).get("tags", [])
    return tags if isinstance(tags, list) else []


def _is_references(source: str) -> bool:
    return bool(re.match(r"\s*#{1,6}\s+References\s*$", source.split("\n", 1)[0]))


def _code_lines(source: str) -> int:
    lines = source.splitlines()
    if any(line.startswith(("#| default_exp", "#| hide")) for line in lines):
        return 0
    return sum(1 for line in lines
               if line.strip() and not line.lstrip().startswith("#") and not re.match(r"(from \S+ )?import ", line))


DEEPER_HEADING = re.compile(r"^#{2,4} Deeper: \S")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _headings(markdown: str) -> list[tuple[int, str]]:
    """A Markdown cell's headings, (level, title), outside fenced code."""
    return [(len(m.group(1)), m.group(2)) for line in _FENCE.sub("", markdown).splitlines()
            if (m := _HEADING.match(line))]


def under_deeper_headings(nb) -> list[bool]:
    """For each cell, whether it sits under a heading titled `Deeper: ...`, as Jupyter's outline and collapsible
    headings, GitHub and Colab read a chapter: a heading holds every cell until the next heading of its level or
    above. A Markdown cell that opens with a heading is under that heading."""
    open_, out = [], []  # open_: the (level, is deeper) of the headings that hold the current cell
    for cell in nb["cells"]:
        heads = _headings(_text(cell.get("source", ""))) if cell.get("cell_type") == "markdown" else []
        starts = bool(heads) and bool(_HEADING.match(_text(cell.get("source", "")).lstrip("\n").split("\n", 1)[0]))
        for k, (level, title) in enumerate(heads):
            if k == 0 and not starts:
                out.append(any(deeper for _, deeper in open_))
            while open_ and open_[-1][0] >= level:
                open_.pop()
            open_.append((level, title.startswith("Deeper:")))
            if k == 0 and starts:
                out.append(any(deeper for _, deeper in open_))
        if not heads:
            out.append(any(deeper for _, deeper in open_))
    return out


def layer_problems(nb, name: str) -> list[str]:
    """Cells whose `deeper` tag and headings disagree: the website folds by the tag, Jupyter, GitHub and Colab by the
    headings, so the two layers are the same two layers everywhere only where they agree."""
    problems = []
    for i, (cell, under) in enumerate(zip(nb["cells"], under_deeper_headings(nb))):
        tagged = "deeper" in _tags(cell)
        if tagged != under:
            first = _text(cell.get("source", "")).strip().split("\n", 1)[0][:60]
            problems.append(f"{name} cell {i} (id {cell.get('id')}, {first!r}): " + (
                "tagged deeper but under no 'Deeper:' heading; tag it as its heading says, or give it one"
                if tagged else "under a 'Deeper:' heading but not tagged deeper; tag it deeper, or give it a "
                "main-path heading of the Deeper heading's level or above"))
    return problems


@dataclass
class ChapterProse:
    """The prose of one chapter, split into layers; each layer a list of sentences."""
    name: str
    main: list[str] = field(default_factory=list)
    deeper: list[str] = field(default_factory=list)
    exercise: list[str] = field(default_factory=list)
    main_code_lines: int = 0

    def count(self, layer: str) -> int:
        return sum(len(words(s)) for s in getattr(self, layer))

    @property
    def all(self) -> list[str]:
        return self.main + self.deeper + self.exercise

    @property
    def reading_minutes(self) -> int:
        minutes = self.count("main") / WORDS_A_MINUTE + self.main_code_lines / LINES_A_MINUTE
        return max(5, 5 * math.ceil(minutes / 5))


def chapter_prose(nb, name: str = "") -> ChapterProse:
    """Split a chapter (a notebook or its dict) into main-path, deeper and exercise sentences."""
    result = ChapterProse(name)
    for cell in nb["cells"]:
        source, tags = _text(cell.get("source", "")), _tags(cell)
        layer = "deeper" if "deeper" in tags else "exercise" if "exercise" in tags else "main"
        if cell.get("cell_type") == "code":
            if layer == "main":
                result.main_code_lines += _code_lines(source)
            continue
        if cell.get("cell_type") != "markdown" or _is_references(source):
            continue
        getattr(result, layer).extend(sentences(source))
    return result


def _stats(sents: list[str]) -> tuple[int, float, float]:
    lengths = [len(words(s)) for s in sents]
    n = len(lengths) or 1
    return sum(lengths), sum(lengths) / n, sum(1 for x in lengths if x > BUDGET["long_words"]) / n


def prose_table(chapters: list[ChapterProse]) -> str:
    """A Markdown table of every chapter's layers, sentence lengths and reading time, and the book's totals."""
    rows = ["| chapter | main words | main code lines | deeper words | exercise words | mean words a sentence | "
            "over 40 words | reading time |", "|---|---|---|---|---|---|---|---|"]
    for c in chapters:
        total, mean, long = _stats(c.all)
        rows.append(f"| {c.name} | {c.count('main'):,} | {c.main_code_lines} | {c.count('deeper'):,} | {c.count('exercise'):,} | "
                    f"{mean:.1f} | {long:.1%} | {c.reading_minutes} min |")
    every = [s for c in chapters for s in c.all]
    total, mean, long = _stats(every)
    main = sum(c.count("main") for c in chapters)
    rows.append(f"| **book** | {main:,} | {sum(c.main_code_lines for c in chapters):,} | "
                f"{sum(c.count('deeper') for c in chapters):,} | "
                f"{sum(c.count('exercise') for c in chapters):,} | {mean:.1f} | {long:.1%} | "
                f"{sum(c.reading_minutes for c in chapters)} min |")
    return "\n".join(rows)


def prose_problems(chapters: list[ChapterProse], nbs: list | None = None) -> list[str]:
    """Each budget a chapter or the book is over, and each stale reading time, one line each."""
    b, problems = BUDGET, []
    for i, c in enumerate(chapters):
        if c.count("main") > b["chapter_main_words"]:
            problems.append(f"{c.name}: the main path has {c.count('main'):,} words, over the "
                            f"{b['chapter_main_words']:,} a chapter may have; cut it or move proofs to `deeper` cells")
        problems += _code_problems(c)
        if nbs is not None:
            first = _text(nbs[i]["cells"][0]["source"]) if nbs[i]["cells"] else ""
            m = READING_LINE.search(first)
            if not m:
                problems.append(f"{c.name}: the first cell has no '**Reading time:** about N minutes' line")
            elif int(m.group(1)) != c.reading_minutes:
                problems.append(f"{c.name}: the first cell says about {m.group(1)} minutes, the main path reads in "
                                f"about {c.reading_minutes}; run `python -m transformer_lib.book prose --write`")
    main = sum(c.count("main") for c in chapters)
    if main > b["book_main_words"]:
        problems.append(f"the book's main path has {main:,} words, over its budget of {b['book_main_words']:,}")
    _, mean, long = _stats([s for c in chapters for s in c.all])
    if mean > b["mean_sentence_words"]:
        problems.append(f"the book's sentences average {mean:.1f} words, over {b['mean_sentence_words']}")
    if long > b["long_share"]:
        problems.append(f"{long:.1%} of the book's sentences have over {b['long_words']} words, more than "
                        f"{b['long_share']:.0%}; `prose --long` lists them")
    return problems


def _code_problems(c: ChapterProse) -> list[str]:
    """The chapter's main-path code against its budget, or against the count CODE_LINES_HELD holds it at."""
    number = re.match(r"\d+", c.name)
    held = CODE_LINES_HELD.get(int(number.group())) if number else None
    budget, lines = BUDGET["chapter_main_code_lines"], c.main_code_lines
    if held is not None and lines <= budget:
        return [f"{c.name}: the main path shows {lines} code lines, within the budget of {budget}; take chapter "
                f"{int(number.group())} out of CODE_LINES_HELD in transformer_lib/book/prose.py"]
    if lines > (held or budget):
        return [f"{c.name}: the main path shows {lines} code lines, over " + (
            f"the {held} it is held at (the budget is {budget})" if held else f"the budget of {budget}") +
            "; move checks, progress bars and run machinery to hand-written modules, proofs to `deeper` cells"]
    return []


def write_reading_times(chapters: list[ChapterProse], nbs: list) -> list[int]:
    """Render each chapter's reading time into its first cell's line; the indexes of the chapters changed."""
    changed = []
    for i, (c, nb) in enumerate(zip(chapters, nbs)):
        cell = nb["cells"][0]
        first = _text(cell["source"])
        new = READING_LINE.sub(f"**Reading time:** about {c.reading_minutes} minutes", first, count=1)
        if new != first:
            cell["source"] = new
            changed.append(i)
    return changed
