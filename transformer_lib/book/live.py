# Hand-written tool module (not generated from a notebook).
"""The live translator's assets: what the page needs to read German as chapter 6's tokenizer reads it.

`tokenizer_rules(lang)` exports spaCy's rule-based tokenizer for a language (the prefix, suffix, infix and URL
patterns, rewritten from Python's regular expressions to JavaScript's, and the special cases), which
site_static/translator/tokenizer.js runs with spaCy's algorithm. `tokenizer_assets(model)` adds a checkpoint's BPE
and vocabularies. tests/test_live.py holds the page's tokenizer to the book's on every sentence of test2016 and the
validation set.
"""
from __future__ import annotations

import re

__all__ = ["to_javascript", "tokenizer_rules", "tokenizer_assets", "model_weights", "on_page"]

_SYNTAX = set("^$\\.*+?()[]{}|/")


def to_javascript(pattern: str) -> str:
    """A regular expression of Python's `re` (as spaCy compiles its affixes) as one for JavaScript's `u` flag: `\\w`
    and `\\d` by their Unicode classes (Python's are Unicode, JavaScript's ASCII), `\\U0001F600` as `\\u{1F600}`, and
    the escapes `u` refuses (`\\!`, `\\'`) as the plain character. Raises ValueError on an escape it does not know."""
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
    p = re.sub(r"^\(\?u\)", "", pattern)
    out, i, in_class = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            n = p[i + 1]
            if n == "U":
                out.append("\\u{%X}" % int(p[i + 2:i + 10], 16))
                i += 10
                continue
            if n == "u":
                out.append(p[i:i + 6])
                i += 6
                continue
            if n == "d":
                out.append("\\p{Nd}")
            elif n == "w":
                out.append("\\p{L}\\p{N}_" if in_class else "[\\p{L}\\p{N}_]")
            elif n in "sS" or n in _SYNTAX or (in_class and n == "-"):
                out.append("\\" + n)
            elif n.isalnum():
                raise ValueError(f"pattern: the escape \\{n} at character {i} has no JavaScript twin here")
            else:
                out.append(n)
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


def tokenizer_rules(lang: str) -> dict:
    """spaCy's tokenizer rules for `lang` (spacy.blank), for tokenizer.js: the patterns and the special cases, and
    which special cases the phrase matcher finds after the affixes cut them (spaCy's add_special_case)."""
    from transformer_lib.checks.data import blank_pipeline

    t = blank_pipeline(lang).tokenizer
    rules = {text: [piece[65] for piece in pieces] for text, pieces in t.rules.items()}  # 65: ORTH
    matched = sorted(s for s in rules if t.find_prefix(s) or t.find_infix(s) or t.find_suffix(s) or " " in s)
    return {"prefix": to_javascript(t.prefix_search.__self__.pattern),
            "suffix": to_javascript(t.suffix_search.__self__.pattern),
            "infix": to_javascript(t.infix_finditer.__self__.pattern),
            "url": to_javascript(t.url_match.__self__.pattern), "rules": rules, "matched": matched}


def tokenizer_assets(model) -> dict:
    """What the page's SubwordTokenizer needs from a checkpoint's model (load_checkpoint, pretrained): the German
    rules, the source tokenizer (its BPE and lowercasing) and both vocabularies."""
    from transformer_lib.checkpoint import model_tokenizers

    src_tok, _ = model_tokenizers(model, None)
    if getattr(src_tok, "bpe", None) is None:
        raise ValueError("model: the live translator reads subwords; this model's tokenizer reads whole words")
    src_vocab, tgt_vocab = model.vocabs
    return {"rules": tokenizer_rules(src_tok.lang), "tokenizer": src_tok.to_dict(), "src_itos": src_vocab.itos,
            "tgt_itos": tgt_vocab.itos}


def model_weights(model) -> tuple[list, bytes, dict]:
    """A checkpoint's model for model.js, small enough for a page: ([name, kind, byte offset, shape] per tensor,
    one buffer, the config the page needs). Each matrix of a layer ("...weight" of two dimensions) is int8 with a
    float32 scale per row (its largest magnitude / 127, as chapter 9 quantizes weights); the embedding table, which the
    generator shares, float16 and written once (kind "same" names the tensor it is); biases and norms float32. The
    page computes in float32 with these weights; `on_page` gives the PyTorch model that computes the same. Only the
    pre-norm, sinusoidal encoder-decoder the shipped recipe trains is supported."""
    import numpy as np

    c = model.config
    if not c.norm_first or c.learned_positions:
        raise ValueError("model: the live translator runs pre-norm models with sinusoidal positions (the shipped "
                         f"recipe's); this one has norm_first={c.norm_first}, learned_positions={c.learned_positions}")
    table, parts, offset, seen = [], [], 0, {}

    def put(array) -> int:
        nonlocal offset
        start, pad = offset, (-offset) % 4  # every part starts at a multiple of 4 bytes (a Float32Array's need)
        parts.append(np.zeros(pad, np.uint8).tobytes() + array.tobytes())
        offset += pad + array.nbytes
        return start + pad

    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() in seen:  # a tied weight: the embedding table the generator and decoder share
            table.append([name, "same", seen[tensor.data_ptr()], list(tensor.shape)])
            continue
        seen[tensor.data_ptr()] = name
        w = tensor.detach().to("cpu").float()
        if _stored_as(name, w) == "f16":
            table.append([name, "f16", put(w.half().numpy()), list(tensor.shape)])
        elif _stored_as(name, w) == "i8":
            q, scale = _int8_rows(w)
            table.append([name, "i8", put(q.numpy()), list(tensor.shape), put(scale.numpy())])
        else:
            table.append([name, "f32", put(w.numpy().astype(np.float32)), list(tensor.shape)])
    src_vocab, tgt_vocab = model.vocabs
    config = {"d_model": c.d_model, "n_heads": c.n_heads, "n_layers": c.n_layers, "d_ff": c.d_ff, "eps": c.eps,
              "vocab": c.tgt_vocab, "max_len": c.max_len, "bos": tgt_vocab.bos_idx, "eos": tgt_vocab.eos_idx,
              "pad": tgt_vocab.pad_idx}
    return table, b"".join(parts), config


def _stored_as(name: str, tensor) -> str:
    """How the page stores a weight: the embedding table float16, a layer's matrix int8 rows, the rest float32."""
    if name.endswith("embedding.weight"):
        return "f16"
    return "i8" if name.endswith(".weight") and tensor.dim() == 2 else "f32"


def _int8_rows(w):
    """w (out, in) as int8 rows and a float32 scale per row: q = round(w / scale), scale = max |w_row| / 127."""
    import torch

    scale = (w.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny).float()
    return torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def on_page(model):
    """A copy of `model` with the weights the page computes with (model_weights): each layer matrix int8 with its
    row scales, multiplied back in float32, the embedding table through float16. Its translations are the page's."""
    import copy

    import torch

    page = copy.deepcopy(model).float().eval()
    with torch.no_grad():
        for name, p in page.named_parameters():  # a tied weight once, by its first name, as state_dict gives it
            if _stored_as(name, p) == "f16":
                p.copy_(p.half().float())
            elif _stored_as(name, p) == "i8":
                q, scale = _int8_rows(p.detach())
                p.copy_(q.float() * scale[:, None])
    return page
