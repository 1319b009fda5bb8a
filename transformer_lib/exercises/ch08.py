# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 8's exercises (notebooks/08_translation.ipynb)."""

from __future__ import annotations

import math

import torch

from transformer_lib.exercises.core import Wrong, _exercise, _trying, _unpredictable

_HYPS = ["a man rides his bike down the road .", "two dogs are playing in the the snow .",
         "a little girl in red jumps over a rope .", "the the the the"]
_REFS = ["a man rides his bike down a road .", "two dogs are playing in the snow .", "a little girl in a red dress jumps .",
         "the cat sat on the mat"]


def _drawn_pairs(count: int) -> tuple[list[str], list[str]]:
    """`count` hypotheses and references drawn afresh from a few words, repeats and all, so that no answer written
    for the example sentences passes; every sentence has at least four words."""
    draw = _unpredictable()
    words = "a the man dog red girl runs on in snow .".split()
    sentences = [" ".join(draw.choices(words, k=draw.randint(4, 12))) for _ in range(2 * count)]
    return sentences[:count], sentences[count:]


def _ngrams(tokens: list[str], n: int) -> dict:
    grams = {}
    for i in range(len(tokens) - n + 1):
        grams[tuple(tokens[i:i + n])] = grams.get(tuple(tokens[i:i + n]), 0) + 1
    return grams


@_exercise("8.1", "clipped n-gram matches")
def _(modified_precision):
    hyps, refs = _drawn_pairs(3)
    for hyp, ref in zip(_HYPS + hyps, _REFS + refs):
        _trying(f"modified_precision({hyp.split()}, {ref.split()}, n)")
        for n in (1, 2, 3, 4):
            h, r = _ngrams(hyp.split(), n), _ngrams(ref.split(), n)
            want = (sum(min(c, r.get(g, 0)) for g, c in h.items()), sum(h.values()))
            got = tuple(int(v) for v in modified_precision(hyp.split(), ref.split(), n))
            if got == want:
                continue
            unclipped = sum(c for g, c in h.items() if g in r)
            hint = (": clip each n-gram's count at its count in the reference, or 'the the the the' would be perfect"
                    if got[0] == unclipped != want[0] else "")
            raise Wrong(f"for {n}-grams of {hyp!r} against {ref!r}: {want[0]} of {want[1]} match, got {got[0]} of "
                        f"{got[1]}{hint}")
    return "Clipped counts: a hypothesis cannot score by repeating a word the reference has once."


@_exercise("8.2", "the brevity penalty")
def _(brevity_penalty):
    draw = _unpredictable()  # and lengths drawn afresh
    for hyp_len, ref_len in ((10, 10), (8, 10), (12, 10), (1, 4), (draw.randint(1, 300), draw.randint(1, 300))):
        want = 1.0 if hyp_len >= ref_len else math.exp(1 - ref_len / hyp_len)
        got = float(brevity_penalty(hyp_len, ref_len))
        if abs(got - want) <= 1e-9:
            continue
        if hyp_len > ref_len:
            raise Wrong(f"a hypothesis longer than the reference ({hyp_len} tokens against {ref_len}) is not penalized "
                        f"by this factor (precision already pays for extra words): expected 1, got {got:.4f}")
        raise Wrong(f"for {hyp_len} hypothesis tokens against {ref_len} reference tokens the penalty is {want:.4f}, "
                    f"got {got:.4f}")
    return "Only a corpus shorter than its references pays: exp(1 - r / c)."


@_exercise("8.3", "corpus BLEU")
def _(corpus_bleu):
    import sacrebleu
    drawn = _drawn_pairs(_unpredictable().randint(2, 6))
    # a corpus whose every n-gram order matches somewhere, so that its BLEU is not 0 for a reason of its own
    drawn = ([h + " a man runs in the snow" for h in drawn[0]], [r + " a man runs in the snow" for r in drawn[1]])
    for hyps, refs in ((_HYPS, _REFS), (_HYPS[:3], _REFS[:3]), (_REFS[:3], _REFS[:3]), drawn):
        _trying(f"corpus_bleu for {len(hyps)} sentences")
        want = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", smooth_method="none").score
        got = float(corpus_bleu([h.split() for h in hyps], [r.split() for r in refs]))
        if abs(got - want) <= 1e-6:
            continue
        each = [sacrebleu.sentence_bleu(h, [r], tokenize="none", smooth_method="none").score for h, r in zip(hyps, refs)]
        if abs(got - sum(each) / len(each)) <= 1e-6:
            raise Wrong("corpus BLEU is not the mean of sentence BLEUs: add up the clipped matches, the n-gram counts and "
                        "the lengths over all sentences first, then take the precisions and the penalty once")
        raise Wrong(f"for {len(hyps)} sentences ({hyps[0]!r} against {refs[0]!r} first) sacreBLEU (tokenize='none', "
                    f"no smoothing) gives {want:.4f}, got {got:.4f} (on the 0 to 100 scale)")
    return "It equals sacrebleu.corpus_bleu on pre-split text without smoothing."


@_exercise("8.4", "average the checkpoints")
def _(average_state_dicts):
    torch.manual_seed(0)
    draw = _unpredictable()
    rows, cols, dtype = draw.randint(1, 6), draw.randint(1, 6), draw.choice([torch.float32, torch.float64])
    cases = [[{"w": torch.randn(3, 4), "b": torch.randn(4), "steps": torch.tensor(100 * (i + 1))} for i in range(3)],
             # two checkpoints, other keys and a float64 weight: neither a count nor a key written in passes
             [{"layer.weight": torch.randn(2, 5, dtype=torch.float64), "epoch": torch.tensor(7 + i)} for i in range(2)],
             # and a count, shapes, a dtype and a counter drawn afresh
             [{"proj.weight": torch.randn(rows, cols, dtype=dtype), "proj.bias": torch.randn(rows, dtype=dtype),
               "step": torch.tensor(draw.randint(1, 10**6) + i)} for i in range(draw.randint(2, 7))]]
    for dicts in cases:
        floats = [k for k, v in dicts[-1].items() if v.is_floating_point()]
        counter = next(k for k, v in dicts[-1].items() if not v.is_floating_point())
        case = f"for {len(dicts)} checkpoints with keys {list(dicts[-1])}"
        _trying(case)
        got = average_state_dicts([{k: v.clone() for k, v in d.items()} for d in dicts])
        if not isinstance(got, dict) or set(got) != set(dicts[-1]):
            raise Wrong("average_state_dicts should return a dict with the same keys as each state dict")
        for key in floats:
            want = sum(d[key] for d in dicts) / len(dicts)
            if torch.allclose(got[key].to(want.dtype), want * len(dicts)):
                raise Wrong(f"{key!r}: that is the sum; divide by the number of checkpoints")
            if not torch.allclose(got[key].to(want.dtype), want, atol=1e-6):
                raise Wrong(f"{case}, {key!r} should be the element-wise mean of the {len(dicts)} checkpoints' "
                            f"{key!r}")
        last = dicts[-1][counter]
        if got[counter].dtype != last.dtype or int(got[counter]) != int(last):
            raise Wrong(f"an integer entry (a counter, not a weight) is kept from the last checkpoint, with its dtype: "
                        f"expected {int(last)}, got {got[counter]!r}")
    return "Weights averaged, counters kept: the model a run's last epochs agree on."
