# Hand-written tool module (not generated from a notebook).
"""Parts of the README's generated blocks (transformer_lib.claims renders them), kept apart so that claims.py stays
short: the check that every block's markers pair up (marker_problems), and the table of runs under load
(load_markdown, from benchmarks/load.json).
"""
from __future__ import annotations

import re

__all__ = ["marker_problems", "load_markdown"]

_MARKER = re.compile(r"<!--\s*(begin|end)\b\s*([\w-]*)")


def marker_problems(text: str, file: str = "README.md") -> list[str]:
    """Markers of generated blocks that do not pair up, each naming the block and its line in `file`: a begin marker
    without its end (or not written as `<!-- begin NAME (python -m transformer_lib.book readme) -->` alone on its
    line), an end marker without its begin. Markers quoted in `code` are prose, not markers."""
    problems, open_ = [], None  # the block begun and not yet ended: (name, line number)
    for number, line in enumerate(text.splitlines(), 1):
        for kind, name in _MARKER.findall(re.sub(r"`[^`]*`", "", line)):
            if kind == "begin":
                if open_ is not None:
                    problems.append(f"{file} line {open_[1]}: block {open_[0]!r} has no `<!-- end {open_[0]} -->` "
                                    f"before the next block begins (line {number})")
                if line.strip() != f"<!-- begin {name} (python -m transformer_lib.book readme) -->":
                    problems.append(f"{file} line {number}: block {name!r}: write its begin marker alone on its line "
                                    f"as `<!-- begin {name} (python -m transformer_lib.book readme) -->`")
                open_ = (name, number)
            elif open_ is not None and name == open_[0] and f"<!-- end {name} -->" in line:
                open_ = None
            else:
                problems.append(f"{file} line {number}: `<!-- end {name} -->` ends no block begun above it" +
                                (f" (block {open_[0]!r} begun at line {open_[1]} is still open)" if open_ else ""))
    if open_ is not None:
        problems.append(f"{file} line {open_[1]}: block {open_[0]!r} has no end marker `<!-- end {open_[0]} -->`; "
                        "add it where the generated text should end")
    return problems


def load_markdown(record: dict) -> str:
    """A recorded run of benchmarks/load.py: chapters and training steps, idle and beside busy processes."""
    lines, machine = [], None
    if "chapters" in record:
        c = record["chapters"]
        machine = c["machine"]
        lines += [f"{machine}: each chapter run by `book run --budget cpu` (which shares the cores), idle and with "
                  f"{c['busy']} other processes each keeping a core busy:", "",
                  "| chapter | idle | loaded | slowdown |", "|---|---|---|---|"]
        lines += [f"| {n} | {r['idle_s'] / 60:.1f} min | {r['loaded_s'] / 60:.1f} min | {r['slowdown']:.2f}x |"
                  for n, r in c["results"].items()]
        worst = max(r["slowdown"] for r in c["results"].values())
        lines += ["", f"Beside {c['busy']} busy processes, each of these chapters took at most {worst:.2f} times its idle "
                  "time.", ""]
    if "steps" in record:
        s = record["steps"]
        where = "And" if s["machine"] == machine else f"{s['machine']}:"
        lines += [f"{where} one training step of chapter 8's `cpu` model, each way of running torch's threads, idle "
                  f"and with {s['busy']} busy processes (medians):", "",
                  "| threads | idle | loaded | slowdown |", "|---|---|---|---|"]
        lines += [f"| {name} | {r['idle_s_per_step']:.2f} s | {r['loaded_s_per_step']:.2f} s | {r['slowdown']:.2f}x |"
                  for name, r in s["results"].items()]
    if "commands" in record:
        c = record["commands"]
        where = "And" if c["machine"] == machine else f"{c['machine']}:"
        rounds = c.get("rounds", 1)
        lines += ([""] if lines else []) + [
            f"{where} the commands as a reader types them, on the CPU, with the cores shared (their default, "
            f"`runtime.share_cores`) and not (`BOOK_SHARE_CORES=0`), idle and with {c['busy']} busy processes "
            f"({rounds} round{'s, medians' if rounds > 1 else ''}):", "",
            "| command | cores | idle | loaded | slowdown |", "|---|---|---|---|---|"]
        for name, r in c["results"].items():
            command, cores = name.rsplit(", cores ", 1)
            lines.append(f"| `{command}` | {cores} | {r['idle_s']:.0f} s | {r['loaded_s']:.0f} s | {r['slowdown']:.2f}x |")
        if c.get("note"):
            lines += ["", f"Note: {c['note']}."]
    return "\n".join(lines) + "\n"
