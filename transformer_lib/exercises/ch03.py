# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 3's exercises (notebooks/03_blocks.ipynb)."""

from __future__ import annotations

import math

import torch

from transformer_lib.exercises.core import Wrong, _exercise, _first_mismatch, _tensor, _trying, _unpredictable


@_exercise("3.1", "layer norm")
def _(layer_norm):
    g = torch.Generator().manual_seed(3)
    draw = _unpredictable()
    drawn = ((draw.randint(1, 4), draw.randint(2, 9), draw.randint(2, 40)), round(draw.uniform(0.05, 0.8), 3))
    # eps large, so that where it goes shows; a second size and eps, and one drawn, so that none written in passes
    for shape, eps in (((2, 5, 16), 0.5), ((4, 7), 0.01), drawn):
        d = shape[-1]
        case = f"for x of shape {shape} and eps={eps}"
        _trying(case)
        x = torch.randn(shape, generator=g, dtype=torch.float64) * 3 + 1
        gain = torch.rand(d, generator=g, dtype=torch.float64) + 0.5
        bias = torch.randn(d, generator=g, dtype=torch.float64)
        got = _tensor("layer_norm(x, gain, bias, eps)", layer_norm(x, gain, bias, eps), x.shape)
        want = torch.nn.functional.layer_norm(x, (d,), gain, bias, eps)
        centred = x - x.mean(-1, keepdim=True)
        if torch.allclose(got, centred / (x.std(-1, keepdim=True) + eps) * gain + bias, atol=1e-6):
            raise Wrong("that is the Annotated Transformer's layer norm, (x - mean) / (std + eps) with x.std(), the "
                        "variant the pitfall section measures: it takes the unbiased std (dividing by d - 1) and adds "
                        "eps to the std instead of inside the square root; layer norm is (x - mean) / sqrt(var + eps) "
                        "with the biased variance, x.var(-1, unbiased=False)")
        if torch.allclose(got, centred / torch.sqrt(x.var(-1, keepdim=True) + eps) * gain + bias, atol=1e-6):
            raise Wrong("divide by d, not d - 1: layer norm uses the biased variance, x.var(-1, unbiased=False)")
        if torch.allclose(got, centred / (x.var(-1, unbiased=False, keepdim=True).sqrt() + eps) * gain + bias,
                          atol=1e-6):
            raise Wrong("eps goes inside the square root: (x - mean) / sqrt(var + eps), as torch.nn.LayerNorm does")
        where = _first_mismatch(got, want, 1e-6)
        if where:
            raise Wrong(f"{case}: normalize each vector over its last dimension, then scale by gain and add bias; "
                        f"{where}")
    return "It equals torch.nn.functional.layer_norm."


@_exercise("3.2", "post-norm and pre-norm residuals")
def _(sublayer):
    draw = _unpredictable()  # a second input of a shape, scale and seed drawn afresh
    for shape, scale, seed in (((3, 8), 2.0, 4), ((draw.randint(1, 4), draw.randint(1, 6), draw.randint(2, 24)),
                                                   draw.uniform(0.5, 5.0), draw.randrange(2**31))):
        _trying(f"sublayer(x, fn, norm, norm_first) for x of shape {shape}")
        _post_and_pre_norm(sublayer, torch.randn(shape, generator=torch.Generator().manual_seed(seed),
                                                 dtype=torch.float64) * scale)
    return "Post-norm is norm(x + fn(x)), pre-norm x + fn(norm(x)): only pre-norm keeps x on an unnormalized path."


def _post_and_pre_norm(sublayer, x: torch.Tensor) -> None:
    fn = lambda t: torch.tanh(t) * 3 + 1  # noqa: E731 - a sublayer whose output is far from normalized
    norm = lambda t: torch.nn.functional.layer_norm(t, (x.shape[-1],))  # noqa: E731
    for norm_first, want, name in ((False, norm(x + fn(x)), "post-norm"), (True, x + fn(norm(x)), "pre-norm")):
        got = _tensor(f"sublayer(x, fn, norm, norm_first={norm_first})", sublayer(x.clone(), fn, norm, norm_first),
                      x.shape)
        if torch.allclose(got, want, atol=1e-9):
            continue
        if norm_first and torch.allclose(got, norm(x) + fn(norm(x)), atol=1e-9):
            raise Wrong("pre-norm: the residual must carry x itself, x + fn(norm(x)), not norm(x)")
        if not norm_first and torch.allclose(got, x + norm(fn(x)), atol=1e-9):
            raise Wrong("post-norm normalizes the sum: norm(x + fn(x)), not x + norm(fn(x))")
        if torch.allclose(got, (x + fn(norm(x))) if not norm_first else norm(x + fn(x)), atol=1e-9):
            raise Wrong(f"norm_first={norm_first} asks for {name}; you computed the other one")
        raise Wrong(f"{name} should be {'x + fn(norm(x))' if norm_first else 'norm(x + fn(x))'}; "
                    f"{_first_mismatch(got, want, 1e-9)}")


@_exercise("3.3", "the feed-forward network's size")
def _(ffn_parameters):
    from transformer_lib.blocks import PositionwiseFeedForward
    draw = _unpredictable()
    for d_model, d_ff in ((512, 2048), (64, 256), (draw.randint(2, 300), draw.randint(2, 900))):
        want = sum(p.numel() for p in PositionwiseFeedForward(d_model, d_ff).parameters())
        got = ffn_parameters(d_model, d_ff)
        if got == 2 * d_model * d_ff:
            raise Wrong(f"for d_model={d_model}, d_ff={d_ff} the network has {want:,} parameters: you counted the two "
                        f"weight matrices; add the biases, {d_ff:,} for w_1 and {d_model:,} for w_2")
        if got != want:
            raise Wrong(f"for d_model={d_model}, d_ff={d_ff} the network has {want:,} parameters, got {got!r}")
    return "The paper's base layer spends 2,099,712 parameters on its feed-forward network."


@_exercise("3.4", "where an encoder layer's parameters are")
def _(ffn_share):
    from transformer_lib.blocks import EncoderLayer
    shares = []
    draw = _unpredictable()  # the paper's size, one no constant fits, and one drawn afresh
    for d_model, d_ff in ((512, 2048), (64, 96), (8 * draw.randint(1, 40), draw.randint(2, 600))):
        layer = EncoderLayer(d_model, 8, d_ff)
        named = dict(layer.named_parameters())
        total = sum(p.numel() for p in named.values())
        ffn = sum(p.numel() for p in layer.feed_forward.parameters())
        want, got = ffn / total, float(ffn_share(d_model, d_ff))
        shares.append(want)
        if abs(got - want) <= 1e-6 or math.isnan(got):  # a NaN is refused after the check, with its own sentence
            continue
        norms = sum(p.numel() for n, p in named.items() if "norm" in n)
        biases = sum(p.numel() for n, p in named.items() if "norm" not in n and n.endswith("bias"))
        ffn_biases = sum(p.numel() for n, p in layer.feed_forward.named_parameters() if n.endswith("bias"))
        hint = ""
        if abs(got - ffn / (total - norms)) < 1e-6:
            hint = ": count every parameter of the layer, the two layer norms' gains and biases too"
        elif abs(got - (ffn - ffn_biases) / (total - biases)) < 1e-6:
            hint = ": every nn.Linear of the layer has a bias, the attention projections' and the feed-forward's too"
        raise Wrong(f"at d_model={d_model}, d_ff={d_ff} the feed-forward network holds {want:.4f} of the layer's "
                    f"{total:,} parameters, got {got:.4f}{hint}")
    return (f"Two thirds of an encoder layer is its feed-forward network ({shares[0]:.1%} at the paper's size); "
            "attention is the rest, nearly.")
