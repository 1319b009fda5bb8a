# Hand-written tool module (not generated from a notebook).
"""Train from the command line.

    python -m transformer_lib.train copy [--steps N] [--seed S] [--device auto|cpu|cuda|mps]
    python -m transformer_lib.train multi30k [--budget smoke|cpu|full] [--out DIR] [--epochs N] [--seed S]
                                             [--set FIELD=VALUE ...] [--no-test] [--no-resume] [--no-forecast]
    python -m transformer_lib.train ship [CHECKPOINT] [--to FILE]

`copy` trains chapter 5's copy task: a small Transformer learns to reproduce random sequences, and the
command prints its progress and the exact-sequence accuracy on 1,000 held-out test sequences.

`ship` writes the model a `--budget full` run kept (default runs/multi30k-full/model.safetensors) as the package's
shipped model (transformer_lib/pretrained/multi30k_de_en.safetensors): float16 weights, the same metadata (recipe,
history, scores, vocabulary and merges). It refuses a checkpoint that another recipe than RECIPES["full"] made.

`multi30k` trains chapter 8's German-to-English model by the recipe of a run budget (budget_recipe: `cpu` is the
speedrun's record where the CPU multiplies bfloat16 in hardware, and CPU_FLOAT32, eight epochs in float32, elsewhere),
writing a checkpoint per epoch to --out (default runs/multi30k-BUDGET); run the same command again to resume an
interrupted run. Before a fresh run it times a few steps of the recipe's model and forecasts the minutes of training
on this machine, kept in --out as forecast.json (runs.forecast_run; --no-forecast skips it). --set changes any field
of the recipe (e.g. --set warmup=200 cooldown=0.3), as dataclasses.replace would. It ends with validation and test2016
BLEU (--no-test: validation only; without Multi30k at hand, the offline corpus's test split, labelled as such), and
the path of model.safetensors, which `python -m transformer_lib.translate --checkpoint PATH` uses. Under torchrun it
trains with DistributedDataParallel, a process per device:

    torchrun --nproc_per_node=2 -m transformer_lib.train multi30k --budget full          # 2 processes (CPU: gloo)
    torchrun --nnodes=2 --node_rank=0 --master_addr=HOST --nproc_per_node=8 -m transformer_lib.train multi30k ...
"""
from __future__ import annotations

import argparse
import sys

import torch
from tqdm import tqdm

from transformer_lib.runtime import default_device


def _device(name: str) -> torch.device:
    if name == "auto":
        return default_device()
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda, but no CUDA GPU is available (try --device auto)")
    if name == "mps" and not torch.backends.mps.is_available():
        raise SystemExit("error: --device mps, but Apple MPS is not available (try --device auto)")
    return torch.device(name)


def copy_command(args: argparse.Namespace) -> int:
    from transformer_lib.training import train_copy_task

    device = _device(args.device)
    print(f"copy task on {device}, seed {args.seed}, at most {args.steps} steps "
          "(stops after two validation checks at 100%)", flush=True)

    def report(e: dict) -> None:  # tqdm.write keeps the progress bar below the printed lines
        tqdm.write(f"step {e['step']:5d}: val loss {e['val_loss']:.4f}, val accuracy {e['val_accuracy']:6.1%}, "
              f"{e['seconds']:5.1f}s")

    result = train_copy_task(max_steps=args.steps, seed=args.seed, device=device, eval_every=args.eval_every,
                             progress=not args.quiet, on_evaluation=report)
    print(f"test accuracy (1,000 held-out sequences): {result.test_accuracy:.1%} "
          f"after {len(result.history)} steps in {result.seconds:.1f}s")
    return 0


def multi30k_command(args: argparse.Namespace) -> int:
    import os

    import torch.distributed as dist

    world, rank = _distributed_environment(os.environ)
    if world > 1:  # started by torchrun: one process per device, DistributedDataParallel
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if args.device in ("auto", "cuda") and torch.cuda.is_available():
            torch.cuda.set_device(local)
            args.device = f"cuda:{local}"
        elif args.device == "auto":
            args.device = "cpu"
        if not args.device.startswith("cuda"):  # share the cores instead of each process taking all of them
            per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // per_node))
        dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
    try:
        return _multi30k(args, rank, world)
    finally:
        if world > 1:
            dist.destroy_process_group()


def _distributed_environment(env) -> tuple[int, int]:
    """(world size, rank) from torchrun's variables; SystemExit saying what is wrong with a half-set environment."""
    names = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT")
    for name in names:
        if name in env and not (env[name].isdigit()):
            raise SystemExit(f"error: ${name}={env[name]!r} is not a non-negative integer; start distributed "
                             "training with torchrun, which sets it, or unset it")
    world, rank = int(env.get("WORLD_SIZE", "1")), int(env.get("RANK", "0"))
    if world < 1 or rank >= world:
        raise SystemExit(f"error: $RANK={rank} with $WORLD_SIZE={world}: RANK must lie in [0, WORLD_SIZE)")
    if world > 1:
        unset = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not env.get(name)]
        if unset:
            raise SystemExit(f"error: $WORLD_SIZE={world} asks for {world} processes, but ${' and $'.join(unset)} "
                             f"{'is' if len(unset) == 1 else 'are'} not set; start them with torchrun "
                             "(e.g. torchrun --nproc_per_node=2 -m transformer_lib.train multi30k), or unset "
                             "WORLD_SIZE to train in one process")
    return world, rank


def _multi30k(args: argparse.Namespace, rank: int, world: int) -> int:
    from dataclasses import replace
    from pathlib import Path

    from transformer_lib.runtime import run_budget
    from transformer_lib.fast import has_bf16, speed_up  # chapter 9's fast path, for a recipe with fast=True
    from transformer_lib.translation import budget_recipe, evaluate_bleu, prepare_data, train_translation

    say = print if rank == 0 else (lambda *a, **k: None)
    budget = args.budget or run_budget()
    device = torch.device(args.device) if args.device.startswith("cuda:") else _device(args.device)
    bf16 = has_bf16(device)
    recipe = budget_recipe(budget, bf16)  # `cpu` without bfloat16 in hardware: CPU_FLOAT32
    if args.epochs is not None:
        recipe = replace(recipe, epochs=args.epochs)
    for option, changes in (("set", lambda: recipe_changes(args.set or [])),
                            ("seed", lambda: {} if args.seed is None else {"seed": args.seed})):
        try:
            recipe = replace(recipe, **changes())
        except (TypeError, ValueError) as err:  # a field a Recipe does not have, or a value its check refuses
            raise SystemExit(f"error: --{option}: {err}") from None
    if args.subwords is not None:  # 0: whole words; N: chapter 6's BPE with N merges, one for both languages
        recipe = replace(recipe, subwords=args.subwords or None, shared_vocab=bool(args.subwords) or recipe.shared_vocab)
    out = Path(args.out or f"runs/multi30k-{budget}")
    data = prepare_data(recipe)
    processes = f" x {world} processes" if world > 1 else ""
    say(f"budget {budget} on {device}{processes}: {data.source}, {len(data.train):,} training pairs, "
        f"vocabularies {len(data.src_vocab):,} / {len(data.tgt_vocab):,} tokens; checkpoints in {out}", flush=True)
    if budget == "cpu" and not bf16:
        say("no bfloat16 in this device's hardware: the `cpu` budget trains CPU_FLOAT32, the speedrun's record in "
            "float32 with an eighth epoch", flush=True)
    say(f"recipe: {recipe}", flush=True)
    fresh = args.no_resume or not (out / "state.safetensors").exists()
    try:
        run = train_translation(recipe, out, data=data, resume=not args.no_resume, device=device,
                                progress=not args.quiet, log=lambda line: tqdm.write(line), speedup=speed_up,
                                forecast=fresh and not args.no_forecast)  # before a fresh run: the minutes ahead
    except KeyboardInterrupt:
        say(f"\ninterrupted: the finished epochs are saved in {out}; run the same command to resume")
        return 130
    except ValueError as err:  # a damaged training state, another recipe's state in --out, --out a file
        raise SystemExit(f"error: {err}") from None
    except OSError as err:  # --out below a file, a read-only folder, a full disk
        raise SystemExit(f"error: cannot write the run to {out}: {err.strerror or err} "
                         f"({err.filename or out})") from None
    if rank != 0:
        return 0
    if args.no_test:
        print(f"kept: {run.scores['kept']}; model: {run.path}")
        return 0
    test = evaluate_bleu(run.model, data.test, data.src_tok, data.src_vocab, data.tgt_vocab, recipe.beam_size,
                         recipe.length_penalty, recipe.lower, data.tgt_tok)
    offline = not data.source.startswith("Multi30k")
    split = "offline corpus test split, NOT Multi30k test2016" if offline else "test2016"
    print(f"kept: {run.scores['kept']}; {split} ({len(data.test):,} pairs), beam {recipe.beam_size}: {test}")
    if offline:  # a score near 100 there is no translator's: the split is the training grammar's, partly its pairs
        print("  (the offline corpus is a grammar of about a hundred words, the same one the model trained on, and "
              "some test pairs are training pairs: a high score says the loop works, not that the model translates)")
    print(f"model: {run.path}")
    return 0


def recipe_changes(settings: list[str]) -> dict:
    """{field: value} from FIELD=VALUE strings, each value read as JSON (true, null, 0.5) or else as a string;
    ValueError naming the setting that is not FIELD=VALUE or names no field of a Recipe."""
    import json
    from dataclasses import fields

    from transformer_lib.translation import Recipe

    names, changes = {f.name for f in fields(Recipe)}, {}
    for setting in settings:
        name, sep, text = setting.partition("=")
        if not sep or not name:
            raise ValueError(f"{setting!r} is not FIELD=VALUE (e.g. warmup=200)")
        if name not in names:
            raise ValueError(f"{setting!r}: a Recipe has no field {name!r}; its fields are {', '.join(sorted(names))}")
        try:
            changes[name] = json.loads(text)
        except json.JSONDecodeError:
            changes[name] = text
    return changes


def ship_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from transformer_lib.translation import RECIPES, Recipe, load_checkpoint, pretrained_path, save_checkpoint

    source, target = Path(args.checkpoint), Path(args.to) if args.to else pretrained_path()
    try:
        model, src_vocab, tgt_vocab, info = load_checkpoint(source)
    except (OSError, ValueError) as err:
        raise SystemExit(f"error: {err}") from None
    made = info.get("recipe")
    if not isinstance(made, dict) or not {"history", "scores"} <= set(info):
        raise SystemExit(f"error: {source} is an epoch's checkpoint, not the model a finished run kept (it has no "
                         "recipe, history and scores); give the run's model.safetensors")
    differ = sorted(k for k, v in Recipe.from_dict(made).to_dict().items() if RECIPES["full"].to_dict()[k] != v)
    if differ:
        raise SystemExit(f"error: {source} was trained by another recipe than RECIPES['full'] (they differ in "
                         f"{', '.join(differ)}); the shipped model is the full recipe's")
    save_checkpoint(target, model, src_vocab, tgt_vocab, dtype=torch.float16, tokenizers=model.tokenizers, **info)
    print(f"shipped {source} as {target} (float16, {target.stat().st_size / 1e6:.1f} MB)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_lib.train", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="task", required=True)
    copy = sub.add_parser("copy", help="train the copy task of chapter 5")
    copy.add_argument("--steps", type=int, default=2000, help="most optimizer steps (default 2000)")
    copy.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    copy.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"], default="auto",
                      help="where to train (default auto: CUDA, else MPS, else CPU)")
    copy.add_argument("--eval-every", type=int, default=100, help="steps between validation checks (default 100)")
    copy.add_argument("--quiet", action="store_true", help="no progress bar")
    m30k = sub.add_parser("multi30k", help="train the German-English model of chapter 8 on Multi30k")
    m30k.add_argument("--budget", choices=["smoke", "cpu", "full"], default=None,
                      help="which recipe (default: BOOK_BUDGET, else book.yml); `cpu` without "
                           "bfloat16 in hardware trains CPU_FLOAT32, the record in float32 with an eighth epoch")
    m30k.add_argument("--out", default=None, help="checkpoint folder (default runs/multi30k-BUDGET)")
    m30k.add_argument("--epochs", type=int, default=None, help="override the recipe's number of epochs")
    m30k.add_argument("--seed", type=int, default=None, help="the recipe's random seed (default: the recipe's, 0)")
    m30k.add_argument("--set", nargs="+", metavar="FIELD=VALUE",
                      help="change fields of the recipe, e.g. --set warmup=200 cooldown=0.3 (values read as JSON)")
    m30k.add_argument("--no-test", action="store_true", help="end without scoring test2016")
    m30k.add_argument("--no-forecast", action="store_true", help="start training at once, without first timing a few "
                      "steps of the recipe's model to forecast the run's minutes on this machine")
    m30k.add_argument("--subwords", type=int, default=None, metavar="N",
                      help="train on BPE with N merges, one vocabulary shared by both languages and tied embeddings "
                           "(0: whole words; default: the recipe's)")
    m30k.add_argument("--resume", action="store_true", default=True,
                      help="continue the run in --out after its last finished epoch (the default)")
    m30k.add_argument("--no-resume", action="store_true", help="start over even if --out holds a run")
    m30k.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"], default="auto",
                      help="where to train (default auto: CUDA, else MPS, else CPU)")
    m30k.add_argument("--quiet", action="store_true", help="no progress bar")
    ship = sub.add_parser("ship", help="write a full run's model as the package's shipped model (float16)")
    ship.add_argument("checkpoint", nargs="?", default="runs/multi30k-full/model.safetensors",
                      help="the model.safetensors of a --budget full run (default runs/multi30k-full/model.safetensors)")
    ship.add_argument("--to", default=None, help="where to write it (default: the package's shipped model)")
    args = parser.parse_args(argv)
    from transformer_lib.runtime import share_cores_in_command

    share_cores_in_command()  # torch on the cores other processes leave free ($BOOK_SHARE_CORES=0: not)
    if args.task == "ship":
        return ship_command(args)
    if args.task == "multi30k":
        if args.epochs is not None and args.epochs < 1:
            parser.error("--epochs must be positive")
        if args.subwords is not None and args.subwords < 0:
            parser.error("--subwords must be 0 (whole words) or a number of merges")
        return multi30k_command(args)
    if args.steps < 1 or args.eval_every < 1:
        parser.error("--steps and --eval-every must be positive")
    return copy_command(args)


if __name__ == "__main__":
    sys.exit(main())
