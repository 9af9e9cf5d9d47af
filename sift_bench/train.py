"""The training loop shared by every task: plain PyTorch, sifted or not.

The loop never looks inside a batch: the task supplies the per-sample loss and the metric,
and `SiftingDataloader` stands in for the task's loader when a sifter is configured.
"""

import logging
import math
import sys
import time
from typing import Callable

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from sift_bench import distributed
from sift_bench.loop_parts import autocast_factory, build_optimizer, scoring_loss
from sift_bench.recorder import EvalPoint, RunRecorder, TrainResult
from sift_bench.schedule import SampleSchedule
from sift_bench.sifting import SiftingDataloader
from sift_bench.tasks import TaskParts

log = logging.getLogger(__name__)


# Wall seconds between two progress lines in the log where no progress bar is drawn (ProgressLog).
PROGRESS_LOG_INTERVAL_S = 30.0


class ProgressLog:
    """The progress bar's figures as an INFO line of the `sift_bench.train` log every PROGRESS_LOG_INTERVAL_S of wall
    time, where no bar is drawn: trainer.progress=false (the table sweeps), or stderr not a terminal (a sweep's log,
    CI, nohup). It takes the bar's place in the loop (update, n, disable, close); a step costs it one clock read.
    Rates count samples seen over wall time, evaluations included, so the time left is that of the rest of the run."""

    disable = True  # the loop's postfix (loss, % accepted) is the bar's alone

    def __init__(self, total: int, interval_s: float | None = None):
        self.total, self.n = total, 0
        self.interval_s = PROGRESS_LOG_INTERVAL_S if interval_s is None else interval_s
        self.start = time.perf_counter()
        self.next_line = self.start + self.interval_s

    def update(self, samples: int) -> None:
        self.n += samples
        now = time.perf_counter()
        if now >= self.next_line:
            self.next_line = now + self.interval_s
            self.log_line(now - self.start)

    def log_line(self, elapsed_s: float) -> None:
        rate = self.n / max(elapsed_s, 1e-9)
        left = (self.total - self.n) / rate if rate > 0 else float("nan")
        log.info("progress %d of %d samples (%.1f %%), %.0f samples/s, %s elapsed, about %s left", self.n, self.total,
                 100.0 * self.n / max(self.total, 1), rate, _clock(elapsed_s), _clock(left))

    def close(self) -> None:
        pass


def _clock(seconds: float) -> str:
    """12:34 or 1:02:03; '?' when unknown."""
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _progress_bar(total: int, enabled: bool):
    """tqdm's bar where stderr is a terminal and trainer.progress is on; elsewhere, on the main rank, a ProgressLog."""
    # disable=None lets tqdm switch itself off when stderr is not a terminal (CI, log files).
    bar = tqdm(total=total, unit="sample", unit_scale=True, dynamic_ncols=True, disable=None if enabled else True,
               file=sys.stderr)
    if not bar.disable:
        return bar
    # Under DDP the other ranks stay quiet: rank 0's line counts the samples of all of them.
    return ProgressLog(total) if distributed.current().is_main else bar


def model_for_ranks(model: torch.nn.Module, device: torch.device, seed: int) -> torch.nn.Module:
    """The model the steps train: under DDP wrapped in DistributedDataParallel, else the model itself."""
    world = distributed.current()
    if not world.distributed:
        return model
    # The weights are rank 0's (DDP broadcasts them); dropout masks should differ between ranks.
    torch.manual_seed(seed + world.rank)
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def sifting_loader(parts: TaskParts, sift_config, autocast: Callable, epochs: int, seed: int,
                   optimizer_cfg) -> SiftingDataloader | None:
    """The task's loader wrapped in the sifter `sift_config` asks for (scoring with `scoring_loss`, under the run's
    autocast); None for the baseline."""
    if sift_config is None:
        return None
    return SiftingDataloader(sift_config, parts.train_loader, scoring_loss(parts, sift_config, autocast, optimizer_cfg),
                             parts.model, seed=seed, num_samples=parts.num_train_samples, num_epochs=epochs)


def training_step(parts: TaskParts, train_model: torch.nn.Module, batch, autocast: Callable,
                  optimizer: torch.optim.Optimizer, feedback: SiftingDataloader | None) -> torch.Tensor:
    """One optimizer step on `batch`; its per-sample losses, detached. `feedback`: the sifter that decides from the
    training losses (stale loss, InfoBatch), which weights them and is handed them back; None for the others."""
    with autocast():
        losses = parts.per_sample_loss(train_model, batch)
    optimizer.zero_grad(set_to_none=True)
    (feedback.training_loss(losses) if feedback is not None else losses.mean()).backward()
    optimizer.step()
    return losses.detach()


def train(
    parts: TaskParts,
    trainer_cfg,
    device: torch.device,
    precision: str,
    sift_config=None,
    seed: int = 0,
    target_accuracy: float | None = None,
    on_eval: Callable[[EvalPoint], None] | None = None,
) -> TrainResult:
    """Train `parts.model` for `trainer_cfg.epochs` epochs, evaluated, counted and timed by a `RunRecorder`
    (sift_bench.recorder: the evaluation schedule and the result of every loop).

    Under DDP (an initialised process group, see sift_bench.distributed) each rank trains on its shard, the
    model wrapped in DistributedDataParallel; counts are summed over the ranks and rank 0 alone evaluates (its
    accuracies are the run's; the other ranks' evaluation points hold NaN). How the ranks share the sifter's loss
    history is the policy's `sync` setting.
    """
    model = parts.model
    world = distributed.current()
    train_model = model_for_ranks(model, device, seed)
    autocast = autocast_factory(device, precision)
    optimizer = build_optimizer(model, trainer_cfg.optimizer)
    total_samples = trainer_cfg.epochs * parts.num_train_samples
    schedule = SampleSchedule(optimizer, total_samples, trainer_cfg.schedule.name,
                              trainer_cfg.schedule.warmup_fraction, trainer_cfg.schedule.final_lr_fraction)
    sifter = sifting_loader(parts, sift_config, autocast, trainer_cfg.epochs, seed, trainer_cfg.optimizer)
    loader = parts.train_loader if sifter is None else sifter
    # Stale-loss and InfoBatch sifters decide from the training losses, so the loop hands them back.
    feedback = sifter if sifter is not None and sifter.uses_training_losses else None

    record = RunRecorder(parts, trainer_cfg, device, autocast, target_accuracy, on_eval, sifter=sifter)
    progress = _progress_bar(total_samples, trainer_cfg.progress and world.is_main)
    lr_multiplier = 0.0
    model.train()
    record.start()
    for epoch in range(trainer_cfg.epochs):
        record.epoch_begin()
        for step, batch in enumerate(loader):
            record.batch_trained(batch)
            lr_multiplier = schedule.step(record.samples_seen)
            record.add_losses(training_step(parts, train_model, batch, autocast, optimizer, feedback))
            progress.update(record.samples_seen - progress.n)
            if step % 20 == 0 and not progress.disable:
                progress.set_postfix(epoch=epoch + 1, loss=f"{record.loss_sum.item() / record.epoch_trained:.3f}",
                                     accepted=f"{100.0 * record.epoch_trained / record.epoch_seen:.1f}%")
            record.after_step(lr_multiplier)
        record.epoch_end(lr_multiplier)
    progress.close()
    return record.result()
