"""The comparisons the book chooses by train each variant from several seeds: the benchmarks' --seeds and --jobs
(benchmarks/recording.py), chapter 4's initialization (benchmarks/init.py) and chapter 11's modern changes
(benchmarks/modern.py), each run here at a tiny size on generated data."""
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import transformer_lib.gpt as gpt
import transformer_lib.translation as tr
from transformer_lib import comparisons
from transformer_lib.data import offline_corpus

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def fake_splits(split, root=None, download=True):
    """The offline corpus as the three splits, so that no test depends on Multi30k."""
    seed = {"train": 0, "val": 1, "test2016": 2}[split]
    return offline_corpus(300 if split == "train" else 20, seed), f"offline {split}"


@pytest.fixture
def benchmarks(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    yield
    for name in ("recording", "init", "modern"):
        sys.modules.pop(name, None)


def test_run_jobs_keeps_the_order_of_the_tasks_here_and_in_spawned_processes(benchmarks):
    import recording

    tasks = [(2.0, 3.0), (3.0, 2.0), (10.0, 0.5)]
    assert recording.run_jobs(math.pow, tasks, 1, 1) == [8.0, 9.0, 10.0 ** 0.5]
    assert recording.run_jobs(math.pow, tasks, 2, 1) == [8.0, 9.0, 10.0 ** 0.5]


@pytest.mark.parametrize("argv, message", [(["--jobs", "0"], "--jobs"), (["--seeds"], "--seeds")])
def test_the_seed_options_refuse_what_cannot_run(benchmarks, argv, message, capsys):
    import init

    with pytest.raises(SystemExit):
        init.main(argv)
    assert message in capsys.readouterr().err


def test_the_init_benchmark_trains_both_tables_from_each_seed(benchmarks, monkeypatch, tmp_path, capsys):
    import init

    monkeypatch.setattr(tr, "load_translation_data", fake_splits)
    tiny = tr.Recipe(n_layers=1, d_model=32, d_ff=64, n_heads=4, dropout=0.1, shared_vocab=False, max_tokens=600,
                     warmup=20, beam_size=2, train_pairs=300, eval_pairs=20)
    monkeypatch.setitem(tr.RECIPES, "cpu", tiny)
    record = tmp_path / "init.json"
    assert init.main(["--seeds", "0", "5", "--record", str(record)]) == 0
    recorded = json.loads(record.read_text())
    assert recorded["seeds"] == [0, 5] and recorded["data"] == "offline train" and recorded["recipe"]["d_model"] == 32
    assert [v["name"] for v in recorded["variants"]] == list(init.VARIANTS)
    for v in recorded["variants"]:
        assert [r["seed"] for r in v["runs"]] == [0, 5]
        assert v["val_loss"] == comparisons.seed_summary(r["val_loss"] for r in v["runs"])
    ours, xavier = recorded["variants"]
    assert ours["runs"][0]["val_loss"] != xavier["runs"][0]["val_loss"]  # the tables differ, so the runs do
    assert ours["runs"][0]["val_loss"] != ours["runs"][1]["val_loss"]  # and so do the seeds
    assert "2 seeds)" in capsys.readouterr().out


def test_the_modern_benchmark_trains_each_variant_from_each_seed(benchmarks, monkeypatch, tmp_path):
    import modern

    monkeypatch.setattr(gpt, "load_translation_data", fake_splits)
    monkeypatch.setitem(modern.MODERN_SIZES, "smoke", dict(train=300, merges=100, n_layers=1, d_model=32, n_heads=4,
                                                           d_ff=64, epochs=1, warmup=10))
    everything = modern.one_change_variants
    monkeypatch.setattr(modern, "one_change_variants", lambda base: {
        k: v for k, v in everything(base).items() if k in ("2017 block", "no biases")})
    record = tmp_path / "modern.json"
    assert modern.main(["--budget", "smoke", "--seeds", "1", "2", "--record", str(record)]) == 0
    recorded = json.loads(record.read_text())
    assert [v["name"] for v in recorded["variants"]] == ["2017 block", "no biases"] and recorded["seeds"] == [1, 2]
    for v in recorded["variants"]:
        assert [r["seed"] for r in v["runs"]] == [1, 2] and v["parameters"] > 0
        assert v["val_perplexity"] == comparisons.seed_summary(r["val_perplexity"] for r in v["runs"])
    base, no_bias = recorded["variants"]
    assert no_bias["parameters"] < base["parameters"]
    assert base["runs"][0]["val_perplexity"] != base["runs"][1]["val_perplexity"]


def test_the_benchmarks_import_without_jupyter(benchmarks):
    """The records are made on machines that need not have Jupyter: the records module imports nbformat lazily."""
    import subprocess

    code = ("import sys; sys.modules['nbformat'] = None; sys.path.insert(0, 'benchmarks'); "
            "import init, subwords, recipes, modern")
    done = subprocess.run([sys.executable, "-c", code], cwd=BENCHMARKS.parent, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", ["init", "modern", "subwords", "recipes"])
def test_every_seed_option_refuses_a_seed_given_twice(benchmarks, name, capsys):
    """`recipes.py --seeds 1 1` once trained seed 1 twice and recorded "2 seeds" with no spread."""
    import importlib

    module = importlib.import_module(name)
    with pytest.raises(SystemExit) as stopped:
        module.main(["--seeds", "1", "1"])
    assert stopped.value.code == 2
    assert "--seeds must differ: seed 1 is given 2 times in [1, 1]" in capsys.readouterr().err
    sys.modules.pop(name, None)


def test_the_recipes_comparison_refuses_a_seed_given_twice_when_called_directly(benchmarks, tmp_path):
    import argparse

    import recipes

    args = argparse.Namespace(seeds=[1, 1], only=[], out=tmp_path, float32=False, jobs=1, threads=1, record=None)
    with pytest.raises(ValueError, match=r"seeds must differ: seed 1 is given 2 times"):
        recipes.seed_comparison(args)
    assert list(tmp_path.iterdir()) == []
    sys.modules.pop("recipes", None)
