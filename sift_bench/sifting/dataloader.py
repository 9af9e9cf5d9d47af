"""SiftingDataloader: wraps a data loader and yields full batches of the samples worth training on."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable, Iterator

import torch

from . import hooks
from .arguments import check_arguments, checked_losses, loader_batch_size
from .batch import (
    SiftingBatch,
    SiftingBatchTransform,
    check_sample_dimension,
    default_batch_transform,
)
from .config import as_sift_config
from .indexed import default_sample_ids
from .loss import Loss
from .memory import SampleLossMemory, checked_sample_ids
from .policy import Candidates, SeenCounter, SelectionContext, SiftPolicy
from .ranks import Ranks
from .refill import Refill
from .scoring import score
from .stats import SiftingStats

_END = object()  # the end of a loader's epoch
logger = logging.getLogger(__name__)


def _share(ranks: Ranks, losses: torch.Tensor) -> torch.Tensor:
    """Under global sync: the losses of every rank, in rank order, for a history all ranks share."""
    return torch.cat(ranks.gather(losses))


def _keep_local(losses: torch.Tensor) -> torch.Tensor:
    return losses


class SiftingDataloader:
    """An iterable used in place of ``orig_dataloader``, with no change to the training loop.

    Every epoch (every ``iter()``) draws the original batches and:

    * Delay: the first ``sift_delay`` yielded batches pass through untouched and unscored.
    * Scoring (policies that ``score``): one no-grad forward pass per original batch, the model in eval mode.
    * Selection: the policy's selector keeps or drops each candidate (``sift_bench.sifting.policy``);
      training-loss policies (``uses_training_losses``) decide from the losses the loop hands to
      ``training_loss`` (``record_losses`` and ``batch_weights()`` in one call).
    * Refill: kept samples are accumulated into batches of ``orig_dataloader.batch_size``, in the structure and
      types of an original batch; at most one smaller batch ends an epoch (none with ``drop_last``). No sample is
      yielded twice in an epoch; every sample is yielded or counted in ``stats.samples_sifted_out``.
    * Pass-through (``PassThroughSiftConfig``): every batch yielded untouched and counted, nothing scored.

    The exact semantics (the loss history, NaN losses, the memory of training losses, the delay across epochs)
    are in README.md, *Semantics* and *Policies that reuse the training loss*.

    All random draws come from one CPU ``torch.Generator`` seeded with ``seed``, so the same seed gives the same
    selections on any device. The loss history and the per-sample memory persist across epochs.

    ``len()`` is not defined: how many batches an epoch yields depends on the selections.
    ``len(orig_dataloader)`` is the number of candidate batches, and ``stats.samples_seen`` measures progress.

    The arguments, what each accepts and means: ``sift_bench.sifting.arguments``.
    """

    def __init__(
        self,
        sift_config: SiftPolicy,
        orig_dataloader: Any,
        loss_impl: Loss | None = None,
        model: torch.nn.Module | None = None,
        batch_transforms: SiftingBatchTransform | None = None,
        *,
        log_batch_data: bool = False,
        batch_format_index: int | None = None,
        seed: int | None = None,
        sample_ids: Callable[[Any], torch.Tensor] | None = None,
        num_samples: int | None = None,
        num_epochs: int | None = None,
        sync: str | None = None,
        process_group=None,
    ) -> None:
        sift_config = as_sift_config(sift_config)
        watcher = hooks.current()
        if watcher is not None and isinstance(sift_config, SiftPolicy):
            sift_config = watcher.policy(sift_config)
        if not isinstance(sift_config, SiftPolicy):
            raise TypeError(
                f"sift_config must be a policy (a subclass of sift_bench.sifting.SiftPolicy: a built-in "
                f"one or your own) or a dict of RelativeProbabilisticSiftConfig's fields, got {type(sift_config).__name__}"
            )
        base_config = sift_config.loss_based_sift_config.sift_config
        sync = base_config.sync if sync is None else sync  # an argument overrides the policy's setting
        batch_format_index = check_arguments(
            sift_config, orig_dataloader, loss_impl, model, batch_transforms, log_batch_data=log_batch_data,
            batch_format_index=batch_format_index, seed=seed, sample_ids=sample_ids, num_samples=num_samples,
            num_epochs=num_epochs, sync=sync)

        self.sift_config, self.orig_dataloader = sift_config, orig_dataloader
        self.loss_impl, self.model = loss_impl, model
        self.batch_transforms = batch_transforms
        self.sample_ids = default_sample_ids if sample_ids is None else sample_ids
        self.num_samples = None if num_samples is None else int(num_samples)
        self.num_epochs = None if num_epochs is None else int(num_epochs)
        self.batch_size, self.drop_last = loader_batch_size(orig_dataloader)
        self.log_batch_data = log_batch_data
        self.batch_format_index = batch_format_index
        # With log_batch_data: one dict per sifted candidate batch (see _log_batch).
        self.batch_log: list[dict[str, Any]] = []
        self._candidate_batches_total = 0
        self.sift_delay, self.repeat_delay_per_epoch = base_config.sift_delay, base_config.repeat_delay_per_epoch
        self.sync = sync
        self.stats = SiftingStats()
        self._start_policy(seed, process_group)
        # The batch just yielded, for batch_weights() and record_losses().
        self._yielded_ids: torch.Tensor | None = None
        self._ids_device: torch.device | None = None  # where the batches' ids live
        self._losses_recorded = False
        self._default_transforms: dict[type, SiftingBatchTransform] = {}
        self._counting_transforms: dict[type, SiftingBatchTransform] = {}
        if watcher is not None:
            watcher.created(self)

    def _start_policy(self, seed: int | None, process_group) -> None:
        """The ranks, the one generator, the per-sample memory and the policy's selector, with the counts they read."""
        self.ranks = Ranks(process_group)
        # Under global sync every rank's losses go into one history and memory; else each rank keeps its own.
        self._shares = self.ranks.distributed and self.sync == "global"
        if seed is None:
            seed = int(torch.randint(0, 2**62, (), dtype=torch.int64))
        self.generator = torch.Generator().manual_seed(self.ranks.seed_for(seed))
        sift_config = self.sift_config
        self.sample_memory = (SampleLossMemory(self.num_samples, with_weights=sift_config.weights_losses)
                              if sift_config.tracks_samples() else None)
        # The delay's own count: stats.reset() must not restart the delay.
        self._batches_yielded_total = 0
        # The policies' own count of candidates drawn (InfoBatch's annealing), for the same reason.
        self._seen = SeenCounter()
        # Epochs are iter() calls; -1 until the first one starts.
        self.epoch = -1
        # The policy's state and decision (sift_bench.sifting.policy).
        # Nothing in the context refers back to the loader: a reference cycle would keep the loader, and under DDP
        # its process group, alive until interpreter shutdown, where gloo's teardown aborts the process.
        self.selector = sift_config.selector(SelectionContext(
            generator=self.generator, share=partial(_share, self.ranks) if self._shares else _keep_local,
            memory=self.sample_memory, num_samples=self.num_samples, num_epochs=self.num_epochs, seen=self._seen,
        ))

    @property
    def uses_training_losses(self) -> bool:
        """True when the training loop must hand each batch's per-sample losses to ``training_loss``."""
        return self.sift_config.uses_training_losses

    @property
    def loss_history(self):
        """The policy's history of recent losses (a ``LossHistory``), or None if it keeps none."""
        return self.selector.loss_history

    def _require_training_losses(self, method: str) -> None:
        if not self.uses_training_losses:
            raise RuntimeError(f"{method}() is for the policies that decide from training losses (StaleLossSiftConfig, "
                               f"InfoBatchSiftConfig); this SiftingDataloader uses {type(self.sift_config).__name__} "
                               "(uses_training_losses is False)")
        if self._yielded_ids is None:
            raise RuntimeError(f"{method}() was called before any batch was yielded")

    def batch_weights(self) -> torch.Tensor:
        """The loss weights [n] (float32, on the device of the batch's ids) of the batch just yielded.

        Multiply the per-sample training losses by them before reducing. All
        ones, except under InfoBatch for the kept below-mean samples:
        ``1 / (1 - prune_ratio)``.
        """
        self._require_training_losses("batch_weights")
        ids = self._yielded_ids
        if self.sift_config.weights_losses:
            return self.sample_memory.weights[ids].to(self._ids_device)
        return torch.ones(ids.numel(), dtype=torch.float32, device=self._ids_device)

    def record_losses(self, losses: torch.Tensor) -> None:
        """Report the per-sample training losses [n] or [n, 1] of the batch just yielded, before weighting.

        They are remembered by sample id, with the current epoch (the number
        of ``iter()`` calls so far, minus one). A non-finite loss is not
        remembered: the sample keeps what it had. Call once per yielded batch,
        pass-through batches of the delay included.
        """
        self._require_training_losses("record_losses")
        if self._losses_recorded:
            raise RuntimeError(
                "record_losses() was already called for the batch just yielded; call it once per batch"
            )
        ids = self._yielded_ids
        losses = checked_losses(losses, ids.numel(), "record_losses(losses) needs")
        if self._shares:
            # One gather for both: float64 holds every sample id below 2**53 exactly.
            pieces = self.ranks.gather(torch.cat((ids.to(torch.float64), losses.to(torch.float64))))
            ids = torch.cat([piece[: piece.numel() // 2] for piece in pieces]).to(torch.int64)
            losses = torch.cat([piece[piece.numel() // 2 :] for piece in pieces]).to(torch.float32)
        self.sample_memory.remember(ids, losses, self.epoch)
        self._losses_recorded = True

    def training_loss(self, losses: torch.Tensor) -> torch.Tensor:
        """The loss to backpropagate for the batch just yielded, under a policy that decides from training losses:
        its per-sample ``losses`` [n] recorded (``record_losses``) and averaged under ``batch_weights()``."""
        self.record_losses(losses)
        return (losses.reshape(-1) * self.batch_weights().to(losses.device, losses.dtype)).mean()

    def _transform_for(self, batch: Any) -> SiftingBatchTransform:
        if self.batch_transforms is not None:
            return self.batch_transforms
        transform = self._default_transforms.get(type(batch))
        if transform is None:
            transform = default_batch_transform(batch, self.batch_format_index)
            if self.batch_format_index is None:
                check_sample_dimension(batch, self.batch_size)
            transform.transform(batch)  # fail at the first batch, not when the delay ends
            self._default_transforms[type(batch)] = transform
        return transform

    def _candidate_ids(self, batch: Any, n: int) -> torch.Tensor:
        ids = self.sample_ids(batch)
        if isinstance(ids, torch.Tensor):
            self._ids_device = ids.device
        return checked_sample_ids(ids, n, self.num_samples)

    def _yielding(self, ids: torch.Tensor | None) -> None:
        self.stats.batches_yielded += 1
        self.stats.sync_seconds += self.ranks.take_seconds()
        self._batches_yielded_total += 1
        if ids is not None:
            self._yielded_ids = ids
            self._losses_recorded = False

    def _candidates(self) -> Iterator[tuple[Any, int | None]]:
        """The original loader's batches, each with its candidates over all ranks (None in one process).

        Under DDP only while every rank has a batch: the ranks must take the same steps. Samples a rank
        drew past that point count as seen and left over.
        """
        if not self.ranks.distributed:
            for batch in self.orig_dataloader:
                yield batch, None
            return
        batches = iter(self.orig_dataloader)
        while True:
            batch = next(batches, _END)
            n = 0 if batch is _END else self._transform_for(batch).sample_count(batch)
            rows = self.ranks.gather_rows([int(batch is not _END), n])
            if not bool(rows[:, 0].all()):
                drawn = int(rows[:, 1].sum())
                self._count(drawn, 0)  # seen, none of them trained on
                self.stats.samples_left_over += drawn
                return
            yield batch, int(rows[:, 1].sum())

    def _agree(self, pending: int, n: int, n_kept: int) -> tuple[int, int]:
        """(full batches every rank can yield now, samples kept over all ranks) after a candidate batch."""
        if not self.ranks.distributed:
            return pending // self.batch_size, n_kept
        rows = self.ranks.gather_rows([pending, n_kept])
        return int(rows[:, 0].min()) // self.batch_size, int(rows[:, 1].sum())

    def _leave_over(self, samples: int) -> None:
        """Count ``samples`` as seen but not trained on (like the last batch a ``drop_last`` loader leaves out)."""
        self.stats.samples_sifted_out += samples
        self.stats.samples_left_over += samples

    def _log_batch(self, n: int, losses: torch.Tensor | None, keep: torch.Tensor) -> None:
        """With log_batch_data: what SageMaker says it logs, the details of the batches kept or sifted."""
        record = {
            "epoch": self.epoch,
            "candidate_batch": self._candidate_batches_total,
            "samples": n,
            "kept": int(keep.sum()),
            "losses": None if losses is None else losses.tolist(),
            "kept_mask": keep.tolist(),
        }
        self.batch_log.append(record)
        logger.info("sifting epoch %d candidate batch %d: kept %d of %d samples", record["epoch"],
                    record["candidate_batch"], record["kept"], n)

    def _sample_count(self, batch: Any) -> int:
        """Samples in a batch passed through, by the cheapest transform that can count them."""
        transform = self._counting_transforms.get(type(batch))
        if transform is None:
            try:
                transform = default_batch_transform(batch, self.batch_format_index)
            except (TypeError, ValueError):
                transform = self._transform_for(batch)  # a type only the user's transform knows
            self._counting_transforms[type(batch)] = transform
        return transform.sample_count(batch)

    def _passing_through(self) -> Iterator[Any]:
        for batch in self.orig_dataloader:
            n = self._sample_count(batch)
            self._count(n, n)
            self._yielding(None)
            yield batch

    def _count(self, seen: int, kept: int) -> None:
        """Candidates drawn (over all ranks) and kept: the stats, and the policies' own count of seen (which, unlike
        the stats, no `stats.reset()` restarts). The one place either count of seen grows."""
        self.stats.samples_seen += seen
        self.stats.samples_kept += kept
        self.stats.samples_sifted_out += seen - kept
        self._seen.total += seen

    def _delayed(self, batch: Any, n: int, seen_everywhere: int | None) -> Any:
        """A batch of the delay: counted (seen and kept), its ids noted for the training-loss policies, unscored."""
        ids = None
        if self.sift_config.tracks_samples():
            ids = self._candidate_ids(batch, n)
            if self.sift_config.weights_losses:
                self.sample_memory.weights[ids] = 1.0
        seen = n if seen_everywhere is None else seen_everywhere
        self._count(seen, seen)
        self._yielding(ids)
        return batch

    def _decide(self, batch: Any, sifting_batch: SiftingBatch, ids: torch.Tensor | None) -> torch.Tensor:
        """The policy's keep mask of one candidate batch, scored first when the policy scores."""
        n = len(sifting_batch)
        config = self.sift_config
        losses = score(self.loss_impl, self.model, sifting_batch, batch, self.stats) if config.scores else None
        on_demand = (partial(score, self.loss_impl, self.model, sifting_batch, batch, self.stats)
                     if config.scores_on_demand else None)
        keep = self.selector.keep(Candidates(n=n, losses=losses, ids=ids, score=on_demand))
        if self.log_batch_data:
            self._log_batch(n, losses, keep)
        self._candidate_batches_total += 1
        return keep

    def _end_epoch(self, refill: Refill, transform: SiftingBatchTransform | None) -> Iterator[Any]:
        """The kept samples that wait when the candidates run out: the last, smaller batch, or counted out."""
        stats = self.stats
        if self.ranks.distributed:
            # Kept samples that never filled a batch on every rank: counted, not trained on, since a rank
            # that yields one batch more than the others would wait forever in DDP's gradient all-reduce.
            left = int(self.ranks.gather_rows([refill.pending])[:, 0].sum())
            stats.samples_kept -= left
            self._leave_over(left)
            stats.sync_seconds += self.ranks.take_seconds()
            return
        if refill.pending == 0:
            return
        if self.drop_last:
            # Left out like the original loader's last batch: they were not trained on.
            stats.samples_kept -= refill.pending
            stats.samples_sifted_out += refill.pending
            return
        last_batch, last_ids = refill.rest()
        out = transform.reverse_transform(last_batch)
        self._yielding(last_ids)
        yield out

    def __iter__(self) -> Iterator[Any]:
        self.epoch += 1
        if self.sift_config.passes_through:
            yield from self._passing_through()
            return
        tracking = self.sift_config.tracks_samples()
        self.selector.start_epoch(self.epoch)
        batches_yielded_this_epoch = 0
        refill = Refill(self.batch_size, tracking)
        transform: SiftingBatchTransform | None = None

        for batch, seen_everywhere in self._candidates():
            transform = self._transform_for(batch)
            delay_count = batches_yielded_this_epoch if self.repeat_delay_per_epoch else self._batches_yielded_total
            if delay_count < self.sift_delay:
                batches_yielded_this_epoch += 1
                yield self._delayed(batch, transform.sample_count(batch), seen_everywhere)
                continue

            sifting_batch = transform.transform(batch)
            n = len(sifting_batch)
            if n == 0 and not self.ranks.distributed:
                continue
            ids = self._candidate_ids(batch, n) if tracking else None
            keep = self._decide(batch, sifting_batch, ids)
            n_kept = int(keep.sum())
            refill.add(sifting_batch, ids, keep, n_kept)
            ready, kept = self._agree(refill.pending, n, n_kept)
            self._count(n if seen_everywhere is None else seen_everywhere, kept)
            for _ in range(ready):
                ready_batch, ready_ids = refill.take()
                batches_yielded_this_epoch += 1
                out = transform.reverse_transform(ready_batch)
                self._yielding(ready_ids)
                yield out

        yield from self._end_epoch(refill, transform)
