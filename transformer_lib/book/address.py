# Hand-written tool module (not generated from a notebook).
"""One address for the book: book.yml's `repository` (GitHub owner/name), `branch` and `release` (the tag of the
package's version). Every Colab badge, chapter install cell and link to the book's own files reads them:

    python -m transformer_lib.book address            # point them all at book.yml's address (a fork runs this)
    python -m transformer_lib.book address --check    # exit 1 naming each file that points elsewhere

Colab badges open a chapter from `branch`; install cells install `release`, a tag that must match pyproject.toml's
version. The book's addresses are book.yml's and those its chapters use for themselves: each chapter's Colab badge
of that chapter and the pip URL of its install cell (a fork's old address). Only a badge, install URL or github.com
link at one of those is rewritten; another project's, in any file, is left alone. Only the book's own files are
written: a document that is a symbolic link, or resolves outside the book, is named and left as it is. `book check`
runs the same check.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

COLAB = re.compile(r"(https://colab\.research\.google\.com/github/)([\w.-]+/[\w.-]+)/blob/([\w.-]+)/"
                   r"(notebooks/[\w.-]+\.ipynb)")
FILES = re.compile(r"(https://github\.com/)([\w.-]+/[\w.-]+)/(blob|tree)/([\w.-]+)/([\w./-]+)")
PIP = re.compile(r"git\+https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?@([\w.-]+)")


def documents(book) -> list[Path]:
    """The files whose links are the book's: README.md, the Markdown under docs/ and solutions/, the chapters."""
    paths = [book.root / "README.md"] + sorted((book.root / "docs").rglob("*.md"))
    paths += sorted((book.root / "solutions").rglob("*.md")) + [book.root / c.file for c in book.chapters]
    return [p for p in paths if p.is_file()]


def _not_the_books(book, path: Path) -> str | None:
    """Why the address command must not write `path`: a symbolic link, or a file outside the book; else None."""
    rel = path.relative_to(book.root)
    if path.is_symlink():
        return f"{rel}: a symbolic link (to {path.resolve()}); the address command writes only the book's own files"
    if not path.resolve().is_relative_to(book.root.resolve()):
        return f"{rel}: resolves outside the book ({path.resolve()}); the address command writes only its own files"
    return None


def _read(book, path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:  # a ValueError: the command prints it as one line
        raise ValueError(f"{path.relative_to(book.root)}: not UTF-8 ({err.reason} at byte {err.start}); the address "
                        "command reads the book's documents as UTF-8") from None


def own_addresses(book) -> set[str]:
    """book.yml's repository, and each repository a chapter uses for itself: its Colab badge of itself and the pip
    URL of its install cell (the first code cell). Another project named anywhere is not among them."""
    import nbformat

    found = {book.repository} if book.repository else set()
    for chapter in book.chapters:
        path = book.root / chapter.file
        if not path.is_file():
            continue
        text = _read(book, path)
        found |= {m[2] for m in COLAB.finditer(text) if m[4] == chapter.file}
        code = [c.source for c in nbformat.reads(text, as_version=4).cells if c.cell_type == "code"]
        if code and code[0].startswith(f"#| default_exp {chapter.module}\n"):
            found |= {m[1] for m in PIP.finditer(code[0])}
    return found


def release_problems(book) -> list[str]:
    """book.yml's release against pyproject.toml's version: the install cells install that tag."""
    if book.release is None:
        return []
    project = book.root / "pyproject.toml"
    if not project.is_file():
        return []
    version = tomllib.loads(project.read_text(encoding="utf-8")).get("project", {}).get("version")
    if version is not None and book.release != f"v{version}":
        return [f"book.yml: release {book.release!r} is not the tag of pyproject.toml's version {version!r} "
                f"(expected 'v{version}')"]
    return []


def pointed(book, text: str, addresses: set[str] | None = None) -> str:
    """`text` with every Colab badge, install URL and github.com link at one of the book's `addresses` (default:
    own_addresses) moved to book.yml's; those of other projects as they were."""
    if not book.repository:
        return text
    repo = book.repository
    addresses = own_addresses(book) if addresses is None else addresses
    text = COLAB.sub(lambda m: f"{m[1]}{repo}/blob/{book.branch}/{m[4]}" if m[2] in addresses else m[0], text)
    text = FILES.sub(lambda m: f"{m[1]}{repo}/{m[3]}/{book.branch}/{m[5]}" if m[2] in addresses else m[0], text)
    return PIP.sub(lambda m: f"git+https://github.com/{repo}@{book.release or book.branch}" if m[1] in addresses
                   else m[0], text)


def address_problems(book) -> list[str]:
    """Each file with a badge, install URL or link to the book's files that is not at book.yml's address, and each
    document the address command would not write."""
    problems = release_problems(book)
    addresses = own_addresses(book)
    for path in documents(book):
        text = _read(book, path)
        if pointed(book, text, addresses) != text:
            why = _not_the_books(book, path)
            problems.append(why or f"{path.relative_to(book.root)}: a Colab badge, install URL or link to the book's "
                            f"files is not at book.yml's address ({book.repository}, branch {book.branch}, release "
                            f"{book.release}); run `python -m transformer_lib.book address`")
    return problems


def point_all(book) -> tuple[list[Path], list[str]]:
    """Rewrite every document's badges, install URLs and links to the book's files (each file whole, atomically):
    the files changed, and why each document that needed it was not written (a link, a file outside the book)."""
    from transformer_lib.files import write_atomically

    if not book.repository:
        raise ValueError("book.yml has no repository: set `repository: owner/name` (GitHub's), then run the command "
                        "again")
    addresses, changed, refused = own_addresses(book), [], []
    for path in documents(book):
        text = _read(book, path)
        if (new := pointed(book, text, addresses)) != text:
            if why := _not_the_books(book, path):
                refused.append(why)
                continue
            write_atomically(path, lambda tmp, new=new: Path(tmp).write_text(new, encoding="utf-8"))
            changed.append(path)
    return changed, refused
