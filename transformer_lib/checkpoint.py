# Hand-written tool module (not generated from a notebook).
"""The checkpoint format: what save_checkpoint writes, and load_checkpoint, which reads it back and checks it.

A checkpoint is a safetensors file whose metadata holds the model's config, both vocabularies, the tokenizers
and free-form info as JSON. Reading one checks each entry before a model is built, and compares the shapes the
config describes (built on the meta device, no memory) with the file's tensors. It sits above the model
(chapter 4) and the data (chapter 6), which it imports where it uses them, so that chapter 7 can load the model
the package ships; chapter 8 writes checkpoints (save_checkpoint) and trains the shipped model. A loaded model
carries its vocabularies and tokenizers: the checks here refuse others passed beside it (check_carried), and a
tokenizer that does not cut text into a vocabulary's tokens (check_tokenizer_fits).
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from transformer_lib.checks.core import as_device, check_file
from transformer_lib.checks.decoding import check_search, check_sentences, check_vocabs
from transformer_lib.files import load_tensors, read_safetensors

__all__ = [
    "PRETRAINED_FILE", "pretrained_path", "load_checkpoint", "check_checkpoint", "check_checkpoint_metadata",
    "read_checkpoint_metadata", "read_checkpoint_tokenizers", "check_checkpoint_shapes", "check_checkpoint_vocabs", "read_checkpoint",
    "check_carried", "check_tokenizer_fits", "is_subword_vocab", "scoring_tokenizer", "model_tokenizers",
    "check_hypotheses",
    "check_run_length", "check_translate_tokens",
]


def is_subword_vocab(vocab) -> bool:
    """Whether a vocabulary holds BPE's symbols: most of its tokens carry the space mark \u2581, none of words do."""
    tokens = vocab.itos[4:]
    return sum(t.startswith("\u2581") for t in tokens) > len(tokens) // 4


def check_tokenizer_fits(name: str, tokenizer, vocab, default: str = "") -> None:
    """`tokenizer` must cut text into the tokens of `vocab`: whole words for a vocabulary of words, the BPE whose
    symbols are the vocabulary for one of subwords. ValueError naming the argument `name` otherwise (`default`: what
    it was left at, e.g. "None, whole words"), instead of a translation of other tokens, or a score of them."""
    bpe = getattr(tokenizer, "bpe", None)
    given = f"{name}={default}" if default else name
    if bpe is None and is_subword_vocab(vocab):
        raise ValueError(f"{given} cuts whole words, but the vocabulary holds subword symbols (marked \u2581); pass "
                         "the model's SubwordTokenizer (model.tokenizers, after load_checkpoint)")
    if bpe is not None and bpe.vocab().itos != vocab.itos:
        raise ValueError(f"{name}'s BPE makes {len(bpe.vocab()):,} symbols that are not the vocabulary's "
                         f"{len(vocab):,} tokens: it belongs to another model; pass the tokenizer the model was "
                         "trained with")


def scoring_tokenizer(model, tgt_tok, src_vocab, tgt_vocab):
    """evaluate_bleu's tgt_tok: the one given, else the model's (after load_checkpoint or train_translation), else
    None (whole words); ValueError naming tgt_tok where it does not cut tgt_vocab's tokens, or naming a vocabulary
    that is not the one the model carries."""
    check_carried(model, src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    default = "None" if tgt_tok is None else ""
    tgt_tok = tgt_tok or (getattr(model, "tokenizers", None) or (None, None))[1]
    check_tokenizer_fits("tgt_tok", tgt_tok, tgt_vocab, default)  # a model's subwords scored as words: refused
    return tgt_tok


def model_tokenizers(model, lower: bool | None = None) -> tuple:
    """translate's (src_tok, tgt_tok): the model's (after load_checkpoint or train_translation), else whole words;
    lowercasing as `lower` says, or as the model was trained (its `lower`, else True) where `lower` is None."""
    from transformer_lib.data import Tokenizer, tokenizer_from_dict  # chapter 6's, imported where they are used

    if lower is not None and not isinstance(lower, bool):
        raise TypeError(f"lower must be True, False or None (the model's own), got {lower!r}")
    lower = getattr(model, "lower", True) if lower is None else lower
    src_tok, tgt_tok = getattr(model, "tokenizers", None) or (Tokenizer("de", lower), Tokenizer("en", lower))
    src_tok = src_tok if src_tok.lower == lower else tokenizer_from_dict({**src_tok.to_dict(), "lower": lower})
    return src_tok, tgt_tok


def check_hypotheses(hypotheses, tgt_tok) -> None:
    """bleu's hypotheses must be tokens tgt_tok reads: subword symbols need a SubwordTokenizer to be decoded."""
    tokens = [t for h in hypotheses for t in h if t not in ("<unk>", "<pad>", "<s>", "</s>")]
    if getattr(tgt_tok, "bpe", None) is None and sum(t.startswith("\u2581") for t in tokens) > len(tokens) // 4:
        raise ValueError("the hypotheses are subword symbols (marked \u2581), but tgt_tok (None, or a Tokenizer) reads "
                         "whole words; pass the model's SubwordTokenizer as tgt_tok")


def check_run_length(path, done: int, epochs: int) -> None:
    """A run folder whose training state has `done` epochs resumed by a recipe of fewer `epochs`: its kept model and
    records would be written again under a recipe that claims a shorter run than the one they hold."""
    if done > epochs:
        raise ValueError(f"{path} holds a run of {done} epochs, more than the recipe's epochs={epochs}; ask for "
                         f"epochs={done} or more, or train into another folder")


def check_carried(model, **given) -> None:
    """Vocabularies given beside a model that carries its own (model.vocabs, after load_checkpoint or
    train_translation) must be those: another model's, even of the same size, would translate other tokens.
    `given`: src_vocab=..., tgt_vocab=... (None: not given). ValueError naming the argument."""
    carried = getattr(model, "vocabs", None)
    if carried is None:
        return
    for (name, vocab), own in zip(given.items(), carried):
        if vocab is not None and vocab is not own and getattr(vocab, "itos", None) != own.itos:
            raise ValueError(f"{name} is not the vocabulary the model carries ({len(vocab):,} tokens, the model's "
                             f"{len(own):,}); pass model.vocabs, or leave it out where the model's is the default")


def check_translate_tokens(model, sentences, src_tok, src_vocab, tgt_vocab, beam_size, batch_size, search) -> None:
    """translate_tokens' inputs, in the order a mistake is most likely: the sentences and sizes, vocabularies the
    model carries (not another model's of the same size), a tokenizer that fits src_vocab, and the search."""
    check_sentences(sentences, beam_size, model, src_vocab, tgt_vocab, batch_size)
    check_carried(model, src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    check_tokenizer_fits("src_tok", src_tok, src_vocab)  # words for words, the model's own BPE for subwords
    check_search(search)


def check_checkpoint(model, src_vocab, tgt_vocab, info: dict, tokenizers=None) -> tuple[tuple, dict]:
    """save_checkpoint's inputs: a model with a config, vocabularies that fit it (the ones it carries, if it carries
    some), (German, English) tokenizers that cut text into those vocabularies' tokens, info that JSON can hold:
    what load_checkpoint would refuse is refused before the file is written. Returns (tokenizers, info): the
    tokenizers given, else the model's (after load_checkpoint), else whole words; info with the model's lowercasing
    where it is not the default, so that it loads back."""
    from transformer_lib.data import Tokenizer  # chapter 6's, imported where it is used

    if getattr(model, "lower", True) is not True:
        info = {"lower": model.lower, **info}
    lower = info.get("lower", True)
    tokenizers = tokenizers or getattr(model, "tokenizers", None) or (Tokenizer("de", lower), Tokenizer("en", lower))
    if getattr(model, "config", None) is None:
        raise ValueError("model has no config; build it with make_model or build_model")
    check_vocabs(model, src_vocab, tgt_vocab)
    check_carried(model, src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    if not isinstance(tokenizers, (tuple, list)) or len(tokenizers) != 2 or not all(
            callable(getattr(t, "to_dict", None)) for t in tokenizers):
        raise TypeError("tokenizers must be a (German, English) pair of Tokenizers or SubwordTokenizers, e.g. "
                        f"model.tokenizers; got {type(tokenizers).__name__}")
    for i, (tokenizer, vocab, lang) in enumerate(zip(tokenizers, (src_vocab, tgt_vocab), ("de", "en"))):
        if getattr(tokenizer, "lang", None) != lang:
            raise ValueError(f"tokenizers[{i}] is for lang={getattr(tokenizer, 'lang', None)!r}; a checkpoint of "
                             "this book reads German ('de') and writes English ('en')")
        check_tokenizer_fits(f"tokenizers[{i}]", tokenizer, vocab)
    try:
        json.dumps(info)
    except TypeError as err:
        raise TypeError(f"info must hold JSON values (numbers, strings, lists, dicts): {err}") from None
    return tokenizers, info


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
