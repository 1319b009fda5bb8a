# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 9's exercises (notebooks/09_fast.ipynb)."""

from __future__ import annotations

import math

import torch
from torch import nn

from transformer_lib.exercises.core import Wrong, _exercise, _first_mismatch, _trying, _unlike, _unpredictable


@_exercise("9.1", "one matrix for q, k and v")
def _(fuse_qkv):
    torch.manual_seed(0)
    draw = _unpredictable()  # sizes, one drawn afresh, so that no d_model written in passes
    for d in (8, 5, _unlike(lambda: draw.randint(1, 48), (8, 5))):
        _trying(f"q, k and v of d_model={d}")
        q, k, v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        fused = fuse_qkv(q, k, v)
        if not isinstance(fused, nn.Linear):
            raise Wrong(f"fuse_qkv should return one nn.Linear, got {type(fused).__name__}")
        if tuple(fused.weight.shape) != (3 * d, d):
            raise Wrong(f"the fused layer maps d_model={d} to 3 * d_model: its weight has shape ({3 * d}, {d}) "
                        f"(out_features, in_features), got {tuple(fused.weight.shape)}")
        x = torch.randn(2, 5, d)
        with torch.no_grad():
            parts = fused(x).chunk(3, dim=-1)
            for name, part, layer in zip("qkv", parts, (q, k, v)):
                where = _first_mismatch(part.double(), layer(x).double(), 1e-5)
                if where:
                    raise Wrong(f"at d_model={d} the {name} third of the fused output differs from {name}_proj(x) "
                                f"{where}" + (": did the biases come along?" if fused.bias is None
                                              or not fused.bias.any() else ""))
    return "One (3d, d) matrix multiplication instead of three (d, d) ones: fewer, larger calls into the BLAS."


@_exercise("9.2", "the gaps between bfloat16 numbers")
def _(bf16_spacing):
    draw = _unpredictable()  # and two numbers drawn afresh, of any size
    for x in (1.0, 1.5, 3.0, 1000.0, 0.01, *(float(torch.tensor(10 ** draw.uniform(-6, 6)).bfloat16())
                                             for _ in range(2))):
        _trying(f"bf16_spacing({x!r})")
        t = torch.tensor([x], dtype=torch.bfloat16)
        above = (t.view(torch.int16) + 1).view(torch.bfloat16)
        want, got = float(above - t), float(bf16_spacing(x))
        if abs(got - want) <= 1e-12 * want:
            continue
        if abs(got - want / 8) <= 1e-12 * want:
            raise Wrong(f"at {x} that is float16's gap (10 bits after the point); bfloat16 keeps 7: expected {want:g}, "
                        f"got {got:g}")
        if abs(got - 2.0**-7) <= 1e-12 and want != 2.0**-7:
            raise Wrong(f"the gap grows with the number, as floating point keeps relative precision: at {x} it is "
                        f"{want:g}, not 2^-7")
        raise Wrong(f"the next bfloat16 number above {x} is {x + want:g}, a gap of {want:g}, got {got:g}")
    return "bfloat16 has float32's range and about 2 to 3 significant decimal digits: 128 numbers per power of two."


@_exercise("9.3", "int8 with a zero-point")
def _(quantize_asymmetric):
    torch.manual_seed(0)
    draw = _unpredictable()  # and a range drawn afresh, of any width and offset
    low, width = draw.uniform(-8.0, 2.0), draw.uniform(0.5, 20.0)
    for label, x in (("ReLU outputs", torch.randn(200).relu() * 3), ("values from -1 to 5", torch.rand(200) * 6 - 1),
                     (f"values from {low:.3g} to {low + width:.3g}", torch.rand(draw.randint(2, 300)) * width + low)):
        _trying(label)
        out = quantize_asymmetric(x.clone())
        if not isinstance(out, tuple) or len(out) != 3:
            raise Wrong("quantize_asymmetric(x) should return (q, scale, zero_point)")
        q, scale, zero_point = out
        if not isinstance(q, torch.Tensor) or q.dtype != torch.int8 or q.shape != x.shape:
            raise Wrong(f"q should be an int8 tensor of x's shape {tuple(x.shape)}")
        scale = float(scale)
        if not isinstance(zero_point, int) and not (isinstance(zero_point, torch.Tensor) and zero_point.numel() == 1
                                                    and not zero_point.is_floating_point()):
            raise Wrong(f"zero_point should be an integer, so that 0.0 is exactly a level; got {zero_point!r}")
        zero_point = int(zero_point)
        lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
        if abs(scale - (hi - lo) / 255) > 1e-6 * (hi - lo):
            if abs(scale - max(abs(lo), hi) / 127) <= 1e-6 * hi:
                raise Wrong(f"{label}: that is the symmetric grid, whose levels below zero go unused here; spread the "
                            "256 levels from min(x, 0) to max(x, 0): scale = (hi - lo) / 255")
            raise Wrong(f"{label}: scale should be (max(x, 0) - min(x, 0)) / 255 = {(hi - lo) / 255:.5g}, got {scale:.5g}")
        back = (q.float() - zero_point) * scale
        inside = (q > -128) & (q < 127)  # the ends may clamp
        err = (back - x).abs()
        if (err[inside] > scale / 2 * (1 + 1e-4)).any():
            raise Wrong(f"{label}: (q - zero_point) * scale is off by up to {err[inside].max():.3g}, more than half a "
                        f"step ({scale / 2:.3g}): round to the nearest integer rather than truncating")
        if (err > scale * (1 + 1e-4)).any() or not -128 <= zero_point <= 127:
            raise Wrong(f"{label}: the levels do not cover the values: zero_point = round(-128 - lo / scale), q = "
                        "clamp(round(x / scale) + zero_point, -128, 127)")
        if math.isfinite(scale) and (back[x == 0] != 0).any():  # NaN is named as such at the end
            raise Wrong(f"{label}: 0.0 should come back exactly 0.0, got {float(back[x == 0].abs().max()):.3g}: "
                        "zero_point is an integer, the level 0.0 quantizes to")
    return "0.0 is a level, so zero padding and ReLU's zeros come back exact, and all 256 levels cover the range."


@_exercise("9.4", "label smoothing in closed form")
def _(smoothed_kl):
    from transformer_lib.training import LabelSmoothing
    torch.manual_seed(0)
    # the first as before; then another vocabulary, padding id and smoothing, so that none written in passes
    draw = _unpredictable()  # and a vocabulary, padding id, smoothing and targets drawn afresh
    vocab = draw.randint(3, 40)
    pad = draw.randrange(vocab)
    drawn = (vocab, pad, round(draw.uniform(0.01, 0.5), 3), [draw.randrange(vocab) for _ in range(draw.randint(1, 9))])
    for vocab, pad, eps, target in ((9, 1, 0.1, [3, 1, 8, 0, 5, 1]), (12, 0, 0.25, [4, 0, 11, 2, 7]), drawn):
        _trying(f"smoothed_kl(log_probs, target, {eps}, {pad}) with V = {vocab}")
        target = torch.tensor(target)
        log_probs = torch.randn(len(target), vocab, dtype=torch.float64).log_softmax(-1)
        want = LabelSmoothing(vocab, pad, eps)(log_probs, target).item()
        got = float(smoothed_kl(log_probs, target, eps, pad))
        if abs(got - want) <= 1e-9 * abs(want):
            continue
        real = int((target != pad).sum())
        confidence, other = 1 - eps, eps / (vocab - 2)
        constant = confidence * math.log(confidence) + eps * math.log(other)
        if abs(got - (want - real * constant)) <= 1e-9 * abs(want):
            raise Wrong("that is the cross-entropy: KL(q || p) also has sum q log q, a constant per real row, "
                        f"(1 - s) log(1 - s) + s log(s / (V - 2)) = {constant:.4f}")
        raise Wrong(f"for {len(target)} rows ({len(target) - real} of them padding, id {pad}), V = {vocab} and "
                    f"smoothing {eps} the loss is {want:.6f}, got {got:.6f}")
    return "The same loss as LabelSmoothing; written as one gather and one sum per row, it needs no (N, V) tensor."
