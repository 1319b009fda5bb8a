# Hand-written tool module (not generated from a notebook).
"""Markdown as the website shows it (transformer_lib.book.site): relative links pointed at the site's pages or the
repository, relative images copied into the site, inline code and fenced code left as written; then checked as MyST
reads it, refused where it would load anything from outside the site, run a script, hold a directive, role or front
matter, or link to a local file that is not a page.
"""
from __future__ import annotations

import html
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from transformer_lib.book.site_policy import refused, svg_as_png
from transformer_lib.book.site_safety import (_LINK_SCHEMES, _MEDIA, _SCHEME, SiteError, _address, _hrefs, _source,
                                              _write, svg_loads)

__all__ = ["MYST_EXTENSIONS", "rewrite_links"]


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
            site_path = "_static/repository/" + resolved
            if resolved.lower().endswith(".svg"):
                if found := svg_loads(data.decode("utf-8", "replace")):
                    raise SiteError(f"{self.at or self.where}: the image {target} loads {', '.join(found[:4])}; "
                                    "a page loads nothing from outside the site")
                data, site_path = svg_as_png(data, f"{self.at or self.where}: the image {target}"), site_path + ".png"
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
                raw.append(token.content)  # checked whole below: an inline element's tags are tokens of their own
                links, pictures = _hrefs(token.content)
                for href in links:
                    relative_target(_address(href), False)
                for src in pictures:
                    relative_target(_address(src), True)
            if token.type == "link_open":
                relative_target(_address(token.attrGet("href") or ""), False)
            if token.type == "image":
                relative_target(_address(token.attrGet("src") or ""), True)
            if token.children:
                walk(token.children)

    raw: list[str] = []
    walk(_PARSER.parse(text))
    if found := refused("".join(raw)):
        refuse(f"raw HTML with what the site's allowlist leaves out: {', '.join(found[:4])}; a page shows and loads "
               "only what the allowlist keeps")


_PARSER = None
MYST_EXTENSIONS = ("colon_fence", "dollarmath", "amsmath")  # no substitution: it renders Jinja from the page's text


def _markdown(text: str, place: _Place, at: str | None = None, site_pages: set[str] | None = None) -> str:
    """Markdown of a page, a chapter's cell or an output, as the site shows it: the Colab badge a link, relative
    links pointed at pages or the repository, relative images copied into the site; checked (_check_markdown) once
    `site_pages` is given."""
    text = _outside_code(text, lambda piece: _BADGE.sub(r"[Open in Colab](\1)", piece))
    text = rewrite_links(text, place.where, place.pages, place.repo_url, place)
    if site_pages is not None:
        _check_markdown(text, place, at or place.where, site_pages)
    return text
