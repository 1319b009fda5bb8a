# Hand-written tool module (not generated from a notebook).
"""Input checks: chapter 5's classes and functions (transformer_lib.training).

Batches, label smoothing, the schedule, the training loop's options and greedy decoding's model and
symbols; check_encoder_decoder imports chapter 4's class where it is used.
"""
from __future__ import annotations

import torch

from transformer_lib.checks.core import check_int, check_ints, check_positive, check_token_batch, check_token_ids

__all__ = [
    "check_batch", "check_label_smoothing", "check_loss_inputs", "check_rate", "check_training_options",
    "check_training_batch", "check_step_group", "check_decoding", "check_encoder_decoder", "check_symbols", "check_copy_task", "check_muon",
    "check_orthogonalize",
]


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


def check_batches_read(count: int, what: str) -> None:
    """train_epoch's and evaluate's batches, once read: at least one Batch (`what` says what an empty one leaves)."""
    if not count:
        raise ValueError(f"batches is empty: {what}")


def check_training_batch(batch) -> None:
    """What train_epoch and evaluate take from their batches: a Batch with targets."""
    if not all(hasattr(batch, name) for name in ("src", "src_mask", "tgt", "pad_idx")):  # chapter 5's Batch
        raise TypeError(f"batches must yield Batch objects (Batch(src, tgt, pad_idx)), got a {type(batch).__name__}")
    if batch.tgt is None:
        raise ValueError("batches must hold targets: got a Batch built without tgt")


def check_step_group(group) -> None:
    """optimizer_step's micro-batches: each a Batch with targets, and at least one real target token among them."""
    for batch in group:
        check_training_batch(batch)
    if sum(b.n_tokens for b in group) == 0:
        raise ValueError("a step's batches hold no target tokens (all padding)")


def check_decoding(model, max_len, **symbols) -> None:
    """max_len must be an int >= 0 and every symbol (start_symbol=..., end_symbol=...) a target token id."""
    check_int("max_len", max_len, low=0)
    check_symbols(model.generator.proj.out_features, **symbols)


def check_encoder_decoder(model) -> None:
    """Chapter 9's FastBeamSearch reads the weights of chapter 4's EncoderDecoder, module by module."""
    from transformer_lib.model import EncoderDecoder  # chapter 4's class; imported here, where it is used

    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder (make_model, chapter 4), got {type(model).__name__}")


def check_muon(model, momentum) -> None:
    """Muon's model (an EncoderDecoder: it takes the matrices of the encoder's and decoder's layers) and momentum."""
    check_encoder_decoder(model)
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0 <= momentum < 1:
        raise ValueError(f"momentum must be a number in [0, 1), got {momentum!r}")


def check_orthogonalize(update, steps) -> None:
    """orthogonalize's update (a 2-D floating-point tensor: a weight matrix's) and its number of steps (0 or more)."""
    if not isinstance(update, torch.Tensor) or update.ndim != 2 or not update.is_floating_point():
        shape = tuple(update.shape) if isinstance(update, torch.Tensor) else type(update).__name__
        raise ValueError(f"update must be a 2-D floating-point tensor (a weight matrix's update), got {shape}")
    check_int("steps", steps, low=0)


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
