"""Chapter 8's animation (transformer_lib.diagrams.animation): the shipped model's own greedy decoding, a frame per
step, with its cross-attention and candidates; deterministic, light, current, and shown with alt text."""
import base64
import io
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest
import torch
from PIL import Image

import transformer_lib.book as bk
import transformer_lib.diagrams as dg
from transformer_lib.decoding import attention_maps, translate_tokens
from transformer_lib.diagrams import animation as an
from transformer_lib.diagrams.svg import MONO, shade
from transformer_lib.translation import pretrained, translate

ROOT = Path(__file__).resolve().parents[1]
NAME = "ch08-decoder-at-work"
FILE = ROOT / dg.FIGURES_DIR / f"{NAME}.png"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def shipped():
    return pretrained()


@pytest.fixture(scope="module")
def dec():
    return an.decode_with_attention(an.SENTENCE)


@pytest.fixture(scope="module")
def frames():
    return an.ANIMATIONS[NAME].draw()


def _texts(drawing):
    """Every text of a frame as (y, x, text, monospaced)."""
    root = ET.fromstring(drawing.svg())
    return [(float(t.get("y")), float(t.get("x")), t.text, t.get("font-family") == MONO) for t in root.iter(f"{SVG}text")]


def _output_row(drawing, bos):
    """The tokens of the frame's output row, left to right: the row of monospaced texts that starts with <s>."""
    texts = [t for t in _texts(drawing) if t[3]]
    y = next(y for y, _, s, _ in texts if s == bos)
    return [s for _, _, s, _ in sorted(t for t in texts if t[0] == y)]


def test_a_frame_per_decoding_step_the_tokens_the_models_greedy_output(shipped, dec, frames):
    src_vocab, tgt_vocab = shipped.model.vocabs
    greedy = translate_tokens(shipped.model, [an.SENTENCE], shipped.src_tok, src_vocab, tgt_vocab, beam_size=1)[0]
    assert dec.output == [*greedy, tgt_vocab.itos[tgt_vocab.eos_idx]]  # every output token, then </s>
    assert len(frames.drawings) == len(greedy) + 1 == len(dec.steps)
    shown = [an._shown(t) for t in greedy]
    for t, drawing in enumerate(frames.drawings):  # the output grows by the token each step chose
        assert _output_row(drawing, dec.bos) == [dec.bos, *shown, dec.eos][: t + 2]
    assert dec.translation == translate(shipped.model, an.SENTENCE, beam_size=1)
    assert dec.translation == translate(shipped.model, an.SENTENCE)  # chapter 8's beam search writes the same
    assert any(s == f"Translation: {dec.translation}" for _, _, s, _ in _texts(frames.drawings[-1]))


def test_the_attention_drawn_is_the_models_cross_attention(shipped, dec, frames):
    src_vocab, tgt_vocab = shipped.model.vocabs
    ids = [tgt_vocab.bos_idx, *(tgt_vocab.stoi[t] for t in dec.output[:-1])]
    cross = attention_maps(shipped.model, src_vocab.encode(list(dec.source)), ids)["cross"]  # teacher-forced
    assert dec.layer == cross.size(0) and dec.heads == cross.size(1) == 8  # the last layer, its 8 heads
    expected = cross[-1].mean(dim=0)  # (T, S): a row per step
    drawn = torch.tensor([s.attention for s in dec.steps])
    assert torch.allclose(drawn, expected, atol=1e-4) and torch.allclose(drawn.sum(-1), torch.ones(len(ids)))
    for step, drawing in zip(dec.steps, frames.drawings):
        fills = drawing.svg()
        assert all(f'fill="{shade(round(w, 2))}"' in fills for w in step.attention)
        assert all(f"{round(w, 2):.0%}" in [s for _, _, s, _ in _texts(drawing)] for w in step.attention)


def test_the_candidates_are_the_likeliest_tokens_best_first(dec, frames):
    for step, drawing in zip(dec.steps, frames.drawings):
        probs = [p for _, p in step.candidates]
        assert len(probs) == an.TOP and probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-6
        texts = [s for _, _, s, _ in _texts(drawing)]
        labels = [s for _, x, s, mono in sorted(_texts(drawing)) if mono and x == an.LABEL_X]  # top to bottom
        assert labels == [an._shown(t) for t, _ in step.candidates]
        assert all(an._percent(p) in texts for p in probs) and "\u2190 greedy choice" in texts
    assert an._percent(0.914) == "91%" and an._percent(0.023) == "2.3%" and an._percent(0.0004) == "<0.1%"


def test_the_animation_is_deterministic_and_its_file_current_light_and_animated(frames):
    again_source = frames.source()
    an.decode_with_attention.cache_clear()  # decode again from the model: the same frames, the same bytes
    assert an.decoder_at_work().source() == again_source
    png = frames.png()
    assert png == frames.png()
    committed = FILE.read_bytes()
    assert dg.png_source(committed) == dg.png_source(png) == frames.sha()
    assert len(committed) < 400_000
    image = Image.open(io.BytesIO(committed))
    assert image.format == "PNG" and image.info["default_image"] and image.size == (an.WIDTH * an.SCALE,
                                                                                     an.HEIGHT * an.SCALE)
    assert image.n_frames == len(frames.drawings) + 1  # the still image (the last frame), then every frame
    durations = []
    for i in range(1, image.n_frames):
        image.seek(i)
        durations.append(image.info["duration"])
    assert durations == frames.durations and min(durations) >= 2000 and durations[-1] == max(durations)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="sentence must be a non-blank string"):
        an.decode_with_attention("  ")
    with pytest.raises(ValueError, match="layer must be a decoder layer from 1 to 3"):
        an.decode_with_attention(an.SENTENCE, layer=0)
    with pytest.raises(ValueError, match="top must be a whole number"):
        an.decode_with_attention(an.SENTENCE, top=0)
    with pytest.raises(ValueError, match="one duration per frame"):
        an.Frames([an.Drawing(10, 10, "x")], [])
    with pytest.raises(ValueError, match="too wide for one row"):
        an._row(["schneeballschlacht"] * 12, 22)


def _chapter_8_cells(book):
    path = book.root / book.chapters[7].file
    nb = nbformat.read(path, as_version=4)
    return path, nb, [c for c in nb.cells if c.cell_type == "markdown" and f"attachment:{NAME}.png" in c.source]


def test_chapter_8_shows_it_with_alt_text_saying_what_it_shows(dec):
    book = bk.load_book(ROOT)
    _, _, cells = _chapter_8_cells(book)
    assert len(cells) == 1, "chapter 8 shows the animation once"
    (alt, _), = [r for r in dg.image_refs(cells[0].source) if r[1] == f"attachment:{NAME}.png"]
    assert alt == an.alt_text(dec)
    for words in (dec.sentence, dec.translation, f"layer {dec.layer}", f"{dec.heads} heads", f"{len(dec.steps)} in all"):
        assert words in alt
    attached = base64.b64decode(cells[0].attachments[f"{NAME}.png"]["image/png"])
    assert dg.png_source(attached) == an.ANIMATIONS[NAME].draw().sha()


def test_the_check_names_a_stale_or_missing_animation_and_figures_8_mends_it(tmp_path):
    shutil.copy(ROOT / "book.yml", tmp_path / "book.yml")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copytree(ROOT / dg.FIGURES_DIR, tmp_path / dg.FIGURES_DIR)
    book = bk.load_book(tmp_path)
    path, nb, cells = _chapter_8_cells(book)
    if not cells:  # a cell to show it, as chapter 8's
        nb.cells.append(nbformat.v4.new_markdown_cell(f"![{an.alt_text()}](attachment:{NAME}.png)"))
        nbformat.write(nb, path)
    figure = tmp_path / dg.FIGURES_DIR / f"{NAME}.png"
    image = Image.open(figure)
    image.load()
    image.save(figure, format="PNG")  # the first frame alone, carrying no source: a stale file
    assert f"docs/figures/{NAME}.png: stale" in "\n".join(dg.figure_problems(book))
    figure.unlink()
    problems = "\n".join(dg.figure_problems(book))
    assert f"docs/figures/{NAME}.png: missing; run `python -m transformer_lib.book figures 8`" in problems
    dg.sync_figures(book, chapters=bk.select_chapters(book, ["8"]), log=lambda *_: None)
    assert figure.read_bytes() == FILE.read_bytes()
    assert not [p for p in dg.figure_problems(book) if NAME in p]
    _, _, cells = _chapter_8_cells(book)
    assert base64.b64decode(cells[0].attachments[f"{NAME}.png"]["image/png"]) == FILE.read_bytes()


def test_no_label_of_a_frame_is_smaller_than_small_which_the_website_keeps_readable(frames):
    """an.SMALL is the smallest font size any frame uses; the website keeps the animation wide enough for it to be
    9 CSS px (book.site_chapters._diagram_widths), so a label drawn smaller would shrink below that on a phone."""
    sizes = {float(s) for drawing in frames.drawings for s in re.findall(r'font-size="([0-9.]+)"', drawing.svg())}
    assert min(sizes) == an.SMALL, sorted(sizes)
    assert all(drawing.width == an.WIDTH for drawing in frames.drawings)
