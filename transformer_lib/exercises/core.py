# Hand-written tool module (not generated from a notebook).
"""The machinery of the exercises: a registry, `verdict` and `check`, and helpers the chapters' checks share."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import random
from dataclasses import dataclass
from typing import Callable

import torch


class Wrong(Exception):
    """A check's verdict on a wrong answer, in one sentence."""


@dataclass(frozen=True)
class Exercise:
    number: str  # "2.1": chapter 2, exercise 1
    title: str
    run: Callable  # run(answer) raises Wrong, or returns a sentence saying what passed


EXERCISES: dict[str, Exercise] = {}


def _exercise(number: str, title: str):
    def register(run):
        EXERCISES[number] = Exercise(number, title, run)
        return run
    return register


def _load_chapter(number) -> None:
    """Import the checks of exercise `number`'s chapter (transformer_lib.exercises.chNN registers them), so that a
    chapter's `check` loads its own chapter's checks and nothing of a later chapter."""
    import importlib
    import importlib.util

    chapter = number.split(".")[0] if isinstance(number, str) else ""
    name = f"transformer_lib.exercises.ch{int(chapter):02d}" if chapter.isdigit() else None
    if name and importlib.util.find_spec(name) is not None:
        importlib.import_module(name)


def all_exercises() -> dict[str, Exercise]:
    """Every chapter's exercises, number -> Exercise (each chapter's checks imported)."""
    import pkgutil
    from pathlib import Path

    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if module.name.startswith("ch") and module.name[2:].isdigit():
            _load_chapter(f"{int(module.name[2:])}.1")
    return EXERCISES


_CASE = [""]  # the case a check is trying now, named when the answer raises on it
_DRAW = [random.Random(0)]  # drawn afresh by each verdict: the sizes and seeds of the cases a learner cannot predict


def _unpredictable() -> random.Random:
    """The random source of this verdict's unpredictable cases (sizes, seeds, values), seeded from the operating
    system each time, so that no answer written for the check's inputs passes it; each case is named when it fails."""
    return _DRAW[0]


def _unlike(draw_case: Callable, fixed, key: Callable = lambda case: case):
    """A case from draw_case() whose key is none of `fixed`, the check's fixed cases, drawn again until it is not: an
    answer holding a table of the fixed cases then always fails the drawn one."""
    while key(case := draw_case()) in fixed:
        pass
    return case


def _trying(case: str) -> None:
    """Name the case (sizes, bases, counts) a check tries next, so that a crash on it says which one."""
    _CASE[0] = case


def verdict(number: str, answer) -> tuple[bool, str]:
    """(passed, sentence) for the answer to exercise `number`."""
    if not isinstance(number, str):
        raise TypeError(f"number must be an exercise's number as a string, such as \"2.1\", got "
                        f"{type(number).__name__} {number!r}")
    _load_chapter(number)
    if number not in EXERCISES:
        raise ValueError(f"number must be one of {sorted(all_exercises())}, got {number!r}")
    ex = EXERCISES[number]
    head = f"Exercise {number} ({ex.title})"
    unsolved = f"{head}: not solved yet (put your code in place of `raise NotImplementedError`, run the cell again)"
    if answer is None:
        return False, unsolved
    _CASE[0] = ""
    _DRAW[0] = random.Random(int.from_bytes(os.urandom(8), "little"))
    try:
        with _isolated():
            guarded = _guarded(answer)
            passed = ex.run(guarded)
            _refuse_nan(guarded)  # a check that passed a NaN (every `abs(got - want) > tol` is False for it)
    except NotImplementedError:
        return False, unsolved
    except Wrong as wrong:
        return False, f"{head}: not yet. {wrong}"
    except Exception as err:  # noqa: BLE001 - the reader's code failed; say how (and on which case)
        case = f" ({_CASE[0]})" if _CASE[0] else ""
        return False, f"{head}: not yet. Your code raised {type(err).__name__}: {err}{case}"
    return True, f"{head}: passes. {passed}"


@contextlib.contextmanager
def _isolated():
    """Run a check under torch's defaults (float32, gradients on) and give back torch's global state as it was,
    whatever the answer does to it: default dtype, random state, grad mode and threads."""
    dtype, grad, threads = torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads()
    try:
        with torch.random.fork_rng(devices=[]):  # a check seeds its own data; the reader's random state stays
            torch.set_default_dtype(torch.float32)
            torch.set_grad_enabled(True)
            yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def _copied(value, depth: int = 0):
    """value with every tensor cloned and every list, tuple and dict copied, so that an answer that changes its inputs
    in place changes neither the check's own data nor what the next answer sees."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if depth > 8:
        return value
    if isinstance(value, list):
        return [_copied(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(_copied(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return {k: _copied(v, depth + 1) for k, v in value.items()}
    return value


def _holds_nan(value, depth: int = 0) -> bool:
    """Whether a number, a tensor, or a list, tuple or dict of them holds a NaN (which every comparison calls unequal,
    so that `abs(got - want) > tol` would pass it)."""
    if isinstance(value, torch.Tensor):
        return (value.is_floating_point() or value.is_complex()) and bool(torch.isnan(value.detach()).any())
    if isinstance(value, float):
        return math.isnan(value)
    if depth > 8:
        return False
    if isinstance(value, (list, tuple)):
        return any(_holds_nan(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_holds_nan(v, depth + 1) for v in value.values())
    return False


def _guarded(answer):
    """A function answer called on copies of its inputs, remembering whether a result held a NaN; classes and modules
    (an answer the check builds or changes on purpose) as they are."""
    if not callable(answer) or isinstance(answer, (type, torch.nn.Module)):
        return answer

    @functools.wraps(answer)
    def call(*args, **kwargs):
        result = answer(*_copied(args), **_copied(kwargs))
        call.returned_nan = call.returned_nan or _holds_nan(result)
        return result
    call.returned_nan = False
    return call


def _refuse_nan(guarded) -> None:
    """Wrong if the answer returned a NaN: checks compare with tolerances, and NaN is within none of them."""
    if getattr(guarded, "returned_nan", False):
        name = getattr(guarded, "__name__", "<lambda>")
        name = "your function" if name == "<lambda>" else name
        raise Wrong(f"{name} returned NaN (not a number), which no comparison can pass: look for a 0 / 0, a log of a "
                    "negative number, or an inf - inf")


def check(number: str, answer) -> None:
    """Print the verdict on the answer to exercise `number` (verdict gives it as a value)."""
    print(verdict(number, answer)[1])


# ------------------------------------------------------------------------------------------- helpers
def _tensor(name: str, value, shape: tuple) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise Wrong(f"{name} should return a torch.Tensor, got {type(value).__name__}")
    if tuple(value.shape) != tuple(shape):
        raise Wrong(f"{name} should return shape {tuple(shape)}, got {tuple(value.shape)}")
    return value.detach().double()


def _first_mismatch(got: torch.Tensor, want: torch.Tensor, atol: float = 1e-4) -> str | None:
    bad = ((got - want).abs() > atol) | got.isnan()
    if not bad.any():
        return None
    index = tuple(int(i) for i in bad.nonzero()[0])
    return f"at index {list(index)} expected {want[index].item():.4f}, got {got[index].item():.4f}"


def _table(max_len: int, d_model: int) -> torch.Tensor:
    from transformer_lib.embeddings import sinusoidal_table
    return sinusoidal_table(max_len, d_model).double()
