"""The loss history: a fixed-size ring buffer of the last per-sample losses."""

from __future__ import annotations

import torch


class LossHistory:
    """The last ``loss_history_length`` per-sample losses, in a preallocated tensor.

    Memory is fixed at construction and does not grow with training length:
    appending overwrites the oldest values once the buffer is full.
    """

    def __init__(self, loss_history_length: int, dtype: torch.dtype = torch.float32) -> None:
        if isinstance(loss_history_length, bool) or not isinstance(loss_history_length, int):
            raise TypeError(
                f"loss_history_length must be an int >= 1, got {loss_history_length!r}"
            )
        if loss_history_length < 1:
            raise ValueError(
                f"loss_history_length must be an int >= 1, got {loss_history_length!r}"
            )
        self.loss_history_length = loss_history_length
        self._buffer = torch.empty(loss_history_length, dtype=dtype)
        self._write_index = 0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def append(self, losses: torch.Tensor) -> None:
        """Record ``losses`` (any shape, flattened), dropping the oldest values beyond capacity."""
        losses = losses.detach().reshape(-1).to(self._buffer.device, self._buffer.dtype)
        n = losses.numel()
        capacity = self.loss_history_length
        if n == 0:
            return
        if n >= capacity:
            self._buffer.copy_(losses[n - capacity :])
            self._write_index = 0
            self._count = capacity
            return
        end = self._write_index + n
        if end <= capacity:
            self._buffer[self._write_index : end] = losses
        else:
            head = capacity - self._write_index
            self._buffer[self._write_index :] = losses[:head]
            self._buffer[: n - head] = losses[head:]
        self._write_index = end % capacity
        self._count = min(capacity, self._count + n)

    def values(self) -> torch.Tensor:
        """The recorded losses, oldest first (a copy once the buffer has wrapped)."""
        if self._count < self.loss_history_length:
            return self._buffer[: self._count]
        return torch.cat((self._buffer[self._write_index :], self._buffer[: self._write_index]))

    def clear(self) -> None:
        self._write_index = 0
        self._count = 0
