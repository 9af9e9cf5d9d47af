"""MLflow logging for one job: params, tags, per-epoch and final metrics, run status.

The store is always named explicitly (default `sqlite:///mlflow.db`, relative to where the
command runs), so `mlflow ui --backend-store-uri sqlite:///mlflow.db` shows the runs.
"""

import hashlib
import json
import os
import subprocess
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

PARENT_RUN_ENV = "SIFT_BENCH_PARENT_RUN_ID"
# Settings that say where things are or how they are shown, not what is trained: left out of the config hash.
NOT_HASHED = ("paths", "tracking", "hydra")
NOT_HASHED_TRAINER = ("progress", "num_threads")


def flatten(tree, prefix: str = "") -> dict[str, str]:
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = str(value)
    return flat


def config_hash(cfg: DictConfig) -> str:
    """A fingerprint of what is trained: task, sifter, scale, trainer, cost and seed."""
    tree = OmegaConf.to_container(cfg, resolve=True)
    for key in NOT_HASHED:
        tree.pop(key, None)
    for key in NOT_HASHED_TRAINER:
        tree.get("trainer", {}).pop(key, None)
    return hashlib.sha1(json.dumps(tree, sort_keys=True).encode()).hexdigest()[:16]


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


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

    tags = {"command": " ".join(["python -m sift_bench", *sys.argv[1:]])}
    if HydraConfig.initialized():
        tags["overrides"] = " ".join(HydraConfig.get().overrides.task)
    return tags


def sifter_label(sifter_cfg) -> str:
    if sifter_cfg.name in ("relative_probabilistic", "stale_loss"):
        return f"beta={sifter_cfg.beta_value} hist={sifter_cfg.loss_history_length} delay={sifter_cfg.sift_delay}"
    if sifter_cfg.name == "random":
        return f"keep={sifter_cfg.keep_fraction} delay={sifter_cfg.sift_delay}"
    if sifter_cfg.name == "infobatch":
        return f"prune={sifter_cfg.prune_ratio} anneal={sifter_cfg.anneal_fraction} delay={sifter_cfg.sift_delay}"
    return ""


def run_name(cfg: DictConfig) -> str:
    if cfg.tracking.run_name:
        return cfg.tracking.run_name
    parts = [cfg.task.name, cfg.scale.name, cfg.sifter.name, sifter_label(cfg.sifter), f"seed={cfg.seed}"]
    return " ".join(part for part in parts if part)


def use_store(uri: str, experiment_name: str) -> str:
    """Point MLflow at the store and experiment, creating the experiment with artifacts next to a sqlite file."""
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is not None:
        return experiment.experiment_id
    artifact_location = None
    if uri.startswith("sqlite:///"):
        artifact_location = (Path(uri[len("sqlite:///"):]).resolve().parent / "mlartifacts").as_uri()
    return client.create_experiment(experiment_name, artifact_location=artifact_location)


def find_finished_run(uri: str, experiment_id: str, fingerprint: str) -> str | None:
    runs = MlflowClient(uri).search_runs(
        [experiment_id], filter_string=f"tags.config_hash = '{fingerprint}' and attributes.status = 'FINISHED'", max_results=1
    )
    return runs[0].info.run_id if runs else None


def finished_machine_kinds(uri: str, experiment_id: str, task: str, scale: str,
                           sifter: str | None = None) -> dict[str, int]:
    """How many FINISHED runs of this task and scale (and sifter, if given) the store holds per machine kind."""
    sifter_filter = f" and tags.sifter = '{sifter}'" if sifter else ""
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


def run_tags(cfg: DictConfig, model_name: str, dataset_name: str, fingerprint: str) -> dict[str, str]:
    tags = {
        "task": cfg.task.name,
        "model": model_name,
        "dataset": dataset_name,
        "sifter": cfg.sifter.name,
        "scale": cfg.scale.name,
        "seed": str(cfg.seed),
        "config_hash": fingerprint,
    }
    tags.update(machine_tags())
    tags.update(command_tags())
    commit = git_commit()
    if commit:
        tags["git_commit"] = commit
        tags["mlflow.source.git.commit"] = commit
    return tags


def start_run(cfg: DictConfig, experiment_id: str, tags: dict[str, str]):
    run = mlflow.start_run(
        experiment_id=experiment_id, run_name=run_name(cfg), tags=tags, parent_run_id=os.environ.get(PARENT_RUN_ENV) or None
    )
    tree = OmegaConf.to_container(cfg, resolve=True)
    mlflow.log_params(flatten(tree))
    mlflow.log_dict(tree, "config.yaml")
    return run


class EvalLogger:
    """Logs each evaluation point as MLflow metrics at step 0, 1, 2, ..."""

    def __init__(self):
        self.step = 0

    def __call__(self, point) -> None:
        mlflow.log_metrics({
            "train_loss": point.train_loss, "eval_accuracy": point.eval_accuracy, "pct_accepted": point.pct_accepted,
            "epoch": point.epoch, "train_time_s": point.train_time_s, "samples_seen": point.samples_seen,
            "samples_trained": point.samples_trained, "lr_multiplier": point.lr_multiplier,
        }, step=self.step)
        self.step += 1


def log_final(result, cost_usd: float) -> None:
    # Logged at the last evaluation's step, so each metric's latest value is the run's final figure.
    mlflow.log_metrics({
        "eval_accuracy": result.eval_accuracy, "train_time_s": result.train_time_s, "sift_time_s": result.sift_time_s,
        "eval_time_s": result.eval_time_s, "cost_usd": cost_usd, "pct_accepted": result.pct_accepted,
        "samples_seen": result.samples_seen, "samples_trained": result.samples_trained,
        "time_to_target_s": result.time_to_target_s, "other_cpu_s": result.other_cpu_s,
        "work_trained": result.work_trained,
        "other_cpu_fraction": result.other_cpu_fraction,
    }, step=len(result.history) - 1)
