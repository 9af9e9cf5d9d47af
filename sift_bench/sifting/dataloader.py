"""SiftingDataloader: wraps a data loader and yields full batches of the samples worth training on."""

from __future__ import annotations

import time
from typing import Any, Iterator

import torch

from .batch import SiftingBatch, SiftingBatchTransform, default_batch_transform
from .config import RandomSiftConfig, RelativeProbabilisticSiftConfig
from .history import LossHistory
from .loss import Loss
from .selection import random_keep_mask, relative_probabilistic_keep_mask
from .stats import SiftingStats


def _loader_batch_size(orig_dataloader: Any) -> int:
    batch_size = getattr(orig_dataloader, "batch_size", None)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            f"orig_dataloader.batch_size must be an int >= 1 (the size of the batches "
            f"SiftingDataloader refills), got {batch_size!r} from a "
            f"{type(orig_dataloader).__name__}; a torch DataLoader built with batch_sampler= "
            f"has batch_size None: build it with batch_size= instead, or give your loader "
            f"a batch_size attribute"
        )
    return batch_size


def _checked_losses(losses: Any, n: int, loss_name: str) -> torch.Tensor:
    """``losses`` as a float32 CPU tensor of shape [n], or an error saying what was wrong."""
    if not isinstance(losses, torch.Tensor):
        raise TypeError(
            f"{loss_name}.loss must return a torch.Tensor of per-sample losses, "
            f"got {type(losses).__name__}"
        )
    if tuple(losses.shape) not in ((n,), (n, 1)):
        raise ValueError(
            f"{loss_name}.loss must return one loss per sample, of shape [n] or [n, 1] "
            f"with n = {n}, got shape {list(losses.shape)}"
        )
    # The copy to the CPU also waits for the device, so scoring_seconds is true wall time.
    return losses.detach().reshape(n).to("cpu", torch.float32)


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
    * Refill: kept samples are accumulated until ``orig_dataloader.batch_size``
      of them are ready, then yielded in the structure and types of an original
      batch. Every yielded batch has that size except at most one smaller batch
      at the end of an epoch, left out when the original loader has
      ``drop_last``. Within an epoch no sample is yielded twice, and every
      sample is either yielded or counted in ``stats.samples_sifted_out``.

    All random draws come from one CPU ``torch.Generator`` seeded with
    ``seed``, so the same seed gives the same selections on any device. The loss
    history persists across epochs.

    ``len()`` is not defined: how many batches an epoch yields depends on the
    selections. ``len(orig_dataloader)`` is the number of candidate batches, and
    ``stats.samples_seen`` measures training progress.

    orig_dataloader: re-iterable (one ``iter()`` per epoch), with an int
        ``batch_size`` and optionally ``drop_last`` (default False). Batches may
        already be on the model's device.
    batch_transforms: a ``SiftingBatchTransform``; by default one is chosen per
        batch type for a tensor, a tuple or list of tensors, or a dict of
        tensors (a Hugging Face ``BatchEncoding`` too).
    seed: seeds the generator of all sampling decisions; None draws a random seed.
    """

    def __init__(
        self,
        sift_config: RelativeProbabilisticSiftConfig | RandomSiftConfig,
        orig_dataloader: Any,
        loss_impl: Loss | None,
        model: torch.nn.Module | None,
        batch_transforms: SiftingBatchTransform | None = None,
        *,
        seed: int | None = None,
    ) -> None:
        if not isinstance(sift_config, (RelativeProbabilisticSiftConfig, RandomSiftConfig)):
            raise TypeError(
                f"sift_config must be a RelativeProbabilisticSiftConfig or a RandomSiftConfig, "
                f"got {type(sift_config).__name__}"
            )
        if not hasattr(orig_dataloader, "__iter__") or hasattr(orig_dataloader, "__next__"):
            raise TypeError(
                f"orig_dataloader must be re-iterable (a DataLoader, or any iterable whose "
                f"iter() starts a new epoch), not an iterator, got "
                f"{type(orig_dataloader).__name__}"
            )
        self.is_loss_based = isinstance(sift_config, RelativeProbabilisticSiftConfig)
        if self.is_loss_based:
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
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {seed!r}")

        self.sift_config = sift_config
        self.orig_dataloader = orig_dataloader
        self.loss_impl = loss_impl
        self.model = model
        self.batch_transforms = batch_transforms
        self.batch_size = _loader_batch_size(orig_dataloader)
        self.drop_last = bool(getattr(orig_dataloader, "drop_last", False))
        base_config = sift_config.loss_based_sift_config.sift_config
        self.sift_delay = base_config.sift_delay
        self.repeat_delay_per_epoch = base_config.repeat_delay_per_epoch

        self.generator = torch.Generator()
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)
        self.loss_history = (
            LossHistory(sift_config.loss_history_length) if self.is_loss_based else None
        )
        self.stats = SiftingStats()
        # The delay's own count: stats.reset() must not restart the delay.
        self._batches_yielded_total = 0
        self._default_transforms: dict[type, SiftingBatchTransform] = {}

    def _transform_for(self, batch: Any) -> SiftingBatchTransform:
        if self.batch_transforms is not None:
            return self.batch_transforms
        transform = self._default_transforms.get(type(batch))
        if transform is None:
            transform = default_batch_transform(batch)
            transform.transform(batch)  # fail at the first batch, not when the delay ends
            self._default_transforms[type(batch)] = transform
        return transform

    def _score(self, sifting_batch: SiftingBatch, batch: Any) -> torch.Tensor:
        model = self.model
        was_training = [module for module in model.modules() if module.training]
        # What model.eval() does, without its recursive Python calls (a third of the bookkeeping).
        for module in was_training:
            module.training = False
        started = time.perf_counter()
        try:
            with torch.no_grad():
                losses = self.loss_impl.loss(model, sifting_batch, batch)
            losses = _checked_losses(losses, len(sifting_batch), type(self.loss_impl).__name__)
        finally:
            # Restore module by module: a submodule the user froze in eval stays in eval.
            for module in was_training:
                module.training = True
            self.stats.scoring_seconds += time.perf_counter() - started
        return losses

    def _keep_mask(self, sifting_batch: SiftingBatch, batch: Any) -> torch.Tensor:
        config = self.sift_config
        if not self.is_loss_based:
            return random_keep_mask(len(sifting_batch), config.keep_fraction, self.generator)
        losses = self._score(sifting_batch, batch)
        keep = relative_probabilistic_keep_mask(
            losses, self.loss_history.values(), config.beta_value, self.generator
        )
        self.loss_history.append(losses[torch.isfinite(losses)])
        return keep

    def __iter__(self) -> Iterator[Any]:
        stats = self.stats
        batch_size = self.batch_size
        batches_yielded_this_epoch = 0
        pieces: list[SiftingBatch] = []
        pending = 0
        transform: SiftingBatchTransform | None = None

        for batch in self.orig_dataloader:
            transform = self._transform_for(batch)
            delay_count = (
                batches_yielded_this_epoch
                if self.repeat_delay_per_epoch
                else self._batches_yielded_total
            )
            if delay_count < self.sift_delay:
                n = transform.sample_count(batch)
                stats.samples_seen += n
                stats.samples_kept += n
                stats.batches_yielded += 1
                self._batches_yielded_total += 1
                batches_yielded_this_epoch += 1
                yield batch
                continue

            sifting_batch = transform.transform(batch)
            n = len(sifting_batch)
            if n == 0:
                continue
            keep = self._keep_mask(sifting_batch, batch)
            n_kept = int(keep.sum())
            stats.samples_seen += n
            stats.samples_kept += n_kept
            stats.samples_sifted_out += n - n_kept
            if n_kept == n:
                pieces.append(sifting_batch)
            elif n_kept > 0:
                pieces.append(sifting_batch.select(keep.nonzero().reshape(-1)))
            pending += n_kept

            while pending >= batch_size:
                merged = SiftingBatch.concat(pieces)
                if pending == batch_size:
                    ready, pieces = merged, []
                else:
                    ready, rest = merged.split(batch_size)
                    pieces = [rest]
                pending -= batch_size
                stats.batches_yielded += 1
                self._batches_yielded_total += 1
                batches_yielded_this_epoch += 1
                yield transform.reverse_transform(ready)

        if pending == 0:
            return
        if self.drop_last:
            # Left out like the original loader's last batch: they were not trained on.
            stats.samples_kept -= pending
            stats.samples_sifted_out += pending
            return
        stats.batches_yielded += 1
        self._batches_yielded_total += 1
        yield transform.reverse_transform(SiftingBatch.concat(pieces))
