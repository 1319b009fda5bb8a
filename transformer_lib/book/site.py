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

This module assembles and builds; site_safety.py holds the guards (every write kept inside the site, every read
inside the book, raw HTML, SVG and CSS scanned for outside loads), site_markdown.py the Markdown (links rewritten,
then checked as MyST reads it) and site_chapters.py the chapters (cells, outputs and figures as the page shows them).
"""
from __future__ import annotations

import contextlib
import functools
import html
import io
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

# VEGALITE_MIMES and the link patterns are not used here: they stay importable from site, as before the split
from transformer_lib.book.site_chapters import (ALT_TEXT_FILE, VEGALITE_MIMES, _alt_texts, _chapter, _diagram_widths,
                                                _read_notebook)
from transformer_lib.book.site_markdown import (_BADGE, _DEFINITION, _HTML_HREF, _LINK, MYST_EXTENSIONS, _markdown,
                                                _Place, rewrite_links)
from transformer_lib.book.site_policy import apply_policy, refused
from transformer_lib.book.site_safety import SiteError, _inside, _source, _write, svg_loads
from transformer_lib.book.site_weight import subset_icon_fonts, theme_templates

__all__ = ["SiteError", "Page", "ALT_TEXT_FILE", "assemble", "build_site", "rewrite_links", "refused", "svg_loads"]

MARKER = ".transformer-book-site"  # a folder holding it may be replaced by the next build
STATIC = Path(__file__).parent / "site_static"
LICENCE_NOTE = ("Code under the MIT License; prose and figures under CC BY 4.0 "
                "(<a href=\"{url}\">the licence</a>).")


@dataclass(frozen=True)
class Page:
    source: str  # the page's source in the assembled folder, e.g. notebooks/01_embeddings.ipynb
    html: str  # the built page, relative to the site's root, e.g. notebooks/01_embeddings.html
    title: str
    kind: str  # "home", "chapter", "solution", "doc" or "licence"
    figures: int = 0  # figures the chapter's code drew (plots and charts), each shown with its alt text


# ------------------------------------------------------------------------------------------------ the source folder
def _page_map(book) -> dict[str, str]:
    """Repository path -> the path of its page in the assembled folder, for every file the site shows."""
    pages = {"README.md": "index.md", "LICENSE": "license.md", "solutions": "solutions/index.md"}
    for chapter in book.chapters:
        if any(part.startswith(("_", ".")) for part in chapter.file.split("/")):
            raise SiteError(f"book.yml: the chapter {chapter.file} is in a folder whose name starts with _ or ., "
                            "which the site keeps for itself; move it")
        pages[chapter.file] = chapter.file
    for path in sorted((book.root / "solutions").glob("ch*.py")):
        pages[f"solutions/{path.name}"] = f"solutions/{path.stem}.md"
    for path in sorted((book.root / "docs").glob("*.md")):
        pages[f"docs/{path.name}"] = f"docs/{path.name}"
    return pages


def _docs_in_reading_order(book, pages_of) -> list[str]:
    """The docs/ pages in the order README's list of them gives, then any it does not list, by name."""
    docs = sorted(p for p in pages_of if p.startswith("docs/"))
    listed = re.findall(r"^- \[`?(docs/[\w.-]+\.md)`?\]", _source(book, "README.md").read_text(encoding="utf-8"), re.M)
    order = {rel: i for i, rel in enumerate(dict.fromkeys(listed))}
    return sorted(docs, key=lambda rel: (order.get(rel, len(order)), rel))


def _title(markdown: str, default: str) -> str:
    m = re.search(r"^#\s+(.+?)\s*$", markdown, re.M)
    return m.group(1) if m else default


def _repository(book) -> tuple[str, str]:
    """The repository's address and the address of its files (…/blob/<branch>), from book.yml."""
    from transformer_lib.book import BookError

    if not book.repository:
        raise BookError(f"{book.root / 'book.yml'}: missing key 'repository' (GitHub owner/name), which the website "
                        "links to; add it")
    repo = f"https://github.com/{book.repository}"
    return repo, f"{repo}/blob/{book.branch}"


def _headings(book) -> dict[str, list[str]]:
    """Each chapter's section headings for the search ranking (scorer.js): lowercased, without their number or a
    "Deeper:" or "Exercise N.N:" label, keyed by the page's name."""
    label = re.compile(r"^(?:[\d.]+\s+|deeper:\s*|exercise\s+[\d.]+:\s*)+")
    found = {}
    for chapter in book.chapters:
        nb = _read_notebook(book, chapter.file)
        lines = [line for c in nb.cells if c.cell_type == "markdown" for line in c.source.splitlines()]
        found[str(Path(chapter.file).with_suffix(""))] = [
            label.sub("", re.sub(r"[`*_]", "", line.lstrip("#")).strip().lower()) for line in lines
            if re.match(r"#{2,6} ", line)]
    return found


def assemble(book, src: Path) -> list[Page]:
    """Write the Jupyter Book source folder `src` (_config.yml, _toc.yml, the pages, _static/), a new or empty folder
    outside the book; returns the pages in reading order. Every file goes through _write, which keeps it inside
    `src`; the book's files are only read."""
    src = Path(src)
    real_src, real_root = os.path.realpath(src), os.path.realpath(book.root)
    if os.path.commonpath([real_src, real_root]) == real_src:
        raise SiteError(f"{src} holds the book ({book.root}); assemble the site in a folder of its own")
    if src.exists() and (not src.is_dir() or any(src.iterdir())):
        raise SiteError(f"{src} is not a new or empty folder")
    repo, repo_url = _repository(book)
    pages_of = _page_map(book)
    site_pages = set(pages_of.values())
    alt = _alt_texts(book)
    src.mkdir(parents=True, exist_ok=True)
    _write(src, "_static/site.css", (STATIC / "site.css").read_text(encoding="utf-8") + _diagram_widths(book))
    _write(src, "_static/site.js", (STATIC / "site.js").read_bytes())
    _write(src, "_static/favicon.svg", (STATIC / "favicon.svg").read_bytes())
    _write(src, "_static/scorer.js", (STATIC / "scorer.js").read_text(encoding="utf-8").replace(
        "var HEADINGS = {};", f"var HEADINGS = {json.dumps(_headings(book), sort_keys=True)};", 1))
    _write(src, "_templates/search.html", (STATIC / "search.html").read_bytes())
    _translator(src)
    for name, text in theme_templates().items():  # a lighter page: no fontawesome.js, search tools on search.html only
        _write(src, f"_templates/{name}", text)
    pages: list[Page] = []
    copied: dict[str, str] = {}

    def place(where: str) -> _Place:
        return _Place(where, pages_of.get(where, where), pages_of, repo_url, book, src, copied)

    def write(rel: str, text: str, kind: str, title: str) -> None:
        _write(src, rel, text)
        pages.append(Page(rel, str(Path(rel).with_suffix(".html")), title, kind))

    def page(rel: str) -> str:
        return _markdown(_source(book, rel).read_text(encoding="utf-8"), place(rel), rel, site_pages)

    write("index.md", page("README.md"), "home", book.title)

    for number, chapter in enumerate(book.chapters, 1):
        nb, figures = _chapter(_read_notebook(book, chapter.file), chapter.file, alt.get(chapter.file, {}), src,
                               place(chapter.file), site_pages)
        _write(src, chapter.file, nbformat.writes(nb))
        pages.append(Page(chapter.file, str(Path(chapter.file).with_suffix(".html")), f"{number}. {chapter.title}",
                          "chapter", figures))

    solution_rows = []
    for number, chapter in enumerate(book.chapters, 1):
        solution = next((p for p in pages_of if p.startswith(f"solutions/ch{number:02d}_")), None)
        if solution is None:
            continue
        code = _source(book, solution).read_text(encoding="utf-8").rstrip("\n")
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", code)), default=0))
        title = f"Solutions to chapter {number}: {chapter.title}"
        chapter_link = posixpath.relpath(chapter.file, "solutions")
        # the code itself in the page, so that its download button gives the code, not an include directive
        write(pages_of[solution], f"# {title}\n\nWorked solutions to the exercises at the end of "
              f"[chapter {number}]({chapter_link}), as in [`{solution}`]({repo_url}/{solution}); "
              f"each passes its `check(...)` (tests/test_exercises.py).\n\n"
              f"{fence}python\n{code}\n{fence}\n", "solution", title)
        solution_rows.append(f"- [{title}]({Path(pages_of[solution]).name})")
    write("solutions/index.md", "# Worked solutions\n\nEvery chapter ends with exercises you check with one line; "
          "these pages hold a worked solution to each.\n\n" + "\n".join(solution_rows) + "\n", "solution",
          "Worked solutions")

    for rel in _docs_in_reading_order(book, pages_of):
        text = page(rel)
        write(rel, text, "doc", _title(text, Path(rel).stem))

    licence = _source(book, "LICENSE").read_text(encoding="utf-8").strip("\n")
    fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", licence)), default=0))
    write("license.md", f"# Licence\n\n{fence}text\n{licence}\n{fence}\n", "licence", "Licence")

    _write_config(book, src, pages, repo)
    return pages


def _translator(src: Path) -> None:
    """The live translator's files (docs/translator.md's page loads them): its scripts, and the shipped model's
    tokenizer, vocabularies and weights as transformer_lib.book.live exports them, fetched when a reader asks."""
    for name in ("tokenizer.js", "model.js", "page.js"):
        _write(src, f"_static/translator/{name}", (STATIC / "translator" / name).read_bytes())
    assets, weights = _shipped_model_files()
    _write(src, "_static/translator/assets.json", assets)
    _write(src, "_static/translator/weights.bin", weights)


@functools.cache
def _shipped_model_files() -> tuple[str, bytes]:
    """The shipped model as the page reads it (assets.json, weights.bin): exported once a process, for every build."""
    from transformer_lib.book.live import model_weights, tokenizer_assets
    from transformer_lib.translation import UNFAMILIAR_BELOW, pretrained

    model = pretrained().model
    table, weights, config = model_weights(model)
    assets = {**tokenizer_assets(model), "table": table, "config": {**config, "unfamiliar_below": UNFAMILIAR_BELOW}}
    return json.dumps(assets, ensure_ascii=False, separators=(",", ":")), weights


def _write_config(book, src: Path, pages: list[Page], repo: str) -> None:
    def entries(kind):
        return [{"file": str(Path(p.source).with_suffix(""))} for p in pages if p.kind == kind]

    solutions = [e for e in entries("solution") if e["file"] != "solutions/index"]
    parts = [{"caption": "Chapters", "chapters": entries("chapter")},
             {"caption": "Exercises", "chapters": [{"file": "solutions/index", "sections": solutions}
                                                   if solutions else {"file": "solutions/index"}]},
             {"caption": "Reference", "chapters": entries("doc") + entries("licence")}]
    toc = {"format": "jb-book", "root": "index", "parts": [p for p in parts if p["chapters"]]}
    _write(src, "_toc.yml", yaml.safe_dump(toc, sort_keys=False))
    footer = LICENCE_NOTE.format(url=html.escape(f"{repo}/blob/{book.branch}/LICENSE", quote=True))
    config = {
        # the title as it is: Sphinx escapes it in <title>; the theme's sidebar and the author line print theirs
        # unescaped, so those get it escaped (CONF_ADDITIONS, and "author" here)
        "title": book.title,
        "author": html.escape("the authors of " + book.title),
        "copyright": "2026",
        "only_build_toc_files": True,
        "exclude_patterns": ["_build", "**.ipynb_checkpoints"],
        "execute": {"execute_notebooks": "off"},
        "repository": {"url": repo, "branch": book.branch, "path_to_book": ""},
        "launch_buttons": {"colab_url": "https://colab.research.google.com", "notebook_interface": "classic",
                           "thebe": False, "binderhub_url": ""},
        "html": {"use_repository_button": True, "use_issues_button": False, "use_edit_page_button": False,
                 "extra_footer": f"<p>{footer}</p>", "home_page_in_navbar": True, "use_multitoc_numbering": False,
                 "favicon": "_static/favicon.svg"},  # ours: without one, every page asks for a missing /favicon.ico
        "parse": {"myst_enable_extensions": list(MYST_EXTENSIONS)},
        "sphinx": {
            "extra_extensions": ["sphinx-mathjax-offline"],
            "config": {
                "html_static_path": ["_static"],
                "templates_path": ["_templates"],  # search.html: the title escaped
                "html_css_files": ["site.css"],
                "html_js_files": ["site.js"],  # site.js loads _static/vega.js on a page with a chart
                "html_search_scorer": str((src / "_static" / "scorer.js").resolve()),
                "html_show_sourcelink": False,
                "html_last_updated_fmt": None,
                "nb_merge_streams": True,
                "nb_render_markdown_format": "myst",  # Markdown outputs (the chapters' tables) as MyST, tables and all
                "nb_ipywidgets_js": {},  # never the widgets' scripts from a CDN
                "myst_heading_anchors": 4,
                "suppress_warnings": ["myst.header"],
            },
        },
    }
    _write(src, "_config.yml", yaml.safe_dump(config, sort_keys=False))
    # in a function of its own: the bundle's top-level names (`_` among them) would collide with Sphinx's scripts
    _write(src, "_static/vega.js", "(function () {\n" + _vega_bundle() + "\n})();\n")


@functools.cache
def _vega_bundle() -> str:
    """vl-convert's vega, vega-lite and vega-embed as one script (seconds to make; the same for every build)."""
    import vl_convert

    return vl_convert.javascript_bundle()


def _sphinx_config(src: Path) -> None:
    """Jupyter Book's conf.py for the source folder `src`, as `jupyter-book config sphinx` writes it, in this process
    (its imports, seconds, are paid once per process, not once per build)."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Jupyter Book's own, about click's names
            from jupyter_book.cli.main import main

            main(["config", "sphinx", str(src)], standalone_mode=False)
    except Exception as err:  # click's and Jupyter Book's errors alike: the build stops, saying why
        raise SiteError(f"Jupyter Book could not write the Sphinx configuration: {err}\n{printed.getvalue()[-3000:]}") \
            from err
    if not (src / "conf.py").is_file():
        raise SiteError(f"Jupyter Book wrote no Sphinx configuration:\n{printed.getvalue()[-3000:]}")


# ------------------------------------------------------------------------------------------------ the build
# appended to the conf.py Jupyter Book writes: no Thebe (live code from a CDN; its script is also written twice) and
# no comment widgets, the theme's mode chosen by the reader's system until they pick one; the sidebar shows the title
# escaped (the theme prints its logo text as HTML)
CONF_ADDITIONS = """
extensions = [e for e in extensions if e not in ("sphinx_thebe", "sphinx_comments")]
html_context = {{**globals().get("html_context", {{}}), "default_mode": "auto"}}
html_theme_options.update(use_download_button=True, show_toc_level=2, navigation_with_keys=False)
html_theme_options["logo"] = {{**html_theme_options.get("logo", {{}}), "text": {title!r}}}
html_sidebars = {{"**": ["navbar-logo.html", "sbt-sidebar-nav.html"]}}  # one search box: the header's
# Jupyter Book puts every script of _static on every page: the chart library and the charts' specs only where site.js
# finds a chart, the search ranking only on the search page (html_search_scorer)
html_js_files = [f for f in html_js_files if (f[0] if isinstance(f, tuple) else f) not in ("vega.js", "scorer.js")
                 and not (f[0] if isinstance(f, tuple) else f).startswith("charts/")]
# MathJax from its parts, not tex-chtml.js (1.2 MB): the TeX input, the HTML output and the hidden MathML a screen
# reader reads, without the contextual menu (0.4 MB)
def setup(app):  # run after the extensions' own: sphinx-mathjax-offline sets tex-chtml.js in its setup
    app.config.mathjax_path = "mathjax/startup.js"


# and without TeX's html extension (\\href, \\style, \\class, \\cssId link, style and name the page): never loaded,
# by \\require or by using one of its macros
mathjax3_config = {{**(globals().get("mathjax3_config") or {{}}),
                    "loader": {{"load": ["input/tex", "output/chtml", "a11y/assistive-mml"]}},
                    "tex": {{"autoload": {{"html": []}}, "require": {{"allow": {{"html": False, "[tex]/html": False}}}}}}}}
"""
# MathJax's bundles and outputs that no page loads: every page with math loads mathjax/startup.js, which fetches the
# parts CONF_ADDITIONS names (TeX input, CHTML output, assistive MathML) and what they need from beside it
# (and the theme's fontawesome.js, 1.5 MB, which no page loads: site_weight.theme_templates)
UNUSED_ASSETS = {"_static/scripts": ("fontawesome.js", "fontawesome.js.LICENSE.txt", "fontawesome.js.map"),
                 "_static/mathjax": ("tex-chtml.js", "mml-chtml.js", "mml-svg.js", "tex-mml-chtml.js", "tex-mml-svg.js",
                                     "tex-svg.js", "tex-svg-full.js", "tex-chtml-full.js", "tex-chtml-full-speech.js",
                                     "node-main.js", "latest.js", "sre"),
                 "_static/mathjax/output": ("svg", "svg.js"),
                 "_static/mathjax/input": ("mml", "mml.js", "asciimath.js", "tex-full.js", "tex-base.js"),
                 "_static/mathjax/ui": ("menu.js",),
                 "_static/mathjax/a11y": ("sre.js", "complexity.js", "explorer.js", "semantic-enrich.js")}
# what Sphinx keeps to rebuild faster, never published: pickles that name the build machine's folders
BUILD_STATE = (".doctrees", ".buildinfo", "*.pickle", "*.doctree")


def _run(command: list[str], env: dict, failure: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        raise SiteError(f"{failure}:\n" + "\n".join(lines[-40:]))


def _check_out(book, out: Path) -> None:
    """Refuse an --out that cannot be a site's folder before anything is built."""
    for folder in (out, *out.parents):
        if folder.exists() or folder.is_symlink():
            if folder != out and not folder.is_dir():
                raise SiteError(f"{out}: {folder} is a file, not a folder; choose another --out")
            break
    real_out, real_root = os.path.realpath(out), os.path.realpath(book.root)
    if os.path.commonpath([real_out, real_root]) == real_out:
        raise SiteError(f"{out} holds the book; the site replaces its folder whole, so choose a folder of its own "
                        "(default: site/ in the book)")
    if any(os.path.commonpath([real_out, os.path.realpath(book.root / c.file)]) == real_out for c in book.chapters):
        raise SiteError(f"{out} holds chapters of the book; choose a folder of its own")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise SiteError(f"{out} exists and is not a site this command built; choose an empty or new folder")


def build_site(book, out: Path, log=print) -> list[Page]:
    """Build the site into `out` (an earlier site there is replaced whole once the new one is ready; a failed build
    leaves it as it was). Runs no notebook and fetches nothing; Sphinx's warnings are errors, so a broken link or
    reference fails the build, naming it. Sphinx's build state stays behind: the site holds only what a reader opens."""
    from transformer_lib.files import write_folder_atomically

    start, out = time.perf_counter(), Path(out)
    _check_out(book, out)
    with tempfile.TemporaryDirectory(prefix="transformer-book-site.") as tmp:
        src = Path(tmp) / "book"
        pages = assemble(book, src)
        figures = sum(p.figures for p in pages)
        env = {**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"}
        _sphinx_config(src)
        _write(src, "conf.py", CONF_ADDITIONS.format(title=html.escape(book.title)), append=True)
        built = src / "_build" / "html"
        _run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-j", "1",
              "-d", str(Path(tmp) / "doctrees"), str(src), str(built)], env, "Sphinx could not build the site")
        if (built / "_downloads").exists():  # every link to a file points at the repository; none is copied
            found = sorted(str(p.relative_to(built)) for p in (built / "_downloads").rglob("*") if p.is_file())
            raise SiteError(f"Sphinx published files as downloads ({', '.join(found[:3])}); a link names them")

        def write(folder: Path) -> None:
            state = shutil.ignore_patterns(*BUILD_STATE)

            def leave_out(where: str, names: list[str]) -> set[str]:
                unused = UNUSED_ASSETS.get(Path(where).relative_to(built).as_posix(), ())
                return set(state(where, names)) | {n for n in names if n in unused}

            shutil.copytree(built, folder, dirs_exist_ok=True, ignore=leave_out)
            subset_icon_fonts(folder)
            apply_policy(folder, log)
            for chapter in book.chapters:  # the download button gives the chapter as committed, outputs and all
                target = _inside(folder, f"_sources/{chapter.file}")
                target.unlink(missing_ok=True)
                _write(folder, f"_sources/{chapter.file}", _source(book, chapter.file).read_bytes())
            _write(folder, MARKER, "written by python -m transformer_lib.book html; rebuilt (replaced) by it\n")

        out.parent.mkdir(parents=True, exist_ok=True)
        write_folder_atomically(out, write)
    log(f"wrote {len(pages)} pages to {out} in {time.perf_counter() - start:.0f}s ({figures} figures from the "
        "chapters' code)")
    return pages
