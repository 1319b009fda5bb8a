"""benchmarks/gpu.py: the `full` recipe's run on a GPU, read from the training command's output, and chapter 9 quoting
its record. The reading is tested on generated output; the committed record is checked against itself, the recipe and
the chapter."""
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from transformer_lib.translation import RECIPES

from benchmark_module import load_benchmark  # tests/ is on the path

ROOT = Path(__file__).resolve().parents[1]


def _gpu_module():
    return load_benchmark("gpu")


def _log(greedy=(12.5, 39.9, 40.2, 41.0), seconds=30.0, test=True) -> str:
    lines = ["budget full on cuda: Multi30k train", "epoch 1: 0step [00:00, ?step/s]epoch 1: 9step [00:01]"]
    for epoch, bleu in enumerate(greedy, 1):
        lines.append(f"epoch {epoch}, step {100 * epoch}, seconds {seconds * epoch:.1f}, train_loss 2.0, "
                     f"val_loss 1.5, val_bleu {bleu + 0.1}, val_sacrebleu {bleu}")
    lines += ["validation, beam 5, last: sacreBLEU 42.78 (nrefs:1|case:lc); tokenized lowercased BLEU 43.00",
              "validation, beam 5, average of 5: sacreBLEU 42.41 (nrefs:1|case:lc); tokenized lowercased BLEU 42.70"]
    if test:
        lines.append("kept: last; test2016 (1,000 pairs), beam 5: sacreBLEU 42.13 (nrefs:1|case:lc|eff:no); "
                     "tokenized lowercased BLEU 42.35")
    return "\n".join(lines) + "\n"


def test_a_runs_output_gives_its_epochs_the_first_to_reach_40_and_its_scores():
    read = _gpu_module().read_log(_log())
    assert [e["epoch"] for e in read["epochs"]] == [1, 2, 3, 4]
    assert read["training_seconds"] == 120.0 and read["greedy_validation_40"] == {"epoch": 3, "seconds": 90.0}
    assert read["validation_beam"] == {"last": 42.78, "average": 42.41} and read["kept"] == "last"
    assert (read["beam_size"], read["test2016_sacrebleu"], read["test2016_tokenized"]) == (5, 42.13, 42.35)
    assert _gpu_module().read_log(_log(greedy=(10.0, 39.99)))["greedy_validation_40"] is None


@pytest.mark.parametrize("kept", ["average of 5", "moving average"])
def test_a_run_that_kept_an_average_is_read_too(kept):
    moving = "average of 5: sacreBLEU 42.41\nvalidation, beam 5, moving average: sacreBLEU 42.50"
    text = _log().replace("kept: last;", f"kept: {kept};").replace("average of 5: sacreBLEU 42.41", moving)
    read = _gpu_module().read_log(text)
    assert read["kept"] == kept and read["validation_beam"] == {"last": 42.78, "average": 42.41, "moving average": 42.5}


@pytest.mark.parametrize("text, message", [
    (_log(test=False), r"my.log: no test2016 line"),
    ("nothing here\n", r"my.log: no epoch line"),
    (_log() + _log(), r"my.log line \d+: epoch 1 follows epoch 4"),
])
def test_an_unfinished_or_mixed_output_is_refused_naming_the_file(text, message):
    with pytest.raises(ValueError, match=message):
        _gpu_module().read_log(text, "my.log")


def test_the_command_records_a_saved_output_and_refuses_one_without_its_device(tmp_path):
    log, record = tmp_path / "run.log", tmp_path / "gpu.json"
    log.write_text(_log())
    script = [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--from-log", str(log)]
    done = subprocess.run(script + ["--device", "a GPU", "--record", str(record)], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    written = json.loads(record.read_text())
    assert written["device"] == "a GPU" and written["command"].endswith("--budget full")
    assert "greedy validation reached 40 after epoch 3" in done.stdout
    refused = subprocess.run(script, capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode == 2 and "--from-log needs --device" in refused.stderr


def test_chapter_9_quotes_the_recorded_gpu_run():
    record = json.loads((ROOT / "benchmarks" / "gpu.json").read_text())
    epochs = record["epochs"]
    assert len(epochs) == RECIPES["full"].epochs and record["training_seconds"] == epochs[-1]["seconds"]
    reached = next(e for e in epochs if e["val_sacrebleu_greedy"] >= 40)
    assert record["greedy_validation_40"] == {"epoch": reached["epoch"], "seconds": reached["seconds"]}
    assert record["test2016_sacrebleu"] >= 40 and record["note"]  # what shared the machine is said
    cells = nbformat.read(ROOT / "notebooks" / "09_fast.ipynb", as_version=4).cells
    shown = [o for c in cells if c.cell_type == "code" for o in c.get("outputs", [])
             if o.get("metadata", {}).get("book_result", {}).get("name") == "gpu_run"]
    assert len(shown) == 1
    values = shown[0]["metadata"]["book_result"]["values"]
    assert values["device"] == record["device"] and values["test"] == record["test2016_sacrebleu"]
    assert values["epochs"] == len(epochs) and values["reached"] == reached["epoch"]
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert f"the shipped model's {len(epochs)} epochs, in\n  about four minutes" in prose
    assert round(record["training_seconds"] / 60) == 4 and "H200" in record["device"]
    assert "nothing else" in record["note"] and "running nothing else" in prose
