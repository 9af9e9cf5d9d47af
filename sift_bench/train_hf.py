"""`trainer.loop: hf_trainer`: a training job run by Hugging Face's `Trainer` instead of `sift_bench.train`.

`train` has the signature and the `TrainResult` of `sift_bench.train.train`. The Trainer trains `parts.model` on the
task's own loader (the same batches, in the same order, as the native loop) with the task's own per-sample loss; a
sifted run goes through `SiftingTrainer` (sift_bench.integrations.transformers), a baseline through a plain `Trainer`.
The Trainer builds the optimizer and the schedule from `TrainingArguments` set from `trainer_cfg`. Evaluation, counts
and timing are the native loop's: a callback drives the same `RunRecorder` (sift_bench.recorder) at the same points.

Where it differs from the native loop, by the Trainer's design:

- The schedule is the Trainer's, over optimizer steps (over candidate batches when sifted): step k trains at
  lambda(k), and the learning rate reaches its final value after the last step. The native loop sets each step's
  rate from the samples seen including that batch. Only `linear`, `cosine` and `constant` exist in both (linear
  decays to 0 only; cosine to `final_lr_fraction`); warmup is `ceil(warmup_fraction * steps)` steps.
- The Trainer's AdamW (fused when `implementation: fused`, else torch's default) or SGD, with weight decay on all but
  biases and normalisation weights (the native loop: all but 1-d tensors, the same set for BERT). No gradient
  clipping (`max_grad_norm=0`), as natively, though the Trainer still computes the gradient norm each step.
- The Trainer reseeds torch with `seed` when built, so dropout draws differ from the native loop's.
- `train_time_s` is the time of the Trainer's epochs (its per-step bookkeeping included), evaluations excluded.
"""

from __future__ import annotations

import math
import sys
import tempfile
from typing import Callable

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_callback import PrinterCallback

from sift_bench.errors import ConfigError
from sift_bench.integrations.transformers import SiftingTrainer
from sift_bench.recorder import EvalPoint, RunRecorder, TrainResult
from sift_bench.sifting import Loss
from sift_bench.tasks import TaskParts
from sift_bench.loop_parts import autocast_factory, scoring_loss
from sift_bench.validation import check_hf_trainer_schedule

# trainer.schedule.name (one of validation.HF_TRAINER_SCHEDULES) -> the Trainer's lr_scheduler_type (cosine to a
# floor above 0 is cosine_with_min_lr).
HF_SCHEDULES = {"linear": "linear", "cosine": "cosine", "constant": "constant_with_warmup"}


def training_arguments(trainer_cfg, device: torch.device, precision: str, seed: int, output_dir: str,
                       per_device_batch_size: int, batches_per_epoch: int, progress: bool) -> TrainingArguments:
    """The Trainer's settings for `trainer_cfg`; a ConfigError for a schedule the Trainer does not have.

    batches_per_epoch: the training loader's length, from which the Trainer plans its steps (and warmup here).
    """
    schedule, optimizer = trainer_cfg.schedule, trainer_cfg.optimizer
    check_hf_trainer_schedule(schedule)  # validate() checks it too, before the run starts; this guards direct callers
    scheduler_type, scheduler_kwargs = HF_SCHEDULES[schedule.name], {}
    if schedule.name == "cosine" and schedule.final_lr_fraction != 0:
        scheduler_type, scheduler_kwargs = "cosine_with_min_lr", {"min_lr_rate": schedule.final_lr_fraction}
    optim_settings = {}
    if optimizer.name == "adamw":
        optim_settings = dict(optim="adamw_torch_fused" if optimizer.implementation == "fused" else "adamw_torch",
                              adam_beta1=optimizer.betas[0], adam_beta2=optimizer.betas[1], adam_epsilon=optimizer.eps)
    elif optimizer.name == "sgd":
        optim_settings = dict(optim="sgd", optim_args=f"momentum={optimizer.momentum},nesterov={optimizer.nesterov}")
    else:
        raise ConfigError(f"trainer.optimizer.name={optimizer.name!r} is not allowed: 'sgd' or 'adamw'")
    return TrainingArguments(
        output_dir=output_dir,
        num_train_epochs=trainer_cfg.epochs,
        per_device_train_batch_size=per_device_batch_size,
        learning_rate=optimizer.lr,
        weight_decay=optimizer.weight_decay,
        **optim_settings,
        lr_scheduler_type=scheduler_type,
        lr_scheduler_kwargs=scheduler_kwargs,
        # Rounded first: in floats 0.1 * 100 steps is 10.000000000000002, which would round up to 11.
        warmup_steps=math.ceil(round(schedule.warmup_fraction * trainer_cfg.epochs * batches_per_epoch, 6)),
        max_grad_norm=0.0,  # no clipping, as in the native loop
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        use_cpu=device.type == "cpu",
        seed=seed,
        # The harness evaluates, logs to MLflow and prints its summary itself.
        eval_strategy="no",
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        disable_tqdm=not (progress and sys.stderr.isatty()),
    )


class _RunMeter(TrainerCallback):
    """Drives the run's `RunRecorder` from the Trainer's events, at the points where sift_bench.train does."""

    def __init__(self, record: RunRecorder) -> None:
        self.record = record
        self.trainer: Trainer | None = None  # set once built: the sifter lives in it

    def sifter(self):
        sifting = getattr(self.trainer, "sifting", None)
        return sifting.dataloader if sifting else None

    # ---- called by the trainer for each batch it trains

    def batch_trained(self, batch) -> None:
        self.record.batch_trained(batch)

    def training_losses(self, model, batch) -> torch.Tensor:
        losses = self.record.parts.per_sample_loss(model, batch)
        self.record.add_losses(losses)
        return losses

    # ---- callback events

    def _lr_multiplier(self) -> float:
        return self.trainer.optimizer.param_groups[0]["lr"] / self.trainer.args.learning_rate

    def on_train_begin(self, args, state, control, **kwargs):
        # The Trainer builds its training loader (the sifter) before this event: the recorder counts with it.
        self.record.sifter = self.sifter()
        self.record.start()

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.record.epoch_begin()

    def on_step_end(self, args, state, control, **kwargs):
        self.record.after_step(self._lr_multiplier())

    def on_epoch_end(self, args, state, control, **kwargs):
        self.record.epoch_end(self._lr_multiplier())

    def result(self) -> TrainResult:
        return self.record.result(self.trainer.state.global_step)


class _MeteredTaskLoss(Loss):
    """The task's per-sample loss as a sifting `Loss` that trains: stale loss and InfoBatch compute their training
    loss with it (they never score), so it is counted like the trainer's own."""

    def __init__(self, meter: _RunMeter) -> None:
        self.meter = meter

    def loss(self, model, transformed_batch, original_batch=None):
        return self.meter.training_losses(model, original_batch)


class _TaskTrainer(Trainer):
    """A Trainer on the task's own loader and per-sample loss, counted by the run's meter."""

    def __init__(self, *args, meter: _RunMeter, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.meter = meter
        # compute_loss averages over the batch and ignores num_items_in_batch: the Trainer need not count labels.
        self.model_accepts_loss_kwargs = False

    def get_train_dataloader(self):
        return self.meter.record.parts.train_loader

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.meter.batch_trained(inputs)  # before the Trainer moves the batch: counting costs no device sync
        return super().training_step(model, inputs, num_items_in_batch)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = self.meter.training_losses(model, inputs).mean()
        return (loss, None) if return_outputs else loss


class _SiftingTaskTrainer(SiftingTrainer, _TaskTrainer):
    """SiftingTrainer around the task's loader: SiftingTrainer's methods wrap _TaskTrainer's."""


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
    """Train `parts.model` for `trainer_cfg.epochs` epochs with the Hugging Face Trainer; see sift_bench.train.train."""
    autocast = autocast_factory(device, precision)
    meter = _RunMeter(RunRecorder(parts, trainer_cfg, device, autocast, target_accuracy, on_eval))
    with tempfile.TemporaryDirectory(prefix="sift_bench_hf_") as output_dir:
        args = training_arguments(trainer_cfg, device, precision, seed, output_dir, parts.train_loader.batch_size,
                                  len(parts.train_loader), progress=trainer_cfg.progress and meter.record.world.is_main)
        if sift_config is None:
            trainer = _TaskTrainer(model=parts.model, args=args, meter=meter)
        else:
            # The scoring policies score with the native loop's loss; the training-loss policies train with theirs.
            sift_loss = (_MeteredTaskLoss(meter) if sift_config.uses_training_losses
                         else scoring_loss(parts, sift_config, autocast, trainer_cfg.optimizer))
            trainer = _SiftingTaskTrainer(model=parts.model, args=args, meter=meter, sift_config=sift_config,
                                          sift_loss=sift_loss)
        meter.trainer = trainer
        trainer.remove_callback(PrinterCallback)  # it would print the Trainer's final log line
        # Added after SiftingTrainer's own callback, which brings the schedule up to date at an epoch's end.
        trainer.add_callback(meter)
        trainer.train()
    return meter.result()
