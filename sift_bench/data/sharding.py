"""Each rank's share of an epoch under DDP: one permutation per seed and epoch, the same on every rank, dealt out.

As torch's DistributedSampler does, the permutation is padded (from its start) to a multiple of the world size,
so every rank gets the same number of samples and so the same number of batches: a rank with one batch more
would wait forever in DDP's gradient all-reduce.
"""

import math

import torch


def shard_order(order: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank `rank`'s samples of `order`, every `world_size`-th from position `rank`, after padding."""
    if world_size == 1:
        return order
    total = math.ceil(len(order) / world_size) * world_size
    padded = torch.cat([order, order[: total - len(order)]]) if total > len(order) else order
    return padded[rank::world_size]


class ShardedRandomSampler(torch.utils.data.Sampler):
    """A new permutation at each iter() (an epoch), seeded by (seed, epoch) and identical on every rank, of which
    this rank takes its shard. Counting epochs itself, it needs no set_epoch() call from the training loop."""

    def __init__(self, num_samples: int, rank: int, world_size: int, seed: int):
        self.num_samples = num_samples
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.epoch = 0

    def __len__(self) -> int:
        return math.ceil(self.num_samples / self.world_size)

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        self.epoch += 1
        order = torch.randperm(self.num_samples, generator=generator)
        return iter(shard_order(order, self.rank, self.world_size).tolist())
