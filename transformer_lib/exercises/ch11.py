# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 11's exercises (notebooks/11_modern.ipynb)."""

from __future__ import annotations

import torch

from transformer_lib.exercises.core import Wrong, _exercise, _first_mismatch, _tensor, _trying, _unlike, _unpredictable


@_exercise("11.1", "RMSNorm")
def _(rms_norm):
    torch.manual_seed(0)
    # eps large, so that where it goes shows; a second size and eps, and one drawn, so that none written in passes
    draw = _unpredictable()
    drawn = ((draw.randint(1, 4), draw.randint(1, 9), draw.randint(2, 40)), round(draw.uniform(0.05, 0.8), 3))
    for shape, eps in (((3, 5, 8), 0.5), ((4, 5), 0.01), drawn):
        d, case = shape[-1], f"for x of shape {shape} and eps={eps}"
        _trying(case)
        x = torch.randn(shape, dtype=torch.float64) + 2.0  # a mean far from 0, so that subtracting it shows
        gain = torch.rand(d, dtype=torch.float64) + 0.5
        got = _tensor("rms_norm(x, gain, eps)", rms_norm(x.clone(), gain.clone(), eps), tuple(x.shape))
        want = torch.nn.functional.rms_norm(x, (d,), gain, eps)
        if _first_mismatch(got, want, 1e-9) is None:
            continue
        centered = x - x.mean(-1, keepdim=True)
        if _first_mismatch(got, torch.nn.functional.rms_norm(centered, (d,), gain, eps), 1e-9) is None:
            raise Wrong("RMSNorm does not subtract the mean: it divides x by the root of mean(x^2) + eps as it is")
        if _first_mismatch(got, x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * gain, 1e-9) is None:
            raise Wrong("eps goes inside the square root: x / sqrt(mean(x^2) + eps)")
        raise Wrong(f"{case}, compared with torch.nn.functional.rms_norm, {_first_mismatch(got, want, 1e-9)}")
    return "It equals torch.nn.functional.rms_norm: layer norm without the mean and without the bias."


@_exercise("11.2", "a SwiGLU as large as the ReLU network")
def _(swiglu_hidden):
    from transformer_lib.modern import Block, BlockConfig
    # 3 divides the first d_ff, not the others: 2/3 d_ff falls above and below a whole number
    draw = _unpredictable()  # and a width drawn afresh
    fixed = ((96, 384), (256, 1024), (512, 2048))
    drawn = _unlike(lambda: (lambda d: (d, d * draw.choice([2, 3, 4, 8])))(4 * draw.randint(2, 200)), fixed)
    for d_model, d_ff in (*fixed, drawn):
        _trying(f"for d_model {d_model} and d_ff {d_ff}")
        got = int(swiglu_hidden(d_model, d_ff))
        relu, gated = 2 * d_model * d_ff, 3 * d_model * got  # weights, no biases
        block = Block(BlockConfig(10, 1, d_model, 4, d_ff, ffn="swiglu", bias=False)).ffn.w_1.out_features  # the book's
        if got == block:
            continue
        if got == d_ff:
            raise Wrong(f"with d_hidden = d_ff the gated network has three matrices: {gated:,} weights against the "
                        f"ReLU network's {relu:,}; solve 3 d_model h = 2 d_model d_ff")
        nearest = 3 * d_model * block
        off = lambda n: "as many" if n == relu else f"{abs(n - relu):,} {'over' if n > relu else 'short'}"
        hint = ("round 2/3 d_ff to the nearest integer" if abs(3 * got - 2 * d_ff) < 3 else
                "solve 3 d_model h = 2 d_model d_ff")
        raise Wrong(f"for d_model {d_model}, d_ff {d_ff}: the ReLU network has {relu:,} weights; d_hidden {got} gives the "
                    f"gated one {gated:,}, {off(gated)}. {block} gives {nearest:,}, {off(nearest)}: {hint}")
    return ("Three matrices of 2/3 d_ff hold what two of d_ff held, or d_model weights apart where 3 does not divide "
            "d_ff: the size Block gives its SwiGLU, so the comparison of section 6 is at equal size.")


# (x's shape, base): the first as before; then other sizes and bases, so that neither a base nor a size written in passes
_ROPE_CASES = (((1, 2, 6, 8), 10000.0), ((2, 1, 5, 4), 500.0), ((1, 3, 7, 12), 50.0))


@_exercise("11.3", "rotate by position")
def _(rope):
    from transformer_lib.modern import apply_rope, rope_angles
    torch.manual_seed(0)
    draw = _unpredictable()  # and a shape and base drawn afresh
    drawn = ((draw.randint(1, 3), draw.randint(1, 3), draw.randint(1, 9), 2 * draw.randint(1, 8)),
             float(round(10 ** draw.uniform(1, 5))))
    for shape, base in (*_ROPE_CASES, drawn):
        T, d_k = shape[-2], shape[-1]
        case = f"for x of shape {shape} and base {base:g}"
        _trying(case)
        x = torch.randn(shape, dtype=torch.float64)
        got = _tensor(f"rope(x, {base:g})", rope(x.clone(), base), shape)
        angles = rope_angles(T, d_k, base)
        want = apply_rope(x, angles)
        if _first_mismatch(got, want, 1e-9) is None:
            continue
        half = d_k // 2
        cos, sin = angles.cos(), angles.sin()
        halves = torch.cat([x[..., :half] * cos - x[..., half:] * sin, x[..., :half] * sin + x[..., half:] * cos], -1)
        if _first_mismatch(got, halves, 1e-9) is None:
            raise Wrong("that rotates dimension i with dimension i + d_k/2 (the 'halves' layout); this book pairs "
                        "neighbours, (x[2i], x[2i + 1]), as chapter 1's sinusoids do")
        if _first_mismatch(got[:, :, 0], x[:, :, 0], 1e-9) is not None:
            raise Wrong("position 0 turns by angle 0: its vectors must come back unchanged")
        for other in sorted({b for _, b in _ROPE_CASES} - {base}):
            if _first_mismatch(got, apply_rope(x, rope_angles(T, d_k, other)), 1e-9) is None:
                raise Wrong(f"{case} your rotation is that of base {other:g}: turn by base^(-2i / d_k) with the base "
                            "given, never a number written in")
        raise Wrong(f"{case}, compared with apply_rope(x, rope_angles(T, d_k, base)), {_first_mismatch(got, want, 1e-9)}")
    ones = torch.ones(1, 1, 6, 8, dtype=torch.float64)
    q, k = rope(ones.clone(), 10000.0), rope(ones.clone(), 10000.0)
    scores = (q[0, 0] @ k[0, 0].T)
    return (f"q.k between positions 1 and 3 is {scores[1, 3].item():.4f}, and between 2 and 4 "
            f"{scores[2, 4].item():.4f}: the score depends on the offset alone.")


@_exercise("11.4", "repeat the key/value heads")
def _(repeat_kv):
    # (B, n_kv_heads, T, d_k) and group: the first as before, then others, so that no group written in passes
    draw = _unpredictable()
    drawn = ((draw.randint(1, 3), draw.randint(1, 5), draw.randint(1, 6), draw.randint(1, 8)), draw.randint(1, 6))
    for shape, group in (((2, 2, 3, 4), 3), ((1, 3, 2, 5), 2), ((2, 4, 1, 3), 1), drawn):
        b, n_kv, t, d_k = shape
        call = f"repeat_kv(k, {group}) for k of shape {shape}"
        _trying(call)
        k = torch.arange(b * n_kv * t * d_k, dtype=torch.float64).view(shape)
        got = _tensor(call, repeat_kv(k.clone(), group), (b, n_kv * group, t, d_k))
        want = k.repeat_interleave(group, dim=1)
        if torch.equal(got, want):
            continue
        if torch.equal(got, k.repeat(1, group, 1, 1)):
            tiled = ", ".join(str(j % n_kv) for j in range(n_kv * group))
            placed = ", ".join(str(j // group) for j in range(n_kv * group))
            raise Wrong(f"that tiles the stack (heads {tiled}): query head j uses key/value head j // {group}, so "
                        f"each head repeats in place ({placed}), as repeat_interleave does")
        raise Wrong(f"{call}: query head j should read key/value head j // group")
    return "Query heads 0 to 2 read key/value head 0, heads 3 to 5 head 1, as enable_gqa=True does."
