# Hand-written tool module (not generated from a notebook).
"""The website builder's guards (transformer_lib.book.site): the one way it writes a file, kept inside the site's
folder; the one way it reads a file of the book, kept inside the book; and the scan of raw HTML, SVG and CSS for
anything a browser would load or run by itself (an address outside the page, a script, an event handler).
"""
from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

__all__ = ["SiteError", "html_loads"]


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


def _hrefs(raw_html: str) -> list[str]:
    scanner = _Scanner()
    scanner.feed(raw_html)
    scanner.close()
    return scanner.links
