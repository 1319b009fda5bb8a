# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 5's exercises (notebooks/05_training.ipynb)."""

from __future__ import annotations

import torch

from transformer_lib.exercises.core import Wrong, _exercise, _first_mismatch, _tensor, _trying, _unlike, _unpredictable


@_exercise("5.1", "the learning-rate schedule")
def _(noam_rate):
    from transformer_lib.training import rate
    draw = _unpredictable()  # and a model size, a warmup and a step drawn afresh
    for d_model, warmup in ((512, 4000), (256, 400), (draw.randint(8, 2048), draw.randint(2, 8000))):
        for step in (1, warmup // 2, warmup, 4 * warmup, draw.randint(1, 10 * warmup)):
            want, got = rate(step, d_model, 1.0, warmup), noam_rate(step, d_model, warmup)
            if abs(float(got) - want) <= 1e-9 * max(want, 1e-12):
                continue
            if abs(float(got) - want * d_model**0.5) <= 1e-9 * want * d_model**0.5:
                raise Wrong("the schedule is scaled by d_model^-0.5: lr = d_model^-0.5 * min(step^-0.5, "
                            "step * warmup^-1.5)")
            slip = _rate_slip(noam_rate)
            raise Wrong(f"at step {step} (d_model={d_model}, warmup={warmup}) the rate is {want:.3e}, got {float(got):.3e}"
                        + (f": {slip}" if slip else ""))
    return "It rises linearly for warmup steps, peaks at step == warmup and decays as 1/sqrt(step)."


def _rate_slip(noam_rate) -> str | None:
    """The sentence naming the slip whose schedule `noam_rate` follows at every step the check tries, if one does."""
    slips = {"this looks like max where the formula has min: the smaller of the two terms is the rate, the warmup's "
             "line until step == warmup": lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5),
             "this looks like warmup^-0.5 in the rising term: it is step * warmup^-1.5, so that both terms meet at "
             "step == warmup": lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5),
             "this looks like the decay alone: during warmup the rate rises as step * warmup^-1.5, the smaller of the "
             "two terms": lambda s, d, w: d**-0.5 * s**-0.5,
             "this looks like step + 1: the schedule's steps count from 1 (the optimizer's first step is step 1)":
                 lambda s, d, w: d**-0.5 * min((s + 1)**-0.5, (s + 1) * w**-1.5)}
    cases = [(s, d, w) for d, w in ((512, 4000), (256, 400)) for s in (1, w // 2, w, 4 * w)]
    try:
        got = [float(noam_rate(s, d, w)) for s, d, w in cases]
    except Exception:  # an answer that fails on a later step: the check names the step it failed on instead
        return None
    for why, slip in slips.items():
        if all(abs(g - slip(*case)) <= 1e-9 * slip(*case) for g, case in zip(got, cases)):
            return why
    return None


@_exercise("5.2", "the label-smoothed target distribution")
def _(smoothed):
    from transformer_lib.training import LabelSmoothing
    vocab, pad, eps = 7, 0, 0.3
    target = torch.tensor([3, 0, 6, 1])
    out = smoothed(target, vocab, pad, eps)
    got = _tensor("smoothed(target, vocab_size, padding_idx, smoothing)", out, (4, vocab))
    if out.dtype != torch.float64:  # float32 holds 1 - 0.3 only to about 1e-8, far from the 1e-9 checked below
        raise Wrong(f"return float64, as the exercise asks (got {out.dtype}): the checks compare to 1e-9")
    want = LabelSmoothing(vocab, pad, eps).target_distribution(target, torch.float64)
    if got[1].abs().sum() > 1e-9:
        raise Wrong("a padding target (row 1) contributes nothing to the loss: its row must be all zeros")
    if got[:, pad][target != pad].abs().max() > 1e-9:
        raise Wrong("the padding token is never a right answer: column padding_idx must be 0 in every row")
    if abs(got[0, 3].item() - (1 - eps)) > 1e-9:
        raise Wrong(f"the target token keeps 1 - smoothing = {1 - eps:.2f}, got {got[0, 3].item():.4f} at row 0, column 3")
    if abs(got[0, 2].item() - eps / (vocab - 1)) < 1e-9:
        raise Wrong(f"smoothing is spread over vocab_size - 2 tokens (not the target, not padding): {eps}/{vocab - 2} each, "
                    f"not {eps}/{vocab - 1}")
    where = _first_mismatch(got, want, 1e-9)
    if where:
        raise Wrong(f"the smoothed distribution differs from chapter 5's: {where}")
    target, pad = torch.tensor([2, 4, 0, 5]), 4  # padding elsewhere than id 0
    _trying(f"smoothed(target, {vocab}, {pad}, {eps})")
    got = _tensor("smoothed(target, vocab_size, padding_idx, smoothing)", smoothed(target, vocab, pad, eps), (4, vocab))
    where = _first_mismatch(got, LabelSmoothing(vocab, pad, eps).target_distribution(target, torch.float64), 1e-9)
    if where:
        raise Wrong(f"with padding_idx {pad} (target {target.tolist()}) the distribution differs from chapter 5's: "
                    f"{where}; is padding taken to be id 0?")
    draw = _unpredictable()  # another size and smoothing, then ones drawn afresh: none written in passes
    drawn_vocab = draw.randint(3, 40)
    drawn = (torch.tensor([draw.randrange(drawn_vocab) for _ in range(draw.randint(1, 9))]), drawn_vocab,
             draw.randrange(drawn_vocab), round(draw.uniform(0.01, 0.9), 3))
    for target, vocab, pad, eps in ((torch.tensor([2, 9, 0, 5, 2]), 10, 2, 0.1), drawn):
        _trying(f"smoothed(target, {vocab}, {pad}, {eps})")
        got = _tensor(f"smoothed(target, {vocab}, {pad}, {eps})", smoothed(target, vocab, pad, eps), (len(target), vocab))
        where = _first_mismatch(got, LabelSmoothing(vocab, pad, eps).target_distribution(target, torch.float64), 1e-9)
        if where:
            raise Wrong(f"with vocab_size {vocab}, padding_idx {pad} and smoothing {eps} (target {target.tolist()}) "
                        f"the distribution differs from chapter 5's: {where}; take every size from the arguments")
    return "Each real row sums to 1: 1 - smoothing on the target, the rest shared by the other real tokens."


@_exercise("5.3", "softmax before cross-entropy")
def _(floor):
    for vocab in (2, 11, 1000, _unpredictable().randint(3, 5000)):
        logits = torch.full((1, vocab), -1e4, dtype=torch.float64)
        logits[0, 0] = 1e4  # as confident as a model can be
        want = torch.nn.functional.cross_entropy(logits.softmax(-1), torch.tensor([0])).item()
        got = float(floor(vocab))
        if abs(got - want) > 1e-6:
            hint = ": cross_entropy applies log_softmax to its input, so the probabilities pass through a softmax again" \
                if abs(got) < 1e-6 else ""
            raise Wrong(f"for vocab_size={vocab} the lowest loss is {want:.4f}, got {got:.4f}{hint}")
    return "With a softmax before cross_entropy, even a perfect model's loss stays above log(e + V - 1) - 1 > 0."


@_exercise("5.4", "exact gradient accumulation")
def _(micro_batch_weights):
    draw = _unpredictable()  # several, and one drawn afresh (not all equal), so that no list written in passes
    drawn = _unlike(lambda: [draw.randint(1, 500) for _ in range(draw.randint(2, 8))], (1,), key=lambda c: len(set(c)))
    for counts in ([120, 40, 40], [7, 3], [5, 30, 10, 5], drawn):
        _trying(f"micro_batch_weights({counts})")
        got = [float(w) for w in micro_batch_weights(list(counts))]
        if len(got) != len(counts):
            raise Wrong(f"micro_batch_weights({counts}) should give one weight per micro-batch, got {len(got)}")
        if all(abs(w - 1 / len(counts)) < 1e-9 for w in got):
            raise Wrong("equal weights average the micro-batches' mean losses, so a token of a short micro-batch "
                        "counts more than one of a long one: weight each by its share of the step's tokens")
        want = [c / sum(counts) for c in counts]
        if any(abs(w - v) > 1e-9 for w, v in zip(got, want)):
            raise Wrong(f"micro_batch_weights({counts}) should be {[round(v, 4) for v in want]}, got "
                        f"{[round(w, 4) for w in got]}")
    return "Weighted by their share of tokens, k micro-batches take the step one batch holding all of them would take."
