# Hand-written tool module (not generated from a notebook).
"""The checks of chapter 4's exercises (notebooks/04_model.ipynb)."""

from __future__ import annotations

import math

import torch

from transformer_lib.exercises.core import Wrong, _exercise, _trying, _unlike, _unpredictable


@_exercise("4.1", "count the whole model")
def _(model_parameters):
    from transformer_lib.model import make_model
    draw = _unpredictable()  # and a model drawn afresh, of a size no answer can know
    drawn = (draw.randint(5, 5000), draw.randint(1, 8), 8 * draw.randint(1, 40), draw.randint(2, 1000),
             draw.random() < 0.5)
    for vocab, n_layers, d_model, d_ff, shared in ((37000, 6, 512, 2048, True), (37000, 6, 512, 2048, False),
                                                   (11, 2, 32, 64, False), (50, 3, 16, 40, True), drawn):
        with torch.device("meta"):
            model = make_model(vocab, vocab, n_layers, d_model, d_ff, n_heads=4 if d_model % 8 else 8,
                               share_embeddings=shared)
        want, got = sum(p.numel() for p in model.parameters()), model_parameters(vocab, n_layers, d_model, d_ff, shared)
        if not isinstance(got, int):
            raise Wrong(f"model_parameters should return an int, got {type(got).__name__}")
        if got == want:
            continue
        case = f"for vocab {vocab:,}, {n_layers} layers, d_model {d_model}, d_ff {d_ff}, shared={shared}"
        hint = ""
        if want - got == vocab:
            hint = ": the generator's linear layer has a bias, one per vocabulary entry"
        elif want - got == n_layers * (4 * d_model * d_model + 6 * d_model):
            hint = ": each decoder layer has a second attention, over the encoder's output, with its own layer norm"
        elif shared and got - want == 2 * vocab * d_model:
            hint = ": with shared embeddings the source table, target table and generator weight are one tensor"
        raise Wrong(f"{case} make_model has {want:,} parameters, got {got:,}{hint}")
    return ("It matches make_model with and without shared embeddings; the paper's base model has "
            f"{model_parameters(37000, 6, 512, 2048, True):,} with a shared 37,000-token vocabulary.")


@_exercise("4.2", "the cross-attention mask")
def _(cross_attention_mask):
    from transformer_lib.attention import padding_mask
    # the first with padding id 0; the second with padding id 1 and 0 a real word, so that `src != 0` fails it; the
    # third drawn afresh: sizes, a padding id and sentences no answer can know
    draw = _unpredictable()
    batch, src_len, pad = draw.randint(1, 5), draw.randint(2, 12), draw.randint(0, 9)
    lengths = [src_len] + [draw.randint(1, src_len) for _ in range(batch - 1)]  # one whole: causal would differ
    drawn = torch.tensor([[draw.choice([i for i in range(12) if i != pad]) if j < n else pad for j in range(src_len)]
                          for n in lengths])
    for src, tgt_len, pad in ((torch.tensor([[4, 5, 6, 7, 8], [9, 3, 2, 0, 0], [5, 0, 0, 0, 0]]), 4, 0),
                              (torch.tensor([[5, 0, 7, 1, 1, 1], [3, 4, 2, 8, 6, 1]]), 3, 1),
                              (drawn, draw.randint(1, 9), pad)):
        batch, src_len = src.shape
        _trying(f"cross_attention_mask(src, {tgt_len}, {pad}) for src of shape {tuple(src.shape)}")
        got = cross_attention_mask(src, tgt_len, pad)
        if not isinstance(got, torch.Tensor) or got.dtype != torch.bool:
            raise Wrong("cross_attention_mask should return a boolean tensor (True where a query may attend)")
        want = padding_mask(src, pad).expand(batch, 1, tgt_len, src_len)
        try:
            got = torch.broadcast_to(got, (batch, 1, tgt_len, src_len))
        except RuntimeError:
            raise Wrong(f"the mask should broadcast to (batch, heads, target length, source length) = "
                        f"({batch}, 1, {tgt_len}, {src_len}), got shape {tuple(got.shape)}") from None
        if torch.equal(got, ~want):
            raise Wrong("True marks the keys a query may attend to: got True at the source padding and False at the "
                        "words")
        causal = want & torch.ones(tgt_len, src_len, dtype=torch.bool).tril()
        if torch.equal(got, causal):
            raise Wrong("cross-attention has no causal part: at every step the decoder may read the whole source "
                        "sentence")
        if not torch.equal(got, want):
            b, h, q, k = (int(i) for i in (got != want).nonzero()[0])
            raise Wrong(f"with pad={pad}, sentence {b}, target position {q}, source position {k} (token "
                        f"{int(src[b, k])}): expected {bool(want[b, h, q, k])}, got {bool(got[b, h, q, k])}"
                        + (": padding is the id `pad` given, not a number written in" if pad != 0 else ""))
    return "Every target position sees every real source word, and no source padding."


@_exercise("4.3", "tie the embeddings")
def _(tie):
    from transformer_lib.model import make_model
    draw = _unpredictable()  # and a vocabulary and width drawn afresh, so that no size written in passes
    saved = []
    drawn = _unlike(lambda: (draw.randint(5, 60), 2 * draw.randint(2, 24)), ((13, 16),))
    for vocab, d_model in ((13, 16), drawn):
        _trying(f"tie(model) for a shared vocabulary of {vocab} and d_model {d_model}")
        torch.manual_seed(0)
        model = make_model(vocab, vocab, n_layers=1, d_model=d_model, d_ff=32, n_heads=2)
        before = sum(p.numel() for p in model.parameters())
        tie(model)
        src = model.src_embed[0].embedding.weight
        tgt, out = model.tgt_embed[0].embedding.weight, model.generator.proj.weight
        if tgt is not src and out is not src and torch.equal(tgt, src) and torch.equal(out, src):
            raise Wrong("the three tables are equal now, but they are three Parameters, which training will pull "
                        "apart: assign the one Parameter to all three (module.weight = other.weight)")
        for name, weight in (("the target embedding", tgt), ("the generator's projection", out)):
            if weight is not src:
                raise Wrong(f"{name}'s weight should be the source embedding's Parameter itself")
        saved.append(before - sum(p.numel() for p in model.parameters()))
        if saved[-1] != 2 * vocab * d_model:
            raise Wrong(f"tying should save two {vocab} x {d_model} tables ({2 * vocab * d_model} parameters), saved "
                        f"{saved[-1]}")
    return f"One 13 x 16 table now serves the source, the target and the output: {saved[0]} parameters fewer."


@_exercise("4.4", "what Xavier does to a word")
def _(xavier_token_rms):
    draw = _unpredictable()
    for vocab, d_model in ((7851, 256), (37000, 512), (100, 64), (draw.randint(2, 60000), draw.randint(2, 1024))):
        want = math.sqrt(d_model) * math.sqrt(2 / (vocab + d_model))
        got = float(xavier_token_rms(vocab, d_model))
        if abs(got - want) <= 1e-6 * want:
            continue
        case = f"for vocab {vocab:,} and d_model {d_model} the root mean square is {want:.4f}, got {got:.4f}"
        if abs(got - want / math.sqrt(d_model)) <= 1e-6 * want:
            raise Wrong(f"{case}: the token embedding multiplies its table by sqrt(d_model)")
        if abs(got - want * math.sqrt(3)) <= 1e-6 * want:
            raise Wrong(f"{case}: sqrt(6 / (fan_in + fan_out)) is the bound a of U(-a, a), whose standard deviation "
                        "is a / sqrt(3)")
        raise Wrong(case)
    words, positions = xavier_token_rms(7851, 256), 1 / math.sqrt(2)
    return (f"Chapter 8's 7,851 German words at d_model 256 give {words:.3f} against the sinusoids' "
            f"{positions:.3f}: at the start the positions drown the words.")
