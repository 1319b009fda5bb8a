"""transformer_lib.files under concurrency and crashes: many writers and readers on one checkpoint path, temporary
files of killed writers, permissions from the umask, and data flushed to disk before the rename."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_lib import files

ROOT = Path(__file__).resolve().parents[1]

# One writer or reader process. A writer saves `n` checkpoints whose generator bias holds its own number; a reader
# loads as often as it can until the writers are done and checks that every file it read is one writer's whole file.
WORKER = r"""
import json, sys, time
from pathlib import Path
import torch
from transformer_lib.data import Vocab
from transformer_lib.model import make_model
from transformer_lib.translation import load_checkpoint, save_checkpoint

role, number, path, n = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
vocab = Vocab([*Vocab.SPECIALS, *(f"w{i}" for i in range(7))])
done, errors = 0, []
if role == "writer":
    torch.manual_seed(number)
    model = make_model(11, 11, 1, 16, 32, 2, 0.0, pad_idx=1)
    with torch.no_grad():
        model.generator.proj.bias.fill_(number)
    for _ in range(n):
        try:
            save_checkpoint(path, model, vocab, vocab, writer=number)
            done += 1
        except Exception as err:
            errors.append(f"{type(err).__name__}: {err}")
else:
    stop = path.with_name("writers-done")
    while not stop.exists() or done < n:
        if not path.exists():
            time.sleep(0.01)
            continue
        try:
            model, _, _, info = load_checkpoint(path)
            bias = model.generator.proj.bias
            if not torch.all(bias == info["writer"]):
                errors.append(f"mixed file: bias {bias[:2].tolist()} from writer {info['writer']}")
            done += 1
        except Exception as err:
            errors.append(f"{type(err).__name__}: {err}")
        if stop.exists() and done >= n:
            break
print(json.dumps({"role": role, "done": done, "errors": errors}))
"""


def test_many_writers_and_readers_on_one_checkpoint_path_see_no_error(tmp_path):
    path = tmp_path / "shared.safetensors"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    n_writers, n_readers, saves, loads = 4, 2, 15, 20

    def start(role, number, n):
        return subprocess.Popen([sys.executable, "-c", WORKER, role, str(number), str(path), str(n)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    readers = [start("reader", r, loads) for r in range(n_readers)]
    writers = [start("writer", w, saves) for w in range(n_writers)]
    reports = []
    for process in writers:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    (tmp_path / "writers-done").touch()
    for process in readers:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    errors = [e for r in reports for e in r["errors"]]
    assert errors == [], errors[:5]
    assert sum(r["done"] for r in reports if r["role"] == "writer") == n_writers * saves
    assert all(r["done"] >= loads for r in reports if r["role"] == "reader")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.safetensors", "writers-done"]  # no temporaries


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    path = tmp_path / "m.json"
    orphan = tmp_path / f".m.json.{dead_pid}.k1l2e3d4.tmp"  # what a writer killed mid-write leaves
    in_flight = tmp_path / f".m.json.{os.getpid()}.a1b2c3d4.tmp"  # a live process's: not to be touched
    orphan.write_text("half a file")
    in_flight.write_text("being written")
    files.write_atomically(path, lambda tmp: tmp.write_text("{}"))
    assert path.read_text() == "{}" and not orphan.exists() and in_flight.exists()


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_get_the_permissions_of_the_umask(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        path = files.write_atomically(tmp_path / "f.txt", lambda tmp: tmp.write_text("x"))
    finally:
        os.umask(previous)
    assert path.stat().st_mode & 0o777 == mode


def test_data_is_flushed_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
                        or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append(("replace", str(b))) or real_replace(a, b))
    path = files.write_atomically(tmp_path / "f.txt", lambda tmp: tmp.write_text("x"))
    kinds = [kind for kind, _ in events]
    assert kinds == ["fsync", "replace", "fsync"]
    assert Path(events[0][1]).parent == tmp_path and Path(events[0][1]).name.startswith(".f.txt.")  # the data
    assert events[2][1] == str(tmp_path)  # the folder's entry for the new name
    assert path.read_text() == "x"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("old")

    def fail(tmp):
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        files.write_atomically(path, fail)
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_a_disk_that_fills_mid_write_is_an_oserror_naming_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    import safetensors.torch
    from safetensors import SafetensorError

    from transformer_lib.files import read_safetensors, write_safetensors

    path = tmp_path / "model.safetensors"
    tensors = {"w": torch.ones(3)}
    write_safetensors(path, lambda tmp, meta: safetensors.torch.save_file(tensors, str(tmp), meta), {"a": "1"})
    before = path.read_bytes()

    def full_disk(tmp, meta):
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "
                              "\"No space left on device\" })")

    with pytest.raises(OSError, match=f"could not write {path}: .*No space left on device"):
        write_safetensors(path, full_disk, {"a": "2"})
    assert path.read_bytes() == before and read_safetensors(path)[1]["a"] == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]  # no temporary file left
