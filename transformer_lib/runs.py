# Hand-written tool module (not generated from a notebook).
"""What a training run needs around chapter 8's loop: processes, resuming, locks and atomic saves.

Chapter 8's `train_translation` is the loop; this module keeps the machinery out of its way:

- **processes**: under `torch.distributed` (e.g. `torchrun`) each process trains a DistributedDataParallel replica on
  every N-th batch, sums each step's token count over all processes (`distributed_step`), and process 0 alone
  scores, logs and writes files;
- **resuming**: an epoch's batches, dropout masks and BPE-dropout cut depend only on the recipe's seed and the
  epoch's number, and the training state (weights, Adam's moments, the schedule, the random state) is saved after
  every epoch, so a stopped run continues after its last finished epoch and ends with the same weights;
- **files**: every checkpoint and training state is written atomically (`transformer_lib.files`), the run folder is
  locked against a second training, and at the end the best of the last epoch, the average of the last ones and a
  recipe's moving average (`moving_average`) becomes `model.safetensors`;
- **folders and forecasts**: a folder per corpus and recipe (`folder`), a forecast kept in it (`forecast_run`).

It imports nothing from chapter 8: `train_translation` hands it the chapter's own functions (`Tools`).
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, NamedTuple

import torch
import torch.distributed as dist
from torch import nn

from transformer_lib.checks import translation as checks
from transformer_lib.checks.core import as_device
from transformer_lib.checks.training import check_training_batch
from transformer_lib.checkpoint import check_run_length, load_checkpoint
from transformer_lib.data import bucket_batches, encode_pairs
from transformer_lib.decoding import translate_tokens
from transformer_lib.files import locked_folder, read_training_state, restore_training_state, save_training_state
from transformer_lib.model import make_model
from transformer_lib.runtime import all_reduce_sum, default_device, seed_everything
from transformer_lib.training import LabelSmoothing, evaluate, loss_sum, make_optimizer, optimizer_step

__all__ = ["WATCHED", "Tools", "Run", "start", "folder", "processes", "distributed", "replica", "distributed_step",
           "build", "validation_batches", "epoch_batches", "forecast", "forecast_line", "forecast_run", "resume",
           "save_epoch", "finish", "close"]


# A caption of the book's own, translated greedily after every epoch: the log shows the model learning to translate.
WATCHED = "Zwei junge Männer spielen auf einer Wiese Fußball."


class Tools(NamedTuple):
    """The chapter's own functions a run calls: chapter 8 passes save_checkpoint, average_checkpoints,
    evaluate_bleu, prepare_data and wsd_rate."""
    save: Callable  # save_checkpoint(path, model, src_vocab, tgt_vocab, tokenizers=..., **info)
    average: Callable  # average_checkpoints(paths, device) -> (model, src_vocab, tgt_vocab, info)
    score: Callable  # evaluate_bleu(model, pairs, src_tok, src_vocab, tgt_vocab, beam_size, ...) -> BleuScore
    prepare: Callable | None = None  # prepare_data(recipe) -> TranslationData, for a run not given its data
    rate: Callable | None = None  # wsd_rate(step, total, d_model, factor, warmup, cooldown), for a recipe's cooldown


# ---- a run around chapter 8's loop


class Run:
    """What a training run holds from its start to its end, around chapter 8's loop (made by `start`): the data, the
    model, loss, optimizer and schedule the recipe builds, this process's place among the processes, the history,
    and what an epoch needs (`epochs`, `autocast`, `batches`, `end_epoch`) and the run's end (`finish`)."""

    def __init__(self, recipe, out_dir: Path, data, device, speedup, resume_run: bool, rank: int, world: int, log,
                 tools: Tools):
        self.recipe, self.out_dir, self.device, self.rank, self.world = recipe, out_dir, device, rank, world
        self.log, self.tools = log, tools
        self.data = data if data is not None else tools.prepare(recipe)
        self.model, self.criterion, self.optimizer, self.scheduler, self.bf16 = build(
            recipe, self.data, device, speedup, world, tools.rate)
        self.ema = moving_average(recipe, self.model, self.optimizer)  # None, or updated by every optimizer step
        self.trained, self.step_fn = replica(self.model)  # several processes: a DistributedDataParallel replica each
        self.val_batches = validation_batches(recipe, self.data, device)
        self.done, self.history, self.seconds = 0, [], 0.0
        if resume_run:  # after the last finished epoch, if the folder holds a training state
            self.done, self.history, self.seconds = resume(out_dir, recipe, self.data, self.model, self.optimizer,
                                                           self.scheduler, log, self.ema)
        self._started = None

    def epochs(self):
        """The epochs left to train, each timed from here to its end_epoch."""
        for epoch in range(self.done + 1, self.recipe.epochs + 1):
            self._started = time.perf_counter()
            yield epoch

    def autocast(self):
        """bfloat16 autocast where the recipe and hardware train in it. No weight cache: one cache for the epoch
        would reuse the first step's bfloat16 weights in every step."""
        return torch.autocast(self.device.type, torch.bfloat16, enabled=self.bf16, cache_enabled=False)

    def batches(self, epoch: int) -> list:
        """This process's batches of the epoch (epoch_batches)."""
        return epoch_batches(self.recipe, self.data, epoch, self.rank, self.world, self.device)

    def end_epoch(self, epoch: int, train_loss: float, val_loss: float) -> None:
        """The epoch's time; then, on process 0 alone, its scores, log line and files (save_epoch)."""
        self.seconds += time.perf_counter() - self._started
        if self.rank == 0:
            save_epoch(self.out_dir, self.recipe, self.data, self.model, self.optimizer, self.scheduler, self.history,
                       self.log, self.tools, epoch, self.seconds, train_loss, val_loss, self.ema)

    def finish(self) -> tuple[nn.Module, dict, Path]:
        """The run's end (close): (the kept model, the scores, its path)."""
        return close(self.recipe, self.out_dir, self.data, self.model, self.history, self.rank, self.device, self.log,
                     self.tools)


@contextmanager
def start(recipe, out_dir, data, device, speedup, resume_run: bool, log, tools: Tools, forecast: bool = False):
    """A Run of `recipe` in the folder `out_dir`, held while the block runs: process 0 locks the folder against a
    second training (transformer_lib.files.locked_folder); under torch.distributed only process 0 logs. `device`
    None: default_device(). `forecast`: in one process, first log how long the run will take here (forecast_run)."""
    device = as_device("device", device) if device is not None else default_device()
    rank, world, log = processes(log)  # one process, or one of several under torch.distributed
    with locked_folder(out_dir, lock=rank == 0) as folder:  # a second training on the folder is refused
        data = data if data is not None else tools.prepare(recipe)
        if forecast and world == 1:
            log(forecast_line(forecast_run(folder, recipe, data, device, speedup), recipe.epochs))
        yield Run(recipe, folder, data, device, speedup, resume_run, rank, world, log, tools)


def folder(recipe, data, name: str = "") -> Path:
    """runs/[name-]CORPUS-DIGEST, DIGEST 8 hex digits of the sha256 of the recipe's training fields: another number of
    epochs or beam search resumes the same folder (check_resumable allows it), any other change trains afresh."""
    checks.check_folder(recipe, data, name)
    corpus = "multi30k" if data.source.startswith("Multi30k") else "offline"
    fields = {k: v for k, v in recipe.to_dict().items() if k not in ("epochs", *checks.DECODING_FIELDS)}
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:8]
    return Path("runs") / f"{name + '-' if name else ''}{corpus}-{digest}"


# ---- processes


def distributed() -> bool:
    """Whether this process is one of a torch.distributed run."""
    return dist.is_available() and dist.is_initialized()


def processes(log) -> tuple[int, int, Callable]:
    """(rank, world, log) of this process: under torch.distributed its rank among `world` processes and a log that
    only process 0 writes to; else (0, 1, log)."""
    if not distributed():
        return 0, 1, log
    rank = dist.get_rank()
    return rank, dist.get_world_size(), log if rank == 0 else (lambda *_: None)


def distributed_step(model, group: list, criterion, optimizer, clip_norm: float | None = 1.0) -> tuple[float, int]:
    """Chapter 5's optimizer_step for one of several processes: each micro-batch's loss is divided by the step's
    token count summed over all processes, so the step is exact across them too. DistributedDataParallel averages
    the processes' gradients, so each one's loss is scaled by their number. Returns (mean loss per token over all
    processes, tokens in the step over all processes)."""
    for batch in group:
        check_training_batch(batch)
    device, world = group[0].src.device, dist.get_world_size()
    n_tokens = int(all_reduce_sum(float(sum(b.n_tokens for b in group)), device))
    if n_tokens == 0:
        raise ValueError("a step's batches hold no target tokens (all padding)")
    step_loss = 0.0
    for batch in group:
        loss = loss_sum(model, batch, criterion) * world / n_tokens  # this micro-batch's share of the step's mean
        loss.backward()
        step_loss += loss.item() / world
    if clip_norm is not None:
        nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return all_reduce_sum(step_loss, device), n_tokens


def replica(model) -> tuple[nn.Module, Callable]:
    """(the module to train, its step function): under torch.distributed a DistributedDataParallel replica and
    distributed_step; else the model itself and chapter 5's optimizer_step."""
    if distributed():
        return nn.parallel.DistributedDataParallel(model), distributed_step
    return model, optimizer_step


# ---- what a recipe builds, and the batches of an epoch


def build(recipe, data, device, speedup=None, world: int = 1, cooled_rate: Callable | None = None):
    """The model (seeded by the recipe), loss, optimizer and schedule a recipe asks for, and whether to train under
    bfloat16 autocast (`speedup` decides, for a fast recipe). A recipe with a cooldown follows
    `cooled_rate(step, total, d_model, factor, warmup, cooldown)` (chapter 8's wsd_rate) over the run's steps."""
    checks.check_shared_vocab(recipe.shared_vocab, data.src_vocab, data.tgt_vocab)
    seed_everything(recipe.seed)
    pad = data.tgt_vocab.pad_idx
    model = make_model(len(data.src_vocab), len(data.tgt_vocab), recipe.n_layers, recipe.d_model, recipe.d_ff,
                       recipe.n_heads, recipe.dropout, norm_first=recipe.norm_first,
                       share_embeddings=recipe.shared_vocab, pad_idx=pad).to(device)
    criterion, bf16 = LabelSmoothing(len(data.tgt_vocab), pad, recipe.smoothing), False
    if recipe.fast:  # e.g. chapter 9's speed_up: fused twins (the same parameters), bfloat16 where the hardware has it
        model, criterion, bf16 = speedup(model, criterion, device)
        bf16 = bf16 and recipe.bf16  # bf16=False: float32 on any hardware
    optimizer, scheduler = make_optimizer(model, recipe.d_model, recipe.factor, recipe.warmup, recipe.muon)
    if recipe.cooldown:  # the same optimizer, and a rate that knows where the run ends
        total = recipe.epochs * (len(bucket_batches(data.train, recipe.max_tokens, pad)) // (world * recipe.accum_steps))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: cooled_rate(
            i + 1, total, recipe.d_model, recipe.factor, recipe.warmup, recipe.cooldown))
    return model, criterion, optimizer, scheduler, bf16


def moving_average(recipe, model, optimizer):
    """None, or for a recipe with `ema`: PyTorch's AveragedModel of `model`, an exponential moving average of its
    weights (average = ema * average + (1 - ema) * weights) that every step of `optimizer` updates."""
    if recipe.ema is None:
        return None
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    average = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(recipe.ema), use_buffers=True)
    optimizer.register_step_post_hook(lambda *_: average.update_parameters(model))
    return average


def ema_path(out_dir: Path, epoch: int) -> Path:
    """Where a run keeps its moving average after `epoch`."""
    return Path(out_dir) / f"ema_{epoch:03d}.safetensors"


def validation_batches(recipe, data, device) -> list:
    """The validation pairs as batches on `device`, in a fixed order."""
    examples = encode_pairs(data.val, data.src_tok, data.tgt_tok, data.src_vocab, data.tgt_vocab)
    return [b.to(device) for b in bucket_batches(examples, recipe.max_tokens, data.tgt_vocab.pad_idx, shuffle=False)]


def epoch_batches(recipe, data, epoch: int, rank: int, world: int, device) -> list:
    """This process's share of the epoch's buckets (shuffled, or shortest first in the first `short_first` epochs),
    the same number for every process. The batches, the dropout masks and a BPE-dropout cut depend only on the
    recipe's seed and the epoch: what lets a resumed run repeat exactly what the interrupted one would have done."""
    torch.manual_seed(recipe.seed * 100_003 + epoch * 1_009 + rank)  # dropout: per epoch and process
    examples = data.train if not recipe.bpe_dropout else encode_pairs(  # BPE-dropout: this epoch's own cut
        data.train_text, data.src_tok, data.tgt_tok, data.src_vocab, data.tgt_vocab, recipe.bpe_dropout, recipe.seed + epoch)
    batches = bucket_batches(examples, recipe.max_tokens, data.tgt_vocab.pad_idx, seed=recipe.seed + epoch,
                             shuffle=epoch > recipe.short_first)  # the first short_first epochs: shortest first
    per_step = world * recipe.accum_steps  # every process takes the same number of steps
    checks.check_epoch_batches(len(batches), recipe.accum_steps, world)  # at least one step
    return [b.to(device) for b in batches[: len(batches) // per_step * per_step][rank::world]]


def forecast(recipe, data, device, speedup=None, steps: int = 8) -> dict:
    """How long this machine will take to train `recipe`, measured before the run starts.

    A throwaway copy of the recipe's model (its fast path and bfloat16 too, where the recipe asks) takes two
    untimed steps, then `steps` timed ones, each on another batch of the first epoch, picked across it. Their padded
    tokens a second give an epoch's training; one pass of the validation loss is timed too, as the run's own clock
    counts it (greedy BLEU is off that clock). The run itself is untouched: it seeds itself. Returns
    {"tokens_per_second" (an epoch's padded tokens over its seconds), "epoch_tokens", "epoch_seconds" (training and
    validation loss), "minutes" (all epochs), "steps"}: the pace a finished run's epoch_tokens * epochs / seconds
    can be held against."""
    import time

    def clock() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    checks.check_forecast_steps(steps)
    checks.check_speedup(recipe, speedup)
    model, criterion, optimizer, _, bf16 = build(recipe, data, device, speedup, cooled_rate=lambda *_: 1.0)  # any rate
    moving_average(recipe, model, optimizer)  # a recipe's moving average costs its steps time too
    batches = epoch_batches(recipe, data, 1, 0, 1, device)
    size = [b.src.numel() + b.tgt_in.numel() for b in batches]  # padded tokens, both sides
    picked = [batches[i * len(batches) // (steps + 2)] for i in range(steps + 2)]
    seconds = tokens = 0.0
    model.train()
    with torch.autocast(device.type, torch.bfloat16, enabled=bf16, cache_enabled=False):
        for i, batch in enumerate(picked):
            start = clock()
            optimizer_step(model, [batch], criterion, optimizer, recipe.clip_norm)
            if i >= 2:  # the first two warm up: allocations, kernels chosen once
                seconds += clock() - start
                tokens += batch.src.numel() + batch.tgt_in.numel()
    start = clock()
    evaluate(model, validation_batches(recipe, data, device), criterion)
    epoch_seconds = sum(size) / (tokens / seconds) + clock() - start
    del model, optimizer
    return {"tokens_per_second": sum(size) / epoch_seconds, "epoch_tokens": sum(size),
            "epoch_seconds": epoch_seconds, "minutes": epoch_seconds * recipe.epochs / 60, "steps": steps}


FORECAST_KEYS = ("tokens_per_second", "epoch_tokens", "epoch_seconds", "minutes", "steps")


def forecast_line(ahead: dict, epochs: int) -> str:
    """A forecast (forecast or forecast_run) in one line, as the train command and chapters 8 and 9 print it."""
    def span(seconds: float) -> str:  # seconds under a minute and a half, else minutes
        return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} minutes"

    when = "when this run started" if ahead.get("kept") else "on this machine"
    return (f"forecast {when}: {ahead['tokens_per_second']:,.0f} padded tokens a second on the recipe's model "
            f"({ahead['steps']} steps and the validation loss timed), so about {span(ahead['epoch_seconds'])} an "
            f"epoch and {span(60 * ahead['minutes'])} for {epochs} epoch{'s' * (epochs != 1)} of training (BLEU "
            "scoring aside)")


def forecast_run(out_dir, recipe, data, device, speedup=None, steps: int = 8) -> dict:
    """forecast() for the run in `out_dir`, the one measured before that run trained: a folder without a training
    state gets one measured now, kept in out_dir/forecast.json; a folder holding a run of the same recipe gives back
    the one kept there, so the run's minutes meet their own forecast. A run from before such files (or of another
    recipe) is measured now. Adds "kept" (read from the folder) and "before_run" (kept, or measured before a fresh
    run: False only for a run older than its forecast). A damaged forecast.json is refused, naming it."""
    from transformer_lib.files import write_atomically

    path = Path(out_dir) / "forecast.json"
    if path.exists():
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
            numbers = {k: float(kept["forecast"][k]) for k in FORECAST_KEYS}
            wrong = [k for k, v in numbers.items() if not (math.isfinite(v) and v > 0)]
            if wrong:  # a number no measurement gives: NaN, infinite, zero or negative
                raise ValueError(f"{wrong[0]} is {numbers[wrong[0]]}, not a positive number")
            same = type(recipe).from_dict(kept["recipe"]).to_dict() == recipe.to_dict()  # fields added since: defaults
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
            raise ValueError(f"{path}: not a forecast this package wrote ({type(err).__name__}: {err}); delete it "
                             "and the run measures again") from None
        if same:
            return {**numbers, "epoch_tokens": int(numbers["epoch_tokens"]), "steps": int(numbers["steps"]),
                    "kept": True, "before_run": True}
    ahead = forecast(recipe, data, device, speedup, steps)
    fresh = not (Path(out_dir) / "state.safetensors").exists()
    if fresh:  # before a fresh run: keep it for the run's end
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        record = {"recipe": recipe.to_dict(), "device": str(device), "forecast": ahead}
        write_atomically(path, lambda tmp: tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8"))
    return {**ahead, "kept": False, "before_run": fresh}


# ---- resuming, and the files of each epoch


def resume(out_dir: Path, recipe, data, model, optimizer, scheduler, log, average=None) -> tuple[int, list, float]:
    """Restore the state written after the last finished epoch, if the folder has one, and the moving average
    (`average`, moving_average's) kept after that epoch; returns (epoch, history, seconds), (0, [], 0.0) for a fresh
    run. The state must come from the same recipe (the number of epochs and the beam search may differ) and data
    with the same vocabularies; all is checked before any step."""
    path = Path(out_dir) / "state.safetensors"
    if not path.exists():
        return 0, [], 0.0
    tensors, info = read_training_state(path)  # refuses a file that is damaged
    checks.check_training_state(path, info)  # a training state, not a checkpoint or another file
    checks.check_resumable(path, type(recipe).from_dict(info["recipe"]).to_dict(), recipe.to_dict())
    checks.check_resume_data(path, info, tensors, model, data.src_vocab, data.tgt_vocab)  # same vocabularies
    check_run_length(path.parent, info["epoch"], recipe.epochs)  # fewer epochs would rewrite its record untruly
    if average is not None:  # checked before anything is restored
        kept = checks.check_kept_average(ema_path(out_dir, info["epoch"]), load_checkpoint, average.module)
    restore_training_state(tensors, info, model, optimizer, scheduler)
    if average is not None:
        average.module.load_state_dict(kept.state_dict())
        average.n_averaged.fill_(scheduler.last_epoch)  # the steps it has seen: more than 0, so the next one averages
    log(f"resuming {out_dir} after epoch {info['epoch']} ({info['seconds']:.0f}s of training so far)")
    return info["epoch"], info["history"], info["seconds"]


def save_epoch(out_dir: Path, recipe, data, model, optimizer, scheduler, history: list, log, tools: Tools,
               epoch: int, seconds: float, train_loss: float, val_loss: float, average=None) -> None:
    """Score (greedy BLEU, every bleu_every epochs), log with the greedy translation of WATCHED, and write the
    epoch's checkpoint, the moving average (if `average`) and the training state; remove the checkpoints that
    averaging and resuming will no longer need."""
    entry = {"epoch": epoch, "step": scheduler.last_epoch, "seconds": round(seconds, 1),
             "train_loss": round(train_loss, 4), "val_loss": round(val_loss, 4)}
    if epoch % recipe.bleu_every == 0 or epoch == recipe.epochs:
        score = tools.score(model, data.val, data.src_tok, data.src_vocab, data.tgt_vocab, 1,
                            lowercase=recipe.lower, tgt_tok=data.tgt_tok)
        entry["val_bleu"], entry["val_sacrebleu"] = round(score.tokenized, 2), round(score.sacrebleu, 2)
    history.append(entry)
    watched = translate_tokens(model, [WATCHED], data.src_tok, data.src_vocab, data.tgt_vocab, beam_size=1)[0]
    log(", ".join(f"{k} {v}" for k, v in entry.items()) + f"\n    {WATCHED} -> {data.tgt_tok.detokenize(watched)}")
    tools.save(out_dir / f"epoch_{epoch:03d}.safetensors", model, data.src_vocab, data.tgt_vocab,
               tokenizers=(data.src_tok, data.tgt_tok), lower=recipe.lower, **entry)
    if average is not None:  # before the state: a state always finds the average of its epoch
        tools.save(ema_path(out_dir, epoch), average.module, data.src_vocab, data.tgt_vocab,
                   tokenizers=(data.src_tok, data.tgt_tok), lower=recipe.lower, **entry)
    save_training_state(out_dir / "state.safetensors", model, optimizer, scheduler, recipe=recipe.to_dict(),
                        epoch=epoch, history=history, seconds=entry["seconds"], src_vocab=data.src_vocab.itos,
                        tgt_vocab=data.tgt_vocab.itos)
    (out_dir / f"epoch_{epoch - recipe.average_last:03d}.safetensors").unlink(missing_ok=True)
    ema_path(out_dir, epoch - 1).unlink(missing_ok=True)  # the state now reads this epoch's


# ---- the end of a run


def same_recipe(saved, recipe) -> bool:
    """Whether `saved` (a recipe's to_dict, perhaps written before fields were added: they take their defaults) is
    `recipe`; anything that is no recipe's dict is not."""
    try:
        return type(recipe).from_dict(saved).to_dict() == recipe.to_dict()
    except (ValueError, TypeError, KeyError):
        return False


def finish(recipe, out_dir: Path, data, history: list, device, log, tools: Tools) -> tuple[nn.Module, dict, Path]:
    """Put the last epoch against the average of the last `average_last` and a recipe's moving average, each scored
    with beam search on the validation set, and keep the best as model.safetensors; returns (model, scores, path).
    A final model already chosen by this recipe is returned as it is; resumed with another beam search, the run
    chooses again."""
    final = out_dir / "model.safetensors"
    if final.exists():
        model, _, _, info = load_checkpoint(final, device)
        if info.get("history") == history and same_recipe(info.get("recipe"), recipe):  # chosen by this recipe already
            return model, info["scores"], final
    last = history[-1]["epoch"]
    paths = [out_dir / f"epoch_{e:03d}.safetensors" for e in range(max(1, last - recipe.average_last + 1), last + 1)]
    paths = [p for p in paths if p.exists()]
    candidates = {"last": load_checkpoint(paths[-1], device)[0]}
    if len(paths) > 1:  # an average of one checkpoint would be the last one, scored twice
        candidates[f"average of {len(paths)}"] = tools.average(paths, device)[0]
    if recipe.ema is not None and ema_path(out_dir, last).exists():
        candidates["moving average"] = load_checkpoint(ema_path(out_dir, last), device)[0]
    scores = {}
    for name, candidate in candidates.items():
        score = tools.score(candidate, data.val, data.src_tok, data.src_vocab, data.tgt_vocab, recipe.beam_size,
                            recipe.length_penalty, recipe.lower, data.tgt_tok)
        scores[name] = {"sacrebleu": round(score.sacrebleu, 2), "tokenized": round(score.tokenized, 2)}
        log(f"validation, beam {recipe.beam_size}, {name}: {score}")
    kept = max(scores, key=lambda name: scores[name]["tokenized"])
    scores["kept"] = kept
    model = candidates[kept]
    tools.save(final, model, data.src_vocab, data.tgt_vocab, tokenizers=(data.src_tok, data.tgt_tok),
               lower=recipe.lower, recipe=recipe.to_dict(), history=history, scores=scores, data=data.source)
    model.vocabs, model.lower = (data.src_vocab, data.tgt_vocab), recipe.lower
    model.tokenizers = data.src_tok, data.tgt_tok
    return model, scores, final


def close(recipe, out_dir: Path, data, model, history: list, rank: int, device, log,
          tools: Tools) -> tuple[nn.Module, dict, Path]:
    """The end of a run: process 0 writes the last checkpoint again if it went missing and keeps the final model
    (finish); under torch.distributed the other processes wait for it. Returns (model, scores, path)."""
    if rank != 0:  # process 0 averages, scores and writes the final model
        dist.barrier()
        return model, {}, out_dir / "model.safetensors"
    last = out_dir / f"epoch_{history[-1]['epoch']:03d}.safetensors"
    if not last.exists():  # deleted since: the training state holds the same weights
        log(f"{last} is missing; writing it again from the training state")
        tools.save(last, model, data.src_vocab, data.tgt_vocab, tokenizers=(data.src_tok, data.tgt_tok),
                   lower=recipe.lower, **history[-1])
    kept = finish(recipe, out_dir, data, history, device, log, tools)
    if distributed():
        dist.barrier()
    return kept
