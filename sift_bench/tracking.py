"""MLflow logging for one job: its params, tags (what ran, where, from which command and commit), per-evaluation
and final metrics. Opening the store and asking it questions is sift_bench.store; a run's identity,
sift_bench.identity.

The store is always named explicitly (default `sqlite:///mlflow.db`, relative to where the
command runs), so `mlflow ui --backend-store-uri sqlite:///mlflow.db` shows the runs.
"""

import hashlib
import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import yaml
from hydra.core.hydra_config import HydraConfig
from mlflow.data.code_dataset_source import CodeDatasetSource
from mlflow.data.dataset_source_registry import get_dataset_source_from_json
from mlflow.data.meta_dataset import MetaDataset
from omegaconf import DictConfig, OmegaConf

from sift_bench.data.cifar10 import ZIP_NAME
from sift_bench.identity import flatten
from sift_bench.machine import is_contended, machine_tags
from sift_bench.metrics import EVAL_METRICS, FINAL_METRICS
from sift_bench.portable import portable, portable_tree
from sift_bench.sifting.policy import run_label
from sift_bench.store import sqlite_file
from sift_bench.targets import is_baseline, policy_class

PARENT_RUN_ENV = "SIFT_BENCH_PARENT_RUN_ID"
SWEEP_STARTED_ENV = "SIFT_BENCH_SWEEP_STARTED_MS"  # when this sitting's sweep began, in ms since the epoch
CONTENDED_TAG = "timing.contended"  # "true" when other processes used the machine while the run trained
DATASET_CONTEXTS = ("training", "validation", "test")  # MLflow's input contexts, the run's three splits
DIGEST_BYTES = 1 << 20  # how much of a data file its digest reads

log = logging.getLogger(__name__)


def _git(*args: str, cwd: Path | None = None) -> str | None:
    """What `git ARGS` prints in the checkout of `cwd` (default: the one sift_bench runs from), or None (no git, no
    checkout, an error)."""
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5,
                             cwd=cwd or Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def git_commit(folder: Path | None = None) -> str | None:
    """The commit checked out where `folder` lies (default: sift_bench's own checkout), or None."""
    return _git("rev-parse", "HEAD", cwd=folder)


def git_remote() -> str | None:
    """The `origin` remote's URL (or path), or None."""
    return _git("remote", "get-url", "origin")


def command_tags() -> dict[str, str]:
    """The command line that launched the job, and this job's own overrides within a sweep."""
    tags = {"command": " ".join(["python -m sift_bench", *map(portable, sys.argv[1:])]),
            # MLflow would record sys.argv[0], an absolute path.
            "mlflow.source.name": "sift_bench"}
    if HydraConfig.initialized():
        tags["overrides"] = " ".join(map(portable, HydraConfig.get().overrides.task))
    return tags


def sifter_label(sifter_cfg) -> str:
    """The policy's run-name fields and its delay, `beta=3 hist=500 delay=10`, as its class declares them; empty for
    the baseline."""
    return "" if is_baseline(sifter_cfg) else run_label(policy_class(sifter_cfg), sifter_cfg)


def run_name(cfg: DictConfig) -> str:
    if cfg.tracking.run_name:
        return cfg.tracking.run_name
    parts = [cfg.task.name, cfg.scale.name, cfg.sifter.name, sifter_label(cfg.sifter), f"seed={cfg.seed}"]
    return " ".join(part for part in parts if part)


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
    log_datasets(cfg)
    return run


def data_files(cfg: DictConfig) -> dict[str, Path | None]:
    """The file each split (by MLflow context) is read from: validation is held out of the training file, test is
    its own; None where no file is (generated data, a download, a user's task)."""
    source = OmegaConf.select(cfg, "task.data.source", default=None)
    data_dir = Path(cfg.paths.data_dir)
    if source == "zip":  # CIFAR-10: one zip holds the training and the test images
        return dict.fromkeys(DATASET_CONTEXTS, data_dir / ZIP_NAME)
    if source == "tsv":  # SST-2: GLUE's train.tsv, and its dev.tsv as the test split
        train = data_dir / "sst2" / "train.tsv"
        return {"training": train, "validation": train, "test": data_dir / "sst2" / "dev.tsv"}
    return dict.fromkeys(DATASET_CONTEXTS)


def file_digest(path: Path) -> str:
    """A data file's fingerprint from its name, size and first MiB: read in a millisecond (hashing all of CIFAR-10's
    zip would not be), and the same for every copy of the file (its mtime is not)."""
    digest = hashlib.sha256(f"{path.name}:{path.stat().st_size}:".encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(DIGEST_BYTES))
    return digest.hexdigest()[:16]


def datasets(cfg: DictConfig) -> dict:
    """The run's training, validation and test data as MLflow datasets (metadata only: no data is copied), by context.
    A digest covers the file (file_digest) and the task's data settings, which pick the split out of it; the source
    is the file's path relative to where the command runs, or, without a file, the code that made the data."""
    data = cfg.task.get("data")
    settings = json.dumps(OmegaConf.to_container(data, resolve=True) if isinstance(data, DictConfig) else data,
                          sort_keys=True, default=str)
    name = OmegaConf.select(cfg, "task.dataset", default=None) or cfg.task.name
    found = {}
    for context, path in data_files(cfg).items():
        on_disk = path is not None and path.is_file()
        # A local source by name: resolving a bare path warns on every run, since MLflow registers a local source
        # for the "" and the "file" scheme alike and both claim it.
        source = (get_dataset_source_from_json(json.dumps({"uri": portable(str(path))}), "local") if on_disk else
                  CodeDatasetSource({"task": str(cfg.task.name), "task.data.source": str(
                      OmegaConf.select(cfg, "task.data.source", default="the task's own"))}))
        fingerprint = f"{file_digest(path) if on_disk else ''}:{settings}:{context}"
        found[context] = MetaDataset(source, name=f"{name} {context}",
                                     digest=hashlib.sha256(fingerprint.encode()).hexdigest()[:16])
    return found


def log_datasets(cfg: DictConfig) -> None:
    """Each split as a dataset input of the run (context training, validation, test). Metadata about the run,
    not its measurement: a failure to describe the data is said and the job goes on."""
    try:
        for context, dataset in datasets(cfg).items():
            mlflow.log_input(dataset, context=context)
    except Exception as error:  # an unreadable file, a source MLflow cannot resolve, an MLflow without inputs
        log.warning("the run's dataset inputs were not logged: %s", error)


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
        mlflow.log_metrics({name: getattr(point, name) for name in EVAL_METRICS}, step=self.step)
        self.step += 1


def log_final(result, cost_usd: float) -> None:
    values = {name: cost_usd if name == "cost_usd" else getattr(result, name) for name in FINAL_METRICS}
    mlflow.log_metrics(values, step=len(result.history) - 1)  # the last evaluation's step
    if not math.isnan(result.other_cpu_fraction):  # unmeasured where psutil gives no system CPU times
        mlflow.set_tag(CONTENDED_TAG, str(is_contended(result.other_cpu_fraction)).lower())
