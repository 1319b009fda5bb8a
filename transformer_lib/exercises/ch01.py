# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 1's exercises (notebooks/01_embeddings.ipynb)."""

from __future__ import annotations

import math

import torch

from transformer_lib.exercises.core import (Wrong, _exercise, _first_mismatch, _table, _tensor, _trying, _unlike,
                                            _unpredictable)


@_exercise("1.1", "the sinusoidal table")
def _(sinusoidal):
    draw = _unpredictable()  # and one size of the table no answer can know in advance
    drawn = _unlike(lambda: (draw.randint(2, 80), 2 * draw.randint(2, 40)), ((50, 16), (9, 4)))
    for max_len, d_model in ((50, 16), (9, 4), drawn):
        _trying(f"sinusoidal({max_len}, {d_model})")
        got, want = _tensor("sinusoidal(max_len, d_model)", sinusoidal(max_len, d_model), (max_len, d_model)), \
            _table(max_len, d_model)
        swapped = torch.empty_like(want)
        swapped[:, 0::2], swapped[:, 1::2] = want[:, 1::2], want[:, 0::2]
        if torch.allclose(got, swapped, atol=1e-4):
            raise Wrong("sines and cosines are swapped: even dimensions 2i take the sine, odd ones 2i+1 the cosine")
        where = _first_mismatch(got, want)
        if where:
            slip = next((why for table, why in _table_slips(max_len, d_model) if torch.allclose(got, table, atol=1e-4)),
                        "row = position, column = dimension; pair i turns at the frequency 1 / 10000^(2i / d_model)")
            raise Wrong(f"for max_len={max_len}, d_model={d_model}, {where} ({slip})")
    return "It equals transformer_lib.embeddings.sinusoidal_table."


def _table_slips(max_len: int, d_model: int):
    """The tables a likely slip in 1.1 writes, each with the sentence that names it."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    col = torch.arange(d_model, dtype=torch.float64)

    def table(exponent, positions=pos, times=False):
        rate = 10000.0 ** exponent
        angle = positions * rate if times else positions / rate
        out = torch.empty(max_len, d_model, dtype=torch.float64)
        out[:, 0::2], out[:, 1::2] = angle[:, 0::2].sin(), angle[:, 1::2].cos()
        return out

    pair = col - col % 2  # 2i for both columns of pair i
    return [(table((col // 2) / d_model), "this looks like i / d_model in the exponent, i the pair's index: it is "
             "2i / d_model, so that the wavelengths run from 2 pi to 10000 x 2 pi"),
            (table(col / d_model), "this looks like the column index j in 10000^(j / d_model): both columns of a "
             "pair share one frequency, 10000^(2i / d_model) with 2i = j - j % 2"),
            (table(2 * col / d_model), "this looks like 2j for the column j: the exponent is 2i / d_model with i the "
             "pair's index, j // 2, so 2i = j - j % 2, not 2j"),
            (table(pair / d_model, pos + 1), "this looks like positions counted from 1: the first row is position 0"),
            (table(pair / d_model, times=True), "this looks like the position times 10000^(2i / d_model): divide by "
             "it, so that the wavelengths grow with the dimension")]


@_exercise("1.2", "PE(p) . PE(p + k) depends on k alone")
def _(pe_dot):
    draw = _unpredictable()  # and a size and offsets drawn afresh
    drawn = _unlike(lambda: 2 * draw.randint(1, 64), (16, 6, 64))
    for d_model, offsets in ((16, range(30)), (6, range(30)), (64, range(30)),
                             (drawn, sorted(draw.sample(range(200), 5)))):
        _trying(f"pe_dot(k, {d_model})")
        table = _table(201, d_model)
        for k in offsets:
            want = float(table[0] @ table[k])
            got = pe_dot(k, d_model)
            if not isinstance(got, (int, float)) and not (isinstance(got, torch.Tensor) and got.numel() == 1):
                raise Wrong(f"pe_dot(k, d_model) should return a number, got {type(got).__name__}")
            if abs(float(got) - want) > 1e-4:
                omega = 10000.0 ** (-2 * torch.arange(d_model // 2, dtype=torch.float64) / d_model)
                slips = [  # what a likely slip gives, and what to do instead (at k=0 the last two coincide)
                    (float(d_model), "this is d_model: there are d_model / 2 pairs, not d_model dimensions, each "
                     "giving one cos(k * omega_i), at most 1"),
                    (float(torch.sin(k * omega).sum()), "this looks like the sum of the sines: a pair gives "
                     "sin(a) sin(b) + cos(a) cos(b) = cos(a - b), so sum cos(k * omega_i)"),
                    (float(2 * torch.cos(k * omega).sum()), "this looks like a sum over all d_model dimensions: "
                     "there are d_model / 2 pairs, each giving one cos(k * omega_i)")]
                hint = next((h for value, h in slips if abs(float(got) - value) <= 1e-4), None)
                raise Wrong(f"for k={k}, d_model={d_model} the dot product of the table's rows p and p + k is "
                            f"{want:.4f} for every p, got {float(got):.4f}" + (f"; {hint}" if hint else ""))
    return (f"Your closed form gives the table's dot products for every offset k from 0 to 29, at d_model 16, 6 and "
            f"64, and for offsets {list(offsets)} at d_model {drawn}.")


@_exercise("1.3", "the wavelengths")
def _(wavelengths):
    draw = _unpredictable()  # and a d_model drawn afresh
    for d_model in (16, 512, _unlike(lambda: 2 * draw.randint(1, 300), (16, 512))):
        _trying(f"wavelengths({d_model})")
        i = torch.arange(d_model // 2, dtype=torch.float64)
        omega = 10000.0 ** (-2 * i / d_model)
        got = _tensor(f"wavelengths({d_model})", wavelengths(d_model), (d_model // 2,))
        if torch.allclose(got, omega, rtol=1e-4):
            raise Wrong("these are the frequencies omega_i; a wavelength is the distance of one full turn, 2*pi / omega_i")
        want = 2 * math.pi / omega
        bad = ((got - want).abs() > 1e-4 * want).nonzero()
        if len(bad):
            j = int(bad[0])
            raise Wrong(f"for d_model={d_model}, pair {j} should have wavelength {want[j].item():.4f} "
                        f"(2*pi / omega_{j} with omega_i = 10000^(-2i / d_model)), got {got[j].item():.4f}")
    return ("From 2*pi for the first pair, each pair's wavelength is the last one's times the same factor, up to "
            "almost 10000 * 2*pi: the geometric progression of section 3.5.")


@_exercise("1.4", "the nearest position")
def _(closest):
    # d_model 4 as well: there the fastest pair comes round again and a farther position wins, so p + 1 written in fails
    draw = _unpredictable()  # and a table and positions drawn afresh
    length, width = _unlike(lambda: (draw.randint(3, 80), 2 * draw.randint(1, 32)), ((50, 32), (50, 4)))
    for length, d_model, positions in ((50, 32, (0, 5, 20, 49)), (50, 4, (0, 20, 49)),
                                       (length, width, draw.sample(range(length), 3))):
        table = _table(length, d_model)
        where = f"for sinusoidal_table({length}, {d_model}), "
        for p in positions:
            _trying(f"{where}closest(table, {p})")
            got = closest(table.float(), p)
            got = int(got) if not isinstance(got, torch.Tensor) else int(got.item())
            if got == p:
                raise Wrong(f"{where}closest(table, {p}) returned {p} itself: look among the other positions q != p")
            if not 0 <= got < len(table):
                raise Wrong(f"{where}closest(table, {p}) should be a position from 0 to {len(table) - 1}, got {got}")
            scores = table @ table[p]
            scores[p] = -math.inf
            want = int(scores.argmax())  # ties (p - 1 and p + 1) pass: the dot product depends on |offset| alone
            if scores[got] < scores[want] - 1e-6:
                raise Wrong(f"{where}closest(table, {p}) should be {want} (its dot product with PE({p}) is "
                            f"{float(scores[want]):.3f}), got {got} ({float(scores[got]):.3f}): take the largest dot "
                            "product, whatever the offset")
    return ("In sinusoidal_table(50, 32) it finds a neighbour, p - 1 or p + 1, for every position tried; in "
            "sinusoidal_table(50, 4) a farther one, as the largest dot product says.")
