# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 10's exercises (notebooks/10_gpt.ipynb)."""

from __future__ import annotations

import math

import torch

from transformer_lib.exercises.core import Wrong, _exercise, _tensor, _trying, _unlike, _unpredictable


@_exercise("10.1", "inputs and targets")
def _(shift):
    draw = _unpredictable()  # and a batch drawn afresh, of any size
    drawn = _unlike(lambda: torch.randint(50, (draw.randint(1, 5), draw.randint(2, 12)), generator=torch.Generator(
    ).manual_seed(draw.randrange(2**31))), (True,), key=lambda t: torch.equal(t[:, 1:], t[:, :-1]))  # shifts differ
    for tokens in (torch.tensor([[2, 7, 8, 9, 3], [2, 5, 3, 1, 1]]), drawn):
        _trying(f"shift(tokens) for tokens of shape {tuple(tokens.shape)}")
        _shifted(shift, tokens)
    return "Every position of every sequence is a training example: T - 1 predictions from one forward pass."


def _shifted(shift, tokens: torch.Tensor) -> None:
    out = shift(tokens.clone())
    if not isinstance(out, tuple) or len(out) != 2:
        raise Wrong("shift(tokens) should return (inputs, targets)")
    inputs, targets = out
    if torch.equal(inputs, tokens) and torch.equal(targets, tokens):
        raise Wrong("with inputs equal to targets the model learns to copy the token it is given; position t must "
                    "predict token t + 1")
    if torch.equal(inputs, tokens[:, 1:]) and torch.equal(targets, tokens[:, :-1]):
        raise Wrong("that is backwards: the inputs are every token but the last, the targets every token but the first")
    if not (torch.equal(inputs, tokens[:, :-1]) and torch.equal(targets, tokens[:, 1:])):
        raise Wrong(f"for {tokens.tolist()} expected inputs {tokens[:, :-1].tolist()} and targets "
                    f"{tokens[:, 1:].tolist()}, got {inputs.tolist()} and {targets.tolist()}")


@_exercise("10.2", "perplexity of a corpus")
def _(corpus_perplexity):
    # several corpora, and one drawn afresh, so that no total written in passes
    draw = _unpredictable()
    drawn_tokens = [draw.randint(1, 40) for _ in range(draw.randint(1, 6))]
    drawn = ([round(n * draw.uniform(0.5, 6.0), 3) for n in drawn_tokens], drawn_tokens)
    for nll, tokens in (([12.0, 3.0, 30.0], [6, 1, 10]), ([2.5, 40.0], [1, 20]), ([7.0], [4]), drawn):
        _trying(f"corpus_perplexity({nll}, {tokens})")
        want = math.exp(sum(nll) / sum(tokens))
        got = float(corpus_perplexity(list(nll), list(tokens)))
        if abs(got - want) <= 1e-9 * want:
            continue
        if abs(got - math.exp(sum(n / t for n, t in zip(nll, tokens)) / len(nll))) <= 1e-9 * want:
            raise Wrong("averaging each sentence's mean gives a one-token sentence the weight of a long one: pool the "
                        "log-likelihoods and the tokens over the corpus first")
        if abs(got - 2 ** (sum(nll) / sum(tokens))) <= 1e-9 * want:
            raise Wrong("the losses are natural logarithms (cross_entropy), so the perplexity is exp of the mean, not "
                        "2 ** it")
        raise Wrong(f"for sentence losses {nll} (summed over tokens) and lengths {tokens} the perplexity is "
                    f"{want:.4f}, got {got:.4f}")
    uniform = corpus_perplexity([5 * math.log(50)], [5])
    return (f"A model that knows nothing, uniform over 50 tokens, has perplexity {uniform:.1f}: perplexity is the "
            "number of equally likely tokens the model hesitates between.")


# (probabilities, the p tried): the first as the exercise states it; then a batch of two rows that sort otherwise,
# with p between the sums, so that neither one row nor one order written in passes
_NUCLEI = (([[0.5, 0.05, 0.25, 0.15, 0.05]], (0.5, 0.7, 0.75, 0.9, 1.0)),
           ([[0.12, 0.4, 0.03, 0.3, 0.08, 0.07], [0.2, 0.06, 0.1, 0.45, 0.15, 0.04]], (0.35, 0.6, 0.85, 0.95)))


@_exercise("10.3", "the nucleus")
def _(top_p_filter):
    from transformer_lib.gpt import filter_logits
    draw = _unpredictable()  # and distributions and thresholds drawn afresh
    drawn = torch.rand(draw.randint(1, 4), draw.randint(2, 10), generator=torch.Generator().manual_seed(
        draw.randrange(2**31))) + 0.01
    drawn = [[round(v, 4) for v in row] for row in (drawn / drawn.sum(-1, keepdim=True)).tolist()]
    sums = torch.tensor(drawn, dtype=torch.float64)
    sums = (sums / sums.sum(-1, keepdim=True)).sort(-1, descending=True).values.cumsum(-1)
    ps = [p for p in (round(draw.uniform(0.05, 0.99), 3) for _ in range(20))  # none on a boundary, where rounding
          if (sums - p).abs().min() > 1e-3][:3]                            # would decide
    for rows, ps in (*_NUCLEI, (drawn, tuple(ps))):
        probs = torch.tensor(rows)
        logits = probs.log()
        for p in ps:
            _trying(f"top_p_filter(logits, {p}) for logits of shape {tuple(logits.shape)}")
            want = filter_logits(logits.clone(), top_p=p)
            got = _tensor("top_p_filter(logits, p)", top_p_filter(logits.clone(), p), tuple(logits.shape))
            for row in range(len(rows)):
                kept, want_kept = got[row].isfinite(), want[row].isfinite()
                if torch.equal(kept, want_kept):
                    if not torch.allclose(got[row][kept].double(), want[row][kept].double()):
                        raise Wrong("the tokens kept should keep their logits unchanged (they are renormalized by the "
                                    "softmax)")
                    continue
                names = lambda mask: [rows[row][i] for i in mask.nonzero().flatten().tolist()]  # noqa: E731
                hint = ""
                if int(kept.sum()) == int(want_kept.sum()) - 1:
                    hint = ": keep the token whose probability takes the sum to p (the fewest tokens that reach p)"
                where = f" (row {row} of {len(rows)})" if len(rows) > 1 else ""
                raise Wrong(f"with probabilities {rows[row]}{where} and p={p} keep the tokens of probability "
                            f"{names(want_kept)}, got {names(kept)}{hint}")
    return "It keeps the same tokens as filter_logits(logits, top_p=p)."


@_exercise("10.4", "temperature")
def _(sample_probs):
    draw = _unpredictable()  # and logits drawn afresh, at a temperature near 0 and one far above 1
    drawn = torch.randn(draw.randint(1, 4), draw.randint(2, 9), generator=torch.Generator().manual_seed(
        draw.randrange(2**31)), dtype=torch.float64) * 3  # float64: at temperature 0.001 float32 would round apart
    shown = {}
    for logits, t in [(torch.tensor([[2.0, 1.0, 0.0, -1.0]]), t) for t in (1.0, 0.5, 2.0)] + [
            (drawn, draw.uniform(0.3, 3.0)), (drawn, 1e-3), (drawn, 1e3)]:
        _trying(f"sample_probs(logits, {t:g}) for logits of shape {tuple(logits.shape)}")
        want = (logits.double() / t).softmax(-1)
        got = _tensor("sample_probs(logits, temperature)", sample_probs(logits.clone(), t), tuple(logits.shape))
        if torch.allclose(got, want, atol=1e-6):
            shown[t] = got.max(-1).values  # each row's largest probability, for the message
            continue
        if torch.allclose(got, (logits.double() * t).softmax(-1), atol=1e-6):
            raise Wrong(f"at temperature {t}: divide the logits by the temperature (a low temperature sharpens the "
                        "distribution, a high one flattens it), not multiply")
        raise Wrong(f"at temperature {t:g} expected {[round(v, 4) for v in want[0].tolist()]}, got "
                    f"{[round(v, 4) for v in got[0].tolist()]}")
    return (f"The likeliest token took {float(shown[1e-3].min()):.3f} of the probability at temperature 0.001, "
            f"{float(shown[1e3].max()):.3f} at 1000 (uniform: {1 / drawn.shape[-1]:.3f}): a low temperature sharpens, "
            "a high one flattens.")


@_exercise("10.5", "the size of the cache")
def _(cache_bytes):
    draw = _unpredictable()  # and a model drawn afresh
    for n_layers, d_model, tokens, dtype_bytes in ((3, 256, 100, 4), (32, 4096, 4096, 2),
                                                   (draw.randint(1, 80), draw.randint(1, 8192), draw.randint(1, 10**5),
                                                    draw.choice([1, 2, 4, 8]))):
        want = 2 * n_layers * d_model * tokens * dtype_bytes
        got = int(cache_bytes(n_layers, d_model, tokens, dtype_bytes))
        if got == want:
            continue
        if got * 2 == want:
            raise Wrong("a layer caches keys and values: two vectors of d_model per token")
        raise Wrong(f"for {n_layers} layers, d_model {d_model}, {tokens:,} tokens at {dtype_bytes} bytes the cache holds "
                    f"{want:,} bytes, got {got:,}")
    big = cache_bytes(32, 4096, 4096, 2) / 2**30
    return (f"A 32-layer, 4096-wide model caches {big:.0f} GiB for one sequence of 4,096 tokens in 16-bit: chapter 11's "
            "grouped-query attention shrinks exactly this.")
