"""Sifting configurations, named and nested as in SageMaker smart sifting.

Every field is validated in ``__post_init__``, so a harness can check a config
(from Hydra, YAML or a plain dict) before it builds a model or a data loader.
The dataclasses are frozen: a config that was valid at construction stays valid.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


def _is_int(value: Any) -> bool:
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
        return cls(**dict(value))
    raise TypeError(
        f"{field_name} must be a {cls.__name__} or a dict of its fields, "
        f"got {type(value).__name__}: {value!r}"
    )


@dataclass(frozen=True)
class SiftingBaseConfig:
    """When sifting starts.

    sift_delay: number of batches yielded before sifting starts. During the delay
        batches pass through untouched and are not scored. Counted across epochs
        (over every ``iter()`` of the same ``SiftingDataloader``), or from the
        start of each epoch when ``repeat_delay_per_epoch`` is True.
    repeat_delay_per_epoch: restart the delay at every epoch.
    """

    sift_delay: int = 1000
    repeat_delay_per_epoch: bool = False

    def __post_init__(self) -> None:
        message = f"sift_delay must be an int >= 0, got {self.sift_delay!r}"
        if not _is_int(self.sift_delay):
            raise TypeError(message)
        if self.sift_delay < 0:
            raise ValueError(message)
        if not isinstance(self.repeat_delay_per_epoch, bool):
            raise TypeError(
                f"repeat_delay_per_epoch must be a bool, got {self.repeat_delay_per_epoch!r}"
            )
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


@dataclass(frozen=True)
class RelativeProbabilisticSiftConfig:
    """Keep a scored sample with probability ``p ** beta_value``.

    ``p`` is the fraction of the last ``loss_history_length`` per-sample losses
    that are at or below the sample's loss. On stationary losses the kept
    fraction is ``1 / (1 + beta_value)``: 0.5 keeps 66.67 %, 1 keeps 50 %,
    2 keeps 33.33 %, 3 keeps 25 %.
    """

    beta_value: float
    loss_history_length: int
    loss_based_sift_config: LossConfig

    def __post_init__(self) -> None:
        beta_value = self.beta_value
        if not _is_real(beta_value):
            raise TypeError(f"beta_value must be a finite number > 0, got {beta_value!r}")
        if not math.isfinite(beta_value) or beta_value <= 0:
            raise ValueError(f"beta_value must be a finite number > 0, got {beta_value!r}")
        length = self.loss_history_length
        if not _is_int(length):
            raise TypeError(f"loss_history_length must be an int >= 1, got {length!r}")
        if length < 1:
            raise ValueError(f"loss_history_length must be an int >= 1, got {length!r}")
        object.__setattr__(self, "beta_value", float(beta_value))
        object.__setattr__(self, "loss_history_length", int(length))
        object.__setattr__(
            self,
            "loss_based_sift_config",
            _from_mapping(LossConfig, self.loss_based_sift_config, "loss_based_sift_config"),
        )


@dataclass(frozen=True)
class RandomSiftConfig:
    """The control: keep each sample with probability ``keep_fraction``, whatever its loss.

    Same delay and same batch refill as loss-based sifting, but no scoring
    forward pass, so a table can set sifting against plain subsampling at the
    same % accepted.
    """

    keep_fraction: float
    loss_based_sift_config: LossConfig

    def __post_init__(self) -> None:
        keep_fraction = self.keep_fraction
        if not _is_real(keep_fraction):
            raise TypeError(f"keep_fraction must be a number in (0, 1], got {keep_fraction!r}")
        if not 0 < keep_fraction <= 1:  # also rejects NaN
            raise ValueError(f"keep_fraction must be a number in (0, 1], got {keep_fraction!r}")
        object.__setattr__(self, "keep_fraction", float(keep_fraction))
        object.__setattr__(
            self,
            "loss_based_sift_config",
            _from_mapping(LossConfig, self.loss_based_sift_config, "loss_based_sift_config"),
        )
