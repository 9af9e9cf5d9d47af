"""Data sources for the benchmark tasks: offline files, canonical online sources, generated stand-ins."""

from pathlib import Path

import torch

from sift_bench.errors import ConfigError

SUBSET_SEED = 1234


def require_source(cfg, sources: tuple[str, ...], offline: tuple[str, ...]) -> None:
    """Refuse `task.data.source` outside `sources`, and an offline source (one of `offline`) without its data folder,
    before anything is loaded."""
    source = cfg.task.data.source
    if source not in sources:
        raise ConfigError(f"task.data.source={source!r} is not allowed: one of {sources} for task={cfg.task.name}")
    if source in offline and not Path(cfg.paths.data_dir).is_dir():
        raise ConfigError(f"paths.data_dir={str(cfg.paths.data_dir)!r} is not allowed: an existing folder holding "
                          "cifar10-jpeg.zip and sst2/ (set SIFT_BENCH_DATA_DIR or paths.data_dir=...)")


def fixed_subset(n: int, size: int) -> torch.Tensor:
    """The first `size` of a fixed permutation of range(n): seeded apart from the run seed, so that every
    seed and every sifter of a table trains on the same subset."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(SUBSET_SEED))[:size]


def class_balanced_holdout(labels: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(held-out indices, the other indices): `size` samples, an equal share of each class, drawn with the same
    fixed seed as `fixed_subset`, so every run of a table is chosen on the same validation split."""
    classes = torch.unique(labels)
    per_class = size // len(classes)
    if per_class < 1 or per_class * len(classes) != size:
        raise ConfigError(f"task.data.val_size={size} is not allowed: a multiple of the {len(classes)} classes, >= {len(classes)}")
    generator = torch.Generator().manual_seed(SUBSET_SEED)
    held = []
    for label in classes.tolist():
        members = torch.nonzero(labels == label).flatten()
        if len(members) <= per_class:
            raise ConfigError(f"task.data.val_size={size} is not allowed: class {label} has only {len(members)} "
                             f"training samples, fewer than the {per_class} it would give up")
        held.append(members[torch.randperm(len(members), generator=generator)[:per_class]])
    held_out = torch.cat(held).sort().values
    rest = torch.ones(len(labels), dtype=torch.bool)
    rest[held_out] = False
    return held_out, torch.nonzero(rest).flatten()


class DataNotFoundError(FileNotFoundError):
    """A data set or model is missing; the message says where we looked and how to provide it."""
