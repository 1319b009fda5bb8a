# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 11's exercises (notebooks/11_modern.ipynb)."""

from __future__ import annotations

import torch

from transformer_lib.exercises.core import Wrong, _exercise, _first_mismatch, _tensor


@_exercise("11.1", "RMSNorm")
def _(rms_norm):
    torch.manual_seed(0)
    x = torch.randn(3, 5, 8, dtype=torch.float64) + 2.0  # a mean far from 0, so that subtracting it shows
    gain = torch.rand(8, dtype=torch.float64) + 0.5
    eps = 0.5  # large, so that where eps goes shows
    got = _tensor("rms_norm(x, gain, eps)", rms_norm(x.clone(), gain.clone(), eps), tuple(x.shape))
    want = torch.nn.functional.rms_norm(x, (8,), gain, eps)
    if _first_mismatch(got, want, 1e-9) is None:
        return "It equals torch.nn.functional.rms_norm: layer norm without the mean and without the bias."
    centered = x - x.mean(-1, keepdim=True)
    if _first_mismatch(got, torch.nn.functional.rms_norm(centered, (8,), gain, eps), 1e-9) is None:
        raise Wrong("RMSNorm does not subtract the mean: it divides x by the root of mean(x^2) + eps as it is")
    if _first_mismatch(got, x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * gain, 1e-9) is None:
        raise Wrong("eps goes inside the square root: x / sqrt(mean(x^2) + eps)")
    raise Wrong(f"compared with torch.nn.functional.rms_norm, {_first_mismatch(got, want, 1e-9)}")


@_exercise("11.2", "a SwiGLU as large as the ReLU network")
def _(swiglu_hidden):
    for d_model, d_ff in ((256, 1024), (512, 2048), (96, 384)):
        got = int(swiglu_hidden(d_model, d_ff))
        relu, gated = 2 * d_model * d_ff, 3 * d_model * got  # weights, no biases
        if got == round(2 * d_ff / 3):
            continue
        if got == d_ff:
            raise Wrong(f"with d_hidden = d_ff the gated network has three matrices: {gated:,} weights against the "
                        f"ReLU network's {relu:,}; solve 3 d_model h = 2 d_model d_ff")
        raise Wrong(f"for d_model {d_model}, d_ff {d_ff}: the ReLU network has {relu:,} weights; d_hidden {got} gives the "
                    f"gated one {gated:,}")
    return "Three matrices of 2/3 d_ff hold what two of d_ff held: the comparison of section 6 is at equal size."


@_exercise("11.3", "rotate by position")
def _(rope):
    from transformer_lib.modern import apply_rope, rope_angles
    torch.manual_seed(0)
    x = torch.randn(1, 2, 6, 8, dtype=torch.float64)
    got = _tensor("rope(x, base)", rope(x.clone(), 10000.0), tuple(x.shape))
    want = apply_rope(x, rope_angles(6, 8))
    if _first_mismatch(got, want, 1e-9) is None:
        q, k = rope(torch.ones(1, 1, 6, 8, dtype=torch.float64), 10000.0), rope(torch.ones(1, 1, 6, 8, dtype=torch.float64), 10000.0)
        scores = (q[0, 0] @ k[0, 0].T)
        return (f"q.k between positions 1 and 3 is {scores[1, 3].item():.4f}, and between 2 and 4 "
                f"{scores[2, 4].item():.4f}: the score depends on the offset alone.")
    half = x.size(-1) // 2
    angles = rope_angles(6, 8)
    cos, sin = angles.cos(), angles.sin()
    halves = torch.cat([x[..., :half] * cos - x[..., half:] * sin, x[..., :half] * sin + x[..., half:] * cos], -1)
    if _first_mismatch(got, halves, 1e-9) is None:
        raise Wrong("that rotates dimension i with dimension i + d_k/2 (the 'halves' layout); this book pairs "
                    "neighbours, (x[2i], x[2i + 1]), as chapter 1's sinusoids do")
    if _first_mismatch(got[:, :, 0], x[:, :, 0], 1e-9) is not None:
        raise Wrong("position 0 turns by angle 0: its vectors must come back unchanged")
    raise Wrong(f"compared with apply_rope(x, rope_angles(T, d_k)), {_first_mismatch(got, want, 1e-9)}")


@_exercise("11.4", "repeat the key/value heads")
def _(repeat_kv):
    k = torch.arange(2 * 2 * 3 * 4, dtype=torch.float64).view(2, 2, 3, 4)  # (B, n_kv_heads=2, T, d_k)
    got = _tensor("repeat_kv(k, 3)", repeat_kv(k.clone(), 3), (2, 6, 3, 4))
    want = k.repeat_interleave(3, dim=1)
    if torch.equal(got, want):
        return "Query heads 0 to 2 read key/value head 0, heads 3 to 5 head 1, as enable_gqa=True does."
    if torch.equal(got, k.repeat(1, 3, 1, 1)):
        raise Wrong("that tiles the stack (heads 0, 1, 0, 1, 0, 1): query head j uses key/value head j // 3, so each "
                    "head repeats in place (0, 0, 0, 1, 1, 1), as repeat_interleave does")
    raise Wrong("query head j should read key/value head j // group")
