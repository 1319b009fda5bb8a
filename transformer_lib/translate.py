# Hand-written tool module (not generated from a notebook).
"""Translate German to English from the command line.

    python -m transformer_lib.translate "Ein Hund rennt durch den Schnee."
    echo "Zwei Männer spielen Fußball." | python -m transformer_lib.translate --checkpoint runs/multi30k-cpu/model.safetensors

The model knows Multi30k's domain, captions of photographs: people, animals, places and actions, in short
sentences. Other German, such as everyday talk, comes out as nonsense; with the shipped model such a line gets a
note on standard error ("note: line 3 is unlike the captions the model learned from ..."), where its translation
scores below translation.UNFAMILIAR_BELOW a token (chapter 8, section 6).

Sentences come from the arguments, else one per line from standard input. The model is the checkpoint given
with --checkpoint (e.g. runs/multi30k-cpu/model.safetensors, written by `python -m transformer_lib.train
multi30k`), else the one shipped with the package (transformer_lib.translation.pretrained()).

Standard input is read as it comes: each line's translation is printed as soon as the lines before it are done
(lines that arrive together are translated as one batch), so the command works in a pipe that never ends. Every
input line gets exactly one output line: a blank line stays blank, and a line that cannot be translated (bytes
that are not valid in --encoding, more tokens than the model has positions, longer than --max-bytes) prints an
empty line, with a one-line error naming its line number on standard error. The exit status is 0 when every line
was translated, 1 when some were not.
"""
from __future__ import annotations

import argparse
import codecs
import queue
import sys
import threading
from pathlib import Path
from typing import NamedTuple

_DOMAIN = ("The model (the shipped one, or one trained on Multi30k) knows captions of photographs: people, animals, "
           "places and actions, in short sentences. Other German, such as everyday talk, comes out as nonsense.")


def find_checkpoint(path: str | None) -> Path:
    """The checkpoint to use: `path`, else the shipped model; SystemExit saying what to do otherwise."""
    from transformer_lib.translation import pretrained_path

    if path is not None:
        if not Path(path).is_file():
            raise SystemExit(f"error: --checkpoint {path}: no such file")
        return Path(path)
    if not pretrained_path().is_file():
        raise SystemExit(f"error: the shipped model {pretrained_path()} is missing; reinstall transformer_lib, "
                         "or train one with `python -m transformer_lib.train multi30k --budget cpu` and pass "
                         "--checkpoint runs/multi30k-cpu/model.safetensors")
    return pretrained_path()


def load_model(path: Path, device):
    """load_checkpoint's (model, src_vocab, tgt_vocab, info); SystemExit with its message for a damaged file."""
    from transformer_lib.translation import load_checkpoint

    try:
        return load_checkpoint(path, device)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def text_encoding(encoding: str) -> str:
    """Python's name for `encoding`; ValueError naming --encoding for one Python does not know, or one that does not
    turn text into bytes (hex, base64, rot13: codecs of bytes to bytes or text to text)."""
    try:
        name = codecs.lookup(encoding).name
        "a\n".encode(name).decode(name)
    except LookupError as err:
        what = "not a text encoding" if "not a text encoding" in str(err) else "not an encoding Python knows"
        raise ValueError(f"--encoding {encoding!r} is {what}; use a text encoding such as utf-8, latin-1, cp1252 or "
                         "utf-16") from None
    except (UnicodeError, TypeError, ValueError):
        raise ValueError(f"--encoding {encoding!r} cannot write a line of text; use a text encoding such as utf-8, "
                         "latin-1, cp1252 or utf-16") from None
    return name


def read_lines(stream, encoding: str, max_bytes: int):
    """(line number, text or an error message) for each line of a binary stream, as the lines arrive.

    Lines are cut where `encoding` writes a newline (two bytes in UTF-16, four in UTF-32), then decoded; UTF-16 and
    UTF-32 take their byte order from the byte-order mark (little-endian without one), and a byte-order mark
    before the first line is dropped. A line that is not valid in `encoding`, or longer than max_bytes (the rest of
    it is skipped, never held in memory), comes as (number, None, message).
    """
    name, head = _byte_order(stream, text_encoding(encoding))
    newline = "a\n".encode(name)[len("a".encode(name)):]  # without the byte-order mark some codecs put first
    raws = _byte_lines(stream, max_bytes) if newline == b"\n" and not head else \
        _unit_lines(stream, newline, max_bytes, head)
    for number, raw in enumerate(raws, 1):
        if raw is None:
            yield number, None, f"longer than --max-bytes={max_bytes:,} bytes; skipped"
            continue
        try:
            text = raw.decode(name)
        except UnicodeDecodeError as err:
            yield number, None, (f"not valid {encoding} (byte 0x{raw[err.start]:02x} at position {err.start}); "
                                 "pass --encoding to read another encoding")
            continue
        text = text[1:] if number == 1 and text.startswith("\ufeff") else text  # a byte-order mark, not a word
        yield number, text.rstrip("\r\n"), None


def _byte_order(stream, name: str) -> tuple[str, bytes]:
    """UTF-16 or UTF-32 with the byte order of the stream's byte-order mark, and the bytes read that were not one."""
    marks = {"utf-16": (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE), "utf-32": (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)}
    if name not in marks:
        return name, b""
    little, big = marks[name]
    head = stream.read(len(little))
    return (f"{name}-be", b"") if head == big else (f"{name}-le", b"" if head == little else head)


def _byte_lines(stream, max_bytes: int):
    """The raw lines of a stream whose newline is the byte 0x0a; None for a line longer than max_bytes."""
    while True:
        raw = stream.readline(max_bytes + 1)
        if not raw:
            return
        if len(raw) > max_bytes and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of the line, a piece at a time
                raw = stream.readline(max_bytes + 1)
            raw = None
        yield raw


def _unit_lines(stream, newline: bytes, max_bytes: int, buffer: bytes = b""):
    """The raw lines of a stream whose newline is several bytes (UTF-16, UTF-32): cut only where a newline starts
    at a whole character; None for a line longer than max_bytes."""
    unit, too_long = len(newline), False
    while True:
        end = buffer.find(newline)
        while end >= 0 and end % unit:  # the bytes of a newline inside two other characters
            end = buffer.find(newline, end + 1)
        if end >= 0:
            line, buffer = buffer[: end + unit], buffer[end + unit :]
            yield None if too_long or len(line) > max_bytes else line
            too_long = False
            continue
        if len(buffer) > max_bytes:  # no newline yet and already too long: drop what was read, whole characters
            too_long, buffer = True, buffer[len(buffer) - len(buffer) % unit :]
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            if buffer or too_long:
                yield None if too_long or len(buffer) > max_bytes else buffer
            return
        buffer += chunk


class _Failed(NamedTuple):
    """What the reader thread puts in the queue when reading raises."""
    error: BaseException


def _batches(lines, batch_size: int):
    """Lists of items from `lines`: the first waits for an item, the rest take what has arrived meanwhile (at most
    batch_size), so output is never held back waiting for input that has not come."""
    items: queue.Queue = queue.Queue(maxsize=4 * batch_size)
    done = object()

    def reader() -> None:
        try:
            for item in lines:
                items.put(item)
        except BaseException as err:  # reading failed: the error goes to the caller, not lost with the thread
            items.put(_Failed(err))
        finally:
            items.put(done)

    threading.Thread(target=reader, daemon=True).start()
    while True:
        batch = [items.get()]
        while batch[-1] is not done and len(batch) < batch_size:
            try:
                batch.append(items.get_nowait())
            except queue.Empty:
                break
        finished = batch[-1] is done
        failure = next((item for item in batch if isinstance(item, _Failed)), None)
        batch = [item for item in batch if item is not done and not isinstance(item, _Failed)]
        if failure is not None:
            if batch:
                yield batch
            raise failure.error
        if batch:
            yield batch
        if finished:
            return


def translate_lines(model, lines, beam_size: int, batch_size: int, out, err, what: str = "line") -> int:
    """Translate (number, text, error) items as they arrive, one output line each; returns how many failed. A line
    the model finds unlike its training data (translate()'s UnfamiliarSentence) gets a note on `err`."""
    import warnings

    from transformer_lib.translation import UnfamiliarSentence, translate

    def translated(numbers: list[int], texts: list[str]) -> list[str]:  # its warnings become notes on those lines
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UnfamiliarSentence)
            result = translate(model, texts, beam_size=beam_size)
        for w in caught:
            if isinstance(w.message, UnfamiliarSentence):
                notes[numbers[w.message.index]] = w.message.score
            else:  # any other warning, shown as it would have been
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return result

    failed = 0
    for batch in _batches(lines, batch_size):
        problems = {n: problem for n, _, problem in batch if problem is not None}
        todo = {n: text for n, text, problem in batch if problem is None and text.strip()}
        notes: dict[int, float] = {}
        try:
            done = dict(zip(todo, translated(list(todo), list(todo.values()))))
        except (ValueError, TypeError):  # one bad line spoils the batch: translate its lines one by one
            done, notes = {}, {}
            for n, text in todo.items():
                try:
                    done[n] = translated([n], [text])[0]
                except (ValueError, TypeError) as e:  # its message names "sentence 0", the only one given
                    problems[n] = str(e).replace("sentence 0 ", "it ", 1)
        below = getattr(model, "unfamiliar_below", None)
        for n, _, _ in batch:
            if n in problems:
                failed += 1
                print(f"error: {what} {n}: {problems[n]}", file=err, flush=True)
            if n in notes:
                print(f"note: {what} {n} is unlike the captions the model learned from (its translation scores "
                      f"{notes[n]:.2f} a token, below {below:.2f}): the translation is likely wrong", file=err,
                      flush=True)
            print(done.get(n, ""), file=out)
        out.flush()
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_lib.translate", description=__doc__.split("\n")[0],
                                     epilog=f"{_DOMAIN} One output line per input line; exit status 1 if some line "
                                            "failed.")
    parser.add_argument("sentences", nargs="*", help="German sentences (default: read lines from stdin)")
    parser.add_argument("--checkpoint", default=None,
                        help="a model.safetensors written by the train command (default: the shipped model)")
    parser.add_argument("--beam", type=int, default=5, help="beam size; 1 for greedy decoding (default 5)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"], default="auto",
                        help="where to run (default auto: CUDA, else MPS, else CPU)")
    parser.add_argument("--encoding", default="utf-8", help="the encoding of standard input (default utf-8)")
    parser.add_argument("--batch-size", type=int, default=64, help="most lines translated together (default 64)")
    parser.add_argument("--max-bytes", type=int, default=100_000,
                        help="longer input lines are skipped with an error (default 100000)")
    args = parser.parse_args(argv)
    from transformer_lib.runtime import share_cores_in_command

    share_cores_in_command()  # torch on the cores other processes leave free ($BOOK_SHARE_CORES=0: not)
    if args.beam < 1 or args.batch_size < 1 or args.max_bytes < 1:
        parser.error("--beam, --batch-size and --max-bytes must be positive ints")
    try:
        text_encoding(args.encoding)
    except ValueError as err:
        parser.error(str(err))
    if not args.sentences and sys.stdin is None:
        parser.error("no sentences: give them as arguments or on standard input")
    from transformer_lib.train import _device

    from transformer_lib.translation import UNFAMILIAR_BELOW, pretrained_path

    path = find_checkpoint(args.checkpoint)
    model, *_ = load_model(path, _device(args.device))
    if path.resolve() == pretrained_path().resolve():  # the threshold measured for it (benchmarks/domain.json)
        model.unfamiliar_below = UNFAMILIAR_BELOW
    if args.sentences:
        lines, what = ((n, s, None) for n, s in enumerate(args.sentences, 1)), "sentence"
    else:
        lines, what = read_lines(sys.stdin.buffer, args.encoding, args.max_bytes), "line"
    try:
        failed = translate_lines(model, lines, args.beam, args.batch_size, sys.stdout, sys.stderr, what)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly
        sys.stderr.close()
        return 0
    if failed:
        print(f"error: {failed} of the {what}s could not be translated (see above)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
