"""Worked solutions to the exercises of chapter 4 (notebooks/04_model.ipynb). Try them first."""
import math

import torch


def model_parameters(vocab: int, n_layers: int, d_model: int, d_ff: int, shared: bool) -> int:
    """Exercise 4.1: embeddings and generator, N encoder layers, N decoder layers (post-norm: no final norms)."""
    attention = 4 * (d_model * d_model + d_model)  # four projections with biases
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norm = 2 * d_model  # gain and bias
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm  # self-attention and cross-attention
    tables = (1 if shared else 3) * vocab * d_model
    return tables + vocab + n_layers * (encoder_layer + decoder_layer)  # + vocab: the generator's bias


def cross_attention_mask(src: torch.Tensor, tgt_len: int, pad: int) -> torch.Tensor:
    """Exercise 4.2: every target position may read every real source word; (B, 1, 1, Ls) broadcasts over Lt."""
    return (src != pad)[:, None, None, :]


def tie(model) -> None:
    """Exercise 4.3: one Parameter for the source table, the target table and the generator's weight."""
    shared = model.src_embed[0].embedding.weight
    model.tgt_embed[0].embedding.weight = shared
    model.generator.proj.weight = shared


def xavier_token_rms(vocab: int, d_model: int) -> float:
    """Exercise 4.4: Xavier's std for a (vocab, d_model) matrix, sqrt(2 / (fan_in + fan_out)), times sqrt(d_model)."""
    return math.sqrt(d_model) * math.sqrt(2 / (vocab + d_model))
