# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 7's classes and functions (transformer_lib.decoding).

The key/value cache's length, beam searches, sentences to translate and the vocabularies that must fit
the model (check_vocabs imports chapter 6's Vocab where it is used), and attention maps.
"""
from __future__ import annotations

import math

import torch

from transformer_lib.checks.core import as_dtype, check_ints, check_last_dim

__all__ = [
    "check_cache_length", "check_search", "check_vocabs", "check_sentences", "check_source_lengths",
    "check_weights_kept",
    "check_attention_ids", "check_attention_kind", "check_map_labels", "check_layers", "as_serving_dtype",
    "check_int8_weight", "check_int8_input", "check_int8_matmul",
]


def check_cache_length(t: int, max_len: int) -> None:
    """DecoderCache's next step t must have a position in the model's table of max_len."""
    if t >= max_len:
        raise ValueError(f"cannot decode past the model's max_len={max_len} target positions; "
                         "ask for fewer tokens (max_len) or build the model with a larger max_len")


def check_search(search) -> None:
    """translate_tokens' search: None (chapter 7's decoding) or a callable like beam_search."""
    if search is not None and not callable(search):
        raise TypeError("search must be None or a callable like beam_search (e.g. FastBeamSearch(model)), "
                        f"got {type(search).__name__}")


def check_vocabs(model, src_vocab, tgt_vocab) -> None:
    """The vocabularies must be Vocabs of the sizes the model's embeddings and generator were built for."""
    from transformer_lib.data import Vocab  # chapter 6's class; imported here, where it is used

    sizes = {"src_vocab": model.src_embed[0].vocab_size, "tgt_vocab": model.generator.proj.out_features}
    for name, vocab in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab)):
        if not isinstance(vocab, Vocab):
            raise TypeError(f"{name} must be a Vocab, got {type(vocab).__name__}")
        if len(vocab) != sizes[name]:
            raise ValueError(f"{name} has {len(vocab)} tokens, but the model was built for {name}={sizes[name]}")


def check_sentences(sentences, beam_size, model, src_vocab, tgt_vocab, batch_size: int = 1) -> None:
    """translate_tokens' inputs: a list of sentences (not one str), a beam size and a batch size, vocabularies
    that fit the model."""
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of strings; use translate() for a single sentence")
    check_ints(beam_size=beam_size, batch_size=batch_size)
    check_vocabs(model, src_vocab, tgt_vocab)


def check_weights_kept(model) -> None:
    """attention_maps reads the weights each attention module keeps; chapter 9's fast path keeps none."""
    if any(m.attn is None for layer in [*model.encoder.layers, *model.decoder.layers]
           for m in (layer.self_attn, getattr(layer, "src_attn", layer.self_attn))):
        raise ValueError("model runs chapter 9's fast path, which keeps no attention weights; switch it back first "
                         "with transformer_lib.fast.use_fast_path(model, False)")


def check_source_lengths(ids: list, max_len: int) -> None:
    """Every tokenized source must fit the model's positions; the first that does not is named."""
    for i, sentence in enumerate(ids):
        if len(sentence) > max_len:
            raise ValueError(f"sentence {i} has {len(sentence):,} tokens, more than the model's {max_len:,} "
                             "positions (max_len); split it into shorter sentences")


def check_attention_ids(src_ids, tgt_ids) -> None:
    """attention_maps' sentence pair: lists of token ids (ints), not tensors or text, at least one id each."""
    for name, ids in (("src_ids", src_ids), ("tgt_ids", tgt_ids)):
        if isinstance(ids, torch.Tensor):
            raise TypeError(f"{name} must be a list of token ids, got a tensor; pass {name}.tolist()")
        if isinstance(ids, str) or not isinstance(ids, (list, tuple)) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise TypeError(f"{name} must be a list of token ids (ints), e.g. src_vocab.encode(src_tok(sentence)); "
                            f"got {type(ids).__name__} {str(ids)[:40]!r}")
    if not src_ids or not tgt_ids:
        raise ValueError("src_ids and tgt_ids must each hold at least one token id")


def check_layers(layers, n_layers: int) -> list[int]:
    """plot_attention_grid's layers: None (all of them) or layer numbers counting from 1; returns them as a list."""
    if layers is None:
        return list(range(1, n_layers + 1))
    if isinstance(layers, int) and not isinstance(layers, bool):
        raise TypeError(f"layers must be a list of layer numbers, e.g. [{layers}], got the int {layers}")
    if not isinstance(layers, (list, tuple, range)) or not layers or not all(
            isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= n_layers for n in layers):
        raise ValueError(f"layers must be a non-empty list of layer numbers from 1 to {n_layers} (the maps' layers, "
                         f"counting from 1), got {layers!r}")
    return list(layers)


def check_attention_kind(kind, kinds) -> None:
    """One of the kinds of attention map."""
    if kind not in kinds:
        raise ValueError(f"kind must be one of {list(kinds)}, got {kind!r}")


def check_map_labels(kind: str, shape, rows: str, row_tokens, cols: str, col_tokens) -> None:
    """A (layers, heads, rows, columns) map needs a token label per row and per column."""
    if tuple(shape[2:]) != (len(row_tokens), len(col_tokens)):
        raise ValueError(f"{kind} maps are {shape[2]} x {shape[3]}, but there are {len(row_tokens)} {rows} "
                         f"and {len(col_tokens)} {cols} tokens")


def as_serving_dtype(dtype) -> torch.dtype:
    """PackedDecoder's dtype: a floating-point type (or its name), or torch.int8 ("int8") for int8 weights."""
    if dtype is torch.int8 or (isinstance(dtype, str) and dtype.removeprefix("torch.") == "int8"):
        return torch.int8
    try:
        return as_dtype("dtype", dtype)
    except ValueError as err:
        raise ValueError(f"{err}, or torch.int8 for int8 weights") from None


def check_int8_weight(weight, bias) -> None:
    """int8_linear's weight: a floating-point (out, in) tensor of finite numbers; its bias None or (out,)."""
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not weight.is_floating_point():
        got = tuple(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise ValueError(f"weight must be a floating-point (out_features, in_features) tensor, got {got}")
    if not torch.isfinite(weight).all():
        raise ValueError("weight holds inf or nan: int8 cannot represent it")
    if bias is not None and (not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (weight.size(0),)):
        got = tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__
        raise ValueError(f"bias must be None or of shape ({weight.size(0)},), got {got}")


def check_int8_input(x) -> None:
    """quantize_int8's x: a floating-point tensor of at least one dimension (its rows are quantized), every row
    finite."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or not x.is_floating_point():
        got = f"{x.dtype} of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a floating-point tensor of at least one dimension, got {got}")
    check_finite_rows(x)


def check_int8_rows(x, in_features: int) -> None:
    """quantized_linear's x: its last dimension in_features, and no row of inf or NaN (check_finite_rows)."""
    check_last_dim(x, in_features, "in_features")
    check_finite_rows(x)


def check_finite_rows(x: torch.Tensor) -> None:
    """int8's input x: no row holding inf or NaN, which has no scale (and quantized with its batch under one scale,
    as PyTorch's kernel does, would turn every other row to inf or NaN). One sum first: the row-by-row search runs
    only when the sum is not finite."""
    if math.isfinite(x.detach().sum().item()):
        return
    rows = (~torch.isfinite(x.detach())).reshape(-1, x.size(-1)).any(-1).nonzero()
    if len(rows):
        raise ValueError(f"row {int(rows[0])} of x (shape {tuple(x.shape)}, its rows counted over all but the last "
                         "dimension) holds inf or NaN: int8 has no scale for it; find where the activations overflowed")


def check_int8_matmul(a, b) -> None:
    """int8_matmul's a (m, k) and b (k, n): int8 matrices whose inner sizes agree."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int8 or t.dim() != 2:
            got = f"{t.dtype} of shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a 2-D int8 tensor, got {got}")
    if a.size(1) != b.size(0):
        raise ValueError(f"a (m, k) and b (k, n) must agree on k: a is {tuple(a.shape)}, b {tuple(b.shape)}")
