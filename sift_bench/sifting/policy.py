"""The policy protocol: what a selection policy declares, and how SiftingDataloader asks it to decide.

A policy is a frozen config dataclass that subclasses ``SiftPolicy``. Its class attributes declare what the data
loader must do for it (run the scoring pass, remember training losses, weight losses, know the planned epochs) and
which of its fields name a run; ``selector(context)`` builds the object that holds its state for one loader and
decides each candidate batch. Everything that handles policies (the data loader, the harness's validation, run
names, the report and the tests) reads these declarations, so a new policy is one module and one yaml: see
tests/test_policy_protocol.py for a policy defined in a test and run end to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

import torch

from .memory import SampleLossMemory


@dataclass
class Candidates:
    """One candidate batch, as the policy sees it."""

    n: int
    # The scoring pass's per-sample losses (float32, CPU, [n]) when the policy `scores`, else None.
    losses: torch.Tensor | None = None
    # The candidates' sample ids (int64, CPU, [n]) when the policy `uses_training_losses` or `scores_on_demand`.
    ids: torch.Tensor | None = None
    # When the policy `scores_on_demand`: runs the scoring pass on this candidate batch and returns its per-sample
    # losses (float32, CPU, [n]), its time counted as scoring; the selector calls it only when it needs them.
    score: Callable[[], torch.Tensor] | None = None


class SeenCounter:
    """Candidates drawn since training began, over every epoch and rank: the loader counts, a policy reads."""

    def __init__(self) -> None:
        self.total = 0


@dataclass
class SelectionContext:
    """What a SiftingDataloader offers its policy's selector."""

    # Every random draw of the selection comes from it: one seed gives one run.
    generator: torch.Generator
    # Losses of this rank -> under global DDP sync those of every rank (rank order); in one process unchanged.
    share: Callable[[torch.Tensor], torch.Tensor]
    # Each sample's last training loss (and weight), when the policy uses_training_losses: the loader fills it; or
    # the losses the policy scored itself, when it scores_on_demand: the selector fills it.
    memory: SampleLossMemory | None
    num_samples: int | None
    num_epochs: int | None
    # Candidates drawn since training began, over every epoch and rank (`seen.total`).
    seen: SeenCounter


class Selector:
    """A policy's state for one data loader, and its decision."""

    # The loss history the decision ranks against, if the policy keeps one (read by tests and tools).
    loss_history = None

    def start_epoch(self, epoch: int) -> None:
        """Called at every ``iter()`` of the loader, epoch counting from 0."""

    def keep(self, candidates: Candidates) -> torch.Tensor:
        """The keep mask (bool, CPU, [n]) of one candidate batch past the delay."""
        raise NotImplementedError


class SiftPolicy:
    """Base class of every sift config (a frozen dataclass with a ``loss_based_sift_config: LossConfig`` field)."""

    # The loader runs one no-grad forward pass per candidate batch and hands its per-sample losses to the selector.
    scores: ClassVar[bool] = False
    # The loader remembers each sample's last training loss (the training loop calls record_losses) and hands the
    # selector the candidates' sample ids; needs num_samples.
    uses_training_losses: ClassVar[bool] = False
    # The loader keeps a per-sample memory for the selector (context.memory), hands it the candidates' sample ids
    # and a `score()` that runs the scoring pass on the candidate batch when called (Stale-SB re-scores only the
    # samples whose stored loss is due); needs num_samples, loss_impl and model.
    scores_on_demand: ClassVar[bool] = False
    # The scoring pass must be a ProxyLoss (sift_bench.sifting.proxy): a small proxy model, trained alongside,
    # scores the candidates instead of the model. Implies `scores`.
    scores_with_proxy: ClassVar[bool] = False
    # The selector writes per-sample loss weights into the memory (batch_weights() returns them).
    weights_losses: ClassVar[bool] = False
    # The selector needs the planned number of epochs (num_epochs=).
    needs_num_epochs: ClassVar[bool] = False
    # The loader yields the original batches untouched (the very same objects), counting them, and never asks the
    # selector: the baseline, where a script that builds a SiftingDataloader must train on everything.
    passes_through: ClassVar[bool] = False
    # Run names and summaries: {short label: field name}, e.g. {"beta": "beta_value"}; `delay` is sift_delay.
    run_name_fields: ClassVar[dict[str, str]] = {}
    # The name a built-in policy goes by in the harness (conf/sifter/<name>.yaml, the `sifter` tag, the report);
    # None for a user's policy, which the harness names by its yaml's `name`.
    name: ClassVar[str | None] = None

    @classmethod
    def tracks_samples(cls) -> bool:
        """Whether the loader must read each candidate's sample id and keep a per-sample memory."""
        return cls.uses_training_losses or cls.scores_on_demand

    def selector(self, context: SelectionContext) -> Selector:
        raise NotImplementedError(f"{type(self).__name__} must define selector(context)")


def run_label(policy: type[SiftPolicy], settings) -> str:
    """`beta=3 hist=500 delay=10`: the policy's run-name fields read from `settings` (a mapping or an object)."""
    def value(name):
        return settings[name] if hasattr(settings, "__getitem__") else getattr(settings, name)

    fields = {**policy.run_name_fields, "delay": "sift_delay"}
    return " ".join(f"{label}={value(name)}" for label, name in fields.items())
