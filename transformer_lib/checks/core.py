# Hand-written tool module (not generated from a notebook).
"""Input checks: the checks every chapter shares

Numbers, tensors of vectors and token ids, option names, files, dtypes and devices: the checks that
belong to no one chapter. This module imports no chapter's module.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch

__all__ = [
    "check_int", "check_ints", "check_instance", "check_probability", "check_number", "check_positive",
    "check_options", "check_vectors", "check_token_ids", "check_token_batch", "check_last_dim", "check_same_batch",
    "check_unicode", "check_file", "as_paths", "as_dtype", "as_device", "check_device_present",
]


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


def check_options(what: str, given, known: list[str], listed: list[str] | None = None) -> None:
    """Raise naming the unknown keys of `given` (keyword options, or a dict's keys) and, if given, the known ones."""
    unknown = set(given) - set(known)
    if unknown:
        hint = f"; the options are {', '.join(listed)}" if listed else ""
        raise ValueError(f"unknown {what}: {', '.join(sorted(unknown))}{hint}")


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
    if tokens.dtype not in (torch.long, torch.int32):  # what nn.Embedding takes: int8, uint8, int16 it refuses
        raise TypeError(f"{name} must hold integer token ids (torch.long), got dtype {tokens.dtype}"
                        + ("; convert with .long()" if not (tokens.dtype.is_floating_point or tokens.dtype.is_complex
                                                             or tokens.dtype == torch.bool) else ""))


def check_token_batch(name: str, tokens) -> None:
    """Raise unless tokens is a non-empty (batch, length) tensor of integer ids."""
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.numel() == 0:
        raise ValueError(f"{name} must be a non-empty (batch, length) tensor of token ids, got {_shape(tokens)}")
    _check_integer_dtype(name, tokens)


def check_last_dim(x: torch.Tensor, d_model: int, size_name: str = "d_model") -> None:
    """Raise unless x's last dimension is d_model (else weights broadcast against the wrong axis)."""
    if x.size(-1) != d_model:
        raise ValueError(f"x must have last dimension {size_name}={d_model}, got shape {tuple(x.shape)}")


def check_same_batch(a_name: str, a, b_name: str, b) -> None:
    """Raise unless two tensors have the same batch size (their first dimension)."""
    if a.size(0) != b.size(0):
        raise ValueError(f"{a_name} and {b_name} must have the same batch size, got {a.size(0)} and {b.size(0)}")


def check_unicode(name: str, text: str) -> None:
    """Text must be encodable as UTF-8: no lone surrogates (what undecodable bytes become under surrogateescape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{name} holds a lone surrogate {text[err.start]!r} at character {err.start}, which is not "
                         "text; decode the input with the right encoding (or errors='replace')") from None


def check_file(path) -> None:
    """Raise FileNotFoundError unless path is a file."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} does not exist (or is not a file)")


def as_paths(name: str, paths) -> list:
    """A non-empty list of paths as Path objects (average_checkpoints' checkpoints)."""
    if isinstance(paths, (str, Path)):
        raise TypeError(f"{name} must be a list of paths, got the single path {str(paths)!r}")
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError(f"{name} is empty: nothing to average")
    return paths


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
        device = torch.device(device)
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"{name}={device!r} is not a device: {str(err).splitlines()[0]}") from None
    return check_device_present(name, device)


def check_device_present(name: str, device: torch.device) -> torch.device:
    """device, if this machine has it: a ValueError naming the argument for CUDA or MPS where there is none."""
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={str(device)!r}: this machine has no CUDA GPU torch can use (torch "
                         f"{torch.__version__}); use 'cpu', or default_device() to pick what is there")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"{name}={str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                         f"numbered from 0")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{name}={str(device)!r}: this machine has no Apple GPU (MPS) torch can use; use 'cpu'")
    return device
