"""Smart sifting: train on the samples with the biggest losses.

An independent implementation, needing only torch, of the documented behaviour
of Amazon SageMaker smart sifting, keeping its public names, plus two policies
that decide from the training losses instead of a scoring pass (sift_bench's
stale loss, InfoBatch) and Selective Backprop's Stale-SB, which scores every
few epochs. See README.md.
"""

from .batch import (
    ListBatch,
    MappingBatchTransform,
    SampleDim1TensorBatchTransform,
    SampleListBatchTransform,
    SequenceBatchTransform,
    SiftingBatch,
    SiftingBatchTransform,
    TensorBatch,
    TensorBatchTransform,
    default_batch_transform,
)
from .config import (
    InfoBatchSiftConfig,
    LossConfig,
    PassThroughSiftConfig,
    ProxySiftConfig,
    RandomSiftConfig,
    RelativeProbabilisticSiftConfig,
    SiftingBaseConfig,
    StaleLossSiftConfig,
    StaleSBSiftConfig,
)
from .dataloader import SiftingDataloader
from .history import LossHistory
from .indexed import IndexedDataset, default_sample_ids
from .loss import Loss
from .memory import SampleLossMemory
from .policy import Candidates, SelectionContext, Selector, SiftPolicy
from .proxy import ProxyLoss
from .selection import (
    fresh_loss_mask,
    infobatch_keep_mask,
    infobatch_prunes_epoch,
    infobatch_threshold,
    keep_mask,
    loss_percentiles,
    random_keep_mask,
    relative_probabilistic_keep_mask,
    rescore_due_mask,
    stale_loss_keep_mask,
)
from .stats import SiftingStats

__all__ = [
    "Candidates",
    "IndexedDataset",
    "InfoBatchSiftConfig",
    "ListBatch",
    "Loss",
    "LossConfig",
    "LossHistory",
    "MappingBatchTransform",
    "PassThroughSiftConfig",
    "ProxyLoss",
    "ProxySiftConfig",
    "RandomSiftConfig",
    "RelativeProbabilisticSiftConfig",
    "SampleDim1TensorBatchTransform",
    "SampleListBatchTransform",
    "SampleLossMemory",
    "SelectionContext",
    "Selector",
    "SequenceBatchTransform",
    "SiftingBaseConfig",
    "SiftingBatch",
    "SiftingBatchTransform",
    "SiftingDataloader",
    "SiftPolicy",
    "SiftingStats",
    "StaleLossSiftConfig",
    "StaleSBSiftConfig",
    "TensorBatch",
    "TensorBatchTransform",
    "default_batch_transform",
    "default_sample_ids",
    "fresh_loss_mask",
    "infobatch_keep_mask",
    "infobatch_prunes_epoch",
    "infobatch_threshold",
    "keep_mask",
    "loss_percentiles",
    "random_keep_mask",
    "relative_probabilistic_keep_mask",
    "rescore_due_mask",
    "stale_loss_keep_mask",
]
