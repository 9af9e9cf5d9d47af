"""Smart sifting: train on the samples with the biggest losses.

An independent implementation, needing only torch, of the documented behaviour
of Amazon SageMaker smart sifting, keeping its public names. See README.md.
"""

from .batch import (
    MappingBatchTransform,
    SequenceBatchTransform,
    SiftingBatch,
    SiftingBatchTransform,
    TensorBatchTransform,
    default_batch_transform,
)
from .config import (
    LossConfig,
    RandomSiftConfig,
    RelativeProbabilisticSiftConfig,
    SiftingBaseConfig,
)
from .dataloader import SiftingDataloader
from .history import LossHistory
from .loss import Loss
from .selection import (
    keep_mask,
    loss_percentiles,
    random_keep_mask,
    relative_probabilistic_keep_mask,
)
from .stats import SiftingStats

__all__ = [
    "Loss",
    "LossConfig",
    "LossHistory",
    "MappingBatchTransform",
    "RandomSiftConfig",
    "RelativeProbabilisticSiftConfig",
    "SequenceBatchTransform",
    "SiftingBaseConfig",
    "SiftingBatch",
    "SiftingBatchTransform",
    "SiftingDataloader",
    "SiftingStats",
    "TensorBatchTransform",
    "default_batch_transform",
    "keep_mask",
    "loss_percentiles",
    "random_keep_mask",
    "relative_probabilistic_keep_mask",
]
