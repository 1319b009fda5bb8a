# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 10's classes and functions (transformer_lib.gpt).

GPTConfig, token batches against the context, sampling's options and generate's inputs, and what a converter
(from_gpt2 here, chapter 11's from_llama) checks of its source: the layers its config counts, every tensor read, every
shape the config's.
"""
from __future__ import annotations

import re

from transformer_lib.checks.core import (check_int, check_ints, check_number, check_positive, check_token_batch,
                                         check_token_ids)
from transformer_lib.checks.attention import check_heads

__all__ = ["check_gpt_config", "check_gpt_options", "check_gpt_settings", "check_norm_options", "check_gpt_tokens",
           "check_sampling",
           "check_generate", "check_logits", "check_scores", "check_cache_batch", "hf_source", "check_gpt2_config",
           "check_gpt2_source", "check_source_layers", "check_gpt2_saved_masks", "check_all_read", "check_shapes",
           "check_filter_inputs", "check_generate_inputs", "check_cache_call"]


def check_gpt_config(config) -> None:
    """GPTConfig: positive sizes, n_heads dividing d_model, a dropout probability."""
    check_ints(vocab_size=config.vocab_size, n_layers=config.n_layers, d_model=config.d_model, d_ff=config.d_ff,
               context=config.context)
    check_heads(config.d_model, config.n_heads, config.dropout)


def check_norm_options(config) -> None:
    """The options both configs share for loading other models' weights: norm_eps > 0, scale_embeddings a bool."""
    check_positive("norm_eps", config.norm_eps)
    if not isinstance(config.scale_embeddings, bool):
        raise TypeError(f"scale_embeddings must be True or False, got {config.scale_embeddings!r}")


def check_gpt_options(config) -> None:
    """GPTConfig's options for GPT-2: positions, activation, norm_eps, scale_embeddings."""
    for name, allowed in (("positions", ("sinusoidal", "learned")), ("activation", ("relu", "gelu_tanh"))):
        if getattr(config, name) not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {getattr(config, name)!r}")
    check_norm_options(config)


def check_gpt_settings(config) -> None:
    """GPTConfig, whole: its sizes (check_gpt_config) and its options for GPT-2 (check_gpt_options)."""
    check_gpt_config(config)
    check_gpt_options(config)


def hf_source(source, config, model_class: str):
    """from_gpt2's and from_llama's source: a Hugging Face model (its state dict and config are read from it), or a
    state dict with its config (the config object or its to_dict()). Returns (state dict, get(name, default))."""
    import torch

    if isinstance(source, torch.nn.Module):
        if config is None:
            config = getattr(source, "config", None)
        if config is None:
            raise ValueError(f"source is a {type(source).__name__} without a .config; pass config= too (a "
                             f"{model_class}'s config)")
        state = source.state_dict()
    elif isinstance(source, dict):
        if config is None:
            raise ValueError(f"config is needed with a state dict as source: the {model_class}'s config "
                             "(model.config, or its to_dict())")
        state = source
    else:
        raise TypeError(f"source must be a {model_class} or its state dict, got {type(source).__name__}")
    if not isinstance(config, dict) and not hasattr(config, "to_dict"):
        raise TypeError(f"config must be a transformers config or a dict, got {type(config).__name__}")
    if not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise TypeError("source: a state dict maps names to tensors")
    fields = config if isinstance(config, dict) else config.to_dict()
    return state, lambda name, default=None: fields.get(name, default) if fields.get(name) is not None else default


def _need(state, names, model_class: str) -> None:
    missing = [n for n in names if n not in state]
    if missing:
        raise KeyError(f"source: no tensor {missing[0]!r} ({len(missing)} missing); is it a {model_class}'s state dict?")


def check_gpt2_config(get, state, prefix: str) -> None:
    """A GPT-2 configuration this book's GPT computes exactly: GELU in its tanh form, 1/sqrt(d_k) scaling, tied head."""
    if get("model_type", "gpt2") != "gpt2":
        raise ValueError(f"config: model_type={get('model_type')!r}; from_gpt2 reads GPT-2 (model_type 'gpt2')")
    act = get("activation_function")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ValueError(f"config: activation_function={act!r}; GPT loads GPT-2's tanh GELU (gelu_new or "
                         "gelu_pytorch_tanh) only")
    if not get("scale_attn_weights", True) or get("scale_attn_by_inverse_layer_idx", False):
        raise ValueError("config: attention scaled other than by 1/sqrt(d_k) (scale_attn_weights=False or "
                         "scale_attn_by_inverse_layer_idx=True) is not GPT-2's and not supported")
    if not get("tie_word_embeddings", True):
        raise ValueError("config: tie_word_embeddings=False; GPT's head is tied to its embedding, as GPT-2's")
    for name in ("vocab_size", "n_layer", "n_embd", "n_head", "n_positions"):
        if not isinstance(get(name), int):
            raise ValueError(f"config: {name}={get(name)!r} is not GPT-2's (a positive int)")
    layer = [f"h.{i}.{m}.{p}" for i in range(get("n_layer")) for m in ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2",
                                                                       "mlp.c_fc", "mlp.c_proj") for p in ("weight", "bias")]
    _need(state, [prefix + n for n in ["wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias", *layer]],
          "GPT2LMHeadModel")


def _listed(items: list, n: int = 4) -> str:
    return ", ".join(map(str, items[:n])) + (f", ... ({len(items)} in all)" if len(items) > n else "")


def check_source_layers(state: dict, pattern: str, n_layers: int, field: str) -> None:
    """A converter's source holds exactly the layers its config counts: more would be dropped, fewer are missing."""
    held = sorted({int(m.group(1)) for name in state if (m := re.match(pattern, name))})
    if held and held != list(range(n_layers)):
        extra, missing = [i for i in held if i >= n_layers], [i for i in range(n_layers) if i not in held]
        layers = lambda found: f"layer{'s' * (len(found) > 1)} {_listed(found)}"
        what = "; ".join([f"{layers(extra)} would be dropped"] * bool(extra)
                         + [f"{layers(missing)} missing"] * bool(missing))
        raise ValueError(f"source holds {len(held)} layers but config {field}={n_layers}: {what}; pass the config "
                         "these weights were saved with")


def check_gpt2_source(get, state, prefix: str) -> None:
    """from_gpt2's source before anything is built: the layers n_layer counts (first: check_gpt2_config names the
    first missing tensor only), then check_gpt2_config."""
    if isinstance(get("n_layer"), int):
        check_source_layers(state, rf"{re.escape(prefix)}h\.(\d+)\.", get("n_layer"), "n_layer")
    check_gpt2_config(get, state, prefix)


def check_gpt2_saved_masks(state, prefix: str) -> list:
    """The names of the causal masks (and the scores given to masked positions) that older transformers saved in a
    GPT-2's state dict, which from_gpt2 reads and drops; each .attn.bias must be the causal mask."""
    import torch

    masks = [n for n in state if re.fullmatch(rf"{re.escape(prefix)}h\.\d+\.attn\.(masked_)?bias", n)]
    for n in masks:
        t = state[n]
        tril = torch.ones(t.shape[-2:], dtype=torch.bool, device=t.device).tril() if t.dim() >= 2 else None
        if n.endswith(".attn.bias") and (tril is None or not torch.equal(t.bool(), tril.expand(t.shape))):
            raise ValueError(f"source: {n!r} is not the causal mask GPT-2 saved under that name (ones on and below "
                             "the diagonal); GPT's mask is causal")
    return masks


def check_all_read(state: dict, read: set, converter: str) -> None:
    """A converter refuses a source it would not read whole, naming what it would leave out."""
    unread = [name for name in state if name not in read]
    if unread:
        raise ValueError(f"source: {converter} does not read {_listed([repr(n) for n in unread])}, which would be "
                         "dropped; pass the model's own state dict with its own config")


def check_shapes(model, ours: dict, origin: dict) -> None:
    """Every converted tensor has the shape the config gives its parameter; the source's name when not."""
    shapes = {name: tensor.shape for name, tensor in model.state_dict().items()}
    for name, tensor in ours.items():
        if tensor.shape != shapes[name]:
            raise ValueError(f"source: {origin[name]!r} gives {name} the shape {tuple(tensor.shape)} where the "
                             f"config's sizes make it {tuple(shapes[name])}; pass the config the weights came with")


def check_gpt_tokens(tokens, config, already: int = 0) -> None:
    """A decoder-only model's input: (B, T) ids in its vocabulary, and no more positions than its context."""
    check_token_batch("tokens", tokens)
    check_token_ids("tokens", tokens, config.vocab_size)
    if already + tokens.size(1) > config.context:
        held = f" after the {already} already read" if already else ""
        n = tokens.size(1)
        count = f"{n} tokens{held} go" if n != 1 else f"1 token{held} goes"
        raise ValueError(f"tokens: {count} past the model's context={config.context} positions; feed fewer, or "
                         "build the model with a larger context")


def check_sampling(temperature, top_k, top_p) -> None:
    """Sampling knobs: temperature > 0, top_k a positive int or None, top_p in (0, 1]."""
    check_number("temperature", temperature)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}; for the most probable token, use greedy=True")
    if top_k is not None:
        check_int("top_k", top_k)
    check_number("top_p", top_p)
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must lie in (0, 1], got {top_p!r}")


def check_logits(logits) -> None:
    """filter_logits' logits: one row of scores per sequence, (B, V)."""
    import torch

    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or not logits.dtype.is_floating_point:
        got = f"shape {tuple(logits.shape)}, {logits.dtype}" if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a float tensor (B, V), one row of scores per sequence (e.g. model(tokens)"
                         f"[:, -1]), got {got}")


def check_scores(logits) -> None:
    """Logits a token can be drawn from: no NaN or +inf, and not every token -inf, in any row."""
    bad = logits.isnan().any(-1) | logits.isposinf().any(-1) | logits.isneginf().all(-1)  # (B,)
    if bool(bad.any()):
        raise ValueError(f"logits: row {bad.nonzero()[0].item()} holds NaN or +inf, or is all -inf: nothing to draw "
                         "a token from; the model's outputs are broken (a diverged run, or a half-precision overflow)")


def check_cache_batch(tokens, batch: int | None) -> None:
    """KVCache: every call after the first feeds the same number of sequences."""
    if batch is not None and tokens.size(0) != batch:
        raise ValueError(f"tokens: a batch of {tokens.size(0)} sequences, but this cache holds {batch}; feed the same "
                         "rows as the first call, or start a new KVCache")


def check_generate(model, prompt, max_new_tokens, end=None, gpt: type | None = None) -> None:
    """generate's inputs: a model that generates (`gpt`, chapter 10's GPT, or one with a kv_cache(), as chapter 11's
    ModernGPT), a prompt it can read, room in its context for the new tokens, an end token id."""
    if gpt is not None and not isinstance(model, gpt) and not callable(getattr(model, "kv_cache", None)):
        raise TypeError(f"model must be chapter 10's GPT or chapter 11's ModernGPT, got {type(model).__name__}; a "
                        "translation model decodes with chapter 7's greedy_decode_cached or beam_search")
    check_int("max_new_tokens", max_new_tokens)
    if end is not None:
        check_int("end", end, low=0)
        if end >= model.config.vocab_size:
            raise ValueError(f"end={end} is not a token id of the model's vocab_size={model.config.vocab_size}")
    check_gpt_tokens(prompt, model.config)
    needed = prompt.size(1) + max_new_tokens - 1  # the last new token is written, never read
    if needed > model.config.context:
        raise ValueError(f"a prompt of {prompt.size(1)} tokens and max_new_tokens={max_new_tokens} need {needed} "
                         f"positions, past the model's context={model.config.context}")


def check_filter_inputs(logits, temperature, top_k, top_p) -> None:
    """filter_logits' inputs: float logits (B, V) a token can be drawn from, and the sampling knobs."""
    check_logits(logits)
    check_sampling(temperature, top_k, top_p)
    check_scores(logits)


def check_generate_inputs(model, prompt, max_new_tokens, end, gpt, temperature, top_k, top_p) -> None:
    """generate's inputs: check_generate's, then the sampling knobs."""
    check_generate(model, prompt, max_new_tokens, end, gpt)
    check_sampling(temperature, top_k, top_p)


def check_cache_call(tokens, config, already: int, batch: int | None) -> None:
    """A KVCache call: tokens the model can read after the `already` it holds, as many rows as the first call had."""
    check_gpt_tokens(tokens, config, already=already)
    check_cache_batch(tokens, batch)
