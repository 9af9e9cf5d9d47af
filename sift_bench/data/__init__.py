"""Data sources for the benchmark tasks: offline files, canonical online sources, generated stand-ins."""

import torch

SUBSET_SEED = 1234


def fixed_subset(n: int, size: int) -> torch.Tensor:
    """The first `size` of a fixed permutation of range(n): seeded apart from the run seed, so that every
    seed and every sifter of a table trains on the same subset."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(SUBSET_SEED))[:size]


class DataNotFoundError(FileNotFoundError):
    """A data set or model is missing; the message says where we looked and how to provide it."""
