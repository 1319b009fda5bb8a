# Hand-written benchmark (not generated from a notebook).
"""The `full` recipe on a GPU: how long `python -m transformer_lib.train multi30k --budget full` trains there, and
what it scores, read from the command's own output.

    python benchmarks/gpu.py [--out DIR] [--note TEXT] [--record [FILE]]       # train here, on CUDA, then read
    python benchmarks/gpu.py --from-log LOG --device NAME [--note TEXT] [--record [FILE]]   # read a finished run

The first form runs the command a learner types (with --out DIR) and keeps its output; the second reads the output
of a run made elsewhere, such as a rented GPU. Either way the record keeps the command, the device, the training
seconds after every epoch with the greedy validation sacreBLEU, the first epoch at which that reaches 40, and the
beam-search scores the run ends with (validation, last epoch and average; the kept one; test2016). --note says what
else ran on the machine meanwhile. Chapter 9 quotes the record (tests/test_gpu_record.py checks it).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from recording import HERE, save_record

COMMAND = [sys.executable, "-m", "transformer_lib.train", "multi30k", "--budget", "full"]
GOAL = 40.0  # the speedrun's goal (chapter 9), here on greedy validation after each epoch

_NUMBER = r"(\d+(?:\.\d+)?)"
EPOCH = re.compile(rf"epoch (\d+), step (\d+), seconds {_NUMBER}, train_loss {_NUMBER}, val_loss {_NUMBER}, "
                   rf"val_bleu {_NUMBER}, val_sacrebleu {_NUMBER}")
BEAM = re.compile(rf"validation, beam (\d+), (last|average of \d+|moving average): sacreBLEU {_NUMBER}")
TEST = re.compile(rf"kept: (last|average of \d+|moving average); test2016 \([\d,]+ pairs\), beam (\d+): "
                  rf"sacreBLEU {_NUMBER} .*tokenized lowercased BLEU {_NUMBER}")


def read_log(text: str, source: str = "the log") -> dict:
    """The epochs, the beam-search scores and test2016 from a `train multi30k` output. Raises ValueError naming
    `source` when an epoch is missing or out of order, or when the run did not reach its test2016 line."""
    epochs = []
    for number, line in enumerate(text.splitlines(), 1):
        found = EPOCH.search(line)
        if found:
            epoch = int(found[1])
            if epoch != len(epochs) + 1:
                raise ValueError(f"{source} line {number}: epoch {epoch} follows epoch {len(epochs)}; give the "
                                 "output of one run, from its start")
            epochs.append({"epoch": epoch, "seconds": float(found[3]), "val_loss": float(found[5]),
                           "val_sacrebleu_greedy": float(found[7])})
    test = TEST.search(text)
    if not epochs or test is None:
        raise ValueError(f"{source}: no {'epoch' if not epochs else 'test2016'} line of `train multi30k` found; "
                         "give the whole output of a finished run (without --no-test)")
    beams = {"average" if kind.startswith("average of") else kind: float(score)  # last, average, moving average
             for _, kind, score in BEAM.findall(text)}
    reached = next((e for e in epochs if e["val_sacrebleu_greedy"] >= GOAL), None)
    return {"epochs": epochs, "training_seconds": epochs[-1]["seconds"],
            "greedy_validation_40": None if reached is None else {k: reached[k] for k in ("epoch", "seconds")},
            "validation_beam": beams, "kept": test[1], "beam_size": int(test[2]),
            "test2016_sacrebleu": float(test[3]), "test2016_tokenized": float(test[4])}


def train_here(out: Path) -> tuple[str, str]:
    """Run the full recipe on this machine's GPU; its output (also shown as it comes) and the device's name."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU here; run this where one is, or record a run made elsewhere with "
                         "--from-log LOG --device NAME")
    lines = []
    with subprocess.Popen(COMMAND + ["--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as run:
        for line in run.stdout:
            print(line, end="", flush=True)
            lines.append(line)
    if run.returncode:
        raise SystemExit(f"error: the training command ended with exit status {run.returncode}")
    return "".join(lines), f"{torch.cuda.get_device_name()}, torch {torch.__version__}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/multi30k-full-gpu"),
                        help="the run's checkpoint folder when training here (default runs/multi30k-full-gpu)")
    parser.add_argument("--from-log", type=Path, default=None, metavar="LOG",
                        help="read the saved output of a run made elsewhere instead of training here")
    parser.add_argument("--device", default=None, help="with --from-log: the GPU and torch it ran on")
    parser.add_argument("--note", default="", help="what else the machine ran meanwhile (default: nothing said)")
    parser.add_argument("--record", nargs="?", const=HERE / "gpu.json", default=None, type=Path, metavar="FILE",
                        help="write the result as JSON (default FILE: benchmarks/gpu.json)")
    args = parser.parse_args(argv)
    if args.from_log is not None:
        if not args.device:
            parser.error("--from-log needs --device NAME: the GPU and torch the run used")
        try:
            text, device = args.from_log.read_text(encoding="utf-8", errors="replace"), args.device
        except OSError as err:
            parser.error(f"--from-log {args.from_log}: {err.strerror or err}")
        source = str(args.from_log)
    else:
        text, device = train_here(args.out)
        source = "the training output"
    try:
        result = read_log(text, source)
    except ValueError as err:
        parser.error(str(err))
    result = {"command": "python -m transformer_lib.train multi30k --budget full", "device": device,
              "note": args.note, **result}
    reached = result["greedy_validation_40"]
    print(f"{device}: {len(result['epochs'])} epochs in {result['training_seconds'] / 60:.1f} minutes of training; "
          f"greedy validation reached {GOAL:.0f} " + (f"after epoch {reached['epoch']} ({reached['seconds'] / 60:.1f}"
                                                      " minutes)" if reached else "in no epoch") +
          f"; test2016, beam {result['beam_size']}: sacreBLEU {result['test2016_sacrebleu']:.2f}")
    if args.record:
        save_record(args.record, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
