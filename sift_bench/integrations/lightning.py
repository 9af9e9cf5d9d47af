"""Smart sifting for Lightning: wrap the ``LightningDataModule``, keep the ``LightningModule`` as it is.

    trainer.fit(model, datamodule=SiftingDataModule(datamodule, sift_config))

Why a data module and not a callback: sifting changes what the training loader yields, and a data module
is the one public place where Lightning asks for that loader (``train_dataloader()``). A callback can only
reach the loader through the fit loop's private state, and would lose it at every reload. The wrapper
delegates every other hook (setup, the evaluation loaders, batch transfer, state) to the wrapped module,
and adds one callback to the trainer for the learning-rate schedule (below).

What the wrapper does with Lightning, and why:

* **The loader.** ``train_dataloader()`` returns a ``SiftingDataloader`` over the wrapped module's training
  loader, scoring candidates with the ``LightningModule`` itself (``trainer.lightning_module``).
* **Epochs.** A ``SiftingDataloader`` has no ``len()``, so Lightning treats it as an iterable of unknown
  length: each epoch ends when the sifter is exhausted, training ends after ``max_epochs``, and validation
  runs at each epoch's end (with ``val_check_interval=1.0``; a fraction of an epoch has no meaning here).
* **The learning-rate schedule.** For such an iterable ``trainer.estimated_stepping_batches`` returns
  ``max_steps``, -1 by default, so a ``OneCycleLR(total_steps=trainer.estimated_stepping_batches)`` fails, and a
  schedule over the unsifted step count would never finish, since a sifted epoch takes fewer optimizer steps.
  So while ``configure_optimizers`` runs, the wrapper sets ``max_steps`` to the planned steps of an unsifted
  run (``ceil(len(loader) / accumulate_grad_batches) * max_epochs``), and resets it once the optimizers are
  configured (``on_fit_start``: left set, Lightning would treat a resumed run as stopped mid-epoch). Its
  callback steps every ``interval="step"`` scheduler by training progress: after each training batch, to the
  optimizer steps an unsifted run would have taken for the candidate batches drawn so far. The schedule then
  runs over samples seen, as ``sift_bench.schedule`` does, and ends on the last batch of the last epoch.
  Lightning no longer steps those schedulers itself; epoch-interval and plateau schedulers are left to it.
  Read ``estimated_stepping_batches`` in ``configure_optimizers``, as Lightning's documentation does; elsewhere
  it is -1, as for any loader without ``len()``. Training is planned in epochs: a ``Trainer(max_steps=...)``
  set by the user is refused.
* **DDP.** Lightning replaces the sampler of a ``DataLoader`` it is handed, but the sifter is not one, so
  ``use_distributed_sampler`` does not touch it. The wrapper shards the wrapped loader itself:
  a shuffling loader gets a ``ShardedRandomSampler`` (one permutation per epoch, the same on every rank), a
  sequential one a non-shuffling ``DistributedSampler``; a loader that already has a ``DistributedSampler``
  keeps it (and gets ``set_epoch`` each epoch). The sifter then yields the same number of batches on every
  rank (``sift_bench.sifting``, "Data-parallel training"), which Lightning's DDP needs and does not ensure.
* **Policies.** Those that need no training losses: ``RelativeProbabilisticSiftConfig`` (scored by the
  ``LightningModule``), ``RandomSiftConfig``. ``StaleLossSiftConfig`` and ``InfoBatchSiftConfig``
  (``uses_training_losses``) are refused with an error naming them: they need each sample's training loss
  reported back, and InfoBatch its weights inside the loss, while a ``training_step`` returns one reduced loss.
"""

from __future__ import annotations

import atexit
import math
import os
import time
from typing import Any, Iterator

import lightning.pytorch as pl
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities.data import _update_dataloader
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, SequentialSampler

from sift_bench.data.sharding import ShardedRandomSampler
from sift_bench.distributed import collect_models_before_leaving
from sift_bench.sifting import Loss, SiftingDataloader, SiftPolicy, hooks

# The wrapped module's hooks that Lightning may call, other than train_dataloader.
_DELEGATED_HOOKS = (
    "prepare_data",
    "setup",
    "teardown",
    "val_dataloader",
    "test_dataloader",
    "predict_dataloader",
    "transfer_batch_to_device",
    "on_before_batch_transfer",
    "on_after_batch_transfer",
    "state_dict",
    "load_state_dict",
    "on_exception",
)
# Lightning steps a scheduler when (batch_idx + 1) % frequency == 0: with this frequency, never.
_NEVER = 2**62


class CrossEntropyLoss(Loss):
    """Per-sample cross-entropy of ``model(x)`` (logits) against ``y``, for batches ``(x, y, ...)``.

    Runs in the trainer's precision context (autocast under ``precision="bf16-mixed"``), as the training
    forward pass does.
    """

    def loss(self, model, transformed_batch, original_batch=None):
        inputs, targets = original_batch[0], original_batch[1]
        device = model.device
        with model.trainer.precision_plugin.forward_context():
            logits = model(inputs.to(device))
        return F.cross_entropy(logits.float(), targets.to(device), reduction="none")


class _CandidateBatches:
    """The wrapped training loader, counting the candidate batches the sifter has drawn this epoch."""

    def __init__(self, loader: Any, trainer: pl.Trainer) -> None:
        self.loader = loader
        self.trainer = trainer
        self.batch_size = loader.batch_size
        self.drop_last = getattr(loader, "drop_last", False)
        self.drawn = 0

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        sampler = getattr(self.loader, "sampler", None)
        if isinstance(sampler, DistributedSampler):
            # Lightning calls set_epoch on the loader it holds, the sifter, which has no sampler.
            sampler.set_epoch(self.trainer.current_epoch)
        self.drawn = 0
        for batch in self.loader:
            self.drawn += 1
            yield batch


def _data_parallel_rank(process_group) -> tuple[int, int]:
    """(rank, world size) in ``process_group`` (the default group when None); (0, 1) without one."""
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    group = process_group if process_group is not None else dist.group.WORLD
    return dist.get_rank(group), dist.get_world_size(group)


def _sharded(loader: Any, rank: int, world_size: int, seed: int, epoch: int) -> DataLoader:
    """``loader`` rebuilt to draw only this rank's shard, as Lightning would for a loader it is handed."""
    if not isinstance(loader, DataLoader):
        raise TypeError(
            f"under DDP SiftingDataModule shards the training loader itself and needs a torch DataLoader, "
            f"got {type(loader).__name__}"
        )
    sampler = loader.sampler
    if isinstance(sampler, DistributedSampler):
        return loader
    if isinstance(sampler, RandomSampler):
        shard = ShardedRandomSampler(len(loader.dataset), rank, world_size, seed)
        shard.epoch = epoch  # a reload or a resume goes on with this epoch's permutation
    elif isinstance(sampler, SequentialSampler):
        shard = DistributedSampler(loader.dataset, num_replicas=world_size, rank=rank, shuffle=False)
    else:
        raise ValueError(
            f"under DDP SiftingDataModule shards a training loader with shuffle=True or False; its "
            f"{type(sampler).__name__} cannot be sharded: give the loader a DistributedSampler of your own"
        )
    # Lightning's own rebuild, which it uses to insert its DistributedSampler: keeps every other argument.
    return _update_dataloader(loader, shard, mode=RunningStage.TRAINING)


class SiftingDataModule(pl.LightningDataModule):
    """``datamodule`` with its training loader sifted by ``sift_config``; every other hook is the wrapped module's.

    datamodule: the user's ``LightningDataModule``; its ``train_dataloader()`` must return one loader with a
        ``len()`` and an int ``batch_size`` (a ``DataLoader`` under DDP).
    sift_config: a policy that needs no training losses (``RelativeProbabilisticSiftConfig``,
        ``RandomSiftConfig``; ``uses_training_losses`` False).
    loss: scores a candidate batch with the ``LightningModule``; default ``CrossEntropyLoss`` (forward returns
        logits, batches are ``(x, y, ...)``).
    seed: seeds the sifter's draws and, under DDP, the shard permutation every rank shares; default
        ``PL_GLOBAL_SEED`` (set by ``seed_everything``) or 0, as Lightning's own DistributedSampler.
    sync, process_group: as for ``SiftingDataloader``; the process group also defines the shards.

    After ``train_dataloader()``: ``sifter`` (its ``stats``), ``planned_steps`` and ``steps_per_epoch``.
    """

    def __init__(
        self,
        datamodule: pl.LightningDataModule,
        sift_config: SiftPolicy,
        loss: Loss | None = None,
        *,
        seed: int | None = None,
        sync: str | None = None,
        process_group=None,
    ) -> None:
        if not isinstance(sift_config, SiftPolicy):
            raise TypeError(
                f"sift_config must be a policy (a sift_bench.sifting.SiftPolicy such as "
                f"RelativeProbabilisticSiftConfig or RandomSiftConfig), got {type(sift_config).__name__}"
            )
        if sift_config.uses_training_losses:
            raise ValueError(
                f"SiftingDataModule does not support {type(sift_config).__name__}: it decides from each "
                f"sample's training loss, which the training loop must report per sample (record_losses) and "
                f"weight (batch_weights), and a LightningModule's training_step returns one reduced loss. Use "
                f"RelativeProbabilisticSiftConfig or RandomSiftConfig, or a plain training loop"
            )
        # Set before LightningDataModule.__init__, whose `self.trainer = None` goes through the setter below.
        self.datamodule = datamodule
        super().__init__()
        self.sift_config = sift_config
        self.loss = loss if loss is not None else CrossEntropyLoss()
        self.seed = seed if seed is not None else int(os.environ.get("PL_GLOBAL_SEED", 0))
        self.sync = sync
        self.process_group = process_group
        self.prepare_data_per_node = datamodule.prepare_data_per_node
        self.allow_zero_length_dataloader_with_multiple_devices = (
            datamodule.allow_zero_length_dataloader_with_multiple_devices
        )
        # The wrapped module's bound methods: Lightning's is_overridden() then sees what the wrapped module
        # defines, so an evaluation loader it lacks stays undefined here too.
        for hook in _DELEGATED_HOOKS:
            setattr(self, hook, getattr(datamodule, hook))
        self.schedule = SamplesSeenSchedule(self)
        self.sifter: SiftingDataloader | None = None
        self.candidates: _CandidateBatches | None = None
        self.steps_per_epoch = 0
        self.planned_steps = 0

    def __getattr__(self, name: str) -> Any:
        # The wrapped module's own attributes: a LightningModule may read self.trainer.datamodule.num_classes.
        wrapped = self.__dict__.get("datamodule")
        if wrapped is None:
            raise AttributeError(name)
        return getattr(wrapped, name)

    @property
    def trainer(self) -> pl.Trainer | None:
        return self._trainer

    @trainer.setter
    def trainer(self, trainer: pl.Trainer | None) -> None:
        self._trainer = trainer
        self.datamodule.trainer = trainer  # the wrapped module's hooks may read self.trainer

    def train_dataloader(self) -> SiftingDataloader:
        trainer = self.trainer
        loader = self.datamodule.train_dataloader()
        rank, world_size = _data_parallel_rank(self.process_group)
        if world_size > 1:
            loader = _sharded(loader, rank, world_size, self.seed, trainer.current_epoch)
        try:
            candidate_batches = len(loader)
        except TypeError:
            raise TypeError(
                f"SiftingDataModule plans the epochs and the learning-rate schedule from len() of the "
                f"training loader; {type(self.datamodule).__name__}.train_dataloader() returned a "
                f"{type(loader).__name__} without one"
            ) from None
        self._plan_steps(trainer, candidate_batches)
        self.candidates = _CandidateBatches(loader, trainer)
        self.sifter = SiftingDataloader(
            self.sift_config,
            self.candidates,
            self.loss,
            trainer.lightning_module,
            seed=self.seed,
            num_epochs=trainer.max_epochs,
            sync=self.sync,
            process_group=self.process_group,
        )
        if self.schedule not in trainer.callbacks:
            trainer.callbacks.append(self.schedule)
        return self.sifter

    def _plan_steps(self, trainer: pl.Trainer, candidate_batches: int) -> None:
        if trainer.max_epochs is None or trainer.max_epochs < 0:
            raise ValueError(
                f"SiftingDataModule plans training in epochs: set Trainer(max_epochs=...), "
                f"got max_epochs={trainer.max_epochs}"
            )
        steps_per_epoch = math.ceil(candidate_batches / trainer.accumulate_grad_batches)
        planned_steps = steps_per_epoch * trainer.max_epochs
        if trainer.max_steps != -1:
            raise ValueError(
                f"SiftingDataModule plans training in epochs: Trainer(max_steps={trainer.max_steps}) would count "
                f"sifted steps, each of which draws more data than a plain one; leave max_steps unset "
                f"(trainer.estimated_stepping_batches then gives the {planned_steps} steps of the planned epochs)"
            )
        self.steps_per_epoch = steps_per_epoch
        self.planned_steps = planned_steps
        if not trainer.optimizers:
            # Asked by trainer.estimated_stepping_batches inside configure_optimizers, which returns max_steps for
            # a loader without len(). Reset at on_fit_start: left set, Lightning would resume runs mid-epoch.
            trainer.fit_loop.epoch_loop.max_steps = planned_steps

    def steps_done(self, epoch: int) -> int:
        """The optimizer steps an unsifted run would have taken for the candidate batches drawn by now."""
        this_epoch = self.candidates.drawn * self.steps_per_epoch // len(self.candidates)
        return min(self.planned_steps, epoch * self.steps_per_epoch + this_epoch)


class SamplesSeenSchedule(pl.Callback):
    """Steps the step-interval schedulers by training progress (candidate batches drawn), not by sifted steps.

    ``SiftingDataModule`` adds it to the trainer; a schedule then ends with the last epoch however much is sifted.
    """

    def __init__(self, datamodule: SiftingDataModule) -> None:
        self.datamodule = datamodule
        self.driven: list[tuple[Any, int]] = []  # (scheduler config, its own frequency)
        self.steps_taken: list[int] = []

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if dist.is_available() and dist.is_initialized():
            # Lightning destroys the process group at exit with the trainer's DDP model still in a reference cycle,
            # which can abort a gloo rank (see collect_models_before_leaving). atexit runs the last registered
            # first, so this runs before Lightning's destroy; unregistering first keeps it to one registration.
            atexit.unregister(collect_models_before_leaving)
            atexit.register(collect_models_before_leaving)
        if trainer.max_steps == self.datamodule.planned_steps:
            trainer.fit_loop.epoch_loop.max_steps = -1  # the optimizers are configured; training counts epochs

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not pl_module.automatic_optimization and trainer.lr_scheduler_configs:
            raise RuntimeError(
                "SiftingDataModule drives learning-rate schedulers under automatic optimization only: with manual "
                "optimization the module steps them itself, once per sifted step, and the schedule would not finish"
            )
        self.driven, self.steps_taken = [], []
        for config in trainer.lr_scheduler_configs:
            if config.interval != "step" or config.reduce_on_plateau:
                continue
            self.driven.append((config, config.frequency))
            self.steps_taken.append(getattr(config.scheduler, "last_epoch", 0))
            config.frequency = _NEVER

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == 0:
            return  # before the first optimizer step (gradient accumulation): torch warns on a scheduler step
        steps = self.datamodule.steps_done(trainer.current_epoch)
        for index, (config, frequency) in enumerate(self.driven):
            while self.steps_taken[index] < steps // frequency:
                pl_module.lr_scheduler_step(config.scheduler, None)
                self.steps_taken[index] += 1


def _scalars(metrics: Any) -> dict[str, float]:
    """The one-number entries of a metrics mapping (tensors of one element included), as floats."""
    scalars = {}
    for name, value in metrics.items():
        if hasattr(value, "numel") and value.numel() == 1:
            value = value.item()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            scalars[str(name)] = float(value)
    return scalars


class TrainingMetricsRecorder(pl.Callback):
    """SageMaker's Lightning callback (``smart_sifting.metrics.lightning``): the sifting counts and per-step latencies.

    After every training batch it logs on the step, through the module's own loggers (``pl_module.log_dict``):
    ``sifting_samples_seen``, ``sifting_samples_kept`` and ``sifting_pct_accepted`` of the training loader when it is
    a ``SiftingDataloader``; ``step_latency_s``, the batch's forward, backward and optimizer step; ``data_latency_s``,
    the wait for the batch since the previous one ended (loading and, for a sifted loader, its scoring pass and
    selection). Under ``python -m sift_bench.sagemaker`` it also hands them, and after every validation and at the
    end of training the metrics the module logged (``trainer.callback_metrics``), to the runner's MLflow run.
    SageMaker documents the callback's name and use, not which metrics it logs: these are sift_bench's choice.
    """

    def __init__(self) -> None:
        self._batch_started: float | None = None
        self._batch_ended: float | None = None
        self._data_latency = math.nan

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._batch_ended = time.perf_counter()  # the first batch's wait starts with the epoch

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        now = time.perf_counter()
        self._data_latency = now - self._batch_ended if self._batch_ended is not None else math.nan
        self._batch_started = now

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        now = time.perf_counter()
        metrics = {"step_latency_s": now - self._batch_started, "data_latency_s": self._data_latency}
        sifter = trainer.train_dataloader
        if isinstance(sifter, SiftingDataloader):
            stats = sifter.stats
            metrics.update(sifting_samples_seen=float(stats.samples_seen), sifting_samples_kept=float(stats.samples_kept),
                           sifting_pct_accepted=stats.pct_accepted)
        pl_module.log_dict(metrics, on_step=True, on_epoch=False, batch_size=1)
        watcher = hooks.current()
        if watcher is not None:
            watcher.log_metrics(metrics, step=trainer.global_step)
        self._batch_ended = time.perf_counter()

    def _hand_logged_metrics(self, trainer: pl.Trainer) -> None:
        watcher = hooks.current()
        if watcher is not None and not trainer.sanity_checking:
            watcher.log_metrics(_scalars(trainer.callback_metrics), step=trainer.global_step)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._hand_logged_metrics(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._hand_logged_metrics(trainer)
