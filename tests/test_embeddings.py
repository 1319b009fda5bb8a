"""transformer_lib.embeddings: chapter 1's classes."""
import math

import pytest
import torch

from transformer_lib.embeddings import LearnedPositionalEmbedding, PositionalEncoding, TokenEmbedding, sinusoidal_table


def test_token_embedding_scales_the_table_by_sqrt_d_model():
    emb = TokenEmbedding(vocab_size=50, d_model=16)
    tokens = torch.tensor([[3, 1, 49], [0, 7, 7]])
    assert torch.allclose(emb(tokens), emb.embedding.weight[tokens] * 4.0)
    assert emb(tokens).shape == (2, 3, 16)


def test_token_embedding_scaled_components_have_unit_variance():
    torch.manual_seed(0)
    emb = TokenEmbedding(vocab_size=2000, d_model=256)
    assert (emb.embedding.weight * math.sqrt(256)).std().item() == pytest.approx(1.0, abs=0.02)


def test_padding_vector_is_zero_and_gets_no_gradient():
    emb = TokenEmbedding(vocab_size=10, d_model=8, padding_idx=0)
    out = emb(torch.tensor([[0, 3, 0]]))
    assert torch.equal(out[0, 0], torch.zeros(8))
    out.sum().backward()
    assert torch.equal(emb.embedding.weight.grad[0], torch.zeros(8))
    assert emb.embedding.weight.grad[3].abs().sum() > 0


@pytest.mark.parametrize("tokens", [torch.tensor([[1.0, 2.0]]), torch.tensor([[True, False]])])
def test_token_embedding_rejects_non_integer_tokens(tokens):
    with pytest.raises(TypeError, match="tokens must hold integer token ids"):
        TokenEmbedding(10, 8)(tokens)


@pytest.mark.parametrize("bad", [-1, 10])
def test_token_embedding_rejects_ids_outside_the_vocabulary(bad):
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, vocab_size=10\)"):
        TokenEmbedding(10, 8)(torch.tensor([[1, bad]]))


def test_token_embedding_rejects_bad_construction():
    with pytest.raises(ValueError, match="padding_idx=10"):
        TokenEmbedding(10, 8, padding_idx=10)
    with pytest.raises(ValueError, match="d_model"):
        TokenEmbedding(10, 0)


def test_sinusoidal_table_matches_the_paper_formula():
    table = sinusoidal_table(60, 10)
    for pos in (0, 1, 17, 59):
        for i in range(5):
            angle = pos / 10000 ** (2 * i / 10)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_table_supports_odd_d_model():
    table = sinusoidal_table(20, 7)
    assert table.shape == (20, 7)
    assert table[5, 6].item() == pytest.approx(math.sin(5 / 10000 ** (6 / 7)), abs=1e-6)


def test_positional_encoding_linear_offset_property():
    """PE(pos + k) = M_k PE(pos), with M_k a rotation per frequency that depends on k alone."""
    d_model, k = 32, 9
    table = sinusoidal_table(300, d_model).double()
    freqs = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    sin_pos, cos_pos = table[:-k, 0::2], table[:-k, 1::2]
    c, s = torch.cos(k * freqs), torch.sin(k * freqs)
    assert torch.allclose(c * sin_pos + s * cos_pos, table[k:, 0::2], atol=1e-6)
    assert torch.allclose(-s * sin_pos + c * cos_pos, table[k:, 1::2], atol=1e-6)


def test_positional_encoding_adds_the_table_as_a_non_persistent_buffer():
    pe = PositionalEncoding(d_model=12, max_len=40)
    x = torch.randn(3, 25, 12)
    assert torch.allclose(pe(x), x + sinusoidal_table(40, 12)[:25])
    assert list(pe.parameters()) == [] and "pe" in dict(pe.named_buffers())
    assert "pe" not in pe.state_dict()
    assert pe(x.double()).dtype == torch.float64
    assert pe(x.to(torch.bfloat16)).dtype == torch.bfloat16  # the float32 table follows x down, too


@pytest.mark.parametrize("cls", [PositionalEncoding, LearnedPositionalEmbedding])
def test_positions_past_max_len_are_a_clear_error(cls):
    module = cls(d_model=8, max_len=16)
    assert module(torch.zeros(2, 16, 8)).shape == (2, 16, 8)
    with pytest.raises(ValueError, match=r"sequence length 17 is longer than max_len=16 .* max_len >= 17"):
        module(torch.zeros(2, 17, 8))


@pytest.mark.parametrize("cls", [PositionalEncoding, LearnedPositionalEmbedding])
def test_positions_reject_the_wrong_width(cls):
    with pytest.raises(ValueError, match=r"x must have shape \(batch, length, d_model=8\), got \(2, 5, 9\)"):
        cls(d_model=8, max_len=16)(torch.zeros(2, 5, 9))


def test_learned_positional_embedding_adds_one_vector_per_position():
    lpe = LearnedPositionalEmbedding(d_model=6, max_len=10)
    x = torch.zeros(2, 4, 6)
    assert torch.equal(lpe(x)[1], lpe.embedding.weight[:4])
    lpe(x).sum().backward()
    assert lpe.embedding.weight.grad[:4].abs().sum() > 0 and lpe.embedding.weight.grad[4:].abs().sum() == 0


def test_learned_positions_default_to_512_live_on_their_device_and_name_a_bad_argument():
    assert LearnedPositionalEmbedding(8).embedding.num_embeddings == 512
    lpe = LearnedPositionalEmbedding(8, max_len=16).to("meta")  # the meta device stands for a GPU
    assert lpe(torch.zeros(2, 5, 8, device="meta")).device.type == "meta"
    for kwargs, name in (({"d_model": 0}, "d_model"), ({"max_len": 0}, "max_len"), ({"dropout": 1.5}, "dropout")):
        with pytest.raises(ValueError, match=f"^{name}"):
            LearnedPositionalEmbedding(**{"d_model": 8, "max_len": 16, **kwargs})


def test_sinusoidal_table_keeps_float64_precision_out_to_its_last_position():
    # at position 4,999 an angle computed from float32 frequencies is off by about 3e-4; float64 keeps it to the
    # float32 table's own rounding
    table = sinusoidal_table(5000, 512)
    exact = torch.tensor([math.sin(4999 * 10000 ** (-i / 512)) if i % 2 == 0 else
                          math.cos(4999 * 10000 ** (-(i - 1) / 512)) for i in range(512)], dtype=torch.float64)
    assert (table[4999].double() - exact).abs().max() < 1e-6


def test_positional_encoding_holds_5000_positions_by_default():
    assert PositionalEncoding(8).pe.shape == (1, 5000, 8)
