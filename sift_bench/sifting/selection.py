"""The math of sifting, as pure functions of plain tensors.

Everything here runs on whatever device its inputs are on; the data loader
passes CPU tensors and a CPU generator, so that one seed gives the same
selections whether the model runs on CPU or CUDA.
"""

from __future__ import annotations

import torch


def loss_percentiles(losses: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
    """For each loss, its mid-rank in ``history``: the fraction of the history strictly below it, plus half the
    fraction equal to it (1.0 when ``history`` is empty).

    Ties count half, so ``p`` stays uniform however many losses are equal and the kept fraction stays
    ``1 / (1 + beta_value)``: with 40 % of the losses tied, counting ties as below keeps 0.586 of them at beta 1
    and counting them as above (Selective Backprop's ``lib/hist.py``) 0.415; the mid-rank keeps 0.500. On
    losses without ties the three agree. Sorting the history once and binary-searching every loss twice costs
    O((n + H) log H) for n losses and a history of H.
    """
    losses = losses.reshape(-1)
    if history.numel() == 0:
        return torch.ones_like(losses, dtype=torch.float32)
    sorted_history = torch.sort(history.reshape(-1).to(losses.dtype)).values
    losses = losses.contiguous()
    below = torch.searchsorted(sorted_history, losses, right=False)
    at_or_below = torch.searchsorted(sorted_history, losses, right=True)
    return (below + at_or_below).to(torch.float32) / (2 * sorted_history.numel())


def keep_mask(
    p: torch.Tensor, beta_value: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Keep each sample with probability ``p ** beta_value``; a bool mask shaped like ``p``."""
    draws = torch.rand(p.shape, generator=generator, device=p.device)
    return draws < p.to(torch.float32) ** beta_value


def random_keep_mask(
    n: int,
    keep_fraction: float,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Keep each of ``n`` samples with probability ``keep_fraction``, whatever its loss."""
    return torch.rand(n, generator=generator, device=device) < keep_fraction


def relative_probabilistic_keep_mask(
    losses: torch.Tensor,
    history: torch.Tensor,
    beta_value: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The keep mask of one scored batch under relative probabilistic sifting.

    A sample whose loss is NaN or infinite is kept: a sample we cannot score is
    trained on, never silently dropped. (The caller leaves its loss out of the
    history.) Every sample draws one random number, so the draws of later
    batches do not depend on how many losses were non-finite.
    """
    losses = losses.reshape(-1)
    keep = keep_mask(loss_percentiles(losses, history), beta_value, generator)
    return keep | ~torch.isfinite(losses)


def fresh_loss_mask(
    epoch_stamps: torch.Tensor, current_epoch: int, max_loss_age_epochs: int
) -> torch.Tensor:
    """Which remembered losses may still decide: remembered (stamp >= 0) and at most ``max_loss_age_epochs`` old.

    ``epoch_stamps`` holds the epoch each loss was recorded in, -1 where none was.
    """
    return (epoch_stamps >= 0) & (current_epoch - epoch_stamps <= max_loss_age_epochs)


def stale_loss_keep_mask(
    remembered_losses: torch.Tensor,
    fresh: torch.Tensor,
    history: torch.Tensor,
    beta_value: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The keep mask of one candidate batch under stale-loss sifting.

    A sample with a ``fresh`` remembered loss is kept with probability
    ``p ** beta_value``, exactly as if that loss had just been scored; every
    other sample (nothing remembered, or too old) is kept, so none is starved by
    a stale low loss. Every sample draws one random number either way.
    """
    keep = relative_probabilistic_keep_mask(remembered_losses, history, beta_value, generator)
    return keep | ~fresh.reshape(-1)


def rescore_due_mask(
    epoch_stamps: torch.Tensor, current_epoch: int, rescore_every_epochs: int
) -> torch.Tensor:
    """Which samples Stale-SB scores again: those never scored (stamp -1) and those scored
    ``rescore_every_epochs`` or more epochs ago.

    As Selective Backprop's ``StaleSelector`` (``lib/fp_selectors.py``): a sample is forward-passed when it has
    no loss or when its ``epochs_since_update`` reaches the staleness, so with 3 a sample scored in epoch 0 is
    scored again in epochs 3, 6, 9, ... and decided from its stored loss in between.
    """
    return (epoch_stamps < 0) | (current_epoch - epoch_stamps >= rescore_every_epochs)


def infobatch_prunes_epoch(epoch: int, num_epochs: int, anneal_fraction: float) -> bool:
    """Whether InfoBatch prunes in ``epoch`` (from 0), as the official sampler schedules it.

    ``IBSampler.reset`` (``infobatch/infobatch.py`` of NUS-HPC-AI-Lab/InfoBatch) prunes at its ``iterations``-th
    reset, which is epoch ``iterations - 1``, while ``iterations <= num_epochs * delta`` with
    ``delta = 1 - anneal_fraction``: epoch ``e`` is pruned while ``e + 1 <= num_epochs * delta``, whole epochs
    only. The first epoch never is (no sample has a loss yet). At 2 epochs and delta 0.875 nothing is pruned;
    at 12, epochs 1 to 9 are.
    """
    # The tolerance keeps a product such as 10 * 0.9 = 9.000000000000002 from moving an epoch boundary.
    return 1 <= epoch and epoch + 1 <= num_epochs * (1.0 - anneal_fraction) + 1e-9


def infobatch_threshold(remembered_losses: torch.Tensor, remembered: torch.Tensor) -> float:
    """InfoBatch's threshold: the mean of the remembered losses; NaN (prunes nothing) when none is remembered."""
    losses = remembered_losses[remembered]
    if losses.numel() == 0:
        return float("nan")
    # float64 accumulation: a float32 sum over a large data set drifts.
    return float(losses.to(torch.float64).mean())


def infobatch_keep_mask(
    remembered_losses: torch.Tensor,
    remembered: torch.Tensor,
    threshold: float,
    prune_ratio: float,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """InfoBatch's soft pruning and rescaling for one candidate batch: ``(keep, weights)``.

    A sample remembered strictly below ``threshold`` is left out with
    probability ``prune_ratio``; if kept, its loss weight is
    ``1 / (1 - prune_ratio)``, so its expected contribution to the gradient is
    unchanged. Every other sample is kept with weight 1. ``weights`` is float32,
    1 for the samples left out too. Every sample draws one random number.
    """
    losses = remembered_losses.reshape(-1)
    draws = torch.rand(losses.shape, generator=generator, device=losses.device)
    # A NaN threshold compares False: nothing is below it, nothing is pruned.
    below = remembered.reshape(-1) & (losses < threshold)
    keep = ~(below & (draws < prune_ratio))
    weights = torch.ones(losses.shape, dtype=torch.float32, device=losses.device)
    weights[below & keep] = 1.0 / (1.0 - prune_ratio)
    return keep, weights
