"""The training loop shared by every task: plain PyTorch, sifted or not.

The loop never looks inside a batch: the task supplies the per-sample loss and the metric,
and `SiftingDataloader` stands in for the task's loader when a sifter is configured.
"""

import contextlib
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.nn.parallel import DistributedDataParallel

from sift_bench import distributed
from sift_bench.machine import OtherCpuMeter
from sift_bench.schedule import SampleSchedule
from sift_bench.sifting import Loss, SiftingDataloader
from sift_bench.tasks import TaskParts

log = logging.getLogger(__name__)


@dataclass
class EvalPoint:
    epoch: float
    samples_seen: int
    samples_trained: int
    train_time_s: float
    train_loss: float
    val_accuracy: float  # chooses settings (and times the target)
    test_accuracy: float  # reports them
    pct_accepted: float
    lr_multiplier: float  # where the schedule stands: reaches final_lr_fraction only if training completed it


@dataclass
class TrainResult:
    val_accuracy: float
    test_accuracy: float
    train_time_s: float
    sift_time_s: float
    eval_time_s: float
    samples_seen: int
    samples_trained: int
    pct_accepted: float
    time_to_target_s: float  # first train time with validation accuracy >= the target; NaN when never reached
    work_trained: int  # compute units trained on (samples, or padded tokens for text): see TaskParts.work_of
    other_cpu_s: float  # CPU seconds other processes used meanwhile: near 0 on a quiet machine
    other_cpu_fraction: float  # other_cpu_s per second of wall time: above a few % the timing is suspect
    history: list[EvalPoint] = field(default_factory=list)
    # Under DDP (one process: 1, 0, 0.0): the ranks; the kept samples no batch of every rank took (counted in
    # samples_seen, not trained on); the time the sifter spent in collectives. Samples are sums over all ranks.
    world_size: int = 1
    samples_left_over: int = 0
    sync_time_s: float = 0.0
    steps: int = 0  # optimizer steps (batches) of this rank, the same on every rank


class TaskLoss(Loss):
    """Adapts a task's per-sample loss to the sifter's `Loss` interface, under the run's autocast."""

    def __init__(self, per_sample_loss: Callable, autocast: Callable):
        self.per_sample_loss = per_sample_loss
        self.autocast = autocast

    def loss(self, model, transformed_batch, original_batch=None):
        with self.autocast():
            return self.per_sample_loss(model, original_batch)


def build_optimizer(model: torch.nn.Module, optimizer_cfg) -> torch.optim.Optimizer:
    # No weight decay on biases and normalisation weights (1-d tensors): the usual recipe for both ResNets and BERT.
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": optimizer_cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # torch's default on the CPU is the per-tensor for-loop; foreach and fused do one kernel over all tensors.
    implementation = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}[
        optimizer_cfg.implementation]
    if optimizer_cfg.name == "sgd":
        return torch.optim.SGD(groups, lr=optimizer_cfg.lr, momentum=optimizer_cfg.momentum, nesterov=optimizer_cfg.nesterov,
                               **implementation)
    if optimizer_cfg.name == "adamw":
        return torch.optim.AdamW(groups, lr=optimizer_cfg.lr, betas=tuple(optimizer_cfg.betas), eps=optimizer_cfg.eps,
                                 **implementation)
    raise ValueError(f"trainer.optimizer.name must be 'sgd' or 'adamw', got {optimizer_cfg.name!r}")


def autocast_factory(device: torch.device, precision: str) -> Callable:
    if precision == "fp32":
        return contextlib.nullcontext
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    return lambda: torch.autocast(device_type=device.type, dtype=dtype)


def evaluate(parts: TaskParts, autocast: Callable) -> dict[str, float]:
    """Accuracy in percent over each whole evaluation split: {"val": ..., "test": ...}."""
    model = parts.model
    was_training = model.training
    model.eval()
    accuracies = {}
    with torch.no_grad(), autocast():
        for split, loader in parts.eval_loaders.items():
            correct = total = 0
            for batch in loader:
                correct += parts.count_correct(model, batch)
                total += parts.batch_size_of(batch)
            accuracies[split] = 100.0 * correct / total
    model.train(was_training)
    return accuracies


def _progress_bar(total: int, enabled: bool):
    from tqdm import tqdm

    # disable=None lets tqdm switch itself off when stderr is not a terminal (CI, log files).
    return tqdm(total=total, unit="sample", unit_scale=True, dynamic_ncols=True, disable=None if enabled else True, file=sys.stderr)


def train(
    parts: TaskParts,
    trainer_cfg,
    device: torch.device,
    precision: str,
    sift_config=None,
    seed: int = 0,
    target_accuracy: float | None = None,
    on_eval: Callable[[EvalPoint], None] | None = None,
    sync: str = "global",
) -> TrainResult:
    """Train `parts.model` for `trainer_cfg.epochs` epochs.

    Evaluates `evals_per_epoch` times per epoch, or, with `eval_every_epochs` > 1, at the end of every
    `eval_every_epochs`-th epoch; the last epoch always ends with an evaluation.

    Under DDP (an initialised process group, see sift_bench.distributed) each rank trains on its shard, the
    model wrapped in DistributedDataParallel; counts are summed over the ranks and rank 0 alone evaluates (its
    accuracies are the run's; the other ranks' evaluation points hold NaN). `sync` is the sifter's
    (SiftingDataloader's `sync`).
    """
    model = parts.model
    world = distributed.current()
    train_model = model
    if world.distributed:
        train_model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        # The weights are rank 0's (DDP broadcasts them); dropout masks should differ between ranks.
        torch.manual_seed(seed + world.rank)
    autocast = autocast_factory(device, precision)
    optimizer = build_optimizer(model, trainer_cfg.optimizer)
    total_samples = trainer_cfg.epochs * parts.num_train_samples
    schedule = SampleSchedule(
        optimizer, total_samples, trainer_cfg.schedule.name, trainer_cfg.schedule.warmup_fraction,
        trainer_cfg.schedule.final_lr_fraction,
    )
    sifter = None
    loader = parts.train_loader
    if sift_config is not None:
        sifter = SiftingDataloader(
            sift_config, parts.train_loader, TaskLoss(parts.per_sample_loss, autocast), model, seed=seed,
            num_samples=parts.num_train_samples, num_epochs=trainer_cfg.epochs, sync=sync,
        )
        loader = sifter
    # Stale-loss and InfoBatch sifters decide from the training losses, so the loop hands them back.
    feedback = sifter is not None and sifter.uses_training_losses

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    history: list[EvalPoint] = []
    samples_seen = samples_trained = work_trained = 0
    train_time = eval_time = 0.0
    time_to_target = math.nan
    eval_every = parts.num_train_samples / trainer_cfg.evals_per_epoch
    progress = _progress_bar(total_samples, trainer_cfg.progress and world.is_main)

    lr_multiplier = 0.0

    def record_eval(epoch_position: float, loss_sum: float, epoch_seen: int, epoch_trained: int):
        nonlocal eval_time, time_to_target
        # Trained counts and losses are this rank's; seen counts come summed over the ranks already.
        loss_sum, epoch_trained, trained = distributed.sum_over_ranks([loss_sum, epoch_trained, samples_trained], world, device)
        start = time.perf_counter()
        accuracy = evaluate(parts, autocast) if world.is_main else {"val": math.nan, "test": math.nan}
        eval_time += time.perf_counter() - start
        point = EvalPoint(
            epoch=epoch_position, samples_seen=samples_seen, samples_trained=int(trained), train_time_s=train_time,
            train_loss=loss_sum / max(epoch_trained, 1), val_accuracy=accuracy["val"], test_accuracy=accuracy["test"],
            pct_accepted=100.0 * epoch_trained / max(epoch_seen, 1), lr_multiplier=lr_multiplier,
        )
        history.append(point)
        if world.is_main:
            log.info("epoch %.2f  train_loss %.4f  val_accuracy %.2f %%  test_accuracy %.2f %%  accepted %.1f %%  "
                     "train_time %.1f s", point.epoch, point.train_loss, point.val_accuracy, point.test_accuracy,
                     point.pct_accepted, point.train_time_s)
        if target_accuracy is not None and math.isnan(time_to_target) and point.val_accuracy >= target_accuracy:
            time_to_target = train_time
        if on_eval:
            on_eval(point)

    model.train()
    steps = 0
    other_cpu = OtherCpuMeter().start()
    for epoch in range(trainer_cfg.epochs):
        epoch_start_seen, epoch_start_trained = samples_seen, samples_trained
        loss_sum = torch.zeros((), device=device)
        next_eval = 1
        sync()
        segment_start = time.perf_counter()
        for step, batch in enumerate(loader):
            batch_size = parts.batch_size_of(batch)
            # The candidates consumed to build this batch count as seen, so the schedule runs on samples seen.
            # Under DDP the sifter counts over all ranks; so does the plain loader, whose shards are equal in size.
            samples_seen = sifter.stats.samples_seen if sifter else samples_seen + batch_size * world.world_size
            samples_trained += batch_size  # this rank's: summed over the ranks at each evaluation
            steps += 1
            work_trained += parts.work_of(batch)
            lr_multiplier = schedule.step(samples_seen)
            with autocast():
                losses = parts.per_sample_loss(train_model, batch)
            optimizer.zero_grad(set_to_none=True)
            if feedback:
                (losses * sifter.batch_weights().to(losses.device)).mean().backward()
                sifter.record_losses(losses.detach())
            else:
                losses.mean().backward()
            optimizer.step()
            loss_sum += losses.detach().sum()
            epoch_seen, epoch_trained = samples_seen - epoch_start_seen, samples_trained - epoch_start_trained
            progress.update(samples_seen - progress.n)
            if step % 20 == 0 and not progress.disable:
                progress.set_postfix(epoch=epoch + 1, loss=f"{loss_sum.item() / epoch_trained:.3f}",
                                     accepted=f"{100.0 * epoch_trained / epoch_seen:.1f}%")
            if next_eval < trainer_cfg.evals_per_epoch and next_eval * eval_every <= epoch_seen < parts.num_train_samples:
                next_eval += 1
                sync()
                train_time += time.perf_counter() - segment_start
                record_eval(epoch + epoch_seen / parts.num_train_samples, loss_sum.item(), epoch_seen, epoch_trained)
                segment_start = time.perf_counter()
        sync()
        train_time += time.perf_counter() - segment_start
        if sifter:
            # Candidates sifted after the epoch's last batch (under DDP, or with drop_last) were seen too.
            samples_seen = sifter.stats.samples_seen
        epoch_seen, epoch_trained = samples_seen - epoch_start_seen, samples_trained - epoch_start_trained
        if (epoch + 1) % trainer_cfg.eval_every_epochs == 0 or epoch + 1 == trainer_cfg.epochs:
            record_eval(float(epoch + 1), loss_sum.item(), epoch_seen, epoch_trained)
    progress.close()
    # A sibling rank on this machine is part of the job, not contention.
    other_cpu_s, other_cpu_fraction = other_cpu.stop(distributed.sibling_cpu_seconds(other_cpu.own_cpu_s(), world))
    local_trained = samples_trained
    samples_trained, work_trained = (int(v) for v in distributed.sum_over_ranks([samples_trained, work_trained], world, device))
    if world.distributed:
        print(f"sift_bench: rank {world.rank} of {world.world_size}: {steps} batches, {local_trained} samples trained",
              flush=True)

    return TrainResult(
        val_accuracy=history[-1].val_accuracy,
        test_accuracy=history[-1].test_accuracy,
        train_time_s=train_time,
        sift_time_s=sifter.stats.scoring_seconds if sifter else 0.0,
        eval_time_s=eval_time,
        samples_seen=samples_seen,
        samples_trained=samples_trained,
        pct_accepted=100.0 * samples_trained / max(samples_seen, 1),
        time_to_target_s=time_to_target,
        work_trained=work_trained,
        other_cpu_s=other_cpu_s,
        other_cpu_fraction=other_cpu_fraction,
        history=history,
        world_size=world.world_size,
        samples_left_over=sifter.stats.samples_left_over if sifter else 0,
        sync_time_s=sifter.stats.sync_seconds if sifter else 0.0,
        steps=steps,
    )

