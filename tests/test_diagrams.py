"""The book's diagrams (transformer_lib.diagrams): every one drawn from its source, parsed, rasterised and shown in
its chapter with alt text; stale, broken or missing pictures are named; one palette and one font."""
import base64
from collections import Counter
import io
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest
from PIL import Image

import transformer_lib.book as bk
from transformer_lib.book import cli
import transformer_lib.diagrams as dg
from transformer_lib.diagrams.svg import ACCENT, BACKGROUND, FONT, INK, MONO, MUTED, PARTS, text_width

ROOT = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"
DIAGRAMS = dg._load()


@pytest.fixture(scope="module")
def book():
    return bk.load_book(ROOT)


def _shown(book):
    """chapter number -> names of the diagrams its notebook shows."""
    shown = {}
    for number, chapter in enumerate(book.chapters, 1):
        nb = nbformat.read(ROOT / chapter.file, as_version=4)
        names = shown.setdefault(number, set())
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                names.update(t[len("attachment:"):-len(".png")] for _, t in dg.image_refs(cell.source)
                             if t.startswith("attachment:"))
    return shown


def test_the_book_has_at_least_30_diagrams_and_every_chapter_at_least_2(book):
    shown = _shown(book)
    assert len(set().union(*shown.values())) >= 30
    for number, names in shown.items():
        assert len(names) >= 2, f"chapter {number} shows {sorted(names)}"


def test_every_picture_of_the_book_is_current_attached_labelled_and_shown(book):
    assert dg.figure_problems(book) == []


def test_every_alt_text_says_what_the_picture_shows(book):
    for chapter in book.chapters:
        for cell in nbformat.read(ROOT / chapter.file, as_version=4).cells:
            if cell.cell_type == "markdown":
                for alt, target in dg.image_refs(cell.source):
                    if target.startswith("attachment:"):
                        assert len(alt.split()) >= 6, (chapter.file, target, alt)


@pytest.mark.parametrize("name", sorted(DIAGRAMS))
def test_diagram_parses_rasterises_and_keeps_its_text_inside_the_canvas(name):
    svg = dg.draw_svg(name)
    assert svg == dg.draw_svg(name)  # the same source draws the same file
    root = ET.fromstring(svg)
    width, height = float(root.get("width")), float(root.get("height"))
    assert root.find(f"{SVG}title").text.strip()
    for text in root.iter(f"{SVG}text"):
        family = text.get("font-family")
        assert family in (FONT, MONO), family
        if text.get("transform"):
            continue
        size, x = float(text.get("font-size")), float(text.get("x"))
        w = text_width(text.text or "", size, mono=family == MONO)
        left = {"start": x, "middle": x - w / 2, "end": x - w}[text.get("text-anchor")]
        assert -0.5 <= left and left + w <= width + 0.5, f"{name}: text {text.text!r} runs off the canvas"
        assert 0 <= float(text.get("y")) <= height + 0.5, f"{name}: text {text.text!r} below or above the canvas"
    png = dg.rasterize(svg)
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size == (round(width * dg.SCALE), round(height * dg.SCALE))
    assert len(image.convert("RGB").getcolors(1 << 16)) > 8  # drawn, not blank
    assert dg.png_source(png) == dg._sha(svg)


def _palette_colour(colour):
    allowed = {c.upper() for pair in PARTS.values() for c in pair} | {INK, MUTED, ACCENT, BACKGROUND, "#FFFFFF"}
    if colour.upper() in allowed or colour == "none":
        return True
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    if r == g == b:  # greys: frames, grid lines, faded parts
        return True
    # the one value scale, shade(v): on the line from (247, 251, 255) to (8, 69, 148)
    v = (247 - r) / (247 - 8)
    if all(abs(round(lo + (hi - lo) * v) - c) <= 1 for lo, hi, c in zip((247, 251, 255), (8, 69, 148), (r, g, b))):
        return True
    # the signed scale, for values in [-1, 1]: matplotlib's RdBu, as the chapters' heatmaps of signed values draw them
    from matplotlib import colormaps

    return any(tuple(round(255 * x) for x in colormaps["RdBu"](i)[:3]) == (r, g, b) for i in range(256))


@pytest.mark.parametrize("name", sorted(DIAGRAMS))
def test_diagram_uses_the_books_palette(name):
    colours = set(re.findall(r'(?:fill|stroke)="([^"]+)"', dg.draw_svg(name))) - {"100%"}
    odd = sorted(c for c in colours if not _palette_colour(c))
    assert not odd, f"{name} uses colours outside the palette: {odd}"


# ---- the check names what is wrong


@pytest.fixture
def copy(tmp_path):
    """A copy of the book's manifest, notebooks and figures, to damage."""
    shutil.copy(ROOT / "book.yml", tmp_path / "book.yml")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copytree(ROOT / dg.FIGURES_DIR, tmp_path / dg.FIGURES_DIR)
    return bk.load_book(tmp_path)


def _first_figure_cell(book):
    for chapter in book.chapters:
        path = book.root / chapter.file
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown" and cell.get("attachments"):
                return path, nb, index
    raise AssertionError("no chapter shows a diagram")


def test_check_names_a_stale_svg_and_attachment_after_a_drawing_changes(copy, monkeypatch):
    name = sorted(DIAGRAMS)[0]
    original = DIAGRAMS[name]

    def changed():
        d = original.draw()
        d.text(10, 10, "a change", anchor="start")
        return d

    monkeypatch.setitem(dg.DIAGRAMS, name, dg.Diagram(name, original.chapter, changed))
    problems = "\n".join(dg.figure_problems(copy))
    assert f"docs/figures/{name}.svg: stale" in problems
    assert f"attachment {name}.png is stale" in problems
    dg.sync_figures(copy, log=lambda *_: None)  # redrawing mends both
    assert dg.figure_problems(copy) == []


def test_check_names_a_damaged_attachment_a_missing_alt_and_a_relative_image(copy):
    path, nb, index = _first_figure_cell(copy)
    cell = nb.cells[index]
    attachment = next(iter(cell.attachments))
    cell.attachments[attachment]["image/png"] = base64.b64encode(b"not a png").decode()
    cell.source = re.sub(r"!\[[^\]]*\]\(attachment:", "![](attachment:", cell.source, count=1)
    cell.source += "\n\n![the model](figures/model.png)"
    nbformat.write(nb, path)
    problems = "\n".join(dg.figure_problems(copy))
    where = f"{path.relative_to(copy.root)} cell {index}"
    assert f"{where}: attachment {attachment} is not a readable PNG" in problems
    assert f"{where}: the image attachment:{attachment} has no alt text" in problems
    assert f"{where}: the image figures/model.png is a relative path, which Colab cannot resolve" in problems


def test_check_names_an_unattached_reference_and_a_diagram_no_chapter_shows(copy):
    path, nb, index = _first_figure_cell(copy)
    cell = nb.cells[index]
    attachment = next(iter(cell.attachments))
    del cell.attachments[attachment]
    nbformat.write(nb, path)
    problems = "\n".join(dg.figure_problems(copy))
    assert f"attachment:{attachment} is referenced but not attached" in problems
    dg.sync_figures(copy, log=lambda *_: None)
    assert dg.figure_problems(copy) == []
    cell.source = cell.source.replace(f"attachment:{attachment}", "attachment:no-such-diagram.png")
    nbformat.write(nb, path)
    problems = "\n".join(dg.figure_problems(copy))
    assert "attachment:no-such-diagram.png names no diagram" in problems


def test_book_check_fails_on_a_stale_picture(copy, capsys):
    svg = copy.root / dg.FIGURES_DIR / f"{sorted(DIAGRAMS)[0]}.svg"
    svg.write_text(svg.read_text(encoding="utf-8").replace("</svg>", "<!-- edited --></svg>"), encoding="utf-8")
    assert cli.main(["--root", str(copy.root), "check"]) == 1
    assert f"{svg.relative_to(copy.root)}: stale" in capsys.readouterr().err


# ---- numbers a picture shows are the numbers its chapter computes


def _output_of(notebook: str, marker: str) -> str:
    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and marker in c.source)
    return "".join(o.get("text", "") for o in cell.outputs)


def test_chapter_2s_causal_picture_shows_the_weights_its_cell_prints():
    from transformer_lib.diagrams.attention import CAUSAL_WEIGHTS

    printed = _output_of("02_attention.ipynb", "weights_causal = hidden.softmax").splitlines()[1:7]
    rows = [[float(v) for v in line.split()[1:]] for line in printed]
    assert [row[:i + 1] for i, row in enumerate(rows)] == CAUSAL_WEIGHTS
    assert all(v == 0 for i, row in enumerate(rows) for v in row[i + 1:])  # the picture's blank upper triangle


def test_chapter_6s_pipeline_picture_shows_the_pieces_and_ids_its_chapter_makes():
    from transformer_lib.data import BPE, SubwordTokenizer, Tokenizer, Vocab, learn_bpe, pre_tokens
    from transformer_lib.diagrams.data import PAD_ID, PIECES, ROWS, SENTENCE
    from transformer_lib.multi30k import DataUnavailable, load_multi30k

    assert f"{sum(PIECES, [])}" in _output_of("06_data.ipynb", "bpe = BPE(merges")
    try:  # the ids are those of the chapter's vocabulary, learned from Multi30k's training split
        train = load_multi30k("train", download=False)
    except DataUnavailable as err:
        pytest.skip(f"the ids need Multi30k, which is not here ({err}); the pieces were checked")
    tok_de, tok_en = Tokenizer("de"), Tokenizer("en")
    counts = Counter(w for de, en in train for w in [*pre_tokens(tok_de, de), *pre_tokens(tok_en, en)]
                     if w != Vocab.UNK)
    bpe = BPE(learn_bpe(counts, 8000), "".join({c for w in counts for c in w if c != "\u2581"} | {" "}))
    vocab, sub_en = bpe.vocab(), SubwordTokenizer("en", bpe)
    assert sub_en(SENTENCE) == sum(PIECES, [])
    sentences = [SENTENCE, "Two dogs play in the snow.", "A dog runs."]
    assert [vocab.encode(sub_en(s), add_bos_eos=True) for s in sentences] == ROWS and vocab.pad_idx == PAD_ID


def test_readable_width_keeps_the_smallest_label_at_9_css_px_and_the_site_gives_it_to_every_diagram(tmp_path):
    from transformer_lib.book import load_book
    from transformer_lib.book.site_chapters import _diagram_widths
    from transformer_lib.diagrams import readable_width

    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="800" height="100"><text font-size="12">a</text>'
           '<text font-size="10">b</text></svg>')
    assert readable_width(svg) == 720  # 800 x 9 / 10: the 10-px label is 9 px at 720 px wide
    assert readable_width(svg, smallest=12) == 960
    assert readable_width('<svg width="800"><rect width="1" height="1"/></svg>') is None  # no label to keep
    with pytest.raises(ValueError, match="width"):
        readable_width('<svg viewBox="0 0 800 100"><text font-size="10">b</text></svg>')
    css = _diagram_widths(load_book(ROOT))
    figures = sorted((ROOT / "docs" / "figures").glob("*.svg"))
    for path in figures:
        width = readable_width(path.read_text(encoding="utf-8"))
        assert f'img[src$="/{path.stem}.png"] {{ --tb-readable: {width}px; }}' in css, path.name
    assert len(figures) >= 50
