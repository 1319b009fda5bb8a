"""transformer_lib.blocks: chapter 3's layers, proven equal to torch.nn, and the pitfalls they avoid."""
import pytest
import torch
from torch import nn

from transformer_lib.attention import padding_mask, subsequent_mask
from transformer_lib.blocks import (DecoderLayer, EncoderLayer, LayerNorm, PositionwiseFeedForward, SublayerConnection,
                                    decoder_layer_from_torch, encoder_layer_from_torch)

D_MODEL, N_HEADS, D_FF, PAD = 32, 4, 64, 0
SRC = torch.tensor([[4, 8, 1, 9, 3, 0, 0], [5, 2, 7, 7, 1, 6, 2]])  # (B=2, Ls=7)
TGT = torch.tensor([[3, 9, 4, 0, 0], [6, 1, 1, 8, 2]])  # (B=2, Lt=5)
SRC_MASK = padding_mask(SRC, PAD)
TGT_MASK = padding_mask(TGT, PAD) & subsequent_mask(5)
TORCH_MASKS = dict(tgt_mask=~subsequent_mask(5)[0], tgt_key_padding_mask=TGT == PAD, memory_key_padding_mask=SRC == PAD)


def randomized(module: nn.Module, seed: int = 0) -> nn.Module:
    """Every parameter perturbed, layer norms included, so no default value can hide a wiring bug."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return module.eval()


def diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Max abs difference, relative to the reference's largest entry once that exceeds 1.

    Gradients here reach magnitudes of 30, where float32 rounding alone is 2e-6 per operation; an
    absolute 1e-5 would then test the order of additions, not the model.
    """
    return ((a - b).abs().max() / b.abs().max().clamp_min(1.0)).item()


def grads_match(ours: nn.Module, theirs: nn.Module, pairs) -> float:
    """Largest diff() between gradients of named parameter pairs (ours_name, theirs_name)."""
    o, t = dict(ours.named_parameters()), dict(theirs.named_parameters())
    return max(diff(o[a].grad, t[b].grad) for a, b in pairs)


def test_layer_norm_matches_torch_layer_norm():
    torch.manual_seed(0)
    theirs = randomized(nn.LayerNorm(16, eps=1e-6))
    ours = LayerNorm(16, eps=1e-6)
    ours.load_state_dict(theirs.state_dict())
    x = 3 + 5 * torch.randn(4, 7, 16)
    xo, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
    yo, yt = ours(xo), theirs(xt)
    assert (yo - yt).abs().max() < 1e-5
    probe = torch.randn_like(yo)
    (yo * probe).sum().backward()
    (yt * probe).sum().backward()
    assert (xo.grad - xt.grad).abs().max() < 1e-5
    assert grads_match(ours, theirs, [("weight", "weight"), ("bias", "bias")]) < 1e-5


def test_layer_norm_uses_the_biased_variance():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    expected = (x - 2.5) / torch.sqrt(torch.tensor(1.25 + 1e-6))
    assert torch.allclose(LayerNorm(4)(x), expected)


def test_sublayer_connection_post_and_pre_norm():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8)
    f = nn.Linear(8, 8)
    post = SublayerConnection(8, dropout=0.0)
    pre = SublayerConnection(8, dropout=0.0, norm_first=True)
    assert torch.allclose(post(x, f), post.norm(x + f(x)))
    assert torch.allclose(pre(x, f), x + f(pre.norm(x)))


def test_feed_forward_is_two_linears_with_relu():
    ff = PositionwiseFeedForward(8, 16, dropout=0.0)
    x = torch.randn(2, 3, 8)
    assert torch.allclose(ff(x), ff.w_2(torch.relu(ff.w_1(x))))


def compare_encoder_layer(layer_cls, norm_first: bool) -> float:
    torch.manual_seed(0)
    theirs = randomized(nn.TransformerEncoderLayer(D_MODEL, N_HEADS, D_FF, dropout=0.0, batch_first=True,
                                                   norm_first=norm_first, layer_norm_eps=1e-6))
    ours = layer_cls(D_MODEL, N_HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    ours.load_state_dict(encoder_layer_from_torch(theirs).state_dict(), strict=False)
    ours.eval()
    x = torch.randn(2, 7, D_MODEL)
    xo, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
    yo, yt = ours(xo, SRC_MASK), theirs(xt, src_key_padding_mask=SRC == PAD)
    probe = torch.randn_like(yo)
    (yo * probe).sum().backward()
    (yt * probe).sum().backward()
    pairs = [("feed_forward.w_1.weight", "linear1.weight"), ("feed_forward.w_2.bias", "linear2.bias"),
             ("sublayers.0.norm.weight", "norm1.weight"), ("sublayers.1.norm.bias", "norm2.bias"),
             ("self_attn.w_o.weight", "self_attn.out_proj.weight")]
    return max(diff(yo, yt), diff(xo.grad, xt.grad), grads_match(ours, theirs, pairs))


def compare_decoder_layer(layer_cls, norm_first: bool = False) -> float:
    torch.manual_seed(0)
    theirs = randomized(nn.TransformerDecoderLayer(D_MODEL, N_HEADS, D_FF, dropout=0.0, batch_first=True,
                                                   norm_first=norm_first, layer_norm_eps=1e-6))
    ours = layer_cls(D_MODEL, N_HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    ours.load_state_dict(decoder_layer_from_torch(theirs).state_dict(), strict=False)
    ours.eval()
    x, memory = torch.randn(2, 5, D_MODEL), torch.randn(2, 7, D_MODEL)
    xo, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
    mo, mt = memory.clone().requires_grad_(), memory.clone().requires_grad_()
    yo, yt = ours(xo, mo, SRC_MASK, TGT_MASK), theirs(xt, mt, **TORCH_MASKS)
    probe = torch.randn_like(yo)
    (yo * probe).sum().backward()
    (yt * probe).sum().backward()
    diffs = [diff(yo, yt), diff(xo.grad, xt.grad), diff(mo.grad, mt.grad)]
    if layer_cls is DecoderLayer:  # buggy variants may share modules, so named gradients only for ours
        o, t = dict(ours.named_parameters()), dict(theirs.named_parameters())
        diffs.append(diff(o["feed_forward.w_1.weight"].grad, t["linear1.weight"].grad))
        diffs.append(diff(o["sublayers.2.norm.weight"].grad, t["norm3.weight"].grad))
        diffs.append(diff(o["src_attn.w_q.weight"].grad, t["multihead_attn.in_proj_weight"].grad[:D_MODEL]))
        diffs.append(diff(o["self_attn.w_v.bias"].grad, t["self_attn.in_proj_bias"].grad[2 * D_MODEL:]))
    return max(diffs)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch_transformer_encoder_layer(norm_first):
    assert compare_encoder_layer(EncoderLayer, norm_first) < 1e-5


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch_transformer_decoder_layer(norm_first):
    assert compare_decoder_layer(DecoderLayer, norm_first) < 1e-5


def test_every_sublayer_has_its_own_norm_and_attention():
    enc, dec = EncoderLayer(16, 2, 32), DecoderLayer(16, 2, 32)
    assert len({id(s.norm) for s in enc.sublayers}) == 2
    assert len({id(s.norm) for s in dec.sublayers}) == 3
    assert dec.src_attn is not dec.self_attn


def test_from_torch_rejects_layers_it_cannot_copy():
    with pytest.raises(ValueError, match="batch_first=True and activation='relu'"):
        encoder_layer_from_torch(nn.TransformerEncoderLayer(16, 2, 32, activation="gelu", batch_first=True))
    with pytest.raises(ValueError, match="batch_first=True"):
        decoder_layer_from_torch(nn.TransformerDecoderLayer(16, 2, 32))


# Pitfalls: each buggy variant is one change to our DecoderLayer; the torch comparison that ours passes fails on it.

class SharedSourceAttention(DecoderLayer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.src_attn = self.self_attn


class ResidualOfItself(DecoderLayer):
    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        x = self.sublayers[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayers[1](x, lambda x: self.src_attn(x, memory, memory, src_mask))
        out = self.feed_forward(x)
        return self.sublayers[2].norm(out + self.sublayers[2].dropout(out))


class ReusedNorm(DecoderLayer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for sublayer in self.sublayers[1:]:
            sublayer.norm = self.sublayers[0].norm


class CrossAttentionFromInput(DecoderLayer):
    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        h = self.sublayers[0](x, lambda h: self.self_attn(h, h, h, tgt_mask))
        h = self.sublayers[1](h, lambda h: self.src_attn(x, memory, memory, src_mask))
        return self.sublayers[2](h, self.feed_forward)


class NoSourceMask(DecoderLayer):
    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        return super().forward(x, memory, None, tgt_mask)  # cross-attention sees the source padding


@pytest.mark.parametrize("buggy", [SharedSourceAttention, ResidualOfItself, ReusedNorm, CrossAttentionFromInput,
                                   NoSourceMask])
def test_decoder_pitfall_is_caught_by_the_torch_comparison(buggy):
    assert compare_decoder_layer(DecoderLayer) < 1e-5
    assert compare_decoder_layer(buggy) > 1e-2


def test_residual_of_itself_in_the_encoder_is_caught():
    class EncoderResidualOfItself(EncoderLayer):
        def forward(self, x, mask=None):
            x = self.sublayers[0](x, lambda x: self.self_attn(x, x, x, mask))
            out = self.feed_forward(x)
            return self.sublayers[1].norm(out + out)

    assert compare_encoder_layer(EncoderResidualOfItself, False) > 1e-2


def test_the_annotated_transformer_layer_norm_is_a_different_function():
    torch.manual_seed(0)
    d = 64
    theirs = randomized(nn.LayerNorm(d, eps=1e-6))
    ours = LayerNorm(d, eps=1e-6)
    ours.load_state_dict(theirs.state_dict())

    def annotated(x):  # unbiased std, eps outside the root
        return theirs.weight * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6) + theirs.bias

    x = torch.randn(8, d)
    assert (ours(x) - theirs(x)).abs().max() < 1e-5
    centred = (annotated(x) - theirs.bias) / (theirs(x) - theirs.bias)
    assert centred.median().item() == pytest.approx(((d - 1) / d) ** 0.5, abs=1e-4)
    tiny = 1e-4 * torch.randn(8, d)  # eps comparable to the variance: the two disagree by far more
    assert (annotated(tiny) - theirs(tiny)).abs().max() > 0.5 and (ours(tiny) - theirs(tiny)).abs().max() < 1e-5


@pytest.mark.parametrize("norm_first", [False, True])
def test_from_torch_carries_every_option_and_the_device(norm_first):
    options = dict(dropout=0.3, batch_first=True, norm_first=norm_first, layer_norm_eps=1e-4, device="meta")
    for theirs, convert in ((nn.TransformerEncoderLayer(16, 2, 32, **options), encoder_layer_from_torch),
                            (nn.TransformerDecoderLayer(16, 2, 32, **options), decoder_layer_from_torch)):
        ours = convert(theirs)
        assert {p.device.type for p in ours.parameters()} == {"meta"}  # the meta device stands for a GPU
        assert {(s.norm_first, s.dropout.p, s.norm.eps) for s in ours.sublayers} == {(norm_first, 0.3, 1e-4)}
        assert ours.feed_forward.w_1.out_features == 32 and ours.self_attn.n_heads == 2
        assert ours.feed_forward.dropout.p == ours.self_attn.dropout.p == 0.3


def test_from_torch_takes_a_relu_module_and_judges_a_layer_without_torchs_flag_by_its_activation():
    theirs = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, activation=nn.ReLU())  # not F.relu itself
    assert encoder_layer_from_torch(theirs).feed_forward.w_1.in_features == 16
    gelu = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, activation="gelu")
    del gelu.activation_relu_or_gelu  # as a torch without the flag builds it
    with pytest.raises(ValueError, match="activation='relu'"):
        encoder_layer_from_torch(gelu)
