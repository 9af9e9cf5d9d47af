"""The loss a user implements to score samples, as in SageMaker smart sifting."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch


class Loss(ABC):
    """Scores a batch: one loss per sample.

    ``SiftingDataloader`` calls ``loss`` once per original batch, under
    ``torch.no_grad()`` and with the model in eval mode; the model's previous
    modes are restored afterwards. Move the batch to the model's device here if
    the loader does not already.
    """

    @abstractmethod
    def loss(
        self,
        model: torch.nn.Module,
        transformed_batch: Any,
        original_batch: Any = None,
    ) -> torch.Tensor:
        """Per-sample losses of shape ``[n]`` or ``[n, 1]`` for a batch of ``n`` samples.

        transformed_batch: the batch as a ``SiftingBatch``.
        original_batch: the batch as the original data loader yielded it.
        """
