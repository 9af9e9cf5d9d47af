"""Benchmark tasks. A task supplies the model, the data, a per-sample loss and the metric;
the training loop (sift_bench.train) is shared."""

from dataclasses import dataclass
from typing import Callable, Iterable

import torch

from sift_bench.errors import ConfigError
from sift_bench.targets import task_builder


@dataclass
class TaskParts:
    model: torch.nn.Module
    train_loader: Iterable  # re-iterable, exposes batch_size (and drop_last)
    # {"val": ..., "test": ...}: validation chooses settings, test reports them.
    eval_loaders: dict[str, Iterable]
    # (model, batch) -> per-sample losses [n]; moves the batch to the model's device itself.
    per_sample_loss: Callable[[torch.nn.Module, object], torch.Tensor]
    # (model, batch) -> number of correct predictions in the batch.
    count_correct: Callable[[torch.nn.Module, object], int]
    batch_size_of: Callable[[object], int]
    # Units of compute a training step on the batch costs: samples for images, padded tokens for text,
    # where sifting can change the cost per sample by keeping longer or shorter sentences.
    work_of: Callable[[object], int]
    num_train_samples: int
    model_name: str
    dataset_name: str
    # (size in (0, 1]) -> a smaller model of the same inputs and outputs on the model's device, untrained or as the
    # model was before training, for sifter=proxy (sift_bench.sifting.proxy); None where the task has none.
    proxy_model: Callable[[float], torch.nn.Module] | None = None


def build_task(cfg, device: torch.device) -> TaskParts:
    """Build the task `task._target_` names (any importable function (cfg, device) -> TaskParts)."""
    parts = task_builder(cfg.task)(cfg, device)
    if not isinstance(parts, TaskParts):
        raise ConfigError(f"task._target_={cfg.task._target_!r} is not allowed: it returned a "
                          f"{type(parts).__name__}, not a sift_bench.tasks.TaskParts")
    return parts
