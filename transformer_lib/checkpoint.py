# Hand-written tool module (not generated from a notebook).
"""The checkpoint format: what save_checkpoint writes, and load_checkpoint, which reads it back and checks it.

A checkpoint is a safetensors file whose metadata holds the model's config, both vocabularies, the tokenizers
and free-form info as JSON. Reading one checks each entry before a model is built, and compares the shapes the
config describes (built on the meta device, no memory) with the file's tensors. It sits above the model
(chapter 4) and the data (chapter 6), which it imports where it uses them, so that chapter 7 can load the model
the package ships; chapter 8 writes checkpoints (save_checkpoint) and trains the shipped model.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from transformer_lib.checks.core import as_device, check_file
from transformer_lib.checks.decoding import check_vocabs
from transformer_lib.files import load_tensors, read_safetensors

__all__ = [
    "PRETRAINED_FILE", "pretrained_path", "load_checkpoint", "check_checkpoint", "check_checkpoint_metadata",
    "read_checkpoint_metadata", "read_checkpoint_tokenizers", "check_checkpoint_shapes", "check_checkpoint_vocabs", "read_checkpoint",
]


def check_checkpoint(model, src_vocab, tgt_vocab, info: dict) -> None:
    """save_checkpoint's inputs: a model with a config, vocabularies that fit it, info that JSON can hold."""
    if getattr(model, "config", None) is None:
        raise ValueError("model has no config; build it with make_model or build_model")
    check_vocabs(model, src_vocab, tgt_vocab)
    try:
        json.dumps(info)
    except TypeError as err:
        raise TypeError(f"info must hold JSON values (numbers, strings, lists, dicts): {err}") from None


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
    except RecursionError:  # [[[[...]]]] nested deeper than Python's parser goes
        raise ValueError(f"{path}: its {name} is JSON nested too deeply to be one this book wrote") from None
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
        marked = sum(t.startswith("\u2581") for t in vocab.itos[4:])  # most of a subword vocabulary, none of words
        if not hasattr(tokenizer, "bpe") and marked > len(vocab.itos[4:]) // 4:
            raise ValueError(f"{path}: its {name} tokenizer cuts whole words, but its vocabulary holds subword symbols "
                             "(marked \u2581): the tokenizers entry is not the one the model was trained with")
        if tokenizer.lang != ("de", "en")[len(tokenizers)]:
            raise ValueError(f"{path}: its {name} tokenizer is for lang={tokenizer.lang!r}; a checkpoint of this book "
                             "reads German ('de') and writes English ('en')")
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


def check_checkpoint_vocabs(path, src_size: int, tgt_size: int, config) -> None:
    """A checkpoint's vocabularies must have the sizes its config says."""
    if (src_size, tgt_size) != (config.src_vocab, config.tgt_vocab):
        raise ValueError(f"{path}: vocabularies of {src_size} and {tgt_size} tokens do not match the "
                         f"config's src_vocab={config.src_vocab}, tgt_vocab={config.tgt_vocab}")


def read_checkpoint(path, metadata: dict, tensors: dict) -> tuple:
    """(config, src_vocab, tgt_vocab, info, tokenizers) of a checkpoint's metadata, every entry checked against the
    others and against the file's tensors (read_checkpoint_metadata, read_checkpoint_tokenizers); the tokenizers are
    whole words for a checkpoint written before tokenizers were stored."""
    from transformer_lib.data import tokenizer_from_dict  # chapter 6's, imported where it is used

    config, src_vocab, tgt_vocab, info = read_checkpoint_metadata(path, metadata, tensors)
    tokenizers = read_checkpoint_tokenizers(path, metadata, src_vocab, tgt_vocab, info.get("lower", True),
                                            tokenizer_from_dict)
    return config, src_vocab, tgt_vocab, info, tokenizers


PRETRAINED_FILE = "multi30k_de_en.safetensors"


def pretrained_path() -> Path:
    """Where the package keeps the shipped checkpoint (chapter 8 trains it)."""
    from importlib.resources import files

    return Path(str(files("transformer_lib") / "pretrained" / PRETRAINED_FILE))


def load_checkpoint(path, device="cpu"):
    """(model, src_vocab, tgt_vocab, info) from a file written by save_checkpoint; the model is in eval mode and
    carries its vocabularies and tokenizers (model.vocabs, model.tokenizers).

    A file that is truncated, corrupt, not written by save_checkpoint, or whose metadata does not describe its
    weights raises ValueError naming the file, before a model is built.
    """
    from transformer_lib.model import build_model  # chapter 4's, imported where it is used

    path, device = Path(path), as_device("device", device)
    check_file(path)
    tensors, metadata = read_safetensors(path)  # the file read once, checked against its sha256
    config, src_vocab, tgt_vocab, info, tokenizers = read_checkpoint(path, metadata, tensors)  # every entry checked
    model = build_model(config)
    load_tensors(model, tensors, path)  # a ValueError naming the file where they do not fit
    model.vocabs, model.tokenizers, model.lower = (src_vocab, tgt_vocab), tokenizers, info.get("lower", True)
    return model.to(device).eval(), src_vocab, tgt_vocab, info
