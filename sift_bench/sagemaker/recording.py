"""One MLflow run for one run of a user's script: every SiftingDataloader it builds, its settings and figures.

`ScriptRecorder` is the `SifterWatcher` the runner installs while the script runs: it puts the arm's policy in
place of the script's own (`as-written` keeps it, `none` passes batches through untouched, `random` keeps each
sample with the probability the script's `beta_value` implies), keeps every sifter it is told of, and buffers the
metrics `TrainingMetricsRecorder` hands it, so that nothing is written to the store while the script trains. What
it logs is what the report reads of a harness run (tags task, sifter, scale, seed, config_hash, machine kind;
params sifter.*; metrics train_time_s, cost_usd, pct_accepted, ...), so `python -m sift_bench.report` tables it.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from sift_bench import tracking
from sift_bench.machine import machine_tags
from sift_bench.portable import portable
from sift_bench.store import sqlite_file, use_store
from sift_bench.sifting import PassThroughSiftConfig, RandomSiftConfig, RelativeProbabilisticSiftConfig, SiftPolicy
from sift_bench.sifting.config import BUILT_IN_POLICIES
from sift_bench.sifting.hooks import SifterWatcher

ARMS = ("as-written", "none", "random")
SCALE = "script"  # the report's --scale for runs of a user's script
MAX_METRICS_PER_BATCH = 1000  # MLflow's limit for one log_batch
# The harness's sifter names (conf/sifter/), so a script's rows read like the harness's.
POLICY_NAMES = {policy: policy.name for policy in BUILT_IN_POLICIES}


def implied_keep_fraction(sift_config: SiftPolicy) -> float:
    """The kept fraction the script's beta_value implies on stationary losses, 1 / (1 + beta_value)."""
    if not isinstance(sift_config, RelativeProbabilisticSiftConfig):
        raise ValueError(
            f"--sifter random is not allowed for a script whose SiftingDataloader uses {type(sift_config).__name__}: "
            "the random control keeps 1 / (1 + beta_value) of the samples, which needs the script's "
            "RelativeProbabilisticSiftConfig; allowed are --sifter as-written or none")
    return 1.0 / (1.0 + sift_config.beta_value)


def policy_settings(sift_config: SiftPolicy) -> dict[str, Any]:
    """The policy's fields and its delay, flat, as the harness logs `sifter.*` params."""
    settings = {f.name: getattr(sift_config, f.name) for f in fields(sift_config) if f.name != "loss_based_sift_config"}
    base = sift_config.loss_based_sift_config.sift_config
    if not isinstance(sift_config, PassThroughSiftConfig):
        settings.update(sift_delay=base.sift_delay, repeat_delay_per_epoch=base.repeat_delay_per_epoch)
    return settings


class ScriptRecorder(SifterWatcher):
    """Puts the arm's policy in place of each script config, and keeps what the run logs at its end."""

    def __init__(self, arm: str) -> None:
        if arm not in ARMS:
            raise ValueError(f"--sifter must be one of {', '.join(ARMS)}, got {arm!r}")
        self.arm = arm
        self.script_configs: list[SiftPolicy] = []  # as the script built them
        self.sifters: list[Any] = []
        self.metrics: list[Metric] = []

    def policy(self, sift_config: SiftPolicy) -> SiftPolicy:
        self.script_configs.append(sift_config)
        delay = sift_config.loss_based_sift_config
        if self.arm == "none":
            return PassThroughSiftConfig(loss_based_sift_config=delay)
        if self.arm == "random":
            return RandomSiftConfig(keep_fraction=implied_keep_fraction(sift_config), loss_based_sift_config=delay)
        return sift_config

    def created(self, sifter: Any) -> None:
        self.sifters.append(sifter)

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        stamp = int(time.time() * 1000)
        self.metrics.extend(Metric(name, float(value), stamp, step or 0) for name, value in metrics.items()
                            if isinstance(value, (int, float)) and not math.isnan(value))

    # ------------------------------------------------------------ what the run records

    def sifter_name(self) -> str:
        if not self.sifters:
            return {"as-written": "script", "none": "none", "random": "random"}[self.arm]
        policy = type(self.sifters[0].sift_config)
        return POLICY_NAMES.get(policy, policy.__name__)

    def params(self) -> dict[str, str]:
        if not self.sifters:
            return {"sifter.name": self.sifter_name()}
        settings = policy_settings(self.sifters[0].sift_config)
        return {"sifter.name": self.sifter_name(), **{f"sifter.{key}": str(value) for key, value in settings.items()}}

    def configs_differ(self) -> bool:
        return len({repr(config) for config in self.script_configs}) > 1

    def totals(self) -> dict[str, float]:
        """The sifters' counts summed over every SiftingDataloader the script built."""
        seen = sum(sifter.stats.samples_seen for sifter in self.sifters)
        kept = sum(sifter.stats.samples_kept for sifter in self.sifters)
        return {
            "samples_seen": float(seen), "samples_kept": float(kept), "samples_trained": float(kept),
            "work_trained": float(kept),
            "pct_accepted": 100.0 * kept / seen if seen else 100.0,
            "batches_yielded": float(sum(sifter.stats.batches_yielded for sifter in self.sifters)),
            "sift_time_s": float(sum(sifter.stats.scoring_seconds for sifter in self.sifters)),
        }

    def batch_log(self) -> list[dict]:
        return [record for sifter in self.sifters for record in sifter.batch_log]


def lightning_metrics(sifters: list[Any]) -> dict[str, float]:
    """What a LightningModule logged (`trainer.callback_metrics`), when a sifter scores with one: a script without
    TrainingMetricsRecorder still gets its own metrics (val_acc, ...) into the run."""
    metrics: dict[str, float] = {}
    for sifter in sifters:
        try:
            trainer = getattr(sifter.model, "trainer", None)
        except RuntimeError:  # a LightningModule not attached to a Trainer
            continue
        for name, value in getattr(trainer, "callback_metrics", {}).items():
            if hasattr(value, "numel") and value.numel() == 1:
                value = value.item()
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                metrics[str(name)] = float(value)
    return metrics


def config_hash(script: str, script_args: list[str], arm: str, seed: int | None) -> str:
    """What was run: the script, its arguments, the arm and the seed (the script's own settings are in its args)."""
    identity = {"script": portable(str(Path(script).resolve())), "args": script_args, "arm": arm,
                "seed": seed}
    return hashlib.sha1(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def start_run(uri: str, experiment_name: str, script: str, script_args: list[str], arm: str, seed: int | None,
              command: str, alive_tags: dict[str, str]):
    """The run of this script and arm, started as MLflow's active run (the script's own MLflow logging lands in it)."""
    experiment_id = use_store(uri, experiment_name)
    name = Path(script).stem
    tags = {
        "task": name, "scale": SCALE, "seed": "script" if seed is None else str(seed), "world_size": "1",
        "config_hash": config_hash(script, script_args, arm, seed), "arm": arm, "command": command,
        "mlflow.source.name": "sift_bench.sagemaker", "script": portable(str(Path(script).resolve())),
        **machine_tags(), **alive_tags,
    }
    commit = tracking.git_commit()
    if commit:
        tags["git_commit"] = commit
        tags["mlflow.source.git.commit"] = commit
    own_commit = tracking.git_commit(Path(script).resolve().parent)
    if own_commit:
        tags["script.git_commit"] = own_commit
    run_name = " ".join(part for part in (name, SCALE, arm, f"seed={tags['seed']}"))
    return mlflow.start_run(experiment_id=experiment_id, run_name=run_name, tags=tags)


def log_json(uri: str, run, value: Any, name: str) -> None:
    """`value` as the run's artifact `name`; a relative artifact location (a store made by sift_bench.store.use_store) lies
    in the sqlite file's own folder, wherever the command runs, as for tracking.log_config."""
    artifact_uri = run.info.artifact_uri
    store_file = sqlite_file(uri)
    if store_file is None or "://" in artifact_uri or artifact_uri.startswith(("/", "file:")):
        MlflowClient(uri).log_dict(run.info.run_id, value, name)
        return
    target = store_file.parent / artifact_uri / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(value))


def finish_run(uri: str, run, recorder: ScriptRecorder, script_args: list[str], wall_s: float,
               other_cpu: tuple[float, float], usd_per_hour: float, seed: int | None,
               script_seed: int | None) -> dict[str, float]:
    """Log the run's params, sifting figures, time and cost; returns the final metrics."""
    client = MlflowClient(uri)
    run_id = run.info.run_id
    first = recorder.sifters[0] if recorder.sifters else None
    loader = getattr(first, "orig_dataloader", None)
    # enable_sifting's sifter wraps the Trainer's loader in a counter (`.loader`); the data set is that loader's.
    dataset = getattr(loader, "dataset", None) or getattr(getattr(loader, "loader", None), "dataset", None)
    tags = {
        "sifter": recorder.sifter_name(), "sifters_built": str(len(recorder.sifters)),
        "model": type(first.model).__name__ if first is not None and first.model is not None else "unknown",
        "dataset": type(dataset).__name__ if dataset is not None else "unknown",
        # A script that reseeds torch after the runner did is told apart: its seeds do not vary what it draws.
        "script_seeds_itself": str(seed is not None and script_seed != seed).lower(),
        **({"script_seed": str(script_seed)} if seed is not None and script_seed != seed else {}),
        **({"sifter_configs_differ": "true"} if recorder.configs_differ() else {}),
    }
    params = {**recorder.params(), "script.args": " ".join(script_args)[:500]}
    already = client.get_run(run_id).data.params
    client.log_batch(run_id, params=[Param(key, value) for key, value in params.items() if key not in already],
                     tags=[RunTag(key, value) for key, value in tags.items()])
    for start in range(0, len(recorder.metrics), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=recorder.metrics[start:start + MAX_METRICS_PER_BATCH])
    final = {**lightning_metrics(recorder.sifters), **recorder.totals(), "train_time_s": wall_s,
             "cost_usd": usd_per_hour * wall_s / 3600.0, "other_cpu_s": other_cpu[0],
             "other_cpu_fraction": other_cpu[1], "time_to_target_s": math.nan}
    stamp = int(time.time() * 1000)
    step = max((metric.step for metric in recorder.metrics), default=0)
    client.log_batch(run_id, metrics=[Metric(name, value, stamp, step) for name, value in final.items()
                                      if not math.isnan(value)])
    batch_log = recorder.batch_log()
    if batch_log:
        log_json(uri, run, batch_log, "sifted_batches.json")
    return final
