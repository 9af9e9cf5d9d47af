"""Per-sample memory of training losses, for the policies that decide without a scoring pass."""

from __future__ import annotations

from typing import Any

import torch


def checked_sample_ids(ids: Any, n: int, num_samples: int) -> torch.Tensor:
    """``ids`` as an int64 CPU tensor of shape [n], distinct, each in [0, num_samples), or an error saying what was wrong."""
    if not isinstance(ids, torch.Tensor) or ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        described = f"a {ids.dtype} tensor" if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise TypeError(
            f"sample_ids(batch) must return an integer torch.Tensor of sample ids, got {described}; "
            f"wrap the dataset in IndexedDataset or pass sample_ids= to SiftingDataloader"
        )
    if tuple(ids.shape) != (n,):
        raise ValueError(
            f"sample_ids(batch) must return one id per sample, of shape [n] with n = {n}, "
            f"got shape {list(ids.shape)}"
        )
    # One copy to the CPU: the decisions and the memory live there.
    ids = ids.to("cpu", torch.int64)
    if n == 0:
        return ids
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= num_samples:
        raise ValueError(
            f"sample ids must be in [0, num_samples) = [0, {num_samples}), got ids from "
            f"{low} to {high}; pass num_samples=len(dataset) to SiftingDataloader, and ids "
            f"that index the data set (IndexedDataset gives them)"
        )
    # Labels are integers in range too: a batch of (inputs, labels) without ids must not pass.
    distinct = torch.unique(ids)
    if distinct.numel() != n:
        counts = torch.bincount(ids - low)
        repeated = int(counts.argmax()) + low
        raise ValueError(
            f"sample ids must be distinct within a batch, got {n - distinct.numel()} repeats "
            f"(id {repeated} {int(counts.max())} times); is sample_ids reading the labels? "
            f"wrap the dataset in IndexedDataset, or pass sample_ids= that returns the ids"
        )
    return ids


class SampleLossMemory:
    """The last training loss of every sample, preallocated: memory is fixed by ``num_samples``.

    losses: float32 [num_samples], the last finite training loss recorded (NaN
        where none was).
    epoch_stamps: int32 [num_samples], the epoch that loss was recorded in (-1
        where none was).
    weights: float32 [num_samples] or None, each sample's loss weight as last
        decided (InfoBatch's rescaling); None for policies without weights.
    """

    def __init__(self, num_samples: int, with_weights: bool = False) -> None:
        self.num_samples = num_samples
        self.losses = torch.full((num_samples,), float("nan"), dtype=torch.float32)
        self.epoch_stamps = torch.full((num_samples,), -1, dtype=torch.int32)
        self.weights = torch.ones(num_samples, dtype=torch.float32) if with_weights else None

    @property
    def remembered(self) -> torch.Tensor:
        """Bool [num_samples]: which samples have a remembered loss."""
        return self.epoch_stamps >= 0

    @property
    def nbytes(self) -> int:
        tensors = [self.losses, self.epoch_stamps] + ([self.weights] if self.weights is not None else [])
        return sum(t.numel() * t.element_size() for t in tensors)

    def remember(self, ids: torch.Tensor, losses: torch.Tensor, epoch: int) -> torch.Tensor:
        """Record the finite ``losses`` of samples ``ids`` (CPU tensors) at ``epoch``; returns the finite mask.

        A non-finite loss is not recorded: the sample keeps what it had, so one
        bad loss cannot poison the threshold or the percentiles.
        """
        finite = torch.isfinite(losses)
        if bool(finite.all()):
            kept_ids, kept_losses = ids, losses
        else:
            kept_ids, kept_losses = ids[finite], losses[finite]
        self.losses[kept_ids] = kept_losses
        self.epoch_stamps[kept_ids] = epoch
        return finite
