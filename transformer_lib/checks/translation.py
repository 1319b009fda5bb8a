# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 8's classes and functions (transformer_lib.translation).

Strings to translate, BLEU's inputs, recipes, training runs and their resumable states, and the shipped
model's file.
"""
from __future__ import annotations

from pathlib import Path

from transformer_lib.checks.core import (check_instance, check_int, check_number, check_positive, check_probability,
                                         check_unicode)

__all__ = [
    "check_strings", "check_bleu_inputs", "check_translate", "check_same_run", "check_folder", "check_carried_vocabs",
    "check_recipe", "check_training_run",
    "check_epoch_batches", "check_shared_vocab", "DECODING_FIELDS", "check_resumable", "check_one_source",
    "check_training_state", "check_resume_data", "check_shipped_model", "check_budget_recipe",
]


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


def check_scored(src_ids, tgt_ids) -> None:
    """logprob_per_token's inputs: one translation per source, each source with a token (all padding would leave
    attention nothing to read)."""
    if len(src_ids) != len(tgt_ids):
        raise ValueError(f"src_ids and tgt_ids: {len(src_ids)} sources but {len(tgt_ids)} translations; give one "
                         "translation per source")
    for i, ids in enumerate(src_ids):
        if len(ids) == 0:
            raise ValueError(f"src_ids: source {i} has no tokens; leave blank sentences out (translate() does)")


def check_bleu_inputs(hypotheses, references, tgt_tok=None) -> None:
    """bleu's inputs: one token list per reference sentence, some references, and a tgt_tok that reads the
    hypotheses (subword symbols need the SubwordTokenizer that decodes them)."""
    from transformer_lib.checkpoint import check_hypotheses

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if any(isinstance(h, str) for h in hypotheses):
        raise TypeError("hypotheses must be lists of tokens (as translate_tokens returns), not strings")
    if not references:
        raise ValueError("references is empty")
    check_hypotheses(hypotheses, tgt_tok)


def check_translate(model, sentence, src_vocab, tgt_vocab) -> list:
    """translate's inputs: vocabularies given or carried by the model, and a sentence or a list of them (each a
    valid Unicode str); the sentences as a list."""
    check_carried_vocabs(model, src_vocab, tgt_vocab)
    return check_strings([sentence] if isinstance(sentence, str) else sentence)


def check_same_run(path, other: tuple, first, model, src_vocab, tgt_vocab) -> None:
    """average_checkpoints: the checkpoint at `path` (load_checkpoint's tuple) must share the config and both
    vocabularies of the `first` one read."""
    if other[0].config != model.config or other[1].itos != src_vocab.itos or other[2].itos != tgt_vocab.itos:
        raise ValueError(f"{path} does not share the config and vocabularies of {first}")


def check_folder(recipe, data, name) -> None:
    """runs.folder's inputs: a Recipe, prepared data (it names the corpus) and a name a folder may have."""
    import re

    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]*", name):
        raise ValueError(f"name must be a folder name's letters, digits, '_', '.' and '-', got {name!r}")
    if not hasattr(recipe, "to_dict") or not isinstance(getattr(data, "source", None), str):
        raise TypeError("folder(recipe, data) takes a Recipe and the TranslationData prepare_data made, got "
                        f"{type(recipe).__name__} and {type(data).__name__}")


def check_carried_vocabs(model, src_vocab, tgt_vocab) -> None:
    """translate needs vocabularies: given, or carried by the model."""
    if (src_vocab is None or tgt_vocab is None) and getattr(model, "vocabs", None) is None:
        raise ValueError("model carries no vocabularies: pass src_vocab and tgt_vocab, "
                         "or load the model with load_checkpoint")


def check_recipe(r) -> None:
    """A Recipe's values, each by its field name."""
    for name in ("n_layers", "d_model", "d_ff", "n_heads", "min_freq", "max_tokens", "epochs", "warmup",
                 "accum_steps", "beam_size", "average_last", "bleu_every"):
        check_int(name, getattr(r, name))
    for name in ("train_pairs", "eval_pairs", "subwords"):
        if getattr(r, name, None) is not None:
            check_int(name, getattr(r, name))
    check_int("seed", r.seed, low=0)
    check_int("short_first", r.short_first, low=0)
    if r.seed >= 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {r.seed}")
    if r.d_model % r.n_heads:
        raise ValueError(f"d_model={r.d_model} is not divisible by n_heads={r.n_heads}")
    for name in ("norm_first", "shared_vocab", "lower", "fast", "bf16", "muon"):
        if not isinstance(getattr(r, name), bool):
            raise TypeError(f"{name} must be True or False, got {type(getattr(r, name)).__name__} {getattr(r, name)!r}")
    check_probability("dropout", r.dropout)
    check_probability("smoothing", r.smoothing)
    check_probability("bpe_dropout", r.bpe_dropout)
    if r.cooldown is not None:
        check_cooldown(r.cooldown)
    if r.ema is not None:
        check_number("ema", r.ema)
        if not 0 < r.ema < 1:
            raise ValueError(f"ema is the decay of a moving average of the weights: it must be in (0, 1), e.g. 0.995 "
                             f"(None: no average), got {r.ema!r}")
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


def check_kept_average(path, load, model=None):
    """The moving average a resumed run needs (a recipe with `ema`): the model in `path`, loaded by `load`
    (load_checkpoint, which names a damaged file), or a ValueError naming the missing file, or naming the file and
    the first weight whose shape differs from `model`'s (another run's average, of another size)."""
    if not path.is_file():
        raise ValueError(f"{path} is missing: it holds the run's moving average (the recipe's ema) after the epoch "
                         "its training state holds; delete state.safetensors to start the run over")
    kept = load(path)[0]
    if model is not None:
        ours, theirs = model.state_dict(), kept.state_dict()
        names = sorted(set(ours) ^ set(theirs))
        wrong = names[:1] or [k for k in ours if tuple(ours[k].shape) != tuple(theirs[k].shape)][:1]
        if wrong:
            name = wrong[0]
            shapes = (f"{tuple(theirs[name].shape)} where this run's model has {tuple(ours[name].shape)}"
                      if name in ours and name in theirs else "a weight the other does not have")
            raise ValueError(f"{path} is not this run's moving average: its {name} is {shapes}; delete it and "
                             "state.safetensors to start the run over")
    return kept


def check_cooldown(cooldown) -> None:
    """The share of a run's steps over which the warmup-stable-decay rate falls to zero."""
    check_number("cooldown", cooldown)
    if not 0 < cooldown <= 1:
        raise ValueError(f"cooldown is the share of the steps over which the rate falls to zero: it must be in "
                         f"(0, 1] (None: chapter 5's rate), got {cooldown!r}")


def check_wsd(step, total, d_model, factor, warmup, cooldown) -> None:
    """wsd_rate's arguments: whole steps (at least 1), a positive factor, a cooldown share in (0, 1]."""
    from transformer_lib.checks.training import check_rate

    check_int("step", step)
    check_int("total", total)
    check_rate(d_model, factor, warmup)
    check_cooldown(cooldown)


def check_epoch_batches(n_batches: int, accum_steps: int, world: int) -> None:
    """An epoch of n_batches makes at least one step of accum_steps batches on each of `world` processes."""
    if n_batches < accum_steps * world:
        on = f" on each of {world} processes" if world > 1 else ""
        raise ValueError(f"recipe.accum_steps={accum_steps}: a step takes {accum_steps} batches{on}, but an epoch "
                         f"has {n_batches}; lower accum_steps, or make more batches (a smaller max_tokens, more "
                         "train_pairs)")


def check_forecast_steps(steps) -> None:
    """runs.forecast's number of timed steps: at least 1 (two more warm up first)."""
    check_int("steps", steps)


def check_speedup(recipe, speedup) -> None:
    """A fast recipe (train_translation's, or runs.forecast's) needs the function that makes it fast."""
    if recipe.fast and not callable(speedup):
        raise ValueError("recipe.fast=True trains on chapter 9's fast path: pass speedup=speed_up (from "
                         "transformer_lib.fast import speed_up), or train with dataclasses.replace(recipe, fast=False)")


def check_training_run(recipe, recipe_type: type, data, data_type: type, out_dir, speedup=None) -> None:
    """train_translation's inputs: a Recipe, prepared data (or None), an out_dir that is not a file, and for a fast
    recipe the function that makes it fast."""
    if not isinstance(recipe, recipe_type):
        raise TypeError(f"recipe must be a Recipe, e.g. RECIPES['smoke'], got {type(recipe).__name__} {recipe!r}")
    check_speedup(recipe, speedup)
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


# fields that only say how the kept model is chosen and decoded after the last epoch: they change no training step
DECODING_FIELDS = ("beam_size", "length_penalty")


def check_resumable(path, saved: dict, recipe: dict) -> None:
    """A training state may be resumed by the recipe that wrote it, with any number of epochs and any beam search
    (DECODING_FIELDS): a finished run resumed with another length penalty chooses and scores its kept model again."""
    changed = sorted(k for k, v in recipe.items() if k not in ("epochs", *DECODING_FIELDS) and saved[k] != v)
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


def check_shipped_model(path) -> Path:
    """The checkpoint the package ships must be there; its path."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: this copy of transformer_lib was installed without its data; "
                                "reinstall it, or train a model with `python -m transformer_lib.train multi30k`")
    return path


def check_budget_recipe(budget, recipes: dict, bf16_hardware) -> None:
    """budget_recipe's inputs: a budget RECIPES holds, and whether the hardware multiplies bfloat16 (a bool)."""
    if not isinstance(budget, str) or budget not in recipes:
        raise ValueError(f"budget must be one of {', '.join(map(repr, recipes))}, got {budget!r}")
    check_instance("bf16_hardware", bf16_hardware, bool, " (chapter 9's has_bf16(device))")
