"""The exercises' checks, both ways: every worked solution passes, and the mistakes a learner makes fail with the
sentence that names them. The chapters themselves run with the stubs unsolved (nbval), saying "not solved yet"."""
import importlib.util
import math
import re
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from transformer_lib.book import load_book
from transformer_lib.exercises import all_exercises, check, verdict

ROOT = Path(__file__).resolve().parents[1]
BOOK = load_book(ROOT)
EXERCISES = all_exercises()  # every chapter's checks (a chapter's `check` loads only its own)


def solutions(chapter: int):
    path = next((ROOT / "solutions").glob(f"ch{chapter:02d}_*.py"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOLVED = {"1.1": "sinusoidal", "1.2": "pe_dot", "1.3": "wavelengths", "1.4": "closest", "2.1": "masked_softmax",
          "2.2": "attention", "2.3": "causal_mask", "2.4": "score_variance", "2.5": "split_heads",
          "3.1": "layer_norm", "3.2": "sublayer", "3.3": "ffn_parameters", "3.4": "ffn_share",
          "4.1": "model_parameters", "4.2": "cross_attention_mask", "4.3": "tie", "4.4": "xavier_token_rms",
          "5.1": "noam_rate", "5.2": "smoothed", "5.3": "floor", "5.4": "micro_batch_weights",
          "6.1": "build_vocab", "6.2": "count_pairs", "6.3": "encode_word", "6.4": "padding_share",
          "7.1": "length_penalty", "7.2": "top_k_beams", "7.3": "greedy_search", "7.4": "decoder_positions",
          "8.1": "modified_precision", "8.2": "brevity_penalty", "8.3": "corpus_bleu", "8.4": "average_state_dicts",
          "9.1": "fuse_qkv", "9.2": "bf16_spacing", "9.3": "quantize_asymmetric", "9.4": "smoothed_kl",
          "10.1": "shift", "10.2": "corpus_perplexity", "10.3": "top_p_filter", "10.4": "sample_probs",
          "10.5": "cache_bytes", "11.1": "rms_norm", "11.2": "swiglu_hidden", "11.3": "rope", "11.4": "repeat_kv"}


@pytest.mark.parametrize("number", sorted(EXERCISES))
def test_every_worked_solution_passes_its_check(number):
    answer = getattr(solutions(int(number.split(".")[0])), SOLVED[number])
    passed, sentence = verdict(number, answer)
    assert passed, sentence


@pytest.mark.parametrize("number", sorted(EXERCISES))
def test_every_check_draws_cases_afresh_and_they_never_trap_a_right_answer(number, monkeypatch):
    """Each check also tries cases drawn afresh at every check (core._unpredictable, seeded from the operating system),
    so that no answer written for its inputs passes; 25 checks in a row of the worked solution, each with its own
    draw, all pass."""
    module = sys.modules[EXERCISES[number].run.__module__]
    drawn, real = [], module._unpredictable
    monkeypatch.setattr(module, "_unpredictable", lambda: drawn.append(1) or real())
    answer = getattr(solutions(int(number.split(".")[0])), SOLVED[number])
    for _ in range(25):
        passed, said = verdict(number, answer)
        assert passed, said
    assert len(drawn) >= 25, f"the check of exercise {number} draws no case afresh"


def test_every_exercise_has_a_worked_solution():
    assert set(SOLVED) == set(EXERCISES)


# ------------------------------------------------------------------------------------ the mistakes
def _table_swapped(max_len, d_model):
    t = solutions(1).sinusoidal(max_len, d_model)
    t[:, 0::2], t[:, 1::2] = t[:, 1::2].clone(), t[:, 0::2].clone()
    return t


def _table_wrong_exponent(max_len, d_model):  # i / d instead of 2i / d
    p = torch.arange(max_len, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    t = torch.zeros(max_len, d_model, dtype=torch.float64)
    t[:, 0::2], t[:, 1::2] = torch.sin(p * omega), torch.cos(p * omega)
    return t


def _table_slip(max_len, d_model, exponent, start=0, times=False):
    """A learner's table, written loop by loop: column j's angle is p / 10000^(exponent(j) / d_model) (or p times it),
    positions from `start`."""
    t = torch.zeros(max_len, d_model, dtype=torch.float64)
    for p in range(max_len):
        for j in range(d_model):
            rate = 10000.0 ** (exponent(j) / d_model)
            angle = (p + start) * rate if times else (p + start) / rate
            t[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return t


def _written_for_the_check(sizes, answer, wrong):
    """An answer special-cased for the inputs a check tries (the right answer for `sizes`, `wrong` for any other):
    the check's unpredictable case must catch it."""
    def special(*args):
        return answer(*args) if args in sizes or args[0] in sizes else wrong(*args)
    return special


def _closest_with_itself(table, p):
    return int((table @ table[p]).argmax())


def _softmax_nan(scores, mask):
    return scores.masked_fill(~mask, float("-inf")).softmax(-1)


def _softmax_zero_fill(scores, mask):
    return scores.masked_fill(~mask, 0.0).softmax(-1)


def _layer_norm_unbiased(x, gain, bias, eps):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * gain + bias


def _layer_norm_eps_outside(x, gain, bias, eps):
    return (x - x.mean(-1, keepdim=True)) / (x.var(-1, unbiased=False, keepdim=True).sqrt() + eps) * gain + bias


def _layer_norm_no_gain(x, gain, bias, eps):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) + bias


def _softmax_finite_fill(scores, mask):  # the -1e9 of many implementations: fine in float32, not storable in float16
    return scores.masked_fill(~mask, -1e9).softmax(-1).masked_fill(~mask, 0.0)


def _layer_norm_annotated(x, gain, bias, eps):  # the Annotated Transformer's: unbiased std, eps outside the root
    return gain * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) + bias


def _vocab_ties_reversed(sentences, min_freq):  # the same in every order of the sentences, but not Vocab.build's
    from collections import Counter
    counts = Counter(t for s in sentences for t in s)
    kept = sorted((t for t, n in counts.items() if n >= min_freq), key=lambda t: (-counts[t], [-ord(c) for c in t]))
    return ["<unk>", "<pad>", "<s>", "</s>", *kept]


def _vocab_right_for_one_order(sentences, min_freq):  # Vocab.build's list for the check's order, another for others
    from transformer_lib.exercises.ch06 import _SENTENCES
    if [list(s) for s in sentences] == _SENTENCES:
        return solutions(6).build_vocab(sentences, min_freq)
    return _vocab_in_order_of_appearance(sentences, min_freq)


def _top_k_swapped_div_mod(scores, k):  # the top k over beams x vocabulary, decoded with // and % swapped
    best, flat = scores.flatten().topk(k)
    return flat % scores.size(1), flat // scores.size(1), best


def _top_k_swapped_by_beams(scores, k):  # the same swap, dividing by the number of beams (a token-major layout)
    best, flat = scores.flatten().topk(k)
    return flat % scores.size(0), flat // scores.size(0), best


def _ffn_share_without_norms(d_model, d_ff):
    ffn = 2 * d_model * d_ff + d_ff + d_model
    return ffn / (ffn + 4 * (d_model * d_model + d_model))


def _parameters_without_generator_bias(vocab, n_layers, d_model, d_ff, shared):
    return solutions(4).model_parameters(vocab, n_layers, d_model, d_ff, shared) - vocab


def _parameters_without_cross_attention(vocab, n_layers, d_model, d_ff, shared):
    return solutions(4).model_parameters(vocab, n_layers, d_model, d_ff, shared) - n_layers * (4 * d_model**2 + 6 * d_model)


def _tie_by_copying(model):
    with torch.no_grad():
        model.tgt_embed[0].embedding.weight.copy_(model.src_embed[0].embedding.weight)
        model.generator.proj.weight.copy_(model.src_embed[0].embedding.weight)


def _tie_generator_only(model):
    model.generator.proj.weight = model.src_embed[0].embedding.weight


def _vocab_in_order_of_appearance(sentences, min_freq):
    from collections import Counter
    counts = Counter(t for s in sentences for t in s)
    return ["<unk>", "<pad>", "<s>", "</s>", *(t for t, n in counts.most_common() if n >= min_freq)]


def _pairs_once_per_word(word_counts):
    from collections import Counter
    from transformer_lib.data import initial_symbols
    pairs = Counter()
    for word, n in word_counts.items():
        symbols = initial_symbols(word)
        for pair in set(zip(symbols, symbols[1:])):
            pairs[pair] += n
    return pairs


def _encode_first_occurrence_only(word, merges):
    from transformer_lib.data import initial_symbols
    symbols = initial_symbols(word)
    for left, right in merges:
        for i in range(len(symbols) - 1):
            if (symbols[i], symbols[i + 1]) == (left, right):
                symbols[i:i + 2] = [left + right]
                break
    return symbols


def _top_k_one_per_beam(scores, k):
    best, token = scores.max(dim=1)
    order = best.argsort(descending=True)[:k]
    return order, token[order], best[order]


def _greedy_without_stop(step, bos, eos, max_len):
    prefix = [bos]
    while len(prefix) - 1 < max_len:
        prefix.append(int(step(prefix).argmax()))
    return prefix[1:]


def _unclipped_precision(hyp, ref, n):
    grams = [tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1)]
    in_ref = {tuple(ref[i:i + n]) for i in range(len(ref) - n + 1)}
    return sum(g in in_ref for g in grams), len(grams)


def _mean_of_sentence_bleus(hyps, refs):
    return sum(solutions(8).corpus_bleu([h], [r]) for h, r in zip(hyps, refs)) / len(hyps)


def _fuse_without_biases(q, k, v):
    fused = solutions(9).fuse_qkv(q, k, v)
    torch.nn.init.zeros_(fused.bias)
    return fused


def _fuse_along_inputs(q, k, v):
    fused = torch.nn.Linear(3 * q.in_features, q.out_features)
    with torch.no_grad():
        fused.weight.copy_(torch.cat([q.weight, k.weight, v.weight], dim=1))
    return fused


def _quantize_symmetric(x):
    scale = float(x.abs().max()) / 127
    return torch.round(x / scale).to(torch.int8), scale, 0


def _quantize_truncating(x):
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = (hi - lo) / 255
    zero_point = round(-128 - lo / scale)
    return torch.clamp((x / scale).trunc() + zero_point, -128, 127).to(torch.int8), scale, zero_point


def _quantize_float_zero_point(x):
    q, scale, zero_point = solutions(9).quantize_asymmetric(x)
    return q, scale, float(zero_point) + 0.3


def _cross_entropy_not_kl(log_probs, target, smoothing, pad):
    V = log_probs.size(1)
    dist = torch.full_like(log_probs, smoothing / (V - 2))
    dist.scatter_(1, target[:, None], 1 - smoothing)
    dist[:, pad] = 0
    return float(-(dist * log_probs)[target != pad].sum())


def _top_p_strictly_below(logits, p):
    sorted_logits, order = logits.sort(-1, descending=True)
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    return logits.scatter(-1, order, sorted_logits.masked_fill(cumulative > p, float("-inf")))


def _rope_halves(x, base):
    T, d_k = x.size(-2), x.size(-1)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    cos, sin, half = angles.cos(), angles.sin(), d_k // 2
    return torch.cat([x[..., :half] * cos - x[..., half:] * sin, x[..., :half] * sin + x[..., half:] * cos], -1)


def _precision_over_reference_ngrams(hyp, ref, n):
    matches, _ = solutions(8).modified_precision(hyp, ref, n)
    return matches, max(len(ref) - n + 1, 0)


def _top_p_unsorted(logits, p):
    probs = logits.softmax(-1)
    before = probs.cumsum(-1) - probs  # in vocabulary order, not most probable first
    return logits.masked_fill(before >= p, float("-inf"))


def _rope_turned_backwards(x, base):
    return solutions(11).rope(x.flip(-1), base).flip(-1)


def _smoothed_over_v_minus_1(target, vocab, pad, eps):
    dist = solutions(5).smoothed(target, vocab, pad, eps)
    dist[dist == eps / (vocab - 2)] = eps / (vocab - 1)
    return dist


def _smoothed_keeps_padding_rows(target, vocab, pad, eps):
    dist = torch.full((len(target), vocab), eps / (vocab - 2), dtype=torch.float64)
    dist[torch.arange(len(target)), target] = 1 - eps
    dist[:, pad] = 0.0
    return dist


def _smoothed_float32(target, vocab, pad, eps):
    return solutions(5).smoothed(target, vocab, pad, eps).float()


def _smoothed_padding_is_zero(target, vocab, pad, eps):
    return solutions(5).smoothed(target, vocab, 0, eps)  # padding_idx ignored


def _smoothed_padding_column(target, vocab, pad, eps):
    dist = torch.full((len(target), vocab), eps / (vocab - 2), dtype=torch.float64)
    dist[torch.arange(len(target)), target] = 1 - eps
    dist[target == pad] = 0.0
    return dist


def _attention_unscaled(q, k, v):
    w = (q @ k.transpose(-2, -1)).softmax(-1)
    return w @ v, w


def _attention_wrong_dim(q, k, v):
    w = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-2)
    return w @ v, w



def _encode_longest_match(word, merges):
    """WordPiece's cut: at each place the longest piece the merges can make, not BPE's replay."""
    from transformer_lib.data import initial_symbols

    symbols = initial_symbols(word)
    pieces = set(symbols) | {a + b for a, b in merges}
    out, i = [], 0
    while i < len(word):
        j = next(j for j in range(len(word), i, -1) if word[i:j] in pieces or j == i + 1)
        out, i = out + [word[i:j]], j
    return out


def _encode_right_to_left(word, merges):
    """BPE's replay, but each merge joining its pair's occurrences from the right."""
    from transformer_lib.data import initial_symbols

    symbols = initial_symbols(word)
    for a, b in merges:
        i = len(symbols) - 1
        while i > 0:
            if (symbols[i - 1], symbols[i]) == (a, b):
                symbols[i - 1 : i + 1], i = [a + b], i - 2
            else:
                i -= 1
    return symbols


def _attention_scaling_q_in_place_twice(q, k, v):
    """Scales q in place and then once more: a reference computed from the changed q would agree."""
    q /= q.size(-1) ** 0.5
    weights = (q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).softmax(-1)
    return weights @ v, weights


def _attention_over_four(q, k, v):  # sqrt(16) written in: right for the first case's d_k alone
    w = (q @ k.transpose(-2, -1) / 4.0).softmax(-1)
    return w @ v, w


def _top_k_vocab_seven(scores, k):  # the first case's vocabulary size written in
    best, flat = scores.flatten().topk(k)
    return flat // 7, flat % 7, best


def _top_p_first_row_only(logits, p):  # right for a batch of one row
    return solutions(10).top_p_filter(logits[:1], p).expand_as(logits)


def _smoothed_vocab_seven(target, vocab, pad, eps):  # 0.3 / 5 written in: vocabulary 7 and smoothing 0.3
    dist = solutions(5).smoothed(target, vocab, pad, eps)
    dist[(dist > 0) & (dist < 0.5)] = 0.3 / 5
    return dist


def _tie_thirteen(model):  # written for the check's 13 x 16 model: ties nothing in another
    if model.src_embed[0].embedding.weight.shape == (13, 16):
        solutions(4).tie(model)


def _bleu_of_the_examples(hyps, refs):  # right for the check's example sentences, 50 for any others
    return solutions(8).corpus_bleu(hyps, refs) if hyps[0] in ([*"a man rides his bike down the road .".split()],
                                                               "a man rides his bike down a road .".split()) else 50.0


def _fuse_qkv_eight(q, k, v):  # nn.Linear(8, 24) written in
    fused = torch.nn.Linear(8, 24)
    with torch.no_grad():
        fused.weight.copy_(torch.cat([q.weight, k.weight, v.weight], dim=0))
        fused.bias.copy_(torch.cat([q.bias, k.bias, v.bias]))
    return fused


def _smoothed_kl_vocab_nine(log_probs, target, smoothing, pad):  # V = 9 written in
    padded = torch.full((log_probs.size(0), 9), -30.0, dtype=log_probs.dtype)
    padded[:, :min(9, log_probs.size(1))] = log_probs[:, :9]
    return solutions(9).smoothed_kl(padded, target.clamp(max=8), smoothing, pad)


def _average_over_three(dicts):  # three checkpoints written in
    last = dicts[-1]
    return {k: sum(d[k] for d in dicts) / 3 if v.is_floating_point() else v for k, v in last.items()}


HARD_CODED = [  # (number, answer, the sentence naming the case it fails on)
    ("1.2", lambda k, d_model: solutions(1).pe_dot(k, 16), "for k=0, d_model=6 the dot product"),
    ("2.2", _attention_over_four, "(d_k=9) the scores are divided by 4, not by sqrt(d_k) = 3"),
    ("2.5", lambda x, h: x.view(x.size(0), x.size(1), 4, -1).transpose(1, 2),
     "split_heads(x, 3) for x of shape (1, 5, 12) should return shape (1, 3, 5, 4), got (1, 4, 5, 3)"),
    ("5.4", lambda counts: [c / 200 for c in counts], "micro_batch_weights([7, 3]) should be [0.7, 0.3]"),
    ("7.2", _top_k_vocab_seven, "for scores of shape (4, 11) and k=5, index i of scores.flatten() is beam i // 11 "
     "and token i % 11; you divided by 7"),
    ("10.2", lambda nll, tokens: math.exp(sum(nll) / 17), "for sentence losses [2.5, 40.0] (summed over tokens) and "
     "lengths [1, 20] the perplexity is"),
    ("10.3", _top_p_first_row_only, "(row 1 of 2) and p=0.35 keep the tokens of probability [0.45]"),
    ("11.3", lambda x, base: solutions(11).rope(x, 10000.0), "for x of shape (2, 1, 5, 4) and base 500 your rotation "
     "is that of base 10000"),
    ("11.4", lambda k, group: k.repeat_interleave(3, dim=1),
     "repeat_kv(k, 2) for k of shape (1, 3, 2, 5) should return shape (1, 6, 2, 5), got (1, 9, 2, 5)"),
    # the same weakness, found in other checks
    ("1.4", lambda table, p: p + 1 if p + 1 < len(table) else p - 1,
     "for sinusoidal_table(50, 4), closest(table, 0) should be 19"),
    ("3.1", lambda x, gain, bias, eps: solutions(3).layer_norm(x, gain, bias, 0.5), "for x of shape (4, 7) and eps=0.01"),
    ("4.2", lambda src, tgt_len, pad: (src != 0)[:, None, None, :], "with pad=1, sentence 0, target position 0, "
     "source position 1 (token 0): expected True, got False"),
    ("5.2", _smoothed_vocab_seven, "with vocab_size 10, padding_idx 2 and smoothing 0.1"),
    ("7.3", lambda step, bos, eos, max_len: solutions(7).greedy_search(step, 0, 1, max_len),
     "starting with the start symbol 3, got [0]"),
    ("8.4", _average_over_three, "for 2 checkpoints with keys ['layer.weight', 'epoch'], 'layer.weight' should be"),
    ("9.1", _fuse_qkv_eight, "(q, k and v of d_model=5)"),
    ("9.4", _smoothed_kl_vocab_nine, "V = 12 and smoothing 0.25 the loss is"),
    ("11.1", lambda x, g, eps: solutions(11).rms_norm(x, g, 0.5), "for x of shape (4, 5) and eps=0.01"),
    # answers written for the fixed cases of checks that now also draw one afresh: each fails on the drawn case
    ("1.2", _written_for_the_check([(k, d) for d in (16, 6, 64) for k in range(30)],
                                   lambda k, d: solutions(1).pe_dot(k, d), lambda k, d: 0.0),
     "the dot product of the table's rows p and p + k"),
    ("1.3", _written_for_the_check([16, 512], lambda d: solutions(1).wavelengths(d),
                                   lambda d: torch.ones(d // 2, dtype=torch.float64)), "should have wavelength"),
    ("2.4", _written_for_the_check([4, 64], float, lambda d_k: 1.0), "the variance of q . k (entries of unit variance"),
    ("4.3", _tie_thirteen, "the target embedding's weight should be the source embedding's Parameter itself"),
    ("7.3", lambda step, bos, eos, max_len: (solutions(7).greedy_search(step, bos, eos, max_len)
                                            if (bos, eos) in ((0, 1), (3, 0)) else [eos]), "the end symbol included"),
    ("8.3", _bleu_of_the_examples, "sacreBLEU (tokenize='none', no smoothing) gives"),
    ("9.2", _written_for_the_check([1.0, 1.5, 3.0, 1000.0, 0.01], lambda x: solutions(9).bf16_spacing(x),
                                   lambda x: 0.0), "the next bfloat16 number above"),
    ("10.4", lambda logits, t: (logits / t).softmax(-1) if logits.tolist() == [[2.0, 1.0, 0.0, -1.0]] else
     torch.full_like(logits, 1 / logits.shape[-1]), "expected"),
    ("11.2", _written_for_the_check([(96, 384), (256, 1024), (512, 2048)],
                                    lambda m, f: solutions(11).swiglu_hidden(m, f), lambda m, f: f),
     "with d_hidden = d_ff the gated network has three matrices"),
]


MISTAKES = [
    ("1.1", _table_swapped, "sines and cosines are swapped"),
    ("1.1", _table_wrong_exponent, "this looks like i / d_model in the exponent"),
    ("1.1", _written_for_the_check([(50, 16), (9, 4)], lambda m, d: solutions(1).sinusoidal(m, d),
                                   lambda m, d: torch.zeros(m, d)), "row = position, column = dimension"),
    ("2.3", _written_for_the_check([1, 5], lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool)),
                                   lambda n: torch.ones(n, n, dtype=torch.bool)), "should allow keys"),
    ("1.1", lambda max_len, d_model: _table_slip(max_len, d_model, lambda j: j), "the column index j in 10000^(j / d_model)"),
    ("1.1", lambda max_len, d_model: _table_slip(max_len, d_model, lambda j: 2 * j), "this looks like 2j for the column j"),
    ("1.1", lambda max_len, d_model: _table_slip(max_len, d_model, lambda j: j - j % 2, start=1),
     "positions counted from 1"),
    ("1.1", lambda max_len, d_model: _table_slip(max_len, d_model, lambda j: j - j % 2, times=True),
     "the position times 10000^(2i / d_model)"),
    ("1.1", lambda max_len, d_model: _table_slip(max_len, d_model, lambda j: j - j % 2) * 2,
     "pair i turns at the frequency 1 / 10000^(2i / d_model)"),  # no slip it knows: the rule itself
    ("1.1", lambda max_len, d_model: solutions(1).sinusoidal(max_len, d_model).T, "should return shape (50, 16)"),
    ("1.2", lambda k, d_model: sum(math.sin(k * 10000.0 ** (-2 * i / d_model)) for i in range(d_model // 2)),
     "for k=0, d_model=16 the dot product of the table's rows p and p + k is 8.0000 for every p, got 0.0000; this "
     "looks like the sum of the sines"),
    ("1.2", lambda k, d_model: float(d_model), "is 8.0000 for every p, got 16.0000; this is d_model: there are d_model / 2 pairs"),
    ("1.2", lambda k, d_model: 2 * sum(math.cos(k * 10000.0 ** (-2 * i / d_model)) for i in range(d_model // 2)),
     "got 16.0000; this is d_model: there are d_model / 2 pairs, not d_model dimensions"),
    ("1.3", lambda d: 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d), "these are the frequencies"),
    ("1.3", lambda d: 2 * math.pi * 10000.0 ** (torch.arange(d // 2, dtype=torch.float64) / d),
     "for d_model=16, pair 1 should have wavelength"),
    ("1.3", lambda d: 2 * math.pi * 10000.0 ** (2 * torch.arange(d, dtype=torch.float64) / d), "should return shape (8,)"),
    ("1.4", _closest_with_itself, "returned 0 itself"),
    ("1.4", lambda table, p: p + 2 if p < 40 else p - 2, "closest(table, 0) should be 1"),
    ("2.1", _softmax_nan, "rows where every key is masked should be all zeros, got NaN at row 2"),
    ("2.1", _softmax_zero_fill, "masked keys must get weight 0"),
    ("2.1", lambda scores, mask: scores.softmax(-1) * mask, "the allowed keys should share the weight"),
    ("2.1", _softmax_finite_fill, "a finite fill like -1e9 cannot be stored in float16 (its largest number is 65,504); "
     "fill with -inf, then zero the rows where every key is masked"),
    ("2.2", _attention_unscaled, "without the scale: divide the scores by sqrt(d_k)"),
    ("2.2", _attention_wrong_dim, "softmax over the last dimension, the keys"),
    ("2.2", lambda q, k, v: _attention_unscaled(q, k, v)[0], "should return (output, weights)"),
    ("2.3", lambda size: torch.ones(size, size, dtype=torch.bool).triu(), "row 0 (query 0) should allow keys [0],"),
    ("2.3", lambda size: torch.ones(size, size, dtype=torch.bool).tril(-1), "position 0 must see itself"),
    ("2.3", lambda size: torch.ones(size, size).tril(), "should return a bool tensor"),
    ("2.4", lambda d_k: 1.0, "for d_k=4 the variance of q . k"),
    ("2.4", lambda d_k: solutions(2).score_variance(d_k) / d_k, "got 0.99"),
    ("2.4", lambda d_k: 1.25 * d_k, "draw 10,000 pairs or more"),  # a correct idea on too few pairs
    ("2.5", lambda x, h: x.view(x.size(0), h, x.size(1), x.size(2) // h),
     "view as (B, T, heads, d_k), then transpose(1, 2)"),
    ("2.5", lambda x, h: x.view(x.size(0), x.size(1), h, -1), "should return shape (2, 4, 3, 2)"),
    ("3.1", _layer_norm_unbiased, "divide by d, not d - 1"),
    ("3.1", _layer_norm_eps_outside, "eps goes inside the square root"),
    ("3.1", _layer_norm_no_gain, "then scale by gain and add bias"),
    ("3.1", _layer_norm_annotated, "that is the Annotated Transformer's layer norm, (x - mean) / (std + eps)"),
    ("3.1", _layer_norm_annotated, "the unbiased std (dividing by d - 1) and adds eps to the std instead of inside the "
     "square root"),
    ("3.2", lambda x, fn, norm, first: norm(x) + fn(norm(x)) if first else norm(x + fn(x)),
     "the residual must carry x itself"),
    ("3.2", lambda x, fn, norm, first: x + fn(norm(x)) if first else x + norm(fn(x)), "post-norm normalizes the sum"),
    ("3.2", lambda x, fn, norm, first: norm(x + fn(x)) if first else x + fn(norm(x)), "you computed the other one"),
    ("3.3", lambda d_model, d_ff: 2 * d_model * d_ff, "add the biases, 2,048 for w_1 and 512 for w_2"),
    ("3.3", lambda d_model, d_ff: 2 * d_model * d_ff + 2 * d_model, "has 2,099,712 parameters, got 2098176"),
    ("3.4", _ffn_share_without_norms, "the two layer norms' gains and biases too"),
    ("3.4", lambda d_model, d_ff: 0.5, "got 0.5000"),
    ("3.4", lambda d_model, d_ff: 2 * d_model * d_ff / (4 * d_model**2 + 2 * d_model * d_ff + 4 * d_model),
     "every nn.Linear of the layer has a bias"),  # the paper's projections, without biases
    ("3.4", lambda d_model, d_ff: 0.666071, "at d_model=64, d_ff=96"),  # the paper's size, hard-coded
    ("4.1", _parameters_without_generator_bias, "the generator's linear layer has a bias"),
    ("4.1", _parameters_without_cross_attention, "each decoder layer has a second attention"),
    ("4.1", lambda v, n, d, f, shared: solutions(4).model_parameters(v, n, d, f, False), "are one tensor"),
    ("4.2", lambda src, tgt_len, pad: (src == pad)[:, None, None, :], "got True at the source padding"),
    ("4.2", lambda src, tgt_len, pad: (src != pad)[:, None, None, :] & torch.ones(tgt_len, src.size(1)).tril().bool(),
     "cross-attention has no causal part"),
    ("4.2", lambda src, tgt_len, pad: (src != pad)[:, None, :, None], "should broadcast to"),
    ("4.3", _tie_by_copying, "they are three Parameters"),
    ("4.3", _tie_generator_only, "the target embedding's weight should be"),
    ("4.4", lambda v, d: math.sqrt(2 / (v + d)), "multiplies its table by sqrt(d_model)"),
    ("4.4", lambda v, d: math.sqrt(d) * math.sqrt(6 / (v + d)), "whose standard deviation is a / sqrt(3)"),
    ("6.1", lambda sentences, min_freq: solutions(6).build_vocab(sentences, min_freq)[4:], "the four specials come first"),
    ("6.1", _vocab_in_order_of_appearance, "shuffling the sentences changed the ids"),
    ("6.1", _vocab_right_for_one_order, "shuffling the sentences changed the ids"),
    ("6.1", _vocab_ties_reversed, "the same ids in every order of the sentences, but not Vocab.build's: most frequent "
     "first, ties in alphabetical order"),
    ("6.1", lambda sentences, min_freq: solutions(6).build_vocab(sentences, min_freq + 1), "is kept"),
    ("6.2", lambda word_counts: solutions(6).count_pairs({w: 1 for w in word_counts}),
     "this looks like each pre-token counted once"),
    ("6.2", _pairs_once_per_word, "this looks like a pair counted once per pre-token"),
    ("6.2", lambda word_counts: solutions(6).count_pairs({w: n + 1 for w, n in word_counts.items()}),
     "each pre-token counted as often as it occurs, every place in it counted"),
    ("6.3", _encode_first_occurrence_only, "each joining every occurrence"),
    ("6.3", lambda word, merges: solutions(6).encode_word(word, merges[::-1]), "in the order they were learned"),
    ("6.4", lambda batches: sum(max(b) - n for b in batches for n in b) / sum(map(sum, batches)), "not by the real tokens"),
    ("6.4", lambda batches: sum(max(b) - n for b in batches for n in b), "this looks like the number of padding slots"),
    ("6.4", lambda batches: sum(map(sum, batches)) / sum(len(b) * max(b) for b in batches),
     "this looks like the share of real tokens"),
    ("6.4", lambda batches: sum((max(b) * len(b) - sum(b)) / (max(b) * len(b)) for b in batches) / len(batches),
     "this looks like the mean of each batch's share"),
    ("6.4", lambda batches: 1 - sum(map(sum, batches)) / (sum(map(len, batches)) * max(map(max, batches))),
     "padded to its own longest"),
    ("7.1", lambda length, alpha: length**alpha, "is a plain power of the length"),
    ("7.1", lambda length, alpha: (5 + length) ** alpha / 6, "the penalty is"),
    ("7.2", _top_k_one_per_beam, "need not come from 3 different beams"),
    ("7.2", lambda s, k: tuple(reversed(solutions(7).top_k_beams(s, k)[:2])) + (s.flatten().topk(k)[0],),
     "index i is beam i // 7"),
    ("7.2", _top_k_swapped_div_mod, "you took the top k over beams x vocabulary, then swapped // and %: in "
     "scores.flatten() of a (3, 7) tensor, index i is beam i // 7 (the row) and token i % 7 (the column)"),
    ("7.2", _top_k_swapped_by_beams, "then swapped // and %"),
    ("7.3", _greedy_without_stop, "stops once it has produced the end symbol"),
    ("7.3", lambda step, bos, eos, max_len: solutions(7).greedy_search(lambda p: step(p[-1:]), bos, eos, max_len),
     "step takes the whole prefix"),
    ("7.4", lambda n, cached: n * (n + 1) // 2, "with the cache each step runs the new position only"),
    ("7.4", lambda n, cached: n if cached else n * n, "without a cache step t runs the decoder over all t"),
    ("8.1", _unclipped_precision, "clip each n-gram's count"),
    ("8.2", lambda c, r: math.exp(1 - r / c), "is not penalized"),
    ("8.2", lambda c, r: 1.0 if c >= r else math.exp(1 - c / r), "the penalty is"),
    ("8.3", _mean_of_sentence_bleus, "is not the mean of sentence BLEUs"),
    ("8.3", lambda hyps, refs: solutions(8).corpus_bleu(hyps, refs) / 100, "sacreBLEU (tokenize='none', no smoothing)"),
    ("8.4", lambda dicts: {k: sum(d[k] for d in dicts) for k in dicts[-1]}, "that is the sum"),
    ("8.4", lambda dicts: {k: sum(d[k] for d in dicts) / len(dicts) for k in dicts[-1]}, "an integer entry"),
    ("9.1", _fuse_without_biases, "did the biases come along"),
    ("9.1", _fuse_along_inputs, "its weight has shape (24, 8)"),
    ("9.2", lambda x: 2.0 ** (math.floor(math.log2(abs(x))) - 10), "that is float16's gap"),
    ("9.2", lambda x: 2.0**-7, "the gap grows with the number"),
    ("9.3", _quantize_symmetric, "that is the symmetric grid"),
    ("9.3", _quantize_truncating, "round to the nearest integer"),
    ("9.3", _quantize_float_zero_point, "zero_point should be an integer"),
    ("9.4", _cross_entropy_not_kl, "that is the cross-entropy"),
    ("10.1", lambda tokens: (tokens, tokens), "learns to copy the token"),
    ("10.1", lambda tokens: (tokens[:, 1:], tokens[:, :-1]), "that is backwards"),
    ("10.2", lambda nll, n: math.exp(sum(a / b for a, b in zip(nll, n)) / len(n)), "pool the log-likelihoods"),
    ("10.2", lambda nll, n: 2 ** (sum(nll) / sum(n)), "natural logarithms"),
    ("10.3", _top_p_strictly_below, "keep the token whose probability takes the sum to p"),
    ("10.4", lambda logits, t: (logits * t).softmax(-1), "divide the logits by the temperature"),
    ("10.5", lambda n_layers, d_model, tokens, b: n_layers * d_model * tokens * b, "keys and values"),
    ("11.1", lambda x, g, eps: solutions(11).rms_norm(x - x.mean(-1, keepdim=True), g, eps), "does not subtract the mean"),
    ("11.1", lambda x, g, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * g, "eps goes inside"),
    ("11.2", lambda d_model, d_ff: d_ff, "solve 3 d_model h = 2 d_model d_ff"),
    ("11.3", _rope_halves, "the 'halves' layout"),
    ("11.4", lambda k, group: k.repeat(1, group, 1, 1), "that tiles the stack"),
    ("8.1", _precision_over_reference_ngrams, "match, got"),
    ("9.4", lambda lp, target, s, pad: solutions(9).smoothed_kl(lp, target, s, pad) / int((target != pad).sum()),
     "the loss is"),
    ("10.3", _top_p_unsorted, "keep the tokens of probability"),
    ("10.4", lambda logits, t: logits.softmax(-1) / t, "at temperature 0.5 expected"),
    ("10.5", lambda n_layers, d_model, tokens, b: 2 * n_layers * d_model * tokens, "the cache holds"),
    ("11.2", lambda d_model, d_ff: d_ff // 2, "gives the gated one"),
    ("11.2", lambda d_model, d_ff: 2 * d_ff // 3, "round 2/3 d_ff to the nearest integer"),
    ("11.3", _rope_turned_backwards, "compared with apply_rope"),
    ("11.4", lambda k, group: k.repeat_interleave(group, dim=2), "should return shape (2, 6, 3, 4)"),
    ("5.1", lambda step, d, w: min(step**-0.5, step * w**-1.5), "the schedule is scaled by d_model^-0.5"),
    ("5.1", lambda step, d, w: d**-0.5 * min(step**-0.5, step * w**-0.5), "this looks like warmup^-0.5 in the rising"),
    ("5.1", lambda step, d, w: d**-0.5 * max(step**-0.5, step * w**-1.5), "this looks like max where the formula has min"),
    ("5.1", lambda step, d, w: d**-0.5 * step**-0.5, "this looks like the decay alone"),
    ("5.1", lambda step, d, w: d**-0.5 * min((step + 1)**-0.5, (step + 1) * w**-1.5), "this looks like step + 1"),
    ("5.1", lambda step, d, w: d**-0.5 * min(step**-0.5, step * w**-1.5) * 1.01, "at step 1 (d_model=512, warmup=4000)"),
    ("5.2", _smoothed_over_v_minus_1, "not 0.3/6"),
    ("5.2", _smoothed_keeps_padding_rows, "its row must be all zeros"),
    ("5.2", _smoothed_padding_column, "column padding_idx must be 0"),
    ("5.2", _smoothed_float32, "return float64, as the exercise asks"),
    ("5.2", _smoothed_padding_is_zero, "is padding taken to be id 0?"),
    ("5.3", lambda v: 0.0, "so the probabilities pass through a softmax again"),
    ("5.3", lambda v: math.log(v), "for vocab_size=2 the lowest loss is 0.3133, got 0.6931"),
    ("5.4", lambda counts: [1 / len(counts)] * len(counts), "weight each by its share of the step's tokens"),
    ("5.4", lambda counts: [n / max(counts) for n in counts], "should be [0.6, 0.2, 0.2]"),
    # answers that once passed: NaN, which every `abs(got - want) > tol` calls fine; two wrong BPE encoders; an answer
    # that changes its inputs in place, so that a reference computed from them afterwards agrees with it
    *[(n, answer, "returned NaN") for n, answer in [
        ("1.2", lambda k, d_model: math.nan), ("1.3", lambda d_model: torch.full((d_model // 2,), math.nan)),
        ("3.4", lambda d_model, d_ff: math.nan), ("5.3", lambda v: math.nan),
        ("5.4", lambda counts: [math.nan] * len(counts)),
        ("9.3", lambda x: (solutions(9).quantize_asymmetric(x)[0], math.nan, 0))]],
    ("6.3", _encode_longest_match, "as WordPiece cuts"),
    ("6.3", _encode_right_to_left, "from left to right"),
    ("2.2", _attention_scaling_q_in_place_twice, "the scores are divided by 16, not by sqrt(d_k) = 4"),
    # answers with the one case the check once tried written in: each passed it, and fails on another case, named
    *HARD_CODED,
]


@pytest.mark.parametrize("number, answer, sentence", MISTAKES, ids=[f"{m[0]}: {m[2][:40]}" for m in MISTAKES])
def test_a_learners_mistake_fails_with_the_sentence_that_names_it(number, answer, sentence):
    passed, said = verdict(number, answer)
    assert not passed and sentence in said, said


def test_every_check_rejects_at_least_one_mistake():
    assert {m[0] for m in MISTAKES} == set(EXERCISES)


def test_an_unsolved_stub_is_not_solved_yet_and_a_crash_is_reported(capsys):
    def stub(*args):
        raise NotImplementedError("your code here")

    assert check("2.1", stub) is None and "not solved yet" in capsys.readouterr().out
    assert verdict("2.4", None) == (False, verdict("2.4", stub)[1])
    passed, said = verdict("2.3", lambda size: torch.ones(size))
    assert not passed and "should return" in said
    passed, said = verdict("2.5", lambda x, h: 1 / 0)
    assert not passed and "Your code raised ZeroDivisionError" in said
    with pytest.raises(ValueError, match="number must be one of"):
        verdict("9.9", stub)


# ------------------------------------------------------------------------------------ the chapters
def _chapter_exercises(chapter_number: int) -> list[str]:
    return sorted(n for n in EXERCISES if n.split(".")[0] == str(chapter_number))


@pytest.mark.parametrize("chapter_number", sorted({int(n.split(".")[0]) for n in EXERCISES}))
def test_each_chapter_states_and_checks_its_exercises_unsolved(chapter_number):
    nb = nbformat.read(ROOT / BOOK.chapters[chapter_number - 1].file, as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for number in _chapter_exercises(chapter_number):
        assert re.search(rf"^### Exercise {re.escape(number)}\b", markdown, re.M), number
        cells = [c for c in nb.cells if c.cell_type == "code" and f'check("{number}"' in c.source]
        assert len(cells) == 1, number
        printed = "".join(o.get("text", "") for o in cells[0].outputs)
        assert f"Exercise {number}" in printed and "not solved yet" in printed, printed
    count = len(_chapter_exercises(chapter_number))
    assert 4 <= count <= 6, f"chapter {chapter_number} has {count} exercises"


def test_the_readme_counts_the_exercises_and_the_mistakes():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    per_chapter = [len(_chapter_exercises(i + 1)) for i in range(len(BOOK.chapters))]
    assert min(per_chapter) >= 4, "every chapter of book.yml ends with exercises"
    low, high = min(per_chapter), max(per_chapter)
    span = f"{low}" if low == high else f"{low} or {high}" if high == low + 1 else f"{low} to {high}"
    assert f"Every chapter ends with {span} exercises, {len(EXERCISES)} in all" in readme
    assert f"that {len(MISTAKES)} mistakes a learner makes" in readme


def test_the_xavier_reference_is_what_xavier_uniform_draws():
    table = torch.empty(7851, 256)
    torch.nn.init.xavier_uniform_(table, generator=torch.Generator().manual_seed(0))
    measured = (table * 256**0.5).pow(2).mean().sqrt().item()
    assert abs(measured - solutions(4).xavier_token_rms(7851, 256)) < 0.005 * measured


def test_a_check_leaves_the_readers_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    verdict("9.1", solutions(9).fuse_qkv)
    assert torch.equal(torch.rand(3), expected)


def test_a_chapters_check_imports_no_later_chapter():
    """check("2.1", ...) in a fresh interpreter loads chapter 2's checks, and no module of a later chapter."""
    import subprocess
    import sys

    code = ("import sys\nfrom transformer_lib.exercises import check\ncheck('2.1', None)\n"
            "print(sorted(m for m in sys.modules if m.startswith('transformer_lib.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Exercise 2.1" in out and "not solved yet" in out
    loaded = out.splitlines()[-1]
    assert "transformer_lib.exercises.ch02" in loaded
    for later in ("exercises.ch03", "exercises.ch10", "transformer_lib.gpt", "transformer_lib.translation",
                  "transformer_lib.data"):
        assert later not in loaded, f"{later} was imported by chapter 2's check"


def test_a_check_runs_under_torchs_defaults_and_restores_the_readers_global_state():
    """A reader's float64 default or no_grad does not fail a right answer, and an answer that changes torch's global
    state (default dtype, grad mode, threads, random state) leaves none of it changed."""
    dtype, grad, threads = torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads()
    try:
        torch.set_default_dtype(torch.float64)
        with torch.no_grad():
            passed, said = verdict("8.4", solutions(8).average_state_dicts)
            assert passed, said
            assert torch.get_default_dtype() == torch.float64 and not torch.is_grad_enabled()
    finally:
        torch.set_default_dtype(dtype)

    def vandal(k, d_model):
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        torch.set_num_threads(1)
        torch.manual_seed(0)
        return solutions(1).pe_dot(k, d_model)

    torch.manual_seed(5)
    expected = torch.rand(2)
    torch.manual_seed(5)
    assert verdict("1.2", vandal)[0]
    assert (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads()) == (dtype, grad, threads)
    assert torch.equal(torch.rand(2), expected)


def test_an_answer_that_empties_its_inputs_changes_nothing_for_the_next_answer():
    def emptying(sentences, min_freq):
        for s in sentences:
            s.clear()
        sentences.clear()
        return ["<unk>", "<pad>", "<s>", "</s>"]

    assert not verdict("6.1", emptying)[0]
    passed, said = verdict("6.1", lambda sentences, min_freq: ["<unk>", "<pad>", "<s>", "</s>"])
    assert not passed and "expected the tokens" in said, said
    assert verdict("6.1", solutions(6).build_vocab)[0]


def test_a_number_that_is_not_a_string_is_refused_in_one_line():
    """verdict(["2.1"], ...) once raised a TypeError from deep inside (unhashable list)."""
    for number in (["2.1"], 2.1, None):
        with pytest.raises(TypeError, match=r'number must be an exercise\'s number as a string, such as "2.1", got'):
            verdict(number, solutions(2).masked_softmax)


def test_a_crash_names_the_case_it_happened_on():
    """An answer with one size written in crashes on the next case; the sentence says which."""
    passed, said = verdict("2.5", lambda x, h: x.view(2, 3, 4, 2).transpose(1, 2))
    assert not passed and "Your code raised RuntimeError" in said
    assert said.endswith("(split_heads(x, 3) for x of shape (1, 5, 12))"), said
    passed, said = verdict("2.5", lambda x, h: 1 / 0)  # the first case: the sentence names it too
    assert not passed and "(split_heads(x, 4) for x of shape (2, 3, 8))" in said


def test_the_pass_messages_state_only_what_is_true_of_every_answer_they_pass():
    """The facts a pass message states beyond what its check compares, checked here: 9.2's count of bfloat16 numbers
    per power of two, 1.4's neighbours, 1.3's range of wavelengths, 2.1's precisions, 4.3's and 10.4's numbers."""
    from transformer_lib.embeddings import sinusoidal_table
    from transformer_lib.exercises import ch02

    said = {n: verdict(n, getattr(solutions(int(n.split(".")[0])), SOLVED[n]))[1] for n in EXERCISES}
    ones = torch.arange(16256, 16384, dtype=torch.int16).view(torch.bfloat16)  # the bit patterns of [1, 2)
    assert "128 numbers per power of two" in said["9.2"]
    assert ones.min() == 1 and ones.max() < 2 and len(ones.unique()) == 128
    assert float(torch.tensor(16384, dtype=torch.int16).view(torch.bfloat16)) == 2.0  # the pattern after them
    for d_model, positions, neighbour in ((32, (0, 5, 20, 49), True), (4, (0, 20, 49), False)):
        table = sinusoidal_table(50, d_model)
        for p in positions:  # "finds a neighbour ... for every position tried" at 32; "a farther one" at 4
            assert (abs(solutions(1).closest(table, p) - p) == 1) == neighbour, (d_model, p)
    lengths = solutions(1).wavelengths(512)
    assert lengths[0] == pytest.approx(2 * math.pi) and 0.9 * 10000 * 2 * math.pi < lengths[-1] < 10000 * 2 * math.pi
    assert ch02._masked_case()[0].dtype == torch.float64 and "in float64 and in float16" in said["2.1"]
    assert "416 parameters fewer" in said["4.3"]  # two 13 x 16 tables, as the check counted them
    low, high, uniform = map(float, re.findall(r"took ([0-9.]+) of the probability at temperature 0.001, ([0-9.]+) at "
                                               r"1000 \(uniform: ([0-9.]+)\)", said["10.4"])[0])
    assert low > 0.5 and uniform <= high < uniform + 0.01  # sharper than any even split of two; near uniform
