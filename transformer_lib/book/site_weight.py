# Hand-written tool module (not generated from a notebook).
"""What every page of the website loads, kept light (transformer_lib.book.site): the theme's icons come from Font
Awesome's web fonts cut down to the icons the site shows, not from its 1.5 MB fontawesome.js; Sphinx's search
scripts and index load on the search page only; every picture loads when it comes near the screen (the sanitizer
of site_policy.py marks it lazy), and the chart library when a chart does (site.js).
"""
from __future__ import annotations

import io
import re
from pathlib import Path

from transformer_lib.book.site_safety import SiteError, _inside, _write

__all__ = ["theme_templates", "subset_icon_fonts"]

# the theme's layout without the search tools it puts on every page for a search-as-you-type this site turns off
# (search.html loads its own); the rest of the block as the theme writes it
LAYOUT = """{% extends "!layout.html" %}
{%- block extrahead %}
  <meta name="viewport" content="width=device-width, initial-scale=1"/>
  <meta name="docsearch:language" content="{{ language }}"/>
  <meta name="docsearch:version" content="{{ version }}" />
{%- endblock extrahead %}
"""
ICON_FONTS = "_static/vendor/fontawesome/webfonts"
_ICON = re.compile(r"\bfa-[a-z0-9-]+")
_GLYPH = re.compile(r"((?:\.fa-[a-z0-9-]+:(?:before|after),?)+)\{content:\"\\([0-9a-f]{4,5})\"\}")


def _theme_file(*parts: str) -> Path:
    import pydata_sphinx_theme

    return Path(pydata_sphinx_theme.__file__).parent.joinpath("theme", "pydata_sphinx_theme", *parts)


def theme_templates() -> dict[str, str]:
    """Templates that override the theme's: {path under _templates/: text}. The asset macros lose the line that
    loads fontawesome.js (the stylesheet draws the icons from the web fonts); the layout loses the search tools."""
    path = _theme_file("static", "webpack-macros.html")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if "scripts/fontawesome.js" not in line]
    if len(lines) - len(kept) != 1:
        raise SiteError(f"{path}: expected one line loading scripts/fontawesome.js, found {len(lines) - len(kept)}; "
                        "the theme changed how it loads its icons")
    layout = _theme_file("layout.html").read_text(encoding="utf-8")
    if "{%- block extrahead %}" not in layout or "searchindex.js" not in layout:
        raise SiteError(f"{_theme_file('layout.html')}: no extrahead block loading searchindex.js; the theme changed "
                        "how it loads its search")
    return {"static/webpack-macros.html": "".join(kept), "layout.html": LAYOUT}


def _glyph_rule(match: re.Match, icons: set[str]) -> str:
    """A stylesheet's rule giving icons their glyph, kept for the icons the site shows only (none: the rule goes)."""
    selectors = [sel for sel in match.group(1).split(",")
                 if sel and re.match(r"\.(fa-[a-z0-9-]+):", sel).group(1) in icons]
    return f'{",".join(selectors)}{{content:"\\{match.group(2)}"}}' if selectors else ""


def subset_icon_fonts(folder: Path) -> list[str]:
    """Cut the built site's Font Awesome fonts to the icons its pages and scripts name (a class `fa-...` that the
    theme's stylesheet gives a glyph), and the stylesheets' glyph rules to those icons (about 90 KB of rules for
    about 2,000 icons, on every page); returns those icons' names. Each font keeps its file name and format."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    css = "\n".join(p.read_text(encoding="utf-8") for p in (folder / "_static" / "styles").glob("*.css"))
    glyphs = {}  # icon class -> its code point
    for names, code in _GLYPH.findall(css):
        for name in re.findall(r"fa-[a-z0-9-]+", names):
            glyphs[name] = int(code, 16)
    used = set()
    for path in list(folder.rglob("*.html")) + list((folder / "_static").rglob("*.js")):
        used |= set(_ICON.findall(path.read_text(encoding="utf-8", errors="replace")))
    icons = sorted(name for name in used if name in glyphs)
    for path in sorted((folder / "_static" / "styles").glob("*.css")):
        text = path.read_text(encoding="utf-8")
        cut = _GLYPH.sub(lambda m: _glyph_rule(m, set(icons)), text)
        if cut != text:
            rel = path.relative_to(folder).as_posix()
            path.unlink()
            _write(folder, rel, cut)
    fonts = _inside(folder, ICON_FONTS)
    if not icons or not fonts.is_dir():
        raise SiteError(f"{ICON_FONTS}: no Font Awesome fonts, or no icon the pages name; the theme changed")
    for path in sorted(fonts.iterdir()):
        if path.suffix not in (".woff2", ".ttf"):
            continue
        font = TTFont(path, recalcTimestamp=False)  # its date as published: two builds write the same bytes
        options = subset.Options()
        options.flavor = "woff2" if path.suffix == ".woff2" else None
        options.layout_features = ["*"]
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=[glyphs[name] for name in icons])
        subsetter.subset(font)
        out = io.BytesIO()
        font.flavor = options.flavor
        font.save(out)
        path.unlink()  # the theme's font, copied in whole: its cut takes its place
        _write(folder, f"{ICON_FONTS}/{path.name}", out.getvalue())
    return icons

