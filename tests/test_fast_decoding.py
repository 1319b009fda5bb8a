"""Chapter 9's FastBeamSearch: the same search as chapter 7's beam_search and greedy decoding, on small untrained
models in float64 (where summation order cannot flip a choice) and on the shipped model in float32; bfloat16 runs;
bad inputs get errors naming the argument."""
import pytest
import torch

from transformer_lib.attention import padding_mask
from transformer_lib.data import offline_corpus
from transformer_lib.decoding import beam_search, greedy_decode_cached, translate_tokens
import transformer_lib.fast as fast
from transformer_lib.fast import FastBeamSearch, int8_linear, int8_matmul, pack_decoder, quantize_int8, quantized_linear
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
    assert packed["layers"][0]["qkv"].keywords["weight"].shape == (3 * 32, 32) and packed["embedding"].dtype == torch.float32
    with torch.no_grad():
        model.generator.proj.bias.zero_()  # a later change to the model does not reach the snapshot
    assert search.w["proj"].keywords["bias"][EOS] > 2


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


# ---------------------------------------------------------------------------------------------- int8 (section 9)
def test_quantize_int8_rounds_each_row_to_its_own_grid():
    torch.manual_seed(0)
    x = torch.randn(5, 64) * torch.tensor([1.0, 1e-3, 40.0, 0.0, 1.0])[:, None]  # a row of zeros too
    q, scale = quantize_int8(x)
    assert q.dtype == torch.int8 and q.shape == x.shape and scale.shape == (5, 1)
    assert ((q.float() * scale - x).abs() <= scale / 2 * (1 + 1e-6)).all()  # half a step of the row's own scale
    assert q.abs().amax(1).tolist() == [127, 127, 127, 0, 127] and scale[3].item() == 1.0


def test_int8_matmul_is_the_exact_integer_product():
    torch.manual_seed(0)
    for m, k, n in ((1, 1024, 7), (33, 256, 4151), (5, 100, 3)):
        a = torch.randint(-127, 128, (m, k), dtype=torch.int8)
        b = torch.randint(-127, 128, (k, n), dtype=torch.int8)
        a[0], b[:, 0] = 127, -127  # the largest sum a layer can meet
        got = int8_matmul(a, b)
        assert got.dtype == torch.int32 and torch.equal(got.long(), a.long() @ b.long())


@pytest.mark.parametrize("outliers", [False, True])
def test_int8_linear_stays_within_the_bound_section_9_derives(outliers):
    torch.manual_seed(0)
    weight, bias, x = torch.randn(48, 96) / 10, torch.randn(48), torch.randn(4, 7, 96)
    if outliers:  # one large input and one large weight per row: the rest round on a coarse grid
        x[..., 0], weight[:, 5] = 30.0, 2.0
    got = int8_linear(weight, bias)(x).double()
    exact = x.double() @ weight.double().T + bias.double()
    x_q, s_x = quantize_int8(x)
    _, s_w = quantize_int8(weight)
    x_hat = x_q.double() * s_x.double()
    bound = s_x.double() / 2 * weight.double().abs().sum(1) + s_w.double().T / 2 * x_hat.abs().sum(-1, keepdim=True)
    error = (got - exact).abs()
    assert got.shape == (4, 7, 48) and (error <= bound + 1e-5 * exact.abs() + 1e-6).all()
    assert error.max() > 0.01 * bound.max()  # the bound is not vacuous here: int8 does move the outputs
    assert torch.equal(int8_linear(weight)(x), int8_linear(weight, torch.zeros(48))(x))  # no bias: zeros


@pytest.mark.parametrize("outliers", [False, True])
@pytest.mark.parametrize("seven_bits", [False, True])  # False: as this CPU has it (8 bits with VNNI); True: 7 bits
def test_quantized_linear_stays_within_the_bound_with_one_scale_for_the_input(outliers, seven_bits, monkeypatch):
    if seven_bits:  # the inputs of a CPU without VNNI; 8 bits are not forced on one, whose 16-bit sums could overflow
        monkeypatch.setattr(fast, "cpu_has_vnni", lambda: False)
    torch.manual_seed(0)
    weight, bias, x = torch.randn(48, 96) / 10, torch.randn(48), torch.randn(4, 7, 96)
    if outliers:  # one large input: every row of the input rounds on its coarse grid
        x[0, 0, 0], weight[:, 5] = 30.0, 2.0
    layer = quantized_linear(weight, bias)
    assert "packed" in layer.__code__.co_freevars  # PyTorch's kernel on this CPU, not int8_linear's steps
    got = layer(x).double()
    exact = x.double() @ weight.double().T + bias.double()
    levels = 255 if fast.cpu_has_vnni() else 127
    s_x = (x.max().clamp_min(0) - x.min().clamp_max(0)).double() / levels  # one scale for the whole input
    _, s_w = quantize_int8(weight)
    bound = s_x / 2 * weight.double().abs().sum(1) + s_w.double().T / 2 * (x.double().abs() + s_x / 2).sum(-1, True)
    error = (got - exact).abs()
    assert got.shape == (4, 7, 48) and (error <= bound + 1e-5 * exact.abs() + 1e-6).all()
    assert error.max() > 0.01 * bound.max()
    if outliers:  # one scale for all rows: the rows without the outlier lose precision that int8_linear keeps
        per_row = (int8_linear(weight, bias)(x).double() - exact).abs()
        assert error[1:].mean() > 2 * per_row[1:].mean()
    assert torch.equal(quantized_linear(weight)(x), quantized_linear(weight, torch.zeros(48))(x))  # no bias: zeros


@pytest.mark.parametrize("refusal", [RuntimeError, AttributeError])  # no engine here; a torch without the op
def test_quantized_linear_falls_back_to_int8_linear_without_the_kernel(monkeypatch, refusal):
    torch.manual_seed(0)
    weight, bias, x = torch.randn(8, 16), torch.randn(8), torch.randn(3, 16)

    def refuse(*args):
        raise refusal("Didn't find engine for operation quantized::linear_prepack NoQEngine")
    monkeypatch.setattr(torch.ops.quantized, "linear_prepack", refuse)
    layer = quantized_linear(weight, bias)
    assert "packed" not in layer.__code__.co_freevars
    assert torch.equal(layer(x), int8_linear(weight, bias)(x))


@pytest.mark.parametrize("make", [int8_linear, quantized_linear])
@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_a_row_of_inf_or_nan_is_refused_by_name_and_never_spoils_its_neighbours(make, bad):
    """quantized_linear quantizes a batch under one scale: one inf would turn every other row to inf or NaN. Both
    layers refuse such a batch naming the row (counted over all but the last dimension); without it, each row comes
    out as it would alone, within the int8 bound."""
    torch.manual_seed(0)
    weight, bias, x = torch.randn(8, 16), torch.randn(8), torch.randn(2, 3, 16)
    layer = make(weight, bias)
    good = layer(x)
    x[1, 1, 5] = bad
    with pytest.raises(ValueError, match=r"row 4 of x \(shape \(2, 3, 16\).*holds inf or NaN"):
        layer(x)
    alone = torch.stack([layer(x[i, j]) for i in range(2) for j in range(3) if (i, j) != (1, 1)])
    kept = torch.cat([good.reshape(6, 8)[:4], good.reshape(6, 8)[5:]])
    assert torch.isfinite(alone).all() and torch.allclose(alone, kept, atol=0.15), (alone - kept).abs().max()


@pytest.mark.parametrize("make", [int8_linear, quantized_linear])
def test_both_int8_layers_take_an_empty_batch_a_1d_input_and_any_leading_shape(make):
    torch.manual_seed(0)
    weight, bias = torch.randn(8, 16), torch.randn(8)
    layer = make(weight, bias)
    assert layer(torch.zeros(0, 16)).shape == (0, 8) and layer(torch.zeros(2, 0, 16)).shape == (2, 0, 8)
    x = torch.randn(16)
    assert layer(x).shape == (8,) and torch.equal(layer(x), layer(x[None])[0])
    assert layer(torch.randn(2, 3, 16)).shape == (2, 3, 8)


def test_quantize_int8_of_large_float64_values_keeps_float64s_range():
    """A float64 row beyond float32's range (1e300) gets a float64 scale: finite, and every value within half a step
    (a float32 scale would be inf and the row NaN)."""
    x = torch.tensor([[1e300, -3e299, 7e297, 0.0], [1.0, -2.0, 0.5, 0.0]], dtype=torch.float64)
    q, scale = quantize_int8(x)
    assert scale.dtype == torch.float64 and torch.isfinite(scale).all()
    assert q[0].tolist() == [127, -38, 1, 0] and q[1].tolist() == [64, -127, 32, 0]
    assert ((q.double() * scale - x).abs() <= scale / 2 * (1 + 1e-12)).all()
    q32, scale32 = quantize_int8(x[1:].float())
    assert scale32.dtype == torch.float32 and torch.equal(q32, q[1:])  # float32 keeps its own scale


def test_int8_search_on_the_shipped_model_mostly_translates_as_float32():
    shipped = pretrained()
    src_vocab, tgt_vocab = shipped.model.vocabs
    sentences = [de for de, _ in offline_corpus(40, seed=3)]
    for beam in (1, 5):
        exact = translate_tokens(shipped.model, sentences, shipped.src_tok, src_vocab, tgt_vocab, beam,
                                 search=FastBeamSearch(shipped.model, torch.float32))
        int8 = translate_tokens(shipped.model, sentences, shipped.src_tok, src_vocab, tgt_vocab, beam,
                                search=FastBeamSearch(shipped.model, "int8"))
        assert all(int8) and sum(a == b for a, b in zip(exact, int8)) >= 0.8 * len(sentences)
    ff1 = FastBeamSearch(shipped.model, torch.int8).w["layers"][0]["ff1"]
    assert "packed" in ff1.__code__.co_freevars  # quantized_linear on PyTorch's kernel, not F.linear
