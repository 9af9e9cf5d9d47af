"""The sifter's view of data-parallel training: its rank, the world size and the few collectives it needs.

Under DDP every rank wraps its own shard's loader. Two things must hold for training to work at all:
every rank yields the same number of batches per epoch (DDP all-reduces gradients at every backward pass,
so a rank that yields one batch more waits forever), and, with ``sync="global"``, every rank sifts against
the same loss history, so a loss means the same percentile everywhere. The collectives here move small CPU
tensors (counts, losses, sample ids); on a gloo world they use the training group itself, on an NCCL world
(CUDA tensors only) a gloo group made for the purpose.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

SYNC_MODES = ("global", "local")


class Ranks:
    """Rank, world size and CPU collectives of ``process_group`` (the default group when None).

    Without an initialised process group, or in a world of one, it is a single rank and every
    collective returns its input alone: the single-process path stays free of any communication.
    ``seconds`` is the wall time spent in collectives since the last ``take_seconds()``.
    """

    def __init__(self, process_group=None) -> None:
        self.seconds = 0.0
        if not (dist.is_available() and dist.is_initialized()):
            self.rank, self.world_size, self.group = 0, 1, None
            return
        group = process_group if process_group is not None else dist.group.WORLD
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.group = group
        if self.world_size > 1 and dist.get_backend(group) != "gloo":
            # Collective over every rank of `group`, so every rank constructs its sifter at the same point.
            self.group = dist.new_group(ranks=dist.get_process_group_ranks(group), backend="gloo")

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def gather_rows(self, values: list[int]) -> torch.Tensor:
        """Every rank's ``values`` (int64), as a [world_size, len(values)] tensor in rank order."""
        mine = torch.tensor(values, dtype=torch.int64)
        if not self.distributed:
            return mine.reshape(1, -1)
        started = time.perf_counter()
        rows = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(rows, mine, group=self.group)
        self.seconds += time.perf_counter() - started
        return torch.stack(rows)

    def gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's 1-D CPU ``tensor``, in rank order; the ranks' lengths may differ."""
        tensor = tensor.reshape(-1)
        if not self.distributed:
            return [tensor]
        lengths = self.gather_rows([tensor.numel()])[:, 0].tolist()
        started = time.perf_counter()
        # all_gather moves equal shapes only: pad to the longest, then cut each rank's piece back.
        padded = torch.zeros(max(lengths), dtype=tensor.dtype)
        padded[: tensor.numel()] = tensor
        pieces = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(pieces, padded, group=self.group)
        self.seconds += time.perf_counter() - started
        return [piece[:length] for piece, length in zip(pieces, lengths)]

    def take_seconds(self) -> float:
        """The time spent in collectives since the last call."""
        seconds, self.seconds = self.seconds, 0.0
        return seconds

    def seed_for(self, seed: int) -> int:
        """A generator seed per rank: ``seed`` itself on rank 0 (so one process draws as before), distinct on the
        others, so that ranks do not draw the same numbers for different samples."""
        return (seed + self.rank * 0x9E3779B97F4A7C15) % 2**64
