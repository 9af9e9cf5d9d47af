"""The math of sifting, as pure functions of plain tensors.

Everything here runs on whatever device its inputs are on; the data loader
passes CPU tensors and a CPU generator, so that one seed gives the same
selections whether the model runs on CPU or CUDA.
"""

from __future__ import annotations

import torch


def loss_percentiles(losses: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
    """For each loss, the fraction of ``history`` at or below it (1.0 when ``history`` is empty).

    Sorting the history once and binary-searching every loss costs
    O((n + H) log H) for n losses and a history of H.
    """
    losses = losses.reshape(-1)
    if history.numel() == 0:
        return torch.ones_like(losses, dtype=torch.float32)
    sorted_history = torch.sort(history.reshape(-1).to(losses.dtype)).values
    # right=True counts the values equal to the loss as "at or below" it.
    at_or_below = torch.searchsorted(sorted_history, losses.contiguous(), right=True)
    return at_or_below.to(torch.float32) / sorted_history.numel()


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
