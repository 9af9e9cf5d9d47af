"""Sifting configurations, named and nested as in SageMaker smart sifting.

Every field is validated in ``__post_init__``, so a harness can check a config
(from Hydra, YAML or a plain dict) before it builds a model or a data loader.
The dataclasses are frozen: a config that was valid at construction stays valid.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

import torch

from .policy import Candidates, SelectionContext, Selector, SiftPolicy
from .ranks import SYNC_MODES
from .selectors import (
    InfoBatchSelector,
    RandomSelector,
    RelativeProbabilisticSelector,
    StaleLossSelector,
    StaleSBSelector,
)


def is_int(value: Any) -> bool:
    # bool is an int subclass, but `sift_delay=True` is a typo, not a delay.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _from_mapping(cls: type, value: Any, field_name: str) -> Any:
    """``value`` as a ``cls``: kept if it is one, built from it if it is a mapping."""
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(str(key) for key in value if key not in allowed)
        if unknown:
            raise TypeError(
                f"{field_name} got unknown keys {unknown}; {cls.__name__} takes {allowed}"
            )
        required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
        missing = [name for name in required if name not in value]
        if missing:
            raise TypeError(f"{field_name} is missing keys {missing}; {cls.__name__} requires {required}")
        return cls(**dict(value))
    raise TypeError(
        f"{field_name} must be a {cls.__name__} or a dict of its fields, "
        f"got {type(value).__name__}: {value!r}"
    )


def _checked_beta_value(beta_value: Any) -> float:
    if not _is_real(beta_value):
        raise TypeError(f"beta_value must be a finite number > 0, got {beta_value!r}")
    if not math.isfinite(beta_value) or beta_value <= 0:
        raise ValueError(f"beta_value must be a finite number > 0, got {beta_value!r}")
    return float(beta_value)


def _checked_loss_history_length(length: Any) -> int:
    if not is_int(length):
        raise TypeError(f"loss_history_length must be an int >= 1, got {length!r}")
    if length < 1:
        raise ValueError(f"loss_history_length must be an int >= 1, got {length!r}")
    return int(length)


def _checked_count(value: Any, name: str) -> int:
    """An int >= 1 (epochs, counts), or the error naming `name`, the value and what is allowed."""
    message = f"{name} must be an int >= 1, got {value!r}"
    if not is_int(value):
        raise TypeError(message)
    if value < 1:
        raise ValueError(message)
    return int(value)


@dataclass(frozen=True)
class SiftingBaseConfig:
    """When sifting starts.

    sift_delay: number of batches yielded before sifting starts. During the delay
        batches pass through untouched and are not scored. Counted across epochs
        (over every ``iter()`` of the same ``SiftingDataloader``), or from the
        start of each epoch when ``repeat_delay_per_epoch`` is True.
    repeat_delay_per_epoch: restart the delay at every epoch.
    sync: under DDP, "global": one loss history (and per-sample memory) for all ranks, so a loss means the same
        percentile everywhere; "local": each rank sifts alone. Read only where a process group is initialised.
    """

    sift_delay: int = 1000
    repeat_delay_per_epoch: bool = False
    sync: str = "global"

    def __post_init__(self) -> None:
        message = f"sift_delay must be an int >= 0, got {self.sift_delay!r}"
        if not is_int(self.sift_delay):
            raise TypeError(message)
        if self.sift_delay < 0:
            raise ValueError(message)
        if not isinstance(self.repeat_delay_per_epoch, bool):
            raise TypeError(
                f"repeat_delay_per_epoch must be a bool, got {self.repeat_delay_per_epoch!r}"
            )
        if self.sync not in SYNC_MODES:
            raise ValueError(f"sync must be one of {SYNC_MODES}, got {self.sync!r}")
        object.__setattr__(self, "sift_delay", int(self.sift_delay))


@dataclass(frozen=True)
class LossConfig:
    """Settings of loss-based sifting; ``sift_config`` may be given as a dict."""

    sift_config: SiftingBaseConfig

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "sift_config",
            _from_mapping(SiftingBaseConfig, self.sift_config, "sift_config"),
        )


class BuiltInPolicy(SiftPolicy):
    """What every built-in policy's ``__post_init__`` ends with: its checked values stored on the frozen config, and
    its ``loss_based_sift_config`` as a ``LossConfig`` (a dict of its fields accepted, as from YAML)."""

    def _settle(self, **checked: Any) -> None:
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "loss_based_sift_config",
                           _from_mapping(LossConfig, self.loss_based_sift_config, "loss_based_sift_config"))


@dataclass(frozen=True)
class LossRankPolicy(BuiltInPolicy):
    """Smart sifting's keep rule, declared once for every policy that ranks losses in a history: keep a candidate with
    probability ``p ** beta_value``, ``p`` the mid-rank of its loss among the last ``loss_history_length`` losses.
    Its subclasses say where the losses come from and add their own settings after these."""

    beta_value: float
    loss_history_length: int
    loss_based_sift_config: LossConfig

    def _settle_rule(self, **checked: Any) -> None:
        """The rule's two settings checked and stored with the subclass's own `checked` ones (`_settle`)."""
        self._settle(beta_value=_checked_beta_value(self.beta_value),
                     loss_history_length=_checked_loss_history_length(self.loss_history_length), **checked)


@dataclass(frozen=True)
class RelativeProbabilisticSiftConfig(LossRankPolicy):
    """Keep a scored sample with probability ``p ** beta_value``.

    ``p`` is the mid-rank of the sample's loss among the last
    ``loss_history_length`` per-sample losses (the fraction below it, plus half
    the fraction equal to it). On stationary losses the kept
    fraction is ``1 / (1 + beta_value)``: 0.5 keeps 66.67 %, 1 keeps 50 %,
    2 keeps 33.33 %, 3 keeps 25 %.
    """

    name = "relative_probabilistic"

    scores = True
    run_name_fields = {"beta": "beta_value", "hist": "loss_history_length"}

    def __post_init__(self) -> None:
        self._settle_rule()

    def selector(self, context: SelectionContext) -> RelativeProbabilisticSelector:
        return RelativeProbabilisticSelector(self, context)


@dataclass(frozen=True)
class ProxySiftConfig(LossRankPolicy):
    """Smart sifting's rule, ``p ** beta_value`` over a loss history, on losses from a small proxy model.

    The cheaper scorer: the loader's ``loss_impl`` must be a ``ProxyLoss``, which scores each candidate batch with
    the proxy (a model of ``proxy_size`` times the model's size, as the task builds it: a ResNet of that width, a
    BERT with that share of its layers) and trains the proxy one step on it in the same pass, all counted as
    scoring time. About ``1 / (1 + beta_value)`` of the candidates are kept, as with smart sifting.
    """

    name = "proxy"

    scores = True
    scores_with_proxy = True
    run_name_fields = {"beta": "beta_value", "hist": "loss_history_length", "proxy": "proxy_size"}

    proxy_size: float = 0.25

    def __post_init__(self) -> None:
        proxy_size = self.proxy_size
        message = f"proxy_size must be a number in (0, 1], the proxy's share of the model's size, got {proxy_size!r}"
        if not _is_real(proxy_size):
            raise TypeError(message)
        if not 0 < proxy_size <= 1:  # also rejects NaN
            raise ValueError(message)
        self._settle_rule(proxy_size=float(proxy_size))

    def selector(self, context: SelectionContext) -> RelativeProbabilisticSelector:
        return RelativeProbabilisticSelector(self, context)


@dataclass(frozen=True)
class RandomSiftConfig(BuiltInPolicy):
    """The control: keep each sample with probability ``keep_fraction``, whatever its loss.

    Same delay and same batch refill as loss-based sifting, but no scoring
    forward pass, so a table can set sifting against plain subsampling at the
    same % accepted.
    """

    name = "random"

    run_name_fields = {"keep": "keep_fraction"}

    keep_fraction: float
    loss_based_sift_config: LossConfig

    def __post_init__(self) -> None:
        keep_fraction = self.keep_fraction
        if not _is_real(keep_fraction):
            raise TypeError(f"keep_fraction must be a number in (0, 1], got {keep_fraction!r}")
        if not 0 < keep_fraction <= 1:  # also rejects NaN
            raise ValueError(f"keep_fraction must be a number in (0, 1], got {keep_fraction!r}")
        self._settle(keep_fraction=float(keep_fraction))

    def selector(self, context: SelectionContext) -> RandomSelector:
        return RandomSelector(self, context)


@dataclass(frozen=True)
class StaleLossSiftConfig(LossRankPolicy):
    """Relative probabilistic sifting decided from each sample's last TRAINING loss, with no scoring pass.

    The keep rule is ``RelativeProbabilisticSiftConfig``'s, ``p ** beta_value``,
    but ``p`` ranks the loss the sample had when it was last trained (reported
    back with ``SiftingDataloader.record_losses``) among the remembered losses
    of the last ``loss_history_length`` candidates, kept or not. A sample with no
    remembered loss, or whose loss is more than ``max_loss_age_epochs`` epochs
    old, is kept: it can be sifted out at most ``max_loss_age_epochs`` epochs
    in a row, so no sample is starved by a stale low loss.
    """

    name = "stale_loss"

    uses_training_losses = True
    run_name_fields = {"beta": "beta_value", "hist": "loss_history_length"}

    max_loss_age_epochs: int = 1

    def __post_init__(self) -> None:
        self._settle_rule(max_loss_age_epochs=_checked_count(self.max_loss_age_epochs, "max_loss_age_epochs"))

    def selector(self, context: SelectionContext) -> StaleLossSelector:
        return StaleLossSelector(self, context)


@dataclass(frozen=True)
class StaleSBSiftConfig(LossRankPolicy):
    """Selective Backprop's Stale-SB (Jiang et al. 2019): smart sifting's rule on losses scored every few epochs.

    A sample is scored by a no-grad forward pass (the loader's scoring pass, its time counted as scoring) when it
    has no stored loss or its stored loss is ``rescore_every_epochs`` epochs old or more; in between it is
    decided from that stored loss. Every candidate is kept with probability ``p ** beta_value``, ``p`` ranking
    its stored loss among the stored losses of the last ``loss_history_length`` candidates. About
    ``1 / (1 + beta_value)`` of the candidates are kept in every epoch. Unlike ``StaleLossSiftConfig`` it pays
    for its scoring passes and needs no loss from the training loop.
    """

    name = "stale_sb"

    scores_on_demand = True
    run_name_fields = {"beta": "beta_value", "hist": "loss_history_length", "every": "rescore_every_epochs"}

    rescore_every_epochs: int = 3

    def __post_init__(self) -> None:
        self._settle_rule(rescore_every_epochs=_checked_count(self.rescore_every_epochs, "rescore_every_epochs"))

    def selector(self, context: SelectionContext) -> StaleSBSelector:
        return StaleSBSelector(self, context)


ANNEAL_BY = ("epochs", "samples")


def _no_delay() -> LossConfig:
    # InfoBatch needs no delay: nothing is remembered in the first epoch, so it trains on everything.
    return LossConfig(sift_config=SiftingBaseConfig(sift_delay=0))


@dataclass(frozen=True)
class InfoBatchSiftConfig(BuiltInPolicy):
    """InfoBatch: prune a random ``prune_ratio`` of the samples whose last training loss is below the mean.

    At each epoch the threshold is the mean of the remembered training losses.
    A sample remembered below it is left out with probability ``prune_ratio``
    (at most 0.9, as the official code clamps it); if kept, its loss is to be
    weighted by ``1 / (1 - prune_ratio)`` (see ``SiftingDataloader.batch_weights``),
    so the expected gradient is unchanged. Samples at or above the mean, and
    samples with no remembered loss, are kept with weight 1.

    ``anneal_by="epochs"`` (default, as the official sampler): whole epochs only,
    epoch ``e`` (from 0) pruned while ``e + 1 <= num_epochs * (1 - anneal_fraction)``
    and never the first; the annealed epochs train on everything at weight 1.
    ``anneal_by="samples"``: nothing is pruned once ``(1 - anneal_fraction) *
    num_epochs * num_samples`` candidates were seen, possibly mid-epoch.

    ``prune_ratio`` is the share of the below-mean samples left out, not of the
    data set: the fraction saved is about ``prune_ratio * (share below the
    mean) * (1 - anneal_fraction)``.
    """

    name = "infobatch"

    uses_training_losses = True
    weights_losses = True
    needs_num_epochs = True
    run_name_fields = {"prune": "prune_ratio", "anneal": "anneal_fraction"}

    prune_ratio: float = 0.5
    anneal_fraction: float = 0.125
    loss_based_sift_config: LossConfig = field(default_factory=_no_delay)
    anneal_by: str = "epochs"

    def __post_init__(self) -> None:
        if self.anneal_by not in ANNEAL_BY:
            raise ValueError(f"anneal_by must be one of {ANNEAL_BY}, got {self.anneal_by!r}")
        prune_ratio = self.prune_ratio
        message = f"prune_ratio must be a number in (0, 1), got {prune_ratio!r}"
        if not _is_real(prune_ratio):
            raise TypeError(message)
        if not 0 < prune_ratio < 1:  # also rejects NaN
            raise ValueError(message)
        anneal_fraction = self.anneal_fraction
        message = f"anneal_fraction must be a number in [0, 1), got {anneal_fraction!r}"
        if not _is_real(anneal_fraction):
            raise TypeError(message)
        if not 0 <= anneal_fraction < 1:  # also rejects NaN
            raise ValueError(message)
        self._settle(prune_ratio=float(prune_ratio), anneal_fraction=float(anneal_fraction))

    def selector(self, context: SelectionContext) -> InfoBatchSelector:
        return InfoBatchSelector(self, context)


class _KeepAll(Selector):
    def keep(self, candidates: Candidates) -> torch.Tensor:
        return torch.ones(candidates.n, dtype=torch.bool)


@dataclass(frozen=True)
class PassThroughSiftConfig(BuiltInPolicy):
    """The baseline inside a script: every batch passes through untouched, the very same objects; nothing is scored.

    ``python -m sift_bench.sagemaker --sifter none`` puts it in place of a script's own config, so the script runs
    unchanged on all of its data. ``stats`` still counts the samples (all seen and kept).
    """

    name = "none"

    passes_through = True

    loss_based_sift_config: LossConfig = field(default_factory=_no_delay)

    def __post_init__(self) -> None:
        self._settle()

    def selector(self, context: SelectionContext) -> Selector:
        return _KeepAll()


# The policies sift_bench ships, each declared once: the harness's typed schema (sift_bench/schema.py), the runner's
# and the report's names are read off these classes.
BUILT_IN_POLICIES = (RelativeProbabilisticSiftConfig, RandomSiftConfig, StaleLossSiftConfig, StaleSBSiftConfig,
                     InfoBatchSiftConfig, ProxySiftConfig, PassThroughSiftConfig)


def as_sift_config(sift_config: Any) -> Any:
    """``sift_config`` itself, or a RelativeProbabilisticSiftConfig built from a dict of its fields.

    SageMaker's ``SiftingDataloader`` documents its ``sift_config`` as a dict or a RelativeProbabilisticSiftConfig.
    """
    if isinstance(sift_config, Mapping):
        return _from_mapping(RelativeProbabilisticSiftConfig, sift_config, "sift_config")
    return sift_config
