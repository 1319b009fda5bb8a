"""Every public entry point of transformer_lib, fed the mistakes a learner makes, and what it must say.

Each case is one call with one thing wrong. tests/test_bad_inputs.py checks that it raises the expected
exception type, that the message names what was wrong (`names`), and, for calls that touch state, that
nothing was lost. `python tests/bad_inputs.py` rewrites docs/bad_inputs.md, the table of messages;
a test fails if that table is out of date.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from transformer_lib import attention as A
from transformer_lib import blocks as K
from transformer_lib import data as D
from transformer_lib import decoding as G
from transformer_lib import embeddings as E
from transformer_lib import fast as F
from transformer_lib import model as M
from transformer_lib import multi30k as MK
from transformer_lib import plots as P
from transformer_lib import curves as CU
from transformer_lib import records as RC
from transformer_lib import runtime as R
from transformer_lib import training as T
from transformer_lib import translation as X

DOC = Path(__file__).resolve().parent.parent / "docs" / "bad_inputs.md"


@dataclass
class Case:
    entry: str  # the entry point, as a reader would call it
    mistake: str  # what is wrong, in words
    call: Callable  # call(tmp: Path) makes the mistake
    error: type  # the exception it must raise
    names: tuple[str, ...]  # words the message must contain (the argument, the expected shape or range)


CASES: list[Case] = []


def case(entry: str, mistake: str, error: type, *names: str):
    def register(call):
        CASES.append(Case(entry, mistake, call, error, names))
        return call
    return register


# Small objects the cases share. Built on first use so that importing this module is cheap.
def tiny_model(**options) -> M.EncoderDecoder:
    torch.manual_seed(0)
    settings = dict(n_layers=1, d_model=8, d_ff=16, n_heads=2, dropout=0.0, pad_idx=0, max_len=20)
    settings.update(options)
    return M.make_model(11, 11, **settings)


def tiny_vocab() -> X.Vocab:
    return X.Vocab([*X.Vocab.SPECIALS, "ein", "hund", "a", "dog", ".", "rennt", "runs"])


def tiny_checkpoint(tmp: Path) -> Path:
    model = tiny_model(pad_idx=1)
    return X.save_checkpoint(tmp / "tiny.safetensors", model, tiny_vocab(), tiny_vocab())


def ids(*rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long)


x3 = lambda L=4, d=8, B=2: torch.randn(B, L, d)  # noqa: E731 - (B, L, d_model) activations


# ---------------------------------------------------------------------------------------------- embeddings
@case("TokenEmbedding(vocab_size, d_model)", "vocab_size 0", ValueError, "vocab_size")
def _(tmp): E.TokenEmbedding(0, 8)


@case("TokenEmbedding(..., padding_idx)", "padding_idx outside the vocabulary", ValueError, "padding_idx", "vocab_size=10")
def _(tmp): E.TokenEmbedding(10, 8, padding_idx=10)


@case("TokenEmbedding(tokens)", "float token ids", TypeError, "tokens", "torch.long")
def _(tmp): E.TokenEmbedding(10, 8)(torch.tensor([[1.0, 2.0]]))


@case("TokenEmbedding(tokens)", "a token id equal to vocab_size", ValueError, "tokens", "vocab_size=10")
def _(tmp): E.TokenEmbedding(10, 8)(ids([1, 10]))


@case("TokenEmbedding(tokens)", "a negative token id", ValueError, "tokens", "[0, vocab_size=10)")
def _(tmp): E.TokenEmbedding(10, 8)(ids([-1, 2]))


@case("PositionalEncoding(d_model, max_len)", "max_len 0", ValueError, "max_len")
def _(tmp): E.PositionalEncoding(8, max_len=0)


@case("PositionalEncoding(..., dropout)", "dropout 1.5", ValueError, "dropout", "[0, 1)")
def _(tmp): E.PositionalEncoding(8, dropout=1.5)


@case("PositionalEncoding(x)", "a sequence longer than the positional table", ValueError, "max_len=16", "sequence length 17")
def _(tmp): E.PositionalEncoding(8, max_len=16)(x3(L=17))


@case("PositionalEncoding(x)", "token ids instead of embeddings", ValueError, "x", "(batch, length, d_model=8)")
def _(tmp): E.PositionalEncoding(8)(ids([1, 2, 3]))


@case("PositionalEncoding(x)", "the wrong d_model", ValueError, "x", "d_model=8")
def _(tmp): E.PositionalEncoding(8)(x3(d=6))


@case("LearnedPositionalEmbedding(x)", "a sequence longer than max_len", ValueError, "max_len=4")
def _(tmp): E.LearnedPositionalEmbedding(8, max_len=4)(x3(L=5))


@case("sinusoidal_table(max_len, d_model)", "d_model 0", ValueError, "d_model")
def _(tmp): E.sinusoidal_table(10, 0)


# ---------------------------------------------------------------------------------------------- attention
@case("scaled_dot_product_attention(q, k, v)", "query and key of different d_k", ValueError, "d_k")
def _(tmp): A.scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(2, 5, 6), torch.randn(2, 5, 6))


@case("scaled_dot_product_attention(q, k, v)", "key and value of different lengths", ValueError, "key and value", "length")
def _(tmp): A.scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 6, 4))


@case("scaled_dot_product_attention(..., mask)", "a float 0/1 mask", TypeError, "mask", "boolean")
def _(tmp): A.scaled_dot_product_attention(torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.ones(1, 3, 3))


@case("scaled_dot_product_attention(..., mask)", "a mask that would broadcast the scores into a bigger shape", ValueError, "mask", "(2, 3, 3)")
def _(tmp): A.scaled_dot_product_attention(torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.ones(2, 3, 3, dtype=torch.bool))


@case("scaled_dot_product_attention(q, k, v)", "1-D tensors (no length axis)", ValueError, "query", "(..., length, d_k)")
def _(tmp): A.scaled_dot_product_attention(torch.randn(4), torch.randn(4), torch.randn(4))


@case("padding_mask(tokens, pad_idx)", "a 1-D sentence instead of a (batch, length) batch", ValueError, "tokens", "(batch, length)")
def _(tmp): A.padding_mask(ids(1, 2, 0), 0)


@case("subsequent_mask(size)", "size 0", ValueError, "size")
def _(tmp): A.subsequent_mask(0)


@case("subsequent_mask(size)", "a float size", TypeError, "size", "int")
def _(tmp): A.subsequent_mask(3.0)


@case("MultiHeadAttention(d_model, n_heads)", "d_model not divisible by n_heads", ValueError, "d_model=10", "n_heads=3")
def _(tmp): A.MultiHeadAttention(10, 3)


@case("MultiHeadAttention(..., dropout)", "dropout -0.1", ValueError, "dropout", "[0, 1)")
def _(tmp): A.MultiHeadAttention(8, 2, dropout=-0.1)


@case("MultiHeadAttention(q, k, v)", "the wrong d_model", ValueError, "query", "d_model=8")
def _(tmp): A.MultiHeadAttention(8, 2)(x3(d=6), x3(d=6), x3(d=6))


@case("MultiHeadAttention(q, k, v)", "query and key of different batch sizes", ValueError, "batch size")
def _(tmp): A.MultiHeadAttention(8, 2)(x3(B=2), x3(B=3), x3(B=3))


@case("MultiHeadAttention(..., mask)", "a (B, Lq, Lk) mask without the heads axis", ValueError, "mask", "unsqueeze(1)")
def _(tmp): A.MultiHeadAttention(8, 2)(x3(B=3), x3(B=3), x3(B=3), torch.ones(3, 4, 4, dtype=torch.bool))


@case("MultiHeadAttention(..., mask)", "a mask over the wrong number of keys", ValueError, "mask", "(3, 2, 4, 4)")
def _(tmp): A.MultiHeadAttention(8, 2)(x3(B=3), x3(B=3), x3(B=3), torch.ones(3, 1, 1, 5, dtype=torch.bool))


@case("MultiHeadAttention(..., mask)", "an integer 0/1 mask", TypeError, "mask", "boolean")
def _(tmp): A.MultiHeadAttention(8, 2)(x3(), x3(), x3(), torch.ones(2, 1, 1, 4, dtype=torch.long))


# ---------------------------------------------------------------------------------------------- blocks
@case("LayerNorm(d_model)", "d_model 0", ValueError, "d_model")
def _(tmp): K.LayerNorm(0)


@case("LayerNorm(x)", "the wrong last dimension", ValueError, "x", "d_model=8")
def _(tmp): K.LayerNorm(8)(x3(d=6))


@case("PositionwiseFeedForward(d_model, d_ff)", "d_ff 0", ValueError, "d_ff")
def _(tmp): K.PositionwiseFeedForward(8, 0)


@case("PositionwiseFeedForward(x)", "the wrong last dimension", ValueError, "x", "d_model=8")
def _(tmp): K.PositionwiseFeedForward(8, 16)(x3(d=6))


@case("EncoderLayer(x)", "the wrong d_model", ValueError, "x", "d_model=8")
def _(tmp): K.EncoderLayer(8, 2, 16)(x3(d=6))


@case("EncoderLayer(x, mask)", "a float mask", TypeError, "mask", "boolean")
def _(tmp): K.EncoderLayer(8, 2, 16)(x3(), torch.ones(2, 1, 1, 4))


@case("DecoderLayer(x, memory)", "memory of another batch size", ValueError, "memory", "batch")
def _(tmp): K.DecoderLayer(8, 2, 16)(x3(B=2), x3(B=3))


@case("DecoderLayer(x, memory)", "memory of the wrong d_model", ValueError, "memory", "d_model=8")
def _(tmp): K.DecoderLayer(8, 2, 16)(x3(), x3(d=6))


@case("DecoderLayer(..., tgt_mask)", "a causal mask for the wrong length", ValueError, "tgt_mask", "(2, 2, 4, 4)")
def _(tmp): K.DecoderLayer(8, 2, 16)(x3(), x3(), None, A.subsequent_mask(5))


@case("DecoderLayer(..., src_mask)", "a source mask over the wrong number of keys", ValueError, "src_mask", "(2, 2, 4, 6)")
def _(tmp): K.DecoderLayer(8, 2, 16)(x3(), x3(L=6), torch.ones(2, 1, 1, 4, dtype=torch.bool))


@case("encoder_layer_from_torch(layer)", "a layer with batch_first=False", ValueError, "layer", "batch_first=True")
def _(tmp): K.encoder_layer_from_torch(nn.TransformerEncoderLayer(8, 2, 16))


# ---------------------------------------------------------------------------------------------- model
@case("make_model(...)", "d_model not divisible by n_heads", ValueError, "d_model=30", "n_heads=8")
def _(tmp): M.make_model(11, 11, n_layers=1, d_model=30, d_ff=16, n_heads=8)


@case("make_model(...)", "n_layers 0", ValueError, "n_layers", "positive int")
def _(tmp): M.make_model(11, 11, n_layers=0)


@case("make_model(...)", "a float vocabulary size", TypeError, "src_vocab", "int")
def _(tmp): M.make_model(11.0, 11, n_layers=1, d_model=8, d_ff=16, n_heads=2)


@case("make_model(...)", "pad_idx outside the vocabulary", ValueError, "pad_idx", "[0, 11)")
def _(tmp): M.make_model(11, 11, n_layers=1, d_model=8, d_ff=16, n_heads=2, pad_idx=11)


@case("make_model(...)", "share_embeddings with two vocabulary sizes", ValueError, "share_embeddings", "tgt_vocab=12")
def _(tmp): M.make_model(11, 12, n_layers=1, d_model=8, d_ff=16, n_heads=2, share_embeddings=True)


@case("make_model(...)", "an option that does not exist", ValueError, "unknown", "norm_frist")
def _(tmp): M.make_model(11, 11, n_layers=1, d_model=8, d_ff=16, n_heads=2, norm_frist=True)


@case("ModelConfig.from_json(text)", "a config with a misspelt key", ValueError, "unknown", "n_layer")
def _(tmp): M.ModelConfig.from_json('{"src_vocab": 11, "tgt_vocab": 11, "n_layer": 2}')


@case("model(src, tgt)", "float source tokens", TypeError, "src", "torch.long")
def _(tmp): tiny_model()(torch.rand(2, 5), ids([1, 2], [1, 3]))


@case("model(src, tgt)", "a target token id equal to tgt_vocab", ValueError, "tgt", "tgt_vocab=11")
def _(tmp): tiny_model()(ids([1, 2], [3, 4]), ids([1, 11], [1, 3]))


@case("model(src, tgt)", "a negative source token id", ValueError, "src", "[0, src_vocab=11)")
def _(tmp): tiny_model()(ids([1, -2], [3, 4]), ids([1, 2], [1, 3]))


@case("model(src, tgt)", "a source longer than max_len", ValueError, "src", "max_len=20")
def _(tmp): tiny_model()(torch.ones(1, 21, dtype=torch.long), ids([1, 2]))


@case("model(src, tgt)", "source and target batches of different sizes", ValueError, "src and tgt", "batch size")
def _(tmp): tiny_model()(ids([1, 2], [3, 4]), ids([1, 2]))


@case("model(src, tgt)", "an empty batch", ValueError, "src", "non-empty")
def _(tmp): tiny_model()(torch.ones(0, 3, dtype=torch.long), torch.ones(0, 3, dtype=torch.long))


@case("model(src, tgt)", "a 1-D sentence instead of a batch", ValueError, "src", "(batch, length)")
def _(tmp): tiny_model()(ids(1, 2, 3), ids(1, 2))


@case("model(src, tgt, src_mask)", "a source mask for another source length", ValueError, "src_mask", "(2, 2, 3, 3)")
def _(tmp): tiny_model()(ids([1, 2, 3], [4, 5, 6]), ids([1, 2], [1, 3]), torch.ones(2, 1, 1, 4, dtype=torch.bool))


@case("model(src, tgt, src_mask)", "a float source mask", TypeError, "src_mask", "boolean")
def _(tmp): tiny_model()(ids([1, 2, 3]), ids([1, 2]), torch.ones(1, 1, 1, 3))


@case("model(src, tgt, None, tgt_mask)", "a causal mask for another target length", ValueError, "tgt_mask", "(1, 2, 2, 2)")
def _(tmp): tiny_model()(ids([1, 2, 3]), ids([1, 2]), None, A.subsequent_mask(3))


@case("model.decode(memory, src_mask, tgt)", "memory of another batch size", ValueError, "memory and tgt", "batch size")
def _(tmp): tiny_model().decode(x3(B=3), None, ids([1, 2], [1, 3]))


@case("load_torch_transformer(model, transformer)", "an nn.Transformer with more layers", ValueError, "encoder", "layers")
def _(tmp): M.load_torch_transformer(tiny_model(), nn.Transformer(8, 2, 2, 1, 16, batch_first=True))


# ---------------------------------------------------------------------------------------------- training
@case("Batch(src, tgt)", "float token ids", TypeError, "src", "torch.long")
def _(tmp): T.Batch(torch.rand(2, 3), ids([1, 2], [1, 3]))


@case("Batch(src, tgt)", "an empty source batch", ValueError, "src", "non-empty")
def _(tmp): T.Batch(torch.ones(0, 3, dtype=torch.long), torch.ones(0, 3, dtype=torch.long))


@case("Batch(src, tgt)", "a target of one token (nothing to predict)", ValueError, "tgt", "length >= 2")
def _(tmp): T.Batch(ids([1, 2], [3, 4]), ids([1], [1]))


@case("Batch(src, tgt)", "source and target batches of different sizes", ValueError, "tgt", "batch=2")
def _(tmp): T.Batch(ids([1, 2], [3, 4]), ids([1, 2, 3]))


@case("LabelSmoothing(vocab_size, padding_idx, smoothing)", "smoothing 1.0", ValueError, "smoothing", "[0, 1)")
def _(tmp): T.LabelSmoothing(11, 0, smoothing=1.0)


@case("LabelSmoothing(vocab_size, padding_idx)", "padding_idx outside the vocabulary", ValueError, "padding_idx", "[0, vocab_size=11)")
def _(tmp): T.LabelSmoothing(11, 11)


@case("LabelSmoothing(log_probs, target)", "(B, L, V) log-probabilities not flattened", ValueError, "log_probs", "(N, vocab_size=11)")
def _(tmp): T.LabelSmoothing(11, 0)(torch.randn(2, 3, 11).log_softmax(-1), ids([1, 2, 3], [1, 2, 3]))


@case("LabelSmoothing(log_probs, target)", "a target id equal to vocab_size", ValueError, "target", "[0, vocab_size=11)")
def _(tmp): T.LabelSmoothing(11, 0)(torch.randn(2, 11).log_softmax(-1), ids(3, 11))


@case("LabelSmoothing(log_probs, target)", "float targets", TypeError, "target", "torch.long")
def _(tmp): T.LabelSmoothing(11, 0)(torch.randn(2, 11).log_softmax(-1), torch.tensor([3.0, 4.0]))


@case("rate(step, d_model)", "d_model 0", ValueError, "d_model")
def _(tmp): T.rate(1, 0)


@case("rate(step, d_model, warmup)", "warmup 0", ValueError, "warmup")
def _(tmp): T.rate(1, 512, warmup=0)


@case("make_optimizer(model, d_model)", "warmup 0 (caught before the first step)", ValueError, "warmup")
def _(tmp): T.make_optimizer(tiny_model(), 8, warmup=0)


@case("orthogonalize(update)", "a bias (1-D) instead of a matrix", ValueError, "update", "2-D", "(8,)")
def _(tmp): T.orthogonalize(torch.randn(8))


@case("orthogonalize(update, steps)", "steps 2.5", TypeError, "steps", "int")
def _(tmp): T.orthogonalize(torch.randn(4, 4), steps=2.5)


@case("Muon(model)", "a model that is not an EncoderDecoder", TypeError, "EncoderDecoder", "Linear")
def _(tmp): T.Muon(nn.Linear(4, 4))


@case("Muon(model, momentum)", "momentum 1 (the momentum would never forget)", ValueError, "momentum", "[0, 1)")
def _(tmp): T.Muon(tiny_model(), momentum=1.0)


@case("make_optimizer(model, d_model, muon=True)", "a model without an encoder and a decoder for Muon to take",
      TypeError, "EncoderDecoder")
def _(tmp): T.make_optimizer(nn.Sequential(nn.Linear(4, 4)), 8, muon=True)


def _one_batch():
    return T.Batch(ids([2, 3, 4]), ids([1, 2, 3, 4]), 0)


@case("train_epoch(model, batches, ...)", "no batches at all", ValueError, "batches", "empty")
def _(tmp):
    model = tiny_model()
    T.train_epoch(model, [], T.LabelSmoothing(11, 0), T.make_optimizer(model, 8)[0], progress=False)


@case("train_epoch(model, batches, ...)", "(src, tgt) tuples instead of Batch objects", TypeError, "batches", "Batch")
def _(tmp):
    model = tiny_model()
    T.train_epoch(model, [(ids([2, 3]), ids([1, 2, 3]))], T.LabelSmoothing(11, 0), T.make_optimizer(model, 8)[0],
                  progress=False)


@case("train_epoch(model, batches, ...)", "source-only batches (no tgt)", ValueError, "batches", "tgt")
def _(tmp):
    model = tiny_model()
    T.train_epoch(model, [T.Batch(ids([2, 3]))], T.LabelSmoothing(11, 0), T.make_optimizer(model, 8)[0],
                  progress=False)


@case("train_epoch(..., accum_steps)", "accum_steps 0", ValueError, "accum_steps")
def _(tmp):
    model = tiny_model()
    T.train_epoch(model, [_one_batch()], T.LabelSmoothing(11, 0), T.make_optimizer(model, 8)[0], accum_steps=0)


@case("train_epoch(..., clip_norm)", "clip_norm 0", ValueError, "clip_norm")
def _(tmp):
    model = tiny_model()
    T.train_epoch(model, [_one_batch()], T.LabelSmoothing(11, 0), T.make_optimizer(model, 8)[0], clip_norm=0.0,
                  progress=False)


@case("train_epoch(model, batches, ...)", "targets that are all padding", ValueError, "no target tokens")
def _(tmp):
    model = tiny_model()
    T.train_epoch(model, [T.Batch(ids([2, 3]), ids([1, 0, 0]))], T.LabelSmoothing(11, 0),
                  T.make_optimizer(model, 8)[0], progress=False)


@case("optimizer_step(model, group, ...)", "a step whose targets are all padding", ValueError, "no target tokens")
def _(tmp):
    model = tiny_model()
    T.optimizer_step(model, [T.Batch(ids([2, 3]), ids([1, 0, 0]))], T.LabelSmoothing(11, 0), T.make_optimizer(model, 8)[0])


@case("evaluate(model, batches, criterion)", "no batches at all", ValueError, "batches", "empty")
def _(tmp): T.evaluate(tiny_model(), [], T.LabelSmoothing(11, 0))


@case("greedy_decode(model, src, src_mask, max_len, start_symbol)", "max_len -1", ValueError, "max_len")
def _(tmp): T.greedy_decode(tiny_model(), ids([2, 3]), None, -1, 1)


@case("greedy_decode(..., start_symbol)", "a start symbol outside the target vocabulary", ValueError, "start_symbol", "tgt_vocab=11")
def _(tmp): T.greedy_decode(tiny_model(), ids([2, 3]), None, 3, 11)


@case("greedy_decode(model, src, ...)", "float source tokens", TypeError, "src", "torch.long")
def _(tmp): T.greedy_decode(tiny_model(), torch.rand(1, 3), None, 3, 1)


@case("copy_task_batch(batch_size, length, vocab_size)", "vocab_size 2 (no room for symbols)", ValueError, "vocab_size", "at least 3")
def _(tmp): T.copy_task_batch(4, 5, 2)


@case("copy_task_batch(batch_size, length, vocab_size)", "batch_size 0", ValueError, "batch_size")
def _(tmp): T.copy_task_batch(0, 5, 11)


@case("train_copy_task(max_steps)", "max_steps 0", ValueError, "max_steps")
def _(tmp): T.train_copy_task(max_steps=0, progress=False)


@case("train_copy_task(eval_every)", "eval_every 0", ValueError, "eval_every")
def _(tmp): T.train_copy_task(max_steps=10, eval_every=0, progress=False)


# ---------------------------------------------------------------------------------------------- translation
@case("load_multi30k(split)", "a split that does not exist", ValueError, "split", "test2016")
def _(tmp): MK.load_multi30k("test")


@case("load_multi30k(split, root, download=False)", "no files anywhere and no download", MK.DataUnavailable, "MULTI30K_DIR")
def _(tmp):
    search = MK.multi30k_dirs  # look only in tmp and an empty cache, whatever this machine has
    MK.multi30k_dirs = lambda root=None: [Path(root), tmp / "cache"]
    try:
        MK.load_multi30k("val", root=tmp, download=False)
    finally:
        MK.multi30k_dirs = search


@case("load_multi30k(split, root)", "a truncated data file", MK.DataUnavailable, "val.de.gz", "sha256 mismatch")
def _(tmp):
    import gzip
    with gzip.open(tmp / "val.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("Ein Hund.\n")
    (tmp / "val.de.gz").write_bytes((tmp / "val.de.gz").read_bytes()[:-4])
    MK.load_multi30k("val", root=tmp, download=False)


@case("offline_corpus(n)", "n 0", ValueError, "n")
def _(tmp): D.offline_corpus(0)


@case("Tokenizer(lang)", "a language spaCy does not know", ValueError, "lang", "'xx-german'")
def _(tmp): D.Tokenizer("xx-german")


@case("Tokenizer(text)", "a list of words instead of a string", TypeError, "text", "str")
def _(tmp): D.Tokenizer("de")(["ein", "hund"])


@case("Vocab(tokens)", "tokens without the specials first", ValueError, "tokens", "<unk>")
def _(tmp): D.Vocab(["hund", "<unk>", "<pad>", "<s>", "</s>"])


@case("Vocab.build(sentences)", "raw strings instead of token lists", TypeError, "sentences", "token")
def _(tmp): D.Vocab.build(["ein hund rennt", "ein hund"])


@case("Vocab.build(sentences, min_freq)", "min_freq 0", ValueError, "min_freq")
def _(tmp): D.Vocab.build([["ein"]], min_freq=0)


@case("Vocab.encode(tokens)", "a raw string instead of tokens", TypeError, "tokens", "list of str")
def _(tmp): tiny_vocab().encode("ein hund")


@case("Vocab.decode(ids)", "an id past the vocabulary", ValueError, "ids", "[0, 11)")
def _(tmp): tiny_vocab().decode([4, 11])


@case("Vocab.load(path)", "a file that is not a vocabulary", ValueError, "not a Vocab written by Vocab.save")
def _(tmp):
    (tmp / "v.json").write_text('{"words": []}')
    D.Vocab.load(tmp / "v.json")


@case("Vocab.load(path)", "a file that does not exist", FileNotFoundError, "vocab.json")
def _(tmp): D.Vocab.load(tmp / "vocab.json")


@case("Vocab.load(path)", "a truncated vocabulary file", ValueError, "not a Vocab written by Vocab.save")
def _(tmp):
    (tmp / "v.json").write_text(tiny_vocab().to_json()[:20])
    D.Vocab.load(tmp / "v.json")


@case("learn_bpe(word_counts, n_merges)", "raw sentences instead of counted pre-tokens", TypeError, "word_counts",
      "Counter")
def _(tmp): D.learn_bpe(["ein hund", "a dog"], 10)


@case("learn_bpe(word_counts, n_merges)", "a count of zero", ValueError, "word_counts['▁hund']", ">= 1")
def _(tmp): D.learn_bpe({"▁hund": 0}, 10)


@case("learn_bpe(word_counts, n_merges)", "a negative number of merges", ValueError, "n_merges")
def _(tmp): D.learn_bpe({"▁hund": 3}, -1)


@case("BPE(merges, alphabet)", "merges from another tokenizer (GPT-2's Ġ marks)", ValueError, "merges[0]", "alphabet")
def _(tmp): D.BPE([("Ġ", "t"), ("Ġt", "he")], "abcdefghijklmnopqrstuvwxyz ")


@case("BPE(merges, alphabet)", "a merge that is not a pair", ValueError, "merges[1]", "pair")
def _(tmp): D.BPE([("a", "b"), ("ab",)], "ab ")


@case("BPE.load(path)", "a merges.txt from another BPE tool", ValueError, "merges.txt", "not a BPE written by BPE.save")
def _(tmp):
    (tmp / "merges.txt").write_text("#version: 0.2\nt h\nth e\n")
    D.BPE.load(tmp / "merges.txt")


@case("BPE.load(path)", "a JSON file of another kind (a vocabulary)", ValueError, "bpe.json", "merges")
def _(tmp):
    tiny_vocab().save(tmp / "bpe.json")
    D.BPE.load(tmp / "bpe.json")


@case("pre_tokens(tokenizer, text)", "a list of words instead of the text", TypeError, "text", "str")
def _(tmp): D.pre_tokens(D.Tokenizer("en"), ["a", "dog"])


@case("SubwordTokenizer(lang, bpe)", "merges given as a list instead of a BPE", TypeError, "bpe", "BPE")
def _(tmp): D.SubwordTokenizer("en", [("a", "b")])


@case("SubwordTokenizer(...)(text, dropout)", "BPE-dropout 1.0 (every merge left out)", ValueError, "dropout", "[0, 1)")
def _(tmp): D.SubwordTokenizer("en", D.BPE([("a", "b")], "ab "))("ab", 1.0)


@case("encode_pairs(pairs, ..., dropout)", "BPE-dropout with whole-word tokenizers", ValueError, "src_tok",
      "SubwordTokenizer")
def _(tmp): D.encode_pairs([("ab", "ab")], D.Tokenizer("de"), D.Tokenizer("en"), tiny_vocab(), tiny_vocab(), 0.1)


@case("tokenizer_from_dict(values)", "a dict of another kind", ValueError, "values['kind']", "bpe")
def _(tmp): D.tokenizer_from_dict({"kind": "sentencepiece", "lang": "en", "lower": True})


@case("tokenizer_from_dict(values)", "BPE without its merges", ValueError, "merges")
def _(tmp): D.tokenizer_from_dict({"kind": "bpe", "lang": "en", "lower": True, "alphabet": "ab "})


@case("bucket_batches(examples, max_tokens, pad_idx)", "max_tokens 0", ValueError, "max_tokens")
def _(tmp): D.bucket_batches([([4], [2, 5, 3])], 0, 1)


@case("bucket_batches(examples, ...)", "no examples", ValueError, "examples", "empty")
def _(tmp): D.bucket_batches([], 100, 1)


@case("bucket_batches(examples, ...)", "an example with an empty source", ValueError, "examples", "empty source")
def _(tmp): D.bucket_batches([([4], [2, 5, 3]), ([], [2, 5, 3])], 100, 1)


@case("pad_batch(examples, pad_idx)", "no examples", ValueError, "examples", "empty")
def _(tmp): D.pad_batch([], 1)


@case("greedy_decode_cached(model, src, ...)", "max_len -1", ValueError, "max_len")
def _(tmp): G.greedy_decode_cached(tiny_model(), ids([2, 3]), A.padding_mask(ids([2, 3]), 0), -1, 1)


@case("beam_search(..., beam_size)", "beam_size 0", ValueError, "beam_size")
def _(tmp): G.beam_search(tiny_model(), ids([2, 3]), A.padding_mask(ids([2, 3]), 0), 5, 1, 2, beam_size=0)


@case("beam_search(..., end_symbol)", "an end symbol outside the target vocabulary", ValueError, "end_symbol", "tgt_vocab=11")
def _(tmp): G.beam_search(tiny_model(), ids([2, 3]), A.padding_mask(ids([2, 3]), 0), 5, 1, 11)


@case("beam_search(..., src_mask)", "a source mask for another source length", ValueError, "src_mask", "(1, 2, 2, 2)")
def _(tmp): G.beam_search(tiny_model(), ids([2, 3]), A.padding_mask(ids([2, 3, 0]), 0), 5, 1, 2)


@case("save_checkpoint(path, model, ...)", "a model without a config (assembled by hand)", ValueError, "model", "config")
def _(tmp):
    m = tiny_model()
    m.config = None
    X.save_checkpoint(tmp / "c.safetensors", m, tiny_vocab(), tiny_vocab())


@case("save_checkpoint(path, model, src_vocab, tgt_vocab)", "vocabularies of the wrong sizes", ValueError, "src_vocab", "src_vocab=11")
def _(tmp): X.save_checkpoint(tmp / "c.safetensors", tiny_model(), D.Vocab(list(D.Vocab.SPECIALS)), tiny_vocab())


@case("save_checkpoint(..., **info)", "info that JSON cannot hold", TypeError, "info")
def _(tmp): X.save_checkpoint(tmp / "c.safetensors", tiny_model(), tiny_vocab(), tiny_vocab(), loss=torch.tensor(1.0))


@case("load_checkpoint(path)", "a file that does not exist", FileNotFoundError, "missing.safetensors")
def _(tmp): X.load_checkpoint(tmp / "missing.safetensors")


@case("load_checkpoint(path)", "a truncated checkpoint", ValueError, "truncated or corrupt")
def _(tmp):
    path = tiny_checkpoint(tmp)
    path.write_bytes(path.read_bytes()[:-100])
    X.load_checkpoint(path)


@case("load_checkpoint(path)", "a checkpoint with flipped bytes in its header", ValueError, "truncated or corrupt")
def _(tmp):
    path = tiny_checkpoint(tmp)
    data = bytearray(path.read_bytes())
    data[10:30] = b"#" * 20
    path.write_bytes(bytes(data))
    X.load_checkpoint(path)


@case("load_checkpoint(path)", "a checkpoint with one bit of one weight flipped", ValueError, "sha256")
def _(tmp):
    path = tiny_checkpoint(tmp)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))
    X.load_checkpoint(path)


@case("load_checkpoint(path)", "a pickled torch.save file", ValueError, "not a readable checkpoint")
def _(tmp):
    torch.save(tiny_model().state_dict(), tmp / "model.pt")
    X.load_checkpoint(tmp / "model.pt")


@case("load_checkpoint(path)", "weights that do not fit the config", ValueError, "do not fit")
def _(tmp):
    from safetensors.torch import save_model
    from transformer_lib.files import write_safetensors

    path = tiny_checkpoint(tmp)
    from safetensors import safe_open
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    metadata.pop("sha256")  # a file put together by hand, and signed: its own config, someone else's weights
    write_safetensors(path, lambda tmp, meta: save_model(tiny_model(d_model=16, d_ff=16, pad_idx=1), str(tmp), meta),
                      metadata)
    X.load_checkpoint(path)


def forged(tmp: Path, **changes) -> Path:
    """tiny_checkpoint with metadata entries replaced (None: removed), signed again as a careful forger would."""
    from safetensors import safe_open
    from safetensors.torch import load, save_file
    from transformer_lib.files import write_safetensors

    path = tiny_checkpoint(tmp)
    tensors = load(path.read_bytes())
    with safe_open(str(path), "pt") as handle:
        metadata = {k: v for k, v in handle.metadata().items() if k != "sha256"}
    metadata.update(changes)
    return write_safetensors(path, lambda t, meta: save_file(tensors, str(t), meta),
                             {k: v for k, v in metadata.items() if v is not None})


@case("load_checkpoint(path)", "a config that is a JSON list", ValueError, "tiny.safetensors", "config", "JSON object")
def _(tmp): X.load_checkpoint(forged(tmp, config="[8, 16]"))


@case("load_checkpoint(path)", "a number written as a string in the config", ValueError, "tiny.safetensors", "d_model")
def _(tmp):
    import json
    X.load_checkpoint(forged(tmp, config=json.dumps({**tiny_model(pad_idx=1).config.to_dict(), "d_model": "8"})))


@case("load_checkpoint(path)", "a config for a model 10,000 times the file's size", ValueError, "tiny.safetensors", "do not fit")
def _(tmp):
    import json
    config = {**tiny_model(pad_idx=1).config.to_dict(), "n_layers": 24, "d_model": 1024, "d_ff": 4096}
    X.load_checkpoint(forged(tmp, config=json.dumps(config)))


@case("load_checkpoint(path)", "a vocabulary of numbers", ValueError, "tiny.safetensors", "src_vocab", "token strings")
def _(tmp): X.load_checkpoint(forged(tmp, src_vocab='{"tokens": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}'))


@case("load_checkpoint(path)", "its sha256 taken out", ValueError, "tiny.safetensors", "no sha256")
def _(tmp):
    from safetensors import safe_open
    from safetensors.torch import load, save_file

    path = tiny_checkpoint(tmp)
    with safe_open(str(path), "pt") as handle:
        metadata = {k: v for k, v in handle.metadata().items() if k != "sha256"}
    save_file(load(path.read_bytes()), str(path), metadata)
    X.load_checkpoint(path)


@case("load_checkpoint(path)", "a training state instead of a checkpoint", ValueError, "state.safetensors", "training state")
def _(tmp):
    from transformer_lib.files import save_training_state

    model = tiny_model()
    optimizer = torch.optim.Adam(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    X.load_checkpoint(save_training_state(tmp / "state.safetensors", model, optimizer, scheduler, epoch=1))


@case("runs.forecast_run(out_dir, recipe, data, device)", "a damaged forecast.json in the run's folder", ValueError,
      "forecast.json", "delete it")
def _(tmp):
    from transformer_lib.runs import forecast_run

    (tmp / "forecast.json").write_text('{"recipe": {}, "forecast": ')  # cut off mid-write, by hand or a full disk
    forecast_run(tmp, X.RECIPES["smoke"], None, torch.device("cpu"))


@case("runs.forecast(recipe, data, device, speedup)", "a fast recipe without chapter 9's speed_up", ValueError,
      "recipe.fast=True", "speedup=speed_up")
def _(tmp):
    from transformer_lib.runs import forecast

    forecast(replace(X.RECIPES["smoke"], fast=True), None, torch.device("cpu"))


@case("runs.folder(recipe, data, name)", "a name with a path in it", ValueError, "name", "'../speedrun'")
def _(tmp):
    from transformer_lib.runs import folder

    folder(X.RECIPES["smoke"], X.TranslationData(None, None, None, None, [], [], [], "Multi30k"), "../speedrun")


@case("runs.folder(recipe, data)", "the budget's name instead of its recipe", TypeError, "Recipe", "str")
def _(tmp):
    from transformer_lib.runs import folder

    folder("smoke", X.TranslationData(None, None, None, None, [], [], [], "Multi30k"))


@case("load_checkpoint(path, device)", "a device torch does not know", ValueError, "device='gpu'")
def _(tmp): X.load_checkpoint(tiny_checkpoint(tmp), "gpu")


@case("save_checkpoint(..., dtype)", "a dtype name torch does not know", ValueError, "dtype='float17'")
def _(tmp): X.save_checkpoint(tmp / "m.safetensors", tiny_model(pad_idx=1), tiny_vocab(), tiny_vocab(), dtype="float17")


@case("translate_tokens(model, sentences, ...)", "one string instead of a list", TypeError, "sentences", "translate()")
def _(tmp):
    model, src_vocab, tgt_vocab, _ = X.load_checkpoint(tiny_checkpoint(tmp))
    G.translate_tokens(model, "ein hund", D.Tokenizer("de"), src_vocab, tgt_vocab)


@case("translate_tokens(..., search)", "a search that is not callable", TypeError, "search", "FastBeamSearch")
def _(tmp):
    model, src_vocab, tgt_vocab, _ = X.load_checkpoint(tiny_checkpoint(tmp))
    G.translate_tokens(model, ["ein hund"], D.Tokenizer("de"), src_vocab, tgt_vocab, search="fast")


@case("logprob_per_token(model, src_ids, tgt_ids, ...)", "two sources but one translation", ValueError,
      "src_ids and tgt_ids", "one translation per source")
def _(tmp):
    model, src_vocab, tgt_vocab, _ = X.load_checkpoint(tiny_checkpoint(tmp))
    X.logprob_per_token(model, [[5, 6], [7]], [[5]], src_vocab.pad_idx, tgt_vocab)


@case("logprob_per_token(model, src_ids, tgt_ids, ...)", "a source with no tokens", ValueError, "src_ids",
      "source 1 has no tokens")
def _(tmp):
    model, src_vocab, tgt_vocab, _ = X.load_checkpoint(tiny_checkpoint(tmp))
    X.logprob_per_token(model, [[5, 6], []], [[5], [6]], src_vocab.pad_idx, tgt_vocab)


@case("translate(model, sentence)", "a model that carries no vocabularies", ValueError, "vocabularies", "load_checkpoint")
def _(tmp): X.translate(tiny_model(), "ein hund")


@case("translate(model, sentence)", "a list holding a non-string", TypeError, "sentence", "strings")
def _(tmp): X.translate(X.load_checkpoint(tiny_checkpoint(tmp))[0], ["ein hund", 3])


@case("translate(model, sentence)", "None", TypeError, "sentence", "NoneType")
def _(tmp): X.translate(X.load_checkpoint(tiny_checkpoint(tmp))[0], None)


@case("translate(model, sentence)", "a lone surrogate (undecodable bytes)", ValueError, "sentence 0", "surrogate")
def _(tmp): X.translate(X.load_checkpoint(tiny_checkpoint(tmp))[0], "ein \udcff hund")


@case("translate(model, sentence)", "more tokens than the model has positions", ValueError, "sentence 0", "max_len")
def _(tmp): X.translate(X.load_checkpoint(tiny_checkpoint(tmp))[0], "hund " * 21)


@case("translate_tokens(..., batch_size)", "batch_size 0", ValueError, "batch_size")
def _(tmp):
    model, src_vocab, tgt_vocab, _ = X.load_checkpoint(tiny_checkpoint(tmp))
    G.translate_tokens(model, ["ein hund"], D.Tokenizer("de"), src_vocab, tgt_vocab, batch_size=0)


@case("translate(model, sentence, beam_size)", "beam_size 0", ValueError, "beam_size")
def _(tmp): X.translate(X.load_checkpoint(tiny_checkpoint(tmp))[0], "ein hund", beam_size=0)


@case("translate(model, sentence, src_vocab, tgt_vocab)", "vocabularies of another model", ValueError, "tgt_vocab", "tgt_vocab=11")
def _(tmp): X.translate(tiny_model(), "ein hund", src_vocab=tiny_vocab(), tgt_vocab=D.Vocab(list(D.Vocab.SPECIALS)))


@case("bleu(hypotheses, references)", "fewer hypotheses than references", ValueError, "hypotheses", "references")
def _(tmp): X.bleu([["a", "dog"]], ["A dog.", "A cat."])


@case("bleu(hypotheses, references)", "hypotheses as strings, not token lists", TypeError, "hypotheses", "token")
def _(tmp): X.bleu(["a dog ."], ["A dog."])


@case("bleu(hypotheses, references)", "nothing to score", ValueError, "references", "empty")
def _(tmp): X.bleu([], [])


@case("Recipe(...)", "epochs 0", ValueError, "epochs", "positive int")
def _(tmp): X.Recipe(epochs=0)


@case("Recipe(...)", "muon given as a string", TypeError, "muon", "True or False")
def _(tmp): X.Recipe(muon="yes")


@case("Recipe(...)", "d_model not divisible by n_heads", ValueError, "d_model=100", "n_heads=8")
def _(tmp): X.Recipe(d_model=100)


@case("Recipe(...)", "dropout 1.0", ValueError, "dropout", "[0, 1)")
def _(tmp): X.Recipe(dropout=1.0)


@case("Recipe(...)", "length_penalty -1", ValueError, "length_penalty")
def _(tmp): X.Recipe(length_penalty=-1.0)


@case("Recipe(...)", "bpe_dropout with whole words", ValueError, "bpe_dropout", "subwords")
def _(tmp): X.Recipe(bpe_dropout=0.1)


@case("Recipe(...)", "cooldown 0: no steps to fall to zero over", ValueError, "cooldown", "(0, 1]")
def _(tmp): X.Recipe(cooldown=0.0)


@case("Recipe(...)", "ema 1: an average that never moves from its start", ValueError, "ema", "(0, 1)")
def _(tmp): X.Recipe(ema=1.0)


@case("wsd_rate(step, total, ...)", "step 0 (steps count from 1)", ValueError, "step", "positive int")
def _(tmp): X.wsd_rate(0, 100, 256, 1.0, 10, 0.3)


@case("wsd_rate(step, total, ...)", "cooldown 1.5, more than the whole run", ValueError, "cooldown", "(0, 1]")
def _(tmp): X.wsd_rate(1, 100, 256, 1.0, 10, 1.5)


@case("Recipe.from_dict(values)", "a misspelt field", ValueError, "unknown", "epoch")
def _(tmp): X.Recipe.from_dict({"epoch": 3})


@case("budget_recipe(budget)", "a budget no recipe has", ValueError, "budget", "'smoke', 'cpu', 'full'", "'gpu'")
def _(tmp): X.budget_recipe("gpu")


@case("budget_recipe(..., bf16_hardware)", "the device instead of whether it has bfloat16", TypeError, "bf16_hardware",
      "has_bf16")
def _(tmp): X.budget_recipe("cpu", torch.device("cpu"))


@case("average_checkpoints(paths)", "no paths", ValueError, "paths", "empty")
def _(tmp): X.average_checkpoints([])


@case("average_checkpoints(paths)", "one path, not a list of them", TypeError, "paths", "list")
def _(tmp): X.average_checkpoints(str(tiny_checkpoint(tmp)))


@case("average_checkpoints(paths)", "checkpoints of two different models", ValueError, "does not share")
def _(tmp):
    a = tiny_checkpoint(tmp)
    b = X.save_checkpoint(tmp / "b.safetensors", tiny_model(n_layers=2, pad_idx=1), tiny_vocab(), tiny_vocab())
    X.average_checkpoints([a, b])


@case("train_translation(recipe, out_dir)", "a budget name instead of a Recipe", TypeError, "recipe", "RECIPES")
def _(tmp): X.train_translation("smoke", tmp / "run")


@case("train_translation(recipe, out_dir)", "out_dir is an existing file", ValueError, "out_dir", "folder")
def _(tmp):
    (tmp / "run").write_text("notes")
    X.train_translation(X.RECIPES["smoke"], tmp / "run")


@case("train_translation(recipe, out_dir)", "a fast recipe without chapter 9's speed_up", ValueError, "speedup",
      "speed_up")
def _(tmp): X.train_translation(replace(X.RECIPES["smoke"], fast=True), tmp / "run")


@case("attention_maps(model, src_ids, tgt_ids)", "an empty target", ValueError, "tgt_ids")
def _(tmp): G.attention_maps(tiny_model(), [2, 3], [])


@case("attention_maps(model, src_ids, tgt_ids)", "a source id past the vocabulary", ValueError, "src", "src_vocab=11")
def _(tmp): G.attention_maps(tiny_model(), [2, 30], [1, 2])


@case("attention_frame(maps, src_tokens, tgt_tokens)", "labels for another sentence", ValueError, "encoder", "source tokens")
def _(tmp): G.attention_frame(G.attention_maps(tiny_model(), [2, 3], [1, 2]), ["ein"], ["<s>", "a"])


@case("plot_attention_grid(maps, kind, ...)", "an unknown kind", ValueError, "kind", "'cross'")
def _(tmp): P.plot_attention_grid({}, "self", [], [])


@case("chapter_budget(chapter)", "a chapter that is not a notebook's path", ValueError, "chapter", "08_translation.ipynb")
def _(tmp): RC.chapter_budget("08_translation")


@case("plot_sampling_filters(logits, vocab, settings)", "more settings than panels", ValueError, "settings", "got 6")
def _(tmp): P.plot_sampling_filters(torch.zeros(1, 20), D.Vocab([*D.Vocab.SPECIALS, *map(str, range(16))]),
                               {str(t): {} for t in range(6)}, lambda logits: logits)


@case("plot_target_distribution(dist, targets, criterion)", "a row too few", ValueError, "dist", "for 3 targets")
def _(tmp): CU.plot_target_distribution(torch.zeros(2, 5), torch.tensor([1, 2, 3]), T.LabelSmoothing(5, 0, 0.1))


@case("plot_copy_losses(result)", "a run with no step", ValueError, "result", "history is empty")
def _(tmp): CU.plot_copy_losses(T.CopyTaskResult(model=None))


@case("plot_lm_history(history)", "no epoch", ValueError, "history", "empty list")
def _(tmp): CU.plot_lm_history([])


@case("plot_translation_history(history)", "no epoch", ValueError, "history", "empty list")
def _(tmp): CU.plot_translation_history([])


@case("plot_schedules(rates, title)", "a schedule without a step", ValueError, "rates", "at least one step")
def _(tmp): CU.plot_schedules({"noam": []}, "t")


@case("plot_speedups(speedups, title)", "a factor of zero", ValueError, "speedups", "'fast': 0.0")
def _(tmp): CU.plot_speedups({"readable": 1.0, "fast": 0.0}, "t")


@case("plot_attention_grid(maps, kind, ..., layers=...)", "a layer the maps do not have", ValueError, "layers", "from 1 to 1")
def _(tmp): P.plot_attention_grid(G.attention_maps(tiny_model(), [2, 3], [1, 2]), "cross", ["ein", "mann"], ["<s>", "a"],
                                  layers=[2])


@case("attention_chart(frame, kind)", "an unknown kind", ValueError, "kind", "'decoder'")
def _(tmp): G.attention_chart(None, "enc-dec")


@case("attention_chart(frame, kind, layer=...)", "a layer the model does not have", ValueError, "layer=9", "layers")
def _(tmp): G.attention_chart(G.attention_frame(G.attention_maps(tiny_model(), [2, 3], [1, 2]), ["ein", "mann"],
                                               ["<s>", "a"]), "cross", layer=9)


# ---------------------------------------------------------------------------------------------- fast
@case("use_fast_path(model)", "something that is not a module", TypeError, "model", "nn.Module")
def _(tmp): F.use_fast_path("model")


@case("speed_up(model, criterion, device)", "PyTorch's loss instead of chapter 5's", TypeError, "criterion",
      "LabelSmoothing")
def _(tmp): F.speed_up(tiny_model(), nn.CrossEntropyLoss(), "cpu")


@case("FastLabelSmoothing(..., spread_over_all=True)", "the variant it does not implement", ValueError, "spread_over_all")
def _(tmp): F.FastLabelSmoothing(11, 0, spread_over_all=True)


@case("FastLabelSmoothing(log_probs, target)", "a target id equal to vocab_size", ValueError, "target", "[0, vocab_size=11)")
def _(tmp): F.FastLabelSmoothing(11, 0)(torch.randn(2, 11).log_softmax(-1), ids(3, 11))


@case("FusedMultiHeadAttention(..., mask)", "a float mask", TypeError, "mask", "boolean")
def _(tmp): F.FusedMultiHeadAttention(8, 2)(x3(), x3(), x3(), torch.ones(2, 1, 1, 4))


@case("FusedMultiHeadAttention(..., mask)", "a mask over the wrong number of keys", ValueError, "mask", "(2, 2, 4, 4)")
def _(tmp): F.FusedMultiHeadAttention(8, 2)(x3(), x3(), x3(), torch.ones(2, 1, 1, 5, dtype=torch.bool))


@case("matmul_peak(dtype, size)", "size 0", ValueError, "size")
def _(tmp): R.matmul_peak(size=0)


@case("has_bf16(device)", "a device torch does not know", ValueError, "device", "gpu")
def _(tmp): F.has_bf16("gpu")


@case("FastBeamSearch(model)", "a module that is not an EncoderDecoder", TypeError, "model", "EncoderDecoder")
def _(tmp): F.FastBeamSearch(nn.Linear(4, 4))


@case("PackedDecoder(model)", "a module that is not an EncoderDecoder", TypeError, "model", "EncoderDecoder")
def _(tmp): F.PackedDecoder(nn.Linear(4, 4))


@case("PackedDecoder(model, dtype)", "a dtype name torch does not know", ValueError, "dtype='float17'")
def _(tmp): F.PackedDecoder(tiny_model(), "float17")


@case("pack_decoder(model, dtype)", "a dtype name torch does not know", ValueError, "dtype='float17'")
def _(tmp): F.pack_decoder(tiny_model(), "float17")


@case("FastBeamSearch(model, dtype)", "an integer dtype", ValueError, "dtype=torch.int64", "floating-point", "torch.int8")
def _(tmp): F.FastBeamSearch(tiny_model(), torch.int64)


@case("int8_linear(weight)", "a weight of one dimension", ValueError, "weight", "(out_features, in_features)")
def _(tmp): F.int8_linear(torch.ones(4))


@case("int8_linear(weight)", "a weight holding inf", ValueError, "weight", "inf or nan")
def _(tmp): F.int8_linear(torch.tensor([[1.0, float("inf")]]))


@case("int8_linear(weight, bias)", "a bias of the wrong length", ValueError, "bias", "(3,)")
def _(tmp): F.int8_linear(torch.ones(3, 2), torch.ones(2))


@case("quantize_int8(x)", "an integer tensor", ValueError, "x", "floating-point")
def _(tmp): F.quantize_int8(torch.ones(3, 4, dtype=torch.long))


@case("int8_matmul(a, b)", "float matrices", ValueError, "a", "int8")
def _(tmp): F.int8_matmul(torch.ones(3, 4), torch.ones(4, 2))


@case("int8_matmul(a, b)", "inner sizes that disagree", ValueError, "must agree on k")
def _(tmp): F.int8_matmul(torch.ones(3, 4, dtype=torch.int8), torch.ones(5, 2, dtype=torch.int8))


@case("int8_linear(weight)(x)", "an input whose last dimension is not in_features", ValueError, "x", "in_features=2")
def _(tmp): F.int8_linear(torch.ones(3, 2))(torch.ones(5, 4))


@case("quantized_linear(weight)(x)", "a batch with one row of inf (one scale would spoil every row)", ValueError,
      "row 1 of x", "inf or NaN")
def _(tmp): F.quantized_linear(torch.ones(3, 2))(torch.tensor([[1.0, 2.0], [float("inf"), 0.0], [3.0, 4.0]]))


@case("quantize_int8(x)", "a row holding NaN", ValueError, "row 0 of x", "inf or NaN")
def _(tmp): F.quantize_int8(torch.tensor([[float("nan"), 1.0]]))


@case("quantized_linear(weight)", "a weight holding nan", ValueError, "weight", "inf or nan")
def _(tmp): F.quantized_linear(torch.tensor([[1.0, float("nan")]]))


@case("quantized_linear(weight)(x)", "an input whose last dimension is not in_features", ValueError, "x",
      "in_features=2")
def _(tmp): F.quantized_linear(torch.ones(3, 2))(torch.ones(5, 4))


@case("FastBeamSearch(model)(src, ..., beam_size)", "beam_size 0", ValueError, "beam_size")
def _(tmp): F.FastBeamSearch(tiny_model())(ids([2, 3]), A.padding_mask(ids([2, 3]), 0), 5, 1, 2, beam_size=0)


@case("FastBeamSearch(model)(src, ..., end_symbol)", "an end symbol outside the target vocabulary", ValueError,
      "end_symbol", "tgt_vocab=11")
def _(tmp): F.FastBeamSearch(tiny_model())(ids([2, 3]), A.padding_mask(ids([2, 3]), 0), 5, 1, 11)


@case("FastBeamSearch(model)(src, src_mask, ...)", "a source mask for another source length", ValueError, "src_mask")
def _(tmp): F.FastBeamSearch(tiny_model())(ids([2, 3]), A.padding_mask(ids([2, 3, 0]), 0), 5, 1, 2)


# ------------------------------------------------------------------------------- decoder-only models (10, 11)
def _gpt():
    from transformer_lib import gpt
    return gpt


def _modern():
    from transformer_lib import modern
    return modern


def tiny_gpt():
    torch.manual_seed(0)
    return _gpt().GPT(_gpt().GPTConfig(vocab_size=11, n_layers=1, d_model=8, n_heads=2, d_ff=16, context=6)).eval()


def tiny_block(**switches):
    return _modern().BlockConfig(vocab_size=11, n_layers=1, d_model=8, n_heads=2, d_ff=16, context=6, **switches)


@case("GPTConfig(d_model, n_heads)", "n_heads that does not divide d_model", ValueError, "d_model", "n_heads")
def _(tmp): _gpt().GPTConfig(vocab_size=11, n_layers=1, d_model=10, n_heads=4, d_ff=16)


@case("GPT(config)(tokens)", "a sequence longer than the context", ValueError, "tokens", "context=6")
def _(tmp): tiny_gpt()(torch.zeros(1, 7, dtype=torch.long))


@case("GPT(config)(tokens)", "an id outside the vocabulary", ValueError, "tokens", "11")
def _(tmp): tiny_gpt()(torch.tensor([[1, 11]]))


@case("KVCache(model)(tokens)", "one step past the context, counting the tokens already cached", ValueError,
      "tokens", "already", "context=6")
def _(tmp):
    cache = _gpt().KVCache(tiny_gpt())
    cache(torch.zeros(1, 6, dtype=torch.long))
    cache(torch.zeros(1, 1, dtype=torch.long))


@case("lm_sequences(..., context)", "a context of 0", ValueError, "context")
def _(tmp): _gpt().lm_sequences(["a dog"], str.split, tiny_vocab(), 0)


@case("caption_corpus(n_train, ...)", "no training captions", ValueError, "n_train")
def _(tmp): _gpt().caption_corpus(n_train=0)


@case("lm_batches(sequences, max_tokens, ...)", "a token budget of 0", ValueError, "max_tokens")
def _(tmp): list(_gpt().lm_batches([[2, 5, 3]], 0, 1))


@case("train_lm(..., epochs, ...)", "zero epochs", ValueError, "epochs")
def _(tmp): _gpt().train_lm(tiny_gpt(), [[2, 5, 3]], [[2, 5, 3]], 0, 1, log=lambda *_: None)


@case("filter_logits(logits, temperature)", "temperature 0 (greedy is its own switch)", ValueError, "temperature",
      "greedy=True")
def _(tmp): _gpt().filter_logits(torch.zeros(1, 11), temperature=0)


@case("filter_logits(logits, top_p=...)", "top_p above 1", ValueError, "top_p", "(0, 1]")
def _(tmp): _gpt().filter_logits(torch.zeros(1, 11), top_p=1.5)


@case("filter_logits(logits, top_p=...)", "top_p of 0, which keeps no token", ValueError, "top_p", "(0, 1]")
def _(tmp): _gpt().filter_logits(torch.zeros(1, 11), top_p=0.0)


@case("filter_logits(logits, top_k=...)", "top_k of 0", ValueError, "top_k")
def _(tmp): _gpt().filter_logits(torch.zeros(1, 11), top_k=0)


@case("generate(model, prompt, max_new_tokens)", "more new tokens than the context leaves room for", ValueError,
      "max_new_tokens", "context=6")
def _(tmp): _gpt().generate(tiny_gpt(), torch.tensor([[2, 5]]), 6)


@case("RMSNorm(d_model)(x)", "x whose last dimension is not d_model", ValueError, "8")
def _(tmp): _modern().RMSNorm(8)(torch.zeros(2, 3, 6))


@case("FeedForward(d_model, d_ff)", "d_ff of 0", ValueError, "d_ff")
def _(tmp): _modern().FeedForward(8, 0)


@case("SwiGLU(d_model, d_hidden)", "a dropout of 1", ValueError, "dropout")
def _(tmp): _modern().SwiGLU(8, 12, dropout=1.0)


@case("rope_angles(context, d_k)", "an odd d_k", ValueError, "d_k=7", "pairs")
def _(tmp): _modern().rope_angles(16, 7)


@case("apply_rope(x, angles)", "x before the head split, (B, T, d_model)", ValueError, "x", "heads")
def _(tmp): _modern().apply_rope(torch.zeros(2, 5, 8), _modern().rope_angles(5, 8))


@case("apply_rope(x, angles)", "a sequence past the RoPE table", ValueError, "angles", "RoPE table")
def _(tmp): _modern().apply_rope(torch.zeros(1, 2, 9, 8), _modern().rope_angles(8, 8))


@case("pairs_from_halves(weight, n_heads)", "rows that are not n_heads heads of an even d_k", ValueError, "n_heads=4", "even d_k")
def _(tmp): _modern().pairs_from_halves(torch.zeros(10, 3), 4)


@case("pairs_from_halves(weight, n_heads)", "the projection module instead of its weight", ValueError, "weight", "projection")
def _(tmp): _modern().pairs_from_halves(torch.nn.Linear(8, 16), 4)


@case("Attention(d_model, n_heads, n_kv_heads)", "n_heads not divisible by n_kv_heads", ValueError, "n_heads=8",
      "n_kv_heads=3")
def _(tmp): _modern().Attention(32, 8, 3)


@case("BlockConfig(..., norm=...)", "a norm the block does not have", ValueError, "norm", "'rms'")
def _(tmp): tiny_block(norm="batch")


@case("BlockConfig(..., bias=...)", "bias given as a string", TypeError, "bias")
def _(tmp): tiny_block(bias="no")


@case("Block(config)", "a GPTConfig where a BlockConfig is needed", TypeError, "BlockConfig")
def _(tmp): _modern().Block(_gpt().GPTConfig(vocab_size=11, n_layers=1, d_model=8, n_heads=2, d_ff=16))


@case("ModernGPT(config)(tokens, cache)", "a step past the context (and the RoPE table)", ValueError, "tokens",
      "context=6")
def _(tmp):
    model = _modern().ModernGPT(tiny_block(positions="rope")).eval()
    cache = [None]
    model(torch.zeros(1, 6, dtype=torch.long), cache)
    model(torch.zeros(1, 1, dtype=torch.long), cache)


@case("from_gpt(gpt)", "a translation model instead of chapter 10's GPT", TypeError, "gpt", "EncoderDecoder")
def _(tmp): _modern().from_gpt(tiny_model())


@case("BlockConfig(..., tie_head=...)", "tie_head given as a string", TypeError, "tie_head")
def _(tmp): tiny_block(tie_head="no")


@case("BlockConfig(..., d_hidden=...)", "a SwiGLU hidden size of 0", ValueError, "d_hidden")
def _(tmp): tiny_block(ffn="swiglu", d_hidden=0)


@case("from_gpt(gpt)", "a GPT with GPT-2's learned positions, which BlockConfig has no switch for", ValueError, "gpt",
      "positions='learned'")
def _(tmp): _modern().from_gpt(_gpt().GPT(_gpt().GPTConfig(11, 1, 8, 2, 16, context=6, positions="learned")))


def tiny_gpt2(**options):
    from transformers import GPT2Config, GPT2LMHeadModel
    settings = dict(vocab_size=11, n_positions=6, n_embd=8, n_layer=1, n_head=2, bos_token_id=None, eos_token_id=None)
    return GPT2LMHeadModel(GPT2Config(**{**settings, **options}))


def tiny_llama(**options):
    from transformers import LlamaConfig, LlamaForCausalLM
    settings = dict(vocab_size=11, hidden_size=8, intermediate_size=12, num_hidden_layers=1, num_attention_heads=2,
                    max_position_embeddings=6, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return LlamaForCausalLM(LlamaConfig(**{**settings, **options}))


@case("GPTConfig(..., positions=...)", "RoPE, which is chapter 11's BlockConfig's", ValueError, "positions", "'learned'")
def _(tmp): _gpt().GPTConfig(vocab_size=11, positions="rope")


@case("GPTConfig(..., activation=...)", "the exact GELU, where GPT-2's is the tanh approximation", ValueError,
      "activation", "'gelu_tanh'")
def _(tmp): _gpt().GPTConfig(vocab_size=11, activation="gelu")


@case("GPTConfig(..., norm_eps=...)", "an epsilon of 0", ValueError, "norm_eps")
def _(tmp): _gpt().GPTConfig(vocab_size=11, norm_eps=0.0)


@case("GPTConfig(..., scale_embeddings=...)", "scale_embeddings given as a string", TypeError, "scale_embeddings")
def _(tmp): _gpt().GPTConfig(vocab_size=11, scale_embeddings="no")


@case("GELUFeedForward(d_model, d_ff)", "a hidden size of 0", ValueError, "d_ff")
def _(tmp): _gpt().GELUFeedForward(8, 0)


@case("from_gpt2(source, config)", "the hub name instead of the model", TypeError, "source", "str")
def _(tmp): _gpt().from_gpt2("gpt2")


@case("from_gpt2(source, config)", "a state dict without its config", ValueError, "config", "to_dict")
def _(tmp): _gpt().from_gpt2(tiny_gpt2().state_dict())


@case("from_gpt2(source, config)", "a Llama instead of a GPT-2", ValueError, "model_type='llama'", "from_gpt2")
def _(tmp): _gpt().from_gpt2(tiny_llama())


@case("from_gpt2(source, config)", "a GPT-2 with the ReLU activation, which GPT does not load", ValueError,
      "activation_function='relu'")
def _(tmp): _gpt().from_gpt2(tiny_gpt2(activation_function="relu"))


@case("from_gpt2(source, config)", "attention scaled by the inverse layer index", ValueError,
      "scale_attn_by_inverse_layer_idx")
def _(tmp): _gpt().from_gpt2(tiny_gpt2(scale_attn_by_inverse_layer_idx=True))


@case("from_gpt2(source, config)", "a state dict missing a layer's tensors", KeyError, "source", "transformer.h.0")
def _(tmp):
    model = tiny_gpt2()
    _gpt().from_gpt2({k: v for k, v in model.state_dict().items() if ".h.0.attn" not in k}, model.config)


@case("from_llama(source, config)", "a GPT-2 instead of a Llama", ValueError, "model_type='gpt2'", "from_llama")
def _(tmp): _modern().from_llama(tiny_gpt2())


@case("from_llama(source, config)", "a Llama with attention biases", ValueError, "attention_bias")
def _(tmp): _modern().from_llama(tiny_llama(attention_bias=True))


@case("from_llama(source, config)", "RoPE scaled for long contexts (Llama 3.1's)", ValueError, "rope type", "'llama3'")
def _(tmp):
    _modern().from_llama(tiny_llama(rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                                                         low_freq_factor=1.0, high_freq_factor=4.0,
                                                         original_max_position_embeddings=4)))


@case("from_llama(source, config)", "a state dict without its config", ValueError, "config")
def _(tmp): _modern().from_llama(tiny_llama().state_dict())


@case("from_llama(source, config)", "a state dict missing a layer's projection", KeyError, "source",
      "model.layers.0.self_attn.q_proj.weight")
def _(tmp):
    model = tiny_llama()
    _modern().from_llama({k: v for k, v in model.state_dict().items() if "q_proj" not in k}, model.config)


@case("from_gpt2(source, config)", "a state dict of more layers than the config's n_layer", ValueError, "source",
      "n_layer=1", "layer 1 would be dropped")
def _(tmp):
    model = tiny_gpt2(n_layer=2)
    _gpt().from_gpt2(model.state_dict(), {**model.config.to_dict(), "n_layer": 1})


@case("from_llama(source, config)", "a tensor a LlamaForCausalLM does not have", ValueError, "from_llama",
      "'score.weight'")
def _(tmp):
    model = tiny_llama()
    _modern().from_llama({**model.state_dict(), "score.weight": torch.zeros(2, 8)}, model.config)


@case("from_llama(source, config)", "tie_word_embeddings=True over a head of its own", ValueError, "lm_head.weight",
      "model.embed_tokens.weight", "tie_word_embeddings=True")
def _(tmp):
    model = tiny_llama()
    with torch.no_grad():
        model.lm_head.weight.add_(1.0)
    _modern().from_llama(model.state_dict(), {**model.config.to_dict(), "tie_word_embeddings": True})


@case("from_llama(source, config)", "an untied config over a state dict without lm_head.weight", KeyError,
      "lm_head.weight", "tie_word_embeddings=False")
def _(tmp):
    model = tiny_llama()
    _modern().from_llama({k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}, model.config)


@case("Attention(d_model, n_heads, n_kv_heads)", "0 key/value heads", ValueError, "n_kv_heads", "0")
def _(tmp): _modern().Attention(32, 8, 0)


@case("ModernGPT(config)(tokens, cache)", "a cache filled by a batch of 2 fed a batch of 3", ValueError, "cache",
      "2 sequences", "3 rows")
def _(tmp):
    model, cache = _modern().ModernGPT(tiny_block(positions="rope")).eval(), [None]
    model(torch.zeros(2, 2, dtype=torch.long), cache)
    model(torch.zeros(3, 1, dtype=torch.long), cache)


@case("ModernGPT(config)(tokens, cache)", "a cache list longer than the model's layers", ValueError, "cache",
      "2 entries", "1 layers")
def _(tmp): _modern().ModernGPT(tiny_block()).eval()(torch.zeros(1, 2, dtype=torch.long), [None, None])


@case("apply_rope(x, angles)", "angles cast to bfloat16", ValueError, "angles", "bfloat16", "float32")
def _(tmp): _modern().apply_rope(torch.zeros(1, 2, 4, 8), _modern().rope_angles(4, 8).bfloat16())


@case("generate(model, prompt, ...)", "a translation model", TypeError, "model", "EncoderDecoder")
def _(tmp): _gpt().generate(tiny_model(), torch.tensor([[2, 5]]), 3)


@case("filter_logits(logits, ...)", "logits holding NaN (a diverged model)", ValueError, "logits", "NaN")
def _(tmp): _gpt().filter_logits(torch.tensor([[0.0, float("nan"), 1.0]]))


@case("one_change_variants(base)", "a GPTConfig (chapter 10's) instead of a BlockConfig", TypeError, "base",
      "BlockConfig", "GPTConfig")
def _(tmp):
    from transformer_lib.gpt import GPTConfig
    _modern().one_change_variants(GPTConfig(vocab_size=60, n_layers=1, d_model=16, n_heads=2, d_ff=32, context=8))


@case("cache_bytes_per_token(model, tokens)", "more tokens than the model's context", ValueError, "tokens",
      "context=6")
def _(tmp): _modern().cache_bytes_per_token(_modern().ModernGPT(tiny_block()), tokens=7)


# ---------------------------------------------------------------------------------------------- runtime
def _runtime():
    from transformer_lib import runtime
    return runtime


@case("run_budget()", "BOOK_BUDGET set to a budget that does not exist", ValueError, "BOOK_BUDGET", "smoke")
def _(tmp):
    import os
    old = os.environ.get("BOOK_BUDGET")
    os.environ["BOOK_BUDGET"] = "fast"
    try:
        _runtime().run_budget()
    finally:
        if old is None:
            os.environ.pop("BOOK_BUDGET")
        else:
            os.environ["BOOK_BUDGET"] = old


@case("run_budget(name)", "a misspelt budget", ValueError, "name", "'smok'")
def _(tmp): _runtime().run_budget("smok")


@case("seed_everything(seed)", "a negative seed", ValueError, "seed")
def _(tmp): _runtime().seed_everything(-1)


@case("run_budget()", "a book.yml above the working folder that is a YAML list", ValueError, "book.yml", "not a mapping")
def _(tmp):
    import os
    (tmp / "book.yml").write_text("- cpu\n- full\n")
    old, budget = os.getcwd(), os.environ.pop("BOOK_BUDGET", None)
    os.chdir(tmp)
    try:
        _runtime().run_budget()
    finally:
        os.chdir(old)
        if budget is not None:
            os.environ["BOOK_BUDGET"] = budget


@case("render_blocks(book, text, file)", "a generated block whose end marker was deleted", ValueError, "README.md line 1",
      "'load'", "no end marker")
def _(tmp):
    from transformer_lib import claims
    claims.render_blocks(None, "<!-- begin load (python -m transformer_lib.book readme) -->\nold table\n")


# ------------------------------------------------------------------------------- files, serving and run folders
DEEP = "[" * 100_000 + "]" * 100_000  # JSON nested deeper than Python's parser goes


@case("Vocab.load(path)", "a file of JSON nested 100,000 deep", ValueError, "deep.json", "is not a Vocab")
def _(tmp):
    (tmp / "deep.json").write_text(DEEP)
    X.Vocab.load(tmp / "deep.json")


@case("merge_by_rank(symbols, rank)", "the pre-token itself instead of its symbols", TypeError, "symbols",
      "initial_symbols")
def _(tmp): D.merge_by_rank("▁hund", {("h", "u"): 0})


@case("BPE.from_json(text)", "JSON nested 100,000 deep", ValueError, "is not a BPE")
def _(tmp): D.BPE.from_json(DEEP)


@case("train_translation(recipe, out_dir)", "a run folder another training is writing", ValueError, "run",
      "is being written by another training")
def _(tmp):
    (tmp / "run").mkdir()
    (tmp / "run" / ".lock").write_text("12345 build-server\n")  # a training on another machine (a shared disk)
    X.train_translation(X.RECIPES["smoke"], tmp / "run", progress=False, log=lambda *_: None)


@case("write_safetensors(path, save, metadata)", "the disk fills while writing", OSError, "could not write",
      "model.safetensors")
def _(tmp):
    from safetensors import SafetensorError

    from transformer_lib.files import write_safetensors

    def full(name, metadata):
        raise SafetensorError("No space left on device (os error 28)")
    write_safetensors(tmp / "model.safetensors", full, {})


@case("to_ctranslate2(model, src_vocab, tgt_vocab, out_dir)", "a folder holding files of its own", ValueError,
      "out_dir", "holds files that are not a model written by export")
def _(tmp):
    from transformer_lib.serve import to_ctranslate2

    (tmp / "mine").mkdir()
    (tmp / "mine" / "notes.txt").write_text("keep me")
    to_ctranslate2(tiny_model(pad_idx=1), tiny_vocab(), tiny_vocab(), tmp / "mine")


@case("CTranslate2Model(folder)", "a model folder whose model.bin is damaged", ValueError, "ct2",
      "is not a model folder CTranslate2 can read")
def _(tmp):
    from transformer_lib.serve import CTranslate2Model, to_ctranslate2

    folder = to_ctranslate2(tiny_model(pad_idx=1), tiny_vocab(), tiny_vocab(), tmp / "ct2")
    (folder / "model.bin").write_bytes(b"not a model")
    CTranslate2Model(folder)


@case("CTranslate2Model.translate_tokens(sentences)", "a sentence longer than the model's positions", ValueError,
      "sentence 1", "positions")
def _(tmp):
    from transformer_lib.serve import CTranslate2Model, to_ctranslate2

    served = CTranslate2Model(to_ctranslate2(tiny_model(pad_idx=1), tiny_vocab(), tiny_vocab(), tmp / "ct2"))
    served.translate_tokens(["ein hund", "hund " * 30])


@case("load_book(root)", "a book.yml that is not valid YAML", Exception, "book.yml", "line 2, column 1")
def _(tmp):
    from transformer_lib.book import load_book

    (tmp / "book.yml").write_text("title: [unclosed\n")
    load_book(tmp)


@case("load_book(root)", "a chapter listed by a path that leaves the book", Exception, "book.yml", "chapter 1",
      "'../x.ipynb'", "inside the book")
def _(tmp):
    from transformer_lib.book import load_book

    (tmp / "book.yml").write_text("title: T\npackage: p\nchapters:\n  - {file: ../x.ipynb, title: X, module: x}\n")
    load_book(tmp)


@case("load_book(root)", "a repository that is not GitHub's owner/name", Exception, "book.yml", "repository",
      "owner/name")
def _(tmp):
    from transformer_lib.book import load_book

    (tmp / "book.yml").write_text("title: T\npackage: p\nrepository: 'o/r\" onclick=\"x'\nchapters:\n"
                                  "  - {file: notebooks/x.ipynb, title: X, module: x}\n")
    load_book(tmp)


def subword_vocab() -> X.Vocab:
    return X.Vocab([*X.Vocab.SPECIALS, "▁ein", "▁hund", "▁a", "▁dog", ".", "▁rennt", "▁runs"])


def carrying_model() -> M.EncoderDecoder:
    model = tiny_model(pad_idx=1)
    model.vocabs = tiny_vocab(), tiny_vocab()
    return model


@case("evaluate_bleu(model, pairs, src_tok, src_vocab, tgt_vocab)", "a subword model scored with tgt_tok left at whole words",
      ValueError, "tgt_tok=None", "subword", "SubwordTokenizer")
def _(tmp): X.evaluate_bleu(tiny_model(pad_idx=1), [("ein hund", "a dog")], D.Tokenizer("de"), subword_vocab(),
                            subword_vocab(), 1)


@case("translate_tokens(model, sentences, src_tok, src_vocab, tgt_vocab)", "a whole-word Tokenizer over subwords",
      ValueError, "src_tok", "subword", "SubwordTokenizer")
def _(tmp): G.translate_tokens(tiny_model(pad_idx=1), ["ein hund"], D.Tokenizer("de"), subword_vocab(), subword_vocab(), 1)


@case("translate(model, sentence, src_vocab=...)", "another model's vocabulary of the same size", ValueError,
      "src_vocab", "carries", "model.vocabs")
def _(tmp): X.translate(carrying_model(), "ein hund", 1, src_vocab=X.Vocab([*X.Vocab.SPECIALS, *"abcdefg"]))


@case("save_checkpoint(path, model, src_vocab, tgt_vocab, tokenizers=...)", "whole-word tokenizers for subwords",
      ValueError, "tokenizers[0]", "subword")
def _(tmp): X.save_checkpoint(tmp / "m.safetensors", tiny_model(pad_idx=1), subword_vocab(), subword_vocab())


@case("attention_maps(model, src_ids, tgt_ids)", "tensors instead of lists of ids", TypeError, "src_ids", "tolist()")
def _(tmp): G.attention_maps(tiny_model(pad_idx=1), torch.tensor([4, 5]), torch.tensor([2, 6]))


@case("attention_maps(model, src_ids, tgt_ids)", "a model switched to chapter 9's fast path", ValueError,
      "fast path", "use_fast_path(model, False)")
def _(tmp): G.attention_maps(F.use_fast_path(tiny_model(pad_idx=1)), [4, 5], [2, 6])


@case("subword_tokenizers(pairs, n_merges)", "an empty training corpus", ValueError, "pairs", "no words")
def _(tmp): D.subword_tokenizers([], 10)


@case("Vocab.from_json(text)", "tokens that are not strings", ValueError, "is not a Vocab", "strings")
def _(tmp): D.Vocab.from_json('{"tokens": ["<unk>", "<pad>", "<s>", "</s>", 5]}')


@case("locked_folder(path)", "a second training on a run folder from the same process", ValueError,
      "run", "already being written by a training in this process")
def _(tmp):
    from transformer_lib.files import locked_folder

    with locked_folder(tmp / "run"), locked_folder(tmp / "run"):
        pass


@case("locked_folder(path)", "a .lock that is a symbolic link", ValueError, ".lock", "is not a lock file")
def _(tmp):
    from transformer_lib.files import locked_folder

    (tmp / "run").mkdir()
    (tmp / "notes.txt").write_text("not a lock")
    (tmp / "run" / ".lock").symlink_to(tmp / "notes.txt")
    with locked_folder(tmp / "run"):
        pass


@case("to_ctranslate2(model, src_vocab, tgt_vocab, out_dir)", "a user's file beside an earlier export", ValueError,
      "notes.txt", "not written there by export")
def _(tmp):
    from transformer_lib.serve import to_ctranslate2

    folder = to_ctranslate2(tiny_model(pad_idx=1), tiny_vocab(), tiny_vocab(), tmp / "ct2")
    (folder / "notes.txt").write_text("keep me")
    to_ctranslate2(tiny_model(pad_idx=1), tiny_vocab(), tiny_vocab(), folder)


# --------------------------------------------------------------------------- sampling, caches, RoPE, BPE-dropout
def gpt20():
    from transformer_lib.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=20, n_layers=1, d_model=16, d_ff=32, n_heads=2, context=16))


@case("generate(model, prompt, max_new_tokens, end=...)", "an end token outside the vocabulary", ValueError, "end=20",
      "vocab_size=20")
def _(tmp):
    from transformer_lib.gpt import generate
    generate(gpt20(), ids([1, 2]), 3, end=20)


@case("filter_logits(logits, ...)", "the logits of every position (B, T, V), not of the last (B, V)", ValueError,
      "logits", "(B, V)", "(2, 3, 20)")
def _(tmp):
    from transformer_lib.gpt import filter_logits
    filter_logits(torch.randn(2, 3, 20), top_p=0.9)


@case("KVCache(model)(tokens)", "a batch of another size than the first call's", ValueError, "batch of 1",
      "holds 2")
def _(tmp):
    from transformer_lib.gpt import KVCache
    cache = KVCache(gpt20())
    cache(ids([1, 2], [3, 4]))
    cache(ids([5]))


@case("GPT(config)(tokens)", "token ids stored as uint8, which nn.Embedding refuses", TypeError, "tokens", "uint8",
      ".long()")
def _(tmp): gpt20()(torch.tensor([[1, 2]], dtype=torch.uint8))


@case("rope_angles(context, d_k, base)", "a base of 1: every pair turns at the same speed", ValueError, "base=1")
def _(tmp):
    from transformer_lib.modern import rope_angles
    rope_angles(16, 8, base=1)


@case("BPE.encode_word(word, dropout)", "a dropout of 1.5", ValueError, "dropout", "[0, 1)")
def _(tmp): D.BPE([("a", "b")], "ab ").encode_word("ab", dropout=1.5)


@case("train_translation(recipe, out_dir)", "accum_steps larger than the batches of an epoch", ValueError,
      "accum_steps=1000", "an epoch has")
def _(tmp):
    pairs, de, en = D.offline_corpus(50, seed=0), D.Tokenizer("de"), D.Tokenizer("en")
    vocab = X.Vocab.build([de(d) + en(e) for d, e in pairs], min_freq=1)
    data = X.TranslationData(de, en, vocab, vocab, D.encode_pairs(pairs, de, en, vocab, vocab), pairs[:5], pairs[:5],
                             "offline corpus")
    X.train_translation(replace(X.RECIPES["smoke"], accum_steps=1000), tmp / "run", data=data, progress=False,
                        log=lambda *_: None)


@case("seed_summary(values)", "a NaN among the seeds' values", ValueError, "value 1", "nan", "not a finite number")
def _(tmp):
    from transformer_lib.comparisons import seed_summary
    seed_summary([30.0, float("nan"), 31.0])


@case("check_distinct_seeds(seeds)", "seed 0 three times", ValueError, "seed 0 is given 3 times", "distinct")
def _(tmp):
    from transformer_lib.comparisons import check_distinct_seeds
    check_distinct_seeds([0, 0, 0])


@case("verdict(number, answer)", "the number in a list", TypeError, "number", "as a string", "list")
def _(tmp):
    from transformer_lib.exercises import verdict
    verdict(["2.1"], None)


# ---------------------------------------------------------------------------------------------- the table
def message(c: Case, tmp: Path) -> str:
    """The message the case gets, with the temporary folder written as <tmp>."""
    try:
        c.call(tmp)
    except Exception as err:  # noqa: BLE001 - the table shows whatever comes out
        text = f"{type(err).__name__}: {err}"
        return text.replace(str(tmp), "<tmp>")
    return "(no error)"


def render(tmp_root: Path) -> str:
    lines = [
        "# Bad inputs and what they get",
        "",
        "Generated by `python tests/bad_inputs.py` from the cases in `tests/bad_inputs.py`; "
        "`tests/test_bad_inputs.py` checks every case and that this table is current.",
        "",
        f"{len(CASES)} mistakes tried against the public entry points of `transformer_lib`; each is rejected before "
        "anything is changed, with the message below.",
        "",
        "| entry point | mistake | message |",
        "|---|---|---|",
    ]
    for i, c in enumerate(CASES):
        tmp = tmp_root / f"case{i}"
        tmp.mkdir(parents=True, exist_ok=True)
        # a message's <tmp> or <unk> would be read as an HTML tag, and vanish, on GitHub and on the site
        text = re.sub(r"\s+", " ", message(c, tmp)).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        lines.append(f"| `{c.entry}` | {c.mistake} | {text} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        DOC.parent.mkdir(exist_ok=True)
        DOC.write_text(render(Path(root)), encoding="utf-8")
    print(f"wrote {DOC} ({len(CASES)} cases)", file=sys.stderr)
