"""Sample identity: a dataset wrapper that attaches each sample's index, and how to read it back from a batch.

The policies that decide from training losses (``StaleLossSiftConfig``,
``InfoBatchSiftConfig``) remember one loss per sample, so they must know which
samples a batch holds. ``IndexedDataset`` puts the index into every item, the
default collate turns it into an int64 tensor, and ``default_sample_ids`` finds
it in the batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.data import Dataset

SAMPLE_ID_KEY = "sample_id"


class IndexedDataset(Dataset):
    """Item ``i`` is ``dataset[i]`` with ``i`` attached.

    * a tuple or list item: the same tuple or list with ``i`` appended as its
      last element (a named tuple becomes a plain tuple: it has no field for ``i``);
    * a dict (any mapping) item: a dict with the key ``"sample_id"`` added;
    * anything else: the pair ``(item, i)``.
    """

    def __init__(self, dataset: Any) -> None:
        if not callable(getattr(dataset, "__getitem__", None)) or not callable(
            getattr(dataset, "__len__", None)
        ):
            raise TypeError(
                f"IndexedDataset needs a map-style dataset (with __getitem__ and __len__), "
                f"got {type(dataset).__name__}"
            )
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        item = self.dataset[index]
        if isinstance(item, list):
            return [*item, index]
        if isinstance(item, tuple):
            return (*item, index)
        if isinstance(item, Mapping):
            if SAMPLE_ID_KEY in item:
                raise ValueError(
                    f"item {index} of the dataset already has a key {SAMPLE_ID_KEY!r}; "
                    f"IndexedDataset would overwrite it"
                )
            return {**item, SAMPLE_ID_KEY: index}
        return (item, index)


def default_sample_ids(batch: Any) -> torch.Tensor:
    """The sample ids of a batch of ``IndexedDataset`` items.

    A tuple or list batch: its last element. A dict (or Hugging Face
    ``BatchEncoding``) batch: ``batch["sample_id"]``.
    """
    if isinstance(batch, (tuple, list)) and len(batch) > 0:
        return batch[-1]
    if isinstance(batch, Mapping) and SAMPLE_ID_KEY in batch:
        return batch[SAMPLE_ID_KEY]
    raise TypeError(
        f"default_sample_ids finds the ids as the last element of a tuple or list batch, or "
        f"as batch[{SAMPLE_ID_KEY!r}] of a dict batch (wrap the dataset in IndexedDataset), "
        f"not in a batch of type {type(batch).__module__}.{type(batch).__qualname__}; pass "
        f"sample_ids=your_function (batch -> int64 tensor of ids) to SiftingDataloader"
    )
