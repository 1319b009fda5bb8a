# Hand-written tool module (not generated from a notebook).
"""The comparisons the book chooses by, each variant trained from several seeds: what the seeds measured (mean,
standard deviation, range), when two variants are within noise of each other (their ranges overlap), and the tables
of the recorded comparisons of vocabularies (benchmarks/subwords.py) and of recipes from several seeds
(benchmarks/recipes.py --seeds), and the speedrun's records (benchmarks/speedrun.py). transformer_lib.claims renders them into the README's documents; the chapters and
the benchmarks use them too."""
from __future__ import annotations

import json
import math

__all__ = ["seed_summary", "check_distinct_seeds", "one_seed", "within_noise", "with_spread", "best_subwords",
           "subwords_within_noise", "subwords_markdown",
           "recipe_seeds_verdict", "recipe_seeds_markdown", "signed", "milestone_time", "rescored",
           "speedrun_markdown"]


def seed_summary(values) -> dict:
    """What several seeds of one variant measured: mean, sample standard deviation (0 for one seed), lowest, highest
    and how many. A NaN or an infinity is refused: its mean would be NaN while min and max look fine."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("seed_summary needs at least one value")
    bad = next((i for i, v in enumerate(values) if not math.isfinite(v)), None)
    if bad is not None:
        raise ValueError(f"seed_summary: value {bad} (counting from 0) of {values} is {values[bad]}, not a finite "
                         "number: a run that diverged or was not scored; score it again or leave the seed out")
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
    return {"mean": round(mean, 4), "sd": round(sd, 4), "min": min(values), "max": max(values), "n": len(values)}


def check_distinct_seeds(seeds, name: str = "seeds") -> None:
    """Raise ValueError naming a seed given more than once: the same seed trains the same run, so three copies of one
    would be recorded as "3 seeds" with no spread at all."""
    seen = set()
    for seed in seeds:
        if seed in seen:
            raise ValueError(f"{name} must differ: seed {seed} is given {list(seeds).count(seed)} times in "
                             f"{list(seeds)}, and a repeated seed trains the same run again; give distinct seeds, "
                             "e.g. 0 1 2")
        seen.add(seed)


def one_seed(*summaries: dict) -> bool:
    """Whether any of these seed summaries rests on a single seed: its range is one point, and no verdict on noise
    can be drawn from it."""
    return any(s.get("n", 2) < 2 for s in summaries)


def _names(names: list[str]) -> str:
    """Names that may hold commas, listed: "*a*", "*a* and *b*", "*a*, *b* and *c*"."""
    marked = [f"*{n}*" for n in names]
    return " and ".join(marked) if len(marked) < 3 else ", ".join(marked[:-1]) + " and " + marked[-1]


def within_noise(a: dict, b: dict) -> bool:
    """True when two seed summaries' ranges (lowest to highest) overlap: one seed of each could have come out either
    way, so the book does not choose by the difference of their means. True as well when either rests on one seed
    (one_seed): a single run shows no scatter, so nothing is beyond it."""
    if one_seed(a, b):
        return True
    return a["min"] <= b["max"] and b["min"] <= a["max"]


def with_spread(s: dict, fmt: str = ".2f") -> str:
    """A seed summary as a table cell: "21.43 ± 0.35 (21.02-21.79, 3 seeds)", or the value alone for one seed."""
    if s["n"] == 1:
        return f"{s['mean']:{fmt}} (1 seed)"
    return f"{s['mean']:{fmt}} ± {s['sd']:{fmt}} ({s['min']:{fmt}}-{s['max']:{fmt}}, {s['n']} seeds)"


def best_subwords(record: dict) -> dict:
    """The variant of a benchmarks/subwords.py record with the best mean validation sacreBLEU over its seeds
    (test2016 never chooses)."""
    return max(record["variants"], key=lambda v: v["val_sacrebleu"]["mean"])


def subwords_within_noise(record: dict) -> list[str]:
    """The variants, other than the best, whose seeds' validation range overlaps the best one's (every one, where the
    best or it rests on one seed: within_noise)."""
    best = best_subwords(record)
    return [v["name"] for v in record["variants"]
            if v is not best and within_noise(v["val_sacrebleu"], best["val_sacrebleu"])]


def subwords_markdown(record: dict) -> str:
    """A recorded run of benchmarks/subwords.py as Markdown: one row per vocabulary (mean ± standard deviation over
    the seeds, and their range), the best mean on validation in bold, and which others are within noise of it."""
    r, seeds = record["recipe"], record["seeds"]
    runs = f", {record['jobs']} runs at a time" if record.get("jobs", 1) > 1 else ""
    lines = [f"{record['machine']}, device {record['device']}{runs}: the `{record['budget']}` recipe as recorded then "
             f"({r['n_layers']}+{r['n_layers']} layers, d_model {r['d_model']}, {r['epochs']} epochs) with each "
             f"vocabulary, trained from {len(seeds)} seeds ({', '.join(map(str, seeds))}), beam {r['beam_size']}; "
             "`<unk>` rates and tokens per sentence on test2016. BLEU is the mean ± standard deviation over the "
             "seeds, with the lowest and highest seed in brackets.", "",
             "| vocabulary | ids (de / en) | parameters | `<unk>` de / en | tokens per English sentence | training "
             "| validation sacreBLEU | test2016 sacreBLEU |", "|---|---|---|---|---|---|---|---|"]
    best = best_subwords(record)
    for v in record["variants"]:
        val = with_spread(v["val_sacrebleu"])
        lines.append(f"| {v['name']} | {v['vocab_sizes'][0]:,} / {v['vocab_sizes'][1]:,} | {v['parameters']:,} | "
                     f"{v['unk_de']:.2%} / {v['unk_en']:.2%} | {v['tokens_per_sentence_en']:.1f} | "
                     f"{v['train_seconds']['mean'] / 60:.1f} min | {f'**{val}**' if v is best else val} | "
                     f"{with_spread(v['test_sacrebleu'])} |")
    single = [v["name"] for v in record["variants"] if one_seed(v["val_sacrebleu"])]
    close = [n for n in subwords_within_noise(record) if n not in single]
    if best["name"] in single:
        verdict = ("It rests on one seed, which cannot tell a difference from noise: no vocabulary is called within "
                   "or beyond noise of it until each is trained from several seeds.")
    elif not single:
        verdict = (f"Within noise of it (their seeds' ranges overlap): {_names(close)}; the others fall below it by "
                   "more than their seeds scatter." if close else "Every other vocabulary falls below it by more "
                   "than their seeds scatter.")
    else:
        beyond = [v["name"] for v in record["variants"] if v is not best and v["name"] not in single + close]
        verdict = " ".join(
            ([f"Within noise of it (their seeds' ranges overlap): {_names(close)}."] if close else [])
            + ([f"Below it by more than their seeds scatter: {_names(beyond)}."] if beyond else [])
            + [f"Trained from one seed, which cannot tell a difference from noise: {_names(single)}."])
    lines += ["", f"Best mean on validation: **{best['name']}**. " + verdict, ""]
    if record["device"] != "cpu":
        lines += [f"The training column is {record['device']} time with {record.get('jobs', 1)} runs sharing one "
                  "device; it says nothing of a CPU's time.", ""]
    return "\n".join(lines)


def recipe_seeds_verdict(record: dict) -> tuple[list[str], list[str]]:
    """From a record's "seeds" (benchmarks/recipes.py --seeds): the recipes within noise of the chosen one, and
    those it beat beyond noise."""
    rows = {r["name"]: r for r in record["seeds"]["recipes"]}
    chosen = rows[record["winner"]]["val_sacrebleu"]
    others = [name for name in rows if name != record["winner"]]
    return ([n for n in others if within_noise(rows[n]["val_sacrebleu"], chosen)],
            [n for n in others if not within_noise(rows[n]["val_sacrebleu"], chosen)])


def recipe_seeds_markdown(record: dict) -> str:
    """The recipes again from several seeds each (a record's "seeds"): mean ± standard deviation of the kept
    model's validation sacreBLEU, and whether the choice above stands beyond noise."""
    s = record["seeds"]
    precision = "float32 throughout" if s.get("float32") else "the fast path's precision where the device has it"
    lines = [f"The same recipes again, each trained from {len(s['seeds'])} seeds ({', '.join(map(str, s['seeds']))}) "
             f"on {s['machine']}, device {s['device']}, {precision}. Each run keeps its last epoch or its average as "
             "above. Mean ± standard deviation, the lowest and highest seed in brackets:", "",
             "| recipe | validation sacreBLEU of the kept model | kept (by seed) |", "|---|---|---|"]
    for r in s["recipes"]:
        kept = ", ".join(f"{run['seed']}: {run['kept']}" for run in r["runs"])
        lines.append(f"| {r['name']} | {with_spread(r['val_sacrebleu'])} | {kept} |")
    missing = [run["name"] for run in record["candidates"] if run["name"] not in {r["name"] for r in s["recipes"]}]
    close, beaten = recipe_seeds_verdict(record) if record["winner"] in {r["name"] for r in s["recipes"]} else ([], [])
    lines.append("")
    single = [r["name"] for r in s["recipes"] if one_seed(r["val_sacrebleu"])]
    if record["winner"] in single:
        lines.append("The chosen recipe rests on one seed here, which cannot tell a difference from noise: no recipe "
                     "is called within or beyond noise of it until each is trained from several seeds.")
        close = beaten = []
    close = [n for n in close if n not in single]
    if close:
        lines.append(f"Within noise of the chosen recipe (their seeds' ranges overlap): {_names(close)}. The higher "
                     "mean is a lead, not a proof: one seed of each could have come out either way.")
    if beaten:
        lines.append(f"Below the chosen recipe by more than the seeds scatter: {_names(beaten)}.")
    if single and record["winner"] not in single:
        lines.append(f"Trained from one seed, which cannot tell a difference from noise: {_names(single)}.")
    if missing:
        lines.append(f"Not trained from several seeds: {_names(missing)}.")
    return "\n".join(lines) + "\n"


def signed(gain: float) -> str:
    """A gain to the hundredth with its sign; one that rounds to zero is a tie, "0.00" (never "-0.00")."""
    return "0.00" if round(gain, 2) == 0 else f"{gain:+.2f}"


def milestone_time(runs: list[dict], goal: int) -> str:
    """When the seeds' greedy validation sacreBLEU first reached `goal`: their mean training time in minutes, with
    how many seeds got there when not all did; "-" when none did."""
    times = [r["milestones"][str(goal)] for r in runs if r["milestones"].get(str(goal)) is not None]
    if not times:
        return "-"
    mean = f"{sum(times) / len(times) / 60:.1f}"
    return mean if len(times) == len(runs) else f"{mean} ({len(times)}/{len(runs)})"


def rescored(entry: dict, entries: list[dict]) -> bool:
    """Whether a speedrun entry's seeds are runs of the record it builds on, scored again with another beam search:
    each seed's training curve is that seed's in the base, to the tenth of a second (a run trained again never lands
    on it). The entry may score some of the base's seeds only."""
    base = next((b for b in entries if b["name"] == entry["on"]), None)
    curves = {} if base is None else {r.get("seed"): r["curve"] for r in base["runs"]}
    return bool(entry["runs"]) and all(curves.get(r.get("seed"), ()) == r["curve"] for r in entry["runs"])


def speedrun_markdown(record: dict) -> str:
    """A benchmarks/speedrun.py record: one row per entry, each the changes on the record it builds on, the records
    in bold; validation decides, test2016 is reported."""
    entries, goals = record["entries"], record["milestones"]
    machines = sorted({e["machine"] for e in entries})
    lines = [f"{' and '.join(machines)}. Each entry is the baseline (chapter 8's first `cpu` recipe, two epochs) with "
             f"the changes of the record it builds on and its own, trained from "
             f"{' or '.join(str(n) for n in sorted({e['val_sacrebleu']['n'] for e in entries}))} seeds one after the "
             f"other by `python -m transformer_lib.train multi30k --budget cpu --set ...`; at most "
             f"{record['limit_seconds'] // 60} minutes of training. An entry is a record (in bold) when its mean "
             "validation sacreBLEU (beam 5, the model the run kept) over at least 3 seeds beats the record it builds "
             "on by the gain shown; test2016 is reported, never used to choose. The minutes to each milestone are "
             "when the greedy validation sacreBLEU, scored after every epoch off the clock, first reached it: the "
             "mean over the seeds, with (k/n) where only k of the n seeds reached it. An entry that changes only the "
             "beam search does not train: it scores the runs of the record it builds on again, and shows their "
             "minutes (its base's runs). An entry trained again is its base on another machine of the same name, "
             "which may be slower than the record's: the entries built on it were measured beside it, and their "
             "minutes compare with its minutes, not with the limit.", "",
             "| entry | builds on | changes | training | validation sacreBLEU | gain | test2016 sacreBLEU | "
             + " | ".join(f"min to {g}" for g in goals) + " |",
             "|---|---|---|---|---|---|---|" + "---|" * len(goals)]
    for e in entries:
        base = next((b for b in entries if b["name"] == e["on"]), None)
        own = {k: v for k, v in e["changes"].items() if base is None or base["changes"].get(k, object()) != v}
        changed = ", ".join(f"`{k}={json.dumps(v)}`" for k, v in own.items()) or "nothing"  # as --set reads them
        changed += " (trained again on another machine)" if e.get("again") else ""
        name = f"**{e['name']}**" if e["record"] else e["name"]
        gain = signed(e["gain"]) if "gain" in e else "-"
        minutes = f"{e['train_seconds']['mean'] / 60:.1f} min" + (" (its base's runs)" if rescored(e, entries) else "")
        lines.append(f"| {name} | {e['on'] or '-'} | {changed} | {minutes} | {with_spread(e['val_sacrebleu'])} | "
                     f"{gain} | {with_spread(e['test_sacrebleu'])} | "
                     + " | ".join(milestone_time(e["runs"], g) for g in goals) + " |")
    return "\n".join(lines) + "\n"
