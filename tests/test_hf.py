"""Chapters 10 and 11 against the models people load: a Hugging Face GPT2LMHeadModel converted by from_gpt2 and a
LlamaForCausalLM converted by from_llama give the same logits (to 1e-5 in float32) and the same greedy tokens, with
and without either side's key/value cache, on random tiny configurations built by transformers itself (no download).
"""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from transformer_lib.gpt import GPT, GPTConfig, KVCache, from_gpt2, generate
from transformer_lib.modern import BlockConfig, ModernGPT, from_gpt, from_llama

BOUNDED = settings(max_examples=12, deadline=None, derandomize=True)
TOLERANCE = 1e-5


def is_norm_gain(name: str) -> bool:
    """A LayerNorm's or RMSNorm's gain: GPT-2's ln_1, ln_2, ln_f and Llama's input_layernorm,
    post_attention_layernorm and norm, by their weight's name."""
    module = name.rsplit(".", 1)[0].split(".")[-1]
    return name.endswith("weight") and (module.startswith("ln_") or "norm" in module)


def randomized(model, seed: int, std: float):
    """The model with every weight drawn afresh: norm gains from 1 + N(0, std^2) (they start at 1, and gains around 0
    would shrink every activation), every other tensor from N(0, std^2), larger than its initialization, so all
    count."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std + (1.0 if is_norm_gain(name) else 0.0))
    return model.eval()


@st.composite
def gpt2_configs(draw):
    heads, d_k = draw(st.integers(1, 4)), draw(st.sampled_from([2, 4, 8]))
    return GPT2Config(vocab_size=draw(st.integers(5, 80)), n_positions=draw(st.integers(8, 24)), n_embd=heads * d_k,
                      n_layer=draw(st.integers(1, 3)), n_head=heads,
                      n_inner=draw(st.one_of(st.none(), st.integers(4, 48))),
                      layer_norm_epsilon=draw(st.sampled_from([1e-5, 1e-6])),
                      activation_function=draw(st.sampled_from(["gelu_new", "gelu_pytorch_tanh"])),
                      bos_token_id=None, eos_token_id=None)


@st.composite
def llama_configs(draw):
    kv, group = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    d_k = draw(st.sampled_from([4, 8]))  # with d_k = 2, pairs_from_halves is the identity: the layout untested
    return LlamaConfig(vocab_size=draw(st.integers(5, 80)), hidden_size=kv * group * d_k,
                       intermediate_size=draw(st.integers(4, 48)), num_hidden_layers=draw(st.integers(1, 3)),
                       num_attention_heads=kv * group, num_key_value_heads=kv,
                       max_position_embeddings=draw(st.integers(8, 24)),
                       rope_theta=draw(st.sampled_from([10000.0, 500000.0])),
                       rms_norm_eps=draw(st.sampled_from([1e-5, 1e-6])),
                       tie_word_embeddings=draw(st.booleans()), bos_token_id=None, eos_token_id=None,
                       pad_token_id=None)


def tokens_for(vocab: int, length: int, seed: int) -> torch.Tensor:
    return torch.randint(0, vocab, (2, length), generator=torch.Generator().manual_seed(seed))


@BOUNDED
@given(config=gpt2_configs(), seed=st.integers(0, 2**16), as_state_dict=st.booleans())
def test_from_gpt2_gives_transformers_logits(config, seed, as_state_dict):
    theirs = randomized(GPT2LMHeadModel(config), seed, 0.15)
    ours = from_gpt2(theirs.state_dict(), config.to_dict()) if as_state_dict else from_gpt2(theirs)
    tokens = tokens_for(config.vocab_size, config.n_positions, seed)
    with torch.no_grad():
        gap = (ours(tokens) - theirs(tokens).logits).abs().max().item()
    assert gap < TOLERANCE, gap
    assert not ours.training and ours.lm_head.weight is ours.embed.embedding.weight


@BOUNDED
@given(config=llama_configs(), seed=st.integers(0, 2**16), as_state_dict=st.booleans())
def test_from_llama_gives_transformers_logits(config, seed, as_state_dict):
    theirs = randomized(LlamaForCausalLM(config), seed, 0.15)
    ours = from_llama(theirs.state_dict(), config) if as_state_dict else from_llama(theirs)
    tokens = tokens_for(config.vocab_size, config.max_position_embeddings, seed)
    with torch.no_grad():
        gap = (ours(tokens) - theirs(tokens).logits).abs().max().item()
    assert gap < TOLERANCE, gap
    assert (ours.lm_head.weight is ours.embed.embedding.weight) == config.tie_word_embeddings


def hf_greedy(model, prompt, n, cache: bool) -> torch.Tensor:
    """transformers' greedy generate: no end token (the configs have none), every prompt token attended to."""
    return model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, do_sample=False,
                          use_cache=cache)[:, prompt.size(1):]


@torch.no_grad()
def greedy_without_cache(model, prompt, n) -> torch.Tensor:
    out = prompt
    for _ in range(n):
        out = torch.cat([out, model(out)[:, -1:].argmax(-1)], 1)
    return out[:, prompt.size(1):]


@torch.no_grad()
def modern_greedy_with_cache(model: ModernGPT, prompt, n) -> torch.Tensor:
    cache, out = [None] * len(model.layers), []
    logits = model(prompt, cache)
    for _ in range(n):
        out.append(logits[:, -1:].argmax(-1))
        logits = model(out[-1], cache)
    return torch.cat(out, 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_generation_is_token_identical_to_transformers_with_and_without_caches(seed):
    torch.manual_seed(seed)
    gpt2 = randomized(GPT2LMHeadModel(GPT2Config(vocab_size=61, n_positions=24, n_embd=32, n_layer=2, n_head=4,
                                                 bos_token_id=None, eos_token_id=None)), seed, 0.15)
    llama = randomized(LlamaForCausalLM(LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=40,
                                                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                    max_position_embeddings=24, bos_token_id=None, eos_token_id=None,
                                                    pad_token_id=None)), seed, 0.15)
    prompt, n = tokens_for(61, 5, seed), 15
    ours = from_gpt2(gpt2)
    expected = hf_greedy(gpt2, prompt, n, True)
    assert torch.equal(hf_greedy(gpt2, prompt, n, False), expected)
    assert torch.equal(generate(ours, prompt, n, greedy=True), expected)  # chapter 10's KVCache
    assert torch.equal(greedy_without_cache(ours, prompt, n), expected)
    modern = from_llama(llama)
    expected = hf_greedy(llama, prompt, n, True)
    assert torch.equal(hf_greedy(llama, prompt, n, False), expected)
    assert torch.equal(modern_greedy_with_cache(modern, prompt, n), expected)
    assert torch.equal(greedy_without_cache(modern, prompt, n), expected)
    assert len(set(expected.flatten().tolist())) > 1  # not one token repeated: the test could fail


def test_the_wrong_rope_layout_gives_other_logits():
    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16)
    theirs = randomized(LlamaForCausalLM(config), 0, 0.2)
    misread = from_llama(theirs)
    with torch.no_grad():
        for mine, layer in zip(misread.layers, theirs.model.layers):
            mine.attn.w_q.weight.copy_(layer.self_attn.q_proj.weight)
            mine.attn.w_k.weight.copy_(layer.self_attn.k_proj.weight)
        tokens = tokens_for(50, 16, 0)
        reference, wrong = theirs(tokens).logits, misread(tokens)
    assert (wrong - reference).abs().max() > 0.2 * reference.std()
    assert (wrong.argmax(-1) != reference.argmax(-1)).float().mean() > 0.2


def test_norm_gains_are_drawn_around_one_and_other_tensors_around_zero():
    gpt2 = randomized(GPT2LMHeadModel(GPT2Config(vocab_size=20, n_positions=8, n_embd=8, n_layer=1, n_head=2)), 0, 0.2)
    llama = randomized(LlamaForCausalLM(LlamaConfig(vocab_size=20, hidden_size=8, intermediate_size=8,
                                                    num_hidden_layers=1, num_attention_heads=2,
                                                    max_position_embeddings=8)), 0, 0.2)
    gains = [n for model in (gpt2, llama) for n, _ in model.named_parameters() if is_norm_gain(n)]
    assert sorted(gains) == sorted(["transformer.h.0.ln_1.weight", "transformer.h.0.ln_2.weight",
                                    "transformer.ln_f.weight", "model.layers.0.input_layernorm.weight",
                                    "model.layers.0.post_attention_layernorm.weight", "model.norm.weight"])
    for model in (gpt2, llama):
        for name, p in model.named_parameters():
            assert abs(p.mean().item() - (1.0 if is_norm_gain(name) else 0.0)) < 0.3, name


def test_the_books_defaults_are_unchanged_and_gpt2s_options_reach_the_modules():
    plain = GPTConfig(vocab_size=50)
    assert (plain.positions, plain.activation, plain.norm_eps, plain.scale_embeddings) == ("sinusoidal", "relu", 1e-6,
                                                                                            True)
    block = BlockConfig(vocab_size=50)
    assert (block.d_hidden, block.rope_base, block.norm_eps, block.scale_embeddings, block.tie_head) == (
        None, 10000.0, 1e-6, True, True)
    gpt2 = GPT(GPTConfig(50, 1, 16, 2, 32, context=8, positions="learned", activation="gelu_tanh", norm_eps=1e-5,
                         scale_embeddings=False)).eval()
    assert gpt2.layers[0].sublayers[0].norm.eps == gpt2.norm.eps == 1e-5
    x = torch.randn(1, 3, 16)
    ff = gpt2.layers[0].feed_forward
    expected = ff.w_2(torch.nn.functional.gelu(ff.w_1(x), approximate="tanh"))
    assert torch.allclose(ff(x), expected)
    tokens = tokens_for(50, 8, 0)
    cache = KVCache(gpt2)
    steps = [cache(tokens[:, :3])] + [cache(tokens[:, t : t + 1]) for t in range(3, 8)]
    assert all(torch.allclose(s, gpt2(tokens)[:, t], atol=1e-5) for s, t in zip(steps, range(2, 8)))


def test_from_gpt_refuses_gpt2s_options_it_has_no_switch_for():
    with pytest.raises(ValueError, match="positions='learned'"):
        from_gpt(GPT(GPTConfig(50, 1, 16, 2, 32, context=8, positions="learned")))


def test_the_package_imports_without_transformers():
    """transformers is an optional extra: the converters read tensors and config fields, and import nothing of it."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['transformers'] = None\n"
            "import transformer_lib.gpt, transformer_lib.modern, transformer_lib.fast\n"
            "assert 'transformers' not in {m.split('.')[0] for m in sys.modules if sys.modules[m] is not None}")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- converters refuse a source they would not read whole


def tiny_gpt2(n_layer: int = 2, **options) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=30, n_positions=8, n_embd=16, n_layer=n_layer, n_head=2,
                                      bos_token_id=None, eos_token_id=None, **options)).eval()


def tiny_llama(n_layers: int = 2, **options) -> LlamaForCausalLM:
    torch.manual_seed(0)
    return randomized(LlamaForCausalLM(LlamaConfig(**{**dict(
        vocab_size=30, hidden_size=16, intermediate_size=24, num_hidden_layers=n_layers, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=8, bos_token_id=None, eos_token_id=None, pad_token_id=None),
        **options})), 0, 0.15)


@pytest.mark.parametrize("held, said, message", [(3, 2, r"source holds 3 layers but config \w+=2: layer 2 would be "
                                                  "dropped"),
                                                 (2, 3, r"source holds 2 layers but config \w+=3: layer 2 missing"),
                                                 (4, 1, r"layers 1, 2, 3 would be dropped")])
def test_a_layer_count_other_than_the_configs_is_refused_naming_the_layers(held, said, message):
    gpt2, llama = tiny_gpt2(held), tiny_llama(held)
    with pytest.raises(ValueError, match=message):
        from_gpt2(gpt2.state_dict(), {**gpt2.config.to_dict(), "n_layer": said})
    with pytest.raises(ValueError, match=message):
        from_llama(llama.state_dict(), {**llama.config.to_dict(), "num_hidden_layers": said})


def test_a_tensor_the_converter_does_not_read_is_named():
    for convert, model in ((from_gpt2, tiny_gpt2()), (from_llama, tiny_llama())):
        state = {**model.state_dict(), "score.weight": torch.zeros(2, 16), "lm_head.bias": torch.zeros(30)}
        with pytest.raises(ValueError, match=rf"{convert.__name__} does not read 'score.weight', 'lm_head.bias'"):
            convert(state, model.config)


def test_a_tied_config_over_an_untied_llama_head_is_refused_naming_both():
    llama = tiny_llama(tie_word_embeddings=False)
    assert not torch.equal(llama.state_dict()["lm_head.weight"], llama.state_dict()["model.embed_tokens.weight"])
    with pytest.raises(ValueError, match="lm_head.weight differs from model.embed_tokens.weight, but config "
                                         "tie_word_embeddings=True"):
        from_llama(llama.state_dict(), {**llama.config.to_dict(), "tie_word_embeddings": True})
    state = {k: v for k, v in llama.state_dict().items() if k != "lm_head.weight"}
    with pytest.raises(KeyError, match="no lm_head.weight, but config tie_word_embeddings=False"):
        from_llama(state, llama.config)
    tied = tiny_llama(tie_word_embeddings=True)  # its state dict holds lm_head.weight, equal to the embedding
    assert from_llama(tied.state_dict(), tied.config).lm_head.weight is not None


def test_a_shape_other_than_the_configs_sizes_is_named():
    gpt2, llama = tiny_gpt2(n_inner=40), tiny_llama()
    with pytest.raises(ValueError, match=r"'transformer.h.0.mlp.c_fc.weight' gives layers.0.feed_forward.w_1.weight "
                                         r"the shape \(40, 16\) where the config's sizes make it \(64, 16\)"):
        from_gpt2(gpt2.state_dict(), {**gpt2.config.to_dict(), "n_inner": None})
    with pytest.raises(ValueError, match="'model.layers.0.mlp.gate_proj.weight' gives layers.0.ffn.w_1.weight"):
        from_llama(llama.state_dict(), {**llama.config.to_dict(), "intermediate_size": 32})


def test_the_buffers_older_transformers_saved_are_read_when_they_are_what_the_config_says():
    gpt2, llama = tiny_gpt2(), tiny_llama()
    tokens = tokens_for(30, 8, 0)
    mask = torch.ones(1, 1, 8, 8, dtype=torch.bool).tril()
    old = {**gpt2.state_dict(), **{f"transformer.h.{i}.attn.{n}": t for i in range(2)
                                   for n, t in (("bias", mask), ("masked_bias", torch.tensor(-1e4)))}}
    with torch.no_grad():
        assert torch.allclose(from_gpt2(old, gpt2.config)(tokens), gpt2(tokens).logits, atol=1e-5)
    with pytest.raises(ValueError, match="'transformer.h.1.attn.bias' is not the causal mask"):
        from_gpt2({**old, "transformer.h.1.attn.bias": torch.ones(1, 1, 8, 8, dtype=torch.bool)}, gpt2.config)
    frequencies = 10000.0 ** (-torch.arange(0, 4, 2).float() / 4)  # head size 4, rope_theta 10,000
    old = {**llama.state_dict(), **{f"model.layers.{i}.self_attn.rotary_emb.inv_freq": frequencies for i in range(2)}}
    with torch.no_grad():
        assert torch.allclose(from_llama(old, llama.config)(tokens), llama(tokens).logits, atol=1e-5)
    with pytest.raises(ValueError, match="rotary_emb.inv_freq' are not the RoPE frequencies of the config's "
                                         "rope_theta=500000.0"):
        from_llama(old, {**llama.config.to_dict(), "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}})
