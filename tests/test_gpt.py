"""Chapters 10 and 11: the decoder-only model, its cache and sampling; the modern block, each part against an
independent reference, and the mistakes each part invites, caught."""
import pytest
import torch
import torch.nn.functional as F

from transformer_lib.gpt import (GPT, GPTConfig, KVCache, caption_corpus, filter_logits, generate, leaks_future,
                                 lm_loss, perplexity, lm_batches, train_lm)
from transformer_lib.modern import (Attention, pairs_from_halves, BlockConfig, ModernGPT, RMSNorm, SwiGLU, FeedForward, apply_rope,
                                    cache_bytes_per_token, from_gpt, rope_angles)


def tiny_gpt(**kw) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**dict(vocab_size=40, n_layers=2, d_model=32, n_heads=4, d_ff=64, context=24), **kw})).eval()


# ---- chapter 10


def test_gpt_is_causal_and_a_copy_without_the_mask_is_caught():
    model = tiny_gpt()
    assert not leaks_future(model, 40)

    class NoMask(GPT):
        def forward(self, tokens):
            x = self.positions(self.embed(tokens))
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm(x))

    broken = NoMask(model.config)
    broken.load_state_dict(model.state_dict())
    assert leaks_future(broken, 40)


def test_gpt_ties_its_output_projection_to_its_embedding():
    model = tiny_gpt()
    assert model.lm_head.weight is model.embed.embedding.weight


def test_kv_cache_prefill_and_single_steps_give_the_full_models_logits():
    model = tiny_gpt()
    tokens = torch.randint(0, 40, (3, 20), generator=torch.Generator().manual_seed(1))
    full = model(tokens)
    cache = KVCache(model)
    assert torch.allclose(cache(tokens[:, :7]), full[:, 6], atol=1e-5)
    for t in range(7, 20):
        assert torch.allclose(cache(tokens[:, t : t + 1]), full[:, t], atol=1e-5), t


def test_filter_logits_keeps_the_top_k_and_the_smallest_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.15, 0.1]]))
    kept = lambda out: (out > float("-inf")).sum().item()
    assert kept(filter_logits(logits, top_k=2)) == 2
    assert kept(filter_logits(logits, top_p=0.5)) == 1  # 0.5 alone reaches 0.5
    assert kept(filter_logits(logits, top_p=0.7)) == 2  # 0.5 + 0.25
    assert kept(filter_logits(logits, top_p=0.75)) == 2
    assert kept(filter_logits(logits, top_p=0.76)) == 3
    assert kept(filter_logits(logits, top_p=1.0)) == 4
    sharp, flat = filter_logits(logits, 0.5).softmax(-1), filter_logits(logits, 2.0).softmax(-1)
    assert sharp[0, 0] > 0.5 > flat[0, 0]  # a low temperature sharpens, a high one flattens
    batch = torch.randn(5, 30, generator=torch.Generator().manual_seed(0))
    for p in (0.3, 0.9):
        out = filter_logits(batch, top_p=p)
        probs = batch.softmax(-1)
        for row, prob in zip(out, probs):
            keep = row > float("-inf")
            assert prob[keep].sum() >= p - 1e-6  # the nucleus reaches p ...
            assert prob[keep].sum() - prob[keep].min() < p  # ... and is the smallest set that does
            if (~keep).any():
                assert prob[keep].min() >= prob[~keep].max()  # the most probable tokens


def test_greedy_generation_with_the_cache_equals_recomputing_the_prefix():
    model = tiny_gpt()
    prompt = torch.randint(0, 40, (4, 3), generator=torch.Generator().manual_seed(2))
    tokens = prompt
    for _ in range(12):
        tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(generate(model, prompt, 12, greedy=True), tokens[:, 3:])


def test_sampling_is_seeded_and_a_finished_row_repeats_its_end_token():
    model = tiny_gpt()
    prompt = torch.zeros(6, 1, dtype=torch.long)
    run = lambda: generate(model, prompt, 15, top_k=5, end=3, generator=torch.Generator().manual_seed(0))
    a, b = run(), run()
    assert torch.equal(a, b)
    for row in a.tolist():
        if 3 in row:
            assert set(row[row.index(3):]) == {3}


def test_training_lowers_validation_perplexity_on_the_offline_captions(monkeypatch):
    import transformer_lib.gpt as gpt
    from transformer_lib.data import offline_corpus

    monkeypatch.setattr(gpt, "load_translation_data",
                        lambda split, root=None, download=False: (offline_corpus(600 if split == "train" else 60,
                                                                                 {"train": 0, "val": 1}[split]), "offline"))
    corpus = caption_corpus(None, 100, context=32)
    torch.manual_seed(0)
    model = GPT(GPTConfig(len(corpus.vocab), 1, 32, 4, 64, 0.1, 32))
    before = perplexity(model, lm_batches(corpus.val, 1000, corpus.vocab.pad_idx, shuffle=False), corpus.vocab.pad_idx)
    history = train_lm(model, corpus.train, corpus.val, 2, corpus.vocab.pad_idx, max_tokens=1000, warmup=20,
                       log=lambda *_: None)
    assert history[-1]["val_perplexity"] < before / 2 and len(history) == 2


def test_lm_loss_ignores_padding():
    logits = torch.randn(2, 5, 10)
    targets = torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8]])
    expected = F.cross_entropy(torch.cat([logits[0, :3], logits[1]]), torch.tensor([1, 2, 3, 4, 5, 6, 7, 8]))
    assert torch.allclose(lm_loss(logits, targets, pad_idx=0), expected)


@pytest.mark.parametrize("call, error, message", [
    (lambda m: filter_logits(torch.zeros(1, 4), temperature=0), ValueError, "temperature must be > 0"),
    (lambda m: filter_logits(torch.zeros(1, 4), temperature=-1.0), ValueError, "temperature must be > 0"),
    (lambda m: filter_logits(torch.zeros(1, 4), top_p=0.0), ValueError, r"top_p must lie in \(0, 1\]"),
    (lambda m: filter_logits(torch.zeros(1, 4), top_p=1.5), ValueError, r"top_p must lie in \(0, 1\]"),
    (lambda m: filter_logits(torch.zeros(1, 4), top_k=0), ValueError, "top_k must be a positive int"),
    (lambda m: m(torch.zeros(1, 25, dtype=torch.long)), ValueError, "past the model's context=24"),
    (lambda m: generate(m, torch.zeros(1, 20, dtype=torch.long), 6), ValueError, "need 25 positions"),
    (lambda m: m(torch.full((1, 3), 40)), ValueError, "tokens must lie in"),
    (lambda m: GPT(GPTConfig(40, d_model=30, n_heads=4)), ValueError, "not divisible by n_heads=4"),
])
def test_gpt_bad_inputs_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call(tiny_gpt())


def test_the_kv_cache_refuses_to_run_past_the_context():
    model = tiny_gpt()
    cache = KVCache(model)
    cache(torch.zeros(1, 24, dtype=torch.long))
    with pytest.raises(ValueError, match="after the 24 already read"):
        cache(torch.zeros(1, 1, dtype=torch.long))


# 5e-324 and 1e-46 are 0 in float32: the division is by zero (the smallest positive float64 down to float32's)
@pytest.mark.parametrize("temperature", [5e-324, 1e-46, 1e-45, 1e-38, 1e-30])
def test_a_tiny_temperature_samples_the_most_probable_token_and_never_nan(temperature):
    logits = torch.tensor([[2.0, 7.5, -3.0, 7.25], [-50.0, -60.0, -40.5, -41.0]])
    probs = filter_logits(logits, temperature).softmax(-1)
    assert torch.equal(probs, F.one_hot(logits.argmax(-1), 4).float())
    model = tiny_gpt()
    prompt = torch.randint(0, 40, (3, 4), generator=torch.Generator().manual_seed(0))
    sampled = generate(model, prompt, 8, temperature=temperature, generator=torch.Generator().manual_seed(0))
    assert torch.equal(sampled, generate(model, prompt, 8, greedy=True))


def test_float16_logits_at_a_small_temperature_do_not_overflow_and_others_are_only_divided():
    logits = torch.tensor([[100.0, 90.0, -5.0]], dtype=torch.float16)
    probs = filter_logits(logits, 1e-3).softmax(-1)  # 100 / 1e-3 is past float16's largest number, 65,504
    assert torch.equal(probs, torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float16))
    plain = torch.randn(4, 9)
    assert torch.equal(filter_logits(plain, 0.7), plain / 0.7)  # no overflow: the logits divided, nothing else


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("top_p", [1e-12, 1e-8, 1e-4, 0.3])
def test_the_nucleus_always_keeps_the_most_probable_token_in_every_dtype(dtype, top_p):
    """A top_p below float16's smallest number (6e-8) rounds to 0 there, and every token would reach it: the most
    probable stays, always, alone where top_p is below its probability."""
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.5], [0.0, 0.0, -1.0, 4.0]], dtype=dtype)
    kept = filter_logits(logits, top_p=top_p).isfinite()
    assert torch.equal(kept, F.one_hot(logits.float().argmax(-1), 4).bool()), kept


def test_nan_logits_are_named_not_sampled():
    with pytest.raises(ValueError, match="logits: row 1 holds NaN"):
        filter_logits(torch.tensor([[0.0, 1.0], [float("nan"), 1.0]]))
    with pytest.raises(ValueError, match="or is all -inf"):
        filter_logits(torch.full((1, 3), float("-inf")))
    model = tiny_gpt()
    with torch.no_grad():
        model.norm.weight[0] = float("nan")  # a diverged model: every logit NaN
    for greedy in (True, False):
        with pytest.raises(ValueError, match="holds NaN"):
            generate(model, torch.tensor([[1, 2]]), 3, greedy=greedy)


def test_generate_samples_from_a_half_precision_gpt():
    model = tiny_gpt().to(torch.bfloat16)
    out = generate(model, torch.tensor([[1, 2]]), 5, top_k=5, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 5) and out.dtype == torch.long


# ---- chapter 11


def test_rmsnorm_matches_torch_rmsnorm_in_outputs_and_gradients():
    torch.manual_seed(0)
    x = (torch.randn(3, 4, 16) * 2 + 1).requires_grad_()
    ours, theirs = RMSNorm(16), torch.nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
        theirs.weight.copy_(ours.weight)
    grad = torch.randn(3, 4, 16)
    assert torch.allclose(ours(x), theirs(x), atol=1e-6)
    g_ours = torch.autograd.grad(ours(x), [x, ours.weight], grad)
    g_theirs = torch.autograd.grad(theirs(x), [x, theirs.weight], grad)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(g_ours, g_theirs))


def test_an_rmsnorm_that_subtracts_the_mean_is_caught():
    x = torch.randn(2, 16) + 3.0
    norm = RMSNorm(16)
    centered = norm(x - x.mean(-1, keepdim=True))
    assert not torch.allclose(centered, torch.nn.RMSNorm(16, eps=1e-6)(x), atol=1e-2)


def test_swiglu_at_two_thirds_d_ff_has_the_relu_networks_parameters():
    for d_model, d_ff in ((64, 192), (192, 768), (256, 1536)):
        relu = FeedForward(d_model, d_ff, bias=False)
        gated = SwiGLU(d_model, 2 * d_ff // 3)
        assert sum(p.numel() for p in relu.parameters()) == sum(p.numel() for p in gated.parameters())


def test_blocks_swiglu_is_the_nearest_to_the_relu_networks_size_and_exercise_11_2_agrees():
    import importlib.util
    from pathlib import Path

    from transformer_lib.exercises import verdict
    from transformer_lib.modern import Block

    path = Path(__file__).resolve().parents[1] / "solutions" / "ch11_modern.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    solution = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(solution)
    count = lambda m: sum(p.numel() for p in m.parameters())
    for d_model, d_ff in ((64, 192), (256, 1024), (256, 1025), (48, 80), (512, 2048)):  # 3 divides only 192
        block = Block(BlockConfig(10, 1, d_model, 4, d_ff, ffn="swiglu", bias=False))
        h, relu = block.ffn.w_1.out_features, count(FeedForward(d_model, d_ff, bias=False))
        assert abs(count(block.ffn) - relu) == (0 if d_ff % 3 == 0 else d_model)  # exact, or one d_model apart
        assert all(abs(3 * d_model * other - relu) > abs(count(block.ffn) - relu) for other in (h - 1, h + 1))
        assert solution.swiglu_hidden(d_model, d_ff) == h
    assert Block(BlockConfig(10, 1, 256, 4, 1024, ffn="swiglu")).ffn.w_1.out_features == 683  # 682 if rounded down
    assert verdict("11.2", solution.swiglu_hidden)[0]
    passed, sentence = verdict("11.2", lambda d_model, d_ff: 2 * d_ff // 3)
    assert not passed and "d_hidden 682" in sentence and "683" in sentence


def test_rope_equals_the_complex_number_formulation_and_scores_depend_on_the_offset_only():
    angles = rope_angles(30, 12)
    x = torch.randn(2, 3, 30, 12, dtype=torch.float64)
    z = torch.view_as_complex(x.reshape(2, 3, 30, 6, 2).contiguous()) * torch.polar(torch.ones_like(angles), angles)
    assert torch.allclose(torch.view_as_real(z).flatten(-2), apply_rope(x, angles), atol=1e-12)
    q, k = torch.randn(12, dtype=torch.float64), torch.randn(12, dtype=torch.float64)
    rot = lambda v: apply_rope(v.expand(1, 1, 30, 12), angles)[0, 0]
    scores = rot(q) @ rot(k).T
    for offset in (-7, 0, 3, 11):
        d = scores.diagonal(offset)
        assert torch.allclose(d, d[:1].expand_as(d), atol=1e-10)
    assert not torch.allclose(scores.diagonal(0)[:1], scores.diagonal(5)[:1])


def test_rope_in_the_wrong_layout_or_on_the_values_is_caught():
    angles = rope_angles(16, 8)
    x = torch.randn(1, 2, 1, 8, dtype=torch.float64).expand(1, 2, 16, 8)
    wrong = apply_rope(x.transpose(1, 2), angles[:2]).transpose(1, 2)  # turned by the head index
    scores = wrong @ wrong.transpose(-2, -1)
    assert torch.allclose(scores, scores[..., :1, :1].expand_as(scores))  # no position information left
    one = torch.randn(1, 1, 1, 8, dtype=torch.float64).expand(1, 1, 16, 8)
    q = k = apply_rope(one, angles)
    causal = torch.ones(16, 16, dtype=torch.bool).triu(1)
    weights = (q @ k.transpose(-2, -1)).masked_fill(causal, float("-inf")).softmax(-1)
    assert torch.allclose(weights @ one, one)  # values unrotated: the same output everywhere
    assert not torch.allclose(weights @ apply_rope(one, angles), one)  # values rotated: absolute positions leak in


@pytest.mark.parametrize("n_kv", [8, 4, 2, 1])
def test_grouped_query_attention_matches_torch_sdpa_with_enable_gqa(n_kv):
    torch.manual_seed(n_kv)
    attn = Attention(64, 8, n_kv).eval()
    x = torch.randn(2, 11, 64)
    out, (k, v) = attn(x)
    q = attn.heads(attn.w_q(x), 8)
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert torch.allclose(attn.w_o(reference.transpose(1, 2).flatten(2)), out, atol=1e-5)
    if n_kv not in (1, 8):  # tiling the key/value heads instead of repeating each in place is another attention
        tiled = F.scaled_dot_product_attention(q, k.repeat(1, 8 // n_kv, 1, 1), v.repeat(1, 8 // n_kv, 1, 1),
                                               is_causal=True)
        assert not torch.allclose(tiled, reference, atol=1e-3)


def test_modern_gpt_with_the_2017_switches_is_chapter_10s_gpt():
    gpt = tiny_gpt()
    twin = from_gpt(gpt).eval()
    tokens = torch.randint(0, 40, (2, 18))
    assert torch.allclose(gpt(tokens), twin(tokens), atol=1e-5)


@pytest.mark.parametrize("changes", [dict(norm="rms"), dict(ffn="swiglu"), dict(positions="rope"), dict(n_kv_heads=2),
                                     dict(bias=False), dict(norm="rms", ffn="swiglu", positions="rope", n_kv_heads=1,
                                                            bias=False)])
def test_every_modern_variant_is_causal_and_its_cache_gives_the_full_models_logits(changes):
    torch.manual_seed(0)
    model = ModernGPT(BlockConfig(40, 2, 32, 4, 64, 0.0, 24, **changes)).eval()
    assert not leaks_future(model, 40)
    tokens = torch.randint(0, 40, (2, 16))
    full, cache = model(tokens), [None, None]
    steps = [model(tokens[:, :5], cache)[:, -1]] + [model(tokens[:, t : t + 1], cache)[:, -1] for t in range(5, 16)]
    assert all(torch.allclose(s, full[:, t], atol=1e-4) for s, t in zip(steps, range(4, 16)))


def test_the_cache_shrinks_by_the_factor_of_key_value_heads_dropped():
    sizes = {n: cache_bytes_per_token(ModernGPT(BlockConfig(40, 2, 32, 4, 64, 0.0, 24, n_kv_heads=n)), 16)
             for n in (4, 2, 1)}
    assert sizes[4] == 2 * sizes[2] == 4 * sizes[1] == 2 * 2 * 4 * 8 * 4  # k and v, layers, heads, d_k, float32


def test_no_biases_leaves_no_bias_to_train():
    model = ModernGPT(BlockConfig(40, 2, 32, 4, 64, 0.0, 24, bias=False))
    assert not [n for n, p in model.named_parameters() if n.endswith("bias") and p.requires_grad]


@pytest.mark.parametrize("call, message", [
    (lambda: Attention(64, 8, 3), "n_heads=8 is not divisible by n_kv_heads=3"),
    (lambda: BlockConfig(40, n_heads=8, n_kv_heads=3), "n_heads=8 is not divisible by n_kv_heads=3"),
    (lambda: BlockConfig(40, norm="batch"), "norm must be one of"),
    (lambda: rope_angles(16, 7), "d_k=7 must be even"),
    (lambda: apply_rope(torch.zeros(1, 2, 20, 8), rope_angles(16, 8)), "past the RoPE table"),
    (lambda: ModernGPT(BlockConfig(40, 2, 32, 4, 64, 0.0, 24, positions="rope"))(torch.zeros(1, 25, dtype=torch.long)),
     "past the model's context=24"),
])
def test_modern_bad_inputs_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_generate_gives_the_model_back_in_the_mode_it_came_in():
    """A model that was training when a sample was drawn mid-run goes on training with dropout on."""
    from transformer_lib.gpt import GPT, GPTConfig, generate

    model = GPT(GPTConfig(vocab_size=20, n_layers=1, d_model=16, d_ff=32, n_heads=2, context=16, dropout=0.1))
    for training in (True, False):
        model.train(training)
        generate(model, torch.tensor([[1, 2]]), 3, greedy=True)
        assert model.training is training and all(m.training is training for m in model.modules())
    model.train()
    with pytest.raises(ValueError, match="end=20"):
        generate(model, torch.tensor([[1, 2]]), 3, end=20)
    assert model.training


def test_pairs_from_halves_is_the_inverse_of_the_half_split_reordering_and_keeps_scores():
    torch.manual_seed(0)
    n_heads, d_k, d_in = 3, 8, 5
    pairs = torch.randn(n_heads * d_k, d_in)
    # the other way round, written independently: each head's even rows first, then its odd rows
    halves = torch.cat([pairs.view(n_heads, d_k, d_in)[:, 0::2], pairs.view(n_heads, d_k, d_in)[:, 1::2]], 1)
    halves = halves.reshape(n_heads * d_k, d_in)
    assert torch.equal(pairs_from_halves(halves, n_heads), pairs)
    bias = torch.arange(n_heads * d_k, dtype=torch.float32)
    assert pairs_from_halves(bias, n_heads)[:4].tolist() == [0.0, 4.0, 1.0, 5.0]  # head 0: rows 0, d_k/2, 1, ...
    # a query in the half-split layout, turned as transformers' rotate_half turns it, is ours turned, reordered
    angles = rope_angles(6, d_k)
    q = torch.randn(1, 1, 6, d_k, dtype=torch.float64)
    cos, sin = (torch.cat([f, f], -1) for f in (angles.cos(), angles.sin()))
    half_turned = q * cos + torch.cat([-q[..., d_k // 2:], q[..., : d_k // 2]], -1) * sin
    order = pairs_from_halves(torch.arange(d_k), 1)
    assert torch.allclose(half_turned[..., order], apply_rope(q[..., order], angles), atol=1e-12)
