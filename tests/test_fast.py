"""Chapter 9: every fast twin computes what its readable original computes."""
import json
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from transformer_lib.attention import MultiHeadAttention, padding_mask, subsequent_mask
from transformer_lib.blocks import LayerNorm
from transformer_lib.fast import (FastDropout, FastLabelSmoothing, FusedLayerNorm, FusedMultiHeadAttention,
                                  use_fast_path)
from transformer_lib.runtime import cpu_has_bf16, matmul_peak
from transformer_lib.data import Vocab
from transformer_lib.model import make_model
from transformer_lib.multi30k import OFFLINE_ENV
from transformer_lib.training import Batch, LabelSmoothing, loss_sum

ROOT = Path(__file__).resolve().parents[1]


def twins(d_model=32, n_heads=4):
    torch.manual_seed(0)
    readable = MultiHeadAttention(d_model, n_heads, dropout=0.0).eval()
    fused = MultiHeadAttention(d_model, n_heads, dropout=0.0).eval()
    fused.load_state_dict(readable.state_dict())
    fused.__class__ = FusedMultiHeadAttention
    return readable, fused


@pytest.mark.parametrize("kind", ["self", "cross", "distinct key and value"])
def test_fused_attention_equals_readable_outputs_and_gradients(kind):
    readable, fused = twins()
    x = torch.randn(3, 6, 32, requires_grad=True)
    memory = torch.randn(3, 4, 32, requires_grad=True)
    other = torch.randn(3, 4, 32)
    tokens = torch.tensor([[5, 6, 7, 1], [5, 6, 1, 1], [5, 1, 1, 1]])
    args = {"self": (x, x, x, subsequent_mask(6)), "cross": (x, memory, memory, padding_mask(tokens, 1)),
            "distinct key and value": (x, memory, other, padding_mask(tokens, 1))}[kind]
    a, b = readable(*args), fused(*args)
    assert torch.allclose(a, b, atol=1e-5)
    inputs = [x, memory] if kind != "self" else [x]
    ga = torch.autograd.grad(a.square().sum(), inputs + list(readable.parameters()))
    gb = torch.autograd.grad(b.square().sum(), inputs + list(fused.parameters()))
    for p, q in zip(ga, gb):
        assert torch.allclose(p, q, atol=1e-4, rtol=1e-4)
    assert fused.attn is None


def test_fused_attention_keeps_the_input_checks():
    _, fused = twins()
    with pytest.raises(ValueError, match="query must have shape"):
        fused(torch.randn(2, 3, 16), torch.randn(2, 3, 32), torch.randn(2, 3, 32))


def test_fused_layer_norm_equals_chapter_3s():
    torch.manual_seed(0)
    norm = LayerNorm(48, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    fast = FusedLayerNorm(48, eps=1e-6)
    fast.load_state_dict(norm.state_dict())
    x = torch.randn(4, 9, 48) * 5 + 2
    assert torch.allclose(norm(x), fast(x), atol=1e-5)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_fast_dropout_keeps_the_right_share_and_the_mean(p):
    torch.manual_seed(0)
    x = torch.ones(200, 1000)
    y = FastDropout(p)(x)
    kept = (y != 0).float().mean().item()
    assert abs(kept - (1 - p)) < 0.005
    assert abs(y.mean().item() - 1.0) < 0.01
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - round(p * 65536) / 65536)))


def test_fast_dropout_is_the_identity_in_eval_mode_or_at_zero_and_passes_gradients():
    x = torch.randn(5, 7, requires_grad=True)
    assert torch.equal(FastDropout(0.5).eval()(x), x)
    assert torch.equal(FastDropout(0.0)(x), x)
    y = FastDropout(0.5)(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    assert torch.equal(grad == 0, y == 0) or torch.all((grad == 0) == (y.detach() == 0))
    odd = torch.randn(3, 5, 7)  # numel not a multiple of 4
    assert FastDropout(0.2)(odd).shape == odd.shape


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.4])
def test_fast_label_smoothing_equals_chapter_5s_loss_and_gradient(smoothing):
    torch.manual_seed(0)
    V = 300
    log_probs = torch.randn(120, V).log_softmax(-1).requires_grad_()
    target = torch.randint(0, V, (120,))
    target[::7] = 1  # padding rows
    slow = LabelSmoothing(V, 1, smoothing)(log_probs, target)
    fast = FastLabelSmoothing(V, 1, smoothing)(log_probs, target)
    assert torch.allclose(slow, fast, rtol=1e-5)
    (g_slow,) = torch.autograd.grad(slow * 2.5, log_probs)
    (g_fast,) = torch.autograd.grad(fast * 2.5, log_probs)
    assert torch.allclose(g_slow, g_fast, atol=1e-6)


def test_fast_label_smoothing_refuses_the_variant_it_does_not_implement():
    with pytest.raises(ValueError, match="spread_over_all=False only"):
        FastLabelSmoothing(10, 0, 0.1, spread_over_all=True)(torch.randn(2, 10).log_softmax(-1), torch.tensor([1, 2]))


def model_pair(**options):
    def build():
        torch.manual_seed(0)
        return make_model(20, 22, n_layers=2, d_model=32, d_ff=64, n_heads=4, dropout=0.1, pad_idx=1, **options)
    return build(), use_fast_path(build())


def batch():
    g = torch.Generator().manual_seed(1)
    src, tgt = torch.randint(2, 20, (4, 7), generator=g), torch.randint(2, 22, (4, 6), generator=g)
    src[1, 5:], tgt[2, 4:] = 1, 1
    return Batch(src, tgt, pad_idx=1)


@pytest.mark.parametrize("options", [{}, {"norm_first": True}])
def test_a_model_on_the_fast_path_computes_the_same_log_probs(options):
    readable, fast = model_pair(**options)
    assert all(torch.equal(a, b) for a, b in zip(readable.state_dict().values(), fast.state_dict().values()))
    assert {type(m) for m in fast.modules()} >= {FusedMultiHeadAttention, FusedLayerNorm, FastDropout}
    b = batch()
    readable.eval(), fast.eval()
    with torch.no_grad():
        a = readable(b.src, b.tgt_in, b.src_mask, b.tgt_mask)
        c = fast(b.src, b.tgt_in, b.src_mask, b.tgt_mask)
    assert torch.allclose(a, c, atol=1e-5)


def test_one_training_step_on_the_fast_path_gives_the_same_weights():
    readable, fast = model_pair()
    for m in (readable, fast):
        for module in m.modules():
            if isinstance(module, nn.Dropout):
                module.p = 0.0
    b = batch()
    for model, criterion in ((readable, LabelSmoothing(22, 1, 0.1)), (fast, FastLabelSmoothing(22, 1, 0.1))):
        (loss_sum(model, b, criterion) / b.n_tokens).backward()
    for (name, p), q in zip(readable.named_parameters(), fast.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5), name
    # SGD, not Adam: a key bias has an exactly zero gradient (softmax ignores a constant added to every score),
    # so its float noise of 1e-10 would become a full Adam step of either sign
    for model in (readable, fast):
        torch.optim.SGD(model.parameters(), lr=0.5).step()
    for (name, p), q in zip(readable.named_parameters(), fast.parameters()):
        assert torch.allclose(p, q, atol=1e-5), name


def test_fused_adam_takes_the_same_step_as_adam():
    a, b = nn.Linear(8, 4), nn.Linear(8, 4)
    b.load_state_dict(a.state_dict())
    x = torch.randn(16, 8)
    for model, fused in ((a, False), (b, True)):
        opt = torch.optim.Adam(model.parameters(), lr=1e-2, fused=fused)
        for _ in range(3):
            model(x).square().sum().backward()
            opt.step()
            opt.zero_grad()
    assert torch.allclose(a.weight, b.weight, atol=1e-6) and torch.allclose(a.bias, b.bias, atol=1e-6)


def test_switching_back_restores_the_readable_classes_and_attention_weights():
    readable, fast = model_pair()
    use_fast_path(fast, False)
    assert [type(m) for m in fast.modules()] == [type(m) for m in readable.modules()]
    b = batch()
    fast.eval()(b.src, b.tgt_in, b.src_mask, b.tgt_mask)
    assert fast.decoder.layers[0].src_attn.attn.shape == (4, 4, 5, 7)
    only = use_fast_path(model_pair()[0], dropout=False)
    assert not any(isinstance(m, FastDropout) for m in only.modules())


def test_bf16_autocast_stays_close_to_float32():
    _, fast = model_pair()
    fast.eval()
    b = batch()
    crit = FastLabelSmoothing(22, 1, 0.1)
    with torch.no_grad():
        l32 = loss_sum(fast, b, crit)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            l16 = loss_sum(fast, b, crit)
    assert l16.dtype == torch.float32
    assert abs(l16 - l32) / l32 < 0.02


def test_matmul_peak_and_bf16_detection_return_sensible_values():
    peak = matmul_peak(torch.float32, size=128, repeats=2)  # a rate: positive and finite, whatever the machine's load
    assert isinstance(peak, float) and 0 < peak < float("inf")
    assert isinstance(cpu_has_bf16(), bool)


def _offline(monkeypatch):
    """The offline corpus for a benchmark's batches: what is tested is how it races, not on which sentences, and
    tokenizing Multi30k's 29,000 pairs takes longer than the race."""
    monkeypatch.setenv(OFFLINE_ENV, "1")


def test_the_speed_benchmark_runs_and_prints_its_table(capsys, monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    _offline(monkeypatch)
    import speed

    record = tmp_path / "speed.json"
    assert speed.main(["--device", "cpu", "--repeats", "1", "--batches", "1", "--record", str(record)]) == 0
    out = capsys.readouterr().out
    for row in ("nn.Transformer (fp32)", "ours, readable (fp32)", "ours, fast path (fp32)", "matmul peak,  float32",
                "identical output: True"):
        assert row in out
    recorded = json.loads(record.read_text())  # what the speed table of docs/speed.md is rendered from
    assert [v["name"] for v in recorded["variants"]][:3] == ["nn.Transformer (fp32)", "ours, readable (fp32)",
                                                            "ours, fast path (fp32)"]
    assert recorded["variants"][0]["ratio"] == 1.0 and recorded["decoding"]["identical"] is True
    assert recorded["threads"] == 1 and recorded["repeats"] == 1
    sys.modules.pop("speed", None)


def test_the_speed_benchmark_races_fairly(monkeypatch):
    """Every variant gets the same optimizer settings and a label-smoothed loss whose gradient is the same to within
    how the smoothing mass is spread (over all V classes for PyTorch, over V - 2 for ours)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import speed

    vocab = Vocab([*Vocab.SPECIALS, *(f"w{i}" for i in range(996))])
    runs = speed.variants(vocab, vocab, torch.device("cpu"), bf16=True)
    assert set(runs) == {"nn.Transformer (fp32)", "ours, readable (fp32)", "ours, fast path (fp32)",
                         "nn.Transformer (bf16 autocast)", "ours, fast path (bf16 autocast)"}
    settings = {name: {k: v for k, v in opt.param_groups[0].items() if k != "params"}
                for name, (_, _, _, opt) in runs.items()}
    assert all(s == settings["nn.Transformer (fp32)"] for s in settings.values())
    assert settings["nn.Transformer (fp32)"]["betas"] == (0.9, 0.98) and settings["nn.Transformer (fp32)"]["fused"]
    torch.manual_seed(0)
    logits = torch.randn(64, 1000, dtype=torch.float64)
    target = torch.randint(4, 1000, (64,))
    target[:5] = vocab.pad_idx
    grads = {}
    for name, (_, loss, _, _) in runs.items():
        x = logits.clone().requires_grad_()
        out = x if name.startswith("nn.") else x.log_softmax(-1)  # nn.Transformer's loss takes logits
        loss(out if name.startswith("nn.") or "readable" in name else out.float(), target).backward()
        grads[name] = x.grad.double()
    reference = grads["nn.Transformer (fp32)"]
    for name, grad in grads.items():
        assert (grad - reference).abs().max() < 1e-3 * reference.abs().max(), name
    sys.modules.pop("speed", None)


@pytest.mark.parametrize("p", [1.0, 1 - 1e-6])
def test_fast_dropout_with_p_rounding_to_one_drops_everything(p):
    x = torch.ones(3, 5, requires_grad=True)
    y = FastDropout(p).train()(x)  # raised ZeroDivisionError when p * 65536 rounded to 65536
    assert torch.equal(y, torch.zeros(3, 5))
    y.sum().backward()
    assert torch.equal(x.grad, torch.zeros(3, 5))


def test_fast_label_smoothing_is_finite_where_padding_has_zero_probability():
    torch.manual_seed(0)
    scores = torch.randn(6, 9)
    scores[:, 0] = -float("inf")  # the model gives padding (id 0) probability 0: log p = -inf
    log_probs = scores.log_softmax(-1).requires_grad_()
    target = torch.tensor([3, 1, 0, 8, 2, 0])  # two padding targets
    fast = FastLabelSmoothing(9, 0, 0.1)(log_probs, target)
    readable = LabelSmoothing(9, 0, 0.1)(log_probs.detach(), target)
    assert torch.isfinite(fast) and fast.item() == pytest.approx(readable.item(), rel=1e-5)
    fast.backward()
    assert torch.isfinite(log_probs.grad).all()


def test_the_candidates_benchmark_runs_and_each_candidate_trains_the_same_model(monkeypatch, tmp_path, capsys):
    """benchmarks/candidates.py: its loss from logits equals chapter 5's label smoothing (value and gradient), its
    packed self-attention computes what the fast path computes, and a run records every candidate."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    _offline(monkeypatch)
    import candidates

    torch.manual_seed(0)
    logits = torch.randn(40, 30, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 30, (40,))
    target[:4] = 1
    ours = candidates.logits_loss(1)(logits, target)
    (g_ours,) = torch.autograd.grad(ours, logits)
    reference = LabelSmoothing(30, 1, 0.1)(logits.log_softmax(-1), target)
    (g_ref,) = torch.autograd.grad(reference, logits)
    assert abs(ours.item() - reference.item()) < 1e-4 * reference.item() and (g_ours - g_ref).abs().max() < 1e-6
    plain, packed = (candidates.build(20, 30, 1, change).eval() for change in ("baseline", "packed q/k/v"))
    src, tgt = torch.randint(4, 20, (2, 6)), torch.randint(4, 30, (2, 5))
    with torch.no_grad():
        assert (plain(src, tgt) - packed(src, tgt)).abs().max() < 1e-5
    assert not any(name.endswith(("w_q.weight", "w_k.weight")) for name, _ in packed.encoder.named_parameters())
    record = tmp_path / "candidates.json"
    assert candidates.main(["--repeats", "1", "--batches", "1", "--record", str(record)]) == 0
    recorded = json.loads(record.read_text())
    changes = [v["change"] for v in recorded["variants"] if v["dtype"] == "fp32"]
    assert changes == ["baseline", "packed q/k/v", "loss from logits", "vocabulary padded to 64",
                       "no attention dropout"]
    assert 0 < recorded["matmul_share"]["fp32"] < 1 and recorded["padded_vocabulary"] % 64 == 0
    assert "matrix multiplications are" in capsys.readouterr().out
    sys.modules.pop("candidates", None)
    sys.modules.pop("speed", None)


def test_the_benchmarks_share_their_options_and_write_records_whole(monkeypatch, tmp_path, capsys):
    import argparse

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import recording

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=1)
    recording.add_common_options(parser, "example.json")
    args = parser.parse_args(["--record"])
    assert args.threads == 1 and args.record == ROOT / "benchmarks" / "example.json"
    with pytest.raises(SystemExit):
        recording.require_at_least_one(parser, parser.parse_args(["--threads", "0"]), "repeats", "threads")
    assert "--repeats and --threads must be at least 1" in capsys.readouterr().err
    path = tmp_path / "run.json"
    recording.save_record(path, {"ratio": 1.5})
    assert json.loads(path.read_text()) == {"ratio": 1.5} and list(tmp_path.iterdir()) == [path]
    assert f"recorded in {path}" in capsys.readouterr().out
    sys.modules.pop("recording", None)


def test_the_fused_attention_leaves_only_cudnns_kernel_out_on_cuda():
    """On CUDA the fast path's attention may use every kernel of F.scaled_dot_product_attention but cuDNN's, which
    builds a graph for every new shape (tests/test_cuda.py checks the kernels on a GPU); on the CPU it is untouched."""
    from torch.nn.attention import SDPBackend

    from transformer_lib import fast

    assert SDPBackend.CUDNN_ATTENTION not in fast._NOT_CUDNN
    assert set(fast._NOT_CUDNN) == {SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH}
