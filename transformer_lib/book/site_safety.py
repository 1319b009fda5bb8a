# Hand-written tool module (not generated from a notebook).
"""The website builder's guards (transformer_lib.book.site): the one way it writes a file, kept inside the site's
folder; the one way it reads a file of the book, kept inside the book; and what an SVG picture names outside itself.
Raw HTML is the allowlist's business (site_policy).
"""
from __future__ import annotations

import html
import os
import re
from html.parser import HTMLParser
from pathlib import Path

__all__ = ["SiteError", "svg_loads"]


class SiteError(ValueError):
    """Something the site cannot show as promised (a figure without alt text, an image from outside the site, a
    notebook that cannot be read); the message names the file and the cell."""


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
# Raw HTML reaches a page only through the allowlist sanitizer (site_policy.sanitize), and the page's policy forbids
# loads from outside the site; the build refuses a fragment the allowlist would cut (site_policy.refused). What
# neither covers is an SVG picture, which the site draws to a PNG: what it names outside itself, resvg might read.
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):", re.I)
_MEDIA = re.compile(r"^data:(?:image|audio|video|font)/", re.I)
_LINK_SCHEMES = ("http", "https", "mailto")
_SVG_ADDRESS = re.compile(r"""(?<![\w.-])(?:[\w.-]+:)?(?:href|src)\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.I)
_SVG_OWN = re.compile(r"^(?:#|data:image/(?:png|jpeg|gif|webp)[;,])", re.I)


def _address(value: str) -> str:
    """An address as a browser reads it: outer whitespace and control characters gone, tabs and newlines dropped,
    backslashes as slashes."""
    value = re.sub(r"[\t\n\r]", "", value).strip("".join(map(chr, range(33))))
    return value.replace("\\", "/")


def svg_loads(svg: str) -> list[str]:
    """What an SVG picture names outside itself, which drawing it to a PNG might read: every href or src that is not
    an anchor in the picture or a data: picture, every CSS url() but an anchor, any @import, and any entity it
    declares (an entity can spell an address). Its scripts never run: the site publishes the PNG alone."""
    found = [_address(html.unescape(a or b)) for a, b in _SVG_ADDRESS.findall(svg)]
    found = [a for a in found if not _SVG_OWN.match(a)]
    found += [f"url({m})" for m in re.findall(r"url\(\s*([^)]*)\)", svg, re.I) if not m.strip("\"' ").startswith("#")]
    return found + [m.group(0) for m in re.finditer(r"@import|<!ENTITY", svg, re.I)]


class _Links(HTMLParser):
    """The href of every <a> and <area>, and the src of every <img>, of raw HTML, for the caller to check where each
    leads (the allowlist keeps an address within the site whether or not the site has its file)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag, attrs):
        tag, attrs = tag.lower(), [(name.lower(), value or "") for name, value in attrs]
        if tag in ("a", "area"):
            self.links += [value for name, value in attrs if name == "href"]
        if tag == "img":
            self.images += [value for name, value in attrs if name == "src"]


def _hrefs(raw_html: str) -> tuple[list[str], list[str]]:
    """The links of raw HTML, and its pictures' addresses, read in one pass."""
    parser = _Links()
    parser.feed(raw_html)
    parser.close()
    return parser.links, parser.images
