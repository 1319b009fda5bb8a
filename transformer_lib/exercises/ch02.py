# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 2's exercises (notebooks/02_attention.ipynb)."""

from __future__ import annotations

import math

import torch

from transformer_lib.exercises.core import Wrong, _exercise, _first_mismatch, _tensor


def _masked_case():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(4, 5, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    return scores, mask


@_exercise("2.1", "a masked softmax")
def _(masked_softmax):
    scores, mask = _masked_case()
    got = _tensor("masked_softmax(scores, mask)", masked_softmax(scores.clone(), mask), scores.shape)
    for row in range(4):
        if not mask[row].any():
            if got[row].isnan().any() or (got[row] != 0).any():
                shown = "NaN" if got[row].isnan().any() else f"{got[row].tolist()}"
                raise Wrong(f"rows where every key is masked should be all zeros, got {shown} at row {row}")
            continue
        leaked = got[row][~mask[row]]
        if leaked.isnan().any() or (leaked.abs() > 1e-9).any():
            col = int((~mask[row]).nonzero()[0])
            raise Wrong(f"masked keys must get weight 0, got {got[row, col].item():.3f} at row {row}, column {col}")
        want = scores[row][mask[row]].softmax(-1)
        if not torch.allclose(got[row][mask[row]], want, atol=1e-6):
            raise Wrong(f"row {row}: the allowed keys should share the weight as softmax over them alone, "
                        f"{[round(x, 3) for x in want.tolist()]}, got {[round(x, 3) for x in got[row][mask[row]].tolist()]}")
    half = scores.to(torch.float16)  # half precision, where section 7's pitfall shows a finite fill failing
    try:
        got = masked_softmax(half.clone(), mask)
    except RuntimeError as err:
        if "overflow" not in str(err):
            raise
        raise Wrong("on float16 scores your code fails: a finite fill like -1e9 cannot be stored in float16 (its largest "
                    "number is 65,504); fill with -inf, then zero the rows where every key is masked") from None
    got = _tensor("masked_softmax(scores, mask) on float16 scores", got, scores.shape)
    want = half.double().masked_fill(~mask, float("-inf")).softmax(-1).nan_to_num(0.0)
    where = _first_mismatch(got, want, 2e-3)
    if where:
        raise Wrong(f"on float16 scores the weights should be those of float32, to half precision: {where}")
    return ("Masked keys get 0, the others a softmax over the allowed ones, and a row with no allowed key is all zeros, "
            "in float32 and in float16.")


@_exercise("2.2", "scaled dot-product attention")
def _(attention):
    from transformer_lib.attention import scaled_dot_product_attention
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 6, 16, generator=g) for _ in range(3))
    got = attention(q, k, v)
    if not isinstance(got, tuple) or len(got) != 2:
        raise Wrong("attention(q, k, v) should return (output, weights)")
    out, weights = _tensor("the output", got[0], (2, 6, 16)), _tensor("the weights", got[1], (2, 6, 6))
    want_out, want_w = (t.double() for t in scaled_dot_product_attention(q, k, v))
    if not torch.allclose(weights.sum(-1), torch.ones(2, 6, dtype=torch.float64), atol=1e-5):
        raise Wrong("each row of the weights must sum to 1 (one query's weights over the keys): take the softmax "
                    "over the last dimension, the keys")
    unscaled = (q @ k.transpose(-2, -1)).softmax(-1).double()
    if torch.allclose(weights, unscaled, atol=1e-5):
        raise Wrong("the weights are softmax(q k^T) without the scale: divide the scores by sqrt(d_k) first")
    where = _first_mismatch(weights, want_w, 1e-5) or _first_mismatch(out, want_out, 1e-5)
    if where:
        raise Wrong(f"the result differs from softmax(q k^T / sqrt(d_k)) v: {where}")
    return "It equals transformer_lib.attention.scaled_dot_product_attention, output and weights."


@_exercise("2.3", "the causal mask")
def _(causal_mask):
    for size in (1, 5):
        got = causal_mask(size)
        if not isinstance(got, torch.Tensor) or got.dtype != torch.bool:
            raise Wrong(f"causal_mask({size}) should return a bool tensor (True = may attend), got "
                        f"{getattr(got, 'dtype', type(got).__name__)}")
        got = _tensor(f"causal_mask({size})", got, (size, size)).bool()
        for i in range(size):
            if not got[i, i]:
                raise Wrong(f"position {i} must see itself: mask[{i}, {i}] should be True")
            seen = got[i].nonzero().flatten().tolist()
            if seen != list(range(i + 1)):
                raise Wrong(f"row {i} (query {i}) should allow keys {list(range(i + 1))}, the positions up to its own, "
                            f"got {seen}")
    return "Query i sees keys 0 to i and no later one."


@_exercise("2.4", "why divide by sqrt(d_k)")
def _(score_variance):
    for d_k in (4, 64):
        got = score_variance(d_k)
        got = float(got)
        if math.isfinite(got) and 0.15 * d_k < abs(got - d_k) <= 0.4 * d_k:
            raise Wrong(f"for d_k={d_k} the variance of q . k is {d_k}, and {got:.3f} is near it but more than 15% off: "
                        "an estimate from few pairs is noisy; draw 10,000 pairs or more")
        if not math.isfinite(got) or abs(got - d_k) > 0.15 * d_k:
            raise Wrong(f"for d_k={d_k} the variance of q . k (entries of unit variance, before any scaling) is about "
                        f"{d_k}: a sum of {d_k} products of variance 1; got {got:.3f}")
    return "The variance of a dot product grows with d_k, so softmax saturates unless the scores are divided by sqrt(d_k)."


@_exercise("2.5", "splitting into heads")
def _(split_heads):
    x = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
    got = _tensor("split_heads(x, 4)", split_heads(x, 4), (2, 4, 3, 2))
    want = x.view(2, 3, 4, 2).transpose(1, 2).double()
    if torch.equal(got, want):
        return "Head h at position t holds x[:, t, h*d_k:(h+1)*d_k], the layout attention needs."
    if torch.equal(got, x.view(2, 4, 3, 2).double()):
        raise Wrong("head 0 at position 1 should hold x[0, 1, 0:2], got x[0, 0, 2:4]: a view straight to "
                    "(B, heads, T, d_k) mixes positions; view as (B, T, heads, d_k), then transpose(1, 2)")
    raise Wrong(f"head h at position t should hold x[:, t, h*d_k:(h+1)*d_k]; {_first_mismatch(got, want)}")
