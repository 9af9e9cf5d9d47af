"""MLflow logging for one job: params, tags, per-epoch and final metrics, run status.

The store is always named explicitly (default `sqlite:///mlflow.db`, relative to where the
command runs), so `mlflow ui --backend-store-uri sqlite:///mlflow.db` shows the runs.
"""

import contextlib
import fcntl
import hashlib
import json
import math
import os
import sqlite3
import subprocess
from pathlib import Path

import mlflow
import yaml
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from sift_bench.machine import CONTENDED_FRACTION, is_contended

PARENT_RUN_ENV = "SIFT_BENCH_PARENT_RUN_ID"
SWEEP_STARTED_ENV = "SIFT_BENCH_SWEEP_STARTED_MS"  # when this sitting's sweep began, in ms since the epoch
# Settings that say where things are, how they are shown or priced, or how a sweep is laid out (`table` is only
# interpolated into rows, which hash its resolved values), not what is trained: left out of the config hash.
NOT_HASHED = ("paths", "tracking", "hydra", "sweep_name", "table", "cost")
NOT_HASHED_TRAINER = ("progress", "num_threads")
ARTIFACTS_FOLDER = "mlartifacts"
CONTENDED_TAG = "timing.contended"  # "true" when other processes used the machine while the run trained


def flatten(tree, prefix: str = "") -> dict[str, str]:
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = str(value)
    return flat


def config_hash(cfg: DictConfig, world_size: int = 1) -> str:
    """A fingerprint of what is trained: task, sifter, scale, trainer and seed, and the world size under DDP.

    In one process the world size and `sifter.sync` (which only DDP reads) stay out, so a run's identity is the
    one it had before DDP existed."""
    tree = OmegaConf.to_container(cfg, resolve=True)
    for key in NOT_HASHED:
        tree.pop(key, None)
    if world_size > 1:
        tree["world_size"] = world_size
    else:
        tree.get("sifter", {}).pop("sync", None)
    for key in NOT_HASHED_TRAINER:
        tree.get("trainer", {}).pop(key, None)
    drop_implied(tree)
    return hashlib.sha1(json.dumps(tree, sort_keys=True).encode()).hexdigest()[:16]


def drop_implied(tree: dict) -> None:
    """Leave out of the hash the keys added after the committed tables ran, at the value their runs implied, so
    those runs keep their identity: a `_target_` naming sift_bench's own code (the task or sifter name says which
    already; a user's code stays in) and the native training loop."""
    for group in ("task", "sifter"):
        node = tree.get(group)
        if isinstance(node, dict) and str(node.get("_target_", "")).startswith("sift_bench."):
            node.pop("_target_")
    if tree.get("trainer", {}).get("loop") == "native":
        tree["trainer"].pop("loop")


def portable(value):
    """An absolute path (or sqlite URI of one) as a path relative to the working directory, so that what a run
    records names no folder of the machine that made it; any other value unchanged."""
    if not isinstance(value, str):
        return value
    if value.startswith("sqlite:////"):
        return "sqlite:///" + os.path.relpath(value[len("sqlite:///"):])
    if value.startswith("file:///"):
        return os.path.relpath(value[len("file://"):])
    if value.startswith("/"):
        return os.path.relpath(value)
    return value


def portable_tree(tree):
    if isinstance(tree, dict):
        return {key: portable_tree(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [portable_tree(value) for value in tree]
    return portable(tree)


def portable_argument(argument: str) -> str:
    key, equals, value = argument.partition("=")
    return f"{key}={portable(value)}" if equals else portable(argument)


def _git(*args: str) -> str | None:
    """What `git ARGS` prints in the checkout sift_bench runs from, or None (no git, no checkout, an error)."""
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def git_commit() -> str | None:
    return _git("rev-parse", "HEAD")


def git_remote() -> str | None:
    """The `origin` remote's URL (or path), or None."""
    return _git("remote", "get-url", "origin")


def machine_tags() -> dict[str, str]:
    """What the run ran on, so a report can say it without being run on the same machine."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    tags = {"machine.cpu": cpu, "machine.cores": str(os.cpu_count()), "torch_version": torch.__version__}
    if torch.cuda.is_available():
        tags["machine.gpu"] = torch.cuda.get_device_name()
    tags["machine.kind"] = machine_kind(cpu, os.cpu_count(), cpu_identity(), tags.get("machine.gpu"))
    return tags


# CPU features that change which kernels oneDNN runs, and so the speed of a bf16 step: two virtual machines
# both named "Intel(R) Xeon(R) Processor" trained the same ResNet-20 at 41.6 s and 128 s per epoch, with and
# without AMX.
SPEED_FLAGS = ("amx_bf16", "amx_fp16", "amx_int8", "amx_tile", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx512f",
               "avx2")


def cpu_identity(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """'family F model M' and the speed-relevant CPU flags, from the first processor of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo_path) as handle:
            for line in handle:
                if not line.strip():
                    break  # the first processor's block is enough: the cores of one machine are alike
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        return "unknown"
    flags = set(fields.get("flags", "").split())
    return " ".join([f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}",
                     *[flag for flag in SPEED_FLAGS if flag in flags]])


def machine_kind(cpu: str, cores: int | None, identity: str, gpu: str | None = None) -> str:
    """One string per kind of machine: runs compare in time only with runs of the same kind."""
    kind = f"{cpu}, {cores} cores, {identity}"
    return f"{kind}, GPU {gpu}" if gpu else kind


def command_tags() -> dict[str, str]:
    """The command line that launched the job, and this job's own overrides within a sweep."""
    import sys

    from hydra.core.hydra_config import HydraConfig

    tags = {"command": " ".join(["python -m sift_bench", *map(portable_argument, sys.argv[1:])]),
            # MLflow would record sys.argv[0], an absolute path.
            "mlflow.source.name": "sift_bench"}
    if HydraConfig.initialized():
        tags["overrides"] = " ".join(map(portable_argument, HydraConfig.get().overrides.task))
    return tags


def sifter_label(sifter_cfg) -> str:
    """The policy's run-name fields and its delay, `beta=3 hist=500 delay=10`, as its class declares them; empty for
    the baseline."""
    from sift_bench.sifting.policy import run_label
    from sift_bench.targets import is_baseline, policy_class

    return "" if is_baseline(sifter_cfg) else run_label(policy_class(sifter_cfg), sifter_cfg)


def run_name(cfg: DictConfig) -> str:
    if cfg.tracking.run_name:
        return cfg.tracking.run_name
    parts = [cfg.task.name, cfg.scale.name, cfg.sifter.name, sifter_label(cfg.sifter), f"seed={cfg.seed}"]
    return " ".join(part for part in parts if part)


def sqlite_file(uri: str) -> Path | None:
    """A sqlite store's file, or None for any other store."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


@contextlib.contextmanager
def store_lock(store_file: Path | None):
    """Holds an exclusive lock on a sqlite store (a `.lock` file beside it) across processes; no-op for a server.

    Opening a new sqlite store runs MLflow's schema migrations, and two processes that do it at once fail
    (`duplicate column name: step`); two that create the experiment at once fail likewise."""
    if store_file is None:
        yield
        return
    store_file.parent.mkdir(parents=True, exist_ok=True)
    with open(store_file.with_name(store_file.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def use_store(uri: str, experiment_name: str) -> str:
    """Point MLflow at the store and experiment, creating the experiment with artifacts next to a sqlite file."""
    with store_lock(sqlite_file(uri)):
        return _use_store(uri, experiment_name)


def _use_store(uri: str, experiment_name: str) -> str:
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is not None:
        return experiment.experiment_id
    store_file = sqlite_file(uri)
    if store_file is None:
        return client.create_experiment(experiment_name)
    experiment_id = client.create_experiment(
        experiment_name, artifact_location=(store_file.parent.resolve() / ARTIFACTS_FOLDER).as_uri())
    # MLflow stores an absolute artifact location; a relative one, read against the store's own folder (see
    # log_config), lets a committed store move to any clone and resume there.
    with sqlite3.connect(store_file) as connection:
        connection.execute("PRAGMA secure_delete = ON")  # so the replaced absolute path leaves no trace in the file
        # Experiment 0 is MLflow's own "Default", made with the store, at an absolute ./mlruns of the caller.
        connection.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id IN (0, ?)",
                           (ARTIFACTS_FOLDER, int(experiment_id)))
    return experiment_id


def find_finished_run(uri: str, experiment_id: str, fingerprint: str, timing_slot: str | None = None,
                      clean_only: bool = False) -> str | None:
    """A FINISHED run with this config hash; for the `last` timing slot of a table's baseline, one in that slot;
    with `clean_only`, one during which other processes used at most CONTENDED_FRACTION of a core."""
    slot = " and tags.timing_slot = 'last'" if timing_slot == "last" else ""
    clean = f" and metrics.other_cpu_fraction <= {CONTENDED_FRACTION}" if clean_only else ""
    runs = MlflowClient(uri).search_runs(
        [experiment_id], max_results=1,
        filter_string=f"tags.config_hash = '{fingerprint}' and attributes.status = 'FINISHED'{slot}{clean}")
    return runs[0].info.run_id if runs else None


def finished_machine_kinds(uri: str, experiment_id: str, task: str, scale: str,
                           sifter: str | None = None, since_ms: int | None = None) -> dict[str, int]:
    """How many FINISHED runs of this task and scale (and sifter, and started at or after `since_ms`, if given)
    the store holds per machine kind."""
    sifter_filter = f" and tags.sifter = '{sifter}'" if sifter else ""
    if since_ms is not None:
        sifter_filter += f" and attributes.start_time >= {since_ms}"
    runs = MlflowClient(uri).search_runs(
        [experiment_id], max_results=50_000,
        filter_string=f"tags.task = '{task}' and tags.scale = '{scale}'{sifter_filter} and attributes.status = 'FINISHED'")
    kinds: dict[str, int] = {}
    for run in runs:
        kind = run.data.tags.get("machine.kind", "untagged (logged before machine.kind existed)")
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def other_machine_error(cfg: DictConfig, kinds: dict[str, int], this_kind: str) -> str | None:
    """Why this machine must not add runs to a store whose runs of the same task and scale came from another
    machine kind (their training times cannot be compared), or None when it may."""
    others = {kind: count for kind, count in kinds.items() if kind != this_kind}
    if not others:
        return None
    held = "; ".join(f"{count} on '{kind}'" for kind, count in others.items())
    return (f"tracking.require_same_machine=true: {cfg.tracking.uri} holds FINISHED {cfg.task.name} runs at "
            f"scale={cfg.scale.name} from another machine kind ({held}), and this machine is '{this_kind}'. "
            "Training times from different kinds cannot be compared in one table. Run it on a machine of that "
            "kind, point tracking.uri (SIFT_BENCH_STORE for experiments/savings_table.sh) at another store, or set "
            "tracking.require_same_machine=false")


def run_tags(cfg: DictConfig, model_name: str, dataset_name: str, fingerprint: str,
             world_size: int = 1) -> dict[str, str]:
    tags = {
        "task": cfg.task.name,
        "model": model_name,
        "dataset": dataset_name,
        "sifter": cfg.sifter.name,
        "scale": cfg.scale.name,
        "seed": str(cfg.seed),
        "config_hash": fingerprint,
        "world_size": str(world_size),  # the report pairs savings within one world size
    }
    if cfg.tracking.timing_slot:
        tags["timing_slot"] = str(cfg.tracking.timing_slot)
    tags.update(machine_tags())
    tags.update(command_tags())
    commit = git_commit()
    if commit:
        tags["git_commit"] = commit
        tags["mlflow.source.git.commit"] = commit
    remote = git_remote()
    if remote:
        # MLflow records the remote as it is; a clone of a local folder has an absolute path there.
        tags["mlflow.source.git.repoURL"] = portable(remote)
    return tags


def start_run(cfg: DictConfig, experiment_id: str, tags: dict[str, str], world_size: int = 1):
    run = mlflow.start_run(
        experiment_id=experiment_id, run_name=run_name(cfg), tags=tags, parent_run_id=os.environ.get(PARENT_RUN_ENV) or None
    )
    tree = portable_tree(OmegaConf.to_container(cfg, resolve=True))
    mlflow.log_params({**shown_params(tree), "world_size": str(world_size)})
    log_config(cfg.tracking.uri, run, tree)
    return run


def shown_params(tree: dict) -> dict[str, str]:
    """The flattened config as params, a model name the model source does not read marked so (the `model` tag names
    the model trained): SST-2's `task.model.name` is the hub model, unused with the offline package."""
    params = flatten(tree)
    model = tree.get("task", {}).get("model")
    if isinstance(model, dict) and "name" in model and model.get("source", "hub") != "hub":
        params["task.model.name"] = f"unused (task.model.source={model['source']})"
    return params


def log_config(uri: str, run, tree: dict) -> None:
    """The resolved config as the run's `config.yaml` artifact. A relative artifact location (a store made by
    use_store) lies in the sqlite file's own folder, wherever the command runs."""
    artifact_uri = run.info.artifact_uri
    store_file = sqlite_file(uri)
    if store_file is None or "://" in artifact_uri or artifact_uri.startswith(("/", "file:")):
        mlflow.log_dict(tree, "config.yaml")
        return
    target = store_file.parent / artifact_uri / "config.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(tree, sort_keys=False))


class EvalLogger:
    """Logs each evaluation point as MLflow metrics at step 0, 1, 2, ..."""

    def __init__(self):
        self.step = 0

    def __call__(self, point) -> None:
        mlflow.log_metrics({
            "train_loss": point.train_loss, "val_accuracy": point.val_accuracy, "test_accuracy": point.test_accuracy, "pct_accepted": point.pct_accepted,
            "epoch": point.epoch, "train_time_s": point.train_time_s, "samples_seen": point.samples_seen,
            "samples_trained": point.samples_trained, "lr_multiplier": point.lr_multiplier,
        }, step=self.step)
        self.step += 1


def log_final(result, cost_usd: float) -> None:
    # Logged at the last evaluation's step, so each metric's latest value is the run's final figure.
    mlflow.log_metrics({
        "val_accuracy": result.val_accuracy, "test_accuracy": result.test_accuracy, "train_time_s": result.train_time_s, "sift_time_s": result.sift_time_s,
        "eval_time_s": result.eval_time_s, "cost_usd": cost_usd, "pct_accepted": result.pct_accepted,
        "samples_seen": result.samples_seen, "samples_trained": result.samples_trained,
        "time_to_target_s": result.time_to_target_s, "other_cpu_s": result.other_cpu_s,
        "work_trained": result.work_trained,
        "other_cpu_fraction": result.other_cpu_fraction,
        # Under DDP: sums over the ranks (steps: each rank's batches, the same on every rank).
        "samples_left_over": result.samples_left_over, "sift_sync_time_s": result.sync_time_s, "steps": result.steps,
    }, step=len(result.history) - 1)
    if not math.isnan(result.other_cpu_fraction):  # unmeasured without /proc/stat
        mlflow.set_tag(CONTENDED_TAG, str(is_contended(result.other_cpu_fraction)).lower())
