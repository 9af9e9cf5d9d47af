"""Checks that run before any data or model is loaded, so bad input fails in a second, not an hour in."""

import math
from datetime import datetime
from omegaconf import DictConfig, OmegaConf

from sift_bench import machine
from sift_bench.distributed import world_size_from_env
from sift_bench.schedule import SCHEDULES
from sift_bench.errors import ConfigError
from sift_bench.schema import refuse_unknown_keys
from sift_bench.sifting.ranks import SYNC_MODES
from sift_bench.targets import build_sift_config, is_baseline, task_builder

OPTIMIZER_IMPLEMENTATIONS = ("for-loop", "foreach", "fused")
TRAINING_LOOPS = ("native", "hf_trainer")
HF_TRAINER_SCHEDULES = ("linear", "cosine", "constant")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def _require(condition: bool, setting: str, value, allowed: str) -> None:
    if not condition:
        raise ConfigError(f"{setting}={value!r} is not allowed: {allowed}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_hf_trainer_schedule(schedule) -> None:
    """The schedules the Hugging Face Trainer has (trainer.loop=hf_trainer, sift_bench.train_hf)."""
    _require(schedule.name in HF_TRAINER_SCHEDULES, "trainer.schedule.name", schedule.name,
             f"one of {HF_TRAINER_SCHEDULES} with trainer.loop=hf_trainer (the Hugging Face Trainer's schedules)")
    _require(schedule.name != "linear" or schedule.final_lr_fraction == 0,
             "trainer.schedule.final_lr_fraction", schedule.final_lr_fraction,
             "0 with trainer.loop=hf_trainer and a linear schedule: the Trainer's linear schedule decays to 0")


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
    refuse_unknown_keys(cfg)
    task_builder(cfg.task)  # the task's code imports, before the store or the data is touched
    # Named as the yaml names it, with what each mode means, before the policy's own check of the value.
    if not is_baseline(cfg.sifter):
        _require(cfg.sifter.get("sync") in SYNC_MODES, "sifter.sync", cfg.sifter.get("sync"),
                 f"one of {SYNC_MODES} (global: one loss history across DDP ranks; local: each rank sifts alone)")
    sift_config = build_sift_config(cfg.sifter)
    start_deadline(cfg.tracking.start_before)
    _require(cfg.tracking.timing_slot in (None, "first", "last"), "tracking.timing_slot", cfg.tracking.timing_slot,
             "null, 'first' or 'last'")
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
    _require(trainer.loop in TRAINING_LOOPS, "trainer.loop", trainer.loop,
             f"one of {TRAINING_LOOPS} (native: sift_bench's loop; hf_trainer: Hugging Face Trainer)")
    if trainer.loop == "hf_trainer":
        # Refused here, not after the run started.
        check_hf_trainer_schedule(trainer.schedule)
    _require(trainer.schedule.name in SCHEDULES, "trainer.schedule.name", trainer.schedule.name, f"one of {SCHEDULES}")
    _require(0 <= trainer.schedule.warmup_fraction < 1, "trainer.schedule.warmup_fraction",
             trainer.schedule.warmup_fraction, "a number in [0, 1)")
    _require(cfg.scale.precision in PRECISIONS, "scale.precision", cfg.scale.precision,
             "'auto' (bf16 where the device has native bf16 kernels, else fp32), 'fp32', 'bf16' or 'fp16'")
    _require(cfg.scale.device in ("cpu", "cuda") or str(cfg.scale.device).startswith("cuda:"), "scale.device",
             cfg.scale.device, "'cpu', 'cuda' or 'cuda:N'")
    _require(not (cfg.scale.precision == "fp16" and cfg.scale.device == "cpu"), "scale.precision", "fp16",
             "fp16 autocast needs scale.device=cuda; use bf16 or fp32 on the CPU")
    _require(isinstance(cfg.cost.usd_per_hour, (int, float)) and cfg.cost.usd_per_hour >= 0, "cost.usd_per_hour",
             cfg.cost.usd_per_hour, "a number >= 0")
    # The data split settings every built-in task shares; a user's task may have none of them.
    subset = OmegaConf.select(cfg, "task.data.train_subset", default=None)
    _require(subset is None or (_is_int(subset) and subset >= 1), "task.data.train_subset", subset, "null or an integer >= 1")
    val_size = OmegaConf.select(cfg, "task.data.val_size", default=1)
    _require(_is_int(val_size) and val_size >= 1, "task.data.val_size", val_size,
             "an integer >= 1 (training samples held out to choose settings on)")
    return sift_config


def resolve_precision(cfg: DictConfig) -> str:
    """Settles `scale.precision` for this machine, once, after `validate` and before anything is hashed or logged:
    `auto` becomes bf16 where the device has native bf16 kernels, else fp32 (sift_bench.machine.resolve_precision).
    The run logs the precision it trained in and its config_hash covers that, so an `auto` run on a machine with
    AMX is the same training as the committed table's bf16 runs.

    A table sweep (a config with a `table` node) whose `auto` comes out fp32 is refused: its jobs would be new
    configs in the table's store, never its rows. bf16 asked for on a CPU without native kernels runs, with a
    warning of what it costs. Returns the precision, also written into `cfg.scale.precision`."""
    asked, device = cfg.scale.precision, str(cfg.scale.device)
    precision = machine.resolve_precision(asked, device)
    if asked == "auto" and precision != "bf16" and OmegaConf.select(cfg, "table", default=None) is not None:
        where = f"this CPU ({machine.cpu_description()})" if device == "cpu" else f"scale.device={device}"
        raise ConfigError(
            f"scale.precision=auto trains in {precision} on {where}, which has no native bf16 kernels (neither "
            f"{' nor '.join(machine.NATIVE_BF16_FLAGS)}), but the table's runs train in bf16: these jobs would be new "
            "configs in its store, not its rows. Pass scale.precision=fp32 with a store of its own (tracking.uri=, "
            "or SIFT_BENCH_STORE for experiments/savings_table.sh), or run the table on a machine with native bf16 "
            "(scale.precision=bf16 forces it here, 12 to 27 times slower)")
    if precision == "bf16" and device == "cpu" and not machine.has_native_bf16(device):
        machine.warn_emulated_bf16(machine.cpu_description())
    cfg.scale.precision = precision
    return precision
