"""transformer_lib.decoding (chapter 7): the key/value cache, beam search and attention maps, on small untrained
models (correctness needs no training). Decoding sentences with a trained model: test_translation_training.py.
"""
import itertools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_lib.attention import padding_mask, subsequent_mask  # noqa: E402
from transformer_lib.data import Tokenizer, Vocab, offline_corpus  # noqa: E402
from transformer_lib.decoding import (  # noqa: E402
    ATTENTION_AXES, DecoderCache, attention_chart, attention_frame, attention_maps, beam_search, greedy_decode_cached,
)
from transformer_lib.model import make_model  # noqa: E402
from transformer_lib.plots import plot_attention_grid  # noqa: E402
from transformer_lib.training import greedy_decode  # noqa: E402

PAD, BOS, EOS = 1, 2, 3


def small_model(**options):
    torch.manual_seed(0)
    return make_model(13, 13, n_layers=2, d_model=32, d_ff=64, n_heads=4, pad_idx=PAD, **options).eval()


def sources():
    torch.manual_seed(1)
    src = torch.randint(4, 13, (3, 7))
    src[1, 5:] = PAD
    return src, padding_mask(src, PAD)


@pytest.mark.parametrize("options", [{}, {"norm_first": True}, {"learned_positions": True, "max_len": 64}])
def test_cached_decoding_gives_the_same_log_probs_and_tokens_as_recomputing(options):
    model = small_model(**options)
    src, src_mask = sources()
    plain = greedy_decode(model, src, src_mask, max_len=12, start_symbol=BOS)
    assert torch.equal(greedy_decode_cached(model, src, src_mask, max_len=12, start_symbol=BOS), plain)
    memory = model.encode(src, src_mask)
    cache = DecoderCache(model, memory, src_mask)
    for t in range(plain.size(1) - 1):
        cached = cache.step(plain[:, t : t + 1])
        full = model.generator(model.decode(memory, src_mask, plain[:, : t + 1], subsequent_mask(t + 1)))[:, -1]
        assert (cached - full).abs().max() < 1e-5


def test_beam_of_one_is_greedy():
    model = small_model()
    src, src_mask = sources()
    greedy = greedy_decode(model, src, src_mask, max_len=12, start_symbol=BOS)[:, 1:].tolist()
    expected = [row[: row.index(EOS) + 1] if EOS in row else row for row in greedy]
    assert beam_search(model, src, src_mask, 12, BOS, EOS, beam_size=1, length_penalty=0.0) == expected


def exhaustive_best(model, memory, src_mask, vocab: int, length: int) -> tuple:
    """The most probable output of at most `length` tokens, found by scoring every one (nothing follows </s>).

    All vocab^length sequences of full length go through the decoder in one batch; a sequence that ends with </s>
    earlier scores the log-probabilities of its tokens up to </s>, which the causal mask keeps free of the rest."""
    seqs = torch.tensor(list(itertools.product(range(vocab), repeat=length)))  # (vocab^length, length)
    ys = torch.cat([torch.full((len(seqs), 1), BOS), seqs], dim=1)
    with torch.no_grad():
        out = model.decode(memory.expand(len(seqs), *memory.shape[1:]), src_mask.expand(len(seqs), *src_mask.shape[1:]),
                           ys[:, :-1], subsequent_mask(length))
        token_log_probs = model.generator(out).gather(-1, seqs.unsqueeze(-1)).squeeze(-1)  # (vocab^length, length)
    scores = {}
    for seq, row in zip(seqs.tolist(), token_log_probs):
        end = seq.index(EOS) + 1 if EOS in seq else length
        scores.setdefault(tuple(seq[:end]), row[:end].sum().item())
    return max(scores, key=scores.get)


@pytest.mark.parametrize("options", [{}, {"norm_first": True}])
def test_a_wide_beam_finds_the_exhaustive_best(options):
    """With beam_size >= V^(L-1) nothing is pruned, so the beam must return the most probable sequence."""
    model = small_model(**options)
    src, src_mask = sources()
    src, src_mask = src[:1], src_mask[:1]
    best = exhaustive_best(model, model.encode(src, src_mask), src_mask, 13, 3)
    assert beam_search(model, src, src_mask, 3, BOS, EOS, beam_size=169, length_penalty=0.0)[0] == list(best)


def test_reordering_within_sources_keeps_the_cross_attention_cache_and_its_results():
    model = small_model()
    src, src_mask = sources()
    rows = torch.arange(3).repeat_interleave(2)  # two beams per source
    memory = model.encode(src, src_mask)[rows]
    kept, moved = DecoderCache(model, memory, src_mask[rows]), DecoderCache(model, memory, src_mask[rows])
    tokens = torch.full((6, 1), BOS)
    for cache in (kept, moved):
        cache.step(tokens)
    index = torch.tensor([1, 1, 2, 3, 5, 4])  # each row takes a beam of its own source
    cross = [k for k, _ in kept.cross]
    kept.reorder(index, same_sources=True)
    moved.reorder(index)
    assert all(k is c for (k, _), c in zip(kept.cross, cross))  # not copied
    assert torch.equal(kept.step(tokens), moved.step(tokens))
    assert (beam_search(model, src, src_mask, 10, BOS, EOS, 3)
            == [beam_search(model, src[i : i + 1], src_mask[i : i + 1], 10, BOS, EOS, 3)[0] for i in range(3)])


def test_beam_search_rejects_a_non_positive_beam():
    model = small_model()
    src, src_mask = sources()
    with pytest.raises(ValueError, match="beam_size must be a positive int"):
        beam_search(model, src, src_mask, 5, BOS, EOS, beam_size=0)


# ---- attention maps


N_LAYERS, N_HEADS = 1, 4


@pytest.fixture(scope="module")
def translator():
    """A small untrained model with vocabularies of the offline corpus: the maps' shapes and labels need no training."""
    pairs = offline_corpus(300, 0)
    src_tok, tgt_tok = Tokenizer("de"), Tokenizer("en")
    src_vocab = Vocab.build([src_tok(d) for d, _ in pairs], min_freq=1)
    tgt_vocab = Vocab.build([tgt_tok(e) for _, e in pairs], min_freq=1)
    torch.manual_seed(0)
    model = make_model(len(src_vocab), len(tgt_vocab), n_layers=N_LAYERS, d_model=32, d_ff=64, n_heads=N_HEADS,
                       pad_idx=tgt_vocab.pad_idx).eval()
    return model, src_tok, src_vocab, tgt_vocab


@pytest.fixture(scope="module")
def maps(translator):
    model, src_tok, src_vocab, tgt_vocab = translator
    src_tokens = src_tok("Ein großer Hund spielt im Park.")
    tgt_tokens = ["<s>", "a", "big", "dog"]
    return (src_tokens, tgt_tokens, attention_maps(model, src_vocab.encode(src_tokens), tgt_vocab.encode(tgt_tokens)))


def test_attention_maps_have_queries_as_rows_and_keys_as_columns(translator, maps):
    src_tokens, tgt_tokens, m = maps
    S, T, L, H = len(src_tokens), len(tgt_tokens), N_LAYERS, N_HEADS
    assert m["encoder"].shape == (L, H, S, S)
    assert m["decoder"].shape == (L, H, T, T)
    assert m["cross"].shape == (L, H, T, S)  # target rows x source columns
    for weights in m.values():
        assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5)
    assert m["decoder"].triu(diagonal=1).abs().max() == 0
    layer = translator[0].decoder.layers[-1]
    assert torch.equal(m["cross"][-1], layer.src_attn.attn[0].cpu())  # exactly what the module kept


def test_attention_frame_labels_rows_and_columns_by_side(maps):
    src_tokens, tgt_tokens, m = maps
    frame = attention_frame(m, src_tokens, tgt_tokens)
    cross = frame[frame["kind"] == "cross"]
    assert set(cross["query"]) == {f"{i} {t}" for i, t in enumerate(tgt_tokens)}
    assert set(cross["key"]) == {f"{j} {t}" for j, t in enumerate(src_tokens)}
    assert set(cross["query_side"]) == {"target"} and set(cross["key_side"]) == {"source"}
    row = cross[(cross["head"] == 2) & (cross["query_pos"] == 3) & (cross["key_pos"] == 1)]
    assert row["weight"].item() == pytest.approx(m["cross"][0, 1, 3, 1].item())
    enc = frame[frame["kind"] == "encoder"]
    assert set(enc["query_side"]) == set(enc["key_side"]) == {"source"}
    assert len(frame) == sum(w.numel() for w in m.values())
    with pytest.raises(ValueError, match="cross maps are 4 x 7, but there are 3 target"):
        attention_frame({"cross": m["cross"]}, src_tokens, tgt_tokens[:3])


@pytest.mark.parametrize("kind", list(ATTENTION_AXES))
def test_static_grid_puts_the_right_tokens_on_each_axis(maps, kind):
    src_tokens, tgt_tokens, m = maps
    marked = [t if i == 0 or t == "." else "▁" + t for i, t in enumerate(src_tokens)]  # as subwords write them
    fig = plot_attention_grid(m, kind, marked, tgt_tokens)
    rows, cols = ATTENTION_AXES[kind]
    tokens = {"source": src_tokens, "target": tgt_tokens}  # the labels: without the space mark ▁
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == tokens[rows]
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens[cols]
    assert rows in ax.get_ylabel() and cols in ax.get_xlabel()
    panels = [a for a in fig.axes if a.get_label() != "<colorbar>"]
    bars = [a for a in fig.axes if a.get_label() == "<colorbar>"]
    assert len(panels) == N_LAYERS * N_HEADS
    assert len(bars) == 1 and bars[0].get_ylabel() == "attention weight" and bars[0].get_ylim() == (0.0, 1.0)
    plt.close(fig)


def test_static_grid_draws_the_layers_asked_for_wrapped_at_per_row(maps):
    src_tokens, tgt_tokens, m = maps
    stacked = {kind: torch.cat([w, w.flip(-1)]) for kind, w in m.items()}  # two layers, the second mirrored
    fig = plot_attention_grid(stacked, "cross", src_tokens, tgt_tokens, layers=[2], per_row=3)
    panels = [a for a in fig.axes if a.get_label() != "<colorbar>"]
    assert len(panels) == N_HEADS and [a.get_title() for a in panels] == [f"head {h + 1}" for h in range(N_HEADS)]
    assert (panels[0].get_images()[0].get_array() == stacked["cross"][1, 0].numpy()).all()  # layer 2, not layer 1
    assert "layer 2" in fig._suptitle.get_text()
    plt.close(fig)
    with pytest.raises(ValueError, match="layers must be a non-empty list of layer numbers from 1 to 2"):
        plot_attention_grid(stacked, "cross", src_tokens, tgt_tokens, layers=[3])
    with pytest.raises(TypeError, match=r"layers must be a list of layer numbers, e.g. \[2\]"):
        plot_attention_grid(stacked, "cross", src_tokens, tgt_tokens, layers=2)


def test_interactive_chart_has_the_right_axes_and_tooltips(maps):
    src_tokens, tgt_tokens, m = maps
    spec = attention_chart(attention_frame(m, src_tokens, tgt_tokens), "cross").to_dict()
    encoding = spec["spec"]["encoding"]
    assert encoding["y"]["title"] == "target (query)" and encoding["x"]["title"] == "source (key)"
    assert {t.get("title", t["field"]) for t in encoding["tooltip"]} >= {"target (query)", "source (key)", "weight"}
    with pytest.raises(ValueError, match="kind must be one of"):
        attention_chart(attention_frame(m, src_tokens, tgt_tokens), "self")
    layers = m["cross"].shape[0]
    chosen = attention_chart(attention_frame(m, src_tokens, tgt_tokens), "cross", layer=layers).to_dict()
    assert [p["value"] for p in chosen["params"] if p["name"] == "layer"] == [layers]  # what a static copy shows
    with pytest.raises(ValueError, match=f"layer={layers + 1}, but the maps have {layers} layers"):
        attention_chart(attention_frame(m, src_tokens, tgt_tokens), "cross", layer=layers + 1)


def test_attention_maps_refuse_tensors_and_text_and_a_model_on_the_fast_path(translator):
    import copy

    from transformer_lib.fast import use_fast_path

    model, src_tok, src_vocab, tgt_vocab = translator
    src, tgt = src_vocab.encode(src_tok("Ein Hund.")), tgt_vocab.encode(["<s>", "a", "dog"])
    with pytest.raises(TypeError, match=r"^src_ids must be a list of token ids, got a tensor; pass src_ids.tolist\(\)"):
        attention_maps(model, torch.tensor(src), tgt)
    with pytest.raises(TypeError, match="^tgt_ids must be a list of token ids .*got str"):
        attention_maps(model, src, "a dog")
    fast = use_fast_path(copy.deepcopy(model))
    readable = attention_maps(model, src, tgt)
    with pytest.raises(ValueError, match=r"fast path.*use_fast_path\(model, False\)"):
        attention_maps(fast, src, tgt)  # not the weights an earlier readable pass left behind
    again = attention_maps(use_fast_path(fast, False), src, tgt)
    assert all(torch.equal(again[k], readable[k]) for k in readable)


@pytest.mark.parametrize("alpha, winner", [(0.0, 0), (0.6, 2), (2.0, 1)])
def test_the_length_penalty_ranks_hypotheses_as_a_hand_computed_table_says(alpha, winner):
    """Three finished hypotheses of one source, ranked by log-probability / ((5 + length) / 6) ** alpha, by hand:

    | hypothesis | length | log-prob | alpha 0 | alpha 0.6               | alpha 2                 |
    |------------|--------|----------|---------|-------------------------|-------------------------|
    | 0          | 2      | -2.7     | -2.7    | -2.7 / 1.0969 = -2.4615 | -2.7 / 1.3611 = -1.9837 |
    | 1          | 6      | -3.5     | -3.5    | -3.5 / 1.4386 = -2.4329 | -3.5 / 3.3611 = -1.0413 |
    | 2          | 4      | -3.1     | -3.1    | -3.1 / 1.2754 = -2.4306 | -3.1 / 2.2500 = -1.3778 |

    Each alpha crowns another. A penalty that counts the length one off (with or without </s>), leaves out the 5,
    or multiplies, picks otherwise for some alpha; only the 6, a factor common to all, cannot change a ranking."""
    from transformer_lib.decoding import _best_hypotheses

    end, start = 2, 1
    ys = torch.tensor([[start, 7, end, end, end, end, end],  # length 2: one word and </s>
                       [start, 7, 8, 9, 10, 11, end],  # length 6
                       [start, 7, 8, 9, end, end, end]])  # length 4
    scores = torch.tensor([[-2.7, -3.5, -3.1]])
    lengths = torch.tensor([2, 6, 4])
    (best,) = _best_hypotheses(ys, scores, lengths, end, alpha)
    assert best == ys[winner, 1:].tolist()[: ys[winner, 1:].tolist().index(end) + 1]


def test_chapter_7s_reading_of_greedy_against_the_beam_holds_in_its_committed_output():
    """The paragraph after the comparison of greedy decoding and a beam of 5 reads its committed output (the `cpu`
    budget's 32 sentences): the beam scores higher each time; one beam translation is less probable but longer; only
    the beam keeps "im Park" for the white cyclist; neither translates "müde" as tired."""
    import re

    import nbformat

    nb = nbformat.read(Path(__file__).parent.parent / "notebooks" / "07_decoding.ipynb", as_version=4)
    out = next(c for c in nb.cells if c.source.startswith("@torch.no_grad()\ndef log_prob")).outputs[0]["text"]
    assert out.startswith("greedy and beam 5 differ on 4 of 32 sentences")
    line = re.compile(r"  (greedy|beam 5) +(-?[\d.]+) \(score +(-?[\d.]+)\)  (.*)")
    lines = out.splitlines()[1:]
    pairs = []
    for de, g, b in zip(lines[::3], lines[1::3], lines[2::3]):
        (_, g_lp, g_score, g_text), (_, b_lp, b_score, b_text) = line.match(g).groups(), line.match(b).groups()
        pairs.append((de, float(g_lp), float(g_score), g_text, float(b_lp), float(b_score), b_text))
    assert len(pairs) == 4
    assert all(b_score >= g_score for _, _, g_score, _, _, b_score, _ in pairs)  # "each time, the beam scores higher"
    longer = [de for de, g_lp, _, g_text, b_lp, _, b_text in pairs if b_lp < g_lp and len(b_text) > len(g_text)]
    assert len(longer) == 2 and any("Ball" in de for de in longer) and any("Radfahrer" in de for de in longer)
    cyclist = next(p for p in pairs if "weißer Radfahrer" in p[0] and "im Park" in p[0])
    assert "park" in cyclist[6] and "park" not in cyclist[3]  # only the beam keeps "im Park"
    tired = next(p for p in pairs if "müder" in p[0])
    assert "tired" not in tired[3] + tired[6]


def test_chapter_7_gives_the_beam_sizes_bleu_its_deeper_section_measured():
    """The main path's BLEU for greedy decoding, a beam of 2 and a beam of 8 are those of the committed table (length
    penalty 0.6, the whole validation split)."""
    import nbformat

    nb = nbformat.read(Path(__file__).parent.parent / "notebooks" / "07_decoding.ipynb", as_version=4)
    out = next(c for c in nb.cells if c.source.startswith("import altair as alt")).outputs[0]["text"].splitlines()
    assert out[0] == "1014 sentences of Multi30k val"
    bleu = {int(row.split()[0]): float(row.split()[1]) for row in out[3:]}  # beam -> sacreBLEU at alpha 0.6
    text = " ".join("\n".join(c.source for c in nb.cells if c.cell_type == "markdown").split())
    assert (f"Greedy decoding scores {bleu[1]:.2f}, a beam of 2 scores {bleu[2]:.2f} and a beam of 8 scores "
            f"{bleu[8]:.2f}: the second hypothesis buys most of the gain.") in text
    assert bleu[2] - bleu[1] > bleu[8] - bleu[2] > 0
