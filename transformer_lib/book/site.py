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
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import yaml

__all__ = ["SiteError", "Page", "ALT_TEXT_FILE", "assemble", "build_site", "rewrite_links", "html_loads"]

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


# ------------------------------------------------------------------------------------------------ paths
def _inside(root: Path, rel: str) -> Path:
    """root/rel, refused unless rel is a plain relative path that stays inside root, symbolic links followed."""
    rel = str(rel)
    parts = rel.split("/")
    if not rel or rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in parts) or \
            any(ord(c) < 32 for c in rel):
        raise SiteError(f"{rel!r} is not a plain relative path; the site writes nothing outside its folder")
    real_root = os.path.realpath(root)
    real = os.path.realpath(Path(root) / rel)
    if os.path.commonpath([real_root, real]) != real_root:
        raise SiteError(f"{rel} leads outside the site's folder (to {real}); the site writes nothing there")
    return Path(root) / rel


def _write(root: Path, rel: str, data: str | bytes, append: bool = False) -> Path:
    """The one way the site writes a file: inside `root`, never over a file it wrote before (`append`: at the end of
    one it holds)."""
    path = _inside(root, rel)
    if append:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(data)
        return path
    if path.exists() or path.is_symlink():
        raise SiteError(f"two files of the site would be written to {rel}; rename one of them")
    path.parent.mkdir(parents=True, exist_ok=True)
    path = _inside(root, rel)  # again, now that its folders exist
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def _source(book, rel: str) -> Path:
    """A file of the book the site reads, refused where it is missing or leads outside the book (a symbolic link)."""
    path = book.root / rel
    real, real_root = os.path.realpath(path), os.path.realpath(book.root)
    if os.path.commonpath([real_root, real]) != real_root:
        raise SiteError(f"{rel} leads outside the book (to {real}); the site publishes only the book's own files")
    if not path.is_file():
        raise SiteError(f"{rel} is missing or not a file")
    return path


# ------------------------------------------------------------------------------------------------ what loads
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):", re.I)
_MEDIA = re.compile(r"^data:(?:image|audio|video|font)/", re.I)
_LINK_SCHEMES = ("http", "https", "mailto")
_RESOURCE_ATTRS = {"src", "poster", "data", "background", "codebase", "archive", "lowsrc", "dynsrc", "manifest",
                   "icon", "code"}
_FRAMES = {"iframe", "frame", "object", "embed", "applet", "portal"}


def _address(value: str) -> str:
    """An address as a browser reads it: outer whitespace and control characters gone, tabs and newlines dropped,
    backslashes as slashes."""
    value = re.sub(r"[\t\n\r]", "", value).strip("".join(map(chr, range(33))))
    return value.replace("\\", "/")


def _loads_from_outside(value: str) -> bool:
    """Whether an address in a place that loads a resource fetches something that is not the page's own: anything
    but an empty address, an anchor or data: media (a relative address in raw HTML or CSS is not copied into the
    site, so it is refused too; Markdown images are copied)."""
    value = _address(value)
    return not (value == "" or value.startswith("#") or _MEDIA.match(value))


def _css_addresses(css: str) -> list[str]:
    """Every address CSS would fetch: url(), @import and image-set() strings, after comments and escapes."""
    out, i = [], 0
    while (j := css.find("/*", i)) >= 0:  # comments out, without a regular expression
        k = css.find("*/", j + 2)
        css = css[:j] + " " + ("" if k < 0 else css[k + 2:])
        i = j + 1
    css = re.sub(r"\\([0-9a-fA-F]{1,6})[ \t\r\n\f]?", lambda m: chr(min(int(m.group(1), 16), 0x10FFFF) or 0xFFFD), css)
    css = re.sub(r"\\\n", "", css)
    css = re.sub(r"\\(.)", r"\1", css)
    out += [next(g for g in m.groups() if g is not None)
            for m in re.finditer(r"url\(\s*(?:\"([^\"]*)\"|'([^']*)'|([^)\"'\s]*))", css, re.I)]
    out += [m.group(1) or m.group(2) for m in re.finditer(r"@import\s*(?:\"([^\"]*)\"|'([^']*)')", css, re.I)]
    for m in re.finditer(r"image-set\(", css, re.I):
        end = css.find(")", m.end())
        out += [a or b for a, b in re.findall(r"\"([^\"]*)\"|'([^']*)'", css[m.end():None if end < 0 else end])]
    return out


def _srcset(value: str) -> list[str]:
    """The addresses of a srcset: each candidate's address, then its descriptors up to a comma."""
    out, i, n = [], 0, len(value)
    while i < n:
        while i < n and (value[i].isspace() or value[i] == ","):
            i += 1
        j = i
        while j < n and not value[j].isspace():
            j += 1
        url = value[i:j]
        if url.endswith(","):
            out.append(url.rstrip(","))
            i = j
            continue
        if url:
            out.append(url)
        k = value.find(",", j)
        i = n if k < 0 else k + 1
    return out


class _Scanner(HTMLParser):
    """The raw HTML of a page, tag by tag, as a browser would parse it: what it would load or run."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.links: list[str] = []  # <a href> and <area href>, for the caller to check

    def handle_starttag(self, tag, attrs):
        self._tag(tag.lower(), attrs)

    def handle_startendtag(self, tag, attrs):
        self._tag(tag.lower(), attrs)

    def handle_data(self, data):
        if self.cdata_elem == "style":
            self.found += [f"CSS {a}" for a in _css_addresses(data) if _loads_from_outside(a)]
        elif self.cdata_elem == "script" and data.strip() and not self._data_script:
            self.found.append("a script")

    def _tag(self, tag, attrs):
        names = {name.lower(): value for name, value in attrs}
        if tag == "script":
            self._data_script = (names.get("type") or "").strip().lower() in ("application/json", "application/ld+json")
            if not self._data_script:
                self.found.append("a <script> element")
        if tag == "base":
            self.found.append("a <base> element")
        if tag == "meta" and (names.get("http-equiv") or "").strip().lower() == "refresh":
            self.found.append("a <meta http-equiv=refresh>")
        if tag in ("animate", "set", "animatemotion", "animatetransform") and \
                (names.get("attributename") or "").lower().endswith("href"):
            self.found += [f"{tag} {v}" for k in ("values", "to", "from", "by") for v in (names.get(k) or "").split(";")
                           if k in names and _loads_from_outside(v)]
        for name, value in attrs:
            name, value = name.lower(), value or ""
            local = name.rsplit(":", 1)[-1]
            if name.startswith("on"):
                self.found.append(f"{tag} {name}=")
            elif name == "style" or "url(" in value.lower():
                self.found += [f"CSS {a}" for a in _css_addresses(value) if _loads_from_outside(a)]
            if local in _RESOURCE_ATTRS and (tag != "meta") and _loads_from_outside(value):
                self.found.append(_address(value) or value)
            elif local in ("srcset", "imagesrcset"):
                self.found += [a for a in _srcset(value) if _loads_from_outside(a)]
            elif local == "href":
                if tag in ("a", "area"):
                    self.links.append(value)
                elif _loads_from_outside(value):
                    self.found.append(_address(value))
            elif local in ("formaction", "action") and _SCHEME.match(_address(value)) and \
                    _SCHEME.match(_address(value)).group(1).lower() not in _LINK_SCHEMES:
                self.found.append(_address(value))
            elif local == "srcdoc":
                self.found += html_loads(value)
        if tag in _FRAMES and not any(k in names for k in ("src", "data", "code")):
            self.found.append(f"an <{tag}> element")

    _data_script = False


def html_loads(text: str) -> list[str]:
    """What raw HTML (or SVG) `text` would load or run by itself: each address it fetches from anywhere but the page
    itself (src, srcset, poster, data, href of link/image/use, CSS url() and @import in <style> and style="",
    meta refresh, base), and each script or event handler. Empty when it loads nothing."""
    scanner = _Scanner()
    scanner.feed(text)
    scanner.close()
    for link in scanner.links:
        m = _SCHEME.match(_address(link))
        if m and m.group(1).lower() not in _LINK_SCHEMES:
            scanner.found.append(_address(link))
    return scanner.found


# ------------------------------------------------------------------------------------------------ links
# The address excludes ( ) [ ] < > and whitespace: a match cannot run past the next "](" (it starts with "]"), so
# the scan is linear on any input, "](" * 100000 included.
_LINK = re.compile(r"(\]\()(<?)([^()\[\]\s<>]+)(>?)((?:[ \t]+\"[^\"\n]*\")?\))")
_DEFINITION = re.compile(r"^( {0,3}\[[^\[\]\n]+\]:[ \t]*)(<?)([^\s<>]+)(>?)", re.M)
_HTML_HREF = re.compile(r"(<a(?:rea)?\s[^<>]*?\bhref\s*=\s*)([\"']?)([^\"'\s<>]*)", re.I)
_BADGE = re.compile(r"\[!\[Open In Colab\]\([^()\[\]\s]*\)\]\(([^()\[\]\s]+)\)")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _code_parts(text: str) -> list[tuple[bool, str]]:
    """`text` cut into (is_code, piece): fenced blocks and inline code spans are code, the rest is prose."""
    parts: list[tuple[bool, str]] = []
    prose: list[str] = []
    fence = None
    for line in text.splitlines(keepends=True):
        if fence is None:
            m = _FENCE.match(line)
            if m and not (m.group(1)[0] == "`" and "`" in line[m.end():]):
                fence = m.group(1)
                parts.append((False, "".join(prose)))
                prose = [line]
                continue
            prose.append(line)
        else:
            prose.append(line)
            if re.match(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$", line.rstrip("\n")):
                parts.append((True, "".join(prose)))
                prose, fence = [], None
    parts.append((fence is not None, "".join(prose)))
    out: list[tuple[bool, str]] = []
    for code, piece in parts:
        out += [(True, piece)] if code else _code_spans(piece)
    return [(c, p) for c, p in out if p]


def _code_spans(text: str) -> list[tuple[bool, str]]:
    """Prose cut at its inline code spans: a run of n backticks up to the next run of exactly n."""
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", text)]
    by_length: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(runs):
        by_length.setdefault(b - a, []).append(i)
    pointer = {n: 0 for n in by_length}
    out, pos, i = [], 0, 0
    while i < len(runs):
        a, b = runs[i]
        n, same = b - a, by_length[b - a]
        while pointer[n] < len(same) and same[pointer[n]] <= i:
            pointer[n] += 1
        if pointer[n] < len(same):
            j = same[pointer[n]]
            out += [(False, text[pos:a]), (True, text[a:runs[j][1]])]
            pos, i = runs[j][1], j + 1
        else:
            i += 1
    out.append((False, text[pos:]))
    return out


def _outside_code(text: str, change) -> str:
    """`text` with change(piece) applied to its prose, its code left as written."""
    return "".join(piece if code else change(piece) for code, piece in _code_parts(text))


@dataclass
class _Place:
    """Where a piece of Markdown is: its file in the repository, its page in the site, and what it may copy."""
    where: str  # the repository path, e.g. docs/making.md
    page: str  # its page's source in the site, e.g. docs/making.md
    pages: dict  # repository path -> page source
    repo_url: str
    book: object = None  # the book a relative image is copied from (None: refused)
    site: Path | None = None  # the assembled folder it is copied into
    copied: dict | None = None  # repository path -> site path, for images copied already
    at: str | None = None  # the cell or output, for messages

    def resolve(self, target: str) -> str:
        """The repository path a relative or root-relative (/docs/x.md: from the repository's root) target names."""
        path = target.split("#", 1)[0]
        if path.startswith("/"):
            resolved = posixpath.normpath(path.lstrip("/")) if path.strip("/") else "."
        else:
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(self.where), path)) if path else self.where
        if resolved == ".." or resolved.startswith("../"):
            raise SiteError(f"{self.at or self.where}: the link {target} leads outside the repository")
        return resolved

    def from_page(self, site_path: str) -> str:
        return posixpath.relpath(site_path, posixpath.dirname(self.page) or ".")

    def link(self, target: str, raw_html: bool = False) -> str:
        """A link's new target: a page of the site (its .html in raw HTML, which Sphinx does not rewrite), a copied
        image, or the file in the repository."""
        if re.match(r"^(?:[a-z][a-z0-9+.-]*:|#|//)", target, re.I):
            return target
        resolved = self.resolve(target)
        anchor = target.partition("#")[2]
        if resolved in self.pages:
            new = self.from_page(self.pages[resolved])
            new = str(Path(new).with_suffix(".html")) if raw_html else new
        elif resolved.lower().endswith(_IMAGE_SUFFIXES) and self.book is not None:
            new = self.from_page(self.copy(resolved, target))
        else:
            new = f"{self.repo_url}/{resolved}"
        return new + ("#" + anchor if anchor else "")

    def copy(self, resolved: str, target: str) -> str:
        """The site path of the repository file `resolved`, copied into _static/repository/ on first use."""
        if resolved not in self.copied:
            try:
                path = _source(self.book, resolved)
            except SiteError as err:
                raise SiteError(f"{self.at or self.where}: the image {target}: {err}") from None
            data = path.read_bytes()
            if resolved.lower().endswith(".svg"):
                if found := html_loads(data.decode("utf-8", "replace")):
                    raise SiteError(f"{self.at or self.where}: the image {target} loads {', '.join(found[:4])}; "
                                    "a page loads nothing from outside the site")
            site_path = "_static/repository/" + resolved
            _write(self.site, site_path, data)
            self.copied[resolved] = site_path
        return self.copied[resolved]


def rewrite_links(text: str, where: str, pages: dict[str, str], repo_url: str, place: _Place | None = None) -> str:
    """Markdown `text` of the file `where` (a path in the repository) with each relative link pointed at its page in
    the site (`pages` maps a repository path to its page's source path) or, for a file the site does not show, at
    the repository (`repo_url`, ending in /blob/<branch>); a leading / means the repository's root. Inline code and
    fenced blocks stay as written; so do absolute links, anchors and attachments. Raw HTML <a href> links too."""
    place = place or _Place(where, pages.get(where, where), pages, repo_url)

    def one(m):
        target = m.group(3)
        if target.startswith("attachment:"):
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}{place.link(target)}{m.group(4)}" + (m.group(5) if m.lastindex >= 5 else "")

    def prose(piece):
        piece = _LINK.sub(one, piece)
        piece = _DEFINITION.sub(one, piece)
        return _HTML_HREF.sub(
            lambda m: f"{m.group(1)}{m.group(2)}{place.link(html.unescape(m.group(3)), raw_html=True)}", piece)

    return _outside_code(text, prose)


def _md_parser():
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    return create_md_parser(MdParserConfig(enable_extensions=set(MYST_EXTENSIONS)), RendererHTML)


def _check_markdown(text: str, place: _Place, at: str, site_pages: set[str]) -> None:
    """Markdown as MyST will read it, after its links were rewritten: refused where it would load anything from outside
    the site, run a script, hold a MyST directive, role or front matter (they read files and set options), or link to
    a local file that is not a page (Sphinx would publish it as a download)."""
    global _PARSER
    if _PARSER is None:
        _PARSER = _md_parser()

    def refuse(what):
        raise SiteError(f"{at}: {what}")

    def relative_target(address, image):
        if address.startswith(("#", "attachment:")) or (image and _MEDIA.match(address)):
            return
        m = _SCHEME.match(address)
        if image and (m or address.startswith("//")):
            refuse(f"an image from {address}; a page loads nothing from outside the site")
        if m:
            if m.group(1).lower() not in _LINK_SCHEMES:
                refuse(f"the link {address}: only http, https and mailto links are allowed")
            return
        if address.startswith("/"):
            if address.startswith("//"):
                return
            refuse(f"the link {address} was not rewritten; write it as a path from the file")
        path = posixpath.normpath(posixpath.join(posixpath.dirname(place.page), address.split("#")[0]))
        pages = site_pages | {str(Path(p).with_suffix(".html")) for p in site_pages}
        if not (path in pages or path.startswith("_static/")):
            refuse(f"the {'image' if image else 'link'} {address} is neither a page of the site nor a file in it")

    def walk(tokens):
        for token in tokens:
            if token.type == "front_matter":
                refuse("front matter (a --- block at the top) sets MyST options; remove it")
            if token.type in ("fence", "colon_fence") and token.info.strip().startswith("{"):
                refuse(f"the MyST directive {token.info.split()[0]}; the site runs no directive from the book's text")
            if token.type == "myst_role":
                refuse(f"the MyST role {{{token.meta.get('name', '?')}}}; the site runs no role from the book's text")
            if token.type in ("html_block", "html_inline"):
                if found := html_loads(token.content):
                    refuse(f"raw HTML that loads or runs {', '.join(found[:4])}; a page loads nothing from outside "
                           "the site")
                for href in _hrefs(token.content):
                    relative_target(_address(href), False)
            if token.type == "link_open":
                relative_target(_address(token.attrGet("href") or ""), False)
            if token.type == "image":
                relative_target(_address(token.attrGet("src") or ""), True)
            if token.children:
                walk(token.children)

    walk(_PARSER.parse(text))


_PARSER = None
MYST_EXTENSIONS = ("colon_fence", "dollarmath", "amsmath")  # no substitution: it renders Jinja from the page's text


def _hrefs(raw_html: str) -> list[str]:
    scanner = _Scanner()
    scanner.feed(raw_html)
    scanner.close()
    return scanner.links


def _markdown(text: str, place: _Place, at: str | None = None, site_pages: set[str] | None = None) -> str:
    """Markdown of a page, a chapter's cell or an output, as the site shows it: the Colab badge a link, relative
    links pointed at pages or the repository, relative images copied into the site; checked (_check_markdown) once
    `site_pages` is given."""
    text = _outside_code(text, lambda piece: _BADGE.sub(r"[Open in Colab](\1)", piece))
    text = rewrite_links(text, place.where, place.pages, place.repo_url, place)
    if site_pages is not None:
        _check_markdown(text, place, at or place.where, site_pages)
    return text


# ------------------------------------------------------------------------------------------------ chapters
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_CELL_ID = re.compile(r"[A-Za-z0-9_-]+")
_SAFE_OUTPUTS = {"text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/svg+xml",
                 *VEGALITE_MIMES}


def _figure_html(png_b64: str, site: Path, to_static: str, name: str, alt: str, chart: dict | None = None) -> str:
    """An output's figure as a file in _static/figures and the HTML that shows it, linked to its full size; a chart
    also carries its spec, which site.js draws over the picture. `to_static`: the page's way to _static/."""
    _write(site, f"_static/figures/{name}", base64.b64decode(png_b64))
    src = f"{to_static}/figures/{name}"
    img = (f'<a class="tb-figure-link" href="{src}" title="Open the figure at full size">'
           f'<img class="tb-figure" src="{src}" alt="{html.escape(alt, quote=True)}" loading="lazy"></a>')
    if chart is None:
        return f'<div class="tb-figure-box">{img}</div>'
    spec = json.dumps(chart).replace("</", "<\\/").replace("<!--", "<\\!--")  # nothing closes the script element
    return (f'<div class="tb-chart" role="figure" aria-label="{html.escape(alt, quote=True)}">{img}'
            f'<script type="application/json">{spec}</script></div>')


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _chapter(nb, where: str, alt: dict, site: Path, place: _Place, site_pages: set[str]):
    """A copy of the chapter as its page shows it; returns (notebook, figures)."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))  # a deep copy
    # only what the page needs: other metadata (myst options, widget state) would change how MyST builds the page
    nb.metadata = {k: nb.metadata[k] for k in ("kernelspec", "language_info") if k in nb.metadata}
    stem = re.sub(r"[^A-Za-z0-9_.-]", "-", Path(where).stem)
    to_static = place.from_page("_static")
    cells, figures = [], 0
    for index, cell in enumerate(nb.cells):
        cell_id = cell.get("id", "?")
        at = place.at = f"{where} cell {index} (id {cell_id})"
        cell.metadata = {"tags": list(cell.metadata["tags"])} if isinstance(cell.metadata.get("tags"), list) else {}
        if cell.cell_type not in ("markdown", "code"):
            continue  # raw cells are not part of the reading (and would pass their text to the page as is)
        if not isinstance(cell_id, str) or not _CELL_ID.fullmatch(cell_id):
            raise SiteError(f"{at}: the cell id {cell_id!r} is not letters, digits, - and _; give the cell a plain id")
        if cell.cell_type == "markdown":
            source = _markdown(cell.source, place)
            for name, bundle in (cell.pop("attachments", None) or {}).items():
                if not isinstance(name, str) or not _PLAIN_NAME.fullmatch(name) or name.strip(".") == "":
                    raise SiteError(f"{at}: the attachment {name!r} is not a plain file name (letters, digits, "
                                    ". - _); rename it")
                mime = next((m for m in ("image/png", "image/svg+xml", "image/jpeg") if m in bundle), None)
                if mime is None or f"attachment:{name}" not in source:
                    continue
                data = _text(bundle[mime])
                if mime == "image/svg+xml" and (found := html_loads(data)):
                    raise SiteError(f"{at}: the attachment {name} loads {', '.join(found[:4])}; a page loads "
                                    "nothing from outside the site")
                site_path = f"_static/attachments/{stem}/{cell_id}/{name}"
                _write(site, site_path, data.encode() if mime == "image/svg+xml" else base64.b64decode(data))
                source = source.replace(f"attachment:{name}", place.from_page(site_path))
            if m := re.search(r"attachment:([^()\s]+)", source):
                raise SiteError(f"{at}: the picture {m.group(1)} is not attached to its cell")
            _check_markdown(source, place, at, site_pages)
            cell.source = source
        elif cell.cell_type == "code":
            lines = cell.source.splitlines()
            if any(line.startswith(("#| default_exp", "#| hide")) for line in lines):
                continue  # the install cell, or a cell not meant for the page
            cell.source = "\n".join(line for line in lines if not line.startswith("#| ")).strip("\n")
            texts, n = alt.get(cell_id, []), 0
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                unknown = sorted(set(data) - _SAFE_OUTPUTS)
                if unknown:
                    raise SiteError(f"{at}: an output of type {unknown[0]}, which the site does not show (scripts "
                                    "and widgets would load code); clear it")
                _check_output(data, place, at, site_pages)
                if "image/png" not in data:
                    continue
                if n >= len(texts) or not str(texts[n]).strip():
                    raise SiteError(f"{at}: figure {n + 1} has no alt text; add it under {where}: "
                                    f"'{cell_id}' in {ALT_TEXT_FILE}")
                chart = next((data[m] for m in VEGALITE_MIMES if m in data), None)
                output["data"] = {"text/html": _figure_html(_text(data["image/png"]), site, to_static,
                                                            f"{stem}-{cell_id}-{n}.png", str(texts[n]), chart)}
                output["metadata"] = {}
                n, figures = n + 1, figures + 1
            if n < len(texts):
                raise SiteError(f"{ALT_TEXT_FILE}: {where} '{cell_id}' has {len(texts)} alt texts for "
                                f"{n} figures")
        cells.append(cell)
    unknown = sorted(set(alt) - {cell.get("id") for cell in nb.cells})
    if unknown:
        raise SiteError(f"{ALT_TEXT_FILE}: {where} has no cell {', '.join(map(repr, unknown))}; remove its alt text "
                        "or give it the id of the cell that draws the figure")
    nb.cells = cells
    return nb, figures


def _check_output(data: dict, place: _Place, at: str, site_pages: set[str]) -> None:
    """An output's HTML, SVG and Markdown load nothing and link nowhere outside; Markdown links are rewritten."""
    for mime in ("text/html", "image/svg+xml"):
        if mime in data:
            text = _text(data[mime])
            if found := html_loads(text):
                raise SiteError(f"{at}: an output ({mime}) that loads or runs {', '.join(found[:4])}; a page loads "
                                "nothing from outside the site")
            for href in _hrefs(text):
                if not re.match(r"^(?:https?:|mailto:|#|$)", _address(href), re.I):
                    raise SiteError(f"{at}: an output ({mime}) links to {href}; outputs link only to web addresses "
                                    "and anchors")
    if "text/markdown" in data:
        data["text/markdown"] = _markdown(_text(data["text/markdown"]), place, at, site_pages)


def _read_notebook(book, name: str):
    if not os.path.lexists(book.root / name):
        raise SiteError(f"{name} is listed in book.yml but missing; restore it (git checkout -- {name}) or remove it "
                        "from book.yml; the old site was left as it was")
    path = _source(book, name)
    try:
        return nbformat.read(path, as_version=4)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise SiteError(f"{name} is not a notebook nbformat can read ({type(err).__name__}: {str(err)[:200]}); "
                        "restore it from git; the old site was left as it was") from None


def _alt_texts(book) -> dict:
    try:
        data = yaml.safe_load(_source(book, ALT_TEXT_FILE).read_text(encoding="utf-8")) or {}
    except SiteError:
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
    for name in ("site.css", "site.js", "scorer.js"):
        _write(src, f"_static/{name}", (STATIC / name).read_bytes())
    _write(src, "_templates/search.html", (STATIC / "search.html").read_bytes())
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
        _write(src, solution, _source(book, solution).read_bytes())
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
        text = page(rel)
        write(rel, text, "doc", _title(text, Path(rel).stem))

    licence = _source(book, "LICENSE").read_text(encoding="utf-8").strip("\n")
    fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", licence)), default=0))
    write("license.md", f"# Licence\n\n{fence}text\n{licence}\n{fence}\n", "licence", "Licence")

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
                 "favicon": ""},
        "parse": {"myst_enable_extensions": list(MYST_EXTENSIONS)},
        "sphinx": {
            "extra_extensions": ["sphinx-mathjax-offline"],
            "config": {
                "html_static_path": ["_static"],
                "templates_path": ["_templates"],  # search.html: the title escaped
                "html_css_files": ["site.css"],
                "html_js_files": ["vega.js", "site.js"],
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
    import vl_convert

    # in a function of its own: the bundle's top-level names (`_` among them) would collide with Sphinx's scripts
    bundle = vl_convert.javascript_bundle()
    _write(src, "_static/vega.js", "(function () {\n" + bundle + "\n})();\n")


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
"""
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
        _run([sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "config", "sphinx", str(src)],
             env, "Jupyter Book could not write the Sphinx configuration")
        _write(src, "conf.py", CONF_ADDITIONS.format(title=html.escape(book.title)), append=True)
        built = src / "_build" / "html"
        _run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-j", "1",
              "-d", str(Path(tmp) / "doctrees"), str(src), str(built)], env, "Sphinx could not build the site")
        if (built / "_downloads").exists():  # every link to a file points at the repository; none is copied
            found = sorted(str(p.relative_to(built)) for p in (built / "_downloads").rglob("*") if p.is_file())
            raise SiteError(f"Sphinx published files as downloads ({', '.join(found[:3])}); a link names them")

        def write(folder: Path) -> None:
            shutil.copytree(built, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*BUILD_STATE))
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
