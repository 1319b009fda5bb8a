"""Property-based tests (hypothesis) over shapes, masks and lengths; a bounded number of examples each."""
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.attention import MultiHeadAttention, padding_mask, scaled_dot_product_attention, subsequent_mask
from transformer_lib.blocks import DecoderLayer, EncoderLayer
from transformer_lib.model import make_model

BOUNDED = settings(max_examples=25, deadline=None, derandomize=True)
PAD = 0


@st.composite
def padded_tokens(draw, vocab=13, max_batch=4, max_len=9):
    """(B, L) token ids with PAD only at the ends of rows, every row holding at least one real token."""
    batch = draw(st.integers(1, max_batch))
    length = draw(st.integers(1, max_len))
    lengths = draw(st.lists(st.integers(1, length), min_size=batch, max_size=batch))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, vocab, (batch, length), generator=g)
    for row, n in enumerate(lengths):
        tokens[row, n:] = PAD
    return tokens


@BOUNDED
@given(tokens=padded_tokens(), heads=st.sampled_from([1, 2, 4]), lq=st.integers(1, 6))
def test_attention_gives_masked_keys_zero_weight_and_rows_sum_to_one(tokens, heads, lq):
    torch.manual_seed(0)
    B, L = tokens.shape
    q, k, v = torch.randn(B, heads, lq, 8), torch.randn(B, heads, L, 8), torch.randn(B, heads, L, 8)
    mask = padding_mask(tokens, PAD)  # (B, 1, 1, L)
    assert torch.equal(mask[:, 0, 0], tokens != PAD)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == (B, heads, lq, 8) and weights.shape == (B, heads, lq, L)
    assert torch.all(weights.masked_select(~mask.expand_as(weights)) == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(B, heads, lq), atol=1e-5)
    assert torch.isfinite(out).all()


@BOUNDED
@given(tokens=padded_tokens(), heads=st.sampled_from([1, 2, 4, 8]))
def test_multi_head_attention_keeps_shapes_and_ignores_what_is_masked(tokens, heads):
    torch.manual_seed(0)
    B, L = tokens.shape
    mha = MultiHeadAttention(16, heads, dropout=0.0).eval()
    x = torch.randn(B, L, 16)
    mask = padding_mask(tokens, PAD)
    out = mha(x, x, x, mask)
    assert out.shape == (B, L, 16)
    noisy = x.clone()
    noisy[tokens == PAD] = 100.0  # what sits at padded keys and values must not matter
    again = mha(x, noisy, noisy, mask)
    assert torch.allclose(out, again, atol=1e-5)


@BOUNDED
@given(length=st.integers(2, 10), cut=st.data(), norm_first=st.booleans())
def test_causal_decoder_outputs_do_not_depend_on_future_tokens(length, cut, norm_first):
    position = cut.draw(st.integers(1, length - 1))
    torch.manual_seed(0)
    layer = DecoderLayer(16, 2, 32, dropout=0.0, norm_first=norm_first).eval()
    x, memory = torch.randn(2, length, 16), torch.randn(2, 5, 16)
    future = x.clone()
    future[:, position:] = torch.randn(2, length - position, 16)  # change everything from `position` on
    causal = subsequent_mask(length)
    a, b = layer(x, memory, None, causal), layer(future, memory, None, causal)
    assert torch.allclose(a[:, :position], b[:, :position], atol=1e-5)
    assert not torch.allclose(a[:, position:], b[:, position:])


@BOUNDED
@given(src=padded_tokens(vocab=11), tgt_len=st.integers(1, 7), layers=st.integers(1, 2),
       norm_first=st.booleans(), learned=st.booleans())
def test_model_output_is_finite_log_probabilities_of_the_right_shape(src, tgt_len, layers, norm_first, learned):
    torch.manual_seed(0)
    model = make_model(11, 9, n_layers=layers, d_model=16, d_ff=32, n_heads=2, dropout=0.0, pad_idx=PAD,
                       norm_first=norm_first, learned_positions=learned, max_len=16).eval()
    B = src.size(0)
    tgt = torch.randint(1, 9, (B, tgt_len))
    with torch.no_grad():
        out = model(src, tgt, padding_mask(src, PAD), subsequent_mask(tgt_len))
    assert out.shape == (B, tgt_len, 9)
    assert torch.isfinite(out).all()
    assert torch.allclose(out.exp().sum(-1), torch.ones(B, tgt_len), atol=1e-4)


@BOUNDED
@given(tokens=padded_tokens(vocab=11), norm_first=st.booleans())
def test_encoder_rows_of_real_tokens_ignore_padding_content(tokens, norm_first):
    torch.manual_seed(0)
    layer = EncoderLayer(16, 2, 32, dropout=0.0, norm_first=norm_first).eval()
    x = torch.randn(*tokens.shape, 16)
    noisy = x.clone()
    noisy[tokens == PAD] = torch.randn_like(noisy[tokens == PAD]) * 50
    mask = padding_mask(tokens, PAD)
    real = tokens != PAD
    assert torch.allclose(layer(x, mask)[real], layer(noisy, mask)[real], atol=1e-4)
