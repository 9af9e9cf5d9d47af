"""Checks that run before any data or model is loaded, so bad input fails in a second, not an hour in."""

import math
from datetime import datetime
from pathlib import Path

from omegaconf import DictConfig

from sift_bench.distributed import world_size_from_env
from sift_bench.schedule import SCHEDULES
from sift_bench.sifting.ranks import SYNC_MODES
from sift_bench.sifting import (
    InfoBatchSiftConfig, LossConfig, RandomSiftConfig, RelativeProbabilisticSiftConfig, SiftingBaseConfig,
    StaleLossSiftConfig,
)

OPTIMIZER_IMPLEMENTATIONS = ("for-loop", "foreach", "fused")
SIFTERS = ("none", "relative_probabilistic", "random", "stale_loss", "infobatch")


class ConfigError(ValueError):
    """A setting has a value that is not allowed; the message names the setting, the value and what is allowed."""


def build_sift_config(sifter_cfg):
    """The sifting library's config for `sifter=...`, or None for the baseline. Raises ConfigError on bad values."""
    name = sifter_cfg.name
    if name == "none":
        return None
    try:
        base = LossConfig(sift_config=SiftingBaseConfig(
            sift_delay=sifter_cfg.sift_delay, repeat_delay_per_epoch=sifter_cfg.repeat_delay_per_epoch))
        if name == "relative_probabilistic":
            return RelativeProbabilisticSiftConfig(
                beta_value=sifter_cfg.beta_value, loss_history_length=sifter_cfg.loss_history_length,
                loss_based_sift_config=base)
        if name == "random":
            return RandomSiftConfig(keep_fraction=sifter_cfg.keep_fraction, loss_based_sift_config=base)
        if name == "stale_loss":
            return StaleLossSiftConfig(
                beta_value=sifter_cfg.beta_value, loss_history_length=sifter_cfg.loss_history_length,
                max_loss_age_epochs=sifter_cfg.max_loss_age_epochs, loss_based_sift_config=base)
        if name == "infobatch":
            return InfoBatchSiftConfig(
                prune_ratio=sifter_cfg.prune_ratio, anneal_fraction=sifter_cfg.anneal_fraction, loss_based_sift_config=base)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"sifter={name}: {error}") from error
    raise ConfigError(f"sifter.name must be one of {SIFTERS}, got {name!r}")


def _require(condition: bool, setting: str, value, allowed: str) -> None:
    if not condition:
        raise ConfigError(f"{setting}={value!r} is not allowed: {allowed}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def start_deadline(value) -> datetime | None:
    """`tracking.start_before` as a time: ISO 8601, local time unless it names a zone; None when unset."""
    if value is None:
        return None
    try:
        deadline = datetime.fromisoformat(str(value))
    except ValueError:
        deadline = None
    _require(deadline is not None, "tracking.start_before", value,
             "null or an ISO 8601 time such as 2026-12-03T09:30 (local time) or 2026-12-03T09:30+00:00")
    return deadline


def validate(cfg: DictConfig):
    """Validate the whole job config; returns the sift config (None for the baseline)."""
    sift_config = build_sift_config(cfg.sifter)
    start_deadline(cfg.tracking.start_before)
    _require(cfg.tracking.timing_slot in (None, "first", "last"), "tracking.timing_slot", cfg.tracking.timing_slot,
             "null, 'first' or 'last'")
    if cfg.sifter.name != "none":
        _require(cfg.sifter.get("sync") in SYNC_MODES, "sifter.sync", cfg.sifter.get("sync"),
                 f"one of {SYNC_MODES} (global: one loss history across DDP ranks; local: each rank sifts alone)")
    trainer = cfg.trainer
    _require(_is_int(cfg.seed) and cfg.seed >= 0, "seed", cfg.seed, "an integer >= 0")
    _require(_is_int(trainer.epochs) and trainer.epochs >= 1, "trainer.epochs", trainer.epochs, "an integer >= 1")
    _require(_is_int(trainer.batch_size) and trainer.batch_size >= 1, "trainer.batch_size", trainer.batch_size, "an integer >= 1")
    world_size = world_size_from_env()
    _require(trainer.batch_size % world_size == 0, "trainer.batch_size", trainer.batch_size,
             f"a multiple of the {world_size} DDP ranks (WORLD_SIZE={world_size}): it is the global batch, which "
             "each rank takes an equal share of")
    _require(_is_int(trainer.evals_per_epoch) and trainer.evals_per_epoch >= 1, "trainer.evals_per_epoch",
             trainer.evals_per_epoch, "an integer >= 1")
    _require(_is_int(trainer.eval_every_epochs) and trainer.eval_every_epochs >= 1, "trainer.eval_every_epochs",
             trainer.eval_every_epochs, "an integer >= 1")
    _require(trainer.evals_per_epoch == 1 or trainer.eval_every_epochs == 1, "trainer.eval_every_epochs",
             trainer.eval_every_epochs, f"1 when trainer.evals_per_epoch > 1 (it is {trainer.evals_per_epoch})")
    lr = trainer.optimizer.lr
    _require(isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0, "trainer.optimizer.lr", lr, "a finite number > 0")
    _require(trainer.optimizer.name in ("sgd", "adamw"), "trainer.optimizer.name", trainer.optimizer.name, "'sgd' or 'adamw'")
    _require(trainer.optimizer.implementation in OPTIMIZER_IMPLEMENTATIONS, "trainer.optimizer.implementation",
             trainer.optimizer.implementation, f"one of {OPTIMIZER_IMPLEMENTATIONS}")
    _require(trainer.schedule.name in SCHEDULES, "trainer.schedule.name", trainer.schedule.name, f"one of {SCHEDULES}")
    _require(0 <= trainer.schedule.warmup_fraction < 1, "trainer.schedule.warmup_fraction",
             trainer.schedule.warmup_fraction, "a number in [0, 1)")
    _require(cfg.scale.precision in ("fp32", "bf16", "fp16"), "scale.precision", cfg.scale.precision, "'fp32', 'bf16' or 'fp16'")
    _require(cfg.scale.device in ("cpu", "cuda") or str(cfg.scale.device).startswith("cuda:"), "scale.device",
             cfg.scale.device, "'cpu', 'cuda' or 'cuda:N'")
    _require(not (cfg.scale.precision == "fp16" and cfg.scale.device == "cpu"), "scale.precision", "fp16",
             "fp16 autocast needs scale.device=cuda; use bf16 or fp32 on the CPU")
    _require(isinstance(cfg.cost.usd_per_hour, (int, float)) and cfg.cost.usd_per_hour >= 0, "cost.usd_per_hour",
             cfg.cost.usd_per_hour, "a number >= 0")
    subset = cfg.task.data.train_subset
    _require(subset is None or (_is_int(subset) and subset >= 1), "task.data.train_subset", subset, "null or an integer >= 1")
    val_size = cfg.task.data.val_size
    _require(_is_int(val_size) and val_size >= 1, "task.data.val_size", val_size,
             "an integer >= 1 (training samples held out to choose settings on)")
    sources = {"cifar10_resnet": ("zip", "torchvision", "synthetic"), "sst2_bert": ("tsv", "hub", "synthetic")}
    _require(cfg.task.name in sources, "task.name", cfg.task.name, f"one of {sorted(sources)}")
    _require(cfg.task.data.source in sources[cfg.task.name], "task.data.source", cfg.task.data.source,
             f"one of {sources[cfg.task.name]} for task={cfg.task.name}")
    if cfg.task.data.source in ("zip", "tsv"):
        data_dir = Path(cfg.paths.data_dir)
        _require(data_dir.is_dir(), "paths.data_dir", str(data_dir),
                 "an existing folder holding cifar10-jpeg.zip and sst2/ (set SIFT_BENCH_DATA_DIR or paths.data_dir=...)")
    return sift_config
