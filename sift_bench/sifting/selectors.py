"""The built-in policies' selectors: each holds one loader's state and decides a candidate batch (see policy.py)."""

from __future__ import annotations

import torch

from .history import LossHistory
from .policy import Candidates, SelectionContext, Selector
from .selection import (
    fresh_loss_mask,
    infobatch_keep_mask,
    infobatch_threshold,
    random_keep_mask,
    relative_probabilistic_keep_mask,
    stale_loss_keep_mask,
)


class RelativeProbabilisticSelector(Selector):
    """Smart sifting: rank each scored loss in the history of recent losses, keep with probability p ** beta."""

    def __init__(self, config, context: SelectionContext):
        self.beta_value = config.beta_value
        self.context = context
        self.loss_history = LossHistory(config.loss_history_length)

    def keep(self, candidates: Candidates) -> torch.Tensor:
        losses = candidates.losses
        keep = relative_probabilistic_keep_mask(
            losses, self.loss_history.values(), self.beta_value, self.context.generator
        )
        self.loss_history.append(self.context.share(losses[torch.isfinite(losses)]))
        return keep


class RandomSelector(Selector):
    """The control: keep each candidate with probability keep_fraction."""

    def __init__(self, config, context: SelectionContext):
        self.keep_fraction = config.keep_fraction
        self.context = context

    def keep(self, candidates: Candidates) -> torch.Tensor:
        return random_keep_mask(candidates.n, self.keep_fraction, self.context.generator)


class StaleLossSelector(Selector):
    """Smart sifting's rule on each candidate's remembered training loss, no scoring pass."""

    def __init__(self, config, context: SelectionContext):
        self.config = config
        self.context = context
        self.epoch = -1
        self.loss_history = LossHistory(config.loss_history_length)

    def start_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def keep(self, candidates: Candidates) -> torch.Tensor:
        memory, ids = self.context.memory, candidates.ids
        losses = memory.losses[ids]
        fresh = fresh_loss_mask(memory.epoch_stamps[ids], self.epoch, self.config.max_loss_age_epochs)
        keep = stale_loss_keep_mask(
            losses, fresh, self.loss_history.values(), self.config.beta_value, self.context.generator
        )
        # The candidates' losses, kept or not: the training losses alone would be those of
        # the samples kept, biased high, and the kept fraction would collapse.
        self.loss_history.append(self.context.share(losses[fresh]))
        return keep


class InfoBatchSelector(Selector):
    """InfoBatch: prune below-mean remembered losses at random, upweight the kept ones, anneal at the end."""

    def __init__(self, config, context: SelectionContext):
        self.prune_ratio = config.prune_ratio
        self.context = context
        self.anneal_start_samples = (
            (1.0 - config.anneal_fraction) * context.num_epochs * context.num_samples
        )
        self.threshold = float("nan")

    def start_epoch(self, epoch: int) -> None:
        memory = self.context.memory
        # Taken once per epoch, as InfoBatch prunes once per epoch.
        self.threshold = infobatch_threshold(memory.losses, memory.remembered)

    def keep(self, candidates: Candidates) -> torch.Tensor:
        memory, ids = self.context.memory, candidates.ids
        if self.context.seen.total >= self.anneal_start_samples:
            memory.weights[ids] = 1.0
            return torch.ones(ids.numel(), dtype=torch.bool)
        keep, weights = infobatch_keep_mask(
            memory.losses[ids], memory.epoch_stamps[ids] >= 0, self.threshold, self.prune_ratio,
            self.context.generator,
        )
        memory.weights[ids] = weights
        return keep
