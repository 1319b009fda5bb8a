"""Chapter 11's model in half precision, its cache and its head counts: what a cast, a reused cache or a head count
of 0 must not get wrong silently."""
import copy

import pytest
import torch

from transformer_lib.gpt import generate
from transformer_lib.modern import (Attention, BlockConfig, ModernGPT, RMSNorm, apply_rope, rope_angles)

LONG = 2304  # positions: angles up to 2,303 radians, where bfloat16's spacing is 16


def rope_model(context: int = 24, n_layers: int = 2, **changes) -> ModernGPT:
    torch.manual_seed(0)
    return ModernGPT(BlockConfig(40, n_layers, 32, 4, 64, 0.0, context, positions="rope", **changes)).eval()


@pytest.mark.parametrize("cast", [lambda m: m.to(torch.bfloat16), lambda m: m.bfloat16(), lambda m: m.half(),
                                  lambda m: m.to(torch.float16), lambda m: m.half().float()],
                         ids=["to bfloat16", "bfloat16()", "half()", "to float16", "half() then float()"])
def test_a_cast_keeps_ropes_angles_exact(cast):
    model = cast(rope_model(LONG, n_layers=1))
    reference = rope_angles(LONG, 8)  # float64
    assert model.angles.dtype == torch.float64 and torch.equal(model.angles, reference)
    assert "angles" not in model.state_dict()  # rebuilt, never saved: checkpoints are as before


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_is_turned_as_exactly_at_late_positions_as_at_early_ones(dtype):
    """apply_rope on half-precision x against float64 arithmetic on the same values: each output within half an eps
    of the dtype relative to itself (one rounding), at position 2,300 as at position 0."""
    x = torch.randn(2, 2, LONG, 8, generator=torch.Generator().manual_seed(0)).to(dtype)
    exact = apply_rope(x.double(), rope_angles(LONG, 8))
    error = (apply_rope(x, rope_model(LONG, n_layers=1).to(dtype).angles).double() - exact).abs()
    eps = torch.finfo(dtype).eps
    assert (error <= eps / 2 * exact.abs() + 1e-6).all()
    early, late = (error[:, :, s] / exact[:, :, s].abs().clamp_min(1e-3) for s in (slice(0, 256), slice(2048, LONG)))
    assert late.max() <= eps / 2 + 1e-6 and early.max() <= eps / 2 + 1e-6


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_models_cached_keys_are_as_close_late_as_early(dtype):
    """The rotated keys a cast model keeps in its cache, against the float64 model's: per position, the relative
    error at positions 2,000 and later stays within twice that of the first positions (bfloat16's angles were off
    by radians there before)."""
    model = rope_model(LONG, n_layers=1)
    tokens = torch.randint(0, 40, (1, LONG), generator=torch.Generator().manual_seed(1))
    keys = {}
    for name, m in (("half", copy.deepcopy(model).to(dtype)), ("exact", copy.deepcopy(model).double())):
        cache = [None]
        with torch.no_grad():
            m(tokens, cache)
        keys[name] = cache[0][0].double()  # (1, n_kv_heads, T, d_k)
    relative = (keys["half"] - keys["exact"]).norm(dim=-1) / keys["exact"].norm(dim=-1)  # (1, h, T)
    early, late = relative[..., :256].max(), relative[..., 2000:].max()
    assert late < 2 * early and late < 16 * torch.finfo(dtype).eps, (early, late)


def test_apply_rope_refuses_half_precision_angles():
    with pytest.raises(ValueError, match="angles are torch.bfloat16.*float32 or float64"):
        apply_rope(torch.zeros(1, 1, 4, 8), rope_angles(4, 8).to(torch.bfloat16))


def test_rmsnorm_in_float16_does_not_overflow_past_256():
    x = torch.full((2, 64), 300.0)
    x[1] = torch.linspace(-1000, 1000, 64)
    out = RMSNorm(64).half()(x.half())
    exact = torch.nn.functional.rms_norm(x.double(), (64,), eps=1e-6)
    assert out.dtype == torch.float16
    assert torch.allclose(out.double(), exact, rtol=2 * torch.finfo(torch.float16).eps, atol=1e-3)


def test_rmsnorm_in_float32_is_unchanged():
    torch.manual_seed(0)
    x, norm = torch.randn(3, 16), RMSNorm(16)
    assert torch.equal(norm(x), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * norm.weight)


@pytest.mark.parametrize("n_kv_heads, message", [(0, "n_kv_heads must be a positive int, got 0"),
                                                  (-2, "n_kv_heads must be a positive int, got -2"),
                                                  (3, "n_heads=8 is not divisible by n_kv_heads=3"),
                                                  (16, "n_heads=8 is not divisible by n_kv_heads=16")])
def test_attention_refuses_a_key_value_head_count_that_is_not_a_divisor(n_kv_heads, message):
    with pytest.raises(ValueError, match=message):
        Attention(32, 8, n_kv_heads)


def test_attention_without_a_key_value_head_count_is_multi_head():
    assert Attention(32, 8).n_kv_heads == Attention(32, 8, None).n_kv_heads == 8


# ---- the cache


def test_a_cache_fed_another_batch_is_named_with_both_sizes():
    model, cache = rope_model(), [None, None]
    model(torch.zeros(2, 3, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="cache holds 2 sequences but tokens has 3 rows"):
        model(torch.zeros(3, 1, dtype=torch.long), cache)
    assert cache[0][0].size(2) == 3  # untouched: it still serves the first batch
    assert model(torch.zeros(2, 1, dtype=torch.long), cache).shape == (2, 1, 40)


@pytest.mark.parametrize("cache, error, message", [
    ([None], ValueError, r"cache has 1 entries but the model 2 layers; start from \[None\] \* 2"),
    ([None] * 3, ValueError, "cache has 3 entries but the model 2 layers"),
    ([], ValueError, "cache has 0 entries"),
    ((None, None), TypeError, "cache must be a list"),
])
def test_a_cache_of_the_wrong_length_or_kind_is_named(cache, error, message):
    with pytest.raises(error, match=message):
        rope_model()(torch.zeros(1, 2, dtype=torch.long), cache)


def test_a_cache_of_another_model_or_half_filled_is_named():
    cache = [None, None]
    rope_model(n_kv_heads=4)(torch.zeros(1, 3, dtype=torch.long), cache)
    with pytest.raises(ValueError, match=r"cache\[0\] must be \(keys, values\) of shape \(1, 2, 3, 8\)"):
        rope_model(n_kv_heads=2)(torch.zeros(1, 1, dtype=torch.long), cache)
    with pytest.raises(ValueError, match=r"cache\[1\] must be \(keys, values\).*got NoneType"):
        rope_model(n_kv_heads=4)(torch.zeros(1, 1, dtype=torch.long), [cache[0], None])


def test_generate_decodes_a_modern_gpt_with_its_cache():
    model = rope_model(n_kv_heads=2, norm="rms", ffn="swiglu")
    prompt = torch.randint(0, 40, (3, 4), generator=torch.Generator().manual_seed(0))
    out = prompt
    with torch.no_grad():
        for _ in range(10):
            out = torch.cat([out, model(out)[:, -1:].argmax(-1)], 1)
    assert torch.equal(generate(model, prompt, 10, greedy=True), out[:, 4:])
    sampled = [generate(model, prompt, 10, top_p=0.9, generator=torch.Generator().manual_seed(1)) for _ in range(2)]
    assert torch.equal(*sampled)
    model.train()
    generate(model, prompt, 2)
    assert model.training


def test_generate_refuses_a_model_it_cannot_decode():
    with pytest.raises(TypeError, match="model must be chapter 10's GPT or chapter 11's ModernGPT, got Linear"):
        generate(torch.nn.Linear(4, 4), torch.zeros(1, 2, dtype=torch.long), 3)


def test_attention_names_a_past_of_another_batch_or_layer_and_inputs_of_another_width():
    attention = Attention(32, 8, 2)
    _, past = attention(torch.randn(2, 3, 32))
    with pytest.raises(ValueError, match=r"past must hold keys of shape \(B=3, n_kv_heads=2, t, d_k=4\), got "
                                         r"\(2, 2, 3, 4\)"):
        attention(torch.randn(3, 1, 32), past=past)
    with pytest.raises(ValueError, match="n_kv_heads=4"):
        Attention(32, 8, 4)(torch.randn(2, 1, 32), past=past)
    with pytest.raises(ValueError, match=r"x must have shape \(batch, length, d_model=32\)"):
        attention(torch.randn(2, 1, 16))
    assert attention(torch.randn(2, 1, 32), past=past)[1][0].shape == (2, 2, 4, 4)


# ---- chapter 11 proven against references of its own, without transformers (tests/test_hf.py has those)


def test_apply_rope_is_multiplication_by_a_unit_complex_number_per_pair():
    """Pair (x[2i], x[2i+1]) as the complex number x[2i] + i x[2i+1], at position p, times e^(i p base^(-2i/d_k)):
    the rotation written the other way, with torch's complex numbers. A pair taken as (i, i + d_k/2), a sign flipped
    or a frequency off by a factor all differ."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 8, dtype=torch.float64)
    angles = rope_angles(7, 8, base=100.0)
    pairs = torch.view_as_complex(x.view(2, 3, 7, 4, 2).contiguous())  # (B, h, T, d_k / 2)
    p = torch.arange(7, dtype=torch.float64)[:, None]
    theta = 100.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    turned = pairs * torch.polar(torch.ones(7, 4, dtype=torch.float64), p * theta)
    want = torch.view_as_real(turned).flatten(-2)
    assert torch.allclose(apply_rope(x, angles), want, atol=1e-12)


def test_grouped_query_attention_is_multi_head_attention_with_each_key_value_head_copied_to_its_group():
    """4 query heads sharing 2 key/value heads equal 4-head attention whose key and value projections repeat each
    shared head's rows for the queries of its group (heads 0, 1 read kv head 0; heads 2, 3 kv head 1)."""
    torch.manual_seed(0)
    gqa = Attention(32, 4, n_kv_heads=2)
    mha = Attention(32, 4)
    d_k = 8
    with torch.no_grad():
        mha.w_q.load_state_dict(gqa.w_q.state_dict())
        mha.w_o.load_state_dict(gqa.w_o.state_dict())
        for name in ("w_k", "w_v"):
            small, big = getattr(gqa, name), getattr(mha, name)  # kv head j's rows, once for each query of its group
            big.weight.copy_(small.weight.view(2, d_k, 32).repeat_interleave(2, 0).reshape(32, 32))
            big.bias.copy_(small.bias.view(2, d_k).repeat_interleave(2, 0).reshape(32))
    x = torch.randn(2, 5, 32)
    angles = rope_angles(5, d_k)
    out_gqa, (k_small, _) = gqa(x, angles)
    out_mha, (k_big, _) = mha(x, angles)
    assert torch.allclose(out_gqa, out_mha, atol=1e-6)
    assert k_small.shape == (2, 2, 5, d_k) and torch.allclose(k_big[:, 1::2], k_small, atol=1e-6)  # the cache: 2 heads


def test_a_modern_models_cached_steps_equal_the_full_forward_at_every_position():
    """Prefill with 3 tokens, then one token at a time with the cache: each step's logits equal the full forward's
    at that position (the cache offset shifts RoPE's positions: off by one, they would not)."""
    model = rope_model(n_kv_heads=2, norm="rms", ffn="swiglu")
    tokens = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(tokens)
        cache = [None] * len(model.layers)
        steps = [model(tokens[:, :3], cache)]
        steps += [model(tokens[:, t : t + 1], cache) for t in range(3, 9)]
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)
