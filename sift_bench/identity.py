"""A run's identity: the fingerprint of what it trains (`config_hash`), which decides whether a sweep skips a job
and which runs are one row of the table. Pure config work: no MLflow here, so the report can read the same rules.
The one fact of the machine it reads is what `scale.precision: auto` resolves to there (resolve_auto_precision)."""

import hashlib
import json

from omegaconf import DictConfig, OmegaConf

from sift_bench.machine import resolve_precision

# Settings that say where things are, how they are shown or priced, or how a sweep is laid out (`table` is only
# interpolated into rows, which hash its resolved values), not what is trained: left out of the config hash.
NOT_HASHED = ("paths", "tracking", "hydra", "sweep_name", "table", "cost")
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


def config_hash(cfg: DictConfig, world_size: int = 1) -> str:
    """A fingerprint of what is trained: task, sifter, scale, trainer and seed, and the world size under DDP.

    In one process the world size and `sifter.sync` (which only DDP reads) stay out, so a run's identity is the
    one it had before DDP existed."""
    tree = OmegaConf.to_container(cfg, resolve=True)
    resolve_auto_precision(tree)
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


def resolve_auto_precision(tree: dict) -> None:
    """A job hashes its config after `scale.precision: auto` was resolved (sift_bench.validation.resolve_precision);
    a config composed again from a run's overrides (the report, the tests) still says `auto`, and is hashed as a
    job on this machine would have logged it: bf16 where the device has native bf16 kernels, else fp32."""
    scale = tree.get("scale")
    if isinstance(scale, dict) and scale.get("precision") == "auto":
        scale["precision"] = resolve_precision("auto", str(scale.get("device", "cpu")))


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
