"""transformer_lib.training: chapter 5's machinery, and the copy task it learns."""
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from transformer_lib.model import make_model
from transformer_lib.training import (
    COPY_PAD, COPY_START, Batch, LabelSmoothing, copy_task_batch, evaluate, greedy_decode, loss_sum,
    make_optimizer, rate, sequence_accuracy, train_copy_task, train_epoch,
)

ROOT = Path(__file__).resolve().parents[1]


def test_label_smoothing_matches_a_hand_computation():
    crit = LabelSmoothing(vocab_size=5, padding_idx=0, smoothing=0.4)
    log_probs = torch.log(torch.tensor([[0.1, 0.5, 0.2, 0.1, 0.1], [0.2, 0.2, 0.2, 0.2, 0.2]]))
    target = torch.tensor([1, 0])  # the second target is padding: ignored
    # q = [0, 0.6, 0.4/3, 0.4/3, 0.4/3]; KL = sum q log(q / p)
    q = [0.0, 0.6, 0.4 / 3, 0.4 / 3, 0.4 / 3]
    p = [0.1, 0.5, 0.2, 0.1, 0.1]
    expected = sum(qi * math.log(qi / pi) for qi, pi in zip(q, p) if qi > 0)
    assert crit(log_probs, target).item() == pytest.approx(expected, rel=1e-5)
    assert crit.target_distribution(target)[1].abs().sum() == 0


def test_label_smoothing_is_finite_when_padding_has_zero_probability():
    crit = LabelSmoothing(vocab_size=4, padding_idx=0, smoothing=0.1)
    log_probs = torch.tensor([[float("-inf"), math.log(0.7), math.log(0.2), math.log(0.1)]], requires_grad=True)
    loss = crit(log_probs, torch.tensor([1]))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(log_probs.grad).all()


def test_label_smoothing_spread_over_all_equals_torch_cross_entropy_minus_entropy():
    torch.manual_seed(0)
    logits, target = torch.randn(6, 9), torch.tensor([3, 1, 0, 8, 2, 0])
    crit = LabelSmoothing(9, padding_idx=0, smoothing=0.1, spread_over_all=True)
    q = crit.target_distribution(target)
    ce = F.cross_entropy(logits, target, label_smoothing=0.1, ignore_index=0, reduction="sum")
    assert torch.allclose(crit(logits.log_softmax(-1), target) - torch.xlogy(q, q).sum(), ce, atol=1e-5)


def test_label_smoothing_rejects_bad_shapes_and_values():
    with pytest.raises(ValueError, match="smoothing must be in"):
        LabelSmoothing(5, 0, smoothing=1.0)
    with pytest.raises(ValueError, match=r"log_probs must be \(N, vocab_size=5\)"):
        LabelSmoothing(5, 0)(torch.zeros(3, 4), torch.zeros(3, dtype=torch.long))


def test_schedule_warms_up_linearly_and_peaks_at_warmup():
    lrs = [rate(s, d_model=512, warmup=4000) for s in range(1, 12001)]
    assert lrs.index(max(lrs)) + 1 == 4000
    assert lrs[1999] == pytest.approx(lrs[999] * 2)  # linear during warmup
    assert lrs[7999] == pytest.approx(max(lrs) / math.sqrt(2))  # 1/sqrt(step) after
    assert max(lrs) == pytest.approx(512**-0.5 * 4000**-0.5)


def test_make_optimizer_follows_the_schedule_once_per_step():
    opt, sched = make_optimizer(torch.nn.Linear(2, 2), d_model=64, factor=2.0, warmup=10)
    seen = []
    for _ in range(20):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([rate(s, 64, 2.0, 10) for s in range(1, 21)])
    assert opt.defaults["betas"] == (0.9, 0.98) and opt.defaults["eps"] == 1e-9


def test_batch_masks_hide_padding_and_the_future():
    src = torch.tensor([[5, 6, 0], [7, 8, 9]])
    tgt = torch.tensor([[1, 5, 6, 0], [1, 7, 8, 9]])
    b = Batch(src, tgt, pad_idx=0)
    assert b.tgt_in.tolist() == [[1, 5, 6], [1, 7, 8]] and b.tgt_out.tolist() == [[5, 6, 0], [7, 8, 9]]
    assert b.n_tokens == 5
    assert b.src_mask.shape == (2, 1, 1, 3) and b.src_mask[0, 0, 0].tolist() == [True, True, False]
    assert b.tgt_mask.shape == (2, 1, 3, 3)
    assert b.tgt_mask[1, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert not b.tgt_mask[:, 0].triu(1).any()  # never the future


def test_the_target_mask_hides_padded_keys_on_every_row_padded_rows_included():
    """Padding inside tgt_in (a short sentence beside a long one): every row of the mask, the padded query rows too,
    is asserted whole. A mask built from tgt_out instead of tgt_in differs on them."""
    tgt = torch.tensor([[1, 5, 0, 0], [1, 7, 8, 9]])
    b = Batch(torch.tensor([[5, 0], [7, 8]]), tgt, pad_idx=0)
    T, F = True, False
    assert b.tgt_mask[:, 0].tolist() == [[[T, F, F], [T, T, F], [T, T, F]],  # row 2 is padding: its key still hidden
                                         [[T, F, F], [T, T, F], [T, T, T]]]
    from transformer_lib.attention import padding_mask, subsequent_mask

    wrong = padding_mask(b.tgt_out, 0) & subsequent_mask(3)
    assert not torch.equal(wrong, b.tgt_mask)  # the test above would see that bug


def test_batch_rejects_mismatched_and_empty_inputs():
    with pytest.raises(ValueError, match=r"tgt must have shape \(batch=2"):
        Batch(torch.ones(2, 3, dtype=torch.long), torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="src must be a non-empty"):
        Batch(torch.ones(0, 3, dtype=torch.long))


def test_a_short_copy_run_lowers_the_loss():
    result = train_copy_task(max_steps=60, seed=0, eval_every=30, n_eval=200, progress=False)
    losses = [h["loss"] for h in result.history]
    assert sum(losses[-10:]) / 10 < 0.8 * sum(losses[:10]) / 10
    assert result.evaluations[-1]["val_loss"] < result.evaluations[0]["val_loss"]


@pytest.fixture(scope="module")
def trained_copy():
    return train_copy_task(max_steps=2000, seed=0, progress=False)


def test_copy_task_copies_nearly_every_held_out_sequence(trained_copy):
    assert trained_copy.test_accuracy >= 0.99  # as chapter 5 asserts: machine kinds round differently (0.998, 1.0)
    assert trained_copy.evaluations[-1]["val_accuracy"] == 1.0
    assert len(trained_copy.history) < 2000  # stopped early, on three perfect validations in a row


def test_decoding_from_the_wrong_start_symbol_is_caught(trained_copy):
    test = copy_task_batch(500, 10, 11, torch.Generator().manual_seed(99))
    assert sequence_accuracy(trained_copy.model, test, COPY_START) == 1.0
    assert sequence_accuracy(trained_copy.model, test, start_symbol=2) < 0.5


def test_softmax_before_cross_entropy_never_reaches_zero_and_barely_corrects_a_confident_mistake():
    """The bug, by its formulas rather than by two training runs (which end close, in an order float rounding picks):
    a perfect prediction keeps a loss of log(e + V - 1) - 1, and a confident wrong token gets almost no gradient."""
    def softmax_then_cross_entropy(log_probs, target):
        return F.cross_entropy(log_probs.exp(), target, ignore_index=COPY_PAD, reduction="sum")

    honest = LabelSmoothing(11, COPY_PAD, 0.0)
    target = torch.tensor([4])
    perfect = torch.full((1, 11), -1e4).index_fill(1, target, 0.0)  # log-probabilities: all mass on the target
    assert honest(perfect, target).item() < 1e-6
    assert softmax_then_cross_entropy(perfect, target).item() == pytest.approx(math.log(math.e + 10) - 1, abs=1e-5)

    def gradient_norm(loss, scores):
        scores = scores.clone().requires_grad_()
        loss(F.log_softmax(scores, -1).unsqueeze(0), target).backward()
        return scores.grad.norm().item()

    wrong = torch.zeros(11).index_fill(0, torch.tensor([2]), 6.0)  # sure of token 2, the target is 4
    assert gradient_norm(softmax_then_cross_entropy, wrong) < 0.05 * gradient_norm(honest, wrong)


def parameters_after_one_sgd_update(batches, accum_steps=1, per_batch_normalization=False):
    torch.manual_seed(0)
    model = make_model(11, 11, n_layers=1, d_model=32, d_ff=64, n_heads=4, dropout=0.0, pad_idx=COPY_PAD)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    criterion = LabelSmoothing(11, COPY_PAD, 0.0)
    if per_batch_normalization:  # the bug: each micro-batch's mean, summed
        for b in batches:
            (loss_sum(model, b, criterion) / b.n_tokens).backward()
        optimizer.step()
    else:
        train_epoch(model, batches, criterion, optimizer, accum_steps=accum_steps, clip_norm=None, progress=False)
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def micro_batches():
    big = copy_task_batch(32, 10, 11, torch.Generator().manual_seed(3))
    tgt = big.tgt.clone()
    tgt[:8, 7:] = COPY_PAD  # unequal token counts per micro-batch, so per-batch means differ from the step mean
    big = Batch(big.src, tgt, COPY_PAD)
    return big, [Batch(big.src[i:i + 8], big.tgt[i:i + 8], COPY_PAD) for i in range(0, 32, 8)]


def test_gradient_accumulation_equals_one_big_batch():
    big, micro = micro_batches()
    reference = parameters_after_one_sgd_update([big])
    assert (parameters_after_one_sgd_update(micro, accum_steps=4) - reference).abs().max() < 1e-6


def test_accumulation_without_dividing_by_the_steps_tokens_is_caught():
    big, micro = micro_batches()
    reference = parameters_after_one_sgd_update([big])
    assert (parameters_after_one_sgd_update(micro, per_batch_normalization=True) - reference).abs().max() > 1e-2


def test_accumulation_steps_the_scheduler_once_per_optimizer_step():
    model = make_model(11, 11, n_layers=1, d_model=32, d_ff=64, n_heads=4, dropout=0.0, pad_idx=COPY_PAD)
    optimizer, scheduler = make_optimizer(model, 32, warmup=10)
    batches = [copy_task_batch(4, 5, 11, torch.Generator().manual_seed(i)) for i in range(12)]
    history = []
    train_epoch(model, batches, LabelSmoothing(11, COPY_PAD, 0.1), optimizer, scheduler, accum_steps=4,
                history=history, progress=False)
    assert len(history) == 3 and scheduler.last_epoch == 3
    assert [h["lr"] for h in history] == pytest.approx([rate(s, 32, warmup=10) for s in (1, 2, 3)])


def test_greedy_decode_stops_early_at_the_end_symbol():
    torch.manual_seed(0)
    model = make_model(7, 7, n_layers=1, d_model=16, d_ff=32, n_heads=2, dropout=0.0).eval()
    src = torch.tensor([[2, 3, 4]])
    full = greedy_decode(model, src, torch.ones(1, 1, 1, 3, dtype=torch.bool), max_len=6, start_symbol=1)
    assert full.shape == (1, 7) and full[0, 0] == 1
    first = int(full[0, 1])
    stopped = greedy_decode(model, src, torch.ones(1, 1, 1, 3, dtype=torch.bool), 6, 1, end_symbol=first)
    assert stopped.tolist() == [[1, first]]


def test_train_copy_cli_runs_and_reports_accuracy():
    out = subprocess.run([sys.executable, "-m", "transformer_lib.train", "copy", "--steps", "40", "--seed", "1",
                          "--eval-every", "20", "--quiet", "--device", "cpu"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "step    20: val loss" in out.stdout and "step    40: val loss" in out.stdout
    assert "test accuracy (1,000 held-out sequences):" in out.stdout


def test_batch_rejects_float_token_ids_naming_the_argument():
    src, tgt = torch.randint(2, 9, (2, 4)), torch.randint(2, 9, (2, 5))
    with pytest.raises(TypeError, match="src must hold integer token ids"):
        Batch(src.float(), tgt)
    with pytest.raises(TypeError, match="tgt must hold integer token ids"):
        Batch(src, tgt.bool())


# ---- Muon (chapter 5, deeper): the layers' matrices orthogonalized, Adam for the rest

def _muon_model():
    torch.manual_seed(0)
    return make_model(11, 11, n_layers=2, d_model=32, d_ff=48, n_heads=4, dropout=0.0)


def _step(model, optimizers, batch):
    for optimizer in optimizers:
        optimizer.zero_grad()
    loss_sum(model, batch, LabelSmoothing(11, 0, 0.1)).backward()
    for optimizer in optimizers:
        optimizer.step()


@pytest.mark.parametrize("shape", [(48, 32), (32, 48), (32, 32)])
def test_orthogonalize_sets_every_singular_value_near_one_and_keeps_the_directions(shape):
    from transformer_lib.training import orthogonalize

    torch.manual_seed(1)
    u, _, vh = torch.linalg.svd(torch.randn(*shape), full_matrices=False)
    s = torch.logspace(0, -2, min(shape))  # singular values from 1 down to 1/100
    g = u @ torch.diag(s) @ vh
    o = orthogonalize(g)
    values = torch.linalg.svdvals(o)
    assert o.shape == g.shape and o.dtype == g.dtype
    assert values.min() > 0.6 and values.max() < 1.3, values  # from a spread of two orders of magnitude
    tiny = torch.linalg.svdvals(orthogonalize(u @ torch.diag(torch.logspace(0, -5, min(shape))) @ vh))
    assert tiny.min() < 0.1  # 1/100,000 of the largest grows, but five steps do not bring it near 1
    cosine = (o * (u @ vh)).sum() / (o.norm() * (u @ vh).norm())
    assert cosine > 0.95  # close to U V^T, the exact orthogonal factor
    assert torch.linalg.svdvals(orthogonalize(g, steps=0)).max() <= 1.0 + 1e-2  # divided by its norm first


def test_muon_takes_the_layers_matrices_and_leaves_the_rest_to_adam():
    from transformer_lib.training import Muon

    model = _muon_model()
    matrices, rest = (group["params"] for group in Muon(model).param_groups)
    layer_matrices = [p for part in (model.encoder, model.decoder) for p in part.parameters() if p.ndim == 2]
    assert {id(p) for p in matrices} == {id(p) for p in layer_matrices} and len(matrices) == 2 * 6 + 2 * 10
    assert all(p.ndim == 1 or p.size(0) == 11 for p in rest)  # norms, biases, the tied embedding and generator
    assert len(matrices) + len(rest) == len(list(model.parameters()))


def test_muon_steps_as_pytorchs_muon_and_adam_do():
    import copy

    from transformer_lib.training import Muon

    model = _muon_model()
    twin = copy.deepcopy(model)
    ours = Muon(model)
    position = {id(p): i for i, p in enumerate(model.parameters())}
    twin_params = list(twin.parameters())
    matrices, others = ([twin_params[position[id(p)]] for p in g["params"]] for g in ours.param_groups)
    theirs = [torch.optim.Muon(matrices, lr=2e-3, weight_decay=0.0, adjust_lr_fn="match_rms_adamw"),
              torch.optim.Adam(others, lr=2e-3, betas=(0.9, 0.98), eps=1e-9)]
    for group in ours.param_groups:
        group["lr"] = 2e-3
    start = [p.detach().clone() for p in model.parameters()]
    batch = copy_task_batch(8, 6, 11, torch.Generator().manual_seed(3))
    for _ in range(4):
        _step(model, [ours], batch)
        _step(twin, theirs, batch)
    for a, b, s in zip(model.parameters(), twin.parameters(), start):
        assert not torch.equal(a, s)  # every tensor moved
        torch.testing.assert_close(a, b, rtol=0, atol=2e-6)


def test_a_muon_run_resumes_from_its_saved_state_exactly(tmp_path):
    from transformer_lib.files import read_training_state, restore_training_state, save_training_state

    batch = copy_task_batch(8, 6, 11, torch.Generator().manual_seed(4))
    model = _muon_model()
    optimizer, scheduler = make_optimizer(model, 32, factor=1.0, warmup=10, muon=True)
    for _ in range(3):
        _step(model, [optimizer], batch)
        scheduler.step()
    path = save_training_state(tmp_path / "state.safetensors", model, optimizer, scheduler, epoch=1)
    resumed = _muon_model()
    resumed_optimizer, resumed_scheduler = make_optimizer(resumed, 32, factor=1.0, warmup=10, muon=True)
    restore_training_state(*read_training_state(path), resumed, resumed_optimizer, resumed_scheduler)
    for m, o, s in ((model, optimizer, scheduler), (resumed, resumed_optimizer, resumed_scheduler)):
        _step(m, [o], batch)
        s.step()
    assert [g["lr"] for g in optimizer.param_groups] == [g["lr"] for g in resumed_optimizer.param_groups]
    assert optimizer.param_groups[0]["lr"] == pytest.approx(rate(5, 32, 1.0, 10))  # both groups follow the schedule
    for a, b in zip(model.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_recipe_asks_for_muon():
    from transformer_lib import runs
    from transformer_lib.training import Muon
    from transformer_lib.translation import Recipe

    from transformer_lib.data import Vocab

    class Data:  # what build reads of chapter 8's TranslationData
        src_vocab = tgt_vocab = Vocab.build([["ein", "hund", "a", "dog"]], min_freq=1)
        train = [([4, 5], [1, 6, 7, 2])] * 4

    recipe = Recipe(n_layers=1, d_model=16, d_ff=32, n_heads=2, muon=True)
    assert isinstance(runs.build(recipe, Data, "cpu")[2], Muon)
    assert type(runs.build(Recipe(n_layers=1, d_model=16, d_ff=32, n_heads=2), Data, "cpu")[2]) is torch.optim.Adam
