# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 11's classes and functions (transformer_lib.modern).

RoPE's tables and inputs, grouped-query attention's head counts, its past keys and values, BlockConfig, ModernGPT's
tokens and cache, and from_llama's source: its config, its head, the tensors it names and RoPE frequencies it saved.
"""
from __future__ import annotations

import torch

from transformer_lib.checks.core import _shape, check_int, check_ints, check_number, check_token_batch
from transformer_lib.checks.attention import check_heads
from transformer_lib.checks.gpt import (_need, check_gpt_config, check_gpt_tokens, check_norm_options,
                                        check_source_layers)

__all__ = ["check_rope", "check_rope_input", "check_head_rows", "check_gqa", "check_past", "check_block_config",
           "check_modern_tokens", "check_llama_config", "check_llama_source", "check_llama_tensors"]


def check_rope(context, d_k, base=10000.0) -> None:
    """rope_angles' sizes: positive, d_k even (RoPE turns pairs of dimensions), and a base above 1."""
    check_ints(context=context, d_k=d_k)
    if d_k % 2:
        raise ValueError(f"d_k={d_k} must be even: RoPE rotates pairs of dimensions")
    check_number("base", base)
    if base <= 1:
        raise ValueError(f"base={base!r} must be > 1: pair i turns at base^(-2i / d_k), slower for each pair "
                         "(10000 in the paper and in Llama 2, 500000 in Llama 3)")


def check_rope_input(x, angles) -> None:
    """apply_rope's inputs: x (B, h, T, d_k) and angles (T, d_k / 2), one row per position of x, float32 or float64."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"x must be (batch, heads, positions, d_k), heads already split; got {_shape(x)}")
    if not isinstance(angles, torch.Tensor) or angles.dim() != 2 or angles.size(1) * 2 != x.size(-1):
        raise ValueError(f"angles must be (positions, d_k / 2) = (T, {x.size(-1) // 2}) for x of shape "
                         f"{tuple(x.shape)}, got {_shape(angles)}")
    if angles.size(0) != x.size(2):
        raise ValueError(f"angles has {angles.size(0)} positions and x {x.size(2)}: a sequence past the RoPE table "
                         "(rope_angles(context, ...)) or the wrong rows of it")
    if angles.dtype in (torch.float16, torch.bfloat16):
        raise ValueError(f"angles are {angles.dtype}, which rounds the angle of a late position by radians; keep "
                         "them float32 or float64 (rope_angles gives float64)")


def check_head_rows(weight, n_heads) -> None:
    """pairs_from_halves' inputs: a projection's weight (n_heads * d_k, d_in) or bias (n_heads * d_k,), d_k even."""
    check_ints(n_heads=n_heads)
    if not isinstance(weight, torch.Tensor) or weight.dim() not in (1, 2):
        raise ValueError(f"weight must be a query or key projection's weight (n_heads * d_k, d_in) or bias "
                         f"(n_heads * d_k,), got {_shape(weight)}")
    if weight.size(0) % n_heads or (weight.size(0) // n_heads) % 2:
        raise ValueError(f"weight has {weight.size(0)} rows: that is not n_heads={n_heads} heads of an even d_k "
                         "(RoPE turns pairs of dimensions); pass the heads of this projection (n_kv_heads for keys "
                         "under grouped-query attention)")


def check_gqa(d_model, n_heads, n_kv_heads, dropout) -> None:
    """Grouped-query attention: MultiHeadAttention's checks, and n_kv_heads dividing n_heads."""
    check_heads(d_model, n_heads, dropout)
    check_int("n_kv_heads", n_kv_heads)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}; each key/value head "
                         "serves n_heads // n_kv_heads query heads")


def check_past(past, x, n_kv_heads: int, d_k: int) -> None:
    """Attention's past: keys (B, n_kv_heads, t, d_k) of the same batch as x, this layer's."""
    if past is not None and not (isinstance(past[0], torch.Tensor) and past[0].dim() == 4 and
                                 past[0].shape[:2] + past[0].shape[3:] == (x.size(0), n_kv_heads, d_k)):
        raise ValueError(f"past must hold keys of shape (B={x.size(0)}, n_kv_heads={n_kv_heads}, t, "
                         f"d_k={d_k}), got {tuple(getattr(past[0], 'shape', ()))}: another batch or another "
                         "layer's; start without past")


def check_block_config(config) -> None:
    """BlockConfig: GPTConfig's sizes, each switch one of its names, n_kv_heads dividing n_heads."""
    check_gpt_config(config)
    for name, allowed in (("norm", ("layer", "rms")), ("ffn", ("relu", "swiglu")), ("positions", ("sinusoidal", "rope"))):
        if getattr(config, name) not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {getattr(config, name)!r}")
    if config.n_kv_heads is not None:
        check_gqa(config.d_model, config.n_heads, config.n_kv_heads, config.dropout)
    if not isinstance(config.bias, bool):
        raise TypeError(f"bias must be True or False, got {config.bias!r}")
    if config.positions == "rope":
        check_rope(config.context, config.d_model // config.n_heads, config.rope_base)
    if config.d_hidden is not None:
        check_int("d_hidden", config.d_hidden)
    check_norm_options(config)
    if not isinstance(config.tie_head, bool):
        raise TypeError(f"tie_head must be True or False, got {config.tie_head!r}")


def check_llama_config(get, state) -> None:
    """A Llama configuration ModernGPT computes exactly: SiLU gate, no biases, plain RoPE, d_k = d_model / n_heads."""
    if get("model_type", "llama") != "llama":
        raise ValueError(f"config: model_type={get('model_type')!r}; from_llama reads Llama (model_type 'llama')")
    if get("hidden_act") != "silu":
        raise ValueError(f"config: hidden_act={get('hidden_act')!r}; ModernGPT's SwiGLU gates with silu, as Llama's")
    if get("attention_bias", False) or get("mlp_bias", False):
        raise ValueError("config: attention_bias or mlp_bias is set; a Llama has no biases, and from_llama loads none")
    for name in ("vocab_size", "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
                 "max_position_embeddings"):
        if not isinstance(get(name), int):
            raise ValueError(f"config: {name}={get(name)!r} is not a Llama's (a positive int)")
    rope = get("rope_parameters") or get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise ValueError(f"config: rope type {rope.get('rope_type', rope.get('type'))!r}; ModernGPT's RoPE has no "
                         "scaling (rope_type 'default' only)")
    d, h = get("hidden_size"), get("num_attention_heads")
    if get("head_dim", d // h) * h != d:
        raise ValueError(f"config: head_dim={get('head_dim')} times num_attention_heads={h} is not hidden_size={d}; "
                         "ModernGPT's heads split d_model")
    if get("pretraining_tp", 1) != 1:
        raise ValueError("config: pretraining_tp != 1 splits the projections; load a model saved with 1")
    _need(state, ["model.embed_tokens.weight", "model.norm.weight"], "LlamaForCausalLM")


def check_llama_source(get, state) -> None:
    """from_llama's source before anything is built: the layers num_hidden_layers counts, check_llama_config, and a
    head as the config's tie_word_embeddings says (tied: the embedding's, or none; untied: its own lm_head.weight)."""
    if isinstance(get("num_hidden_layers"), int):
        check_source_layers(state, r"model\.layers\.(\d+)\.", get("num_hidden_layers"), "num_hidden_layers")
    check_llama_config(get, state)
    tied, head = bool(get("tie_word_embeddings", False)), state.get("lm_head.weight")
    if tied and head is not None and not torch.equal(head, state["model.embed_tokens.weight"]):
        raise ValueError("source: lm_head.weight differs from model.embed_tokens.weight, but config "
                         "tie_word_embeddings=True would use the embedding for both; pass the config these weights "
                         "were saved with (tie_word_embeddings=False)")
    if not tied and head is None:
        raise KeyError("source: no lm_head.weight, but config tie_word_embeddings=False says the head has its own "
                       "table; pass tie_word_embeddings=True if it shares the embedding's")


def check_llama_tensors(state, origin: dict, frequencies, config) -> list:
    """Every tensor from_llama maps (origin: ours -> theirs) is in the source, and the RoPE frequencies older
    transformers saved (rotary_emb.inv_freq) are the config's: `frequencies`, position 1's angles. Returns their
    names, which from_llama reads and drops."""
    for key in origin.values():
        if key not in state:
            raise KeyError(f"source: no tensor {key!r}; is it a LlamaForCausalLM's state dict?")
    rotary = [n for n in state if n.endswith(("rotary_emb.inv_freq", "rotary_emb.original_inv_freq"))]
    for n in rotary:
        if state[n].shape != frequencies.shape or not torch.allclose(state[n].cpu().double(), frequencies, rtol=1e-5):
            raise ValueError(f"source: {n!r} are not the RoPE frequencies of the config's "
                             f"rope_theta={config.rope_base} and head size {config.d_model // config.n_heads}")
    return rotary


def check_modern_tokens(tokens, cache, layers, config) -> int:
    """ModernGPT's input: (B, T) token ids, and a cache (None, or one entry per layer) whose tokens and these fit in
    the context. Returns how many tokens the cache already holds."""
    check_token_batch("tokens", tokens)
    t = 0 if cache is None else _cached_tokens(cache, layers, tokens.size(0))
    check_gpt_tokens(tokens, config, already=t)
    return t


def _cached_tokens(cache, layers, batch: int) -> int:
    """How many tokens a ModernGPT's cache holds: a list with one entry per layer, all None (nothing read yet) or all
    (keys, values) of shape (batch, n_kv_heads, t, d_k) with the same t."""
    if not isinstance(cache, list):
        raise TypeError(f"cache must be a list, [None] * {len(layers)} at first, got {type(cache).__name__}")
    if len(cache) != len(layers):
        raise ValueError(f"cache has {len(cache)} entries but the model {len(layers)} layers; start from "
                         f"[None] * {len(layers)}")
    if all(kv is None for kv in cache):
        return 0
    first = cache[0][0] if isinstance(cache[0], tuple) and isinstance(cache[0][0], torch.Tensor) else None
    first = first if first is not None and first.dim() == 4 else None  # keys (B, n_kv_heads, t, d_k)
    if first is not None and first.size(0) != batch:
        raise ValueError(f"cache holds {first.size(0)} sequences but tokens has {batch} rows; feed the same rows as "
                         "the first call, or start a new cache")
    for i, (kv, layer) in enumerate(zip(cache, layers)):
        want = (batch, layer.attn.n_kv_heads, -1 if first is None else first.size(2), layer.attn.d_k)
        if not (isinstance(kv, tuple) and len(kv) == 2 and all(isinstance(x, torch.Tensor) and x.shape == want
                                                                for x in kv)):
            got = [tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__ for x in kv] if isinstance(
                kv, tuple) else type(kv).__name__
            raise ValueError(f"cache[{i}] must be (keys, values) of shape {want}, as this model's cache[0], got {got}; "
                             "start a new cache")
    return first.size(2)
