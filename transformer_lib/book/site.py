# Hand-written tool module (not generated from a notebook).
"""The book as a website, built with Jupyter Book from the committed notebooks: nothing runs, nothing is fetched.

    python -m transformer_lib.book html [--out site]

`assemble` writes a Jupyter Book source folder: the README as the home page, the chapters (their code without the
exporter's `#|` lines, each figure with its alt text from notebooks/alt_text.yml and a link to its full size, each
chart as a div that site.js draws with vega and the chart's PNG shown until then), a page per worked solution, the
docs/ pages and the licence; links between them point at pages, links to other files at the repository. Jupyter
Book 1 (Sphinx, MyST-NB, sphinx-book-theme) then builds the HTML with its navigation, search, copy buttons, light
and dark themes and download/Colab/repository buttons. Every script and style comes from the site itself:
MathJax from sphinx-mathjax-offline, vega from vl-convert's bundle. Why Jupyter Book 1 and not 2: 2 fetches its
theme from a web service at build time, so it cannot build offline (docs/making.md).
"""
from __future__ import annotations

import base64
import html
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

__all__ = ["SiteError", "Page", "ALT_TEXT_FILE", "assemble", "build_site", "rewrite_links"]

ALT_TEXT_FILE = "notebooks/alt_text.yml"
MARKER = ".transformer-book-site"  # a folder holding it may be replaced by the next build
STATIC = Path(__file__).parent / "site_static"
VEGALITE_MIMES = ("application/vnd.vegalite.v6.json", "application/vnd.vegalite.v6+json",
                  "application/vnd.vegalite.v5+json")
LICENCE_NOTE = ("Code under the MIT License; prose and figures under CC BY 4.0 "
                "(<a href=\"{url}\">the licence</a>).")


class SiteError(ValueError):
    """Something the site cannot show as promised (a figure without alt text, an image from outside the site, a
    notebook that cannot be read); the message names the file and the cell."""


@dataclass(frozen=True)
class Page:
    source: str  # the page's source in the assembled folder, e.g. notebooks/01_embeddings.ipynb
    html: str  # the built page, relative to the site's root, e.g. notebooks/01_embeddings.html
    title: str
    kind: str  # "home", "chapter", "solution", "doc" or "licence"
    figures: int = 0  # figures the chapter's code drew (plots and charts), each shown with its alt text


# ------------------------------------------------------------------------------------------------ links
_LINK = re.compile(r"(\]\()(<?)([^)\s>]+)(>?)((?:\s+\"[^\"]*\")?\))")
_BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\(([^)]+)\)")
_REMOTE_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?((?:https?:)?//[^)\s>]+)")


def rewrite_links(text: str, where: str, pages: dict[str, str], repo_url: str) -> str:
    """Markdown `text` of the file `where` (a path in the repository) with each relative link pointed at its page in
    the site (`pages` maps a repository path to its page's source path) or, for a file the site does not show, at
    the repository (`repo_url`, ending in /blob/<branch>). Absolute links, anchors and attachments stay."""
    base = posixpath.dirname(where)
    mine = pages.get(where, where)

    def one(m):
        target = m.group(3)
        if re.match(r"^(?:[a-z][a-z0-9+.-]*:|#|//)", target, re.I):
            return m.group(0)
        path, _, anchor = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(base, path)) if path else where
        if resolved.startswith("../"):
            raise SiteError(f"{where}: the link {target} leads outside the repository")
        if resolved in pages:
            new = posixpath.relpath(pages[resolved], posixpath.dirname(mine) or ".")
        else:
            new = f"{repo_url}/{resolved}"
        return f"{m.group(1)}{m.group(2)}{new}{'#' + anchor if anchor else ''}{m.group(4)}{m.group(5)}"

    return _LINK.sub(one, text)


def _markdown(text: str, where: str, pages: dict[str, str], repo_url: str) -> str:
    text = _BADGE.sub(r"[Open in Colab](\1)", text)  # the badge is an image from Colab's site; the link stays
    if m := _REMOTE_IMAGE.search(text):
        raise SiteError(f"{where}: an image from {m.group(1)}; a page loads nothing from outside the site")
    return rewrite_links(text, where, pages, repo_url)


# ------------------------------------------------------------------------------------------------ chapters
def _figure_html(png_b64: str, static: Path, name: str, alt: str, chart: dict | None = None) -> str:
    """An output's figure as a file in _static/figures and the HTML that shows it, linked to its full size; a chart
    also carries its spec, which site.js draws over the picture."""
    (static / "figures").mkdir(parents=True, exist_ok=True)
    (static / "figures" / name).write_bytes(base64.b64decode(png_b64))
    src = f"../_static/figures/{name}"
    img = (f'<a class="tb-figure-link" href="{src}" title="Open the figure at full size">'
           f'<img class="tb-figure" src="{src}" alt="{html.escape(alt, quote=True)}" loading="lazy"></a>')
    if chart is None:
        return f'<div class="tb-figure-box">{img}</div>'
    spec = json.dumps(chart).replace("</", "<\\/")  # no "</script>" inside the script element
    return (f'<div class="tb-chart" role="figure" aria-label="{html.escape(alt, quote=True)}">{img}'
            f'<script type="application/json">{spec}</script></div>')


def _chapter(nb, where: str, alt: dict, static: Path, pages: dict[str, str], repo_url: str):
    """A copy of the chapter as its page shows it; returns (notebook, figures)."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))  # a deep copy
    stem, cells, figures = Path(where).stem, [], 0
    for index, cell in enumerate(nb.cells):
        at = f"{where} cell {index} (id {cell.get('id', '?')})"
        if cell.cell_type == "markdown":
            cell.source = _markdown(cell.source, where, pages, repo_url)
            for name, bundle in (cell.pop("attachments", None) or {}).items():
                mime = next((m for m in ("image/png", "image/svg+xml", "image/jpeg") if m in bundle), None)
                if mime is None or f"attachment:{name}" not in cell.source:
                    continue
                (static / "figures").mkdir(parents=True, exist_ok=True)
                data = bundle[mime]
                (static / "figures" / name).write_bytes(data.encode() if mime == "image/svg+xml" else base64.b64decode(data))
                cell.source = cell.source.replace(f"attachment:{name}", f"../_static/figures/{name}")
            if m := re.search(r"\(attachment:([^)\s]+)", cell.source):
                raise SiteError(f"{at}: the picture {m.group(1)} is not attached to its cell")
        elif cell.cell_type == "code":
            lines = cell.source.splitlines()
            if any(line.startswith(("#| default_exp", "#| hide")) for line in lines):
                continue  # the install cell, or a cell not meant for the page
            cell.source = "\n".join(line for line in lines if not line.startswith("#| ")).strip("\n")
            texts, n = alt.get(cell.get("id"), []), 0
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if "image/png" not in data:
                    continue
                if n >= len(texts) or not str(texts[n]).strip():
                    raise SiteError(f"{at}: figure {n + 1} has no alt text; add it under {where}: "
                                    f"'{cell.get('id')}' in {ALT_TEXT_FILE}")
                chart = next((data[m] for m in VEGALITE_MIMES if m in data), None)
                name = f"{stem}-{cell.get('id')}-{n}.png"
                output["data"] = {"text/html": _figure_html(data["image/png"], static, name, str(texts[n]), chart)}
                output["metadata"] = {}
                n, figures = n + 1, figures + 1
            if n < len(texts):
                raise SiteError(f"{ALT_TEXT_FILE}: {where} '{cell.get('id')}' has {len(texts)} alt texts for "
                                f"{n} figures")
        cells.append(cell)
    unknown = sorted(set(alt) - {cell.get("id") for cell in nb.cells})
    if unknown:
        raise SiteError(f"{ALT_TEXT_FILE}: {where} has no cell {', '.join(map(repr, unknown))}; remove its alt text "
                        "or give it the id of the cell that draws the figure")
    nb.cells = cells
    return nb, figures


def _read_notebook(path: Path, name: str):
    try:
        return nbformat.read(path, as_version=4)
    except FileNotFoundError:
        raise SiteError(f"{name} is listed in book.yml but missing; restore it (git checkout -- {name}) or remove it "
                        "from book.yml; the old site was left as it was") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise SiteError(f"{name} is not a notebook nbformat can read ({type(err).__name__}: {str(err)[:200]}); "
                        "restore it from git; the old site was left as it was") from None


def _alt_texts(book) -> dict:
    path = book.root / ALT_TEXT_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise SiteError(f"{ALT_TEXT_FILE} is missing: it holds the alt text of every figure the chapters draw") from None
    except yaml.YAMLError as err:
        raise SiteError(f"{ALT_TEXT_FILE} is not valid YAML: {err}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SiteError(f"{ALT_TEXT_FILE} must map each chapter's notebook to {{cell id: [alt text, ...]}}")
    unknown = set(data) - {c.file for c in book.chapters}
    if unknown:
        raise SiteError(f"{ALT_TEXT_FILE} names notebooks that are not chapters: {', '.join(sorted(unknown))}")
    return {k: {str(cell): v if isinstance(v, list) else [v] for cell, v in cells.items()} for k, cells in data.items()}


# ------------------------------------------------------------------------------------------------ the source folder
def _page_map(book) -> dict[str, str]:
    """Repository path -> the path of its page in the assembled folder, for every file the site shows."""
    pages = {"README.md": "index.md", "LICENSE": "license.md", "solutions": "solutions/index.md"}
    pages.update({c.file: c.file for c in book.chapters})
    for path in sorted((book.root / "solutions").glob("ch*.py")):
        pages[f"solutions/{path.name}"] = f"solutions/{path.stem}.md"
    for path in sorted((book.root / "docs").glob("*.md")):
        pages[f"docs/{path.name}"] = f"docs/{path.name}"
    return pages


def _title(markdown: str, default: str) -> str:
    m = re.search(r"^#\s+(.+?)\s*$", markdown, re.M)
    return m.group(1) if m else default


def assemble(book, src: Path) -> list[Page]:
    """Write the Jupyter Book source folder `src` (_config.yml, _toc.yml, the pages, _static/); returns the pages in
    reading order."""
    src = Path(src)
    repo = f"https://github.com/{book.repository}"
    repo_url = f"{repo}/blob/{book.branch}"
    pages_of = _page_map(book)
    alt = _alt_texts(book)
    static = src / "_static"
    static.mkdir(parents=True)
    for name in ("site.css", "site.js", "scorer.js"):
        shutil.copy(STATIC / name, static / name)
    pages: list[Page] = []

    def write(rel: str, text: str, kind: str, title: str) -> None:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
        pages.append(Page(rel, str(Path(rel).with_suffix(".html")), title, kind))

    readme = (book.root / "README.md").read_text(encoding="utf-8")
    write("index.md", _markdown(readme, "README.md", pages_of, repo_url), "home", book.title)

    for number, chapter in enumerate(book.chapters, 1):
        nb, figures = _chapter(_read_notebook(book.root / chapter.file, chapter.file), chapter.file,
                               alt.get(chapter.file, {}), static, pages_of, repo_url)
        (src / chapter.file).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, src / chapter.file)
        pages.append(Page(chapter.file, str(Path(chapter.file).with_suffix(".html")), f"{number}. {chapter.title}",
                          "chapter", figures))

    solution_rows = []
    for number, chapter in enumerate(book.chapters, 1):
        solution = next((p for p in pages_of if p.startswith(f"solutions/ch{number:02d}_")), None)
        if solution is None:
            continue
        (src / "solutions").mkdir(exist_ok=True)
        shutil.copy(book.root / solution, src / solution)
        name = Path(solution).name
        title = f"Solutions to chapter {number}: {chapter.title}"
        chapter_link = posixpath.relpath(chapter.file, "solutions")
        write(pages_of[solution], f"# {title}\n\nWorked solutions to the exercises at the end of "
              f"[chapter {number}]({chapter_link}), as in [`{solution}`]({repo_url}/{solution}); "
              f"each passes its `check(...)` (tests/test_exercises.py).\n\n"
              f"```{{literalinclude}} {name}\n:language: python\n```\n", "solution", title)
        solution_rows.append(f"- [{title}]({Path(pages_of[solution]).name})")
    write("solutions/index.md", "# Worked solutions\n\nEvery chapter ends with exercises you check with one line; "
          "these pages hold a worked solution to each.\n\n" + "\n".join(solution_rows) + "\n", "solution",
          "Worked solutions")

    for rel in sorted(p for p in pages_of if p.startswith("docs/")):
        text = (book.root / rel).read_text(encoding="utf-8")
        write(rel, _markdown(text, rel, pages_of, repo_url), "doc", _title(text, Path(rel).stem))

    licence = (book.root / "LICENSE").read_text(encoding="utf-8")
    write("license.md", "# Licence\n\n```text\n" + licence.strip("\n") + "\n```\n", "licence", "Licence")

    _write_config(book, src, pages, repo)
    return pages


def _write_config(book, src: Path, pages: list[Page], repo: str) -> None:
    def entries(kind):
        return [{"file": str(Path(p.source).with_suffix(""))} for p in pages if p.kind == kind]

    solutions = [e for e in entries("solution") if e["file"] != "solutions/index"]
    parts = [{"caption": "Chapters", "chapters": entries("chapter")},
             {"caption": "Exercises", "chapters": [{"file": "solutions/index", "sections": solutions}
                                                   if solutions else {"file": "solutions/index"}]},
             {"caption": "Reference", "chapters": entries("doc") + entries("licence")}]
    toc = {"format": "jb-book", "root": "index", "parts": [p for p in parts if p["chapters"]]}
    (src / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False), encoding="utf-8")
    footer = LICENCE_NOTE.format(url=f"{repo}/blob/{book.branch}/LICENSE")
    config = {
        "title": book.title,
        "author": "the authors of " + book.title,
        "copyright": "2026",
        "only_build_toc_files": True,
        "exclude_patterns": ["_build", "**.ipynb_checkpoints"],
        "execute": {"execute_notebooks": "off"},
        "repository": {"url": repo, "branch": book.branch, "path_to_book": ""},
        "launch_buttons": {"colab_url": "https://colab.research.google.com", "notebook_interface": "classic",
                           "thebe": False, "binderhub_url": ""},
        "html": {"use_repository_button": True, "use_issues_button": False, "use_edit_page_button": False,
                 "extra_footer": f"<p>{footer}</p>", "home_page_in_navbar": True, "use_multitoc_numbering": False,
                 "favicon": ""},
        "parse": {"myst_enable_extensions": ["colon_fence", "dollarmath", "amsmath", "substitution"],
},
        "sphinx": {
            "extra_extensions": ["sphinx-mathjax-offline"],
            "config": {
                "html_static_path": ["_static"],
                "html_css_files": ["site.css"],
                "html_js_files": ["vega.js", "site.js"],
                "html_search_scorer": str((src / "_static" / "scorer.js").resolve()),
                "html_show_sourcelink": False,
                "html_last_updated_fmt": None,
                "nb_merge_streams": True,
                "nb_render_markdown_format": "myst",  # Markdown outputs (the chapters' tables) as MyST, tables and all
                "myst_heading_anchors": 4,
                "suppress_warnings": ["myst.header"],
            },
        },
    }
    (src / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    import vl_convert

    # in a function of its own: the bundle's top-level names (`_` among them) would collide with Sphinx's scripts
    bundle = vl_convert.javascript_bundle()
    (src / "_static" / "vega.js").write_text("(function () {\n" + bundle + "\n})();\n", encoding="utf-8")


# ------------------------------------------------------------------------------------------------ the build
# appended to the conf.py Jupyter Book writes: no Thebe (live code from a CDN; its script is also written twice) and
# no comment widgets, the theme's mode chosen by the reader's system until they pick one
CONF_ADDITIONS = """
extensions = [e for e in extensions if e not in ("sphinx_thebe", "sphinx_comments")]
html_context = {**globals().get("html_context", {}), "default_mode": "auto"}
html_theme_options.update(use_download_button=True, show_toc_level=2, navigation_with_keys=False)
html_sidebars = {"**": ["navbar-logo.html", "sbt-sidebar-nav.html"]}  # one search box: the header's
"""


def _run(command: list[str], env: dict, failure: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        raise SiteError(f"{failure}:\n" + "\n".join(lines[-40:]))


def build_site(book, out: Path, log=print) -> list[Page]:
    """Build the site into `out` (an earlier site there is replaced whole once the new one is ready; a failed build
    leaves it as it was). Runs no notebook and fetches nothing; Sphinx's warnings are errors, so a broken link or
    reference fails the build, naming it."""
    from transformer_lib.files import write_folder_atomically

    start, out = time.perf_counter(), Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists())):
        raise SiteError(f"{out} exists and is not a site this command built; choose an empty or new folder")
    with tempfile.TemporaryDirectory(prefix="transformer-book-site.") as tmp:
        src = Path(tmp) / "book"
        pages = assemble(book, src)
        figures = sum(p.figures for p in pages)
        env = {**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"}
        _run([sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "config", "sphinx", str(src)],
             env, "Jupyter Book could not write the Sphinx configuration")
        with open(src / "conf.py", "a", encoding="utf-8") as conf:
            conf.write(CONF_ADDITIONS)
        built = src / "_build" / "html"
        _run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-j", "1", str(src),
              str(built)], env, "Sphinx could not build the site")

        def write(folder: Path) -> None:
            shutil.copytree(built, folder, dirs_exist_ok=True)
            for junk in (".buildinfo", "_sources/.buildinfo"):
                (folder / junk).unlink(missing_ok=True)
            for chapter in book.chapters:  # the download button gives the chapter as committed, outputs and all
                shutil.copy(book.root / chapter.file, folder / "_sources" / chapter.file)
            (folder / MARKER).write_text("written by python -m transformer_lib.book html; rebuilt (replaced) by it\n")

        out.parent.mkdir(parents=True, exist_ok=True)
        write_folder_atomically(out, write)
    log(f"wrote {len(pages)} pages to {out} in {time.perf_counter() - start:.0f}s ({figures} figures from the "
        "chapters' code)")
    return pages
