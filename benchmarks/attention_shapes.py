# Hand-written benchmark (not generated from a notebook).
"""F.scaled_dot_product_attention on CUDA: the first and the second call for each of 12 new batch shapes, for three
sets of kernels: PyTorch's default (which picks cuDNN's kernel on a Hopper GPU), every kernel but cuDNN's (what
chapter 9's fast path uses on CUDA), and cuDNN's alone. bfloat16, 8 heads of 32, a padding mask and dropout 0.2,
forward and backward. A kernel that builds a graph for every new shape shows a slow first call.

    python benchmarks/attention_shapes.py      # on a machine with a CUDA GPU

On an NVIDIA H200 with torch 2.11 the default's first call per shape averaged 128.6 ms and the fast path's 2.3 ms.
"""
import contextlib
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DEVICE = "cuda"


def shapes(offset: int) -> list[tuple[int, int]]:
    """12 (batch, length) pairs; a different offset gives shapes no earlier call used."""
    return [(16 + 7 * i + offset, 9 + 3 * i + offset) for i in range(12)]


def measure(label: str, kernels, offset: int) -> None:
    firsts, seconds = [], []
    for batch, length in shapes(offset):
        q = torch.randn(batch, 8, length, 32, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
        k, v = torch.randn_like(q, requires_grad=True), torch.randn_like(q, requires_grad=True)
        mask = torch.ones(batch, 1, 1, length, dtype=torch.bool, device=DEVICE)
        mask[:, :, :, length - 2:] = False
        times = []
        for _ in range(2):
            torch.cuda.synchronize()
            start = time.perf_counter()
            with kernels():
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.2).float().sum().backward()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        firsts.append(times[0])
        seconds.append(times[1])
    print(f"{label}: first call per shape mean {1000 * sum(firsts) / len(firsts):.1f} ms "
          f"(max {1000 * max(firsts):.1f}), second call mean {1000 * sum(seconds) / len(seconds):.2f} ms", flush=True)


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU here; this measures CUDA's attention kernels")
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    measure("warm-up (default kernels)", contextlib.nullcontext, 100)
    measure("default kernels", contextlib.nullcontext, 0)
    measure("all but cuDNN's", lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                                                     SDPBackend.MATH]), 1)
    measure("cuDNN's alone", lambda: sdpa_kernel([SDPBackend.CUDNN_ATTENTION]), 2)


if __name__ == "__main__":
    main()
