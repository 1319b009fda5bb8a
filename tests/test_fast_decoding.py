"""Chapter 9's FastBeamSearch: the same search as chapter 7's beam_search and greedy decoding, on small untrained
models in float64 (where summation order cannot flip a choice) and on the shipped model in float32; bfloat16 runs;
bad inputs get errors naming the argument."""
import pytest
import torch

from transformer_lib.attention import padding_mask
from transformer_lib.data import offline_corpus
from transformer_lib.decoding import beam_search, greedy_decode_cached, translate_tokens
from transformer_lib.fast import FastBeamSearch, pack_decoder
from transformer_lib.model import make_model
from transformer_lib.translation import pretrained

PAD, BOS, EOS = 1, 2, 3


def small_model(**options):
    torch.manual_seed(0)
    model = make_model(17, 19, n_layers=2, d_model=32, d_ff=64, n_heads=4, pad_idx=PAD, **options).double().eval()
    with torch.no_grad():
        model.generator.proj.bias[EOS] += 2.5  # some hypotheses end early, some run to max_len
    return model


def sources(batch=6, length=9):
    torch.manual_seed(1)
    src = torch.randint(4, 17, (batch, length))
    for row in range(1, batch, 2):
        src[row, length - row:] = PAD  # sources of different lengths
    return src, padding_mask(src, PAD)


def trim(rows):
    return [row[: row.index(EOS) + 1] if EOS in row else row for row in rows]


@pytest.mark.parametrize("options", [{}, {"norm_first": True}, {"learned_positions": True, "max_len": 64}])
@pytest.mark.parametrize("beam_size, length_penalty", [(2, 0.6), (4, 0.0), (5, 1.0)])
def test_float64_beam_search_finds_what_chapter_7_finds(options, beam_size, length_penalty):
    model = small_model(**options)
    src, src_mask = sources()
    expected = beam_search(model, src, src_mask, 12, BOS, EOS, beam_size, length_penalty)
    got = FastBeamSearch(model, torch.float64)(src, src_mask, 12, BOS, EOS, beam_size, length_penalty)
    assert got == expected
    assert any(len(row) < 12 for row in got)  # some hypotheses end early


@pytest.mark.parametrize("options", [{}, {"norm_first": True}])
def test_float64_greedy_is_beam_one_and_matches_the_cached_greedy_decoder(options):
    model = small_model(**options)
    src, src_mask = sources()
    expected = trim(greedy_decode_cached(model, src, src_mask, 12, BOS, EOS)[:, 1:].tolist())
    assert FastBeamSearch(model, torch.float64)(src, src_mask, 12, BOS, EOS, beam_size=1) == expected


def test_no_source_mask_and_zero_steps():
    model = small_model()
    src, _ = sources()
    search = FastBeamSearch(model, torch.float64)
    assert search(src, None, 8, BOS, EOS, 3) == beam_search(model, src, None, 8, BOS, EOS, 3)
    assert search(src, None, 0, BOS, EOS, 3) == [[] for _ in range(src.size(0))]


def test_the_search_reads_a_snapshot_and_leaves_the_model_alone():
    model = small_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    search = FastBeamSearch(model, torch.float32)
    model.train()
    search(*sources(), 6, BOS, EOS, 2)
    assert model.training and all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    packed = pack_decoder(model, torch.float32)
    assert packed["layers"][0]["qkv"][0].shape == (3 * 32, 32) and packed["embedding"].dtype == torch.float32
    with torch.no_grad():
        model.generator.proj.bias.zero_()  # a later change to the model does not reach the snapshot
    assert search.w["proj"][1][EOS] > 2


def test_bfloat16_decodes_to_valid_token_ids():
    model = small_model().float()
    src, src_mask = sources()
    rows = FastBeamSearch(model, torch.bfloat16)(src, src_mask, 10, BOS, EOS, 3)
    assert len(rows) == src.size(0)
    assert all(0 <= t < 19 for row in rows for t in row) and all(len(row) <= 10 for row in rows)
    assert all(EOS not in row[:-1] for row in rows)  # nothing after </s>


def test_the_shipped_model_translates_the_same_through_translate_tokens():
    shipped = pretrained()
    src_vocab, tgt_vocab = shipped.model.vocabs
    sentences = [de for de, _ in offline_corpus(40, seed=3)]
    search = FastBeamSearch(shipped.model, torch.float32)
    for beam in (1, 5):
        expected = translate_tokens(shipped.model, sentences, shipped.src_tok, src_vocab, tgt_vocab, beam)
        got = translate_tokens(shipped.model, sentences, shipped.src_tok, src_vocab, tgt_vocab, beam, search=search)
        assert got == expected and all(got)


def test_bad_inputs_name_the_argument():
    model = small_model()
    src, src_mask = sources()
    with pytest.raises(TypeError, match="model must be an EncoderDecoder"):
        FastBeamSearch(torch.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="dtype=torch.int64 is not a floating-point type"):
        FastBeamSearch(model, torch.int64)
    with pytest.raises(ValueError, match="not a torch dtype"):
        FastBeamSearch(model, "float33")
    search = FastBeamSearch(model, "float64")
    with pytest.raises(ValueError, match="beam_size"):
        search(src, src_mask, 5, BOS, EOS, 0)
    with pytest.raises(ValueError, match="max_len"):
        search(src, src_mask, -1, BOS, EOS, 2)
    with pytest.raises(ValueError, match="end_symbol=19 is not a target token id"):
        search(src, src_mask, 5, BOS, 19, 2)
    endless = small_model(learned_positions=True, max_len=64)
    with torch.no_grad():
        endless.generator.proj.bias[EOS] = -1e4  # nothing ends, so decoding runs out of positions
    with pytest.raises(ValueError, match="cannot decode past the model's max_len=64"):
        FastBeamSearch(endless, torch.float64)(src, src_mask, 70, BOS, EOS, 2)
    shipped = pretrained()
    with pytest.raises(TypeError, match="search must be None or a callable"):
        translate_tokens(shipped.model, ["Ein Hund."], shipped.src_tok, *shipped.model.vocabs, search="fast")
