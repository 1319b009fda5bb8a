# Hand-written tool module (not generated from a notebook).
"""The book's diagrams: drawn by code, kept as SVG in docs/figures/, shown in the chapters as PNG attachments.

    python -m transformer_lib.book figures     # redraw every diagram and put it into its chapter
    python -m transformer_lib.book check       # ... fails while a committed picture is stale

Each diagram is a function in one of this package's modules, registered with `@diagram(name, chapter)`, that returns
a `Drawing` (transformer_lib.diagrams.svg). Its source is the code; `docs/figures/<name>.svg` is what it draws, and a
markdown cell shows it as `![what it shows](attachment:<name>.png)`. The PNG travels inside the notebook (a markdown
cell's attachment), so JupyterLab, Colab, GitHub's viewer and the website show it with no file beside the notebook.
Each PNG carries the sha256 of the SVG it was drawn from: `figure_problems` redraws every diagram and names each
SVG or attachment that no longer matches its source, each image that does not decode, each reference with no
attachment or no alt text. Animations (transformer_lib.diagrams.animation, `@animation(name, chapter)`) go the same
way, kept as an animated PNG, docs/figures/<name>.png, that carries the sha256 of its frames' SVG.
"""
from __future__ import annotations

import base64
import hashlib
import importlib
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

__all__ = ["Diagram", "DIAGRAMS", "diagram", "draw_svg", "rasterize", "png_source", "image_refs", "sync_figures",
           "figure_problems", "FIGURES_DIR", "READABLE_PX", "readable_width"]

FIGURES_DIR = Path("docs") / "figures"
# the modules that hold the drawings, in chapter order
_MODULES = ["model", "embeddings", "attention", "blocks", "training", "data", "decoding", "translation", "fast", "gpt",
            "modern"]
READABLE_PX = 9  # the smallest label a page may show, in CSS pixels (readable_width)
SCALE = 2  # PNG pixels per SVG pixel: sharp on a high-density screen, scaled down to the page's width elsewhere
_SOURCE_KEY = "svg-sha256"
IMAGE = re.compile(r"!\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(([^)\s]+)\)")  # alt text may hold x[0]


@dataclass(frozen=True)
class Diagram:
    name: str
    chapter: int
    draw: Callable

    @property
    def attachment(self) -> str:
        return f"{self.name}.png"


DIAGRAMS: dict[str, Diagram] = {}


def diagram(name: str, chapter: int):
    """Register a drawing function under `name` (the file docs/figures/<name>.svg) for chapter `chapter`."""
    def register(draw):
        if name in DIAGRAMS:
            raise ValueError(f"diagram {name!r} is registered twice")
        DIAGRAMS[name] = Diagram(name, chapter, draw)
        return draw
    return register


def _load() -> dict[str, Diagram]:
    for module in _MODULES:
        importlib.import_module(f"transformer_lib.diagrams.{module}")
    return DIAGRAMS


def _animations() -> dict:
    """name -> Animation, every animation of the book (transformer_lib.diagrams.animation).

    Imported by name, as _load imports the drawings: an animation runs chapter 8's model, and the chapters' own
    diagrams, which every chapter imports, must not reach a later chapter through it."""
    return importlib.import_module("transformer_lib.diagrams.animation").ANIMATIONS


def _animation_current(path: Path, sha: str) -> bool:
    try:
        return path.is_file() and png_source(path.read_bytes()) == sha
    except ValueError:
        return False


def draw_svg(name: str) -> str:
    """The SVG text of diagram `name`, drawn now from its source."""
    diagrams = _load()
    if name not in diagrams:
        raise ValueError(f"no diagram named {name!r}; known: {', '.join(sorted(diagrams))}")
    return diagrams[name].draw().svg()


def readable_width(svg: str, smallest: float = READABLE_PX) -> int | None:
    """The narrowest width, in CSS pixels, at which a diagram still shows its smallest label `smallest` pixels tall:
    its canvas width times `smallest` over its smallest font size (None for a picture without text). The website
    keeps each diagram at least this wide; in a narrower column, a phone's, it scrolls sideways (book.site)."""
    sizes = [float(size) for size in re.findall(r'font-size="([0-9.]+)"', svg)]
    if not sizes:
        return None
    head = re.search(r"<svg\b[^>]*>", svg)
    width = re.search(r'\swidth="([0-9.]+)"', head.group(0)) if head else None
    if width is None or min(sizes) <= 0:
        raise ValueError('a picture with labels needs <svg width="..."> and font sizes above 0 to be kept readable')
    return math.ceil(float(width.group(1)) * smallest / min(sizes))


def _sha(svg: str) -> str:
    return hashlib.sha256(svg.encode("utf-8")).hexdigest()


def rasterize(svg: str) -> bytes:
    """A PNG of the SVG (resvg through vl-convert, in matplotlib's DejaVu fonts), palette-compressed, carrying the
    SVG's sha256 in a text chunk."""
    import matplotlib
    import vl_convert
    from PIL import Image, PngImagePlugin

    vl_convert.register_font_directory(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf"))
    png = vl_convert.svg_to_png(svg, scale=SCALE)
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT,
                                                                 dither=Image.Dither.NONE)
    info = PngImagePlugin.PngInfo()
    info.add_text(_SOURCE_KEY, _sha(svg))
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True, pnginfo=info)
    return out.getvalue()


def png_source(png: bytes) -> str | None:
    """The SVG sha256 a PNG was drawn from (None if it carries none). Raises ValueError if it is not a PNG."""
    from PIL import Image

    try:
        image = Image.open(io.BytesIO(png))
        image.load()
    except Exception as err:  # PIL raises several types for damaged data
        raise ValueError(f"not a readable PNG ({err})") from None
    if image.format != "PNG":
        raise ValueError(f"not a PNG but {image.format}")
    return image.info.get(_SOURCE_KEY)


def image_refs(source: str) -> list[tuple[str, str]]:
    """The (alt text, target) of every markdown image in a cell's source."""
    return IMAGE.findall(source)


def _attachment_name(target: str) -> str | None:
    return target[len("attachment:"):] if target.startswith("attachment:") else None


def sync_figures(book, chapters=None, log=print) -> list[Path]:
    """Redraw the diagrams into docs/figures/ and the attachments they are shown by into the chapters (all, or
    the `chapters` given: then only the SVGs of their diagrams); return the files changed. A notebook is written
    only where an attachment changed."""
    import nbformat

    diagrams = _load()
    changed = []
    out_dir = book.root / FIGURES_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    numbers = None if chapters is None else {book.chapters.index(c) + 1 for c in chapters}
    svgs = {name: draw_svg(name) for name in sorted(diagrams)}
    for name in sorted(diagrams):
        if numbers is not None and diagrams[name].chapter not in numbers:
            continue
        path = out_dir / f"{name}.svg"
        if not path.is_file() or path.read_text(encoding="utf-8") != svgs[name]:
            path.write_text(svgs[name], encoding="utf-8")
            changed.append(path)
    for path in out_dir.glob("*.svg"):
        if chapters is None and path.stem not in diagrams:
            path.unlink()
            changed.append(path)
    animations = _animations()
    for name, a in sorted(animations.items()):  # an APNG, docs/figures/<name>.png, redrawn only when stale
        path = out_dir / f"{name}.png"
        if (numbers is None or a.chapter in numbers) and not _animation_current(path, a.draw().sha()):
            path.write_bytes(a.draw().png())
            changed.append(path)
    # attachment -> (the sha256 of its source, its PNG), each computed when a cell shows it
    pictures = {d.attachment: (lambda d=d: _sha(svgs[d.name]), lambda d=d: rasterize(svgs[d.name]))
                for d in diagrams.values()}
    pictures.update({a.attachment: (lambda a=a: a.draw().sha(), lambda a=a: (out_dir / a.attachment).read_bytes())
                     for a in animations.values()})
    for chapter in book.chapters if chapters is None else chapters:
        nb_path = book.root / chapter.file
        nb = nbformat.read(nb_path, as_version=4)
        dirty = False
        for cell in nb.cells:
            if cell.cell_type != "markdown":
                continue
            wanted = {}
            for _, target in image_refs(cell.source):
                name = _attachment_name(target)
                if name in pictures:
                    wanted[name] = pictures[name]
            have = cell.get("attachments", {})
            new = {}
            for name, (sha, png) in wanted.items():
                old = have.get(name, {}).get("image/png")
                try:
                    fresh = old is not None and png_source(base64.b64decode(old)) == sha()
                except ValueError:
                    fresh = False
                new[name] = {"image/png": old if fresh else base64.b64encode(png()).decode()}
            if new != dict(have):
                if new:
                    cell["attachments"] = new
                else:
                    cell.pop("attachments", None)
                dirty = True
        if dirty:
            nbformat.write(nb, nb_path)
            changed.append(nb_path)
    for path in changed:
        log(f"wrote {path.relative_to(book.root)}")
    return changed


def figure_problems(book) -> list[str]:
    """Every stale, broken, missing or unlabelled picture of the book, one sentence each (empty when all is well)."""
    import nbformat

    diagrams = _load()
    problems = []
    fix = "run `python -m transformer_lib.book figures`"
    shas = {}
    for name, d in sorted(diagrams.items()):
        svg = d.draw().svg()
        shas[name] = _sha(svg)
        path = book.root / FIGURES_DIR / f"{name}.svg"
        if not path.is_file():
            problems.append(f"{path.relative_to(book.root)}: missing; {fix}")
        elif path.read_text(encoding="utf-8") != svg:
            problems.append(f"{path.relative_to(book.root)}: stale, its source draws something else; {fix}")
    animations = _animations()
    for name, a in sorted(animations.items()):
        shas[name] = a.draw().sha()
        path = book.root / FIGURES_DIR / a.attachment
        if not _animation_current(path, shas[name]):
            state = "stale, drawn from another version of its frames" if path.is_file() else "missing"
            problems.append(f"{path.relative_to(book.root)}: {state}; run `python -m transformer_lib.book figures "
                            f"{a.chapter}`")
    used = {}
    for chapter in book.chapters:
        nb = nbformat.read(book.root / chapter.file, as_version=4)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "markdown":
                continue
            where = f"{chapter.file} cell {index}"
            attachments = cell.get("attachments", {})
            for alt, target in image_refs(cell.source):
                name = _attachment_name(target)
                if not alt.strip():
                    problems.append(f"{where}: the image {target} has no alt text")
                if name is None:
                    if not re.match(r"https?://", target):
                        problems.append(f"{where}: the image {target} is a relative path, which Colab cannot "
                                        "resolve; draw it as a diagram and reference attachment:<name>.png")
                    continue
                stem = name[:-len(".png")] if name.endswith(".png") else name
                if stem not in shas:
                    problems.append(f"{where}: attachment:{name} names no diagram in transformer_lib.diagrams")
                    continue
                used.setdefault(stem, []).append(where)
                data = attachments.get(name, {}).get("image/png")
                if data is None:
                    problems.append(f"{where}: attachment:{name} is referenced but not attached; {fix}")
                    continue
                try:
                    source = png_source(base64.b64decode(data))
                except ValueError as err:
                    problems.append(f"{where}: attachment {name} is {err}; {fix}")
                    continue
                if source != shas[stem]:
                    problems.append(f"{where}: attachment {name} is stale, drawn from another version of its "
                                    f"source; {fix}")
            if cell.source.count("attachment:") > sum(t.startswith("attachment:") for _, t in image_refs(cell.source)):
                problems.append(f"{where}: an attachment: reference is not a well-formed markdown image "
                                "![alt text](attachment:<name>.png)")
            for name in attachments:
                if f"attachment:{name}" not in cell.source:
                    problems.append(f"{where}: attachment {name} is carried but never shown; {fix}")
    for name, d in sorted({**diagrams, **animations}.items()):
        if name not in used:
            problems.append(f"diagram {name} (chapter {d.chapter}) is shown in no chapter")
        else:
            chapter_file = book.chapters[d.chapter - 1].file
            if not any(w.startswith(chapter_file) for w in used[name]):
                problems.append(f"diagram {name} belongs to chapter {d.chapter} but is not shown in {chapter_file}")
    return problems
