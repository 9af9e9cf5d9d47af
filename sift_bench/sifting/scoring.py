"""The scoring pass: one no-grad forward of the user's loss over a candidate batch, the model in eval mode."""

from __future__ import annotations

import time
from typing import Any

import torch

from .arguments import checked_losses
from .batch import SiftingBatch
from .loss import Loss
from .stats import SiftingStats


def score(loss_impl: Loss, model: torch.nn.Module, sifting_batch: SiftingBatch, batch: Any,
          stats: SiftingStats) -> torch.Tensor:
    """The per-sample losses of a candidate batch as a float32 CPU tensor [n], its time added to
    `stats.scoring_seconds`. Eval mode, so BatchNorm running statistics stay as they are and dropout does not make
    the loss random; each module's own mode is restored afterwards, also when the loss raises."""
    if len(sifting_batch) == 0:
        return torch.empty(0)  # an empty shard's batch under DDP: nothing to score, but the ranks still agree
    was_training = [module for module in model.modules() if module.training]
    # What model.eval() does, without its recursive Python calls (a third of the bookkeeping).
    for module in was_training:
        module.training = False
    started = time.perf_counter()
    try:
        with torch.no_grad():
            losses = loss_impl.loss(model, sifting_batch, batch)
        losses = checked_losses(losses, len(sifting_batch), f"{type(loss_impl).__name__}.loss must return")
    finally:
        # Restore module by module: a submodule the user froze in eval stays in eval.
        for module in was_training:
            module.training = True
        stats.scoring_seconds += time.perf_counter() - started
    stats.samples_scored += len(sifting_batch)
    return losses
