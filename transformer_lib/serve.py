# Hand-written tool module (not generated from a notebook).
"""Serve a trained model with CTranslate2, the inference engine such models are deployed with on CPUs.

    python -m transformer_lib.serve export OUT_DIR [--checkpoint PATH] [--quantization int8]
    python -m transformer_lib.serve translate OUT_DIR "Ein Hund rennt durch den Schnee." [--beam 5]
    echo "Zwei Männer spielen Fußball." | python -m transformer_lib.serve translate OUT_DIR

Sentences come from the arguments, else one per line from standard input, as `python -m transformer_lib.translate`
reads them: every input line gets one output line, and a blank line stays blank.

`export` writes a CTranslate2 model folder from a checkpoint of this book (default: the shipped model): the same
weights under CTranslate2's names (query, key and value projections fused as it expects), our positional table,
both vocabularies, and the tokenizer settings. With `--quantization int8` the weights are stored as 8-bit integers
(a quarter of the size, and faster matrix multiplications on a CPU). `translate` reads it back with
`ctranslate2.Translator`. CTranslate2 is an optional dependency: `pip install ctranslate2` (or the package's
`serve` extra).

The engine's beam search divides a hypothesis' log-probability by length ** length_penalty, where ours (chapter 7)
divides by ((5 + length) / 6) ** length_penalty; greedy decoding has no penalty and gives the same tokens.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

__all__ = ["to_ctranslate2", "CTranslate2Model", "main"]


def _ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise ImportError("CTranslate2 is not installed: pip install ctranslate2 (in a clone of the book: "
                          "pip install -e \".[serve]\")") from None
    return ctranslate2


def _spec(model, src_vocab, tgt_vocab):
    """A CTranslate2 TransformerSpec holding `model`'s weights."""
    from ctranslate2.specs import common_spec, transformer_spec

    c = model.config
    spec = transformer_spec.TransformerSpec.from_config((c.n_layers, c.n_layers), c.n_heads, pre_norm=c.norm_first,
                                                        activation=common_spec.Activation.RELU)
    spec.config.layer_norm_epsilon = c.eps
    state = {k: v.detach().float().cpu().numpy().copy() for k, v in model.state_dict().items()}  # never a view

    def linear(target, name: str) -> None:
        target.weight, target.bias = state[f"{name}.weight"], state[f"{name}.bias"]

    def fused(target, names: list[str]) -> None:  # CTranslate2 keeps q, k, v (or k, v) as one matrix
        import numpy as np

        target.weight = np.concatenate([state[f"{n}.weight"] for n in names])
        target.bias = np.concatenate([state[f"{n}.bias"] for n in names])

    def norm(target, name: str) -> None:
        target.gamma, target.beta = state[f"{name}.weight"], state[f"{name}.bias"]

    def embeddings(target, name: str) -> None:  # the encoder keeps a list of embeddings, the decoder one
        table = state[f"{name}.0.embedding.weight"]
        (target.embeddings[0] if isinstance(target.embeddings, list) else target.embeddings).weight = table
        positions = getattr(model, name)[1]
        pe = positions.pe[0] if hasattr(positions, "pe") else positions.embedding.weight
        target.position_encodings.encodings = pe.detach().float().cpu().numpy().copy()
        target.scale_embeddings = True  # our TokenEmbedding multiplies by sqrt(d_model), as CTranslate2 does

    def attention(target, name: str, self_attention: bool) -> None:
        if self_attention:
            fused(target.linear[0], [f"{name}.w_q", f"{name}.w_k", f"{name}.w_v"])
        else:
            linear(target.linear[0], f"{name}.w_q")
            fused(target.linear[1], [f"{name}.w_k", f"{name}.w_v"])
        linear(target.linear[-1], f"{name}.w_o")

    def feed_forward(target, name: str) -> None:
        linear(target.linear_0, f"{name}.w_1")
        linear(target.linear_1, f"{name}.w_2")

    embeddings(spec.encoder, "src_embed")
    for i, layer in enumerate(spec.encoder.layer):
        name = f"encoder.layers.{i}"
        attention(layer.self_attention, f"{name}.self_attn", True)
        norm(layer.self_attention.layer_norm, f"{name}.sublayers.0.norm")
        feed_forward(layer.ffn, f"{name}.feed_forward")
        norm(layer.ffn.layer_norm, f"{name}.sublayers.1.norm")
    embeddings(spec.decoder, "tgt_embed")
    for i, layer in enumerate(spec.decoder.layer):
        name = f"decoder.layers.{i}"
        attention(layer.self_attention, f"{name}.self_attn", True)
        norm(layer.self_attention.layer_norm, f"{name}.sublayers.0.norm")
        attention(layer.attention, f"{name}.src_attn", False)
        norm(layer.attention.layer_norm, f"{name}.sublayers.1.norm")
        feed_forward(layer.ffn, f"{name}.feed_forward")
        norm(layer.ffn.layer_norm, f"{name}.sublayers.2.norm")
    if c.norm_first:  # the final norms pre-norm stacks end with
        norm(spec.encoder.layer_norm, "encoder.norm")
        norm(spec.decoder.layer_norm, "decoder.norm")
    linear(spec.decoder.projection, "generator.proj")
    spec.register_source_vocabulary(list(src_vocab.itos))
    spec.register_target_vocabulary(list(tgt_vocab.itos))
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = "<unk>", "<s>", "</s>"
    spec.config.decoder_start_token = "<s>"
    return spec


def to_ctranslate2(model, src_vocab, tgt_vocab, out_dir, quantization: str | None = None, lower: bool = True) -> Path:
    """Write `model` (an EncoderDecoder of this book) as a CTranslate2 model folder; returns the folder.

    quantization: None (float32) or any type CTranslate2 takes ("int8", "int8_float32", "float16", ...).
    The folder also holds transformer_lib.json: the tokenizers the model needs (the ones it carries after
    load_checkpoint, else whole words, lowercased if `lower`).
    """
    from transformer_lib.checkpoint import check_carried, is_subword_vocab
    from transformer_lib.checks.decoding import check_vocabs
    from transformer_lib.files import write_folder_atomically

    _ctranslate2()
    if getattr(model, "config", None) is None:
        raise ValueError("model has no config; build it with make_model or load it with load_checkpoint")
    check_vocabs(model, src_vocab, tgt_vocab)
    check_carried(model, src_vocab=src_vocab, tgt_vocab=tgt_vocab)  # not another model's, even of the same size
    if getattr(model, "tokenizers", None) is None and is_subword_vocab(src_vocab):
        raise ValueError("src_vocab holds subword symbols, but model carries no tokenizers, and the folder would cut "
                         "whole words; load the model with load_checkpoint, which gives it its tokenizers")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir={str(out)!r} is a file; give a folder for the CTranslate2 model")
    if out.is_dir() and any(out.iterdir()) and not (out / "transformer_lib.json").is_file():
        raise ValueError(f"out_dir={str(out)!r} holds files that are not a model written by export, and export "
                         "replaces the whole folder; give a new or empty folder (nothing was written)")
    spec = _spec(model, src_vocab, tgt_vocab)
    spec.validate()
    spec.optimize(quantization=quantization)
    settings = {"lower": lower, "max_len": model.config.max_len, "quantization": quantization or "float32"}
    if getattr(model, "tokenizers", None) is not None:  # what load_checkpoint attaches: words or subwords
        settings["tokenizers"] = [t.to_dict() for t in model.tokenizers]

    def write(folder: Path) -> None:  # the whole model in a new folder: no file of an earlier export survives
        spec.save(str(folder))
        files = sorted(p.name for p in folder.iterdir())  # what a later export may replace
        (folder / "transformer_lib.json").write_text(json.dumps({**settings, "files": files}, indent=2) + "\n",
                                                     encoding="utf-8")

    out.parent.mkdir(parents=True, exist_ok=True)
    return write_folder_atomically(out, write, check=_only_exported)  # a file a user put there is never deleted


_CT2_FILES = {"config.json", "model.bin", *(f"{kind}vocabulary.{ext}" for kind in ("", "shared_", "source_", "target_")
                                            for ext in ("json", "txt"))}


def _only_exported(folder: Path) -> None:
    """ValueError naming what `folder` holds beyond what an earlier export wrote there (the names its
    transformer_lib.json lists, else, for an export from before it listed them, CTranslate2's own): export replaces
    the whole folder, and must never delete a file it did not write."""
    if not folder.is_dir():
        return
    try:
        files = json.loads((folder / "transformer_lib.json").read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError, RecursionError):
        files = None
    listed = isinstance(files, list) and all(isinstance(f, str) for f in files)
    others = sorted(p.name for p in folder.iterdir() if p.name not in {*(files if listed else _CT2_FILES),
                                                                          "transformer_lib.json"})
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise ValueError(f"{folder} holds {shown}, not written there by export, which replaces the whole folder; "
                         "move them away or export into another folder (nothing was changed)")


class CTranslate2Model:
    """A CTranslate2 model folder written by to_ctranslate2, translating raw German text like translate()."""

    def __init__(self, folder, device: str = "cpu", compute_type: str = "default", threads: int = 1):
        from transformer_lib.data import Tokenizer, tokenizer_from_dict

        folder = Path(folder)
        if not (folder / "transformer_lib.json").is_file():
            raise FileNotFoundError(f"{folder} is not a model folder written by `python -m transformer_lib.serve "
                                    "export` (it has no transformer_lib.json)")
        try:
            self.settings = json.loads((folder / "transformer_lib.json").read_text(encoding="utf-8"))
            if "tokenizers" in self.settings:
                self.tokenizer, self.tgt_tokenizer = (tokenizer_from_dict(t) for t in self.settings["tokenizers"])
            else:  # a folder exported before tokenizers were stored: whole words
                self.tokenizer, self.tgt_tokenizer = (Tokenizer(lang, self.settings["lower"]) for lang in ("de", "en"))
            int(self.settings["max_len"])
            self.translator = _ctranslate2().Translator(str(folder), device=device, compute_type=compute_type,
                                                        intra_threads=threads)
        except (ValueError, KeyError, TypeError, AttributeError, RuntimeError, UnicodeDecodeError, RecursionError) as err:
            raise ValueError(f"{folder} is not a model folder CTranslate2 can read (damaged, or written by another "
                             f"version): export it again ({type(err).__name__}: {str(err)[:200]})") from None

    def translate_tokens(self, sentences: list[str], beam_size: int = 5, length_penalty: float = 0.6,
                         batch_size: int = 64) -> list[list[str]]:
        """Target tokens for raw sentences; at most 1.5 x source length + 10 tokens each, as translate_tokens."""
        from transformer_lib.checks.core import check_ints
        from transformer_lib.checks.translation import check_strings

        sentences = check_strings(sentences)
        check_ints(beam_size=beam_size, batch_size=batch_size)
        tokens = [self.tokenizer(s) if s.strip() else [] for s in sentences]  # a blank sentence: no translation
        too_long = next((i for i, t in enumerate(tokens) if len(t) > self.settings["max_len"]), None)
        if too_long is not None:
            raise ValueError(f"sentence {too_long} has {len(tokens[too_long])} tokens, more than the model's "
                             f"{self.settings['max_len']} positions; split it into shorter sentences")
        out: list[list[str]] = [[] for _ in tokens]
        order = sorted((i for i in range(len(tokens)) if tokens[i]), key=lambda i: len(tokens[i]))  # as ours
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            longest = max(len(tokens[i]) for i in chunk)
            results = self.translator.translate_batch(
                [tokens[i] for i in chunk], beam_size=beam_size, length_penalty=length_penalty,
                max_decoding_length=min(int(1.5 * longest) + 10, self.settings["max_len"]), max_batch_size=0)
            for i, result in zip(chunk, results):
                out[i] = result.hypotheses[0]
        return out

    def translate(self, sentence, beam_size: int = 5, length_penalty: float = 0.6):
        """English text for a German sentence (or a list of them)."""
        single = isinstance(sentence, str)
        texts = [self.tgt_tokenizer.detokenize(t) for t in self.translate_tokens([sentence] if single else sentence, beam_size,
                                                              length_penalty)]
        return texts[0] if single else texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_lib.serve", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="write a CTranslate2 model folder from a checkpoint")
    export.add_argument("out", help="the folder to write")
    export.add_argument("--checkpoint", default=None, help="a model.safetensors (default: the shipped model)")
    export.add_argument("--quantization", default=None, choices=["int8", "int8_float32", "float16", "bfloat16"],
                        help="store the weights in this type (default: float32)")
    run = sub.add_parser("translate", help="translate sentences with an exported model")
    run.add_argument("model", help="a folder written by export")
    run.add_argument("sentences", nargs="*", help="German sentences (default: one per line from standard input)")
    run.add_argument("--beam", type=int, default=5, help="beam size; 1 for greedy decoding (default 5)")
    run.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    args = parser.parse_args(argv)
    from transformer_lib.runtime import share_cores_in_command

    share_cores_in_command()  # torch on the cores other processes leave free ($BOOK_SHARE_CORES=0: not)
    try:
        _ctranslate2()
    except ImportError as err:
        raise SystemExit(f"error: {err}") from None
    if args.command == "export":
        from transformer_lib.translate import find_checkpoint, load_model

        model, src_vocab, tgt_vocab, _ = load_model(find_checkpoint(args.checkpoint), "cpu")
        try:
            out = to_ctranslate2(model, src_vocab, tgt_vocab, args.out, args.quantization,
                                 getattr(model, "lower", True))
        except (OSError, ValueError) as err:  # a read-only folder, a path below a file, a folder of other files
            raise SystemExit(f"error: cannot write {args.out}: {err}") from None
        print(f"wrote {out} ({sum(p.stat().st_size for p in out.iterdir()) / 1e6:.1f} MB, "
              f"{args.quantization or 'float32'})")
        return 0
    if args.beam < 1 or args.threads < 1:
        parser.error("--beam and --threads must be positive")
    try:
        served = CTranslate2Model(args.model, threads=args.threads)
        sentences = args.sentences or [line.rstrip("\r\n") for line in sys.stdin]
        texts = served.translate(sentences, beam_size=args.beam) if sentences else []
    except (OSError, ValueError) as err:  # no model folder, a damaged one, a sentence longer than the model reads
        raise SystemExit(f"error: {err}") from None
    for text in texts:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
