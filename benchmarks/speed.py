# Hand-written benchmark (not generated from a notebook).
"""Training and decoding speed: nn.Transformer against this book's model, readable and fast, in one run.

    python benchmarks/speed.py [--device auto|cpu|cuda|mps] [--repeats 5] [--batches 8] [--threads 1] [--record]

A fair race. Every variant trains on the same Multi30k-shaped batches (the real corpus when it can be loaded, else
the offline corpus; about 2,000 target tokens a batch) with the same configuration (3+3 layers, d_model 256,
d_ff 512, 8 heads, dropout 0.1, post-norm), the same loss (label smoothing 0.1: PyTorch's own
F.cross_entropy(label_smoothing=0.1) for nn.Transformer, chapter 5's and chapter 9's for ours) and the same
optimizer (Adam, lr 1e-4, betas (0.9, 0.98), eps 1e-9, fused where PyTorch has it, for every variant). The
variants are measured interleaved (A, B, C, then A, B, C again ...) so that a slow phase of the machine hits all
of them; the table gives medians and the spread of the rounds, and each ratio compares variants of the same dtype
(ours in bf16 against nn.Transformer in bf16). Matrix multiplication FLOPs are counted from the shapes, so each
result is also a share of the matmul peak of its dtype, measured at the model's own matrix shapes. The machine,
the thread count and the load average are printed and recorded. `--record` writes the results to
benchmarks/speed.json, from which `python -m transformer_lib.book readme` renders the speed table of docs/speed.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib.data import Tokenizer, Vocab, bucket_batches, encode_pairs, load_translation_data
from transformer_lib.decoding import greedy_decode_cached
from transformer_lib.fast import FastLabelSmoothing, cpu_has_bf16, use_fast_path
from transformer_lib.model import make_model
from transformer_lib.runtime import default_device, machine, torch_threads
from transformer_lib.training import LabelSmoothing, greedy_decode

from recording import add_common_options, require_at_least_one, save_record

CONFIG = dict(n_layers=3, d_model=256, d_ff=512, n_heads=8, dropout=0.1)


class TorchTransformer(nn.Module):
    """nn.Transformer between this book's embeddings and output projection, called like EncoderDecoder; returns
    logits, for F.cross_entropy (which takes its own log-softmax, as a PyTorch user would write it)."""

    def __init__(self, ours: nn.Module, pad_idx: int):
        super().__init__()
        c = CONFIG
        self.src_embed, self.tgt_embed, self.proj = ours.src_embed, ours.tgt_embed, ours.generator.proj
        self.core = nn.Transformer(c["d_model"], c["n_heads"], c["n_layers"], c["n_layers"], c["d_ff"], c["dropout"],
                                   batch_first=True)
        self.pad_idx = pad_idx

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), device=tgt.device, dtype=torch.bool)
        out = self.core(self.src_embed(src), self.tgt_embed(tgt), tgt_mask=causal,
                        src_key_padding_mask=src == self.pad_idx, tgt_key_padding_mask=tgt == self.pad_idx,
                        memory_key_padding_mask=src == self.pad_idx)
        return self.proj(out)


def batches_and_vocab(n_batches: int, device):
    pairs, source = load_translation_data("train")
    de, en = Tokenizer("de"), Tokenizer("en")
    src_vocab = Vocab.build([de(a) for a, _ in pairs])
    tgt_vocab = Vocab.build([en(b) for _, b in pairs])
    batches = bucket_batches(encode_pairs(pairs, de, en, src_vocab, tgt_vocab), 2300, tgt_vocab.pad_idx, seed=0)
    return [b.to(device) for b in batches[:n_batches]], src_vocab, tgt_vocab, source


def matmul_flops(batch, vocab: int) -> float:
    """FLOPs of the matrix multiplications of one training step (forward, and backward at twice the forward)."""
    d, f, L = CONFIG["d_model"], CONFIG["d_ff"], CONFIG["n_layers"]
    B, S = batch.src.shape
    T = batch.tgt_in.size(1)
    enc = L * (2 * B * S * (4 * d * d + 2 * d * f) + 2 * 2 * B * S * S * d)
    dec = L * (2 * B * T * (4 * d * d + 2 * d * f) + 2 * B * T * 2 * d * d + 2 * B * S * 2 * d * d
               + 2 * 2 * B * T * T * d + 2 * 2 * B * T * S * d)
    return 3 * (enc + dec + 2 * B * T * d * vocab)


def adam(model: nn.Module, device) -> torch.optim.Optimizer:
    """The one optimizer every variant gets: the same settings, fused where PyTorch has a fused Adam."""
    fused = device.type in ("cpu", "cuda")
    return torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=fused)


def variants(src_vocab, tgt_vocab, device, bf16: bool) -> dict:
    """name -> (model, loss(output, target), autocast dtype or None, optimizer, the dtype it is compared at)."""
    pad, V = tgt_vocab.pad_idx, len(tgt_vocab)

    def build():
        torch.manual_seed(0)
        return make_model(len(src_vocab), V, **CONFIG, pad_idx=pad).to(device)

    def torch_loss(logits, target):
        return F.cross_entropy(logits, target, ignore_index=pad, reduction="sum", label_smoothing=0.1)

    dtypes = [None, torch.bfloat16] if bf16 else [None]
    out = {}
    for amp in dtypes:
        tag = "bf16 autocast" if amp else "fp32"
        reference = TorchTransformer(build(), pad).to(device)
        out[f"nn.Transformer ({tag})"] = (reference, torch_loss, amp, adam(reference, device))
        if amp is None:
            readable = build()
            out["ours, readable (fp32)"] = (readable, LabelSmoothing(V, pad, 0.1), None, adam(readable, device))
        fast = use_fast_path(build())
        out[f"ours, fast path ({tag})"] = (fast, FastLabelSmoothing(V, pad, 0.1), amp, adam(fast, device))
    return out


def shape_peak(dtype, shapes, device, repeats: int = 5) -> float:
    """The best matmul FLOP/s over the model's own (m, k, n) shapes: the peak this model's matmuls could reach."""
    best = 0.0
    for m, k, n in shapes:
        a, b = torch.randn(m, k, device=device).to(dtype), torch.randn(k, n, device=device).to(dtype)
        a @ b  # warm-up
        fastest = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            if device.type == "cuda":
                torch.cuda.synchronize()
            fastest = min(fastest, time.perf_counter() - start)
        best = max(best, 2 * m * k * n / fastest)
    return best


def train_steps(model, criterion, amp_dtype, optimizer, batches, device) -> float:
    """Seconds for one optimizer step per batch."""
    model.train()
    start = time.perf_counter()
    for b in batches:
        with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            out = model(b.src, b.tgt_in, b.src_mask, b.tgt_mask)  # log-probabilities, or logits (nn.Transformer)
        loss = criterion(out.float().reshape(-1, out.size(-1)), b.tgt_out.reshape(-1)) / b.n_tokens
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def spread(values) -> str:
    m = statistics.median(values)
    return f"±{(max(values) - min(values)) / 2 / m:.0%}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"], default="auto")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--batches", type=int, default=8, help="training steps per variant and round (default 8)")
    add_common_options(parser, "speed.json",
                       "torch CPU threads (default 1: on a busy 2-core machine 2 threads can be far slower)")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "threads", "repeats", "batches")
    with torch_threads(args.threads):
        return _run(args)


def _run(args) -> int:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    record = {"machine": machine(), "threads": torch.get_num_threads(), "repeats": args.repeats,
              "batches": args.batches, "load": None if load is None else round(load, 2), "variants": []}
    device = default_device() if args.device == "auto" else torch.device(args.device)
    bf16 = device.type == "cuda" or (device.type == "cpu" and cpu_has_bf16())
    batches, src_vocab, tgt_vocab, source = batches_and_vocab(args.batches + 1, device)
    warm, batches = batches[0], batches[1:]
    tokens = sum(b.n_tokens for b in batches)
    flops = sum(matmul_flops(b, len(tgt_vocab)) for b in batches)
    record.update(device=str(device), tokens_per_batch=round(tokens / len(batches)), data=source.split(':')[0])
    print(f"machine: {machine()}, {torch.get_num_threads()} thread(s) (torch.set_num_threads), device {device}, "
          f"load average {load if load is None else f'{load:.2f}'}; bf16 matmul in hardware: {bf16}")
    print(f"data: {source}; vocabularies {len(src_vocab):,} / {len(tgt_vocab):,}; {len(batches)} batches, "
          f"{tokens / len(batches):,.0f} target tokens a batch on average")

    d, f, m = CONFIG["d_model"], CONFIG["d_ff"], round(tokens / len(batches))
    shapes = [(m, d, d), (m, d, f), (m, f, d), (m, d, len(tgt_vocab))]  # projections, feed-forward, vocabulary
    peaks = {torch.float32: [], torch.bfloat16: []}
    runs = variants(src_vocab, tgt_vocab, device, bf16)
    for model, criterion, amp, opt in runs.values():
        train_steps(model, criterion, amp, opt, [warm], device)
    seconds = {name: [] for name in runs}
    for _ in range(args.repeats):
        for dtype in ([torch.float32, torch.bfloat16] if bf16 else [torch.float32]):
            peaks[dtype].append(shape_peak(dtype, shapes, device))
        for name, (model, criterion, amp, opt) in runs.items():
            seconds[name].append(train_steps(model, criterion, amp, opt, batches, device))

    print(f"\ntraining: {args.repeats} interleaved rounds of {len(batches)} steps; medians, ± half the range; "
          "each ratio against nn.Transformer at the same dtype")
    print(f"{'variant':<34} {'tokens/s':>10} {'spread':>7} {'vs nn.Transformer':>18} {'matmul TFLOP/s':>15} "
          f"{'of peak':>8}")
    for name, secs in seconds.items():
        med = statistics.median(secs)
        tag = "bf16 autocast" if "bf16" in name else "fp32"
        base = statistics.median(seconds[f"nn.Transformer ({tag})"])
        peak = statistics.median(peaks[torch.bfloat16 if "bf16" in name else torch.float32])
        print(f"{name:<34} {tokens / med:>10,.0f} {spread(secs):>7} {base / med:>17.2f}x "
              f"{flops / med / 1e12:>15.3f} {flops / med / peak:>8.1%}")
        record["variants"].append({"name": name, "tokens_per_s": round(tokens / med, 1),
                                   "spread": round((max(secs) - min(secs)) / 2 / med, 3),
                                   "ratio": round(base / med, 3), "peak_share": round(flops / med / peak, 4),
                                   "peak_tflops": round(peak / 1e12, 4)})
    for dtype, values in peaks.items():
        if values:
            print(f"matmul peak, {str(dtype).split('.')[-1]:>8}: {statistics.median(values) / 1e12:.3f} TFLOP/s "
                  f"(best of the model's shapes {shapes}, {spread(values)})")

    model = runs["ours, readable (fp32)"][0].eval()
    src = batches[0].src[:32]
    mask = batches[0].src_mask[:32]
    times = {"recompute the prefix": [], "key/value cache": []}
    outputs = {}
    for _ in range(args.repeats):
        for name, decode in (("recompute the prefix", greedy_decode), ("key/value cache", greedy_decode_cached)):
            start = time.perf_counter()
            outputs[name] = decode(model, src, mask, max_len=50, start_symbol=tgt_vocab.bos_idx)
            times[name].append(time.perf_counter() - start)
    same = torch.equal(outputs["recompute the prefix"], outputs["key/value cache"])
    slow, fast = (statistics.median(times[n]) for n in times)
    print(f"\ngreedy decoding, 32 sentences x 50 tokens, readable model: recompute {slow:.2f}s "
          f"({spread(times['recompute the prefix'])}), cache {fast:.2f}s ({spread(times['key/value cache'])}): "
          f"{slow / fast:.1f}x faster; identical output: {same}")
    record["decoding"] = {"sentences": int(src.size(0)), "tokens": 50, "recompute_s": round(slow, 3),
                          "cache_s": round(fast, 3), "identical": same}
    if args.record:
        save_record(args.record, record, "; `python -m transformer_lib.book readme` puts it into docs/speed.md")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
