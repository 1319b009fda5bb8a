"""The speedrun's pieces: the warmup-stable-decay rate, recipe changes from the command line (`--set`), and
benchmarks/speedrun.py's record, run end to end on a tiny recipe."""
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from transformer_lib import comparisons
from transformer_lib.train import main as train_main, recipe_changes
from transformer_lib.training import rate
from transformer_lib.runs import build
from transformer_lib.translation import (CPU_FLOAT32, RECIPES, Recipe, budget_recipe, load_checkpoint, prepare_data,
                                         train_translation, wsd_rate)

ROOT = Path(__file__).resolve().parents[1]


def test_wsd_climbs_to_noams_peak_holds_it_and_falls_linearly_to_zero_at_the_end():
    total, warmup, cooldown = 1000, 50, 0.3
    rates = [wsd_rate(s, total, 256, 0.5, warmup, cooldown) for s in range(1, total + 2)]
    peak = rate(warmup, 256, 0.5, warmup)  # chapter 5's rate at its highest
    assert rates[warmup - 1] == pytest.approx(peak) and max(rates) == pytest.approx(peak)
    assert rates[0] == pytest.approx(peak / warmup)  # linear warmup from step 1
    assert all(r == pytest.approx(peak) for r in rates[warmup - 1: 700])  # stable until the last 30% of the steps
    falling = rates[700:total]
    assert all(a > b > 0 for a, b in zip(falling, falling[1:]))  # strictly down, still moving at the last step
    steps = [b - a for a, b in zip(falling, falling[1:])]
    assert max(steps) == pytest.approx(min(steps))  # a straight line
    assert rates[total] == 0.0  # zero after the last step


def test_a_wsd_recipe_ends_its_rate_at_the_last_step_of_its_last_epoch():
    recipe = replace(RECIPES["smoke"], cooldown=0.5, epochs=2, train_pairs=300, eval_pairs=10)
    data = prepare_data(recipe, download=False)
    model, _, optimizer, scheduler, _ = build(recipe, data, torch.device("cpu"), cooled_rate=wsd_rate)
    from transformer_lib.data import bucket_batches

    steps = recipe.epochs * len(bucket_batches(data.train, recipe.max_tokens, data.tgt_vocab.pad_idx))
    seen = []
    for _ in range(steps):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen[-1] > 0 and optimizer.param_groups[0]["lr"] == 0.0  # the run's last step is its last nonzero rate
    assert seen[0] == pytest.approx(wsd_rate(1, steps, recipe.d_model, recipe.factor, recipe.warmup, 0.5))


def test_recipe_changes_read_values_as_json_and_name_what_is_wrong():
    assert recipe_changes(["warmup=200", "cooldown=0.3", "clip_norm=null", "fast=true", "factor=0.8"]) == {
        "warmup": 200, "cooldown": 0.3, "clip_norm": None, "fast": True, "factor": 0.8}
    with pytest.raises(ValueError, match="'warmup' is not FIELD=VALUE"):
        recipe_changes(["warmup"])
    with pytest.raises(ValueError, match="no field 'lr'"):
        recipe_changes(["lr=1e-3"])


@pytest.mark.parametrize("argv, message", [
    (["--set", "lr=1e-3"], "--set: 'lr=1e-3': a Recipe has no field 'lr'"),
    (["--set", "cooldown=2"], "--set: cooldown is the share of the steps"),
    (["--seed", "-1"], "--seed: seed must be"),
])
def test_the_train_command_refuses_a_bad_change_before_it_trains(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        train_main(["multi30k", "--budget", "smoke", "--out", str(tmp_path / "run"), *argv])
    assert message in str(stop.value)
    assert not (tmp_path / "run").exists()  # nothing written


def _speedrun(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "speedrun.py"), *args], cwd=cwd,
                          capture_output=True, text=True)


TINY = ["subwords=null", "train_pairs=300", "eval_pairs=12", "n_layers=1", "d_model=32", "d_ff=64", "n_heads=2",
        "max_tokens=600", "warmup=20", "beam_size=1"]


def test_the_speedrun_records_each_seed_entries_on_it_and_the_record_trained_again(tmp_path):
    record, out = tmp_path / "speedrun.json", tmp_path / "runs"
    done = _speedrun("tiny", "--set", *TINY, "epochs=2", "--seeds", "0", "1", "2", "--out", str(out),
                     "--record", str(record))
    assert done.returncode == 0, done.stderr[-3000:]
    entry = json.loads(record.read_text())["entries"][0]
    assert entry["name"] == "tiny" and entry["on"] is None and entry["record"] is True  # the first is a record
    assert [r["seed"] for r in entry["runs"]] == [0, 1, 2]
    for run in entry["runs"]:
        assert run["command"].startswith("python -m transformer_lib.train multi30k --budget cpu --seed")
        assert "--set" in run["command"] and "n_layers=1" in run["command"]  # epochs=2 is the baseline's own
        assert _recipe_of_command(run["command"]) == replace(_speedrun_module().recipe_of(entry["changes"]),
                                                             seed=run["seed"])
        assert [t for t, _ in run["curve"]] == sorted(t for t, _ in run["curve"]) and len(run["curve"]) == 2
        assert run["train_seconds"] == run["curve"][-1][0]
        for goal, second in run["milestones"].items():  # the first epoch end at or above the goal
            hits = [t for t, b in run["curve"] if b >= int(goal)]
            assert second == (hits[0] if hits else None)
    assert entry["val_sacrebleu"] == comparisons.seed_summary(r["val_sacrebleu"] for r in entry["runs"])

    # an entry on it: the changes add up, the gain is against the record it builds on; on 1 seed, never a record
    done = _speedrun("three epochs", "--set", "epochs=3", "--seeds", "0", "--out", str(out),
                     "--record", str(record))
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = json.loads(record.read_text())["entries"]
    assert second["on"] == "tiny" and second["changes"] == {**first["changes"], "epochs": 3}
    assert second["gain"] == round(second["val_sacrebleu"]["mean"] - first["val_sacrebleu"]["mean"], 2)
    assert second["record"] is False and "not a record" in done.stdout
    assert all(len(r["curve"]) == 3 for r in second["runs"])
    table = comparisons.speedrun_markdown(json.loads(record.read_text()))
    assert "| **tiny** | - |" in table and "| tiny | `epochs=3` |" in table

    # a change of the beam search alone: the record's epochs are resumed and scored again, not trained again
    done = _speedrun("length penalty", "--on", "tiny", "--set", "length_penalty=1.5", "beam_size=2", "--seeds", "0",
                     "2", "--out", str(out), "--record", str(record))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("only the beam search changes: the epochs of 'tiny' are scored again") == 2
    third = json.loads(record.read_text())["entries"][2]
    for ours, theirs in zip(third["runs"], (first["runs"][0], first["runs"][2])):
        assert ours["curve"] == theirs["curve"] and ours["train_seconds"] == theirs["train_seconds"]
        assert "length_penalty=1.5" in ours["command"] and "beam_size=2" in ours["command"]
        info = load_checkpoint(out / f"length-penalty-seed{ours['seed']}" / "model.safetensors")[3]
        assert info["recipe"]["length_penalty"] == 1.5 and info["scores"][info["scores"]["kept"]]["sacrebleu"] == \
            ours["val_sacrebleu"]
    entries = json.loads(record.read_text())["entries"]
    assert comparisons.rescored(third, entries) and not comparisons.rescored(second, entries)
    rows = [row for row in comparisons.speedrun_markdown(json.loads(record.read_text())).splitlines() if row[:1] == "|"]
    assert [row for row in rows if "(its base's runs)" in row] == [row for row in rows if "`length_penalty=1.5`" in row]

    # the record trained again (on the same record file, so that no record is trained twice in one test): the yardstick
    # of entries built on it, never the default base
    done = _speedrun("again", "--again", "--set", "epochs=1", "--seeds", "0", "--out", str(out), "--record", str(record))
    assert done.returncode == 2 and "--again trains a record as it is" in done.stderr  # no --set with --again
    done = _speedrun("again", "--again", "--seeds", "0", "--out", str(out), "--record", str(record))
    assert done.returncode == 0, done.stderr[-3000:]
    again = json.loads(record.read_text())["entries"][3]
    assert again["again"] is True and again["record"] is False and again["on"] == "tiny"
    assert again["changes"] == first["changes"] and again["runs"][0]["command"] == first["runs"][0]["command"].replace(
        "tiny-seed0", "again-seed0")
    done = _speedrun("one epoch", "--on", "again", "--set", "epochs=1", "--seeds", "0", "--out", str(out),
                     "--record", str(record))
    assert done.returncode == 0, done.stderr[-3000:]
    entry = json.loads(record.read_text())["entries"][4]
    assert entry["on"] == "again" and entry["gain"] == round(entry["val_sacrebleu"]["mean"] -
                                                             again["val_sacrebleu"]["mean"], 2)
    assert "| again | tiny | nothing (trained again on another machine) |" in comparisons.speedrun_markdown(
        json.loads(record.read_text()))
    done = _speedrun("more", "--set", "epochs=1", "--seeds", "0", "--out", str(out), "--record", str(record))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(record.read_text())["entries"][5]["on"] == "tiny"  # the last record, not the entry trained again


def test_the_speedrun_refuses_an_unknown_record_or_field_before_training(tmp_path):
    done = _speedrun("x", "--on", "nothing", "--out", str(tmp_path), "--record", str(tmp_path / "s.json"))
    assert done.returncode == 2 and "--on 'nothing': no record, nor a record trained --again, of that name" in done.stderr
    done = _speedrun("x", "--set", "cooldown=3", "--out", str(tmp_path))
    assert done.returncode == 2 and "cooldown" in done.stderr and "(0, 1]" in done.stderr
    assert list(tmp_path.iterdir()) == []


def _speedrun_module():
    from benchmark_module import load_benchmark  # tests/ is on the path

    return load_benchmark("speedrun")


def _recipe_of_command(line: str) -> Recipe:
    """The recipe `python -m transformer_lib.train multi30k --budget cpu --seed S --set ...` trains."""
    words = line.split()
    sets = words[words.index("--set") + 1:] if "--set" in words else []
    return replace(RECIPES["cpu"], **recipe_changes(sets), seed=int(words[words.index("--seed") + 1]))


def test_every_recorded_command_trains_its_entrys_recipe_under_todays_cpu_budget():
    speedrun = _speedrun_module()
    record = json.loads((ROOT / "benchmarks" / "speedrun.json").read_text())
    assert record["entries"], "the speedrun has no entries"
    for entry in record["entries"]:
        for run in entry["runs"]:
            wanted = replace(speedrun.recipe_of(entry["changes"]), seed=run["seed"])
            assert _recipe_of_command(run["command"]) == wanted, (entry["name"], run["command"])
        if entry["record"]:
            assert len(entry["runs"]) >= speedrun.MIN_SEEDS, entry["name"]


def test_the_cpu_budget_is_the_last_record_of_the_speedrun():
    """`python -m transformer_lib.train multi30k --budget cpu` trains the speedrun's last record, as chapters 8 and 9
    say, and the record's commands need no --set."""
    speedrun = _speedrun_module()
    record = json.loads((ROOT / "benchmarks" / "speedrun.json").read_text())
    last = [e for e in record["entries"] if e["record"]][-1]
    assert RECIPES["cpu"] == speedrun.recipe_of(last["changes"]), last["name"]
    assert all(" --set " not in run["command"] for run in last["runs"])


def test_the_float32_cpu_recipe_is_the_speedrun_entry_measured_beside_the_record():
    """CPU_FLOAT32 is the recipe of the speedrun's entry "float32, eight epochs", built on the record trained again."""
    speedrun = _speedrun_module()
    entries = {e["name"]: e for e in json.loads((ROOT / "benchmarks" / "speedrun.json").read_text())["entries"]}
    eight = entries["float32, eight epochs"]
    assert CPU_FLOAT32 == speedrun.recipe_of(eight["changes"]) and eight["on"] == "the record, trained again"
    assert speedrun.recipe_of(entries[eight["on"]]["changes"]) == RECIPES["cpu"] and entries[eight["on"]]["again"]


def test_refreshed_commands_follow_a_new_cpu_budget(tmp_path, monkeypatch):
    speedrun = _speedrun_module()
    changes = {"fast": True, "epochs": 7, "cooldown": 0.3}
    path = tmp_path / "speedrun.json"
    stale = "python -m transformer_lib.train multi30k --budget cpu --seed 1 --out runs/x-seed1 --no-test --quiet --set fast=true"
    path.write_text(json.dumps({"entries": [{"name": "x", "changes": changes, "runs": [{"seed": 1, "command": stale}]},
                                            {"name": "base", "changes": {}, "runs": [{"seed": 0, "command": stale}]}]}))
    monkeypatch.setitem(speedrun.RECIPES, "cpu", speedrun.recipe_of(changes))  # the budget becomes the record
    assert speedrun.main(["--refresh-commands", "--record", str(path)]) == 0
    (x,), (base,) = (e["runs"] for e in json.loads(path.read_text())["entries"])
    assert "--set" not in x["command"] and "--out runs/x-seed1" in x["command"]  # the budget is its recipe
    assert base["command"].endswith("--set epochs=2 cooldown=null fast=false")  # the baseline now names its way back
    assert _recipe_of_command(base["command"]) == replace(speedrun.BASELINE, seed=0)


def test_milestone_times_count_the_seeds_that_got_there():
    runs = [{"milestones": {"30": 120.0, "35": None}}, {"milestones": {"30": 240.0, "35": 300.0}}]
    assert comparisons.milestone_time(runs, 30) == "3.0"
    assert comparisons.milestone_time(runs, 35) == "5.0 (1/2)"
    assert comparisons.milestone_time([runs[0]], 35) == "-"


def test_a_tie_reads_as_no_gain_and_a_gain_keeps_its_sign():
    assert comparisons.signed(-0.0) == comparisons.signed(0.004) == comparisons.signed(-0.004) == "0.00"
    assert comparisons.signed(0.28) == "+0.28" and comparisons.signed(-0.15) == "-0.15"
    entry = {"name": "tie", "on": "base", "changes": {"factor": 0.7}, "record": False, "gain": -0.0,
             "val_sacrebleu": {"mean": 40.0, "sd": 0.1, "min": 39.9, "max": 40.1, "n": 3},
             "test_sacrebleu": {"mean": 40.0, "sd": 0.1, "min": 39.9, "max": 40.1, "n": 3},
             "train_seconds": {"mean": 540.0}, "runs": [{"curve": [[540.0, 38.0]], "milestones": {"25": 540.0}}]}
    base = {**entry, "name": "base", "on": None, "changes": {}, "record": True}
    del base["gain"]
    table = comparisons.speedrun_markdown({"entries": [base, entry], "milestones": [25], "limit_seconds": 600,
                                           "machine": "x"} | {"entries": [{**e, "machine": "x"} for e in (base, entry)]})
    assert "| 0.00 |" in table and "-0.00" not in table and "+0.00" not in table
    assert "| tie | base | `factor=0.7` |" in table  # the changes as `--set` reads them (JSON)


def test_a_seed_trained_on_a_slower_machine_stops_the_entry_where_its_work_per_epoch_is_the_bases():
    speedrun = _speedrun_module()
    base = {"name": "record", "changes": {"fast": True, "epochs": 7},
            "runs": [{"seed": s, "train_seconds": t, "curve": [[0, 0]] * 7} for s, t in ((0, 540.0), (1, 560.0))]}
    slow = {"seed": 0, "train_seconds": 7 * 153.0, "curve": [[0, 0]] * 7}
    error = speedrun.pace_error({**base["changes"], "warmup": 200}, base, slow)
    assert "seed 0 trained an epoch in 153.0 s, 1.9 times the 78.6 s of 'record'" in error
    assert "nothing was recorded" in error
    assert speedrun.pace_error({**base["changes"], "warmup": 200}, base, {**slow, "train_seconds": 7 * 110.0}) is None
    assert speedrun.pace_error({**base["changes"], "max_tokens": 1500}, base, slow) is None  # other work per epoch
    assert speedrun.pace_error({**base["changes"], "fast": False}, base, slow) is None  # the readable path
    assert speedrun.pace_error(base["changes"], None, slow) is None  # the baseline builds on nothing
    tiny = {**base, "runs": [{"seed": 0, "train_seconds": 7 * 2.0, "curve": [[0, 0]] * 7}]}
    assert speedrun.pace_error(base["changes"], tiny, {**slow, "train_seconds": 7 * 5.0}) is None  # too short to tell


def test_the_speedrun_refuses_a_seed_given_twice_before_training(tmp_path):
    """`--seeds 0 0 0 --record` once trained one run three times and recorded it as 3 seeds with no spread, a record."""
    done = _speedrun("x", "--seeds", "0", "0", "0", "--out", str(tmp_path), "--record", str(tmp_path / "s.json"))
    assert done.returncode == 2 and "--seeds must differ: seed 0 is given 3 times in [0, 0, 0]" in done.stderr
    assert "Traceback" not in done.stderr and list(tmp_path.iterdir()) == []
    speedrun = _speedrun_module()
    rows = [{"seed": 0, "val_sacrebleu": 30.0, "test_sacrebleu": 30.0, "train_seconds": 100.0}] * 3
    with pytest.raises(ValueError, match=r"the runs' seeds must differ: seed 0 is given 3 times"):
        speedrun.entry_of("x", None, {}, rows)


def test_a_seed_summary_refuses_a_value_that_is_not_a_finite_number():
    """seed_summary([30, nan, 31]) once gave a NaN mean beside a min of 30 and a max of 31."""
    for bad, shown in ((float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")):
        with pytest.raises(ValueError, match=rf"value 1 \(counting from 0\) of \[30.0, {shown}, 31.0\] is {shown}"):
            comparisons.seed_summary([30, bad, 31])
    assert comparisons.seed_summary([30, 31])["mean"] == 30.5


def _variant(name: str, values: list[float]) -> dict:
    summary = comparisons.seed_summary(values)
    return {"name": name, "vocab_sizes": [100, 100], "parameters": 1000, "unk_de": 0.0, "unk_en": 0.0,
            "tokens_per_sentence_en": 10.0, "train_seconds": {"mean": 60.0}, "val_sacrebleu": summary,
            "test_sacrebleu": summary}


def test_a_comparison_from_one_seed_says_it_cannot_tell_noise():
    """One seed of each was once 'below it by more than their seeds scatter': a range of one point overlaps nothing."""
    one, other = comparisons.seed_summary([30.0]), comparisons.seed_summary([25.0])
    assert comparisons.one_seed(one) and comparisons.within_noise(one, other)
    three = comparisons.seed_summary([30.0, 30.5, 31.0])
    assert not comparisons.within_noise(three, comparisons.seed_summary([25.0, 25.5, 26.0]))
    record = {"machine": "x", "device": "cpu", "budget": "cpu", "seeds": [0],
              "recipe": {"n_layers": 1, "d_model": 32, "epochs": 1, "beam_size": 1},
              "variants": [_variant("a", [30.0]), _variant("b", [25.0])]}
    shown = comparisons.subwords_markdown(record)
    assert "It rests on one seed, which cannot tell a difference from noise" in shown and "scatter" not in shown
    record["variants"] = [_variant("a", [30.0, 30.5, 31.0]), _variant("b", [25.0, 25.5, 26.0]), _variant("c", [20.0])]
    shown = comparisons.subwords_markdown(record)
    assert "Below it by more than their seeds scatter: *b*." in shown
    assert "Trained from one seed, which cannot tell a difference from noise: *c*." in shown
    runs = [{"seed": 0, "kept": "last"}]
    recipes = {"winner": "a", "candidates": [{"name": "a"}, {"name": "b"}],
               "seeds": {"machine": "x", "device": "cpu", "seeds": [0], "recipes": [
                   {"name": "a", "val_sacrebleu": comparisons.seed_summary([30.0]), "runs": runs},
                   {"name": "b", "val_sacrebleu": comparisons.seed_summary([25.0]), "runs": runs}]}}
    shown = comparisons.recipe_seeds_markdown(recipes)
    assert "The chosen recipe rests on one seed here, which cannot tell a difference from noise" in shown
    assert "scatter" not in shown


def test_the_cpu_budget_trains_the_float32_recipe_where_the_cpu_has_no_bfloat16(tmp_path, monkeypatch):
    """`--budget cpu` picks by the hardware: the record where the CPU multiplies bfloat16, CPU_FLOAT32 elsewhere; --set
    and --epochs change the recipe it picked."""
    from transformer_lib import fast, translation

    assert budget_recipe("cpu", True) == RECIPES["cpu"] and budget_recipe("smoke", False) == RECIPES["smoke"]
    assert budget_recipe("cpu", False) == CPU_FLOAT32 and not CPU_FLOAT32.bf16  # the record's other fields kept:
    assert CPU_FLOAT32 == replace(RECIPES["cpu"], bf16=False, epochs=CPU_FLOAT32.epochs) and CPU_FLOAT32.epochs > 7
    trained = []

    def stop(recipe, *args, **kwargs):  # the recipe the command would train, caught before any data is read
        trained.append(recipe)
        raise SystemExit(0)

    monkeypatch.setattr(translation, "prepare_data", stop)
    for hardware, argv, expected in [
            (False, [], CPU_FLOAT32), (True, [], RECIPES["cpu"]),
            (False, ["--set", "warmup=200"], replace(CPU_FLOAT32, warmup=200)),
            (False, ["--epochs", "3"], replace(CPU_FLOAT32, epochs=3))]:
        monkeypatch.setattr(fast, "has_bf16", lambda device, hardware=hardware: hardware)
        with pytest.raises(SystemExit):
            train_main(["multi30k", "--budget", "cpu", "--out", str(tmp_path / "run"), *argv])
        assert trained.pop() == expected, (hardware, argv)


def test_the_speedrun_refuses_a_command_that_would_train_another_recipe_on_this_cpu(monkeypatch):
    """Without bfloat16 in hardware, `--budget cpu` starts from CPU_FLOAT32: the record's command would train eight
    epochs, not its seven, and the speedrun says so before training; a float32 entry's command names its epochs."""
    speedrun = _speedrun_module()
    record = {"fast": True, "epochs": 7, "cooldown": 0.3, "max_tokens": 1500, "length_penalty": 1.4}
    assert speedrun.recipe_of(record) == RECIPES["cpu"]
    eight = {**record, "bf16": False, "epochs": 8}
    for hardware in (True, False):
        monkeypatch.setattr(speedrun, "has_bf16", lambda device, hardware=hardware: hardware)
        speedrun.check_command_trains(eight, speedrun.command(eight, 0, Path("run")))
        if hardware:
            speedrun.check_command_trains(record, speedrun.command(record, 0, Path("run")))
        else:
            with pytest.raises(SystemExit, match="would train a recipe that differs in epochs: "):
                speedrun.check_command_trains(record, speedrun.command(record, 0, Path("run")))


def test_a_run_folder_is_one_per_corpus_and_recipe_and_a_forecast_starts_a_run_when_asked(tmp_path, monkeypatch):
    """runs.folder: another number of epochs or beam search keeps the folder (a resumed run may change them), any
    other field gives another; train_translation(forecast=True) logs the forecast first and keeps it in the folder."""
    from transformer_lib import runs

    data = prepare_data(replace(RECIPES["smoke"], train_pairs=200, eval_pairs=5))
    recipe = replace(RECIPES["smoke"], train_pairs=200, eval_pairs=5, epochs=1)
    here = runs.folder(recipe, data)
    assert here.parent.name == "runs" and here.name.startswith(("multi30k-", "offline-"))
    assert runs.folder(replace(recipe, epochs=9, beam_size=3, length_penalty=1.0), data) == here
    assert runs.folder(replace(recipe, dropout=0.0), data) != here and runs.folder(recipe, data, "speedrun") != here
    assert runs.folder(recipe, data, "speedrun").name == "speedrun-" + here.name
    lines = []
    train_translation(recipe, tmp_path / "run", data=data, progress=False, log=lines.append, forecast=True)
    assert lines[0].startswith("forecast on this machine: ") and (tmp_path / "run" / "forecast.json").is_file()
    lines.clear()
    train_translation(recipe, tmp_path / "run", data=data, progress=False, log=lines.append, forecast=True)
    assert lines[0].startswith("forecast when this run started: ")  # the finished run shows the one kept before it
