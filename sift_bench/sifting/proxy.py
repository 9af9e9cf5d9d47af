"""A cheaper scorer: a small proxy model, trained alongside, scores the candidates in place of the model itself.

Smart sifting's scoring pass is a no-grad forward of the full model over every candidate: on the CPU tables it
costs a fifth to a quarter of a training step per sample, which eats the savings its selection earns. A proxy of a
fraction of the model's size costs less per candidate. Here the proxy learns from the very candidates it scores:
one forward with gradients gives their losses (the scores, detached) and one optimizer step on their mean, so it
stays current with the data at the price of its own backward pass. All of it runs inside the loader's scoring pass,
so `SiftingStats.scoring_seconds` counts the proxy's whole cost.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

from .loss import Loss


class ProxyLoss(Loss):
    """Scores a batch with `proxy` (not the model the loader hands in) and trains the proxy one step on it.

    per_sample_loss: (model, original batch) -> per-sample losses [n], the task's own loss, called with the proxy.
    optimizer: the proxy's optimizer (over `proxy.parameters()`).
    autocast: a context-manager factory for the forward pass (mixed precision), or None.
    backends: a context-manager factory around the proxy's whole step (which kernels it runs), or None; the harness
    picks it for the machine (sift_bench.loop_parts.proxy_backends).
    Under DDP each rank trains its own proxy on its own candidates; the selection itself syncs as smart sifting's.
    """

    def __init__(self, proxy: torch.nn.Module, per_sample_loss: Callable[[torch.nn.Module, Any], torch.Tensor],
                 optimizer: torch.optim.Optimizer, autocast: Callable[[], Any] | None = None,
                 backends: Callable[[], Any] | None = None) -> None:
        if not isinstance(proxy, torch.nn.Module):
            raise TypeError(f"proxy must be a torch.nn.Module, got {type(proxy).__name__}")
        if not callable(per_sample_loss):
            raise TypeError(f"per_sample_loss must be a callable (model, batch) -> losses, got "
                            f"{type(per_sample_loss).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
        self.proxy, self.per_sample_loss, self.optimizer = proxy, per_sample_loss, optimizer
        self.autocast = autocast or contextlib.nullcontext
        self.backends = backends or contextlib.nullcontext
        self.steps = 0

    def loss(self, model: torch.nn.Module, transformed_batch: Any, original_batch: Any = None) -> torch.Tensor:
        # The loader scores under no_grad; the proxy learns from the same forward, so gradients come back on here.
        with torch.enable_grad(), self.backends():
            self.proxy.train()
            with self.autocast():
                losses = self.per_sample_loss(self.proxy, original_batch)
            self.optimizer.zero_grad(set_to_none=True)
            losses.float().mean().backward()
            self.optimizer.step()
        self.steps += 1
        return losses.detach()
