"""Dropout where it acts, in training mode: what it multiplies in attention, the feed-forward network and the residual
branch; the fused attention twin against the readable one under dropout; and a layer norm test whose inputs make
`eps` visible. Every other comparison of the book runs with dropout 0 or in eval mode, where a dropout moved to
another tensor, or dropped, would pass."""
import pytest
import torch
from torch import nn

from transformer_lib.attention import MultiHeadAttention
from transformer_lib.blocks import LayerNorm, PositionwiseFeedForward, SublayerConnection
from transformer_lib.fast import FastDropout, FusedLayerNorm, FusedMultiHeadAttention


class Injected(nn.Module):
    """Dropout with a mask chosen here: records what it was given, returns it times `mask` scaled by 1 / (1 - p)."""

    def __init__(self, mask: torch.Tensor, p: float):
        super().__init__()
        self.mask, self.p, self.seen = mask, p, []

    def forward(self, x):
        self.seen.append(x.detach().clone())
        return x * self.mask / (1 - self.p)


def _mask(shape, p=0.3, seed=0):
    return (torch.rand(shape, generator=torch.Generator().manual_seed(seed)) >= p).float()


def test_attention_dropout_multiplies_the_weights_before_they_mix_the_values():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, dropout=0.3).train()
    x = torch.randn(2, 5, 16)
    mask = _mask((2, 4, 5, 5))
    mha.dropout = Injected(mask, 0.3)
    out = mha(x, x, x)
    (seen,) = mha.dropout.seen
    assert torch.allclose(seen, mha.attn) and torch.allclose(seen.sum(-1), torch.ones(2, 4, 5))  # the weights
    v = mha.split_heads(mha.w_v(x))
    mixed = (mha.attn * mask / 0.7) @ v  # dropped weights mix the values
    want = mha.w_o(mixed.transpose(1, 2).reshape(2, 5, 16))
    assert torch.allclose(out, want, atol=1e-6)


def test_feed_forward_dropout_multiplies_the_hidden_activations_after_the_relu():
    torch.manual_seed(0)
    ff = PositionwiseFeedForward(8, 32, dropout=0.3).train()
    x = torch.randn(2, 5, 8)
    mask = _mask((2, 5, 32))
    ff.dropout = Injected(mask, 0.3)
    out = ff(x)
    (seen,) = ff.dropout.seen
    assert torch.allclose(seen, ff.w_1(x).relu())  # after the ReLU, not before it, not on the output
    assert torch.allclose(out, ff.w_2(seen * mask / 0.7), atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_dropout_multiplies_the_sublayers_output_before_the_add(norm_first):
    torch.manual_seed(0)
    block = SublayerConnection(8, dropout=0.3, norm_first=norm_first).train()
    with torch.no_grad():
        block.norm.weight.uniform_(0.5, 1.5)
        block.norm.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 5, 8)
    mask = _mask((2, 5, 8))
    block.dropout = Injected(mask, 0.3)
    sublayer = nn.Linear(8, 8)
    out = block(x, sublayer)
    (seen,) = block.dropout.seen
    if norm_first:  # x + dropout(sublayer(norm(x))): the residual itself is never dropped
        assert torch.allclose(seen, sublayer(block.norm(x)))
        assert torch.allclose(out, x + seen * mask / 0.7, atol=1e-6)
    else:  # norm(x + dropout(sublayer(x)))
        assert torch.allclose(seen, sublayer(x))
        assert torch.allclose(out, block.norm(x + seen * mask / 0.7), atol=1e-6)


def _samples(module, x, n):
    torch.manual_seed(1)
    with torch.no_grad():
        return torch.stack([module(x, x, x) for _ in range(n)])


def test_the_fused_attentions_dropout_acts_on_the_weights_as_the_readable_ones_does():
    """No mask can be injected into F.scaled_dot_product_attention, so the twins are compared by statistics over
    2,000 draws, on the same weights: both are unbiased (the mean of the draws is the eval-mode output, within 5
    standard errors) and spread alike (the variance of each output, averaged, within 15% of each other). Dropout
    left out would spread nothing; dropout on the values or the output would spread otherwise (checked below)."""
    torch.manual_seed(0)
    readable = MultiHeadAttention(16, 4, dropout=0.3)
    fused = FusedMultiHeadAttention(16, 4, dropout=0.3)
    fused.load_state_dict(readable.state_dict())
    x = torch.randn(1, 6, 16)
    with torch.no_grad():
        expected = readable.eval()(x, x, x)
    n = 2000
    draws = {name: _samples(m.train(), x, n) for name, m in (("readable", readable), ("fused", fused))}
    spread = {}
    for name, d in draws.items():
        error = (d.mean(0) - expected).abs() / (d.std(0) / n ** 0.5 + 1e-12)
        assert error.max() < 5, (name, error.max())  # unbiased: E[dropout(w)] = w
        spread[name] = d.var(0).mean().item()
    assert spread["readable"] > 1e-3  # dropout spreads the output at all
    assert abs(spread["fused"] / spread["readable"] - 1) < 0.15, spread

    wrong = MultiHeadAttention(16, 4, dropout=0.0).train()  # the bug the statistics must see: dropout moved to
    wrong.load_state_dict(readable.state_dict())  # the attention's output
    on_output = nn.Dropout(0.3)
    moved = _samples(lambda q, k, v: on_output(wrong(q, k, v)), x, n)
    assert abs(moved.var(0).mean().item() / spread["readable"] - 1) > 0.15  # the comparison would have caught it


def test_fast_dropout_keeps_each_element_with_the_share_and_scale_it_states():
    """Kept elements are x / (1 - p') exactly, with p' = round(p * 65536) / 65536; the share kept is 1 - p' within
    5 standard errors of a binomial count over a million elements."""
    p, n = 0.1, 1_000_000
    x = torch.full((n,), 3.0)
    torch.manual_seed(0)
    y = FastDropout(p).train()(x)
    dropped = round(p * 65536) / 65536
    kept = y != 0
    assert torch.all(y[kept] == 3.0 * 65536 / (65536 - round(p * 65536)))
    share = kept.float().mean().item()
    assert abs(share - (1 - dropped)) < 5 * (dropped * (1 - dropped) / n) ** 0.5


def test_the_fused_layer_norm_keeps_eps_where_eps_shows():
    """Rows of variance about 1e-8, where eps = 1e-6 dominates the variance: a layer norm that lost eps (or moved it
    outside the square root) would differ there by a factor of ten or more; on rows of variance near 25, as the other
    tests use, eps changes the output by about 1e-7, below any tolerance."""
    torch.manual_seed(0)
    x = 1e-4 * torch.randn(4, 3, 32)  # variance about 1e-8 (centred: no cancellation in x - mean)
    readable, fused = LayerNorm(32, eps=1e-6), FusedLayerNorm(32, eps=1e-6)
    with torch.no_grad():
        readable.weight.uniform_(0.5, 1.5)
        readable.bias.uniform_(-0.5, 0.5)
    fused.load_state_dict(readable.state_dict())
    want = readable(x)
    assert torch.allclose(fused(x), want, atol=1e-4)
    without_eps = torch.nn.functional.layer_norm(x, (32,), readable.weight, readable.bias, eps=1e-12)
    assert (without_eps - want).abs().max() > 0.5  # what the input makes visible: eps at work
