"""transformer_lib.model: chapter 4's full model, proven equal to nn.Transformer."""
import json

import pytest
import torch
from torch import nn

from transformer_lib.attention import padding_mask, subsequent_mask
from transformer_lib.blocks import LayerNorm
from transformer_lib.embeddings import LearnedPositionalEmbedding, PositionalEncoding
from transformer_lib.model import EncoderDecoder, ModelConfig, build_model, load_torch_transformer, make_model

PAD = 0
SRC = torch.tensor([[1, 5, 7, 3, 2], [1, 9, 4, 2, 0]])
TGT = torch.tensor([[1, 6, 6, 8], [1, 3, 0, 0]])
SMALL = dict(n_layers=2, d_model=32, d_ff=64, n_heads=4)


def torch_transformer(c: ModelConfig, final_norm: bool) -> nn.Transformer:
    def stack(layer_cls, stack_cls):
        layer = layer_cls(c.d_model, c.n_heads, c.d_ff, dropout=0.0, batch_first=True, norm_first=c.norm_first,
                          layer_norm_eps=c.eps)
        extra = {"enable_nested_tensor": False} if stack_cls is nn.TransformerEncoder else {}
        return stack_cls(layer, c.n_layers, norm=nn.LayerNorm(c.d_model, eps=c.eps) if final_norm else None, **extra)
    return nn.Transformer(c.d_model, c.n_heads, batch_first=True,
                          custom_encoder=stack(nn.TransformerEncoderLayer, nn.TransformerEncoder),
                          custom_decoder=stack(nn.TransformerDecoderLayer, nn.TransformerDecoder))


@pytest.mark.parametrize("norm_first", [False, True])
def test_model_matches_torch_transformer_log_probs_and_gradients(norm_first):
    torch.manual_seed(0)
    ours = make_model(11, 11, dropout=0.0, pad_idx=PAD, norm_first=norm_first, **SMALL).eval()
    theirs = torch_transformer(ours.config, final_norm=norm_first).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(0.1 * torch.randn_like(p))
    load_torch_transformer(ours, theirs)
    src_mask, tgt_mask = padding_mask(SRC, PAD), padding_mask(TGT, PAD) & subsequent_mask(4)
    log_probs = ours(SRC, TGT, src_mask, tgt_mask)
    hidden = theirs(ours.src_embed(SRC), ours.tgt_embed(TGT), tgt_mask=~subsequent_mask(4)[0],
                    src_key_padding_mask=SRC == PAD, tgt_key_padding_mask=TGT == PAD, memory_key_padding_mask=SRC == PAD)
    reference = ours.generator(hidden)
    assert (log_probs - reference).abs().max() < 1e-5
    probe = torch.randn_like(log_probs)
    ours_grads = torch.autograd.grad((log_probs * probe).sum(), ours.encoder.layers[0].feed_forward.w_1.weight)[0]
    theirs_grads = torch.autograd.grad((reference * probe).sum(), theirs.encoder.layers[0].linear1.weight)[0]
    # relative to the largest gradient once it exceeds 1, as in test_blocks.diff
    assert (ours_grads - theirs_grads).abs().max() / theirs_grads.abs().max().clamp_min(1.0) < 1e-5


def test_loading_a_torch_transformer_with_mismatched_final_norm_is_an_error():
    ours = make_model(11, 11, **SMALL)  # post-norm: no final norm
    with pytest.raises(ValueError, match="encoder: a final norm in one stack and not the other"):
        load_torch_transformer(ours, torch_transformer(ours.config, final_norm=True))


def base_model_parameter_count(vocab=37000, n=6, d=512, d_ff=2048, shared=True):
    attention = 4 * (d * d + d)
    feed_forward = d * d_ff + d_ff + d_ff * d + d
    norm = 2 * d
    encoder = n * (attention + feed_forward + 2 * norm)
    decoder = n * (2 * attention + feed_forward + 3 * norm)
    embeddings = vocab * d * (1 if shared else 3)
    return encoder + decoder + embeddings + vocab  # + generator bias


def test_base_model_parameter_count_is_about_the_papers_65m():
    with torch.device("meta"):
        model = make_model(37000, 37000, share_embeddings=True)
    total = sum(p.numel() for p in model.parameters())
    assert total == base_model_parameter_count() == 63_119_496
    assert abs(total - 65e6) / 65e6 < 0.05
    with torch.device("meta"):
        assert sum(p.numel() for p in make_model(37000, 37000).parameters()) == base_model_parameter_count(shared=False)


def test_shared_embeddings_tie_source_target_and_generator():
    model = make_model(13, 13, share_embeddings=True, **SMALL)
    table = model.src_embed[0].embedding.weight
    assert model.tgt_embed[0].embedding.weight is table and model.generator.proj.weight is table
    with pytest.raises(ValueError, match="share_embeddings needs one vocabulary"):
        make_model(13, 14, share_embeddings=True, **SMALL)


def test_xavier_matrices_chapter_1_embeddings_and_zero_padding_rows():
    torch.manual_seed(0)
    model = make_model(500, 600, pad_idx=PAD, **SMALL)
    d = SMALL["d_model"]
    for w in (model.encoder.layers[0].feed_forward.w_1.weight, model.generator.proj.weight):
        bound = (6 / (w.size(0) + w.size(1))) ** 0.5
        assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound
    for table in (model.src_embed[0].embedding.weight, model.tgt_embed[0].embedding.weight):
        assert table[PAD].abs().sum() == 0
        real = torch.cat([table[:PAD], table[PAD + 1:]])
        assert abs(real.std().item() * d**0.5 - 1) < 0.05  # N(0, 1/d_model): unit variance after the sqrt(d) scale
    learned = make_model(50, 60, learned_positions=True, max_len=64, **SMALL).src_embed[1]
    table = next(learned.parameters())
    assert abs(table.std().item() * d**0.5 - 1) < 0.1
    shared = make_model(50, 50, share_embeddings=True, pad_idx=PAD, **SMALL)
    assert shared.generator.proj.weight is shared.src_embed[0].embedding.weight
    assert shared.src_embed[0].embedding.weight[PAD].abs().sum() == 0


def test_norm_first_adds_final_norms_and_learned_positions_swap_the_encoding():
    pre = make_model(11, 11, norm_first=True, learned_positions=True, max_len=64, **SMALL)
    post = make_model(11, 11, **SMALL)
    assert isinstance(pre.encoder.norm, LayerNorm) and isinstance(pre.decoder.norm, LayerNorm)
    assert isinstance(post.encoder.norm, nn.Identity) and isinstance(post.decoder.norm, nn.Identity)
    assert isinstance(pre.src_embed[1], LearnedPositionalEmbedding) and isinstance(post.src_embed[1], PositionalEncoding)


def test_forward_returns_log_probabilities_of_the_right_shape():
    model = make_model(11, 17, **SMALL).eval()
    out = model(SRC, TGT, padding_mask(SRC, PAD), padding_mask(TGT, PAD) & subsequent_mask(4))
    assert out.shape == (2, 4, 17)
    assert torch.allclose(out.exp().sum(-1), torch.ones(2, 4), atol=1e-5)
    assert isinstance(model, EncoderDecoder)


def test_mismatched_batch_sizes_are_an_error():
    model = make_model(11, 11, **SMALL)
    with pytest.raises(ValueError, match="src and tgt must have the same batch size, got 2 and 1"):
        model(SRC, TGT[:1])


def test_config_round_trips_through_dict_and_json():
    config = ModelConfig(100, 120, n_layers=3, norm_first=True, pad_idx=1)
    assert ModelConfig.from_dict(config.to_dict()) == config
    assert ModelConfig.from_json(config.to_json()) == config
    assert json.loads(config.to_json())["n_layers"] == 3
    assert '\n  "n_layers": 3,\n' in config.to_json()  # a field a line: a config a reader diffs and edits
    assert build_model(config).config == config


@pytest.mark.parametrize("kwargs,message", [
    (dict(d_model=30, n_heads=4), "d_model=30 is not divisible by n_heads=4"),
    (dict(n_layers=0), "n_layers must be a positive int"),
    (dict(dropout=1.5), "dropout must be a probability in"),
])
def test_bad_config_values_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(10, 10, **kwargs)


def test_unknown_config_keys_are_rejected():
    with pytest.raises(ValueError, match="unknown ModelConfig keys: heads"):
        ModelConfig.from_dict({"src_vocab": 5, "tgt_vocab": 5, "heads": 8})


def test_empty_or_malformed_token_batches_are_rejected_naming_the_argument():
    model = make_model(11, 11, 1, 16, 32, 2, 0.0, pad_idx=0).eval()
    src, tgt = torch.randint(1, 11, (2, 5)), torch.randint(1, 11, (2, 4))
    with pytest.raises(ValueError, match=r"src must be a non-empty \(batch, length\) tensor.*\(0, 5\)"):
        model(src[:0], tgt[:0])
    with pytest.raises(ValueError, match=r"src must be a non-empty .*got \(5,\)"):
        model.encode(src[0])
    memory = model.encode(src)
    with pytest.raises(ValueError, match=r"tgt must be a non-empty .*got \(2, 0\)"):
        model.decode(memory, None, tgt[:, :0])


def test_loading_a_torch_transformer_names_the_stack_whose_depth_differs():
    ours = make_model(11, 11, **SMALL)
    theirs = torch_transformer(ours.config, final_norm=False)
    del theirs.decoder.layers[-1]  # the encoder matches; the decoder is one layer short
    with pytest.raises(ValueError, match=f"^decoder: model has {ours.config.n_layers} layers, transformer "
                                         f"{ours.config.n_layers - 1}$"):
        load_torch_transformer(ours, theirs)
