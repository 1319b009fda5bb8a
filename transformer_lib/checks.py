# Hand-written tool module (not generated from a notebook).
"""Input checks for every public entry point of transformer_lib, kept out of the chapters' way.

A class of the book spends one line on its inputs, a call into this module; the check raises a ValueError or
TypeError that names the argument and what was expected, before anything changes. docs/bad_inputs.md lists every
mistake tried and the message it gets (generated from tests/bad_inputs.py).

The checks take plain values (sizes, names, tensors) and import no chapter's module when this one loads, so that
any chapter can import them; the two that need a chapter's class take it as an argument (check_training_run) or
import it when called (check_vocabs).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch

__all__ = [
    "check_int", "check_ints", "check_probability", "check_positive", "check_vectors", "check_token_ids",
    "check_token_batch", "check_sequence", "check_last_dim", "check_embedding", "check_qkv", "check_mask",
    "check_heads", "check_attention_inputs", "check_layer_inputs", "check_model_tokens", "check_src_tgt",
    "check_same_batch", "check_config", "check_options", "check_batch", "check_label_smoothing",
    "check_loss_inputs", "check_rate", "check_training_options", "check_training_batch", "check_decoding",
    "check_copy_task", "check_split", "check_text", "check_vocab_tokens", "check_token_lists", "check_token_list",
    "check_vocab_id", "check_examples", "check_cache_length", "check_vocabs", "check_checkpoint", "check_file",
    "check_checkpoint_metadata", "read_checkpoint_metadata", "check_checkpoint_shapes", "as_dtype", "as_device",
    "check_checkpoint_vocabs", "check_sentences", "check_source_lengths", "check_carried_vocabs", "check_strings",
    "check_unicode", "check_bleu_inputs", "check_recipe", "check_recipe_fields", "check_training_run",
    "check_shared_vocab", "check_resumable", "check_shipped_model", "check_one_source", "check_training_state",
    "check_resume_data", "check_attention_ids", "check_attention_kind", "check_map_labels", "check_symbols",
    "check_search", "check_encoder_decoder", "check_word_counts", "check_bpe", "check_tokenizer_dict",
    "read_checkpoint_tokenizers", "check_gpt_config", "check_gpt_tokens", "check_sampling", "check_generate",
    "check_rope", "check_rope_input", "check_gqa", "check_block_config",
]


# ------------------------------------------------------------------------------------------- numbers
def check_int(name: str, value, low: int = 1) -> None:
    """Raise unless value is an int (not a bool) >= low, naming the argument."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < low:
        raise ValueError(f"{name} must be {'a positive int' if low == 1 else f'an int >= {low}'}, got {value}")


def check_ints(**values) -> None:
    """check_int for each keyword, in order: check_ints(d_model=d_model, d_ff=d_ff)."""
    for name, value in values.items():
        check_int(name, value)


def check_instance(name: str, value, cls: type, what: str = "") -> None:
    """Raise TypeError unless value is a cls, naming the argument (what: words after the class's name)."""
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be a {cls.__name__}{what}, got {type(value).__name__}")


def as_paths(name: str, paths) -> list:
    """A non-empty list of paths as Path objects (average_checkpoints' checkpoints)."""
    if isinstance(paths, (str, Path)):
        raise TypeError(f"{name} must be a list of paths, got the single path {str(paths)!r}")
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError(f"{name} is empty: nothing to average")
    return paths


def check_probability(name: str, value) -> None:
    """Raise unless value is a number in [0, 1) (a dropout or smoothing probability)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1), got {value!r}")


def check_number(name: str, value) -> None:
    """Raise unless value is a finite int or float (not a bool, not a string), naming the argument."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")


def check_positive(name: str, value) -> None:
    """Raise unless value > 0 (an epsilon, a factor)."""
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")


# ------------------------------------------------------------------------------------------- tensors
def _shape(x) -> object:
    return tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__


def check_vectors(name: str, x, d_model: int) -> None:
    """Raise unless x is a (batch, length, d_model) tensor."""
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.size(-1) != d_model:
        raise ValueError(f"{name} must have shape (batch, length, d_model={d_model}), got {_shape(x)}")


def check_token_ids(name: str, tokens, vocab_size: int, vocab_name: str = "vocab_size") -> None:
    """Raise unless tokens is an integer tensor with every id in [0, vocab_size)."""
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"{name} must be a tensor of token ids, got {type(tokens).__name__}")
    _check_integer_dtype(name, tokens)
    if tokens.numel():
        low, high = (v.item() for v in torch.aminmax(tokens))
        if low < 0 or high >= vocab_size:
            raise ValueError(f"{name} must lie in [0, {vocab_name}={vocab_size}), got values from {low} to {high}")


def _check_integer_dtype(name: str, tokens: torch.Tensor) -> None:
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids (torch.long), got dtype {tokens.dtype}")


def check_token_batch(name: str, tokens) -> None:
    """Raise unless tokens is a non-empty (batch, length) tensor of integer ids."""
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.numel() == 0:
        raise ValueError(f"{name} must be a non-empty (batch, length) tensor of token ids, got {_shape(tokens)}")
    _check_integer_dtype(name, tokens)


def check_sequence(x, d_model: int, max_len: int, owner: str) -> None:
    """Raise unless x is (B, L, d_model) with L <= max_len (owner: the class name, for the message)."""
    check_vectors("x", x, d_model)
    if x.size(1) > max_len:
        raise ValueError(
            f"sequence length {x.size(1)} is longer than max_len={max_len} of this {owner}; "
            f"build it with max_len >= {x.size(1)}"
        )


def check_last_dim(x: torch.Tensor, d_model: int) -> None:
    """Raise unless x's last dimension is d_model (else weights broadcast against the wrong axis)."""
    if x.size(-1) != d_model:
        raise ValueError(f"x must have last dimension d_model={d_model}, got shape {tuple(x.shape)}")


# ------------------------------------------------------------------------------------------- chapter 1
def check_embedding(vocab_size, d_model, padding_idx) -> None:
    """TokenEmbedding's arguments: positive sizes, padding_idx None or a token id."""
    check_ints(vocab_size=vocab_size, d_model=d_model)
    if padding_idx is not None:
        check_int("padding_idx", padding_idx, low=0)
        if padding_idx >= vocab_size:
            raise ValueError(f"padding_idx={padding_idx} is not a token id in [0, vocab_size={vocab_size})")


# ------------------------------------------------------------------------------------------- chapter 2
def check_qkv(query, key, value) -> None:
    """scaled_dot_product_attention's inputs: (..., L, d) tensors, query and key sharing d_k, key and value a length."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            raise ValueError(f"{name} must be a tensor of shape (..., length, d_k), got {_shape(t)}")
    if query.size(-1) != key.size(-1):
        raise ValueError(f"query and key must share their last dimension d_k, got {query.size(-1)} and {key.size(-1)}")
    if key.size(-2) != value.size(-2):
        raise ValueError(f"key and value must have the same length, got {key.size(-2)} and {value.size(-2)}")


def check_mask(mask, scores_shape, name: str = "mask") -> None:
    """Raise unless mask is boolean and broadcasts to scores_shape without growing it."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        kind = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"{name} must be a boolean tensor (True where attention is allowed), got {kind}")
    # each of the mask's dimensions, matched from the right, must be 1 or the scores' size
    fits = mask.dim() <= len(scores_shape) and all(m in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores_shape)))
    if not fits:
        hint = " (a (B, Lq, Lk) mask needs .unsqueeze(1) to broadcast over heads)" if mask.dim() == 3 and len(scores_shape) == 4 else ""
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the attention scores' shape "
            f"{tuple(scores_shape)} (..., queries, keys){hint}"
        )


def check_heads(d_model, n_heads, dropout) -> None:
    """MultiHeadAttention's arguments: positive sizes, n_heads dividing d_model, a dropout probability."""
    check_ints(d_model=d_model, n_heads=n_heads)
    check_probability("dropout", dropout)
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}; each head needs d_model // n_heads dimensions")


def check_attention_inputs(d_model: int, n_heads: int, query, key, value, mask=None) -> None:
    """MultiHeadAttention's inputs: (B, L, d_model) each, one batch size, keys and values of one length, a mask that fits."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_vectors(name, t, d_model)
    if not query.size(0) == key.size(0) == value.size(0):
        raise ValueError(f"query, key and value must have the same batch size, got {query.size(0)}, {key.size(0)}, {value.size(0)}")
    if key.size(1) != value.size(1):
        raise ValueError(f"key and value must have the same length, got {key.size(1)} and {value.size(1)}")
    if mask is not None:
        check_mask(mask, (query.size(0), n_heads, query.size(1), key.size(1)))


# ------------------------------------------------------------------------------------------- chapter 3
def check_layer_inputs(attn, x, memory=None, **masks) -> None:
    """An encoder or decoder layer's inputs and masks, by the names the caller knows, before any attention runs.

    attn: the layer's self-attention (its d_model and n_heads give the shapes expected).
    """
    d_model, n_heads = attn.d_model, attn.n_heads
    check_vectors("x", x, d_model)
    B, L = x.shape[:2]
    keys = {"mask": L, "tgt_mask": L}
    if memory is not None:
        check_vectors("memory", memory, d_model)
        if memory.size(0) != B:
            raise ValueError(f"memory must have the batch size of x, {B}, got {memory.size(0)}")
        keys["src_mask"] = memory.size(1)
    for name, mask in masks.items():
        if mask is not None:
            check_mask(mask, (B, n_heads, L, keys[name]), name)


# ------------------------------------------------------------------------------------------- chapter 4
def check_model_tokens(name: str, tokens, embed: torch.nn.Module, mask=None, stack=None) -> None:
    """Token ids an embedding can take: (B, L), within its vocabulary, no longer than its positions; and their mask.

    `embed` is searched for a token table (a module with `vocab_size`) and a position table (one with `max_len`);
    the mask must fit the self-attention scores of `stack` (an Encoder: its layers' n_heads).
    """
    check_token_batch(name, tokens)
    for module in embed.modules():
        if hasattr(module, "vocab_size") and hasattr(module, "embedding"):
            check_token_ids(name, tokens, module.vocab_size, f"{name}_vocab")
        elif hasattr(module, "max_len") and tokens.size(1) > module.max_len:
            raise ValueError(f"{name} has length {tokens.size(1)}, longer than the model's max_len={module.max_len} "
                             f"positions; build the model with max_len >= {tokens.size(1)}")
    if mask is not None and stack is not None and len(stack.layers):
        L, n_heads = tokens.size(1), stack.layers[0].self_attn.n_heads
        check_mask(mask, (tokens.size(0), n_heads, L, L), f"{name}_mask")


def check_src_tgt(src, tgt) -> None:
    """A model's two token batches: each (B, L) integer ids, the same B."""
    check_token_batch("src", src)
    check_token_batch("tgt", tgt)
    check_same_batch("src", src, "tgt", tgt)


def check_same_batch(a_name: str, a, b_name: str, b) -> None:
    """Raise unless two tensors have the same batch size (their first dimension)."""
    if a.size(0) != b.size(0):
        raise ValueError(f"{a_name} and {b_name} must have the same batch size, got {a.size(0)} and {b.size(0)}")


def check_config(c) -> None:
    """A ModelConfig's values, each by its field name."""
    for name in ("src_vocab", "tgt_vocab", "n_layers", "d_model", "d_ff", "n_heads", "max_len"):
        check_int(name, getattr(c, name))
    if c.d_model % c.n_heads:
        raise ValueError(f"d_model={c.d_model} is not divisible by n_heads={c.n_heads}")
    check_probability("dropout", c.dropout)
    if c.pad_idx is not None:
        check_int("pad_idx", c.pad_idx, low=0)
        if c.pad_idx >= min(c.src_vocab, c.tgt_vocab):
            raise ValueError(f"pad_idx={c.pad_idx} must be a token id of both vocabularies, "
                             f"in [0, {min(c.src_vocab, c.tgt_vocab)})")
    check_positive("eps", c.eps)
    if c.share_embeddings and c.src_vocab != c.tgt_vocab:
        raise ValueError(f"share_embeddings needs one vocabulary, got src_vocab={c.src_vocab}, tgt_vocab={c.tgt_vocab}")


def check_options(what: str, given, known: list[str], listed: list[str] | None = None) -> None:
    """Raise naming the unknown keys of `given` (keyword options, or a dict's keys) and, if given, the known ones."""
    unknown = set(given) - set(known)
    if unknown:
        hint = f"; the options are {', '.join(listed)}" if listed else ""
        raise ValueError(f"unknown {what}: {', '.join(sorted(unknown))}{hint}")


# ------------------------------------------------------------------------------------------- chapter 5
def check_batch(src, tgt) -> None:
    """A Batch's tensors: (B, L) integer ids, tgt (if any) of the same batch and at least 2 long."""
    for name, t in (("src", src), ("tgt", tgt)):
        if t is not None:
            check_token_batch(name, t)
    if tgt is not None and (tgt.size(0) != src.size(0) or tgt.size(1) < 2):
        raise ValueError(f"tgt must have shape (batch={src.size(0)}, length >= 2), got {tuple(tgt.shape)}")


def check_label_smoothing(vocab_size, padding_idx, smoothing, spread_over_all) -> None:
    """LabelSmoothing's arguments."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    check_int("vocab_size", vocab_size)
    check_int("padding_idx", padding_idx, low=0)
    if padding_idx >= vocab_size:
        raise ValueError(f"padding_idx={padding_idx} is not a token id in [0, vocab_size={vocab_size})")
    if vocab_size < 3 and not spread_over_all:
        raise ValueError(f"vocab_size must be at least 3 (padding, target and one other), got {vocab_size}")


def check_loss_inputs(log_probs: torch.Tensor, target: torch.Tensor, vocab_size: int) -> None:
    """A loss's inputs: (N, vocab_size) log-probabilities and (N,) target ids."""
    if log_probs.dim() != 2 or log_probs.size(1) != vocab_size or target.shape != log_probs.shape[:1]:
        raise ValueError(
            f"log_probs must be (N, vocab_size={vocab_size}) and target (N,), "
            f"got {tuple(log_probs.shape)} and {tuple(target.shape)}"
        )
    check_token_ids("target", target, vocab_size)


def check_rate(d_model, factor, warmup) -> None:
    """The learning-rate schedule's arguments."""
    check_ints(d_model=d_model, warmup=warmup)
    check_positive("factor", factor)


def check_training_options(accum_steps, clip_norm) -> None:
    """train_epoch's options."""
    check_int("accum_steps", accum_steps)
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"clip_norm must be positive or None (no clipping), got {clip_norm!r}")


def check_training_batch(batch) -> None:
    """What train_epoch and evaluate take from their batches: a Batch with targets."""
    if not all(hasattr(batch, name) for name in ("src", "src_mask", "tgt", "pad_idx")):  # chapter 5's Batch
        raise TypeError(f"batches must yield Batch objects (Batch(src, tgt, pad_idx)), got a {type(batch).__name__}")
    if batch.tgt is None:
        raise ValueError("batches must hold targets: got a Batch built without tgt")


def check_decoding(model, max_len, **symbols) -> None:
    """max_len must be an int >= 0 and every symbol (start_symbol=..., end_symbol=...) a target token id."""
    check_int("max_len", max_len, low=0)
    check_symbols(model.generator.proj.out_features, **symbols)


def check_encoder_decoder(model) -> None:
    """Chapter 9's FastBeamSearch reads the weights of chapter 4's EncoderDecoder, module by module."""
    from transformer_lib.model import EncoderDecoder  # chapter 4's class; imported here, where it is used

    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder (make_model, chapter 4), got {type(model).__name__}")


def check_search(search) -> None:
    """translate_tokens' search: None (chapter 7's decoding) or a callable like beam_search."""
    if search is not None and not callable(search):
        raise TypeError("search must be None or a callable like beam_search (e.g. FastBeamSearch(model)), "
                        f"got {type(search).__name__}")


def check_symbols(vocab: int, **symbols) -> None:
    """Every symbol (start_symbol=..., end_symbol=...) must be a token id of a target vocabulary of `vocab` tokens."""
    for name, value in symbols.items():
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < vocab):
            raise ValueError(f"{name}={value!r} is not a target token id in [0, tgt_vocab={vocab})")


def check_copy_task(vocab_size, **sizes) -> None:
    """The copy task's vocabulary (padding, start and at least one symbol) and positive sizes."""
    if vocab_size < 3:
        raise ValueError(f"vocab_size must be at least 3 (padding, start and one symbol), got {vocab_size}")
    check_ints(**sizes)


# ------------------------------------------------------------------------------------------- chapters 6 to 8
def check_split(split, splits) -> None:
    """load_multi30k's split: one of the splits it knows."""
    if split not in splits:
        raise ValueError(f"split must be one of {', '.join(splits)}, got {split!r}")


def check_text(text) -> None:
    """A tokenizer's input: one sentence as a str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (one sentence), got {type(text).__name__}")
    check_unicode("text", text)


def check_vocab_tokens(tokens, specials) -> None:
    """Vocab's token list: the specials first, no token twice."""
    if list(tokens[:len(specials)]) != list(specials):
        raise ValueError(f"tokens must start with the specials {specials}")
    if len(set(tokens)) != len(tokens):
        raise ValueError("tokens must be unique")


def check_token_lists(sentences: list) -> None:
    """Vocab.build's sentences: lists of token strings, not raw text."""
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str) or not all(isinstance(t, str) for t in sentence):
            raise TypeError(f"sentences must be lists of token strings (tokenize first); sentence {i} is "
                            f"{type(sentence).__name__} {str(sentence)[:40]!r}")


def check_token_list(tokens) -> None:
    """Vocab.encode's tokens: a list of str, not the sentence itself."""
    if isinstance(tokens, str):
        raise TypeError("tokens must be a list of str, one per token (tokenize the sentence first), got a str")


def check_vocab_id(i: int, size: int) -> None:
    """Vocab.decode's ids: each in [0, size)."""
    if not 0 <= i < size:
        raise ValueError(f"ids must lie in [0, {size}), the vocabulary's size; got {i}")


def check_examples(examples) -> None:
    """(source ids, target ids) examples to batch: some, each with a source and a target of <s>, words, </s>."""
    if not len(examples):
        raise ValueError("examples is empty: nothing to batch")
    for i, (src, tgt) in enumerate(examples):
        if len(src) == 0:
            raise ValueError(f"examples[{i}] has an empty source; drop empty sentences before batching")
        if len(tgt) < 2:
            raise ValueError(f"examples[{i}] has a target of {len(tgt)} ids; it needs <s>, the words and </s>")


def check_cache_length(t: int, max_len: int) -> None:
    """DecoderCache's next step t must have a position in the model's table of max_len."""
    if t >= max_len:
        raise ValueError(f"cannot decode past the model's max_len={max_len} target positions; "
                         "ask for fewer tokens (max_len) or build the model with a larger max_len")


def check_word_counts(word_counts) -> None:
    """learn_bpe's input: a mapping from pre-token (a non-empty str) to how often it occurs (an int >= 1)."""
    if not hasattr(word_counts, "items") or isinstance(word_counts, str):
        raise TypeError(f"word_counts must map each pre-token to its count (a dict or Counter), got "
                        f"{type(word_counts).__name__}")
    for word, count in word_counts.items():
        if not isinstance(word, str) or not word:
            raise ValueError(f"word_counts keys must be non-empty strings (pre-tokens), got {word!r}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"word_counts[{word!r}] must be a count >= 1, got {count!r}")


def check_bpe(merges, alphabet, space: str) -> None:
    """BPE's merges and alphabet: the alphabet a str of characters (without `space`), each merge a pair of symbols
    that the alphabet and the merges before it can make (a merge list from another tokenizer fails here)."""
    if not isinstance(alphabet, str):
        raise TypeError(f"alphabet must be a str of the characters seen in training, got {type(alphabet).__name__}")
    if space in alphabet:
        raise ValueError(f"alphabet must not hold {space!r}, the character that marks a following space")
    if isinstance(merges, (str, bytes)) or not hasattr(merges, "__iter__"):
        raise TypeError(f"merges must be a list of (left, right) symbol pairs, got {type(merges).__name__}")
    known = {*alphabet, space, *(space + c for c in alphabet)}
    for i, pair in enumerate(merges):
        if (isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2
                or not all(isinstance(s, str) and s for s in pair)):
            raise ValueError(f"merges[{i}] must be a pair of non-empty symbol strings, got {pair!r}")
        missing = [s for s in pair if s not in known]
        if missing:
            raise ValueError(f"merges[{i}] {tuple(pair)!r} joins {missing[0]!r}, a symbol that neither the alphabet "
                             "nor an earlier merge makes: these merges were not learned with this alphabet")
        known.add(pair[0] + pair[1])


def check_dropout_tokenizers(dropout, src_tok, tgt_tok, subword_type: type) -> None:
    """encode_pairs' BPE-dropout: a probability, and only for subword tokenizers (whole words have no merges)."""
    check_probability("dropout", dropout)
    for name, tok in (("src_tok", src_tok), ("tgt_tok", tgt_tok)):
        if dropout and not isinstance(tok, subword_type):
            raise ValueError(f"dropout={dropout} cuts subwords, but {name} is a {type(tok).__name__}, which has no "
                             "merges to leave out; give SubwordTokenizers or dropout=0")


def check_tokenizer_dict(values) -> None:
    """tokenizer_from_dict's input: what Tokenizer.to_dict or SubwordTokenizer.to_dict wrote."""
    if not isinstance(values, dict):
        raise TypeError(f"values must be a dict written by a tokenizer's to_dict, got {type(values).__name__}")
    kind = values.get("kind")
    if kind not in ("words", "bpe"):
        raise ValueError(f"values['kind'] must be 'words' or 'bpe', got {kind!r}")
    needed = ("lang", "lower") + (("merges", "alphabet") if kind == "bpe" else ())
    missing = [k for k in needed if k not in values]
    if missing:
        raise ValueError(f"values has no {missing[0]!r}: it was not written by a tokenizer's to_dict")
    if not isinstance(values["lower"], bool):
        raise ValueError(f"values['lower'] must be true or false, got {values['lower']!r}")


def check_vocabs(model, src_vocab, tgt_vocab) -> None:
    """The vocabularies must be Vocabs of the sizes the model's embeddings and generator were built for."""
    from transformer_lib.data import Vocab  # chapter 6's class; imported here, where it is used

    sizes = {"src_vocab": model.src_embed[0].vocab_size, "tgt_vocab": model.generator.proj.out_features}
    for name, vocab in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab)):
        if not isinstance(vocab, Vocab):
            raise TypeError(f"{name} must be a Vocab, got {type(vocab).__name__}")
        if len(vocab) != sizes[name]:
            raise ValueError(f"{name} has {len(vocab)} tokens, but the model was built for {name}={sizes[name]}")


def check_checkpoint(model, src_vocab, tgt_vocab, info: dict) -> None:
    """save_checkpoint's inputs: a model with a config, vocabularies that fit it, info that JSON can hold."""
    if getattr(model, "config", None) is None:
        raise ValueError("model has no config; build it with make_model or build_model")
    check_vocabs(model, src_vocab, tgt_vocab)
    try:
        json.dumps(info)
    except TypeError as err:
        raise TypeError(f"info must hold JSON values (numbers, strings, lists, dicts): {err}") from None


def check_file(path) -> None:
    """Raise FileNotFoundError unless path is a file."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} does not exist (or is not a file)")


def check_checkpoint_metadata(path, metadata: dict) -> None:
    """A checkpoint's metadata must hold what save_checkpoint writes (and not be a training state)."""
    if {"param_groups", "scheduler"} <= metadata.keys():
        raise ValueError(f"{path} is a training state (what train_translation writes to resume a run), not a "
                         "checkpoint; load model.safetensors or an epoch_NNN.safetensors of that folder instead")
    missing = {"config", "src_vocab", "tgt_vocab"} - metadata.keys()
    if missing:
        raise ValueError(f"{path} lacks {', '.join(sorted(missing))}: not written by save_checkpoint")


def _json(path, name: str, text: str, kind: type):
    """One metadata entry decoded from JSON, which must be of `kind`; ValueError naming the file and entry."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path}: its {name} is not valid JSON ({err})") from None
    if not isinstance(value, kind):
        raise ValueError(f"{path}: its {name} must be a JSON {'object' if kind is dict else kind.__name__}, "
                         f"got {type(value).__name__} {str(value)[:40]}")
    return value


def read_checkpoint_metadata(path, metadata: dict, tensors: dict):
    """(config, src_vocab, tgt_vocab, info) of a checkpoint, each checked before a model is built.

    Raises ValueError naming the file and what is wrong: a training state given as a checkpoint, a missing entry,
    text that is not JSON or JSON of the wrong type, a vocabulary that is not a list of distinct strings or whose
    size the config does not say, a config whose model does not have the shapes of the file's tensors. The shapes
    are compared on PyTorch's meta device, so a config describing a model far larger than the file allocates
    nothing.
    """
    from transformer_lib.data import Vocab  # chapters 4 and 6's classes, imported where they are used
    from transformer_lib.model import ModelConfig

    check_checkpoint_metadata(path, metadata)
    values = _json(path, "config", metadata["config"], dict)
    try:
        config = ModelConfig.from_dict(values)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path}: its config is not valid ({err})") from None
    vocabs = []
    for name in ("src_vocab", "tgt_vocab"):
        tokens = _json(path, name, metadata[name], dict).get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise ValueError(f"{path}: its {name} must hold a list of token strings under \"tokens\"")
        try:
            vocabs.append(Vocab(tokens))
        except ValueError as err:
            raise ValueError(f"{path}: its {name} is not a vocabulary ({err})") from None
    check_checkpoint_vocabs(path, len(vocabs[0]), len(vocabs[1]), config)
    info = _json(path, "info", metadata.get("info", "{}"), dict)
    check_checkpoint_shapes(path, config, tensors)
    return config, vocabs[0], vocabs[1], info


def read_checkpoint_tokenizers(path, metadata: dict, src_vocab, tgt_vocab, lower: bool, from_dict) -> tuple:
    """A checkpoint's (German, English) tokenizers, made by `from_dict` (chapter 6's tokenizer_from_dict); whole words
    for a checkpoint written before tokenizers were stored. ValueError naming the file if the entry is not two
    tokenizers, or if a subword tokenizer's symbols are not its vocabulary."""
    if "tokenizers" not in metadata:
        return from_dict({"kind": "words", "lang": "de", "lower": lower}), from_dict({"kind": "words", "lang": "en",
                                                                                    "lower": lower})
    values = _json(path, "tokenizers", metadata["tokenizers"], list)
    if len(values) != 2:
        raise ValueError(f"{path}: its tokenizers must be a list of two (German, English), got {len(values)}")
    tokenizers = []
    for name, value, vocab in (("German", values[0], src_vocab), ("English", values[1], tgt_vocab)):
        try:
            tokenizer = from_dict(value)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}: its {name} tokenizer is not valid ({err})") from None
        if hasattr(tokenizer, "bpe") and tokenizer.bpe.vocab().itos != vocab.itos:
            raise ValueError(f"{path}: its {name} BPE makes {len(tokenizer.bpe.vocab()):,} symbols that are not its "
                             f"vocabulary of {len(vocab):,} tokens: the merges belong to another model")
        tokenizers.append(tokenizer)
    return tuple(tokenizers)


def check_checkpoint_shapes(path, config, tensors: dict) -> None:
    """The model `config` describes, built on the meta device (no memory), must have the file's tensors' names and
    shapes, and its positional tables must not dwarf the file's weights."""
    from transformer_lib.model import build_model

    with torch.device("meta"):
        skeleton = build_model(config)
    shapes, groups = {}, {}  # name -> shape; id(tensor) -> its names (tied weights share one tensor)
    for name, t in [*skeleton.named_parameters(remove_duplicate=False), *skeleton.named_buffers(remove_duplicate=False)]:
        shapes[name] = tuple(t.shape)
        groups.setdefault(id(t), []).append(name)
    stored = set(skeleton.state_dict())
    wrong = [f"{n} {tuple(t.shape)} (the config says {shapes[n]})" for n, t in sorted(tensors.items())
             if n in shapes and tuple(t.shape) != shapes[n]]
    unexpected = sorted(set(tensors) - set(shapes))
    missing = sorted(names[0] for names in groups.values()
                     if names[0] in stored and not any(n in tensors for n in names))
    if wrong or unexpected or missing:
        what = "; ".join(part for part in (
            f"shapes differ: {', '.join(wrong[:2])}{' ...' if len(wrong) > 2 else ''}" if wrong else "",
            f"missing {missing[:3]}{' ...' if len(missing) > 3 else ''}" if missing else "",
            f"unexpected {unexpected[:3]}{' ...' if len(unexpected) > 3 else ''}" if unexpected else "") if part)
        raise ValueError(f"{path}: weights do not fit the model its config describes ({what})")
    weights = sum(t.numel() for t in tensors.values())
    tables = sum(t.numel() for name, t in skeleton.named_buffers() if name not in stored)
    if tables > max(4 * weights, 1 << 24):
        raise ValueError(f"{path}: its config asks for positional tables of {tables:,} values (max_len="
                         f"{config.max_len}, d_model={config.d_model}) against {weights:,} weights in the file; "
                         "the config does not belong to these weights")


def as_dtype(name: str, dtype) -> torch.dtype:
    """A floating-point torch.dtype from a torch.dtype or its name ("float16", "torch.bfloat16", "half")."""
    if isinstance(dtype, str):
        found = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(found, torch.dtype):
            raise ValueError(f"{name}={dtype!r} is not a torch dtype; use e.g. torch.float16 or 'float16'")
        dtype = found
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype or its name, e.g. torch.float16, got {type(dtype).__name__}")
    if not dtype.is_floating_point:
        raise ValueError(f"{name}={dtype} is not a floating-point type; use torch.float32, float16 or bfloat16")
    return dtype


def as_device(name: str, device) -> torch.device:
    """A torch.device from a torch.device, a string ("cpu", "cuda:1", "mps") or a CUDA index."""
    if isinstance(device, torch.device):
        return device
    if isinstance(device, bool) or not isinstance(device, (str, int)):
        raise TypeError(f"{name} must be a torch.device, a string such as 'cpu' or 'cuda', or a CUDA index; "
                        f"got {type(device).__name__}")
    try:
        return torch.device(device)
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"{name}={device!r} is not a device: {str(err).splitlines()[0]}") from None


def check_checkpoint_vocabs(path, src_size: int, tgt_size: int, config) -> None:
    """A checkpoint's vocabularies must have the sizes its config says."""
    if (src_size, tgt_size) != (config.src_vocab, config.tgt_vocab):
        raise ValueError(f"{path}: vocabularies of {src_size} and {tgt_size} tokens do not match the "
                         f"config's src_vocab={config.src_vocab}, tgt_vocab={config.tgt_vocab}")


def check_sentences(sentences, beam_size, model, src_vocab, tgt_vocab, batch_size: int = 1) -> None:
    """translate_tokens' inputs: a list of sentences (not one str), a beam size and a batch size, vocabularies
    that fit the model."""
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of strings; use translate() for a single sentence")
    check_ints(beam_size=beam_size, batch_size=batch_size)
    check_vocabs(model, src_vocab, tgt_vocab)


def check_source_lengths(ids: list, max_len: int) -> None:
    """Every tokenized source must fit the model's positions; the first that does not is named."""
    for i, sentence in enumerate(ids):
        if len(sentence) > max_len:
            raise ValueError(f"sentence {i} has {len(sentence):,} tokens, more than the model's {max_len:,} "
                             "positions (max_len); split it into shorter sentences")


def check_carried_vocabs(model, src_vocab, tgt_vocab) -> None:
    """translate needs vocabularies: given, or carried by the model."""
    if (src_vocab is None or tgt_vocab is None) and getattr(model, "vocabs", None) is None:
        raise ValueError("model carries no vocabularies: pass src_vocab and tgt_vocab, "
                         "or load the model with load_checkpoint")


def check_strings(sentences) -> list:
    """translate's sentences: a list (or other iterable, not a dict) of str, each valid Unicode; as a list."""
    if isinstance(sentences, (bytes, bytearray, dict)) or not hasattr(sentences, "__iter__"):
        raise TypeError(f"sentence must be a string or a list of strings, got {type(sentences).__name__}")
    sentences = list(sentences)
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise TypeError(f"sentence must be a string or a list of strings; item {i} is {type(s).__name__}")
        check_unicode(f"sentence {i}", s)
    return sentences


def check_unicode(name: str, text: str) -> None:
    """Text must be encodable as UTF-8: no lone surrogates (what undecodable bytes become under surrogateescape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{name} holds a lone surrogate {text[err.start]!r} at character {err.start}, which is not "
                         "text; decode the input with the right encoding (or errors='replace')") from None


def check_bleu_inputs(hypotheses, references) -> None:
    """bleu's inputs: one token list per reference sentence, and some references."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if any(isinstance(h, str) for h in hypotheses):
        raise TypeError("hypotheses must be lists of tokens (as translate_tokens returns), not strings")
    if not references:
        raise ValueError("references is empty")


def check_recipe(r) -> None:
    """A Recipe's values, each by its field name."""
    for name in ("n_layers", "d_model", "d_ff", "n_heads", "min_freq", "max_tokens", "epochs", "warmup",
                 "accum_steps", "beam_size", "average_last", "bleu_every"):
        check_int(name, getattr(r, name))
    for name in ("train_pairs", "eval_pairs", "subwords"):
        if getattr(r, name, None) is not None:
            check_int(name, getattr(r, name))
    check_int("seed", r.seed, low=0)
    if r.seed >= 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {r.seed}")
    if r.d_model % r.n_heads:
        raise ValueError(f"d_model={r.d_model} is not divisible by n_heads={r.n_heads}")
    for name in ("norm_first", "shared_vocab", "lower", "fast"):
        if not isinstance(getattr(r, name), bool):
            raise TypeError(f"{name} must be True or False, got {type(getattr(r, name)).__name__} {getattr(r, name)!r}")
    check_probability("dropout", r.dropout)
    check_probability("smoothing", r.smoothing)
    check_probability("bpe_dropout", r.bpe_dropout)
    if r.bpe_dropout and not r.subwords:
        raise ValueError(f"bpe_dropout={r.bpe_dropout} leaves out BPE merges, but subwords is {r.subwords!r} (whole "
                         "words); set subwords to a number of merges, or bpe_dropout=0")
    for name in ("factor", "length_penalty") + (("clip_norm",) if r.clip_norm is not None else ()):
        check_number(name, getattr(r, name))
    check_positive("factor", r.factor)
    if r.clip_norm is not None and not r.clip_norm > 0:
        raise ValueError(f"clip_norm must be positive or None, got {r.clip_norm!r}")
    if not r.length_penalty >= 0:
        raise ValueError(f"length_penalty must be >= 0 (0: plain log-probability), got {r.length_penalty!r}")


def check_recipe_fields(values: dict, known: list[str]) -> None:
    """Recipe.from_dict's keys: fields a Recipe has."""
    unknown = set(values) - set(known)
    if unknown:
        raise ValueError(f"unknown Recipe fields: {sorted(unknown)}")


def check_training_run(recipe, recipe_type: type, data, data_type: type, out_dir) -> None:
    """train_translation's inputs: a Recipe, prepared data (or None), an out_dir that is not a file."""
    if not isinstance(recipe, recipe_type):
        raise TypeError(f"recipe must be a Recipe, e.g. RECIPES['smoke'], got {type(recipe).__name__} {recipe!r}")
    if data is not None and not isinstance(data, data_type):
        raise TypeError(f"data must be a TranslationData from prepare_data(recipe), got {type(data).__name__}")
    if data is not None and recipe.bpe_dropout and len(data.train_text) != len(data.train):
        raise ValueError(f"recipe.bpe_dropout={recipe.bpe_dropout} cuts the raw training pairs afresh every epoch, but "
                         f"data.train_text holds {len(data.train_text)} of the {len(data.train)}; build data with "
                         "prepare_data(recipe)")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise ValueError(f"out_dir={str(out_dir)!r} is a file; give a folder for the checkpoints")


def check_shared_vocab(shared_vocab: bool, src_vocab, tgt_vocab) -> None:
    """A recipe with one shared vocabulary needs data built with one."""
    if shared_vocab and src_vocab.itos != tgt_vocab.itos:
        raise ValueError("recipe.shared_vocab is True but data has two vocabularies; build data with this recipe")


def check_resumable(path, saved: dict, recipe: dict) -> None:
    """A training state may be resumed by the recipe that wrote it, with any number of epochs."""
    changed = sorted(k for k, v in recipe.items() if k != "epochs" and saved[k] != v)
    if changed:
        raise ValueError(f"{path} was trained with a different recipe ({', '.join(changed)} differ); "
                         "use another out_dir or resume=False")


def check_one_source(sources: dict) -> None:
    """prepare_data's splits must all be Multi30k or all the offline corpus: a test set of generated sentences
    must never be scored and called test2016 because one file was missing or corrupt."""
    offline = {split: source for split, source in sources.items() if source.startswith("OFFLINE")}
    if offline and len(offline) < len(sources):
        found = ", ".join(split for split in sources if split not in offline)
        split, note = next(iter(offline.items()))
        reason = note.split(": ", 1)[1].split(". Using ")[0]
        raise ValueError(f"Multi30k {found} found, but not {', '.join(offline)}: {reason}. Mixing Multi30k with "
                         "the offline corpus would report scores that are neither; fix that file and run again")


_STATE_ENTRIES = {"recipe": dict, "epoch": int, "history": list, "seconds": (int, float), "param_groups": list,
                  "scheduler": dict}


def check_training_state(path, info: dict) -> None:
    """A training state's entries, as save_training_state wrote them for train_translation."""
    if "config" in info and "src_vocab" in info and "recipe" not in info:
        raise ValueError(f"{path} is a checkpoint, not a training state; the state of a run is its "
                         "state.safetensors (delete this file, or pass resume=False, to start over)")
    for name, kind in _STATE_ENTRIES.items():
        if name not in info:
            raise ValueError(f"{path} lacks {name}: not a training state written by train_translation; "
                             "delete it (or pass resume=False) to start over")
        if not isinstance(info[name], kind) or isinstance(info[name], bool):
            raise ValueError(f"{path}: its {name} is {type(info[name]).__name__}, not what train_translation "
                             "writes; delete it (or pass resume=False) to start over")
    if info["epoch"] < 1 or len(info["history"]) != info["epoch"] or not all(
            isinstance(h, dict) and isinstance(h.get("epoch"), int) for h in info["history"]):
        raise ValueError(f"{path}: its history does not list epochs 1 to {info['epoch']}; delete it "
                         "(or pass resume=False) to start over")


def check_resume_data(path, info: dict, tensors: dict, model, src_vocab, tgt_vocab) -> None:
    """The run in path must have been trained with these vocabularies (same tokens, same ids): resuming with
    others would silently give every word another id. States written before they held the vocabularies are
    checked by the shapes of their weights."""
    for name, vocab in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab)):
        saved = info.get(name)
        if saved is not None and saved != vocab.itos:
            if not isinstance(saved, list) or len(saved) != len(vocab):
                what = f"{len(saved) if isinstance(saved, list) else '?'} tokens there, {len(vocab)} in the data"
            else:
                i = next(i for i, (a, b) in enumerate(zip(saved, vocab.itos)) if a != b)
                what = f"same size, but id {i} is {saved[i]!r} there and {vocab.itos[i]!r} in the data"
            raise ValueError(f"{path} was trained with another {name} ({what}); resume with the data it was "
                             "trained on, or use another out_dir (or resume=False) to start over")
    state = model.state_dict()
    for key, t in tensors.items():
        name = key[len("model."):]
        if key.startswith("model.") and (name not in state or state[name].shape != t.shape):
            raise ValueError(f"{path} holds a model of another shape ({name} {tuple(t.shape)}, here "
                             f"{tuple(state[name].shape) if name in state else 'absent'}): other vocabularies or "
                             "model; resume with the data it was trained on, or use another out_dir")


def check_shipped_model(path) -> None:
    """The checkpoint the package ships must be there."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: this copy of transformer_lib was installed without its data; "
                                "reinstall it, or train a model with `python -m transformer_lib.train multi30k`")


def check_attention_ids(src_ids, tgt_ids) -> None:
    """attention_maps' sentence pair: at least one token id each."""
    if not src_ids or not tgt_ids:
        raise ValueError("src_ids and tgt_ids must each hold at least one token id")


def check_attention_kind(kind, kinds) -> None:
    """One of the kinds of attention map."""
    if kind not in kinds:
        raise ValueError(f"kind must be one of {list(kinds)}, got {kind!r}")


def check_map_labels(kind: str, shape, rows: str, row_tokens, cols: str, col_tokens) -> None:
    """A (layers, heads, rows, columns) map needs a token label per row and per column."""
    if tuple(shape[2:]) != (len(row_tokens), len(col_tokens)):
        raise ValueError(f"{kind} maps are {shape[2]} x {shape[3]}, but there are {len(row_tokens)} {rows} "
                         f"and {len(col_tokens)} {cols} tokens")


# ------------------------------------------------------------------------------------------- decoder-only models
def check_gpt_config(config) -> None:
    """GPTConfig: positive sizes, n_heads dividing d_model, a dropout probability."""
    check_ints(vocab_size=config.vocab_size, n_layers=config.n_layers, d_model=config.d_model, d_ff=config.d_ff,
               context=config.context)
    check_heads(config.d_model, config.n_heads, config.dropout)


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


def check_generate(model, prompt, max_new_tokens) -> None:
    """generate's inputs: a prompt the model can read and room in its context for the new tokens."""
    check_int("max_new_tokens", max_new_tokens)
    check_gpt_tokens(prompt, model.config)
    needed = prompt.size(1) + max_new_tokens - 1  # the last new token is written, never read
    if needed > model.config.context:
        raise ValueError(f"a prompt of {prompt.size(1)} tokens and max_new_tokens={max_new_tokens} need {needed} "
                         f"positions, past the model's context={model.config.context}")


def check_rope(context, d_k) -> None:
    """rope_angles' sizes: positive, and d_k even (RoPE turns pairs of dimensions)."""
    check_ints(context=context, d_k=d_k)
    if d_k % 2:
        raise ValueError(f"d_k={d_k} must be even: RoPE rotates pairs of dimensions")


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
        check_rope(config.context, config.d_model // config.n_heads)
