"""What a training run records, whichever loop trains it: when it evaluates, what each evaluation holds, how its
time is counted, and the `TrainResult` it ends with. `sift_bench.train` (the native loop) and `sift_bench.train_hf`
(the Hugging Face Trainer) both drive a `RunRecorder`, so a change to how runs are timed or evaluated is made once.

The evaluation schedule: `evals_per_epoch` evaluations per epoch, at each 1/evals_per_epoch of the epoch's samples
seen (mid-epoch, `after_step`), the last at the epoch's end; with `eval_every_epochs` > 1, only at the end of every
`eval_every_epochs`-th epoch. The last epoch always ends with an evaluation. Training time stops while evaluating.
"""

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from sift_bench import distributed
from sift_bench.tasks import TaskParts

log = logging.getLogger("sift_bench.train")  # the evaluation lines, under the name users filter on


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
    sift_sync_time_s: float = 0.0
    steps: int = 0  # optimizer steps (batches) of this rank, the same on every rank
    samples_scored: int = 0  # samples the sifter's scoring passes scored, on this rank (0 without a scoring pass)


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


class RunRecorder:
    """Counts, clocks and evaluates one run. A loop calls `start`, then per epoch `epoch_begin`, for each batch
    `batch_trained` (before its step), `add_losses` (its per-sample training losses) and `after_step`, then
    `epoch_end`; then `result`. The recorder alone counts: samples seen are the candidates consumed, summed over the
    ranks (the sifter's count when `sifter` is set, else the batches' sizes), samples trained those of the batches.

    Under DDP, trained counts and losses are this rank's and are summed over the ranks at each evaluation; rank 0
    alone evaluates (the other ranks' points hold NaN)."""

    def __init__(self, parts: TaskParts, trainer_cfg, device: torch.device, autocast: Callable,
                 target_accuracy: float | None = None, on_eval: Callable[[EvalPoint], None] | None = None,
                 sifter=None):
        self.parts, self.device, self.autocast = parts, device, autocast
        self.evals_per_epoch, self.eval_every_epochs = trainer_cfg.evals_per_epoch, trainer_cfg.eval_every_epochs
        self.epochs = trainer_cfg.epochs
        self.target_accuracy, self.on_eval = target_accuracy, on_eval
        self.world = distributed.current()
        # The run's SiftingDataloader (None unsifted): it counts the candidates it consumed, over every rank.
        self.sifter = sifter
        self.history: list[EvalPoint] = []
        self.samples_seen = self.samples_trained = self.work_trained = self.steps = 0
        self.train_time = self.eval_time = 0.0
        self.time_to_target = math.nan
        self.epoch = -1
        self.loss_sum = torch.zeros((), device=device)
        self.eval_every = parts.num_train_samples / trainer_cfg.evals_per_epoch

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def start(self) -> None:
        self.other_cpu = distributed.start_cpu_meter(self.world)

    def epoch_begin(self) -> None:
        self.epoch += 1
        self.epoch_start_seen, self.epoch_start_trained = self.samples_seen, self.samples_trained
        self.loss_sum = torch.zeros((), device=self.device)
        self.next_eval = 1
        self._sync()
        self.segment_start = time.perf_counter()

    def batch_trained(self, batch) -> None:
        """Counts a batch about to be trained: its samples, its work, and the candidates consumed to build it (as
        seen: the schedule runs on samples seen)."""
        size = self.parts.batch_size_of(batch)
        self.samples_trained += size  # this rank's: summed over the ranks at each eval
        self.work_trained += self.parts.work_of(batch)
        self.steps += 1
        # Under DDP the sifter counts over all ranks; so does the plain loader, whose shards are equal in size.
        self.samples_seen = (self.sifter.stats.samples_seen if self.sifter is not None
                             else self.samples_seen + size * self.world.world_size)

    def add_losses(self, losses: torch.Tensor) -> None:
        """Adds a trained batch's per-sample losses to the epoch's training loss."""
        self.loss_sum += losses.detach().sum()

    @property
    def epoch_seen(self) -> int:
        return self.samples_seen - self.epoch_start_seen

    @property
    def epoch_trained(self) -> int:
        return self.samples_trained - self.epoch_start_trained

    def after_step(self, lr_multiplier: float) -> None:
        """Evaluates mid-epoch when the epoch's samples seen pass the next 1/evals_per_epoch of an epoch."""
        epoch_seen, num_train_samples = self.epoch_seen, self.parts.num_train_samples
        if self.next_eval < self.evals_per_epoch and self.next_eval * self.eval_every <= epoch_seen < num_train_samples:
            self.next_eval += 1
            self._sync()
            self.train_time += time.perf_counter() - self.segment_start
            self._record(self.epoch + epoch_seen / num_train_samples, lr_multiplier)
            self.segment_start = time.perf_counter()

    def epoch_end(self, lr_multiplier: float) -> None:
        """Stops the epoch's clock; evaluates at the end of every eval_every_epochs-th epoch, and of the last."""
        if self.sifter is not None:
            # Candidates sifted after the epoch's last batch (under DDP, or with drop_last) were seen too.
            self.samples_seen = self.sifter.stats.samples_seen
        self._sync()
        self.train_time += time.perf_counter() - self.segment_start
        if (self.epoch + 1) % self.eval_every_epochs == 0 or self.epoch + 1 == self.epochs:
            self._record(float(self.epoch + 1), lr_multiplier)

    def _record(self, epoch_position: float, lr_multiplier: float) -> None:
        world = self.world
        # Trained counts and losses are this rank's; seen counts come summed over the ranks already.
        loss_sum, epoch_trained, trained = distributed.sum_over_ranks(
            [self.loss_sum.item(), self.epoch_trained, self.samples_trained], world, self.device)
        start = time.perf_counter()
        accuracy = evaluate(self.parts, self.autocast) if world.is_main else {"val": math.nan, "test": math.nan}
        self.eval_time += time.perf_counter() - start
        point = EvalPoint(
            epoch=epoch_position, samples_seen=self.samples_seen, samples_trained=int(trained),
            train_time_s=self.train_time, train_loss=loss_sum / max(epoch_trained, 1),
            val_accuracy=accuracy["val"], test_accuracy=accuracy["test"],
            pct_accepted=100.0 * epoch_trained / max(self.epoch_seen, 1), lr_multiplier=lr_multiplier,
        )
        self.history.append(point)
        if world.is_main:
            log.info("epoch %.2f  train_loss %.4f  val_accuracy %.2f %%  test_accuracy %.2f %%  accepted %.1f %%  "
                     "train_time %.1f s", point.epoch, point.train_loss, point.val_accuracy, point.test_accuracy,
                     point.pct_accepted, point.train_time_s)
        if (self.target_accuracy is not None and math.isnan(self.time_to_target)
                and point.val_accuracy >= self.target_accuracy):
            self.time_to_target = self.train_time
        if self.on_eval:
            self.on_eval(point)

    def result(self, steps: int | None = None) -> TrainResult:
        """The run's result; `steps`: this rank's optimizer steps where they are not its batches (the Trainer's)."""
        world, sifter = self.world, self.sifter
        steps = self.steps if steps is None else steps
        # A sibling rank on this machine is part of the job, not contention.
        other_cpu_s, other_cpu_fraction = distributed.stop_cpu_meter(self.other_cpu, world)
        local_trained = self.samples_trained
        samples_trained, work_trained = (int(value) for value in distributed.sum_over_ranks(
            [self.samples_trained, self.work_trained], world, self.device))
        if world.distributed:
            print(f"sift_bench: rank {world.rank} of {world.world_size}: {steps} batches, {local_trained} samples "
                  "trained", flush=True)
        return TrainResult(
            val_accuracy=self.history[-1].val_accuracy,
            test_accuracy=self.history[-1].test_accuracy,
            train_time_s=self.train_time,
            sift_time_s=sifter.stats.scoring_seconds if sifter else 0.0,
            eval_time_s=self.eval_time,
            samples_seen=self.samples_seen,
            samples_trained=samples_trained,
            pct_accepted=100.0 * samples_trained / max(self.samples_seen, 1),
            time_to_target_s=self.time_to_target,
            work_trained=work_trained,
            other_cpu_s=other_cpu_s,
            other_cpu_fraction=other_cpu_fraction,
            history=self.history,
            world_size=world.world_size,
            samples_left_over=sifter.stats.samples_left_over if sifter else 0,
            sift_sync_time_s=sifter.stats.sync_seconds if sifter else 0.0,
            steps=steps,
            samples_scored=sifter.stats.samples_scored if sifter else 0,
        )
