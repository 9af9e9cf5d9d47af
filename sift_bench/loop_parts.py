"""What both training loops (sift_bench.train, sift_bench.train_hf) build from a run's config: the optimizer, the
autocast of its precision, and the loss the sifter scores with (the task's, or a proxy's for sifter=proxy)."""

import contextlib
from typing import Callable

import torch

from sift_bench import machine
from sift_bench.errors import ConfigError
from sift_bench.sifting import Loss, ProxyLoss
from sift_bench.tasks import TaskParts


class TaskLoss(Loss):
    """Adapts a task's per-sample loss to the sifter's `Loss` interface, under the run's autocast."""

    def __init__(self, per_sample_loss: Callable, autocast: Callable):
        self.per_sample_loss = per_sample_loss
        self.autocast = autocast

    def loss(self, model, transformed_batch, original_batch=None):
        with self.autocast():
            return self.per_sample_loss(model, original_batch)


def build_optimizer(model: torch.nn.Module, optimizer_cfg) -> torch.optim.Optimizer:
    # No weight decay on biases and normalisation weights (1-d tensors): the usual recipe for both ResNets and BERT.
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": optimizer_cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # torch's default on the CPU is the per-tensor for-loop; foreach and fused do one kernel over all tensors.
    implementation = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}[
        optimizer_cfg.implementation]
    if optimizer_cfg.name == "sgd":
        return torch.optim.SGD(groups, lr=optimizer_cfg.lr, momentum=optimizer_cfg.momentum, nesterov=optimizer_cfg.nesterov,
                               **implementation)
    if optimizer_cfg.name == "adamw":
        return torch.optim.AdamW(groups, lr=optimizer_cfg.lr, betas=tuple(optimizer_cfg.betas), eps=optimizer_cfg.eps,
                                 **implementation)
    raise ValueError(f"trainer.optimizer.name must be 'sgd' or 'adamw', got {optimizer_cfg.name!r}")


def autocast_factory(device: torch.device, precision: str) -> Callable:
    if precision == "fp32":
        return contextlib.nullcontext
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    return lambda: torch.autocast(device_type=device.type, dtype=dtype)


# On an AVX2-only CPU (an AMD EPYC Zen 3, family 25 model 1) oneDNN's AVX2 1x1-convolution backward-weights kernel
# hung, now and then, in an OpenMP barrier on the quarter-width proxy ResNet after other jobs had trained in the same
# process (the resnet_table smoke sweep's proxy job, tests/test_cli.py). There the proxy's step leaves oneDNN out and
# runs PyTorch's own convolutions; CPUs with AVX-512, which time the tables, keep oneDNN, and so do those (ARM, or
# where py-cpuinfo finds no flags) whose oneDNN kernels are not the AVX2 ones.
def proxy_backends(device: torch.device) -> Callable:
    """The backends the proxy's step runs under on `device` (a context-manager factory)."""
    flags = machine.cpu_flags() if device.type == "cpu" else set()
    return _without_onednn if "avx2" in flags and "avx512f" not in flags else contextlib.nullcontext


@contextlib.contextmanager
def _without_onednn():
    # Not torch.backends.mkldnn.flags(enabled=False): it also resets oneDNN's tf32 and determinism settings (and
    # warns on every call that tf32 needs an Intel GPU).
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = enabled


def scoring_loss(parts: TaskParts, sift_config, autocast: Callable, optimizer_cfg) -> Loss:
    """What the sifter scores with: the task's loss on the model, or for a policy that scores with a proxy
    (sifter=proxy) a ProxyLoss over the task's proxy model of the policy's `proxy_size`, trained by the run's
    optimizer settings at their peak learning rate. Called before training: the proxy starts where the model does."""
    if not type(sift_config).scores_with_proxy:
        return TaskLoss(parts.per_sample_loss, autocast)
    if parts.proxy_model is None:
        raise ConfigError(f"sifter={type(sift_config).name} is not allowed for this task ({parts.model_name} on "
                          f"{parts.dataset_name}): it builds no proxy model (TaskParts.proxy_model)")
    proxy = parts.proxy_model(sift_config.proxy_size)
    device = next(proxy.parameters()).device
    return ProxyLoss(proxy, parts.per_sample_loss, build_optimizer(proxy, optimizer_cfg), autocast,
                     backends=proxy_backends(device))
