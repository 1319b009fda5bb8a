# Hand-written tool module (not generated from a notebook).
"""The book's command line: python -m transformer_lib.book COMMAND (see transformer_lib.book)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer_lib.book import BookError, check, export, load_book, select_chapters
from transformer_lib.book.corpus import offline_problems, record_offline
from transformer_lib.book.references import REFERENCES_FILE, stale_references
from transformer_lib.runtime import BUDGET_ENV, BUDGETS

__all__ = ["main"]


# what `book html` needs, by distribution name (pyproject.toml's site extra installs them)
SITE_PACKAGES = ("jupyter-book", "sphinx", "myst-nb", "myst-parser", "sphinx-book-theme", "pydata-sphinx-theme",
                 "sphinx-mathjax-offline", "vl-convert-python", "fonttools", "brotli", "nh3")


def missing_site_packages() -> list[str]:
    """The distributions of the site extra that are not installed here."""
    from importlib import metadata

    missing = []
    for name in SITE_PACKAGES:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def _positive_seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be at least 1 second, got {value}")
    return value


def _prose(book, args) -> int:
    import nbformat

    from transformer_lib.book.prose import BUDGET, chapter_prose, prose_problems, prose_table, words, write_reading_times
    from transformer_lib.book.references import _write_atomic

    chosen = select_chapters(book, args.chapters) if args.chapters else list(book.chapters)
    nbs = [nbformat.read(book.root / c.file, as_version=4) for c in chosen]
    chapters = [chapter_prose(nb, f"{i + 1 if not args.chapters else c.file.rsplit('/', 1)[-1][:2].lstrip('0')}. {c.title}")
                for i, (c, nb) in enumerate(zip(chosen, nbs))]
    if args.write:
        for i in write_reading_times(chapters, nbs):
            _write_atomic(book.root / chosen[i].file, nbformat.writes(nbs[i]) + "\n")
            print(f"wrote the reading time of {chosen[i].file}")
    print(prose_table(chapters))
    if args.long:
        for c in chapters:
            for layer in ("main", "deeper", "exercise"):
                for s in getattr(c, layer):
                    if len(words(s)) > BUDGET["long_words"]:
                        print(f"\n{c.name} ({layer}, {len(words(s))} words): {s}")
    if args.check:
        problems = prose_problems(chapters, nbs)
        if args.chapters:  # the book's budgets need every chapter; a selection checks its chapters alone
            problems = [p for p in problems if not p.startswith(("the book", f"{0:.0%}"))
                        and "of the book's sentences" not in p]
        if problems:
            print("\n".join(problems), file=sys.stderr)
            return 1
        print("prose: every chapter within its budget, every reading time current")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_lib.book", description="The book's exporter and runner, driven by book.yml.")
    parser.add_argument("--root", type=Path, default=None, help="the book's folder (default: nearest with book.yml)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("export", help="write the package modules from the notebooks")
    sub.add_parser("check", help="exit 1 when the package and the notebooks disagree")
    readme_p = sub.add_parser("readme", help="rewrite the generated blocks of README.md and docs/ from the recorded results")
    readme_p.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block is stale")
    run_p = sub.add_parser("run", help="execute chapters in order and save them with outputs")
    run_p.add_argument("--budget", choices=[*BUDGETS, "auto"], default=None,
                       help=f"run budget (default: ${BUDGET_ENV}, else book.yml default_budget)")
    run_p.add_argument("--timeout", type=_positive_seconds, default=1800, help="seconds a cell may run (default 1800)")
    run_p.add_argument("--record", action="store_true",
                       help="write each chapter's time to docs/runs.json (the run-time table of docs/running.md)")
    run_p.add_argument("chapters", nargs="*", help="chapter numbers, file stems or module names (default: all)")
    fig_p = sub.add_parser("figures", help="redraw the diagrams into docs/figures/ and into their chapters")
    fig_p.add_argument("chapters", nargs="*", help="only these chapters' notebooks (default: all)")
    sub.add_parser("references", help="rewrite each chapter's References cell and docs/references.md from "
                   "docs/references.yml and the citations in the chapters")
    offline_p = sub.add_parser("offline", help="record what the cells tagged corpus-dependent show on the offline "
                               "corpus at the smoke budget (notebooks/offline_outputs.json, which the test command "
                               "compares them with where Multi30k cannot be had)")
    offline_p.add_argument("chapters", nargs="*", help="only these chapters (default: every chapter with such a cell)")
    offline_p.add_argument("--timeout", type=_positive_seconds, default=600, help="seconds a cell may run (default 600)")
    prose_p = sub.add_parser("prose", help="count each chapter's words and sentences by layer (main path, deeper, "
                             "exercises) and check them against the reading budgets")
    prose_p.add_argument("--write", action="store_true", help="render each chapter's reading time into its first cell")
    prose_p.add_argument("--check", action="store_true", help="exit 1 when a budget is exceeded or a reading time is stale")
    prose_p.add_argument("--long", action="store_true", help="list every sentence over 40 words, with its chapter")
    prose_p.add_argument("chapters", nargs="*", help="only these chapters (default: all; budgets of the book need all)")
    address_p = sub.add_parser("address", help="point every Colab badge, install cell and link to the book's files at "
                               "book.yml's repository, branch and release (a fork runs this after editing book.yml)")
    address_p.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each file that points "
                           "elsewhere")
    html_p = sub.add_parser("html", help="build the book as a static website from the committed notebooks")
    html_p.add_argument("--out", type=Path, default=None, help="the site's folder (default: site/ in the book)")
    args = parser.parse_args(argv)
    try:
        book = load_book(args.root)
        if args.command == "export":
            written = export(book)
            for path in written:
                print(f"wrote {path.relative_to(book.root)}")
            print(f"{len(book.chapters)} chapters exported, {len(written)} modules changed")
        elif args.command == "check":
            problems = check(book)
            if (book.root / REFERENCES_FILE).is_file():
                problems += stale_references(book)
            problems += offline_problems(book)
            if problems:
                print("\n".join(problems), file=sys.stderr)
                print("The book is out of date: run `python -m transformer_lib.book export` for the package, "
                      "`... book figures` for the pictures, `... book references` for the references, `... book offline` "
                      "for the outputs on the offline corpus, `... book address` for the links, as each line above "
                      "says.", file=sys.stderr)
                return 1
            print(f"book check: {len(book.chapters)} chapters and their modules agree")
        elif args.command == "readme":
            from transformer_lib.claims import readme_problems, write_readme

            if args.check:
                problems = readme_problems(book)
                if problems:
                    print("\n".join(problems), file=sys.stderr)
                    return 1
                print("README.md and docs/: generated blocks agree with the recorded results")
            else:
                print("README.md and docs/: generated blocks " + ("rewritten" if write_readme(book) else "already current"))
        elif args.command == "figures":
            from transformer_lib.diagrams import sync_figures

            chapters = select_chapters(book, args.chapters) if args.chapters else None
            changed = sync_figures(book, chapters=chapters)
            print(f"figures: {len(changed)} files changed")
        elif args.command == "references":
            from transformer_lib.book.references import write_references

            changed = write_references(book)
            print("references: " + (", ".join(changed) + " rewritten" if changed else "already current"))
        elif args.command == "offline":
            files = [c.file for c in select_chapters(book, args.chapters)] if args.chapters else None
            path = record_offline(book, files, args.timeout)
            print(f"offline outputs: {path.relative_to(book.root)} written")
        elif args.command == "address":
            from transformer_lib.book.address import address_problems, point_all, release_problems

            refused = []
            if not args.check:
                changed, refused = point_all(book)
                for path in changed:
                    print(f"pointed {path.relative_to(book.root)} at {book.repository}")
            elif not book.repository:
                raise BookError("book.yml has no repository: set `repository: owner/name` (GitHub's)")
            problems = address_problems(book) if args.check else release_problems(book) + refused
            if problems:
                print("\n".join(problems), file=sys.stderr)
                return 1
            print(f"address: every badge, install cell and link to the book's files is at {book.repository} "
                  f"(branch {book.branch}, release {book.release or book.branch})")
        elif args.command == "prose":
            return _prose(book, args)
        elif args.command == "html":
            missing = missing_site_packages()
            if missing:  # one line naming what to install, not a ModuleNotFoundError from inside Sphinx
                print(f"error: the website needs the site extra, which is not installed here (no {', '.join(missing)}):"
                      " pip install -e '.[site]', or pip install -r requirements.txt", file=sys.stderr)
                return 1
            from transformer_lib.book.site import build_site

            out = args.out if args.out is not None else book.root / "site"
            try:
                build_site(book, out)
            except OSError as err:  # a folder that cannot be made or written: one line, not a traceback
                print(f"error: cannot write the site to {out}: {err.strerror or err} ({err.filename or out})",
                      file=sys.stderr)
                return 1
            print(f"open {out / 'index.html'}, or serve it: python -m http.server -d {out}")
        else:
            from transformer_lib.book.runner import run

            run(book, select_chapters(book, args.chapters), args.budget, args.timeout, record=args.record)
    except (BookError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0
