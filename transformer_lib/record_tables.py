# Hand-written tool module (not generated from a notebook).
"""The benchmarks' recorded runs as Markdown tables: speed (benchmarks/speed.py), serving (serve.py), the candidate
changes of the fast path (candidates.py), the recipes (recipes.py) and runs under load (load.py). The chapters show the
same tables the README's documents show (transformer_lib.claims).
"""
from __future__ import annotations

from transformer_lib.comparisons import recipe_seeds_markdown

__all__ = ["speed_markdown", "serve_markdown", "candidate_verdict", "candidates_markdown", "recipe_runs",
           "recipes_markdown", "load_markdown"]


def speed_markdown(s: dict) -> str:
    """A recorded run of benchmarks/speed.py as Markdown: the training table, then greedy decoding."""
    load = f", load average {s['load']:.2f}" if s.get("load") is not None else ""
    lines = [f"{s['machine']}, {s['threads']} thread{'s' if s['threads'] != 1 else ''}{load}, device {s['device']}, "
             f"data {s['data']}: {s['repeats']} interleaved rounds of {s['batches']} steps of about "
             f"{s['tokens_per_batch']:,.0f} target tokens, 3+3 layers, d_model 256, d_ff 512, 8 heads, label "
             "smoothing 0.1 and the same Adam for every variant; medians, ± half the range of the rounds.", "",
             "| variant | tokens/s | vs nn.Transformer at the same dtype | share of the matmul peak at the model's "
             "shapes |", "|---|---|---|---|"]
    for v in s["variants"]:
        lines.append(f"| {v['name']} | {v['tokens_per_s']:,.0f} ±{v['spread']:.0%} | {v['ratio']:.2f}x | "
                     f"{v['peak_share']:.1%} of {v['peak_tflops']:.3f} TFLOP/s |")
    d = s["decoding"]
    lines += ["", f"Greedy decoding, {d['sentences']} sentences x {d['tokens']} tokens: {d['recompute_s']:.2f} s "
              f"recomputing the prefix, {d['cache_s']:.2f} s with the cache ({d['recompute_s'] / d['cache_s']:.1f}x), "
              f"{'identical' if d['identical'] else 'DIFFERENT'} output."]
    return "\n".join(lines) + "\n"


def serve_markdown(s: dict) -> str:
    """A recorded run of benchmarks/serve.py as Markdown: sentences per second and BLEU of each engine."""
    load = f", load average {s['load']:.2f}" if s.get("load") is not None else ""
    lines = [f"{s['machine']}, {s['threads']} thread{'s' if s['threads'] != 1 else ''}{load}: the first "
             f"{s['sentences']:,} test2016 sentences in batches of 64, {s['repeats']} interleaved rounds (medians); "
             f"BLEU on all {s['bleu_sentences']:,}.", "",
             "| engine | sentences/s | sacreBLEU | tokenized BLEU | same as chapter 7's |", "|---|---|---|---|---|"]
    for v in s["variants"]:
        same = f"{v['same_as_ours']:,}" if "same_as_ours" in v else "n/a"
        lines.append(f"| {v['name']} | {v['sentences_per_s']:,.1f} ±{v['spread']:.0%} | {v['sacrebleu']:.2f} | "
                     f"{v['tokenized']:.2f} | {same} |")
    lines += ["", f"Greedy decoding: {s['greedy_identical']:,} of {s['bleu_sentences']:,} translations token-identical "
              "between ours and CTranslate2 in float32."]
    speed = {v["name"]: v["sentences_per_s"] for v in s["variants"]}
    for mode in ("greedy", "beam 5"):
        ours = {n: x for n, x in speed.items() if n.startswith("ours, FastBeamSearch") and n.endswith(f"({mode})")}
        engine = speed.get(f"CTranslate2 float32 ({mode})")
        if ours and engine:
            name, best = max(ours.items(), key=lambda item: item[1])
            lines.append(f"{name.removeprefix('ours, ')}: {best / engine:.2f}x the throughput of CTranslate2 float32.")
        engine8, ours8 = speed.get(f"CTranslate2 int8 ({mode})"), speed.get(f"ours, FastBeamSearch int8 ({mode})")
        if engine8 and ours8:
            lines.append(f"FastBeamSearch int8 ({mode}): {ours8 / engine8:.2f}x the throughput of CTranslate2 int8.")
    return "\n".join(lines) + "\n"


def candidate_verdict(variant: dict, baseline: dict | None) -> str:
    """"pays", "costs" or "within noise": whether a candidate's ratio to its baseline clears the two spreads."""
    noise = variant.get("spread", 0.0) + (baseline or {}).get("spread", 0.0)
    if variant["ratio"] > 1 + noise:
        return "pays"
    if variant["ratio"] < 1 - noise:
        return "costs"
    return "within noise"


def candidates_markdown(c: dict, speed: dict | None = None) -> str:
    """A recorded run of benchmarks/candidates.py as Markdown: each candidate's ratio to the fast path of its dtype,
    and, with speed.json's record, the ratio to nn.Transformer a fast path of nothing but matrix multiplications
    would reach."""
    load = f", load average {c['load']:.2f}" if c.get("load") is not None else ""
    lines = [f"{c['machine']}, {c['threads']} thread{'s' if c['threads'] != 1 else ''}{load}: {c['repeats']} "
             f"interleaved rounds of {c['batches']} training steps (medians, ± half the range of the rounds).", "",
             "| dtype | change | s/step | vs our fast path | verdict |", "|---|---|---|---|---|"]
    baseline = {v["dtype"]: v for v in c["variants"] if v["change"] == "baseline"}
    paying = []
    for v in c["variants"]:
        spread = f" ±{v['spread']:.0%}" if "spread" in v else ""
        verdict = "" if v["change"] == "baseline" else candidate_verdict(v, baseline.get(v["dtype"]))
        if verdict == "pays":
            paying.append(f"{v['change']} ({v['dtype']})")
        lines.append(f"| {v['dtype']} | {v['change']} | {v['seconds_per_step']:.3f}{spread} | {v['ratio']:.2f}x "
                     f"| {verdict} |")
    lines += ["", "Verdict: " + (f"{', '.join(paying)} paid beyond the spread of the rounds; the rest did not."
                                  if paying else "no change paid beyond the spread of the rounds, so the fast path keeps "
                                  "its form."), ""]
    if "onednn" in c:
        m, k, n = c["onednn"]["shape"]
        lines += [f"No oneDNN (bfloat16): a {m:,} x {k} by {k} x {n} matrix multiplication takes "
                  f"{c['onednn']['slower_without']:.1f}x as long with oneDNN off.", ""]
    ratio = {v["name"]: v["ratio"] for v in (speed or {}).get("variants", [])}
    for tag, share in c["matmul_share"].items():
        now = ratio.get(f"ours, fast path ({tag})")
        line = f"In {tag}, matrix multiplications are {share:.0%} of the fast path's profiled time"
        if now is not None:
            line += (f": with everything else free, it would train at most {now / share:.2f}x as fast as "
                     f"nn.Transformer (recorded: {now:.2f}x)")
        lines.append(line + ".")
    return "\n".join(lines) + "\n"


def recipe_runs(record: dict) -> list[dict]:
    """The runs of a benchmarks/recipes.py record: the one the book shipped before (when recorded), then the
    candidates."""
    return ([record["base_run"]] if record.get("base_run") else []) + record["candidates"]


def recipes_markdown(record: dict) -> str:
    """A recorded run of benchmarks/recipes.py as Markdown: one row per run, the one chosen on validation in bold,
    test2016 for that one alone."""
    base = record["base"]
    lines = [f"{record['machine']}: the candidates trained side by side, {record['processes']} processes of "
             f"{record['threads']} thread{'s' if record['threads'] != 1 else ''}; the run before is the one that made "
             "the model the book shipped before. "
             f"Every run is the recipe before ({base['epochs']} epochs, readable path) with the fields shown changed, "
             f"and keeps its last epoch or the average of its last {base['average_last']}, whichever scores higher on "
             f"validation (beam {base['beam_size']}, length penalty {base['length_penalty']}). Test2016 is scored for "
             "the chosen run alone.", "",
             "| run | changed | training | kept | validation sacreBLEU / tokenized | test2016 sacreBLEU / tokenized |",
             "|---|---|---|---|---|---|"]
    for run in recipe_runs(record):
        changed = ", ".join(f"`{k}={v}`" for k, v in run.get("changes", {}).items()) or "nothing"
        val = f"{run['val_sacrebleu']:.2f} / {run['val_tokenized']:.2f}"
        chosen = run["name"] == record["winner"]
        test = f"{run['test_sacrebleu']:.2f} / {run['test_tokenized']:.2f}" if "test_sacrebleu" in run else "not scored here"
        lines.append(f"| {run['name']} | {changed} | {run['train_seconds'] / 60:.0f} min | {run['kept']} | "
                     f"{f'**{val}**' if chosen else val} | {test} |")
    if record.get("awaiting_seeds"):
        lead, chosen = (next(r for r in recipe_runs(record) if r["name"] == name)
                        for name in (record["awaiting_seeds"], record["winner"]))
        lines += ["", f"{lead['name']} leads on validation from this one seed ({lead['val_sacrebleu']:.2f} against "
                  f"{chosen['val_sacrebleu']:.2f}), but one seed is not a choice: the chosen run stays until the "
                  "comparison from seeds below includes it and its mean leads too."]
    if "seeds" in record:
        lines += ["", recipe_seeds_markdown(record)]
    return "\n".join(lines) + "\n"


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
