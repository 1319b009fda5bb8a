# Hand-written tool module (not generated from a notebook).
"""The website safe by construction (transformer_lib.book.site): what a page may hold is an allowlist, not a list of
known attacks.

- **The body of every page passes an allowlist sanitizer**, nh3 (Rust's ammonia, which parses HTML as a browser
  does): the tags and attributes the theme and the book use, links to the web, mail and the site only, no script,
  style, comment, frame, object, embed, form control the theme does not draw, or event handler. A chapter's raw HTML,
  its outputs' HTML and Markdown, the README's and the docs' all reach the reader only through it.
- **Every page carries a Content-Security-Policy**: it loads from the site alone (`'self'`; pictures and fonts also
  from `data:`), runs the site's script files and, inline, only the scripts the theme wrote in the page's head (by
  their SHA-256), never a `javascript:` link or an event handler attribute; no frame, object, form posting or `<base>`
  elsewhere. A page with a chart also lets those scripts evaluate strings (`'unsafe-eval'`): vega, as vl-convert
  bundles it, compiles a chart's expressions to functions and lacks the interpreter that would not. A chart's spec is
  a script file the builder wrote (_static/charts/), named by the page, so a page can draw only the book's charts.
- **No SVG is published as a file**: an SVG output, attachment or image the book names by path is drawn to a PNG
  (resvg, through vl-convert), which runs nothing and loads nothing, even opened by itself.
- The theme's two buttons that carry a handler attribute (print, full screen) get it from site.js instead.

What the sanitizer removes from a page is reported by the build, naming the page (`log`).
"""
from __future__ import annotations

import base64
import hashlib
import html as html_text
import re
from collections import Counter
from pathlib import Path

from transformer_lib.book.site_safety import SiteError, _address, _write

__all__ = ["TAGS", "ATTRIBUTES", "POLICY", "sanitize", "refused", "apply_policy", "svg_as_png"]

TAGS = {"a", "abbr", "article", "aside", "b", "blockquote", "br", "button", "caption", "cite", "code", "col",
        "colgroup", "dd", "del", "details", "dfn", "dialog", "div", "dl", "dt", "em", "figcaption", "figure", "footer",
        "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "i", "img", "input", "ins", "kbd", "label", "li",
        "main", "mark", "nav", "ol", "p", "pre", "q", "s", "samp", "section", "small", "span", "strong", "sub",
        "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "time", "tr", "u", "ul", "var", "wbr"}
ATTRIBUTES = {"*": {"class", "id", "title", "role", "lang", "dir", "tabindex", "hidden"},
              "a": {"href", "target", "download"}, "img": {"src", "alt", "loading", "width", "height"},
              "form": {"action", "method"}, "button": {"type"}, "details": {"open"}, "ol": {"start"},
              "input": {"type", "name", "placeholder", "autocomplete", "autocorrect", "autocapitalize", "spellcheck",
                        "value"},
              "td": {"colspan", "rowspan"}, "th": {"colspan", "rowspan", "scope"}, "table": {"border"}}
URL_SCHEMES = {"http", "https", "mailto", "data"}  # and within the site (relative, #anchors); data: for pictures only

# what the theme and pandas write in a page's body that the allowlist leaves out, taken out before the sanitizer so
# that it is not reported: a style for readers without JavaScript, the search page's note to them and its script
# that focuses its box (site.js does it), and the styles pandas puts on a table (the site's styles draw tables)
_KNOWN_EXTRAS = (
    re.compile(r"<noscript>\s*<style>\s*\.pst-js-only \{ display: none !important; \}\s*</style>\s*</noscript>"),
    re.compile(r"<noscript>\s*<div class=\"admonition error\">\s*<p class=\"admonition-title\">Error</p>\s*"
               r"<p>Please activate JavaScript to enable the search functionality\.</p>\s*</div>\s*</noscript>"),
    re.compile(r"<script>\s*// Activate the search field on page load\s*let searchInput = [^<]*</script>"),
    re.compile(r"<style scoped>\s*(?:\.dataframe [a-z: -]+\{\s*[a-z-]+: [a-z]+;\s*\}\s*)+</style>"),
    re.compile(r'(?<=<tr) style="text-align: right;"(?=>)'))
# the theme's handler attributes, each replaced by a name site.js wires to the same action
_THEME_HANDLERS = {'onclick="window.print()"': 'data-tb-action="print"',
                   'onclick="toggleFullScreen()"': 'data-tb-action="fullscreen"'}
_BODY = re.compile(r"<body\b[^>]*>", re.I)
# the theme's scripts after the page's content: script files of the site only, then the page's end
_TAIL = re.compile(r"(?:\s|<!--[^<>]*(?:<body>)?[^<>]*-->|<script(?: defer)? src=\"(?:\.\./)*_static/[^\"<>]+\"></script>"
                   r"|<footer class=\"bd-footer\">\s*</footer>)*</body>\s*</html>\s*$", re.I)
_INLINE_SCRIPT = re.compile(r"<script(?P<attrs>[^>]*)>(?P<code>.*?)</script>", re.S | re.I)
_TAG = re.compile(r"<([a-zA-Z][a-zA-Z0-9-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>")
POLICY = ("default-src 'self'; script-src 'self'{eval} {hashes}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
          "font-src 'self' data:; connect-src 'self'; media-src 'self'; object-src 'none'; frame-src 'none'; "
          "worker-src 'self'; base-uri 'none'; form-action 'self'")


def sanitize(html: str) -> str:
    """`html` (a page's body, a fragment) with only the allowed tags, attributes and addresses left; the text of a tag
    that is not allowed stays, a script's or style's does not. Every picture gets loading="lazy" (Sphinx writes a
    Markdown picture without it), so a chapter's diagrams load as the reader comes to them."""
    import nh3

    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                     generic_attribute_prefixes={"data-", "aria-"}, clean_content_tags={"script", "style"},
                     strip_comments=True, link_rel=None, attribute_filter=_within_site,
                     set_tag_attribute_values={"img": {"loading": "lazy"}})  # a picture loads as the reader nears it


def _within_site(tag: str, attribute: str, value: str) -> str | None:
    """A form's action and a picture's address stay only where they lead within the site (no scheme, no host; a
    picture may be a data: URL of a picture type); a data: URL is a picture's address only."""
    if (tag, attribute) in (("form", "action"), ("img", "src")) and _LEAVES.match(value):
        return None
    if (tag, attribute) != ("img", "src") and re.match(r"\s*data:", value, re.I):
        return None
    return value


# an address with a scheme or a host (a picture's data: URL of a picture type excepted): one that may leave the site
_LEAVES = re.compile(r"\s*(?!data:image/(?:png|jpeg|gif|webp)[;,])(?:[a-z][a-z0-9+.-]*:|//|\\)", re.I)


_VALUED = re.compile(r"""([^\s=/>"']+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s>]*))?""")


def _pieces(html: str, values: bool = True) -> Counter:
    """The start tags and attributes of `html`, counted: <tag>, and name=value (unescaped) or, values=False, name=."""
    found = Counter()
    for tag in _TAG.finditer(html):
        found[f"<{tag.group(1).lower()}>"] += 1
        for name, value in _VALUED.findall(tag.group(2)):
            value = value[1:-1] if value[:1] in ("'", '"') else value
            found[f"{name.lower()}=" + (_address(html_text.unescape(value)) if values else "")] += 1
    return found


def refused(html: str) -> list[str]:
    """What the allowlist would cut from a fragment of raw HTML (a cell's, an output's, the README's): each tag and
    each attribute with its value that sanitize() leaves out, such as <script>, <iframe>, onerror=..., a style, or
    an address that leaves the site where only the site's may stand. Empty when the fragment reaches the reader
    whole; the build refuses it otherwise, naming where it stands."""
    for extra in _KNOWN_EXTRAS:
        html = extra.sub("", html)
    return sorted((_pieces(html) - _pieces(sanitize(html))).keys())


def _removed(before: str, after: str) -> list[str]:
    """The tags and attribute names the sanitizer took out of a page, for the build's log."""
    cut = _pieces(before, values=False) - _pieces(after, values=False)
    return sorted(part + (f" x{n}" if n > 1 else "") for part, n in cut.items())


def _policy_page(text: str, rel: str) -> tuple[str, list[str]]:
    """A built page with its body sanitized and the policy in its head; returns (page, what the sanitizer removed)."""
    for old, new in _THEME_HANDLERS.items():
        text = text.replace(old, new)
    for extra in _KNOWN_EXTRAS:
        text = extra.sub("", text)
    body, tail = _BODY.search(text), _TAIL.search(text)
    if body is None or tail is None or tail.start() < body.end():
        raise SiteError(f"{rel}: no <body> and theme scripts at its end where the theme writes them; the theme changed "
                        "how it lays out a page")
    head, inside = text[:body.start()], text[body.end():tail.start()]
    clean = sanitize(inside)
    scripts = [m.group("code") for m in _INLINE_SCRIPT.finditer(head)
               if not re.search(r"\bsrc\s*=", m.group("attrs"))]
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()}'"
                      for code in dict.fromkeys(scripts))
    # vega, as bundled, compiles a chart's expressions to functions: a page with a chart lets scripts evaluate strings
    evaluates = " 'unsafe-eval'" if re.search(r'<div class="tb-chart"[^>]* data-chart="', clean) else ""
    policy = POLICY.format(hashes=hashes, eval=evaluates)
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}" />'
    charset = re.search(r"<meta charset=[^>]*>", head, re.I)
    if charset is None:
        raise SiteError(f"{rel}: no <meta charset> in its head; the theme changed how it writes a page's head")
    head = head[:charset.end()] + "\n    " + meta + head[charset.end():]
    return head + text[body.start():body.end()] + clean + text[tail.start():], _removed(inside, clean)


def apply_policy(folder: Path, log=print) -> int:
    """Sanitize the body of every page of the built site in `folder` and give each the policy; returns how many pages.
    What the sanitizer removes from a page is logged, naming the page and the tags."""
    count = 0
    for path in sorted(folder.rglob("*.html")):
        rel = path.relative_to(folder).as_posix()
        if rel.startswith("_static/"):
            continue
        page, removed = _policy_page(path.read_text(encoding="utf-8"), rel)
        if removed:
            log(f"site: {rel}: removed {', '.join(removed)} (not on the allowlist of transformer_lib/book/site_policy.py)")
        path.unlink()
        _write(folder, rel, page)
        count += 1
    return count


def svg_as_png(svg: str | bytes, where: str) -> bytes:
    """An SVG picture drawn to a PNG (at twice its size, for sharp lines): a file a browser opens as a picture only.
    `where` names it in the error for an SVG that cannot be drawn."""
    import vl_convert

    text = svg.decode("utf-8", "replace") if isinstance(svg, bytes) else svg
    try:
        return bytes(vl_convert.svg_to_png(text, scale=2))
    except Exception as err:  # vl-convert raises its own errors for a picture it cannot read
        raise SiteError(f"{where}: an SVG picture that cannot be drawn ({str(err).splitlines()[0][:120]}); fix or "
                        "remove it") from None
