"""Hostile files and input, as a user from elsewhere would bring them: checkpoints whose metadata lies, command-line
input in other encodings or of any length, training folders that do not belong to the data, and the numerics of
float64 and <unk>. Each case gets a clear error naming what is wrong, before anything large is allocated or any
file is touched.
"""
import gzip
import hashlib
import io
import json
import math
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

import transformer_lib.data as D
import transformer_lib.multi30k as M
import transformer_lib.translation as tr
from transformer_lib import train as train_cli
from transformer_lib import translate as translate_cli
from transformer_lib.attention import mha_from_torch
from transformer_lib.blocks import decoder_layer_from_torch, encoder_layer_from_torch
from transformer_lib.data import Tokenizer, Vocab
from transformer_lib.decoding import translate_tokens
from transformer_lib.files import save_training_state, write_safetensors
from transformer_lib.model import make_model
from transformer_lib.training import LabelSmoothing
from transformer_lib.translation import bleu, load_checkpoint, save_checkpoint, train_translation, translate

from test_translation_training import TINY, offline_data, quiet  # noqa: E402 - the same tiny recipe and data

WORDS = ["ein", "hund", "zwei", "katzen", "a", "dog", "two", "cats", "."]


def tiny(max_len: int = 64):
    """A small untrained model with one shared vocabulary, carrying it as load_checkpoint's models do."""
    torch.manual_seed(0)
    vocab = Vocab([*Vocab.SPECIALS, *WORDS])
    model = make_model(len(vocab), len(vocab), 1, 16, 32, 2, max_len=max_len).eval()
    model.vocabs, model.lower = (vocab, vocab), True
    return model, vocab


@pytest.fixture
def checkpoint(tmp_path):
    model, vocab = tiny()
    return save_checkpoint(tmp_path / "model.safetensors", model, vocab, vocab, lower=True)


def rewrite(path: Path, sign: bool = True, **changes) -> Path:
    """The checkpoint at path with metadata entries replaced (None: removed), signed with a valid sha256 as a
    careful forger would, unless sign=False."""
    from safetensors import safe_open
    from safetensors.torch import load, save_file

    tensors = load(path.read_bytes())
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    metadata.pop("sha256")
    for name, value in changes.items():
        if value is None:
            metadata.pop(name, None)
        else:
            metadata[name] = value
    if sign:
        return write_safetensors(path, lambda tmp, meta: save_file(tensors, str(tmp), meta), metadata)
    save_file(tensors, str(path), metadata)
    return path


# ------------------------------------------------------------------------------------------- files from elsewhere
CONFIG = json.loads(json.dumps({"src_vocab": 13, "tgt_vocab": 13, "n_layers": 1, "d_model": 16, "d_ff": 32,
                                "n_heads": 2, "dropout": 0.1, "norm_first": False, "learned_positions": False,
                                "max_len": 64, "share_embeddings": False, "pad_idx": None, "eps": 1e-6}))
HOSTILE = {
    "config that is not JSON": ({"config": "{not json"}, "its config is not valid JSON"),
    "config that is a list": ({"config": "[1, 2]"}, "its config must be a JSON object, got list"),
    "config that is null": ({"config": "null"}, "its config must be a JSON object, got NoneType"),
    "a number given as a string": ({"config": json.dumps({**CONFIG, "d_model": "16"})}, "d_model must be an int"),
    "an unknown config key": ({"config": json.dumps({**CONFIG, "layers": 2})}, "unknown ModelConfig keys: layers"),
    "non-string tokens": ({"src_vocab": json.dumps({"tokens": [0, 1, 2, 3]})}, "list of token strings"),
    "a vocabulary that is a list": ({"tgt_vocab": json.dumps(["<unk>"])}, "its tgt_vocab must be a JSON object"),
    "a vocabulary without specials": ({"src_vocab": json.dumps({"tokens": ["a"] * 13})}, "its src_vocab is not a vocabulary"),
    "info that is a list": ({"info": "[1]"}, "its info must be a JSON object, got list"),
    "info that is not JSON": ({"info": "{"}, "its info is not valid JSON"),
    "a config of another size": ({"config": json.dumps({**CONFIG, "d_model": 32})}, "weights do not fit .*shapes differ"),
    "a config with more layers": ({"config": json.dumps({**CONFIG, "n_layers": 200})}, "weights do not fit .*missing"),
    "a config hundreds of times larger": ({"config": json.dumps({**CONFIG, "d_model": 8192, "d_ff": 1 << 16,
                                                                  "n_layers": 48})}, "weights do not fit"),
    "positional tables of 10^9 positions": ({"config": json.dumps({**CONFIG, "max_len": 10 ** 9})},
                                            "positional tables of 32,000,000,000 values .max_len=1000000000"),
    "no vocabularies": ({"src_vocab": None, "tgt_vocab": None}, "lacks src_vocab, tgt_vocab"),
    "tokenizers that are not JSON": ({"tokenizers": "[{"}, "its tokenizers is not valid JSON"),
    "one tokenizer for two languages": ({"tokenizers": json.dumps([{"kind": "words", "lang": "de", "lower": True}])},
                                        "its tokenizers must be a list of two"),
    "a tokenizer of an unknown kind": ({"tokenizers": json.dumps([{"kind": "wordpiece", "lang": "de", "lower": True}] * 2)},
                                       "its German tokenizer is not valid .*'words' or 'bpe'"),
    "config nested 100,000 deep": ({"config": "[" * 100_000 + "]" * 100_000}, "its config is JSON nested too deeply"),
    "tokenizers nested 100,000 deep": ({"tokenizers": "[" * 100_000}, "its tokenizers is JSON nested too deeply"),
    "info nested 100,000 deep": ({"info": '{"a":' * 100_000 + "1" + "}" * 100_000}, "its info is JSON nested too deeply"),
    "a German tokenizer for English": ({"tokenizers": json.dumps([{"kind": "words", "lang": "en", "lower": True}] * 2)},
                                       "its German tokenizer is for lang='en'"),
    "a tokenizer with entries of another kind": ({"tokenizers": json.dumps(
        [{"kind": "words", "lang": "de", "lower": True, "merges": [["a", "b"]], "alphabet": "ab"},
         {"kind": "words", "lang": "en", "lower": True}])}, "which a 'words' tokenizer does not have"),
    "merges of another model": ({"tokenizers": json.dumps([{"kind": "bpe", "lang": "de", "lower": True,
                                                            "merges": [["a", "b"]], "alphabet": "ab "}] * 2)},
                                "its German BPE makes 12 symbols that are not its vocabulary of 13 tokens"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_checkpoint_metadata_is_refused_before_a_model_is_built(checkpoint, monkeypatch, case):
    changes, message = HOSTILE[case]
    rewrite(checkpoint, **changes)
    import transformer_lib.model as model_module

    built, real_build = [], model_module.build_model

    def build_model(config):  # the shape check builds on the meta device; a real build must not be reached
        if torch.empty(0).device.type != "meta":
            built.append(config)
        return real_build(config)

    monkeypatch.setattr(model_module, "build_model", build_model)
    with pytest.raises(ValueError, match=message) as err:
        load_checkpoint(checkpoint)
    assert str(checkpoint) in str(err.value) and not built


def test_the_hostile_checkpoints_without_a_guard_would_allocate_gigabytes():
    """The point of checking shapes on the meta device: the config above describes this many parameters."""
    from transformer_lib.model import ModelConfig, build_model

    with torch.device("meta"):
        huge = build_model(ModelConfig(**{**CONFIG, "d_model": 8192, "d_ff": 1 << 16, "n_layers": 48}))
    assert sum(p.numel() for p in huge.parameters()) * 4 > 100e9  # over 100 GB of float32


def test_a_checkpoint_whose_sha256_was_removed_is_refused(checkpoint):
    rewrite(checkpoint, sign=False)  # the same contents, its digest taken out
    with pytest.raises(ValueError, match=f"{checkpoint} carries no sha256 of its contents"):
        load_checkpoint(checkpoint)


def test_a_training_state_and_a_checkpoint_are_not_taken_for_each_other(checkpoint, tmp_path):
    model, vocab = tiny()
    optimizer = torch.optim.Adam(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    state = save_training_state(tmp_path / "state.safetensors", model, optimizer, scheduler, epoch=1)
    with pytest.raises(ValueError, match=f"{state} is a training state .*not a checkpoint; load model.safetensors"):
        load_checkpoint(state)
    data, run_dir = offline_data(), tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "state.safetensors").write_bytes(checkpoint.read_bytes())
    with pytest.raises(ValueError, match="is a checkpoint, not a training state"):
        train_translation(TINY, run_dir, data=data, progress=False, log=quiet)


@pytest.mark.parametrize("dtype", ["float16", "torch.float16", "half", torch.float16])
def test_save_checkpoint_takes_a_dtype_or_its_name(tmp_path, dtype):
    model, vocab = tiny()
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab, dtype=dtype)
    loaded = load_checkpoint(path)[0]
    for p, q in zip(model.parameters(), loaded.parameters()):
        assert torch.equal(p.half().float(), q)


@pytest.mark.parametrize("dtype, error, message", [("float17", ValueError, "dtype='float17' is not a torch dtype"),
                                                   ("int8", ValueError, "not a floating-point type"),
                                                   (torch.int64, ValueError, "not a floating-point type"),
                                                   (16, TypeError, "dtype must be a torch.dtype or its name")])
def test_save_checkpoint_refuses_other_dtypes_before_writing(tmp_path, dtype, error, message):
    model, vocab = tiny()
    with pytest.raises(error, match=message):
        save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab, dtype=dtype)
    assert not list(tmp_path.iterdir())


def test_load_checkpoint_takes_a_device_or_its_name(checkpoint):
    for device in ("cpu", torch.device("cpu")):
        assert next(load_checkpoint(checkpoint, device)[0].parameters()).device.type == "cpu"
    with pytest.raises(ValueError, match="device='gpu' is not a device"):
        load_checkpoint(checkpoint, "gpu")
    with pytest.raises(TypeError, match="device must be a torch.device, a string"):
        load_checkpoint(checkpoint, 3.5)
    with pytest.raises(ValueError, match="device='tpu:x' is not a device"):
        train_translation(TINY, checkpoint.parent / "run", data=offline_data(), device="tpu:x", log=quiet)


# ------------------------------------------------------------------------------------------- text and the command line
@pytest.mark.parametrize("sentence, kind", [(None, "NoneType"), (3, "int"), ({"ein": 1}, "dict"), (b"ein", "bytes"),
                                            (2.5, "float")])
def test_translate_refuses_what_is_not_text(sentence, kind):
    model, _ = tiny()
    with pytest.raises(TypeError, match=f"sentence must be a string or a list of strings, got {kind}"):
        translate(model, sentence)


def test_translate_refuses_a_lone_surrogate_naming_where_it_is():
    model, _ = tiny()
    with pytest.raises(ValueError, match=r"sentence 1 holds a lone surrogate '\\udcff' at character 4"):
        translate(model, ["ein hund", "ein \udcff hund"])
    with pytest.raises(ValueError, match="text holds a lone surrogate"):
        Tokenizer("de")("zwei \ud800")


@pytest.mark.parametrize("batch_size", [0, -1, 1.5])
def test_translate_tokens_refuses_a_batch_size_that_is_not_positive(batch_size):
    model, vocab = tiny()
    with pytest.raises((ValueError, TypeError), match="batch_size must be (a positive int|an int)"):
        translate_tokens(model, ["ein hund"], Tokenizer("de"), vocab, vocab, 1, batch_size=batch_size)


def test_a_sentence_longer_than_the_model_positions_is_named_and_others_still_decode_to_the_limit():
    model, vocab = tiny(max_len=20)
    with pytest.raises(ValueError, match="sentence 1 has 21 tokens, more than the model's 20 positions"):
        translate_tokens(model, ["ein hund", "hund " * 21], Tokenizer("de"), vocab, vocab, 1)
    # 19 tokens would allow 1.5 x 19 + 10 = 38 target tokens; the model has 20 positions, so decoding stops there
    (out,) = translate_tokens(model, ["hund " * 19], Tokenizer("de"), vocab, vocab, 1)
    assert len(out) <= 20


def lines_of(data: bytes, **options):
    return list(translate_cli.read_lines(io.BytesIO(data), **{"encoding": "utf-8", "max_bytes": 1000, **options}))


def test_read_lines_names_undecodable_and_overlong_lines_without_holding_them():
    items = lines_of(b"Ein Hund.\nZwei M\xe4nner.\n" + b"x" * 5000 + b"\nEine Katze.\r\n")
    assert [n for n, _, _ in items] == [1, 2, 3, 4]
    assert items[0] == (1, "Ein Hund.", None) and items[3] == (4, "Eine Katze.", None)
    assert items[1][1] is None and "not valid utf-8 (byte 0xe4 at position 6)" in items[1][2]
    assert items[2][1] is None and "longer than --max-bytes=1,000 bytes" in items[2][2]
    assert lines_of(b"Zwei M\xe4nner.", encoding="latin-1") == [(1, "Zwei Männer.", None)]



@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])
def test_read_lines_cuts_multibyte_encodings_at_their_newlines(encoding):
    """UTF-16 and UTF-32 write a newline as 2 or 4 bytes: cutting at the byte 0x0a split lines inside characters
    (errors, or CJK text that was then translated). "\u0a41\u4100" holds the bytes of a UTF-16 newline across two
    characters, which must not cut the line."""
    text = "Ein Hund läuft.\nZwei Männer\r\n\n\u0a41\u4100 Drei\n" + "x" * 600 + "\nEnde"
    got = lines_of(text.encode(encoding), encoding=encoding)
    assert [t for _, t, _ in got] == ["Ein Hund läuft.", "Zwei Männer", "", "\u0a41\u4100 Drei", None, "Ende"]
    assert "longer than --max-bytes" in got[4][2]


def test_read_lines_drops_a_byte_order_mark_before_the_first_word():
    assert lines_of(b"\xef\xbb\xbfEin Hund.\nZwei\n") == [(1, "Ein Hund.", None), (2, "Zwei", None)]
    assert lines_of(b"\xef\xbb\xbfEin Hund.\n", encoding="utf-8-sig") == [(1, "Ein Hund.", None)]
    assert lines_of("\ufeffEin Hund.\n".encode("utf-16-le"), encoding="utf-16-le") == [(1, "Ein Hund.", None)]

def test_every_input_line_gets_one_output_line_and_each_bad_one_an_error_with_its_number():
    model, _ = tiny(max_len=20)
    data = b"ein hund .\n\nzwei M\xe4nner\n" + b"hund " * 30 + b"\nzwei katzen .\n"
    out, err = io.StringIO(), io.StringIO()
    failed = translate_cli.translate_lines(model, lines_of(data), 1, 64, out, err)
    assert failed == 2
    got = out.getvalue().split("\n")
    assert len(got) == 6 and got[-1] == "" and got[1] == got[2] == got[3] == ""  # 5 lines in, 5 lines out
    assert got[0] == translate(model, "ein hund .", beam_size=1) and got[4] == translate(model, "zwei katzen .", beam_size=1)
    errors = err.getvalue().splitlines()
    assert errors[0].startswith("error: line 3: not valid utf-8")
    assert errors[1] == "error: line 4: it has 30 tokens, more than the model's 20 positions (max_len); split it into shorter sentences"


def test_the_command_exits_1_when_some_line_failed_and_0_when_none_did(checkpoint, monkeypatch, capsys):
    for data, status in ((b"ein hund .\nzwei \xff\n", 1), (b"ein hund .\n\nzwei katzen .\n", 0)):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        assert translate_cli.main(["--checkpoint", str(checkpoint), "--beam", "1"]) == status
        out, err = capsys.readouterr()
        assert len(out.splitlines()) == 3 if status == 0 else len(out.splitlines()) == 2
        assert ("line 2: not valid utf-8" in err) == (status == 1)


def test_the_command_translates_each_line_as_it_arrives(checkpoint):
    """Line 2 is written only after line 1's translation was read back: a command that waited for the end of its
    input would never print line 1, and the read would time out."""
    command = [sys.executable, "-m", "transformer_lib.translate", "--checkpoint", str(checkpoint), "--beam", "1"]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            proc.stdin.write(b"ein hund .\n")
            proc.stdin.flush()
            first = proc.stdout.readline()  # blocks until the first translation is printed
            proc.stdin.write(b"zwei katzen .\n")
            proc.stdin.close()
            rest = proc.stdout.read()
            assert proc.wait(timeout=300) == 0, proc.stderr.read()
        finally:
            proc.kill()
    assert first.strip() and len(rest.splitlines()) == 1


def test_a_codec_that_is_not_for_text_stops_the_command_in_one_line_with_status_2(checkpoint):
    """--encoding hex (or rot13) is a codec Python knows, but not one of text: the reading thread died of it, nothing
    was translated and the command said 0."""
    command = [sys.executable, "-m", "transformer_lib.translate", "--checkpoint", str(checkpoint), "--encoding", "hex"]
    done = subprocess.run(command, input=b"ein hund .\n", capture_output=True, timeout=300)
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err and done.stdout == b""
    assert err.splitlines()[-1].endswith("error: --encoding 'hex' is not a text encoding; use a text encoding such as "
                                         "utf-8, latin-1, cp1252 or utf-16")


def test_a_lock_file_that_is_a_link_or_a_folder_is_named_and_nothing_it_points_to_is_written(tmp_path):
    import socket

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    victim = tmp_path / "victim.txt"
    victim.write_text(f"{gone.pid} {socket.gethostname()}\n")  # a stale lock, if the link were followed
    for make in (lambda lock: lock.symlink_to(victim), lambda lock: lock.mkdir()):
        folder = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        make(folder / ".lock")
        with pytest.raises(ValueError, match=r"\.lock is not a lock file this book wrote .*delete it"):
            train_translation(TINY, folder, data=offline_data(), progress=False, log=quiet)
        assert victim.read_text().startswith(f"{gone.pid} ") and sorted(p.name for p in folder.iterdir()) == [".lock"]


# ------------------------------------------------------------------------------------------- training runs
def folder_state(folder: Path) -> dict:
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in folder.iterdir()}


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A run of TINY stopped after its first epoch: the state, one epoch checkpoint, no final model."""
    folder = tmp_path_factory.mktemp("stopped")
    train_translation(replace(TINY, epochs=1), folder, data=offline_data(), progress=False, log=quiet)
    (folder / "model.safetensors").unlink()
    return folder


def other_vocab(vocab: Vocab, same_size: bool) -> Vocab:
    tokens = list(vocab.itos)
    if same_size:
        tokens[10], tokens[11] = tokens[11], tokens[10]  # two words swap ids
    else:
        tokens.append("zebra")
    return Vocab(tokens)


@pytest.mark.parametrize("same_size", [False, True])
def test_resuming_with_other_vocabularies_is_refused_before_any_step_without_touching_the_folder(
        stopped_run, tmp_path, monkeypatch, same_size):
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(stopped_run, folder)
    before = folder_state(folder)
    data = offline_data()
    data = replace(data, tgt_vocab=other_vocab(data.tgt_vocab, same_size))
    monkeypatch.setattr(tr, "train_epoch", lambda *a, **k: pytest.fail("a step was taken"))
    message = "same size, but id 10 is" if same_size else f"{len(data.tgt_vocab) - 1} tokens there, {len(data.tgt_vocab)} in the data"
    with pytest.raises(ValueError, match=f"was trained with another tgt_vocab \\({message}"):
        train_translation(TINY, folder, data=data, progress=False, log=quiet)
    assert folder_state(folder) == before


def test_a_state_without_vocabularies_is_checked_by_its_weights(stopped_run, tmp_path):
    """States written before they carried the vocabularies: a vocabulary of another size is still refused."""
    import shutil

    from safetensors.torch import load, save_file
    from safetensors import safe_open

    folder = tmp_path / "run"
    shutil.copytree(stopped_run, folder)
    state = folder / "state.safetensors"
    tensors = load(state.read_bytes())
    with safe_open(str(state), "pt") as handle:
        metadata = {k: v for k, v in handle.metadata().items() if k not in ("sha256", "src_vocab", "tgt_vocab")}
    write_safetensors(state, lambda tmp, meta: save_file(tensors, str(tmp), meta), metadata)
    data = offline_data()
    data = replace(data, tgt_vocab=other_vocab(data.tgt_vocab, same_size=False))
    with pytest.raises(ValueError, match="holds a model of another shape"):
        train_translation(TINY, folder, data=data, progress=False, log=quiet)


def test_a_folder_with_the_state_but_no_epoch_checkpoints_resumes(stopped_run, tmp_path):
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(stopped_run, folder)
    for path in folder.glob("epoch_*.safetensors"):
        path.unlink()
    lines = []
    run = train_translation(replace(TINY, epochs=1), folder, data=offline_data(), progress=False, log=lines.append)
    assert any("epoch_001.safetensors is missing; writing it again from the training state" in line for line in lines)
    assert run.path.is_file() and (folder / "epoch_001.safetensors").is_file() and len(run.history) == 1


def fake_multi30k(folder: Path, monkeypatch, corrupt: str | None = None) -> None:
    """Multi30k-shaped files of the offline corpus, with sha256 sums to match, one of them damaged if asked."""
    files = {}
    for split, seed in (("train", 0), ("val", 1), ("test2016", 2)):
        pairs = D.offline_corpus(60, seed)
        names = []
        for lang, column in (("de", 0), ("en", 1)):
            name = f"{split}.{lang}.gz"
            path = folder / name
            path.write_bytes(gzip.compress("".join(p[column] + "\n" for p in pairs).encode(), mtime=0))
            names.append((name, hashlib.sha256(path.read_bytes()).hexdigest()))
            if name == corrupt:
                path.write_bytes(path.read_bytes()[:20])
        files[split] = names
    monkeypatch.setattr(M, "MULTI30K_FILES", files)
    monkeypatch.delenv("MULTI30K_DIR", raising=False)


def test_a_corrupt_test_file_never_makes_the_run_score_the_offline_corpus_as_test2016(tmp_path, monkeypatch):
    fake_multi30k(tmp_path, monkeypatch)
    assert tr.prepare_data(TINY, root=tmp_path, download=False).source == "Multi30k train"
    fake_multi30k(tmp_path, monkeypatch, corrupt="test2016.en.gz")
    with pytest.raises(ValueError, match="Multi30k train, val found, but not test2016: .*test2016.en.gz is corrupt"):
        tr.prepare_data(TINY, root=tmp_path, download=False)
    for path in tmp_path.iterdir():  # none of the files anywhere: the offline corpus, and it says so
        path.unlink()
    empty = tr.prepare_data(TINY, root=tmp_path, download=False)
    assert empty.source.startswith("OFFLINE CORPUS, NOT Multi30k")


@pytest.mark.parametrize("env, message", [
    ({"WORLD_SIZE": "2"}, r"\$WORLD_SIZE=2 asks for 2 processes, but \$MASTER_ADDR and \$MASTER_PORT are not set"),
    ({"WORLD_SIZE": "2", "MASTER_PORT": "29500"}, r"\$MASTER_ADDR is not set; start them with torchrun"),
    ({"WORLD_SIZE": "two"}, r"\$WORLD_SIZE='two' is not a non-negative integer"),
    ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "x", "MASTER_PORT": "1"}, "RANK must lie in"),
])
def test_a_half_set_distributed_environment_is_named(monkeypatch, env, message):
    for name in ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(tr, "prepare_data", lambda *a, **k: pytest.fail("data was loaded"))
    with pytest.raises(SystemExit, match=message):
        train_cli.main(["multi30k", "--budget", "smoke", "--out", "unused"])


# ------------------------------------------------------------------------------------------- numerics
def test_label_smoothing_keeps_float64():
    torch.manual_seed(0)
    criterion = LabelSmoothing(7, 1, 0.1)
    log_probs = torch.randn(5, 7, dtype=torch.float64).log_softmax(-1)
    target = torch.tensor([0, 2, 1, 5, 6])
    q = criterion.target_distribution(target, torch.float64)
    assert q.dtype == torch.float64 and torch.allclose(q[q > 0].sum(), torch.tensor(4.0, dtype=torch.float64), atol=1e-15)
    expected = sum(float(q[i, j]) * (math.log(float(q[i, j])) - float(log_probs[i, j]))
                   for i in range(5) for j in range(7) if q[i, j] > 0)
    loss = criterion(log_probs, target)
    assert loss.dtype == torch.float64 and abs(loss.item() - expected) < 1e-12


def test_from_torch_keeps_the_dtype_of_float64_modules():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    mha = nn.MultiheadAttention(16, 4, batch_first=True).double().eval()
    ours = mha_from_torch(mha).eval()
    assert ours.w_q.weight.dtype == torch.float64
    assert torch.allclose(ours(x, x, x), mha(x, x, x, need_weights=False)[0], atol=1e-12)
    for make, convert, args in ((nn.TransformerEncoderLayer, encoder_layer_from_torch, (x,)),
                                (nn.TransformerDecoderLayer, decoder_layer_from_torch, (x, x))):
        layer = make(16, 4, 32, dropout=0.0, batch_first=True).double().eval()
        ours = convert(layer).eval()
        assert {p.dtype for p in ours.parameters()} == {torch.float64}
        assert torch.allclose(ours(*args), layer(*args), atol=1e-12)


def corpus_bleu(hypotheses: list[list[str]], references: list[list[str]]) -> float:
    """Corpus BLEU-4 with one reference, no smoothing, as torchtext's bleu_score computes it, written out here."""
    matches, totals, hyp_len, ref_len = [0] * 4, [0] * 4, 0, 0
    for hyp, ref in zip(hypotheses, references):
        hyp_len, ref_len = hyp_len + len(hyp), ref_len + len(ref)
        for n in range(1, 5):
            h = Counter(tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1))
            r = Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
            matches[n - 1] += sum(min(c, r[g]) for g, c in h.items())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    if min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / 4
    brevity = min(0.0, 1 - ref_len / hyp_len)
    return 100 * math.exp(log_precision + brevity)


def test_tokenized_bleu_keeps_unk_as_a_token_that_matches_nothing():
    import random

    rng = random.Random(0)
    words = ["a", "dog", "runs", "in", "the", "snow", "two", "men", "play", "."]
    references = [" ".join(rng.choices(words, k=rng.randint(6, 12))) for _ in range(40)]
    hypotheses = []
    for ref in references:
        tokens = ref.split()
        for i in rng.sample(range(len(tokens)), 2):
            tokens[i] = "<unk>" if rng.random() < 0.5 else rng.choice(words)
        hypotheses.append(tokens)
    ours = bleu(hypotheses, references).tokenized
    assert abs(ours - corpus_bleu(hypotheses, [r.split() for r in references])) < 1e-9
    dropped = corpus_bleu([[t for t in h if t != "<unk>"] for h in hypotheses], [r.split() for r in references])
    assert abs(ours - dropped) > 0.5  # dropping <unk> would credit n-grams the model never produced


def test_tokenized_bleu_of_subword_hypotheses_scores_their_decoded_text_in_spacy_tokens():
    import random
    from collections import Counter

    from transformer_lib.data import BPE, SubwordTokenizer, Tokenizer, pre_tokens

    rng = random.Random(1)
    words = ["a", "dog", "runs", "in", "the", "snow", "two", "men", "play", "soccer", "."]
    references = [" ".join(rng.choices(words, k=rng.randint(6, 12))) for _ in range(40)]
    texts = [" ".join(rng.choice(words) if rng.random() < 0.2 else w for w in ref.split()) for ref in references]
    words_tok = Tokenizer("en")
    bpe = BPE.learn(Counter(w for s in references for w in pre_tokens(words_tok, s)), 25)
    subwords = SubwordTokenizer("en", bpe)
    hypotheses = [subwords(t) for t in texts]
    assert any(len(h) != len(words_tok(t)) for h, t in zip(hypotheses, texts))  # the subwords are not the words
    ours = bleu(hypotheses, references, tgt_tok=subwords).tokenized
    assert abs(ours - corpus_bleu([words_tok(t) for t in texts], [words_tok(r) for r in references])) < 1e-9



def test_deeply_nested_json_in_a_vocabulary_a_bpe_file_or_a_training_state_is_named(tmp_path, checkpoint):
    from transformer_lib.data import BPE
    from transformer_lib.files import read_training_state, save_training_state

    deep = "[" * 100_000 + "]" * 100_000
    for cls in (Vocab, BPE):
        (tmp_path / "deep.json").write_text(deep)
        with pytest.raises(ValueError, match=f"deep.json is not a {cls.__name__} written by {cls.__name__}.save"):
            cls.load(tmp_path / "deep.json")
        with pytest.raises(ValueError, match=f"text is not a {cls.__name__} written by"):
            cls.from_json(deep)
    model, _ = tiny()
    optimizer = torch.optim.Adam(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    state = save_training_state(tmp_path / "state.safetensors", model, optimizer, scheduler, history=[])
    rewrite(state, history=deep)
    with pytest.raises(ValueError, match="its history is not valid JSON .RecursionError"):
        read_training_state(state)


@pytest.mark.parametrize("device", ["cuda", "cuda:99", "mps"])
def test_a_device_this_machine_lacks_is_named_before_anything_is_loaded(checkpoint, device):
    kind = device.split(":")[0]
    present = torch.cuda.device_count() > int(device.split(":")[1]) if ":" in device else (
        torch.cuda.is_available() if kind == "cuda" else torch.backends.mps.is_available())
    if present:  # a machine that has it loads there
        model, *_ = load_checkpoint(checkpoint, device=device)
        assert next(model.parameters()).device.type == kind
        return
    with pytest.raises(ValueError, match=f"device='{device}': this machine has"):
        load_checkpoint(checkpoint, device=device)



def test_a_subword_model_whose_tokenizers_entry_says_whole_words_is_refused(tmp_path):
    """A forged or mixed-up tokenizers entry (words) beside a subword vocabulary would load and map every word to
    <unk>: translations of nothing, silently."""
    from transformer_lib.checkpoint import pretrained_path

    import shutil

    copy = shutil.copy(pretrained_path(), tmp_path / "model.safetensors")
    rewrite(Path(copy), tokenizers=json.dumps([{"kind": "words", "lang": "de", "lower": True},
                                               {"kind": "words", "lang": "en", "lower": True}]))
    with pytest.raises(ValueError, match="tokenizer cuts whole words, but its vocabulary holds subword symbols"):
        load_checkpoint(copy)


@pytest.mark.parametrize("prose", ["[" * 40_000, "[a](" * 30_000, "[a](x)(" * 20_000, "`a" * 20_000, "[a]" * 20_000])
def test_a_chapter_cell_of_hostile_brackets_is_read_in_one_pass_and_cites_nothing(prose):
    """Every `[` once scanned to the end of the cell made a cell of 40,000 brackets take minutes in `book check`."""
    from transformer_lib.book.references import cited, load_references

    assert cited(prose, load_references(Path(__file__).resolve().parents[1])) == []


@pytest.mark.parametrize("runs, names", [
    ({"notebooks/01_alpha.ipynb": 5}, r"not \{chapter file: \{budget: record\}\}"),
    ({"notebooks/01_alpha.ipynb": {"full": {"machine": "m"}}}, "notebooks/01_alpha.ipynb full: expected"),
    ({"notebooks/01_alpha.ipynb": {"full": {"seconds": "31", "machine": "m"}}}, "full: expected"),
    ({"notebooks/01_alpha.ipynb": {"full": 31}}, "full: expected"),
])
def test_a_forged_runs_json_ends_book_run_with_one_line_naming_it(tmp_path, monkeypatch, runs, names):
    from test_book import make_book

    from transformer_lib.book import BookError, runner

    book = make_book(tmp_path, {"01_alpha": ["#| default_exp alpha"]})
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "runs.json").write_text(json.dumps(runs))
    class NoKernel:
        def __init__(self, *args, **kwargs):
            pytest.fail("no kernel may start")

    monkeypatch.setattr(runner, "_client_class", lambda: NoKernel)
    with pytest.raises(BookError, match=f"^docs/runs.json: .*{names}") as err:
        runner.run(book, list(book.chapters), budget="full", out=io.StringIO())
    assert "\n" not in str(err.value)


def test_a_deeply_nested_offline_outputs_file_is_one_line(tmp_path):
    from transformer_lib.book import BookError, corpus

    (tmp_path / "notebooks").mkdir()
    (tmp_path / corpus.OFFLINE_FILE).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BookError, match=r"offline_outputs.json: cannot be read as JSON: RecursionError; run `python -m"):
        corpus.offline_outputs(tmp_path)


def test_an_end_marker_quoted_in_code_does_not_close_a_readme_block():
    from transformer_lib import book as bk
    from transformer_lib import claims

    text = "<!-- begin load (python -m transformer_lib.book readme) -->\nold\nsee `<!-- end load -->`\n"
    (problem,) = claims.readme_problems(bk.load_book(Path(__file__).resolve().parents[1]), text, "README.md")
    assert problem.startswith("README.md line 1: block 'load' has no end marker")


@pytest.mark.parametrize("text", ["default_budget: !!python/object/apply:os.system ['true']\n", "default_budget: *x\n"])
def test_a_book_yml_that_would_run_code_or_names_an_unknown_anchor_is_one_line(tmp_path, monkeypatch, text):
    from transformer_lib.runtime import run_budget

    monkeypatch.delenv("BOOK_BUDGET", raising=False)
    (tmp_path / "book.yml").write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"book.yml cannot be read for its default_budget at line 1 \(\w+Error\)"):
        run_budget()


def test_a_share_cores_switch_that_is_neither_on_nor_off_ends_a_command_with_one_line(monkeypatch):
    monkeypatch.setenv("BOOK_SHARE_CORES", "sometimes")
    with pytest.raises(SystemExit, match=r"^error: \$BOOK_SHARE_CORES='sometimes': use 1"):
        train_cli.main(["copy", "--steps", "1"])
