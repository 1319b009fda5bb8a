"""The exercises' checks, both ways: every worked solution passes, and the mistakes a learner makes fail with the
sentence that names them. The chapters themselves run with the stubs unsolved (nbval), saying "not solved yet"."""
import importlib.util
import math
import re
from pathlib import Path

import nbformat
import pytest
import torch

from transformer_lib.book import load_book
from transformer_lib.exercises import EXERCISES, check, verdict

ROOT = Path(__file__).resolve().parents[1]
BOOK = load_book(ROOT)


def solutions(chapter: int):
    path = next((ROOT / "solutions").glob(f"ch{chapter:02d}_*.py"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOLVED = {"1.1": "sinusoidal", "1.2": "pe_dot", "1.3": "wavelengths", "1.4": "closest", "2.1": "masked_softmax",
          "2.2": "attention", "2.3": "causal_mask", "2.4": "score_variance", "2.5": "split_heads",
          "3.1": "layer_norm", "3.2": "sublayer", "3.3": "ffn_parameters", "3.4": "ffn_share"}


@pytest.mark.parametrize("number", sorted(EXERCISES))
def test_every_worked_solution_passes_its_check(number):
    answer = getattr(solutions(int(number.split(".")[0])), SOLVED[number])
    passed, sentence = verdict(number, answer)
    assert passed, sentence


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


def _ffn_share_without_norms(d_model, d_ff):
    ffn = 2 * d_model * d_ff + d_ff + d_model
    return ffn / (ffn + 4 * (d_model * d_model + d_model))


def _attention_unscaled(q, k, v):
    w = (q @ k.transpose(-2, -1)).softmax(-1)
    return w @ v, w


def _attention_wrong_dim(q, k, v):
    w = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-2)
    return w @ v, w


MISTAKES = [
    ("1.1", _table_swapped, "sines and cosines are swapped"),
    ("1.1", _table_wrong_exponent, "pair i turns at the frequency 1 / 10000^(2i / d_model)"),
    ("1.1", lambda max_len, d_model: solutions(1).sinusoidal(max_len, d_model).T, "should return shape (50, 16)"),
    ("1.2", lambda k, d_model: sum(math.sin(k * 10000.0 ** (-2 * i / d_model)) for i in range(d_model // 2)),
     "for k=0, d_model=16 the dot product of the table's rows p and p + k is 8.0000"),
    ("1.2", lambda k, d_model: float(d_model), "is 8.0000 for every p, got 16.0000"),
    ("1.3", lambda d: 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d), "these are the frequencies"),
    ("1.3", lambda d: 2 * math.pi * 10000.0 ** (torch.arange(d // 2, dtype=torch.float64) / d),
     "for d_model=16, pair 1 should have wavelength"),
    ("1.3", lambda d: 2 * math.pi * 10000.0 ** (2 * torch.arange(d, dtype=torch.float64) / d), "should return shape (8,)"),
    ("1.4", _closest_with_itself, "returned 0 itself"),
    ("1.4", lambda table, p: p + 2 if p < 40 else p - 2, "closest(table, 0) should be 1"),
    ("2.1", _softmax_nan, "rows where every key is masked should be all zeros, got NaN at row 2"),
    ("2.1", _softmax_zero_fill, "masked keys must get weight 0"),
    ("2.1", lambda scores, mask: scores.softmax(-1) * mask, "the allowed keys should share the weight"),
    ("2.2", _attention_unscaled, "without the scale: divide the scores by sqrt(d_k)"),
    ("2.2", _attention_wrong_dim, "softmax over the last dimension, the keys"),
    ("2.2", lambda q, k, v: _attention_unscaled(q, k, v)[0], "should return (output, weights)"),
    ("2.3", lambda size: torch.ones(size, size, dtype=torch.bool).triu(), "row 0 (query 0) should allow keys [0],"),
    ("2.3", lambda size: torch.ones(size, size, dtype=torch.bool).tril(-1), "position 0 must see itself"),
    ("2.3", lambda size: torch.ones(size, size).tril(), "should return a bool tensor"),
    ("2.4", lambda d_k: 1.0, "for d_k=4 the variance of q . k"),
    ("2.4", lambda d_k: solutions(2).score_variance(d_k) / d_k, "got 0.99"),
    ("2.5", lambda x, h: x.view(x.size(0), h, x.size(1), x.size(2) // h),
     "view as (B, T, heads, d_k), then transpose(1, 2)"),
    ("2.5", lambda x, h: x.view(x.size(0), x.size(1), h, -1), "should return shape (2, 4, 3, 2)"),
    ("3.1", _layer_norm_unbiased, "divide by d, not d - 1"),
    ("3.1", _layer_norm_eps_outside, "eps goes inside the square root"),
    ("3.1", _layer_norm_no_gain, "then scale by gain and add bias"),
    ("3.2", lambda x, fn, norm, first: norm(x) + fn(norm(x)) if first else norm(x + fn(x)),
     "the residual must carry x itself"),
    ("3.2", lambda x, fn, norm, first: x + fn(norm(x)) if first else x + norm(fn(x)), "post-norm normalizes the sum"),
    ("3.2", lambda x, fn, norm, first: norm(x + fn(x)) if first else x + fn(norm(x)), "you computed the other one"),
    ("3.3", lambda d_model, d_ff: 2 * d_model * d_ff, "add the biases, 2,048 for w_1 and 512 for w_2"),
    ("3.3", lambda d_model, d_ff: 2 * d_model * d_ff + 2 * d_model, "has 2,099,712 parameters, got 2098176"),
    ("3.4", _ffn_share_without_norms, "the two layer norms' gains and biases too"),
    ("3.4", lambda d_model, d_ff: 0.5, "got 0.5000"),
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
    chapters = sorted({int(n.split(".")[0]) for n in EXERCISES})
    listed = ", ".join(map(str, chapters[:-1])) + f" and {chapters[-1]}"
    assert f"Chapters {listed} end with {len(EXERCISES)} exercises" in readme
    assert f"that {len(MISTAKES)} mistakes a learner makes" in readme
