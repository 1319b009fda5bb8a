"""The book on a GPU. has_bf16's rule (hardware bfloat16 only) runs everywhere, on a faked device; the tests marked
`cuda` run wherever CUDA is present and are skipped, saying so, where it is not: GPT-2's and Llama's proofs in float32
and bfloat16, a training step, the key/value caches, beam search and int8 serving, each against the same work on the
CPU.
"""
import dataclasses

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from transformer_lib import fast
from transformer_lib.attention import padding_mask
from transformer_lib.decoding import beam_search
from transformer_lib.gpt import GPT, GPTConfig, from_gpt2, generate, lm_loss
from transformer_lib.model import make_model
from transformer_lib.modern import BlockConfig, ModernGPT, from_llama

from test_hf import randomized  # tests/ is on the path: pytest puts a test file's folder there

CUDA = torch.device("cuda")


@pytest.mark.parametrize("capability, expected", [((7, 5), False), ((8, 0), True), ((9, 0), True), ((6, 1), False)])
def test_has_bf16_on_cuda_means_hardware_bfloat16_not_emulation(monkeypatch, capability, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # what torch says on a T4 too
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert fast.has_bf16("cuda") is expected


def test_has_bf16_is_false_on_a_machine_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert fast.has_bf16(torch.device("cuda")) is False  # a torch.device is taken as given: the rule still says no
    assert fast.has_bf16("meta") is False
    with pytest.raises(ValueError, match="device='cuda'"):
        fast.has_bf16("cuda")  # a name is checked against the machine first


def random_pair(kind: str, seed: int = 0):
    """A random tiny transformers model and ours converted from it. Weights drawn afresh, so that every one counts:
    norm gains from 1 + N(0, std^2), where they start, every other tensor from N(0, std^2)."""
    if kind == "gpt2":
        theirs = GPT2LMHeadModel(GPT2Config(vocab_size=61, n_positions=24, n_embd=32, n_layer=2, n_head=4,
                                            bos_token_id=None, eos_token_id=None))
    else:
        theirs = LlamaForCausalLM(LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=24,
                                              rope_theta=500000.0, rms_norm_eps=1e-5, bos_token_id=None,
                                              eos_token_id=None, pad_token_id=None))
    theirs = randomized(theirs, seed, 0.3 if kind == "gpt2" else 0.2)  # test_hf's draw
    return theirs, from_gpt2(theirs) if kind == "gpt2" else from_llama(theirs)


def misconverted(kind: str, theirs, ours, mistake: str):
    """ours built with one mistake a converter could make, so that a test can ask whether its tolerance would see it."""
    if mistake == "norm_eps":  # the book's default 1e-6 instead of the checkpoint's 1e-5
        config = dataclasses.replace(ours.config, norm_eps=1e-6)
    elif mistake == "scale_embeddings":  # token vectors multiplied by sqrt(d_model), as the book's own models do
        config = dataclasses.replace(ours.config, scale_embeddings=True)
    elif mistake == "rope_base":  # the common default 10,000 instead of the checkpoint's 500,000
        config = dataclasses.replace(ours.config, rope_base=10000.0)
    else:
        config = ours.config
    wrong = (GPT if kind == "gpt2" else ModernGPT)(config).eval()
    wrong.load_state_dict(ours.state_dict())
    if mistake == "no pairs_from_halves":  # the query and key projections as transformers stores them
        with torch.no_grad():
            for mine, layer in zip(wrong.layers, theirs.model.layers):
                mine.attn.w_q.weight.copy_(layer.self_attn.q_proj.weight)
                mine.attn.w_k.weight.copy_(layer.self_attn.k_proj.weight)
    return wrong


MISTAKES = {"gpt2": ["scale_embeddings", "norm_eps"], "llama": ["no pairs_from_halves", "rope_base", "norm_eps"]}
FLOAT32_TOLERANCE = 5e-5  # 1e-5 on the CPU's own proofs; a GPU's kernels sum in other orders


def bfloat16_tolerance(spread: float) -> float:
    """bfloat16 keeps 8 bits of mantissa: two models rounding in different places drift apart by about a tenth of the
    logits' standard deviation (spread) here, so the tolerance is 0.15 of it, plus 0.05."""
    return 0.15 * spread + 0.05


def mistakes_for(kind: str, dtype) -> list[str]:
    """The mistakes a check in dtype can tell apart. In bfloat16 the norms' mean square keeps 8 bits, far too few to
    tell an epsilon of 1e-5 from 1e-6, so that mistake is looked for in float32 only."""
    return [m for m in MISTAKES[kind] if dtype == torch.float32 or m != "norm_eps"]


def check_conversion(kind: str, device, dtype, tolerance: float | None = None) -> dict:
    """Our converted model against transformers' on device in dtype: the largest logit gap must be under the
    tolerance (for bfloat16, bfloat16_tolerance of the logits' standard deviation), each of mistakes_for(kind, dtype)
    must give a gap at least 5 times the tolerance, so that the tolerance could not pass it, and in float32 the most
    probable next token must be transformers' at every position. Returns the gaps, by name."""
    theirs, ours = random_pair(kind)
    wrongs = {m: misconverted(kind, theirs, ours, m) for m in mistakes_for(kind, dtype)}
    tokens = torch.randint(0, 61, (3, 24), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        reference = theirs.to(device, dtype)(tokens).logits.float()
        logits = {name: model.to(device, dtype)(tokens).float() for name, model in [("ours", ours), *wrongs.items()]}
    gaps = {name: (x - reference).abs().max().item() for name, x in logits.items()}
    spread = reference.std().item()
    if tolerance is None:
        tolerance = FLOAT32_TOLERANCE if dtype == torch.float32 else bfloat16_tolerance(spread)
    assert gaps["ours"] < tolerance, (gaps, tolerance)
    for mistake in wrongs:
        assert gaps[mistake] > 5 * tolerance, f"the tolerance would not catch {mistake}: {gaps}, {tolerance}"
    if dtype == torch.float32:
        assert torch.equal(logits["ours"].argmax(-1), reference.argmax(-1))
    if "no pairs_from_halves" in wrongs:
        assert not torch.equal(logits["no pairs_from_halves"].argmax(-1), reference.argmax(-1))
    return gaps | {"spread": spread, "tolerance": tolerance}


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_conversion_check_holds_on_the_cpu_and_its_tolerances_would_catch_each_mistake(kind, dtype):
    """The CUDA tests' check, run here: the converted model passes, and each mistake fails by a wide margin."""
    gaps = check_conversion(kind, "cpu", dtype)
    loosest = min(gaps[m] for m in mistakes_for(kind, dtype))
    with pytest.raises(AssertionError, match="would not catch"):  # a tolerance as loose as a mistake is refused
        check_conversion(kind, "cpu", dtype, tolerance=loosest)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_the_conversion_proofs_hold_on_cuda_in_float32(kind):
    check_conversion(kind, CUDA, torch.float32)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_the_conversion_proofs_hold_on_cuda_in_bfloat16(kind):
    if not fast.has_bf16(CUDA):
        pytest.skip("this GPU has no hardware bfloat16 (compute capability below 8.0)")
    check_conversion(kind, CUDA, torch.bfloat16)


# Softmax ignores a constant added to all of a query's scores, and a key bias adds q . b_k to every score of query q:
# the key bias gets no gradient in exact arithmetic. What a device computes for it is rounding noise, which Adam's
# first step (update ~ sign of the gradient) turns into a full step of either sign; so the devices are compared on what
# they must agree on: the loss, every other gradient, and a step of SGD, which moves each weight by its gradient.
ZERO_GRADIENT = ("self_attn.w_k.bias",)


def training_step(device, dtype=torch.float32) -> dict:
    """Chapter 10's GPT, one batch: the loss, each parameter's gradient and its value after one step of SGD."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=40, n_layers=2, d_model=32, n_heads=4, d_ff=64, dropout=0.0, context=16))
    model.to(device=device, dtype=dtype).train()
    tokens = torch.randint(1, 40, (4, 16), generator=torch.Generator().manual_seed(1)).to(device)
    loss = lm_loss(model(tokens[:, :-1]), tokens[:, 1:], pad_idx=0)
    loss.backward()
    grads = {f"grad {name}": p.grad.detach().cpu().clone() for name, p in model.named_parameters()}
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    return ({f"step {name}": p.detach().cpu() for name, p in model.named_parameters()} | grads
            | {"loss": loss.detach().cpu()})


def test_the_key_bias_gets_no_gradient_so_the_gpu_test_leaves_it_out():
    """The reason ZERO_GRADIENT is excluded, checked in float64 on the CPU: the key bias's gradient is zero up to
    rounding, about 1e-12 of the other gradients."""
    grads = {k: v for k, v in training_step("cpu", torch.float64).items() if k.startswith("grad ")}
    zero = [v.abs().max().item() for k, v in grads.items() if k.endswith(ZERO_GRADIENT)]
    rest = max(v.abs().max().item() for k, v in grads.items() if not k.endswith(ZERO_GRADIENT))
    assert len(zero) == 2 and rest > 1e-3
    assert max(zero) < 1e-12 * rest, (max(zero), rest)


@pytest.mark.cuda
def test_a_training_step_on_cuda_matches_the_cpus():
    on_gpu, on_cpu = training_step(CUDA), training_step("cpu")
    assert torch.isfinite(on_gpu["loss"])
    compared = [name for name in on_cpu if not name.endswith(ZERO_GRADIENT)]
    assert len(compared) == len(on_cpu) - 4  # the two layers' key biases, gradient and step
    for name in compared:
        assert torch.allclose(on_gpu[name], on_cpu[name], atol=1e-5, rtol=1e-4), name


def cached_and_recomputed(device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Greedy tokens with each key/value cache and by recomputing the prefix: chapter 10's GPT and chapter 11's block."""
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=40, n_layers=2, d_model=32, n_heads=4, d_ff=64, context=24)).to(device).eval()
    modern = ModernGPT(BlockConfig(40, 2, 32, 4, 64, 0.0, 24, "rms", "swiglu", "rope", 2, False)).to(device).eval()
    prompt, pairs = torch.randint(0, 40, (3, 4)).to(device), []
    with torch.no_grad():
        for model in (gpt, modern):
            full = prompt
            for _ in range(12):
                full = torch.cat([full, model(full)[:, -1:].argmax(-1)], 1)
            if model is gpt:
                cached = generate(gpt, prompt, 12, greedy=True)
            else:
                cache, out = [None] * 2, []
                logits = modern(prompt, cache)
                for _ in range(12):
                    out.append(logits[:, -1:].argmax(-1))
                    logits = modern(out[-1], cache)
                cached = torch.cat(out, 1)
            pairs.append((cached, full[:, 4:]))
    return pairs


@pytest.mark.cuda
def test_the_key_value_caches_on_cuda_give_the_recomputed_tokens():
    for cached, recomputed in cached_and_recomputed(CUDA):
        assert cached.device.type == "cuda" and torch.equal(cached, recomputed)


def beams(device) -> tuple[list, list]:
    """Chapter 7's beam search and chapter 9's FastBeamSearch in float32 on a small translator."""
    torch.manual_seed(0)
    model = make_model(50, 50, n_layers=2, d_model=32, d_ff=64, n_heads=4, pad_idx=1).to(device).eval()
    src = torch.randint(4, 50, (3, 7), generator=torch.Generator().manual_seed(1))
    src[1, 5:] = 1
    src = src.to(device)
    mask = padding_mask(src, 1)
    return (beam_search(model, src, mask, 10, 2, 3, beam_size=3),
            fast.FastBeamSearch(model, torch.float32)(src, mask, 10, 2, 3, 3))


@pytest.mark.cuda
def test_beam_search_on_cuda_finds_what_it_finds_on_the_cpu():
    on_gpu, on_cpu = beams(CUDA), beams("cpu")
    assert on_gpu[0] == on_cpu[0] and on_gpu[1] == on_gpu[0]
    assert max(map(len, on_cpu[0])) > 2  # searched, not ended at once


def attention_kernels(device) -> list[list[str]]:
    """The operations (CPU) or kernels (CUDA) the profiler saw in the fast path's attention, forward and backward,
    in float32 and then under bfloat16 autocast."""
    from torch.profiler import ProfilerActivity, profile

    from transformer_lib.fast import FusedMultiHeadAttention

    device = torch.device(device)
    torch.manual_seed(0)
    mha = FusedMultiHeadAttention(64, 8, dropout=0.1).to(device).train()
    x = torch.randn(3, 11, 64, device=device)
    mask = torch.ones(3, 1, 1, 11, dtype=torch.bool, device=device)
    mask[0, :, :, 9:] = False
    seen = []
    for dtype in (None, torch.bfloat16):
        activity = ProfilerActivity.CUDA if device.type == "cuda" else ProfilerActivity.CPU
        with profile(activities=[activity]) as prof:
            with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                mha(x, x, x, mask).float().sum().backward()
            if device.type == "cuda":
                torch.cuda.synchronize()
        seen.append([e.key for e in prof.key_averages()])
    return seen


def test_the_profile_of_the_fast_attention_names_its_operations_on_the_cpu():
    """The CUDA test below reads the profiler the same way; here it must see the attention's own operations."""
    for kernels in attention_kernels("cpu"):
        assert any("scaled_dot_product" in k for k in kernels), kernels


@pytest.mark.cuda
def test_fused_attention_on_cuda_leaves_cudnns_kernel_out():
    """cuDNN's attention builds a graph for each new shape (benchmarks/attention_shapes.py measures it). The fast
    path's attention runs no cuDNN kernel, in float32 and under bfloat16."""
    for kernels in attention_kernels(CUDA):
        assert kernels and not [k for k in kernels if "cudnn" in k.lower()], kernels


@pytest.mark.cuda
def test_int8_products_on_cuda_are_the_exact_integer_products():
    """On CUDA int8_matmul multiplies in float64: an H200's cuBLAS refused torch._int_mm's row-major int8 products,
    also of shapes its rules allow. Every shape must give the integer product."""
    g = torch.Generator().manual_seed(0)
    for m, k, n in [(3, 40, 24), (17, 32, 48), (64, 256, 1024), (33, 30, 16)]:
        a = torch.randint(-127, 128, (m, k), dtype=torch.int8, generator=g)
        b = torch.randint(-127, 128, (k, n), dtype=torch.int8, generator=g)
        on_gpu = fast.int8_matmul(a.to(CUDA), b.to(CUDA))
        assert on_gpu.dtype == torch.int32 and torch.equal(on_gpu.cpu(), a.long().matmul(b.long()).int())


@pytest.mark.cuda
def test_int8_beam_search_on_cuda_finds_what_the_int8_search_finds_on_the_cpu():
    torch.manual_seed(0)
    model = make_model(50, 50, n_layers=2, d_model=32, d_ff=64, n_heads=4, pad_idx=1).eval()
    src = torch.randint(4, 50, (20, 7), generator=torch.Generator().manual_seed(1))
    src[1, 5:] = 1
    found = {}
    for device in ("cpu", CUDA):
        search = fast.FastBeamSearch(model.to(device), torch.int8)
        found[str(device)] = search(src.to(device), padding_mask(src.to(device), 1), 10, 2, 3, 3)
    same = sum(a == b for a, b in zip(found["cpu"], found["cuda"]))
    assert same >= 18, (same, found)  # rounding may differ in a tie, not in most sentences
    assert max(map(len, found["cpu"])) > 2
