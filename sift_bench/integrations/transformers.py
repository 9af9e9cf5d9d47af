"""Smart sifting inside a Hugging Face `transformers.Trainer`: `enable_sifting(trainer, sift_config)` or `SiftingTrainer`.

Both change one Trainer instance, nothing global, and leave its training loop, callbacks and logging its own:

- Data: the training loader is a `SiftingDataloader` around the loader the Trainer builds (`get_train_dataloader()`).
- Schedule: the Trainer plans epochs and steps from `len(train_dataloader)`, which a sifting loader cannot know (an
  epoch's batch count depends on its selections). We give the Trainer the length of the loader that is sifted, its
  *candidate* batches, so `num_train_epochs`, `max_steps` and warmup plan exactly what an unsifted run would, and we
  step the Trainer's own scheduler (linear, cosine, any step-driven one) once per candidate batch drawn instead of
  once per batch trained. The schedule thus runs on data seen, as `sift_bench.schedule.SampleSchedule` does, and
  reaches its final value (0 for linear) when the planned epochs x data set have been seen. Training ends with the
  last planned epoch (an epoch that yields fewer batches than its length simply ends early); a plan that ends inside
  an epoch (`max_steps`, fractional epochs) ends at the first step once its candidate batches are drawn. SageMaker
  sets `max_steps` to the largest integer instead, which leaves a linear or cosine schedule near its peak all run.
- Training losses: `StaleLossSiftConfig` and `InfoBatchSiftConfig` decide from each sample's last training loss, so
  for them `compute_loss` is the per-sample `loss` (the scoring `Loss`, here with gradients) weighted by the sifter's
  `batch_weights()`, reported with `record_losses()` and averaged. Their batches must carry sample ids: wrap the train
  data set in `sift_bench.sifting.IndexedDataset` and set `remove_unused_columns=False`. The other policies keep the
  Trainer's own loss.

The sifter's draws are seeded with `args.seed`. Under DDP each rank sifts the shard the Trainer's loader gives it
(`sync`, as SiftingDataloader's). Not supported: `gradient_accumulation_steps > 1` (refused: the Trainer decides when
to step from the epoch's batch count, and a sifted epoch's last partial accumulation would never step), DeepSpeed
(it builds its own scheduler, which is then stepped per batch trained), resuming from a checkpoint mid-epoch (the
sifter's history and per-sample memory are not saved).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau
from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import has_length

from sift_bench.sifting import Loss, SiftingDataloader, SiftPolicy, default_batch_transform, default_sample_ids
from sift_bench.sifting.config import as_sift_config
from sift_bench.sifting.indexed import SAMPLE_ID_KEY

# Batch keys that are not the model's inputs: the labels (kept out so that the model computes no loss of its own) and
# the sample ids IndexedDataset adds.
_NOT_MODEL_INPUTS = ("labels", SAMPLE_ID_KEY)


class LogitsCrossEntropyLoss(Loss):
    """Per-sample cross-entropy of the model's `logits` against the batch's `labels`: the default `loss`.

    For dict batches with one label per sample (sequence classification): logits [n, classes], labels [n]. Every other
    key but `sample_id` is passed to the model, moved to the model's device.
    """

    def loss(self, model, transformed_batch, original_batch=None):
        batch = original_batch
        if not isinstance(batch, Mapping) or "labels" not in batch:
            raise TypeError(
                f"the default sifting loss needs dict batches with a 'labels' key, got a {type(batch).__name__}"
                + (f" with keys {sorted(batch)}" if isinstance(batch, Mapping) else "")
                + "; pass loss= a sift_bench.sifting.Loss for other batches"
            )
        device = next(model.parameters()).device
        inputs = {key: value.to(device) if isinstance(value, torch.Tensor) else value
                  for key, value in batch.items() if key not in _NOT_MODEL_INPUTS}
        labels = batch["labels"].to(device)
        logits = model(**inputs).logits
        if logits.dim() != 2 or labels.shape != logits.shape[:1]:
            raise ValueError(
                f"the default sifting loss handles one label per sample (logits [n, classes], labels [n]), got logits "
                f"{list(logits.shape)} and labels {list(labels.shape)}; pass loss= a sift_bench.sifting.Loss for "
                f"per-token labels (a causal LM must also shift them)"
            )
        return F.cross_entropy(logits.float(), labels, reduction="none")


class _CandidateBatches:
    """The loader the Trainer built, counting the batches the sifter draws from it: the clock of the schedule."""

    def __init__(self, loader: Any, batch_size: int, drop_last: bool) -> None:
        self.loader = loader
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.drawn = 0  # since train() began, over all epochs

    def __iter__(self):
        for batch in self.loader:
            self.drawn += 1
            yield batch

    def __len__(self) -> int:
        return len(self.loader)


class SiftedTrainLoader:
    """What the Trainer iterates: the sifted batches, with the length the Trainer plans by.

    `len()` is the number of candidate batches an epoch draws (the sifted loader's length), an upper bound on the
    batches it yields: the Trainer plans epochs and `max_steps` as for the unsifted loader, and an epoch that yields
    fewer batches ends when the sifter's iteration does.
    """

    def __init__(self, sifter: SiftingDataloader, candidates: _CandidateBatches) -> None:
        self.sifter = sifter
        self.candidates = candidates

    def __iter__(self):
        return iter(self.sifter)

    def __len__(self) -> int:
        return len(self.candidates)

    @property
    def dataset(self):
        # Trainer.num_examples reads the data set's size from here.
        return self.candidates.loader.dataset

    def set_epoch(self, epoch: int) -> None:
        # What the Trainer does for its own loader at each epoch, so that its sampler reshuffles.
        loader = self.candidates.loader
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        underlying_sampler = getattr(getattr(loader, "batch_sampler", None), "batch_sampler", None)
        if hasattr(underlying_sampler, "set_epoch"):
            underlying_sampler.set_epoch(epoch)


class DataDrivenSchedule:
    """The Trainer's learning-rate scheduler, stepped once per candidate batch drawn instead of once per batch trained.

    The Trainer calls `step()` after each optimizer step; the wrapped scheduler is stepped until it stands at the
    candidate batches drawn so far (at most the planned number), so without sifting it is stepped exactly as the
    Trainer would step it.
    """

    def __init__(self, scheduler: LRScheduler, target_step: Callable[[], int]) -> None:
        self.scheduler = scheduler
        self.target_step = target_step

    def step(self) -> None:
        target = self.target_step()
        while self.scheduler.last_epoch < target:
            self.scheduler.step()

    def get_last_lr(self) -> list[float]:
        return self.scheduler.get_last_lr()

    def state_dict(self) -> dict:
        return self.scheduler.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.scheduler.load_state_dict(state_dict)

    def __getattr__(self, name: str):
        # Anything else (optimizer, last_epoch, base_lrs) is the wrapped scheduler's.
        if name == "scheduler":
            raise AttributeError(name)
        return getattr(self.scheduler, name)


class TrainerSifting:
    """Sifting attached to one Trainer; `enable_sifting` and `SiftingTrainer` both delegate to it.

    dataloader: the SiftingDataloader of the latest `train()` (None before the first), for its `stats`.
    """

    def __init__(self, trainer: Trainer, sift_config: SiftPolicy, loss: Loss | None = None, sync: str | None = None):
        sift_config = as_sift_config(sift_config)
        if not isinstance(sift_config, SiftPolicy):
            raise TypeError(
                f"sift_config must be a sift config of sift_bench.sifting (RelativeProbabilisticSiftConfig, "
                f"RandomSiftConfig, StaleLossSiftConfig, InfoBatchSiftConfig, or a SiftPolicy of your own), "
                f"got {type(sift_config).__name__}"
            )
        if loss is not None and not callable(getattr(loss, "loss", None)):
            raise TypeError(f"loss must be a sift_bench.sifting.Loss or None, got {type(loss).__name__}")
        if hasattr(trainer, "sifting"):
            raise RuntimeError("sifting is already enabled on this trainer")
        self.trainer = trainer
        self.sift_config = sift_config
        self.loss = LogitsCrossEntropyLoss() if loss is None else loss
        self.sync = sync
        self.dataloader: SiftingDataloader | None = None
        self.candidates: _CandidateBatches | None = None
        self.planned_batches = 0
        self.plan_ends_mid_epoch = False
        trainer.add_callback(_SiftingCallback(self))

    def train_dataloader(self, loader: Any) -> SiftedTrainLoader:
        """Sift `loader`, the training loader the Trainer built, for one `train()`."""
        args = self.trainer.args
        if args.gradient_accumulation_steps != 1:
            raise ValueError(
                f"gradient_accumulation_steps={args.gradient_accumulation_steps} is not supported with sifting: the "
                f"Trainer steps at fixed batch counts of an epoch, and a sifted epoch yields fewer batches, so its last "
                f"partial accumulation would never step; raise per_device_train_batch_size instead"
            )
        if not has_length(loader):
            raise ValueError(
                f"sifting needs a training loader with len() (a map-style data set), got a {type(loader).__name__} "
                f"without: the epochs and the learning-rate schedule are planned in its batches"
            )
        batch_size = getattr(loader, "batch_size", None)
        drop_last = bool(getattr(loader, "drop_last", False))
        if batch_size is None:
            # accelerate's prepared loader batches through a batch sampler (batch_size None): the Trainer's sizes.
            batch_size, drop_last = args.train_batch_size, args.dataloader_drop_last
        per_epoch = len(loader)
        # The Trainer's own plan (set_initial_training_values) for a loader of this length.
        self.planned_batches = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * per_epoch)
        self.plan_ends_mid_epoch = self.planned_batches % per_epoch != 0
        dataset = getattr(loader, "dataset", None)
        self.candidates = _CandidateBatches(loader, batch_size, drop_last)
        self.dataloader = SiftingDataloader(
            self.sift_config, self.candidates, self.loss, self.trainer.model, seed=args.seed,
            sample_ids=self._sample_ids, num_samples=len(dataset) if has_length(dataset) else None,
            num_epochs=math.ceil(self.planned_batches / per_epoch), sync=self.sync,
        )
        return SiftedTrainLoader(self.dataloader, self.candidates)

    def _sample_ids(self, batch: Any) -> torch.Tensor:
        if isinstance(batch, Mapping) and SAMPLE_ID_KEY not in batch:
            raise ValueError(
                f"{type(self.sift_config).__name__} remembers each sample's training loss, so every training batch "
                f"must carry its sample ids as batch[{SAMPLE_ID_KEY!r}]: wrap the train data set in "
                f"sift_bench.sifting.IndexedDataset and set TrainingArguments(remove_unused_columns=False) (the "
                f"Trainer otherwise drops the columns its model's forward does not take); the batch has {sorted(batch)}"
            )
        return default_sample_ids(batch)

    def schedule_step(self) -> int:
        """Where the schedule stands: one step per candidate batch drawn, at most the planned number."""
        if self.candidates is None:
            return 0
        return min(self.candidates.drawn, self.planned_batches)

    def plan_drawn(self) -> bool:
        return self.candidates is not None and self.candidates.drawn >= self.planned_batches

    def drive(self, scheduler: Any) -> Any:
        """`scheduler`, stepped by the data drawn; schedulers that do not step per batch (on plateau) stay as they are."""
        if not isinstance(scheduler, LRScheduler) or isinstance(scheduler, ReduceLROnPlateau):
            return scheduler
        return DataDrivenSchedule(scheduler, self.schedule_step)

    def compute_loss(self, compute_loss: Callable, model, inputs, return_outputs=False, num_items_in_batch=None):
        """The training loss: the Trainer's own (`compute_loss`), or for a policy that decides from training losses
        the per-sample `loss` weighted by the sifter, whose losses are recorded."""
        sifter = self.dataloader
        if sifter is None or not sifter.uses_training_losses or not model.training:
            # Evaluation (prediction_step) and the other policies keep the Trainer's own loss.
            return compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
        losses = self.loss.loss(model, default_batch_transform(inputs).transform(inputs), inputs)
        loss = sifter.training_loss(losses)  # recorded (a detached CPU copy) and weighted, as the native loop does
        return (loss, None) if return_outputs else loss


class _SiftingCallback(TrainerCallback):
    """Ends training at the planned data, and brings the schedule up to the candidates drawn at an epoch's end."""

    def __init__(self, sifting: TrainerSifting) -> None:
        self.sifting = sifting

    def on_step_end(self, args, state, control, **kwargs):
        if self.sifting.plan_ends_mid_epoch and self.sifting.plan_drawn():
            control.should_training_stop = True

    def on_epoch_end(self, args, state, control, **kwargs):
        scheduler = self.sifting.trainer.lr_scheduler
        # Candidates sifted out after the epoch's last batch were seen too.
        if state.global_step > 0 and isinstance(scheduler, DataDrivenSchedule):
            scheduler.step()
        if self.sifting.plan_drawn():
            control.should_training_stop = True


def enable_sifting(trainer: Trainer, sift_config: SiftPolicy, loss: Loss | None = None, *, sync: str | None = None,
                   set_epochs: bool = False) -> None:
    """Make `trainer` train on a SiftingDataloader around the loader it builds (see the module docstring).

    sift_config: a sift config of sift_bench.sifting (or a dict of RelativeProbabilisticSiftConfig's fields). loss:
    the per-sample loss that scores candidates (and, for stale loss and InfoBatch, trains); default
    `LogitsCrossEntropyLoss`. sync: SiftingDataloader's, under DDP (None: the policy's setting). set_epochs: SageMaker's switch to train by
    `num_train_epochs` when the sifted loader has no length; accepted for SageMaker scripts and changes nothing
    here, since the loader the Trainer sees has the length of its candidate batches, so the Trainer always plans by
    its own `num_train_epochs` or `max_steps`. The sifter of the latest `train()` is `trainer.sifting.dataloader`.
    """
    if not isinstance(set_epochs, bool):
        raise TypeError(f"set_epochs must be a bool, got {set_epochs!r}")
    sifting = TrainerSifting(trainer, sift_config, loss, sync)
    build_loader, create_scheduler, compute_loss = (
        trainer.get_train_dataloader, trainer.create_scheduler, trainer.compute_loss)

    def get_train_dataloader():
        return sifting.train_dataloader(build_loader())

    def create_sifted_scheduler(num_training_steps, optimizer=None):
        trainer.lr_scheduler = sifting.drive(create_scheduler(num_training_steps, optimizer))
        return trainer.lr_scheduler

    def compute_sifted_loss(model, inputs, return_outputs=False, num_items_in_batch=None):
        return sifting.compute_loss(compute_loss, model, inputs, return_outputs, num_items_in_batch)

    trainer.sifting = sifting
    trainer.get_train_dataloader = get_train_dataloader
    trainer.create_scheduler = create_sifted_scheduler
    trainer.compute_loss = compute_sifted_loss


class SiftingTrainer(Trainer):
    """A `transformers.Trainer` that sifts its training data: `enable_sifting` as a class.

    sift_config, sift_loss, sift_sync: `enable_sifting`'s sift_config, loss and sync; every other argument is the
    Trainer's. The sifter of the latest `train()` is `self.sifting.dataloader`.
    """

    def __init__(self, *args, sift_config: SiftPolicy, sift_loss: Loss | None = None, sift_sync: str | None = None,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sifting = TrainerSifting(self, sift_config, sift_loss, sift_sync)

    def get_train_dataloader(self):
        return self.sifting.train_dataloader(super().get_train_dataloader())

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        self.lr_scheduler = self.sifting.drive(super().create_scheduler(num_training_steps, optimizer))
        return self.lr_scheduler

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        return self.sifting.compute_loss(super().compute_loss, model, inputs, return_outputs, num_items_in_batch)
