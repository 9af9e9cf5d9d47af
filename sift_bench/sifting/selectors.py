"""The built-in policies' selectors: each holds one loader's state and decides a candidate batch (see policy.py)."""

from __future__ import annotations

import torch

from .history import LossHistory
from .policy import Candidates, SelectionContext, Selector
from .selection import (
    fresh_loss_mask,
    infobatch_keep_mask,
    infobatch_prunes_epoch,
    infobatch_threshold,
    random_keep_mask,
    relative_probabilistic_keep_mask,
    rescore_due_mask,
    stale_loss_keep_mask,
)

# The official InfoBatch keeps at least a tenth of the below-mean samples (keep_ratio = max(0.1, 1 - prune_ratio)),
# so a loss weight is at most 10.
MAX_PRUNE_RATIO = 0.9


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


class StaleSBSelector(Selector):
    """Stale-SB: smart sifting's rule on a stored scoring-pass loss, scored again every few epochs.

    A candidate batch that holds a sample never scored, or scored ``rescore_every_epochs`` or more epochs ago, is
    scored (a no-grad pass, counted as scoring time) and those samples' losses are stored; every candidate is then
    kept with probability ``p ** beta_value``, ``p`` ranking its stored loss among the last stored losses of the
    candidates (fresh or stale, as Selective Backprop's selector ranks every marked example).
    """

    def __init__(self, config, context: SelectionContext):
        self.config = config
        self.context = context
        self.epoch = -1
        self.loss_history = LossHistory(config.loss_history_length)
        # The epochs in which this selector ran the scoring pass (read by tests and tools).
        self.scoring_epochs: list[int] = []

    def start_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def keep(self, candidates: Candidates) -> torch.Tensor:
        memory, ids, share = self.context.memory, candidates.ids, self.context.share
        due = rescore_due_mask(memory.epoch_stamps[ids], self.epoch, self.config.rescore_every_epochs)
        # Under global DDP sync every rank scores when any rank has a due sample: the memory is shared, and the
        # gathers below are collectives that every rank must join.
        if float(share(due.sum().reshape(1).to(torch.float64)).sum()) > 0:
            losses = candidates.score()
            memory.remember(share(ids[due]), share(losses[due]), self.epoch)
            if not self.scoring_epochs or self.scoring_epochs[-1] != self.epoch:
                self.scoring_epochs.append(self.epoch)
        stored = memory.losses[ids]
        # A sample whose score was not finite has no stored loss (NaN): it is kept, as under smart sifting.
        keep = relative_probabilistic_keep_mask(stored, self.loss_history.values(), self.config.beta_value,
                                                self.context.generator)
        self.loss_history.append(share(stored[torch.isfinite(stored)]))
        return keep


class InfoBatchSelector(Selector):
    """InfoBatch: prune below-mean remembered losses at random, upweight the kept ones, anneal at the end.

    By default annealing is by whole epochs, as the official sampler does it (``infobatch_prunes_epoch``); with
    ``anneal_by="samples"`` it starts once ``(1 - anneal_fraction) * num_epochs * num_samples`` candidates were
    seen, possibly mid-epoch. ``prune_ratio`` above 0.9 prunes 0.9, as the official code clamps it.
    """

    def __init__(self, config, context: SelectionContext):
        self.prune_ratio = min(config.prune_ratio, MAX_PRUNE_RATIO)
        self.anneal_fraction = config.anneal_fraction
        self.anneal_by = config.anneal_by
        self.context = context
        self.anneal_start_samples = (
            (1.0 - config.anneal_fraction) * context.num_epochs * context.num_samples
        )
        self.threshold = float("nan")
        self.epoch = -1

    def start_epoch(self, epoch: int) -> None:
        memory = self.context.memory
        self.epoch = epoch
        # Taken once per epoch, as InfoBatch prunes once per epoch.
        self.threshold = infobatch_threshold(memory.losses, memory.remembered)

    def annealing(self) -> bool:
        """Whether nothing is pruned now: the annealed end of training (or, by epochs, the first epoch)."""
        if self.anneal_by == "samples":
            return self.context.seen.total >= self.anneal_start_samples
        return not infobatch_prunes_epoch(self.epoch, self.context.num_epochs, self.anneal_fraction)

    def keep(self, candidates: Candidates) -> torch.Tensor:
        memory, ids = self.context.memory, candidates.ids
        if self.annealing():
            # Annealed samples train at weight 1, as the paper describes (the official code resets the weights
            # only when its epoch count equals num_epochs * delta + 1 exactly, so not at a fractional one).
            memory.weights[ids] = 1.0
            return torch.ones(ids.numel(), dtype=torch.bool)
        keep, weights = infobatch_keep_mask(
            memory.losses[ids], memory.epoch_stamps[ids] >= 0, self.threshold, self.prune_ratio,
            self.context.generator,
        )
        memory.weights[ids] = weights
        return keep
