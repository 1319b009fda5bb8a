"""The live translator's tokenizer (site_static/translator/tokenizer.js) against the book's, run by Node: spaCy's
tokens and their spaces, the shipped model's pieces and ids for every German sentence of test2016 and the validation
set (the offline corpus where Multi30k is absent) and for random strings of the characters affixes cut, and the
detokenized English of every reference. Skipped, with the reason, where no `node` is installed."""
import json
import random
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest

from transformer_lib.book.live import to_javascript, tokenizer_assets
from transformer_lib.data import load_translation_data
from transformer_lib.translation import pretrained

TOKENIZER_JS = (Path(__file__).resolve().parents[1] / "transformer_lib" / "book" / "site_static" / "translator"
                / "tokenizer.js")
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="no `node` here: the page's tokenizer runs in JavaScript")

_RUN = """
const { SubwordTokenizer } = require(process.argv[1]);
const a = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const tok = new SubwordTokenizer(a.rules, a.tokenizer, a.src_itos, a.tgt_itos);
const out = a.texts.map((t) => [tok.spacy.tokenize(tok.normalize(t)).map(([w, s]) => w + (s ? " " : "")),
                                tok.pieces(t), tok.encode(t)]);
const english = a.english.map((ids) => tok.decode(ids));
process.stdout.write(JSON.stringify({ out, english }));
"""


def _fuzz(n: int, seed: int = 0) -> list[str]:
    """Strings of the characters and pieces spaCy's affixes, infixes and special cases act on."""
    rng = random.Random(seed)
    alphabet = [*"abcdefghijklmnopqrstuvwxyzäöüßABCÄÖÜ0123456789  ",
                *".,;:!?'\"()[]{}-–—/\\&%$€+*=<>#@_~^`´‘’‚„“”«»…·°§|",
                "z.B.", "usw.", "http://", ".com", ":)", ":-)", "(:", "'s", "’s", "Nr.", "s.", "\t", "\u00a0", "😀",
                "e\u0301", "mcdonald"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(n)]


@pytest.fixture(scope="module")
def agreement(tmp_path_factory):
    """Both tokenizers on the sentences: (texts, the book's results, the page's)."""
    if NODE is None:
        pytest.skip("no `node` here: the page's tokenizer runs in JavaScript")
    model = pretrained().model
    assets = tokenizer_assets(model)
    src_tok, tgt_tok = model.tokenizers
    src_vocab, tgt_vocab = model.vocabs
    pairs = [p for split in ("test2016", "val") for p in load_translation_data(split)[0]]
    texts = [de for de, _ in pairs] + _fuzz(3000)
    english = [tgt_vocab.encode(tgt_tok(en)) for _, en in pairs]
    book = [([w.text_with_ws for w in src_tok._nlp.tokenizer(src_tok.normalize(t))], src_tok(t),
             src_vocab.encode(src_tok(t))) for t in texts]
    book_english = [tgt_tok.detokenize(tgt_vocab.decode(ids)) for ids in english]
    path = tmp_path_factory.mktemp("live") / "assets.json"
    path.write_text(json.dumps({**assets, "texts": texts, "english": english}, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run([NODE, "-e", _RUN, str(TOKENIZER_JS), str(path)], capture_output=True, text=True,
                          timeout=600, check=True)
    page = json.loads(done.stdout)
    return texts, len(pairs), book, [tuple(r) for r in page["out"]], book_english, page["english"]


@needs_node
def test_the_page_cuts_every_sentence_as_spacy_does(agreement):
    texts, n_pairs, book, page, _, _ = agreement
    differ = [(t, b[0], p[0]) for t, b, p in zip(texts, book, page) if b[0] != p[0]]
    assert not differ, f"{len(differ)} of {len(texts)} differ, first: {differ[0]}"
    assert n_pairs >= 200 and len(texts) == n_pairs + 3000


@needs_node
def test_the_page_gives_the_shipped_models_pieces_and_ids(agreement):
    texts, _, book, page, _, _ = agreement
    differ = [(t, b[1:], p[1:]) for t, b, p in zip(texts, book, page) if (b[1], b[2]) != (p[1], p[2])]
    assert not differ, f"{len(differ)} of {len(texts)} differ, first: {differ[0]}"


@needs_node
def test_the_page_detokenizes_every_reference_as_the_book_does(agreement):
    _, _, _, _, book_english, page_english = agreement
    differ = [(b, p) for b, p in zip(book_english, page_english) if b != p]
    assert not differ, f"{len(differ)} of {len(book_english)} differ, first: {differ[0]}"


def test_python_patterns_become_javascripts():
    assert to_javascript(r"(?u)^[\w\-\.]+\d\!") == r"^[\p{L}\p{N}_\-\.]+\p{Nd}!"
    assert to_javascript(r"\w\U0001F600") == r"[\p{L}\p{N}_]\u{1F600}"
    with pytest.raises(ValueError, match=r"\\b"):
        to_javascript(r"\bword")


MODEL_JS = TOKENIZER_JS.parent / "model.js"
_TRANSLATE = """
const fs = require("fs");
const { SubwordTokenizer } = require(process.argv[1]);
const { Translator } = require(process.argv[2]);
const a = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const buf = fs.readFileSync(process.argv[4]);
const tok = new SubwordTokenizer(a.rules, a.tokenizer, a.src_itos, a.tgt_itos);
const tr = new Translator(a.table, buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length), a.config);
const out = a.texts.map((text) => {
  const src = tok.encode(text), steps = tr.greedy(src);
  return { src, greedy: steps.map((s) => s.token), cross: steps.map((s) => s.cross.map((w) => Array.from(w))),
           beam: tr.beam(src, 5, 0.6).tokens };
});
process.stdout.write(JSON.stringify(out));
"""


@needs_node
def test_the_page_translates_as_translate_does_and_attends_as_attention_maps_says(tmp_path):
    """model.js with the page's weights (at most 8 MB: layer matrices int8) on 50 sentences of test2016 (the offline
    corpus's where Multi30k is absent): greedy and beam 5 give translate_tokens' tokens on the same weights
    (on_page), and every greedy step's cross-attention (the token fed in, each layer and head) equals
    attention_maps' row within 1e-3."""
    import torch

    from transformer_lib.book.live import model_weights, on_page
    from transformer_lib.decoding import attention_maps, translate_tokens

    shipped = pretrained().model
    model = on_page(shipped)
    src_tok, _ = model.tokenizers
    src_vocab, tgt_vocab = model.vocabs
    texts = [de for de, _ in load_translation_data("test2016")[0][:50]]
    table, data, config = model_weights(shipped)
    assert len(data) <= 8_000_000
    (tmp_path / "weights.bin").write_bytes(data)
    (tmp_path / "assets.json").write_text(json.dumps({**tokenizer_assets(model), "table": table, "config": config,
                                                      "texts": texts}, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run([NODE, "-e", _TRANSLATE, str(TOKENIZER_JS), str(MODEL_JS), str(tmp_path / "assets.json"),
                           str(tmp_path / "weights.bin")], capture_output=True, text=True, timeout=1200, check=True)
    page = json.loads(done.stdout)
    book = {beam: translate_tokens(model, texts, src_tok, src_vocab, tgt_vocab, beam_size=beam) for beam in (1, 5)}
    words = lambda ids: tgt_vocab.decode(ids)  # noqa: E731 - up to </s>, as translate_tokens gives them
    assert [words(p["greedy"]) for p in page] == book[1]
    assert [words(p["beam"]) for p in page] == book[5]
    worst = 0.0
    for p in page:
        maps = attention_maps(model, p["src"], [tgt_vocab.bos_idx, *p["greedy"][:-1]])["cross"]  # (L, H, T, S)
        ours = torch.tensor(p["cross"]).view(len(p["greedy"]), maps.size(0), maps.size(1), -1).permute(1, 2, 0, 3)
        worst = max(worst, (ours - maps).abs().max().item())
    assert worst < 1e-3, f"cross-attention differs by {worst:.2e}"
