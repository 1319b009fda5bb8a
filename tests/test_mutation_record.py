"""The mutation lane (benchmarks/mutation.py): its record, the page rendered from it, its list of equivalent mutants."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from benchmark_module import load_benchmark  # tests/ is on the path

ROOT = Path(__file__).resolve().parents[1]
mutation = load_benchmark("mutation")


def test_docs_mutation_is_the_page_its_record_renders():
    record = json.loads(mutation.RECORD.read_text(encoding="utf-8"))
    assert mutation.DOC.read_text(encoding="utf-8") == mutation.document(record)
    for module, r in record["modules"].items():
        assert module in mutation.chapter_modules()
        counted = r["mutants"] - r["equivalent"]
        assert r["killed"] + len(r["survivors"]) == counted  # every mutant killed, survived or listed equivalent
        assert r["score"] == round(100 * r["killed"] / counted, 1)


def test_every_equivalent_mutant_names_its_module_function_change_and_reason():
    listed = json.loads(mutation.EQUIVALENT.read_text(encoding="utf-8"))
    modules = set(mutation.chapter_modules())
    for entry in listed:
        assert set(entry) == {"module", "function", "from", "to", "why"}, entry
        assert entry["module"] in modules and entry["from"] != entry["to"], entry
        assert len(entry["why"].split()) >= 5, f"say why this change is no bug: {entry}"


def test_an_equivalent_mutant_is_matched_by_module_function_and_both_lines():
    listed = [{"module": "attention", "function": "f", "from": "a = 1", "to": "a = 2", "why": "a is never read"}]
    same = {"function": "f", "from": "a = 1", "to": "a = 2"}
    assert mutation.equivalent_reason("attention", same, listed) == "a is never read"
    assert mutation.equivalent_reason("blocks", same, listed) is None
    assert mutation.equivalent_reason("attention", {**same, "to": "a = 3"}, listed) is None
    assert mutation.equivalent_reason("attention", {**same, "function": "g"}, listed) is None


def test_a_module_that_is_no_chapters_is_refused_by_name(capsys):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mutation.py"), "attention", "runs"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "MODULE: runs is not a chapter's module" in out.stderr
    with pytest.raises(SystemExit):
        mutation.main(["--jobs", "0"])
    assert "--jobs must be at least 1, got 0" in capsys.readouterr().err
