# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 11's classes and functions (transformer_lib.modern).

RoPE's tables and inputs, grouped-query attention's head counts and BlockConfig.
"""
from __future__ import annotations

import torch

from transformer_lib.checks.core import _shape, check_int, check_ints, check_number
from transformer_lib.checks.attention import check_heads
from transformer_lib.checks.gpt import _need, check_gpt_config, check_norm_options

__all__ = ["check_rope", "check_rope_input", "check_head_rows", "check_gqa", "check_block_config", "check_llama_config"]


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
    """apply_rope's inputs: x (B, h, T, d_k) and angles (T, d_k / 2), one row per position of x."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"x must be (batch, heads, positions, d_k), heads already split; got {_shape(x)}")
    if not isinstance(angles, torch.Tensor) or angles.dim() != 2 or angles.size(1) * 2 != x.size(-1):
        raise ValueError(f"angles must be (positions, d_k / 2) = (T, {x.size(-1) // 2}) for x of shape "
                         f"{tuple(x.shape)}, got {_shape(angles)}")
    if angles.size(0) != x.size(2):
        raise ValueError(f"angles has {angles.size(0)} positions and x {x.size(2)}: a sequence past the RoPE table "
                         "(rope_angles(context, ...)) or the wrong rows of it")


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
