# Hand-written tool module (not generated from a notebook).
"""Exercises a reader solves in a chapter and checks there, with one line: `check("2.1", masked_softmax)`.

Each check runs the reader's answer against properties and references (never against the text of a solution)
and says in one sentence what is wrong, that it passes, or, while the stub still raises NotImplementedError (or the
answer is still None), that it is not solved yet. Worked solutions are in `solutions/`; `tests/test_exercises.py`
proves that each passes its check and that the mistakes a learner makes fail it with the intended sentence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

__all__ = ["Wrong", "EXERCISES", "verdict", "check"]


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


def verdict(number: str, answer) -> tuple[bool, str]:
    """(passed, sentence) for the answer to exercise `number`."""
    if number not in EXERCISES:
        raise ValueError(f"number must be one of {sorted(EXERCISES)}, got {number!r}")
    ex = EXERCISES[number]
    head = f"Exercise {number} ({ex.title})"
    unsolved = f"{head}: not solved yet (put your code in place of `raise NotImplementedError`, run the cell again)"
    if answer is None:
        return False, unsolved
    try:
        passed = ex.run(answer)
    except NotImplementedError:
        return False, unsolved
    except Wrong as wrong:
        return False, f"{head}: not yet. {wrong}"
    except Exception as err:  # noqa: BLE001 - the reader's code failed; say how
        return False, f"{head}: not yet. Your code raised {type(err).__name__}: {err}"
    return True, f"{head}: passes. {passed}"


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


# ------------------------------------------------------------------------------------------- chapter 1
@_exercise("1.1", "the sinusoidal table")
def _(sinusoidal):
    for max_len, d_model in ((50, 16), (9, 4)):
        got, want = _tensor("sinusoidal(max_len, d_model)", sinusoidal(max_len, d_model), (max_len, d_model)), \
            _table(max_len, d_model)
        swapped = torch.empty_like(want)
        swapped[:, 0::2], swapped[:, 1::2] = want[:, 1::2], want[:, 0::2]
        if torch.allclose(got, swapped, atol=1e-4):
            raise Wrong("sines and cosines are swapped: even dimensions 2i take the sine, odd ones 2i+1 the cosine")
        where = _first_mismatch(got, want)
        if where:
            raise Wrong(f"for max_len={max_len}, d_model={d_model}, {where} (row = position, column = dimension; "
                        "pair i turns at the frequency 1 / 10000^(2i / d_model))")
    return "It equals transformer_lib.embeddings.sinusoidal_table."


@_exercise("1.2", "PE(p) . PE(p + k) depends on k alone")
def _(pe_dot):
    d_model, table = 16, _table(64, 16)
    for k in range(0, 30):
        want = float(table[0] @ table[k])
        got = pe_dot(k, d_model)
        if not isinstance(got, (int, float)) and not (isinstance(got, torch.Tensor) and got.numel() == 1):
            raise Wrong(f"pe_dot(k, d_model) should return a number, got {type(got).__name__}")
        if abs(float(got) - want) > 1e-4:
            raise Wrong(f"for k={k}, d_model={d_model} the dot product of the table's rows p and p + k is {want:.4f} "
                        f"for every p, got {float(got):.4f}")
    return "Your closed form gives the table's dot products for every offset k from 0 to 29."


@_exercise("1.3", "the wavelengths")
def _(wavelengths):
    for d_model in (16, 512):
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
    table = _table(50, 32)
    for p in (0, 5, 20, 49):
        got = closest(table.float(), p)
        got = int(got) if not isinstance(got, torch.Tensor) else int(got.item())
        if got == p:
            raise Wrong(f"closest(table, {p}) returned {p} itself: look among the other positions q != p")
        if not 0 <= got < len(table):
            raise Wrong(f"closest(table, {p}) should be a position from 0 to {len(table) - 1}, got {got}")
        scores = table @ table[p]
        scores[p] = -math.inf
        want = int(scores.argmax())  # p - 1 and p + 1 tie: the dot product depends on |offset| alone
        if scores[got] < scores[want] - 1e-6:
            raise Wrong(f"closest(table, {p}) should be {want} (its dot product with PE({p}) is "
                        f"{float(scores[want]):.3f}), got {got} ({float(scores[got]):.3f})")
    return "For every position tried it finds a neighbour, p - 1 or p + 1, whose dot products with PE(p) tie."


# ------------------------------------------------------------------------------------------- chapter 2
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
    return "Masked keys get 0, the others a softmax over the allowed ones, and a row with no allowed key is all zeros."


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


# ------------------------------------------------------------------------------------------- chapter 3
@_exercise("3.1", "layer norm")
def _(layer_norm):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 16, generator=g, dtype=torch.float64) * 3 + 1
    gain, bias = torch.rand(16, generator=g, dtype=torch.float64) + 0.5, torch.randn(16, generator=g, dtype=torch.float64)
    eps = 0.5  # large, so that where it goes shows
    got = _tensor("layer_norm(x, gain, bias, eps)", layer_norm(x, gain, bias, eps), x.shape)
    want = torch.nn.functional.layer_norm(x, (16,), gain, bias, eps)
    centred = x - x.mean(-1, keepdim=True)
    if torch.allclose(got, centred / torch.sqrt(x.var(-1, keepdim=True) + eps) * gain + bias, atol=1e-6):
        raise Wrong("divide by d, not d - 1: layer norm uses the biased variance, x.var(-1, unbiased=False)")
    if torch.allclose(got, centred / (x.var(-1, unbiased=False, keepdim=True).sqrt() + eps) * gain + bias, atol=1e-6):
        raise Wrong("eps goes inside the square root: (x - mean) / sqrt(var + eps), as torch.nn.LayerNorm does")
    where = _first_mismatch(got, want, 1e-6)
    if where:
        raise Wrong(f"normalize each vector over its last dimension, then scale by gain and add bias; {where}")
    return "It equals torch.nn.functional.layer_norm."


@_exercise("3.2", "post-norm and pre-norm residuals")
def _(sublayer):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 8, generator=g, dtype=torch.float64) * 2
    fn = lambda t: torch.tanh(t) * 3 + 1  # noqa: E731 - a sublayer whose output is far from normalized
    norm = lambda t: torch.nn.functional.layer_norm(t, (8,))  # noqa: E731
    for norm_first, want, name in ((False, norm(x + fn(x)), "post-norm"), (True, x + fn(norm(x)), "pre-norm")):
        got = _tensor(f"sublayer(x, fn, norm, norm_first={norm_first})", sublayer(x, fn, norm, norm_first), x.shape)
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
    return "Post-norm is norm(x + fn(x)), pre-norm x + fn(norm(x)): only pre-norm keeps x on an unnormalized path."


@_exercise("3.3", "the feed-forward network's size")
def _(ffn_parameters):
    from transformer_lib.blocks import PositionwiseFeedForward
    for d_model, d_ff in ((512, 2048), (64, 256)):
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
    layer = EncoderLayer(512, 8, 2048)
    total = sum(p.numel() for p in layer.parameters())
    want = sum(p.numel() for p in layer.feed_forward.parameters()) / total
    got = float(ffn_share(512, 2048))
    if abs(got - want) > 1e-6:
        attention_only = sum(p.numel() for p in layer.feed_forward.parameters()) / (
            total - sum(p.numel() for n, p in layer.named_parameters() if "norm" in n))
        hint = (": count every parameter of the layer, the two layer norms' gains and biases too"
                if abs(got - attention_only) < 1e-6 else "")
        raise Wrong(f"the feed-forward network holds {want:.4f} of the layer's {total:,} parameters, got {got:.4f}{hint}")
    return f"Two thirds of an encoder layer is its feed-forward network ({want:.1%}); attention is the rest, nearly."
