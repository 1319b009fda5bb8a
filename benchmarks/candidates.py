# Hand-written benchmark (not generated from a notebook).
"""What else could make training faster: each candidate change to our fast path, measured on its own, in one run.

    python benchmarks/candidates.py [--repeats 5] [--batches 6] [--threads 1] [--record]

The setting is benchmarks/speed.py's (same configuration, Multi30k batches, label smoothing 0.1, fused Adam); the
baseline is our fast path, in float32 and, where the CPU multiplies bfloat16 in hardware, under bfloat16 autocast.
Each candidate changes one thing:

- packed q/k/v: self-attention keeps one (3 d_model, d_model) parameter instead of concatenating three every step;
- loss from logits: the generator stops at the logits and the label-smoothed loss takes its own log-sum-exp (one
  autograd function whose backward is softmax minus target), so no log-probability tensor is stored or copied;
- vocabulary padded to 64: the output projection gets a multiple of 64 rows (5,892 become 5,952);
- no attention dropout: lets PyTorch's fused attention kernel run in training (a change to the model);
- no oneDNN (bfloat16 only): torch.backends.mkldnn off, so bfloat16 matrix multiplications take PyTorch's own
  kernels. These are so slow that a training step would take minutes here, so this one is measured on the model's
  largest matrix multiplication alone (tokens x d_model times d_model x d_ff), oneDNN on against off.

All variants are measured interleaved, round after round; the table gives medians, each as a ratio to the baseline of
its dtype. A profile of the baseline gives the share of its time in matrix multiplications, hence the ratio against
nn.Transformer a fast path with nothing but matrix multiplications would reach. `--record` writes
benchmarks/candidates.json, which chapter 9 renders.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "99")  # keeps the profiler's start/stop lines out of the output
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed  # noqa: E402  (the setting: configuration, batches, optimizer)
from recording import add_common_options, require_at_least_one, save_record  # noqa: E402

from transformer_lib.fast import FastLabelSmoothing, FusedMultiHeadAttention, cpu_has_bf16, use_fast_path  # noqa: E402
from transformer_lib.model import make_model  # noqa: E402
from transformer_lib.runtime import machine, torch_threads  # noqa: E402


class PackedSelfAttention(FusedMultiHeadAttention):
    """Self-attention with its query, key and value projections kept as one packed parameter."""

    def pack(self):
        d = self.d_model
        self.w_qkv = torch.nn.Linear(d, 3 * d)
        with torch.no_grad():
            self.w_qkv.weight.copy_(torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight]))
            self.w_qkv.bias.copy_(torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias]))
        del self.w_q, self.w_k, self.w_v
        return self

    def forward(self, query, key, value, mask=None):
        B, L, d = query.shape
        q, k, v = (self.split_heads(t) for t in self.w_qkv(query).split(d, dim=-1))
        p = self.dropout.p if self.training else 0.0
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        return self.w_o(x.transpose(1, 2).reshape(B, L, d))


class _SmoothedFromLogits(torch.autograd.Function):
    """Chapter 9's closed-form label-smoothed loss, from logits: loss = C - sum_j target_j (z_j - lse)."""

    @staticmethod
    def forward(ctx, logits, target, smoothing: float, pad: int):
        z = logits.float()
        N, V = z.shape
        confidence, other = 1.0 - smoothing, smoothing / (V - 2)
        real = (target != pad).to(z.dtype)
        lse = torch.logsumexp(z, dim=1)
        z_y = z.gather(1, target.unsqueeze(1)).squeeze(1)
        rest = z.sum(dim=1) - z[:, pad] - z_y - (V - 2) * lse  # sum of log p_j over j not y, not <pad>
        constant = confidence * math.log(confidence) + smoothing * math.log(other)
        loss = constant - confidence * (z_y - lse) - other * rest
        ctx.save_for_backward(logits, target, real, lse)
        ctx.constants = (confidence, other, pad)
        return (loss * real).sum()

    @staticmethod
    def backward(ctx, grad):
        logits, target, real, lse = ctx.saved_tensors
        confidence, other, pad = ctx.constants
        g = torch.exp(logits.float() - lse.unsqueeze(1)).sub_(other)  # softmax - the smoothed target (not y, <pad>)
        g.scatter_add_(1, target.unsqueeze(1), torch.full_like(lse, other - confidence).unsqueeze(1))
        g[:, pad] += other
        g.mul_((real * grad).unsqueeze(1))
        return g.to(logits.dtype), None, None, None


def logits_loss(pad: int):
    return lambda logits, target: _SmoothedFromLogits.apply(logits, target, 0.1, pad)


def train_steps(model, criterion, amp_dtype, optimizer, batches) -> float:
    """speed.train_steps without its float copy of the output: each loss here takes float32 itself."""
    model.train()
    start = time.perf_counter()
    for b in batches:
        with torch.autocast("cpu", dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            out = model(b.src, b.tgt_in, b.src_mask, b.tgt_mask)
        loss = criterion(out.reshape(-1, out.size(-1)), b.tgt_out.reshape(-1)) / b.n_tokens
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def build(src_vocab: int, tgt_vocab: int, pad: int, change: str):
    torch.manual_seed(0)
    model = use_fast_path(make_model(src_vocab, tgt_vocab, **speed.CONFIG, pad_idx=pad))
    if change == "packed q/k/v":
        for layer in list(model.encoder.layers) + list(model.decoder.layers):
            layer.self_attn.__class__ = PackedSelfAttention
            layer.self_attn.pack()
    elif change == "loss from logits":
        model.generator.forward = model.generator.proj.forward  # logits, not log-probabilities
    elif change == "no attention dropout":
        for module in model.modules():
            if isinstance(module, FusedMultiHeadAttention):
                module.dropout.p = 0.0
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--batches", type=int, default=6, help="training steps per variant and round (default 6)")
    add_common_options(parser, "candidates.json")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "repeats", "batches", "threads")
    with torch_threads(args.threads):
        return _run(args)


def _run(args) -> int:
    warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")  # from mkldnn.flags(), harmless
    device = torch.device("cpu")
    bf16 = cpu_has_bf16()
    batches, src_vocab, tgt_vocab, source = speed.batches_and_vocab(args.batches + 1, device)
    warm, batches = batches[0], batches[1:]
    S, V, pad = len(src_vocab), len(tgt_vocab), tgt_vocab.pad_idx
    padded = -(-V // 64) * 64
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    print(f"machine: {machine()}, {torch.get_num_threads()} thread(s), load average {load}; data: {source}; "
          f"vocabularies {S:,} / {V:,}; bf16 matmul in hardware: {bf16}")
    changes = ["baseline", "packed q/k/v", "loss from logits", "vocabulary padded to 64", "no attention dropout"]
    runs = {}
    for amp in [None, torch.bfloat16] if bf16 else [None]:
        tag = "bf16 autocast" if amp else "fp32"
        for change in changes:
            vocab = padded if change == "vocabulary padded to 64" else V
            model = build(S, vocab, pad, change)
            loss = logits_loss(pad) if change == "loss from logits" else FastLabelSmoothing(vocab, pad, 0.1)
            runs[tag, change] = (model, loss, amp, speed.adam(model, device))
    for model, loss, amp, opt in runs.values():
        train_steps(model, loss, amp, opt, [warm])
    seconds = {key: [] for key in runs}
    onednn = {True: [], False: []}
    m = round(sum(b.n_tokens for b in batches) / len(batches))
    d, f = speed.CONFIG["d_model"], speed.CONFIG["d_ff"]
    a, b = torch.randn(m, d).bfloat16(), torch.randn(d, f).bfloat16()
    for _ in range(args.repeats):
        for key, (model, loss, amp, opt) in runs.items():
            seconds[key].append(train_steps(model, loss, amp, opt, batches))
        for enabled in onednn if bf16 else ():
            with torch.backends.mkldnn.flags(enabled=enabled):
                a @ b  # warm-up
                start = time.perf_counter()
                a @ b
                onednn[enabled].append(time.perf_counter() - start)

    share = {}
    for tag, amp in [("fp32", None)] + ([("bf16 autocast", torch.bfloat16)] if bf16 else []):
        model, loss, _, opt = runs[tag, "baseline"]
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            train_steps(model, loss, amp, opt, batches[:2])
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events)
        matmuls = sum(e.self_cpu_time_total for e in events if e.key in ("aten::mm", "aten::addmm", "aten::bmm"))
        share[tag] = matmuls / total

    record = {"machine": machine(), "threads": torch.get_num_threads(), "load": load, "repeats": args.repeats,
              "batches": len(batches), "vocabulary": V, "padded_vocabulary": padded, "matmul_share": {},
              "variants": []}
    print(f"\n{'dtype':<14} {'change':<26} {'s/step':>8} {'spread':>7} {'vs baseline':>12}")
    for (tag, change), secs in seconds.items():
        med = statistics.median(secs) / len(batches)
        base = statistics.median(seconds[tag, "baseline"]) / len(batches)
        spread = (max(secs) - min(secs)) / 2 / statistics.median(secs)
        print(f"{tag:<14} {change:<26} {med:>8.3f} {spread:>6.0%} {base / med:>11.2f}x")
        record["variants"].append({"dtype": tag, "change": change, "seconds_per_step": round(med, 4),
                                   "spread": round(spread, 3),
                                   "ratio": round(base / med, 3)})
    if bf16:
        slower = statistics.median(onednn[False]) / statistics.median(onednn[True])
        record["onednn"] = {"shape": [m, d, f], "slower_without": round(slower, 1)}
        print(f"bf16 matmul {m} x {d} x {f}: {slower:.1f}x slower with oneDNN off")
    for tag, value in share.items():
        print(f"{tag}: matrix multiplications are {value:.0%} of the baseline's profiled time")
        record["matmul_share"][tag] = round(value, 3)
    if args.record:
        save_record(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
