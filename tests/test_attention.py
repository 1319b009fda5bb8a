"""transformer_lib.attention: chapter 2's functions and classes, proven equal to PyTorch's."""
import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_lib.attention as attention
from transformer_lib.attention import (MultiHeadAttention, mha_from_torch, padding_mask, scaled_dot_product_attention,
                                       subsequent_mask)

PAD = 0
TOKENS = torch.tensor([[5, 3, 8, 2, 9, 4], [7, 1, 6, 0, 0, 0], [2, 2, 9, 3, 1, 0]])  # (B=3, L=6)


def test_padding_mask_shape_and_values():
    mask = padding_mask(TOKENS, PAD)
    assert mask.shape == (3, 1, 1, 6) and mask.dtype == torch.bool
    assert mask[1, 0, 0].tolist() == [True, True, True, False, False, False]


def test_subsequent_mask_allows_only_the_past_and_present():
    mask = subsequent_mask(4)
    assert mask.shape == (1, 4, 4) and mask.dtype == torch.bool
    assert mask[0].tolist() == [[True, False, False, False], [True, True, False, False],
                                [True, True, True, False], [True, True, True, True]]
    with pytest.raises(ValueError, match="size must be a positive"):
        subsequent_mask(0)


def test_attention_weights_sum_to_one_and_ignore_masked_keys():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 6, 8), torch.randn(3, 2, 6, 8), torch.randn(3, 2, 6, 8)
    _, weights = scaled_dot_product_attention(q, k, v, mask=padding_mask(TOKENS, PAD))
    assert torch.allclose(weights.sum(-1), torch.ones(3, 2, 6))
    assert weights[1, :, :, 3:].abs().max() == 0


def test_a_query_with_no_allowed_key_gets_zero_weights_not_nan():
    q = k = v = torch.randn(1, 3, 4)
    mask = torch.tensor([[[True, False, False], [False, False, False], [True, True, True]]])
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not out.isnan().any() and weights[0, 1].abs().sum() == 0


@pytest.mark.parametrize("masked", [False, True])
def test_sdpa_matches_torch_scaled_dot_product_attention(masked):
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 4, 6, 16), torch.randn(3, 4, 6, 16), torch.randn(3, 4, 6, 16)
    mask = padding_mask(TOKENS, PAD) & subsequent_mask(6) if masked else None
    ours, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert (ours - theirs).abs().max() < 1e-5


def compare_with_torch(use_padding: bool, use_causal: bool, d_model=64, n_heads=8):
    """Max abs differences (output, weights, input grad, weight grads) against nn.MultiheadAttention."""
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(d_model, n_heads, dropout=0.0, batch_first=True).eval()
    ours = mha_from_torch(theirs).eval()
    B, L = TOKENS.shape
    x = torch.randn(B, L, d_model)
    memory = torch.randn(B, L, d_model)
    xo, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
    mask, kwargs = None, {}
    if use_padding:
        mask = padding_mask(TOKENS, PAD)
        kwargs["key_padding_mask"] = TOKENS == PAD
    if use_causal:
        mask = subsequent_mask(L) if mask is None else mask & subsequent_mask(L)
        kwargs["attn_mask"] = ~subsequent_mask(L)[0]
    # query from x, keys and values from x and a second sequence, to exercise all three projections
    yo = ours(xo, xo + memory, xo - memory, mask=mask)
    yt, wt = theirs(xt, xt + memory, xt - memory, need_weights=True, average_attn_weights=False, **kwargs)
    probe = torch.randn_like(yo)
    (yo * probe).sum().backward()
    (yt * probe).sum().backward()
    grad_in = torch.cat([ours.w_q.weight.grad, ours.w_k.weight.grad, ours.w_v.weight.grad])
    grad_in_bias = torch.cat([ours.w_q.bias.grad, ours.w_k.bias.grad, ours.w_v.bias.grad])
    return {
        "output": (yo - yt).abs().max().item(),
        "weights": (ours.attn - wt).abs().max().item(),
        "grad input": (xo.grad - xt.grad).abs().max().item(),
        "grad in_proj": (grad_in - theirs.in_proj_weight.grad).abs().max().item(),
        "grad in_proj bias": (grad_in_bias - theirs.in_proj_bias.grad).abs().max().item(),
        "grad out_proj": (ours.w_o.weight.grad - theirs.out_proj.weight.grad).abs().max().item(),
    }


@pytest.mark.parametrize("use_padding,use_causal", [(False, False), (True, False), (False, True), (True, True)])
def test_mha_matches_torch_multihead_attention(use_padding, use_causal):
    diffs = compare_with_torch(use_padding, use_causal)
    assert max(diffs.values()) < 1e-5, diffs


def test_mha_keeps_last_weights_and_output_shape():
    mha = MultiHeadAttention(d_model=32, n_heads=4, dropout=0.0)
    q, kv = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    assert mha(q, kv, kv).shape == (2, 5, 32)
    assert mha.attn.shape == (2, 4, 5, 7) and not mha.attn.requires_grad


def test_mha_rejects_d_model_not_divisible_by_n_heads():
    with pytest.raises(ValueError, match=r"d_model=30 is not divisible by n_heads=4"):
        MultiHeadAttention(30, 4)


@pytest.mark.parametrize("mask,error,message", [
    (torch.ones(3, 6, 6, dtype=torch.bool), ValueError, r"mask of shape \(3, 6, 6\) does not broadcast .*unsqueeze\(1\)"),
    (torch.ones(2, 1, 1, 6, dtype=torch.bool), ValueError, r"mask of shape \(2, 1, 1, 6\) does not broadcast"),
    (torch.ones(1, 1, 1, 7, dtype=torch.bool), ValueError, r"mask of shape \(1, 1, 1, 7\) does not broadcast"),
    (torch.ones(3, 1, 1, 6), TypeError, r"mask must be a boolean tensor"),
])
def test_mha_rejects_masks_that_do_not_fit(mask, error, message):
    mha = MultiHeadAttention(d_model=16, n_heads=4)
    x = torch.randn(3, 6, 16)
    with pytest.raises(error, match=message):
        mha(x, x, x, mask=mask)


def test_mask_may_not_grow_the_scores():
    """A mask with a batch dimension where the scores have none would silently broadcast the output."""
    q = k = v = torch.randn(6, 8)  # (L, d_k), no batch
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(q, k, v, mask=padding_mask(TOKENS, PAD))


def test_mha_rejects_inputs_of_the_wrong_shape():
    mha = MultiHeadAttention(d_model=16, n_heads=4)
    with pytest.raises(ValueError, match=r"key must have shape \(batch, length, d_model=16\)"):
        mha(torch.randn(2, 5, 16), torch.randn(2, 5, 8), torch.randn(2, 5, 16))
    with pytest.raises(ValueError, match="same batch size"):
        mha(torch.randn(2, 5, 16), torch.randn(3, 5, 16), torch.randn(3, 5, 16))
    with pytest.raises(ValueError, match="key and value must have the same length"):
        mha(torch.randn(2, 5, 16), torch.randn(2, 5, 16), torch.randn(2, 4, 16))


# Pitfalls: each check passes on our code and fails on the buggy variant, patched into the module.

def tiny_fill_attention(query, key, value, mask=None, dropout=None):
    """Buggy: masked scores set to 1e-20 instead of -inf."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, 1e-20)
    weights = scores.softmax(-1)
    return weights @ value, weights


def make_d_model_scaled_attention(d_model):
    """Buggy: scores divided by sqrt(d_model) instead of sqrt(d_k)."""
    def attend(query, key, value, mask=None, dropout=None):
        return scaled_dot_product_attention(query * math.sqrt(query.size(-1) / d_model), key, value, mask, dropout)
    return attend


def weight_on_padding_keys() -> float:
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=32, n_heads=4, dropout=0.0)
    x = torch.randn(3, 6, 32)
    mha(x, x, x, mask=padding_mask(TOKENS, PAD))
    return mha.attn[1, :, :, 3:].sum(-1).max().item()


def test_masked_keys_get_exactly_zero_weight():
    assert weight_on_padding_keys() == 0.0


def test_tiny_number_mask_fill_is_caught(monkeypatch):
    monkeypatch.setattr(attention, "scaled_dot_product_attention", tiny_fill_attention)
    assert weight_on_padding_keys() > 0.1  # padding attended: the check above fails on this variant
    assert max(compare_with_torch(True, True).values()) > 1e-3


def score_variance(attend, d_model=512, n_heads=8) -> float:
    """Variance of the pre-softmax scores for unit-variance queries and keys, read back from the weights."""
    torch.manual_seed(0)
    d_k = d_model // n_heads
    q, k = torch.randn(64, n_heads, 1, d_k), torch.randn(64, n_heads, 32, d_k)
    _, weights = attend(q, k, k)
    return weights.log().var(dim=-1).mean().item()  # log-softmax = scores - const per row


def test_scores_are_scaled_by_sqrt_d_k():
    assert score_variance(scaled_dot_product_attention) == pytest.approx(1.0, abs=0.15)
    assert max(compare_with_torch(False, False, d_model=512, n_heads=8).values()) < 1e-5


def test_scaling_by_sqrt_d_model_is_caught(monkeypatch):
    assert score_variance(make_d_model_scaled_attention(512)) == pytest.approx(1 / 8, abs=0.05)
    monkeypatch.setattr(attention, "scaled_dot_product_attention", make_d_model_scaled_attention(64))
    assert max(compare_with_torch(False, False, d_model=64, n_heads=8).values()) > 1e-3


def test_from_torch_rejects_unsupported_configurations():
    with pytest.raises(ValueError, match="kdim = vdim = embed_dim"):
        mha_from_torch(nn.MultiheadAttention(16, 4, kdim=8, vdim=8, batch_first=True))


def test_a_padding_mask_on_query_rows_is_caught():
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 1, 6, 16) for _ in range(3))
    keys = padding_mask(TOKENS, PAD)
    _, right = scaled_dot_product_attention(q, k, v, mask=keys)
    _, wrong = scaled_dot_product_attention(q, k, v, mask=keys.transpose(-2, -1))  # (B, 1, L, 1): rows
    assert right[1, 0, :3, 3:].sum() == 0  # sentence 1: real queries never see its 3 padding keys
    assert wrong[1, 0, :3, 3:].sum(-1).min() > 0.05  # the bug: every real query attends to padding


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_our_mask_holds_in_half_precision_where_finite_fills_fail(dtype):
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 2, 6, 8).to(dtype) for _ in range(3))
    mask = padding_mask(TOKENS, PAD) & torch.tensor([True, True, False]).view(3, 1, 1, 1)  # sentence 2: no key
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.isfinite(out).all() and w[1, :, :, 3:].abs().sum() == 0 and w[2].abs().sum() == 0
    scores = q @ k.transpose(-2, -1)
    if dtype == torch.float16:
        with pytest.raises(RuntimeError, match="overflow"):
            scores.masked_fill(~mask, -1e9)
    additive = torch.where(mask, 0.0, -1e9).to(dtype)  # a finite mask built in float32, then cast
    finite = (scores.float() + additive.float()).softmax(-1)
    assert finite[2].isnan().all() == (dtype == torch.float16)  # -inf after the cast: a NaN row
    assert (finite[2].isnan().all() or finite[2].sum(-1).allclose(torch.ones(2, 6)))  # else: padding attended


def test_from_torch_copies_onto_the_sources_device_with_its_dropout_and_names_what_it_refuses():
    # the meta device stands for a GPU: a copy left on the CPU would fail beside its source there
    copy = mha_from_torch(nn.MultiheadAttention(16, 4, dropout=0.3, batch_first=True, device="meta"))
    assert {p.device.type for p in copy.parameters()} == {"meta"} and copy.dropout.p == 0.3
    message = re.escape("mha must use kdim = vdim = embed_dim, bias=True and add_bias_kv=False")
    for options in ({"kdim": 8, "vdim": 8}, {"bias": False}, {"add_bias_kv": True}):  # each alone is refused
        with pytest.raises(ValueError, match=message):
            mha_from_torch(nn.MultiheadAttention(16, 4, batch_first=True, **options))


def test_subsequent_mask_is_made_on_the_device_it_is_asked_for():
    assert subsequent_mask(4, device="meta").device.type == "meta"  # the meta device stands for a GPU
    assert subsequent_mask(4).device.type == "cpu"
