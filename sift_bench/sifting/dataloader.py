"""SiftingDataloader: wraps a data loader and yields full batches of the samples worth training on."""

from __future__ import annotations

import logging
import numbers
import time
from functools import partial
from typing import Any, Callable, Iterator

import torch

from . import hooks
from .batch import (
    SiftingBatch,
    SiftingBatchTransform,
    check_sample_dimension,
    checked_batch_format_index,
    default_batch_transform,
)
from .config import as_sift_config
from .indexed import default_sample_ids
from .loss import Loss
from .memory import SampleLossMemory, checked_sample_ids
from .policy import Candidates, SeenCounter, SelectionContext, SiftPolicy
from .ranks import SYNC_MODES, Ranks
from .stats import SiftingStats

_END = object()  # the end of a loader's epoch
logger = logging.getLogger(__name__)


def _batch_sampler_with_size(orig_dataloader: Any) -> Any:
    """The loader's batch sampler that knows its batch size, unwrapping accelerate's (SkipBatchSampler); or None."""
    sampler = getattr(orig_dataloader, "batch_sampler", None)
    while sampler is not None and getattr(sampler, "batch_size", None) is None:
        sampler = getattr(sampler, "batch_sampler", None)
    return sampler


def _loader_batch_size(orig_dataloader: Any) -> tuple[int, bool]:
    """(batch size, drop_last) of the loader: its own, or its batch sampler's when it batches through one."""
    batch_size = getattr(orig_dataloader, "batch_size", None)
    drop_last = getattr(orig_dataloader, "drop_last", False)
    if batch_size is None:
        # A DataLoader built with batch_sampler=, such as the DataLoaderShard that accelerate makes inside a Hugging
        # Face Trainer, has batch_size None: the batch sampler holds the size, and drops the last batch or not.
        sampler = _batch_sampler_with_size(orig_dataloader)
        if sampler is not None:
            batch_size, drop_last = sampler.batch_size, getattr(sampler, "drop_last", False)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            f"orig_dataloader.batch_size must be an int >= 1 (the size of the batches "
            f"SiftingDataloader refills), got {batch_size!r} from a "
            f"{type(orig_dataloader).__name__} (nor has it a batch_sampler with an int batch_size); "
            f"build it with batch_size= or a batch_sampler that has a batch_size, or give your loader "
            f"a batch_size attribute"
        )
    return batch_size, bool(drop_last)


def _checked_losses(losses: Any, n: int, subject: str) -> torch.Tensor:
    """``losses`` as a float32 CPU tensor of shape [n], or an error saying what was wrong.

    subject: who must provide them, e.g. "MyLoss.loss must return".
    """
    if not isinstance(losses, torch.Tensor):
        raise TypeError(
            f"{subject} a torch.Tensor of per-sample losses, got {type(losses).__name__}"
        )
    if tuple(losses.shape) not in ((n,), (n, 1)):
        raise ValueError(
            f"{subject} one loss per sample, of shape [n] or [n, 1] "
            f"with n = {n}, got shape {list(losses.shape)}"
        )
    # The copy to the CPU also waits for the device, so scoring_seconds is true wall time.
    return losses.detach().reshape(n).to("cpu", torch.float32)


def _share(ranks: Ranks, losses: torch.Tensor) -> torch.Tensor:
    """Under global sync: the losses of every rank, in rank order, for a history all ranks share."""
    return torch.cat(ranks.gather(losses))


def _keep_local(losses: torch.Tensor) -> torch.Tensor:
    return losses


def _is_int(value: Any) -> bool:
    # bool is an int subclass, but num_epochs=True is a typo, not one epoch.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class SiftingDataloader:
    """An iterable used in place of ``orig_dataloader``, with no change to the training loop.

    Every epoch (every ``iter()``) draws the original batches and:

    * Delay: the first ``sift_delay`` yielded batches (counted since training
      began, across epochs, or since the epoch began when
      ``repeat_delay_per_epoch``) pass through untouched, the very same
      objects, and are not scored. Their samples count as seen and kept.
    * Scoring (``RelativeProbabilisticSiftConfig``): one forward pass per
      original batch, ``loss_impl.loss(model, sifting_batch, batch)``, under
      ``torch.no_grad()`` with the model in eval mode, so that BatchNorm
      running statistics are not updated and dropout does not make the loss
      random. Each module's previous mode is restored afterwards, also when the
      loss raises. The loss must have shape ``[n]`` or ``[n, 1]``.
    * Selection: a sample with loss ``l`` is kept with probability
      ``p ** beta_value``, ``p`` the fraction of the loss history at or below
      ``l``. The history holds the last ``loss_history_length`` losses; each
      batch is compared with the history as it stood before it, then its losses
      are appended. While the history is empty, everything is kept. A NaN or
      infinite loss keeps its sample and is not appended to the history.
      ``RandomSiftConfig`` instead keeps each sample with probability
      ``keep_fraction`` and never calls the loss.
    * Training-loss policies (``StaleLossSiftConfig``, ``InfoBatchSiftConfig``;
      ``uses_training_losses`` is True): no scoring pass, the loss is never
      called. Each sample is decided from its last training loss, which the
      training loop reports back after every yielded batch with
      ``record_losses(losses)``, having weighted its loss with
      ``batch_weights()``. Samples are identified by ``sample_ids(batch)``.
      Stale loss ranks a candidate's remembered loss among the remembered
      losses of the last ``loss_history_length`` candidates (kept or not);
      InfoBatch compares it with the mean of all remembered losses, taken at
      each ``iter()``. A sample with no usable remembered loss is kept.
    * Refill: kept samples are accumulated until ``orig_dataloader.batch_size``
      of them are ready, then yielded in the structure and types of an original
      batch. Every yielded batch has that size except at most one smaller batch
      at the end of an epoch, left out when the original loader has
      ``drop_last``. Within an epoch no sample is yielded twice, and every
      sample is either yielded or counted in ``stats.samples_sifted_out``.

    * Pass-through (``PassThroughSiftConfig``, the baseline a harness may put
      in place of the script's config): every batch is yielded untouched and
      counted, nothing is scored.

    All random draws come from one CPU ``torch.Generator`` seeded with
    ``seed``, so the same seed gives the same selections on any device. The loss
    history and the per-sample memory persist across epochs.

    ``len()`` is not defined: how many batches an epoch yields depends on the
    selections. ``len(orig_dataloader)`` is the number of candidate batches, and
    ``stats.samples_seen`` measures training progress.

    orig_dataloader: re-iterable (one ``iter()`` per epoch), with an int
        ``batch_size`` and optionally ``drop_last`` (default False). Batches may
        already be on the model's device.
    loss_impl, model: the scoring loss and the model, required by
        ``RelativeProbabilisticSiftConfig`` only; the other policies never call them.
    batch_transforms: a ``SiftingBatchTransform``; by default one is chosen per
        batch type for a tensor, a tuple or list of tensors, or a dict of
        tensors (a Hugging Face ``BatchEncoding`` too).
    log_batch_data: record every sifted candidate batch (epoch, index, each
        sample's loss and whether it was kept) in ``batch_log`` and log one line
        per batch (logger ``sift_bench.sifting.dataloader``, INFO). Its memory
        grows with the samples seen: for a pilot run, as SageMaker advises.
    batch_format_index: which dimension of a batch runs over its samples, for
        the default transforms (SageMaker's name): None (default) takes a
        tensor's dimension 0 and a list or tuple's dimension 1 (each element a
        column); 0 reads a list or tuple as a list of samples; 1 takes a
        tensor's samples along its dimension 1.
    seed: seeds the generator of all sampling decisions; None draws the seed from
        torch's global generator, so ``torch.manual_seed`` alone makes a run
        repeatable (as it does for a ``DataLoader`` without a generator).
    sample_ids: batch -> integer tensor [n] of sample ids in [0, num_samples),
        for the training-loss policies; default ``default_sample_ids`` (the last
        element of a tuple batch, ``batch["sample_id"]`` of a dict batch, as
        ``IndexedDataset`` makes them).
    num_samples: the data set's size, required by the training-loss policies:
        their per-sample memory is preallocated with one entry per sample.
    num_epochs: the planned number of epochs, required by
        ``InfoBatchSiftConfig``: annealing starts once
        ``(1 - anneal_fraction) * num_epochs * num_samples`` samples were seen.
    sync, process_group: data-parallel training (an initialised
        ``torch.distributed`` group of more than one rank; otherwise ignored).
        Each rank wraps the loader of its own shard and keeps its own samples.
        Every rank yields the same number of batches per epoch: after each
        candidate batch the ranks agree how many full batches all of them have,
        and a rank's kept samples that never fill such a batch are counted in
        ``stats.samples_left_over`` (and ``samples_sifted_out``), not yielded.
        ``sync="global"`` (default): the losses of every candidate batch (and,
        for the training-loss policies, the recorded losses and sample ids) are
        gathered from all ranks, so every rank holds the same loss history and
        memory and gives a loss the same percentile. ``sync="local"``: each
        rank sifts alone, as SageMaker's per-rank wrapper would. Either way
        ``stats`` counts samples over all ranks (the learning-rate schedule runs
        on them) and ``stats.sync_seconds`` is the time spent communicating;
        the random draws differ per rank.
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
        sync: str = "global",
        process_group=None,
    ) -> None:
        sift_config = as_sift_config(sift_config)
        watcher = hooks.current()
        if watcher is not None and isinstance(sift_config, SiftPolicy):
            sift_config = watcher.policy(sift_config)
        if not isinstance(sift_config, SiftPolicy):
            raise TypeError(
                f"sift_config must be a policy (a subclass of sift_bench.sifting.SiftPolicy: "
                f"RelativeProbabilisticSiftConfig, RandomSiftConfig, StaleLossSiftConfig, "
                f"InfoBatchSiftConfig or your own) or a dict of RelativeProbabilisticSiftConfig's "
                f"fields, got {type(sift_config).__name__}"
            )
        if not hasattr(orig_dataloader, "__iter__") or hasattr(orig_dataloader, "__next__"):
            raise TypeError(
                f"orig_dataloader must be re-iterable (a DataLoader, or any iterable whose "
                f"iter() starts a new epoch), not an iterator, got "
                f"{type(orig_dataloader).__name__}"
            )
        policy = type(sift_config).__name__
        if sift_config.scores:
            if not callable(getattr(loss_impl, "loss", None)):
                raise TypeError(
                    f"loss_impl must be a sift_bench.sifting.Loss with a "
                    f"loss(model, transformed_batch, original_batch) method, "
                    f"got {type(loss_impl).__name__}"
                )
            if not isinstance(model, torch.nn.Module):
                raise TypeError(
                    f"model must be a torch.nn.Module, got {type(model).__name__}"
                )
        if batch_transforms is not None and not all(
            callable(getattr(batch_transforms, name, None))
            for name in ("transform", "reverse_transform")
        ):
            raise TypeError(
                f"batch_transforms must be a SiftingBatchTransform, "
                f"got {type(batch_transforms).__name__}"
            )
        if not isinstance(log_batch_data, bool):
            raise TypeError(f"log_batch_data must be a bool, got {log_batch_data!r}")
        batch_format_index = checked_batch_format_index(batch_format_index)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {seed!r}")
        if sample_ids is not None and not callable(sample_ids):
            raise TypeError(
                f"sample_ids must be a callable batch -> int64 tensor of sample ids, or None, "
                f"got {type(sample_ids).__name__}"
            )
        for name, value in (("num_samples", num_samples), ("num_epochs", num_epochs)):
            if value is not None and not _is_int(value):
                raise TypeError(f"{name} must be an int >= 1 or None, got {value!r}")
            if value is not None and value < 1:
                raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")
        if sync not in SYNC_MODES:
            raise ValueError(f"sync must be one of {SYNC_MODES}, got {sync!r}")
        if sift_config.uses_training_losses and num_samples is None:
            raise ValueError(
                f"{policy} needs num_samples= (the data set's size): it remembers one loss per "
                f"sample, in memory preallocated for num_samples samples"
            )
        if sift_config.needs_num_epochs and num_epochs is None:
            raise ValueError(
                f"{policy} needs num_epochs= (the planned number of epochs)"
                + (": annealing starts after (1 - anneal_fraction) * num_epochs * num_samples "
                   "samples seen" if hasattr(sift_config, "anneal_fraction") else "")
            )

        self.sift_config = sift_config
        self.orig_dataloader = orig_dataloader
        self.loss_impl = loss_impl
        self.model = model
        self.batch_transforms = batch_transforms
        self.sample_ids = default_sample_ids if sample_ids is None else sample_ids
        self.num_samples = None if num_samples is None else int(num_samples)
        self.num_epochs = None if num_epochs is None else int(num_epochs)
        num_samples, num_epochs = self.num_samples, self.num_epochs
        self.batch_size, self.drop_last = _loader_batch_size(orig_dataloader)
        self.log_batch_data = log_batch_data
        self.batch_format_index = batch_format_index
        # With log_batch_data: one dict per sifted candidate batch (see _log_batch).
        self.batch_log: list[dict[str, Any]] = []
        self._candidate_batches_total = 0
        base_config = sift_config.loss_based_sift_config.sift_config
        self.sift_delay = base_config.sift_delay
        self.repeat_delay_per_epoch = base_config.repeat_delay_per_epoch

        self.sync = sync
        self.ranks = Ranks(process_group)
        # Under global sync every rank's losses go into one history and memory; else each rank keeps its own.
        self._shares = self.ranks.distributed and sync == "global"
        if seed is None:
            seed = int(torch.randint(0, 2**62, (), dtype=torch.int64))
        self.generator = torch.Generator().manual_seed(self.ranks.seed_for(seed))
        self.sample_memory = (
            SampleLossMemory(num_samples, with_weights=sift_config.weights_losses)
            if sift_config.uses_training_losses
            else None
        )
        self.stats = SiftingStats()
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
            memory=self.sample_memory, num_samples=num_samples, num_epochs=num_epochs, seen=self._seen,
        ))
        # The batch just yielded, for batch_weights() and record_losses().
        self._yielded_ids: torch.Tensor | None = None
        self._ids_device: torch.device | None = None  # where the batches' ids live
        self._losses_recorded = False
        self._default_transforms: dict[type, SiftingBatchTransform] = {}
        self._counting_transforms: dict[type, SiftingBatchTransform] = {}
        if watcher is not None:
            watcher.created(self)

    @property
    def uses_training_losses(self) -> bool:
        """True when the training loop must call ``batch_weights()`` and ``record_losses()`` after each batch."""
        return self.sift_config.uses_training_losses

    @property
    def loss_history(self):
        """The policy's history of recent losses (a ``LossHistory``), or None if it keeps none."""
        return self.selector.loss_history

    def _require_training_losses(self, method: str) -> None:
        if not self.uses_training_losses:
            raise RuntimeError(
                f"{method}() is for the policies that decide from training losses "
                f"(StaleLossSiftConfig, InfoBatchSiftConfig); this SiftingDataloader uses "
                f"{type(self.sift_config).__name__} (uses_training_losses is False)"
            )
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
        losses = _checked_losses(losses, ids.numel(), "record_losses(losses) needs")
        if self._shares:
            # One gather for both: float64 holds every sample id below 2**53 exactly.
            pieces = self.ranks.gather(torch.cat((ids.to(torch.float64), losses.to(torch.float64))))
            ids = torch.cat([piece[: piece.numel() // 2] for piece in pieces]).to(torch.int64)
            losses = torch.cat([piece[piece.numel() // 2 :] for piece in pieces]).to(torch.float32)
        self.sample_memory.remember(ids, losses, self.epoch)
        self._losses_recorded = True

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

    def _score(self, sifting_batch: SiftingBatch, batch: Any) -> torch.Tensor:
        model = self.model
        was_training = [module for module in model.modules() if module.training]
        # What model.eval() does, without its recursive Python calls (a third of the bookkeeping).
        for module in was_training:
            module.training = False
        if len(sifting_batch) == 0:
            return torch.empty(0)  # an empty shard's batch under DDP: nothing to score, but the ranks still agree
        started = time.perf_counter()
        try:
            with torch.no_grad():
                losses = self.loss_impl.loss(model, sifting_batch, batch)
            losses = _checked_losses(
                losses, len(sifting_batch), f"{type(self.loss_impl).__name__}.loss must return"
            )
        finally:
            # Restore module by module: a submodule the user froze in eval stays in eval.
            for module in was_training:
                module.training = True
            self.stats.scoring_seconds += time.perf_counter() - started
        return losses

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
                self.stats.samples_seen += drawn
                self._seen.total += drawn
                self._leave_over(drawn)
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
        stats = self.stats
        for batch in self.orig_dataloader:
            n = self._sample_count(batch)
            stats.samples_seen += n
            stats.samples_kept += n
            self._seen.total += n
            self._yielding(None)
            yield batch

    def __iter__(self) -> Iterator[Any]:
        if self.sift_config.passes_through:
            self.epoch += 1
            yield from self._passing_through()
            return
        stats = self.stats
        batch_size = self.batch_size
        tracking = self.uses_training_losses
        self.epoch += 1
        self.selector.start_epoch(self.epoch)
        batches_yielded_this_epoch = 0
        pieces: list[SiftingBatch] = []
        id_pieces: list[torch.Tensor] = []
        pending = 0
        transform: SiftingBatchTransform | None = None

        for batch, seen_everywhere in self._candidates():
            transform = self._transform_for(batch)
            delay_count = (
                batches_yielded_this_epoch
                if self.repeat_delay_per_epoch
                else self._batches_yielded_total
            )
            if delay_count < self.sift_delay:
                n = transform.sample_count(batch)
                seen = n if seen_everywhere is None else seen_everywhere
                ids = None
                if tracking:
                    ids = self._candidate_ids(batch, n)
                    if self.sift_config.weights_losses:
                        self.sample_memory.weights[ids] = 1.0
                stats.samples_seen += seen
                stats.samples_kept += seen
                self._seen.total += seen
                self._yielding(ids)
                batches_yielded_this_epoch += 1
                yield batch
                continue

            sifting_batch = transform.transform(batch)
            n = len(sifting_batch)
            if n == 0 and not self.ranks.distributed:
                continue
            ids = self._candidate_ids(batch, n) if tracking else None
            losses = self._score(sifting_batch, batch) if self.sift_config.scores else None
            keep = self.selector.keep(Candidates(n=n, losses=losses, ids=ids))
            if self.log_batch_data:
                self._log_batch(n, losses, keep)
            self._candidate_batches_total += 1
            n_kept = int(keep.sum())
            if n_kept == n:
                pieces.append(sifting_batch)
                if tracking:
                    id_pieces.append(ids)
            elif n_kept > 0:
                kept_indices = keep.nonzero().reshape(-1)
                pieces.append(sifting_batch.select(kept_indices))
                if tracking:
                    id_pieces.append(ids[kept_indices])
            pending += n_kept
            ready, kept = self._agree(pending, n, n_kept)
            seen = n if seen_everywhere is None else seen_everywhere
            stats.samples_seen += seen
            stats.samples_kept += kept
            stats.samples_sifted_out += seen - kept
            self._seen.total += seen

            for _ in range(ready):
                merged = SiftingBatch.concat(pieces)
                ready_ids = None
                if tracking:
                    merged_ids = torch.cat(id_pieces) if len(id_pieces) > 1 else id_pieces[0]
                    ready_ids, rest_ids = merged_ids[:batch_size], merged_ids[batch_size:]
                if pending == batch_size:
                    ready_batch, pieces, id_pieces = merged, [], []
                else:
                    ready_batch, rest = merged.split(batch_size)
                    pieces = [rest]
                    id_pieces = [rest_ids] if tracking else []
                pending -= batch_size
                batches_yielded_this_epoch += 1
                out = transform.reverse_transform(ready_batch)
                self._yielding(ready_ids)
                yield out

        if self.ranks.distributed:
            # Kept samples that never filled a batch on every rank: counted, not trained on, since a rank
            # that yields one batch more than the others would wait forever in DDP's gradient all-reduce.
            left = int(self.ranks.gather_rows([pending])[:, 0].sum())
            stats.samples_kept -= left
            self._leave_over(left)
            stats.sync_seconds += self.ranks.take_seconds()
            return
        if pending == 0:
            return
        if self.drop_last:
            # Left out like the original loader's last batch: they were not trained on.
            stats.samples_kept -= pending
            stats.samples_sifted_out += pending
            return
        out = transform.reverse_transform(SiftingBatch.concat(pieces))
        self._yielding(torch.cat(id_pieces) if tracking else None)
        yield out
