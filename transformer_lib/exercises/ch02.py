# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 2's exercises (notebooks/02_attention.ipynb)."""

from __future__ import annotations

import math

import torch

from transformer_lib.exercises.core import Wrong, _exercise, _first_mismatch, _tensor, _trying, _unlike, _unpredictable


def _masked_case():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(4, 5, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    return scores, mask


def _drawn_masked_case():
    """Scores and a mask of a shape drawn afresh, one row with no allowed key and one with every key allowed."""
    draw = _unpredictable()
    rows, cols = draw.randint(3, 9), draw.randint(2, 11)
    scores = torch.randn(rows, cols, generator=torch.Generator().manual_seed(draw.randrange(2**31)),
                         dtype=torch.float64) * draw.uniform(0.5, 4.0)
    mask = torch.tensor([[draw.random() < 0.6 for _ in range(cols)] for _ in range(rows)])
    none, every = draw.sample(range(rows), 2)
    mask[none], mask[every] = False, True
    return scores, mask


@_exercise("2.1", "a masked softmax")
def _(masked_softmax):
    for scores, mask in (_masked_case(), _drawn_masked_case()):
        _trying(f"masked_softmax(scores, mask) with scores of shape {tuple(scores.shape)}")
        got = _tensor("masked_softmax(scores, mask)", masked_softmax(scores.clone(), mask.clone()), scores.shape)
        for row in range(len(scores)):
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
                            f"{[round(x, 3) for x in want.tolist()]}, got "
                            f"{[round(x, 3) for x in got[row][mask[row]].tolist()]}")
    scores, mask = _masked_case()
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
            "in float64 and in float16.")


# (q, k, v) shapes: the first as before, then another d_k (and a d_v unlike it), and batch and head dimensions
_ATTENTION_SHAPES = (((2, 6, 16), (2, 6, 16), (2, 6, 16)), ((1, 3, 9), (1, 5, 9), (1, 5, 5)),
                     ((2, 3, 4, 64), (2, 3, 7, 64), (2, 3, 7, 10)))


@_exercise("2.2", "scaled dot-product attention")
def _(attention):
    from transformer_lib.attention import scaled_dot_product_attention
    g = torch.Generator().manual_seed(1)
    draw = _unpredictable()
    b, t_q, t_k, d_k, d_v = (draw.randint(1, 3), draw.randint(1, 9), draw.randint(2, 9), draw.randint(2, 48),
                             draw.randint(1, 12))
    drawn = ((b, t_q, d_k), (b, t_k, d_k), (b, t_k, d_v))  # shapes no answer can know
    for q_shape, k_shape, v_shape in _ATTENTION_SHAPES + (drawn,):
        q, k, v = (torch.randn(shape, generator=g) for shape in (q_shape, k_shape, v_shape))
        d_k = q_shape[-1]
        case = f"for q of shape {q_shape}, k of shape {k_shape} and v of shape {v_shape} (d_k={d_k})"
        _trying(case)
        got = attention(q, k, v)
        if not isinstance(got, tuple) or len(got) != 2:
            raise Wrong("attention(q, k, v) should return (output, weights)")
        scores_shape = q_shape[:-1] + k_shape[-2:-1]
        out = _tensor(f"{case}, the output", got[0], q_shape[:-1] + v_shape[-1:])
        weights = _tensor(f"{case}, the weights", got[1], scores_shape)
        want_out, want_w = (t.double() for t in scaled_dot_product_attention(q, k, v))
        if not torch.allclose(weights.sum(-1), torch.ones(scores_shape[:-1], dtype=torch.float64), atol=1e-5):
            raise Wrong("each row of the weights must sum to 1 (one query's weights over the keys): take the softmax "
                        "over the last dimension, the keys")
        scores = q.double() @ k.double().transpose(-2, -1)
        if torch.allclose(weights, scores.softmax(-1), atol=1e-5):
            raise Wrong("the weights are softmax(q k^T) without the scale: divide the scores by sqrt(d_k) first")
        others = {math.sqrt(s[0][-1]) for s in _ATTENTION_SHAPES} | {math.sqrt(v_shape[-1]), float(d_k)}
        for scale in sorted(others - {math.sqrt(d_k)}):  # a scale written in, or taken from v or from d_k itself
            if torch.allclose(weights, (scores / scale).softmax(-1), atol=1e-5):
                raise Wrong(f"{case} the scores are divided by {scale:.4g}, not by sqrt(d_k) = {math.sqrt(d_k):.4g}: "
                            "take d_k from q.size(-1), never a number written in")
        where = _first_mismatch(weights, want_w, 1e-5) or _first_mismatch(out, want_out, 1e-5)
        if where:
            raise Wrong(f"{case} the result differs from softmax(q k^T / sqrt(d_k)) v: {where}")
    return "It equals transformer_lib.attention.scaled_dot_product_attention, output and weights."


@_exercise("2.3", "the causal mask")
def _(causal_mask):
    for size in (1, 5, _unpredictable().choice([n for n in range(2, 65) if n != 5])):  # one no table can know
        _trying(f"causal_mask({size})")
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
    draw = _unpredictable()  # and a d_k drawn afresh
    for d_k in (4, 64, _unlike(lambda: draw.randint(2, 200), (4, 64))):
        _trying(f"score_variance({d_k})")
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
    # the first as before, then other sizes and head counts, so that none written in passes
    draw = _unpredictable()
    unknown = ((draw.randint(1, 3), draw.randint(1, 9), 0), draw.randint(1, 8))  # and sizes no answer can know
    unknown = ((unknown[0][0], unknown[0][1], unknown[1] * draw.randint(1, 6)), unknown[1])
    for (b, t, d), heads in (((2, 3, 8), 4), ((1, 5, 12), 3), ((2, 4, 6), 6), unknown):
        d_k, call = d // heads, f"split_heads(x, {heads}) for x of shape {(b, t, d)}"
        _trying(call)
        x = torch.arange(b * t * d, dtype=torch.float32).reshape(b, t, d)
        got = _tensor(call, split_heads(x, heads), (b, heads, t, d_k))
        want = x.view(b, t, heads, d_k).transpose(1, 2).double()
        if torch.equal(got, want):
            continue
        if torch.equal(got, x.view(b, heads, t, d_k).double()):
            raise Wrong(f"head 0 at position 1 should hold x[0, 1, 0:{d_k}], got x[0, 0, {d_k}:{2 * d_k}]: a view "
                        "straight to (B, heads, T, d_k) mixes positions; view as (B, T, heads, d_k), then "
                        "transpose(1, 2)")
        raise Wrong(f"{call}: head h at position t should hold x[:, t, h*d_k:(h+1)*d_k]; {_first_mismatch(got, want)}")
    return "Head h at position t holds x[:, t, h*d_k:(h+1)*d_k], the layout attention needs."
