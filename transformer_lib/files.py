# Hand-written tool module (not generated from a notebook).
"""File plumbing for chapters 6 to 8, kept out of the chapters' way: atomic writes, sha256 sums, and safetensors
files that carry a sha256 of their own contents.

Every file the book writes goes to a temporary name first and is renamed into place, so a crash or Ctrl-C never
leaves half a file, and a failed write leaves the previous file as it was. Checkpoints and the training state are
safetensors files (loading them runs no pickle) whose metadata holds a digest of their contents, so that a file
damaged after it was written is refused, with a message naming it, instead of being half-used.
"""
from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import json
import os
import socket
import tempfile
import threading
from pathlib import Path

import torch

try:
    import fcntl  # flock: a lock the system lets go of when its process dies
except ImportError:  # Windows
    fcntl = None

__all__ = [
    "JsonFile", "write_atomically", "sha256_of", "safetensors_digest", "write_safetensors", "read_safetensors",
    "read_safetensors_metadata", "load_tensors",
    "save_training_state", "read_training_state", "restore_training_state",
]


# ------------------------------------------------------------------------------------------- any file
def write_atomically(path, write) -> Path:
    """Call write(temporary_path), then rename the result to path: readers see the old file or the new one, whole.

    The temporary file has a name of its own (several writers may aim at one path; the last rename wins) that
    carries the writer's process id, so one left behind by a killed writer is removed by the next write to the same
    path. The data is flushed to disk before the rename and the folder after it, and the file gets the permissions
    the user's umask gives a new file. If write fails, the temporary file is removed and whatever was at path is
    left as it was.
    """
    path = Path(path)
    _remove_orphans(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:  # Ctrl-C included
        tmp.unlink(missing_ok=True)
        raise
    _fsync(path.parent)
    return path


def write_folder_atomically(path, write, check=None) -> Path:
    """Call write(temporary_folder), then put that folder where path is: an earlier folder at path is replaced
    whole, so that no file of it survives beside the new ones (a stale vocabulary, say).

    The new folder is written beside path and renamed into place; the old one is renamed away first and removed
    after, so that path holds the old folder or the new one, except for the moment between the two renames. If write
    fails, the temporary folder is removed and path is left as it was; one a killed writer left (its name carries the
    writer's process id) is removed by the next write to the same path. check(path), if given, runs before writing
    and again just before an earlier folder is replaced: what it raises stops the write, nothing changed.
    """
    import shutil

    path = Path(path)
    if check is not None:  # e.g. serve's export: a folder holding a file it did not write is refused
        check(path)
    _remove_orphans(path, folders=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp"))
    try:
        write(tmp)
        os.chmod(tmp, 0o777 & ~_umask())
        if check is not None:  # again: a file put there while the new folder was written
            check(path)
        old = tmp.with_suffix(".old") if path.exists() else None
        if old is not None:
            os.rename(path, old)
        os.rename(tmp, path)
    except BaseException:  # Ctrl-C included
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    _fsync(path.parent)
    return path


_HELD: set[str] = set()  # the run folders this process holds (locked_folder), by real path
_HELD_GUARD = threading.Lock()


@contextlib.contextmanager
def locked_folder(path, lock: bool = True):
    """The folder `path` (made if missing), held by this process while the block runs: a second writer (another
    training on the same run folder, in this process or another) is refused with a ValueError naming the folder.
    lock=False: the folder alone (the other processes of a distributed run, which process 0 speaks for).

    The lock is a file, path/.lock, naming the writer's process id and host, flocked by the writer: the system lets
    go of it when the writer dies. One nobody holds whose process no longer runs is stale, taken over under its
    flock, so that of several processes taking it over exactly one gets in."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if not lock:
        yield path
        return
    key, lock_file = os.path.realpath(path), path / ".lock"
    with _HELD_GUARD:
        if key in _HELD:  # e.g. a training started from inside another one's callback
            raise ValueError(f"{path} is already being written by a training in this process; wait for it to end "
                             "or train into another folder")
        _HELD.add(key)
    try:
        fd = _take_lock(path, lock_file)
        try:
            yield path
        finally:
            if _same_file(fd, lock_file):  # ours still: no one else can replace it while we hold its flock
                lock_file.unlink(missing_ok=True)
            os.close(fd)  # lets go of the flock
    finally:
        with _HELD_GUARD:
            _HELD.discard(key)


def _take_lock(folder: Path, lock_file: Path) -> int:
    """An open descriptor of lock_file, flocked by this process and naming it; ValueError if another holds it."""
    me = f"{os.getpid()} {socket.gethostname()}\n".encode()
    _remove_orphans(lock_file)  # the temporary files of a writer killed while it made the lock
    for _ in range(100):  # a lock file removed or replaced between our looking and our locking: look again
        try:
            fd = os.open(lock_file, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))  # a link could aim at any file
        except FileNotFoundError:
            fd = _new_lock(lock_file, me)
            if fd is None:  # another process made it first
                continue
            return fd
        except OSError as err:  # a symbolic link (ELOOP), a folder, a file we may not write
            raise ValueError(f"{lock_file} is not a lock file this book wrote ({err.strerror}); if no training runs "
                             f"in {folder}, delete it") from None
        held = not _flock(fd)
        if not held and not _same_file(fd, lock_file):  # its holder removed it meanwhile; a new one may be there
            os.close(fd)
            continue
        holder = os.pread(fd, 4096, 0).decode(errors="replace").strip().split(maxsplit=1)  # [pid, host]
        pid, host = (int(holder[0]) if holder and holder[0].isdigit() else 0), (holder[1] if len(holder) > 1 else "")
        if held or not (pid and host == socket.gethostname() and (pid == os.getpid() or not _alive(pid))):
            os.close(fd)  # held, or written without a flock by a process that runs, another host's, or no pid
            who = f"process {pid} on {host}" if pid and host else f"{lock_file} holds no process id"
            raise ValueError(f"{folder} is being written by another training ({who}); wait for it to end or train "
                             f"into another folder. If no training runs there, delete {lock_file}")
        os.ftruncate(fd, 0)  # stale: taken over, under its flock, so no other process can take it too
        os.pwrite(fd, me, 0)
        return fd
    raise ValueError(f"{lock_file} keeps being replaced by other processes; try again, or train into another folder")


def _new_lock(lock_file: Path, me: bytes) -> int | None:
    """A new lock_file naming this process, flocked before it appears (linked into place); None if one is there."""
    fd, name = tempfile.mkstemp(dir=lock_file.parent, prefix=f".{lock_file.name}.{os.getpid()}.", suffix=".tmp")
    try:
        os.write(fd, me)
        os.fchmod(fd, 0o644 & ~_umask())
        _flock(fd)  # no one else knows the file yet: this succeeds
        os.link(name, lock_file)  # appears whole and held, or not at all
        return fd
    except BaseException as err:
        os.close(fd)
        if isinstance(err, FileExistsError):
            return None
        raise
    finally:
        os.unlink(name)


def _flock(fd: int) -> bool:
    """An exclusive flock on fd, without waiting; False if another open file holds one. True where the system has no
    flock (the process id in the file alone decides)."""
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # a file system without locks
        pass
    return True


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open descriptor fd is the file at path now."""
    with contextlib.suppress(FileNotFoundError):
        return os.path.samestat(os.fstat(fd), os.stat(path))
    return False


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync(path: Path) -> None:
    """Flush a file's data, or a folder's entries, to disk (a no-op where the system cannot sync a folder)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_orphans(path: Path, folders: bool = False) -> None:
    """Remove the temporary files of `path` (folders: its temporary folders, .tmp or, renamed away, .old), named
    .NAME.PID.XXXXXXXX.tmp, whose writer process no longer runs (killed mid-write). Nothing else is touched."""
    import re
    import shutil

    suffix = "(?:tmp|old)" if folders else "tmp"
    pattern = re.compile(re.escape(f".{path.name}.") + r"(\d+)\.[A-Za-z0-9_]{8}\." + suffix)
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*"):
        found = pattern.fullmatch(tmp.name)
        if found and tmp.is_dir() == folders and not tmp.is_symlink() and not _alive(int(found[1])):
            shutil.rmtree(tmp, ignore_errors=True) if folders else tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # someone else's process, or a system that cannot tell: leave its file alone
    return True


def sha256_of(path) -> str:
    """The sha256 of a file's bytes, as hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------- safetensors with a digest
def safetensors_digest(source) -> str:
    """sha256 of a safetensors file (a path, or its bytes): its tensor index, its metadata (but the digest itself)
    and its tensor bytes."""
    raw = source if isinstance(source, bytes) else Path(source).read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    metadata = header.pop("__metadata__", None) or {}
    metadata.pop("sha256", None)
    digest = hashlib.sha256(json.dumps([header, metadata], sort_keys=True).encode())
    digest.update(raw[8 + size :])
    return digest.hexdigest()


def write_safetensors(path, save, metadata: dict) -> Path:
    """Atomically write a safetensors file with save(filename, metadata), adding a sha256 of its contents."""
    from safetensors import SafetensorError

    def write(tmp: Path) -> None:
        try:
            save(tmp, metadata)  # the tensor bytes do not depend on the metadata: write, hash, write with the hash
            save(tmp, {**metadata, "sha256": safetensors_digest(tmp)})
        except SafetensorError as err:  # e.g. "No space left on device (os error 28)": an OSError, naming the file
            raise OSError(f"could not write {path}: {err}; what was there before is left as it was") from None

    return write_atomically(path, write)


def _first_clause(err: Exception) -> str:
    """The error's type and the first clause of its message (safetensors' messages go on to quote the file)."""
    return f"{type(err).__name__}: {str(err).split(':')[0]}"


def _verify(path: Path, raw: bytes, metadata: dict) -> None:
    """Raise ValueError if the file carries no sha256, or its bytes no longer match the one written into it."""
    if not isinstance(metadata.get("sha256"), str):
        raise ValueError(f"{path} carries no sha256 of its contents, so it cannot be checked: it was not written "
                         "by transformer_lib, or was edited after; write it again with the tool that made it")
    if safetensors_digest(raw) != metadata["sha256"]:
        raise ValueError(f"{path} is corrupt: its contents do not match the sha256 stored in it; "
                         "restore it or write it again")


def read_safetensors(path, what: str = "checkpoint", advice: str = "it may be truncated or corrupt") -> tuple[dict, dict]:
    """(tensors, metadata) of a safetensors file, read in one go and checked against the sha256 written into it.

    Reading the bytes once means a writer replacing the file meanwhile cannot mix two files into one read.
    A file safetensors cannot read raises ValueError("<path> is not a readable <what> (...); <advice>").
    """
    from safetensors.torch import load

    path = Path(path)
    try:
        raw = path.read_bytes()
        tensors = load(raw)
        size = int.from_bytes(raw[:8], "little")
        metadata = json.loads(raw[8 : 8 + size]).get("__metadata__") or {}
    except Exception as err:
        raise ValueError(f"{path} is not a readable {what} ({_first_clause(err)}); {advice}") from None
    _verify(path, raw, metadata)
    return tensors, metadata


def read_safetensors_metadata(path, what: str = "checkpoint", advice: str = "it may be truncated or corrupt") -> dict:
    """The metadata of a safetensors file, once its contents are checked against the sha256 written into it."""
    return read_safetensors(path, what, advice)[1]


def load_tensors(model: torch.nn.Module, tensors: dict, path=None) -> None:
    """Load `tensors` into `model` strictly: each tensor is one of its entries, and each entry is given, a tied
    parameter under any one of its names. Raises ValueError saying what does not fit, naming `path`, the file the
    tensors came from, where it is given."""
    try:
        _load_strict(model, tensors)
    except ValueError as err:
        if path is None:
            raise
        raise ValueError(f"{path}: weights do not fit the model its config describes ({err})") from None


def _load_strict(model: torch.nn.Module, tensors: dict) -> None:
    state = model.state_dict()
    unexpected = sorted(set(tensors) - set(state))
    given = {state[name].data_ptr() for name in tensors if name in state}
    missing = sorted(name for name in state if name not in tensors and state[name].data_ptr() not in given)
    if unexpected or missing:
        raise ValueError(f"missing {missing[:3]}{' ...' if len(missing) > 3 else ''}, "
                         f"unexpected {unexpected[:3]}{' ...' if len(unexpected) > 3 else ''}")
    try:
        model.load_state_dict(tensors, strict=False)
    except RuntimeError as err:  # "Error(s) in loading state_dict for ...:" and one line per mismatch
        lines = [line.strip() for line in str(err).strip().splitlines()[1:] if line.strip()] or [str(err)]
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        raise ValueError(lines[0] + more) from None


# ------------------------------------------------------------------------------------------- the training state
def save_training_state(path, model, optimizer, scheduler, **info) -> Path:
    """Everything needed to resume training, as one safetensors file (no pickle), written atomically.

    The tensors: the model's weights (model.*), the optimizer's state (optim.<param>.<key>, e.g. Adam's moments)
    and the random generators' states (rng.cpu, rng.cuda). The metadata: the optimizer's param_groups, the
    scheduler's state and each of `info` (JSON values), all as JSON.
    """
    from safetensors.torch import save_file

    tensors = {f"model.{k}": v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}
    opt = optimizer.state_dict()
    for index, state in opt["state"].items():
        for key, value in state.items():
            tensors[f"optim.{index}.{key}"] = torch.as_tensor(value).detach().cpu().clone().contiguous()
    tensors["rng.cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors["rng.cuda"] = torch.cuda.get_rng_state()
    metadata = {name: json.dumps(value) for name, value in info.items()}
    metadata.update(param_groups=json.dumps(opt["param_groups"]), scheduler=json.dumps(scheduler.state_dict()))
    return write_safetensors(path, lambda tmp, meta: save_file(tensors, str(tmp), meta), metadata)


def read_training_state(path, advice: str = "delete it to start over") -> tuple[dict, dict]:
    """(tensors, info) of a file save_training_state wrote, checked against its sha256; info's values decoded."""
    tensors, metadata = read_safetensors(path, "training state", advice)
    info = {}
    for name, value in metadata.items():
        if name != "sha256":
            try:
                info[name] = json.loads(value)
            except (ValueError, RecursionError) as err:  # RecursionError: nested deeper than the parser goes
                raise ValueError(f"{path}: its {name} is not valid JSON ({type(err).__name__}); {advice}") from None
    return tensors, info


def restore_training_state(tensors: dict, info: dict, model, optimizer, scheduler) -> None:
    """Put what read_training_state returned back into the model, the optimizer, the scheduler and the generators."""
    model.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    state: dict = {}
    for name, value in tensors.items():
        if name.startswith("optim."):
            _, index, key = name.split(".", 2)
            state.setdefault(int(index), {})[key] = value
    optimizer.load_state_dict({"state": state, "param_groups": info["param_groups"]})
    scheduler.load_state_dict(info["scheduler"])
    torch.set_rng_state(tensors["rng.cpu"])
    if "rng.cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["rng.cuda"])


class JsonFile:
    """save(path) and load(path), to_json() and from_json(text) for a class whose constructor takes the entries of its
    to_dict() (Vocab, BPE, and chapter 8's Recipe, a dataclass whose to_dict is its fields): the file written
    atomically, and a file that is not one of its kind refused with a ValueError naming it."""

    def to_dict(self) -> dict:
        """A dataclass's fields; Vocab and BPE write their own."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, values):
        """cls(**values): a ValueError naming the entries the constructor does not take, a KeyError naming the first
        missing entry it needs."""
        import inspect

        if not isinstance(values, dict):
            raise TypeError(f"expected a JSON object, got {type(values).__name__}")
        params = {n: p for n, p in inspect.signature(cls).parameters.items()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        missing = [n for n, p in params.items() if p.default is p.empty and n not in values]
        if missing:
            raise KeyError(missing[0])
        unknown = sorted(set(values) - set(params))
        if unknown:
            raise ValueError(f"unknown {cls.__name__} fields: {unknown}")
        return cls(**values)

    @classmethod
    def from_json(cls, text: str):
        try:
            return cls.from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError, RecursionError) as err:
            raise ValueError(f"text is not a {cls.__name__} written by {cls.__name__}.to_json "
                             f"({type(err).__name__}: {err})") from None

    def save(self, path) -> None:
        write_atomically(path, lambda tmp: tmp.write_text(self.to_json(), encoding="utf-8"))

    @classmethod
    def load(cls, path):
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as err:
            raise ValueError(f"{path} is not a {cls.__name__} written by {cls.__name__}.save; it may be truncated or "
                             f"corrupt ({type(err).__name__}: {err})") from None
