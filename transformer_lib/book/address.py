# Hand-written tool module (not generated from a notebook).
"""One address for the book: book.yml's `repository` (GitHub owner/name), `branch` and `release` (the tag of the
package's version). Every Colab badge, chapter install cell and link to the book's own files reads them:

    python -m transformer_lib.book address            # point them all at book.yml's address (a fork runs this)
    python -m transformer_lib.book address --check    # exit 1 naming each file that points elsewhere

Colab badges open a chapter from `branch`; install cells install `release`, a tag that must match pyproject.toml's
version. A github.com link counts as the book's own when it is at an address the file's badges or install URLs use,
or names a file under one of the book's folders (notebooks/, docs/, ...); links to other projects are left alone. `book check` runs the same check.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

COLAB = re.compile(r"(https://colab\.research\.google\.com/github/)([\w.-]+/[\w.-]+)/blob/([\w.-]+)/"
                   r"(notebooks/[\w.-]+\.ipynb)")
FILES = re.compile(r"(https://github\.com/)([\w.-]+/[\w.-]+)/(blob|tree)/([\w.-]+)/([\w./-]+)")
PIP = re.compile(r"git\+https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?@([\w.-]+)")


def _ours(book, addresses: set[str], repo: str, path: str) -> bool:
    """A github.com link to the book's own files: at an address its badges use, or to a file under one of its
    folders (a link to another project's README.md is not the book's)."""
    path = path.rstrip("/.")
    return repo in addresses or ("/" in path and (book.root / path).exists())


def documents(book) -> list[Path]:
    """The files whose links are the book's: README.md, the Markdown under docs/ and solutions/, the chapters."""
    paths = [book.root / "README.md"] + sorted((book.root / "docs").rglob("*.md"))
    paths += sorted((book.root / "solutions").rglob("*.md")) + [book.root / c.file for c in book.chapters]
    return [p for p in paths if p.is_file()]


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


def pointed(book, text: str) -> str:
    """`text` with every Colab badge, install URL and link to the book's own files at book.yml's address."""
    if not book.repository:
        return text
    repo = book.repository
    addresses = {repo} | {m[2] for m in COLAB.finditer(text)} | {m[1] for m in PIP.finditer(text)}
    text = COLAB.sub(lambda m: f"{m[1]}{repo}/blob/{book.branch}/{m[4]}", text)
    text = FILES.sub(lambda m: f"{m[1]}{repo}/{m[3]}/{book.branch}/{m[5]}" if _ours(book, addresses, m[2], m[5])
                     else m[0], text)
    return PIP.sub(f"git+https://github.com/{repo}@{book.release or book.branch}", text)


def address_problems(book) -> list[str]:
    """Each file with a badge, install URL or link to the book's files that is not at book.yml's address."""
    problems = release_problems(book)
    for path in documents(book):
        text = path.read_text(encoding="utf-8")
        if pointed(book, text) != text:
            problems.append(f"{path.relative_to(book.root)}: a Colab badge, install URL or link to the book's files "
                            f"is not at book.yml's address ({book.repository}, branch {book.branch}, release "
                            f"{book.release}); run `python -m transformer_lib.book address`")
    return problems


def point_all(book) -> list[Path]:
    """Rewrite every document's badges, install URLs and links to the book's files; the files changed."""
    changed = []
    for path in documents(book):
        text = path.read_text(encoding="utf-8")
        if (new := pointed(book, text)) != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed
