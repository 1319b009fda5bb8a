# Hand-written benchmark (not generated from a notebook).
"""The mutation score of the chapters' modules: mutmut's one-line bugs, each run against the tests that reach it.

    python benchmarks/mutation.py [MODULE ...] [--jobs 2] [--again] [--record]

MODULE is a chapter's module (`attention`, `blocks`, ...; default: every chapter's module, book.yml). The
repository's files are copied into a work folder, where mutmut (https://mutmut.readthedocs.io) writes every mutant of
the modules (an operator, a number, a keyword argument or a string changed, a call's argument dropped), runs the unit
tests that import the modules (TESTS, tests_of) once to learn which test reaches which function, then runs each mutant
against the tests that reach it. A mutant every one of its tests passes survives: a bug the suite would let through,
unless it changes nothing a caller can see. benchmarks/mutation_equivalent.json lists those, each with the reason.
The score of a module is its mutants killed over its mutants less the equivalent ones.

The work folder, .mutation/ (ignored by git), is kept: mutmut reuses what it measured for every function and test
that did not change, and `--again` runs the last run's survivors once more, against the tests as they are now (after
writing a test that should kill them). `--record` writes benchmarks/mutation.json and docs/mutation.md. The lane is
its own, apart from the README's test command: on two cores a first run takes about ten minutes for `embeddings`
and well over an hour for a module that most tests reach, such as `attention`.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from transformer_lib.book import load_book
from transformer_lib.files import write_atomically
from transformer_lib.runtime import machine

from recording import save_record

ROOT = Path(__file__).resolve().parents[1]

# the unit tests of the library's behaviour: what a module does, its bad inputs, its properties, its proofs against
# PyTorch and transformers (tests that read the notebooks, the site or the docs, and whole chapters, are other lanes);
# a module's mutants meet those of them that import it (tests_of)
TESTS = ("test_embeddings", "test_attention", "test_blocks", "test_model", "test_dropout", "test_properties",
         "test_data", "test_subwords", "test_subword_translation", "test_decoding", "test_translation",
         "test_translation_training", "test_fast", "test_fast_decoding", "test_serve", "test_gpt", "test_modern",
         "test_hf", "test_bad_inputs", "test_hostile", "test_unfamiliar", "test_exercises")
# tests that time the machine, not the code, or run a whole benchmark: a mutant could only make them slower
DESELECT = ("tests/test_fast.py::test_the_candidates_benchmark", "tests/test_fast.py::test_the_speed_benchmark")
WORK = ROOT / ".mutation"
EQUIVALENT = ROOT / "benchmarks" / "mutation_equivalent.json"
RECORD = ROOT / "benchmarks" / "mutation.json"
DOC = ROOT / "docs" / "mutation.md"
KILLED = {1, 3, 24, -24, 152, 255, 36, -9, -11}  # a failing test, a timeout or a crash: the bug was seen


def tests_of(modules: list[str]) -> list[str]:
    """The files of TESTS that import one of `modules` (by `transformer_lib.<module>`, or `from transformer_lib
    import <module>`)."""
    pattern = re.compile(r"transformer_lib\.(%s)\b|from transformer_lib import [^\n]*\b(%s)\b"
                         % ("|".join(modules), "|".join(modules)))
    return [f"tests/{t}.py" for t in TESTS if pattern.search((ROOT / "tests" / f"{t}.py").read_text("utf-8"))]


def chapter_modules() -> list[str]:
    return [chapter.module for chapter in load_book(ROOT).chapters]


def mutant_change(work: Path, name: str) -> dict:
    """The function a mutant changes and the lines it changes, as `mutmut show` prints them."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, capture_output=True,
                         text=True, check=True).stdout
    before = [line[1:].strip() for line in out.splitlines() if line.startswith("-") and not line.startswith("---")]
    after = [line[1:].strip() for line in out.splitlines() if line.startswith("+") and not line.startswith("+++")]
    mangled = name.split(".")[-1].rsplit("__mutmut_", 1)[0]  # x_function, or xǁClassǁmethod
    function = mangled[2:].replace("ǁ", ".")
    return {"function": function, "from": "\n".join(before), "to": "\n".join(after)}


def equivalent_reason(module: str, change: dict, listed: list[dict]) -> str | None:
    for entry in listed:
        if (entry["module"], entry["function"], entry["from"], entry["to"]) == \
                (module, change["function"], change["from"], change["to"]):
            return entry["why"]
    return None


def survivors_of_last_run(modules: list[str]) -> list[str]:
    """The mutants of `modules` that no test killed in the work folder's last run (survived, or reached by no test)."""
    names = []
    for module in modules:
        meta = WORK / "mutants" / "transformer_lib" / f"{module}.py.meta"
        if not meta.is_file():
            raise SystemExit(f"--again: {module} has no earlier run in {WORK.name}/; run without --again first")
        names += [name for name, code in json.loads(meta.read_text("utf-8"))["exit_code_by_key"].items()
                  if code not in KILLED]
    return names


def run(modules: list[str], jobs: int, again: bool = False) -> dict:
    known = set(chapter_modules())
    unknown = [m for m in modules if m not in known]
    if unknown:
        raise SystemExit(f"MODULE: {', '.join(unknown)} is not a chapter's module; "
                         f"choose from {', '.join(sorted(known))}")
    listed = json.loads(EQUIVALENT.read_text(encoding="utf-8"))
    names = survivors_of_last_run(modules) if again else []
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        if (ROOT / name).is_file():  # the repository as it is now, tests not yet committed included
            (WORK / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, WORK / name)
    config = {
        "source_paths": ["transformer_lib"],
        "only_mutate": [f"transformer_lib/{m}.py" for m in modules],
        "pytest_add_cli_args": ["-o", "addopts=", "-p", "no:cacheprovider", "-q"]
                               + [arg for test in DESELECT for arg in ("--deselect", test)],
        "pytest_add_cli_args_test_selection": tests_of(modules),
        "process_isolation": "forkserver",  # torch is not safe to fork once it has run
        "also_copy": ["conftest.py", "book.yml", "docs", "notebooks", "solutions", "benchmarks", "README.md"],
    }
    with open(WORK / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write("\n[tool.mutmut]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in config.items()))
    shutil.rmtree(WORK / "mutants" / "tests", ignore_errors=True)  # mutmut copies the tests afresh
    for module in modules:  # a run of other modules copied this one unmutated, newer than its source: mutmut would
        mutant = WORK / "mutants" / "transformer_lib" / f"{module}.py"  # take that copy as its mutants, and find none
        if not mutant.with_suffix(".py.meta").is_file():
            mutant.unlink(missing_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if not again or names:
        subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs), *names], cwd=WORK,
                       env=env, check=True, stdout=subprocess.DEVNULL)
    result = {"command": "python benchmarks/mutation.py " + " ".join(modules), "machine": machine(),
              "tests": tests_of(modules), "modules": {}}
    for module in modules:
        meta = json.loads((WORK / "mutants" / "transformer_lib" / f"{module}.py.meta").read_text("utf-8"))
        codes = meta["exit_code_by_key"]
        survivors, equivalent = [], []
        for name, code in sorted(codes.items()):
            if code in KILLED:
                continue
            change = mutant_change(WORK, name)
            why = equivalent_reason(module, change, listed)
            (equivalent if why else survivors).append({**change, **({"why": why} if why else {})})
        killed = sum(code in KILLED for code in codes.values())
        counted = len(codes) - len(equivalent)
        result["modules"][module] = {"mutants": len(codes), "killed": killed, "equivalent": len(equivalent),
                                     "score": round(100 * killed / counted, 1) if counted else 100.0,
                                     "survivors": survivors}
    return result


def table(result: dict) -> str:
    rows = ["| module | mutants | killed | equivalent | survived | score |", "|---|---|---|---|---|---|"]
    for module, r in result["modules"].items():
        rows.append(f"| `{module}` | {r['mutants']} | {r['killed']} | {r['equivalent']} | {len(r['survivors'])} | "
                    f"{r['score']:.1f}% |")
    return "\n".join(rows)


def _one_line(code: str) -> str:
    return " ".join(code.split())


def document(result: dict) -> str:
    """docs/mutation.md, rendered from benchmarks/mutation.json alone (tests/test_mutation_record.py renders it
    again and compares)."""
    listed = json.loads(EQUIVALENT.read_text(encoding="utf-8"))
    lines = ["# The mutation score", "",
             "A mutant is the package with one small change a learner or a maintainer could make by mistake: an",
             "operator, a number, a keyword argument, a dropped argument. A test suite kills it when one of its tests",
             "fails. [mutmut](https://mutmut.readthedocs.io) writes the mutants of each chapter's module and runs each",
             "against the unit tests that reach the function it changes.", "",
             "Reproduce it (requirements.txt installs mutmut; on two cores a small module such as `embeddings` "
             "takes about ten minutes, a module that most tests reach, such as `attention`, well over an hour):", "",
             "```bash", result["command"] + " --record", "```", "",
             f"Recorded on {result['machine']}, against the unit tests that import the modules: "
             + ", ".join(f"`{t}`" for t in result["tests"]) + ".", "",
             table(result), "",
             "The score counts killed mutants over all mutants less the equivalent ones.", ""]
    survivors = [(m, s) for m, r in result["modules"].items() for s in r["survivors"]]
    if survivors:
        lines += ["## Survivors", "", "Bugs the suite lets through today:", ""]
        lines += [f"- `{m}.{s['function']}`: `{_one_line(s['from'])}` became `{_one_line(s['to'])}`"
                  for m, s in survivors]
        lines.append("")
    mine = [e for e in listed if e["module"] in result["modules"]]
    if mine:
        lines += ["## Equivalent mutants", "",
                  "Changes no caller can see, listed in benchmarks/mutation_equivalent.json with the reason:", ""]
        lines += [f"- `{e['module']}.{e['function']}`: `{_one_line(e['from'])}` to `{_one_line(e['to'])}`. {e['why']}"
                  for e in mine]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help="chapters' modules (default: all)")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="mutants run at once")
    parser.add_argument("--again", action="store_true",
                        help="run the last run's survivors again, against the tests now")
    parser.add_argument("--record", action="store_true", help="write benchmarks/mutation.json and docs/mutation.md")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    result = run(args.modules or chapter_modules(), args.jobs, args.again)
    print(table(result))
    for module, r in result["modules"].items():
        for s in r["survivors"]:
            print(f"survived in {module}.{s['function']}:\n  - {s['from']}\n  + {s['to']}")
    if args.record:
        save_record(RECORD, result)
        write_atomically(DOC, lambda tmp: Path(tmp).write_text(document(result), encoding="utf-8"))
        print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
