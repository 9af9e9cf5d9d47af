"""Batches as per-sample columns, and the transforms to and from a loader's batches.

A ``SiftingBatch`` holds the columns of one batch (tensors, indexed along their
first dimension, and lists or tuples of per-sample values such as strings) plus
the ``structure`` its transform needs to rebuild the original batch. Sifting
selects, concatenates and splits columns; it never looks inside a sample.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import torch

_CUSTOM_TRANSFORM_HINT = (
    "pass batch_transforms=YourTransform() to SiftingDataloader, where YourTransform "
    "subclasses sift_bench.sifting.SiftingBatchTransform and implements "
    "transform(batch) -> SiftingBatch and reverse_transform(sifting_batch) -> batch"
)


def _column_length(column: Any, name: str) -> int:
    if isinstance(column, torch.Tensor):
        if column.dim() == 0:
            raise ValueError(f"field {name} is a 0-dim tensor, which has no samples to select")
        return column.shape[0]
    if isinstance(column, (list, tuple)):
        return len(column)
    raise TypeError(
        f"field {name} is a {type(column).__qualname__}; a SiftingBatch holds tensors "
        f"(selected along their first dimension) and lists or tuples (selected element "
        f"by element); for anything else, {_CUSTOM_TRANSFORM_HINT}"
    )


class SiftingBatch:
    """One batch as equally long per-sample columns.

    columns: tensors (samples along the first dimension, on any device) and
        lists or tuples with one value per sample.
    structure: anything the transform needs to rebuild the original batch
        (its type, its keys); carried along untouched.
    names: one name per column, used in error messages.
    """

    __slots__ = ("columns", "structure", "names", "_length")

    def __init__(
        self,
        columns: Sequence[Any],
        structure: Any = None,
        names: Sequence[str] | None = None,
    ) -> None:
        columns = list(columns)
        names = [repr(i) for i in range(len(columns))] if names is None else list(names)
        if not columns:
            raise ValueError("a SiftingBatch needs at least one column")
        if len(names) != len(columns):
            raise ValueError(f"got {len(names)} names for {len(columns)} columns")
        lengths = [_column_length(column, name) for column, name in zip(columns, names)]
        if len(set(lengths)) != 1:
            described = ", ".join(f"{name}: {length}" for name, length in zip(names, lengths))
            raise ValueError(
                f"every field of a batch must hold the same number of samples, got {described}"
            )
        self.columns = columns
        self.structure = structure
        self.names = names
        self._length = lengths[0]

    def __len__(self) -> int:
        return self._length

    def _with_columns(self, columns: list[Any], length: int) -> SiftingBatch:
        # Lengths are right by construction here, so skip __init__'s validation.
        batch = object.__new__(SiftingBatch)
        batch.columns = columns
        batch.structure = self.structure
        batch.names = self.names
        batch._length = length
        return batch

    def select(self, indices: torch.Tensor) -> SiftingBatch:
        """The samples at ``indices`` (a 1-D int64 tensor), in that order."""
        on_device: dict[torch.device, torch.Tensor] = {}
        index_list: list[int] | None = None
        columns = []
        for column in self.columns:
            if isinstance(column, torch.Tensor):
                device_indices = on_device.get(column.device)
                if device_indices is None:
                    device_indices = indices.to(column.device, non_blocking=True)
                    on_device[column.device] = device_indices
                # Advanced indexing, unlike index_select, keeps channels_last.
                columns.append(column[device_indices])
            else:
                if index_list is None:
                    index_list = indices.tolist()
                columns.append(type(column)(column[i] for i in index_list))
        return self._with_columns(columns, indices.numel())

    def split(self, n: int) -> tuple[SiftingBatch, SiftingBatch]:
        """The first ``n`` samples and the rest (tensor slices are views)."""
        head = [column[:n] for column in self.columns]
        tail = [column[n:] for column in self.columns]
        n = min(n, self._length)
        return self._with_columns(head, n), self._with_columns(tail, self._length - n)

    @staticmethod
    def concat(batches: Sequence[SiftingBatch]) -> SiftingBatch:
        """The samples of ``batches`` in order; they must share one structure."""
        if len(batches) == 1:
            return batches[0]
        first = batches[0]
        columns = []
        for j, column in enumerate(first.columns):
            parts = [batch.columns[j] for batch in batches]
            if isinstance(column, torch.Tensor):
                columns.append(torch.cat(parts))
            else:
                columns.append(type(column)(value for part in parts for value in part))
        return first._with_columns(columns, sum(len(batch) for batch in batches))


class SiftingBatchTransform(ABC):
    """Turns a loader's batch into a ``SiftingBatch`` and back.

    ``reverse_transform(transform(batch))`` must give a batch of the same
    structure and types as ``batch``, holding the samples kept.
    """

    @abstractmethod
    def transform(self, batch: Any) -> SiftingBatch: ...

    @abstractmethod
    def reverse_transform(self, sifting_batch: SiftingBatch) -> Any: ...

    def sample_count(self, batch: Any) -> int:
        """Samples in ``batch``; counted for every pass-through batch of the delay."""
        return len(self.transform(batch))


class TensorBatchTransform(SiftingBatchTransform):
    """A batch that is one tensor, samples along its first dimension."""

    def transform(self, batch: torch.Tensor) -> SiftingBatch:
        return SiftingBatch([batch], names=["batch"])

    def reverse_transform(self, sifting_batch: SiftingBatch) -> torch.Tensor:
        return sifting_batch.columns[0]

    def sample_count(self, batch: torch.Tensor) -> int:
        return batch.shape[0]


class SequenceBatchTransform(SiftingBatchTransform):
    """A tuple or list (named tuples too) of tensors and per-sample lists, e.g. (images, labels)."""

    def transform(self, batch: Sequence[Any]) -> SiftingBatch:
        names = [f"[{i}] of a {type(batch).__name__} batch" for i in range(len(batch))]
        return SiftingBatch(list(batch), structure=type(batch), names=names)

    def reverse_transform(self, sifting_batch: SiftingBatch) -> Sequence[Any]:
        batch_type = sifting_batch.structure
        if hasattr(batch_type, "_fields"):  # a named tuple takes its fields as arguments
            return batch_type(*sifting_batch.columns)
        return batch_type(sifting_batch.columns)

    def sample_count(self, batch: Sequence[Any]) -> int:
        return _column_length(batch[0], f"[0] of a {type(batch).__name__} batch")


def _is_batch_encoding(batch: Any) -> bool:
    # Duck-typed, so that this package imports without transformers.
    return any(
        cls.__name__ == "BatchEncoding" and cls.__module__.startswith("transformers")
        for cls in type(batch).__mro__
    )


class MappingBatchTransform(SiftingBatchTransform):
    """A dict of tensors and per-sample lists, including a Hugging Face ``BatchEncoding``.

    A ``BatchEncoding`` from a fast tokenizer also carries its per-sample
    ``encodings``, so ``word_ids(i)`` and friends still work after sifting.
    """

    def transform(self, batch: Mapping[str, Any]) -> SiftingBatch:
        keys = list(batch.keys())
        columns = [batch[key] for key in keys]
        names = [f"{key!r} of a {type(batch).__name__} batch" for key in keys]
        extras = None
        if _is_batch_encoding(batch):
            encodings = batch.encodings
            extras = {"n_sequences": batch.n_sequences, "has_encodings": encodings is not None}
            if encodings is not None:
                columns.append(list(encodings))
                names.append("encodings of a BatchEncoding batch")
        return SiftingBatch(columns, structure=(type(batch), keys, extras), names=names)

    def reverse_transform(self, sifting_batch: SiftingBatch) -> Mapping[str, Any]:
        batch_type, keys, extras = sifting_batch.structure
        data = dict(zip(keys, sifting_batch.columns))
        if extras is None:
            return batch_type(data)
        encodings = sifting_batch.columns[len(keys)] if extras["has_encodings"] else None
        return batch_type(data, encoding=encodings, n_sequences=extras["n_sequences"])

    def sample_count(self, batch: Mapping[str, Any]) -> int:
        key = next(iter(batch.keys()))
        return _column_length(batch[key], f"{key!r} of a {type(batch).__name__} batch")


def default_batch_transform(batch: Any) -> SiftingBatchTransform:
    """The transform for ``batch``'s type; a TypeError naming the type if there is none."""
    if isinstance(batch, torch.Tensor):
        return TensorBatchTransform()
    if isinstance(batch, (tuple, list)) and len(batch) > 0:
        return SequenceBatchTransform()
    if isinstance(batch, Mapping) and len(batch) > 0:
        return MappingBatchTransform()
    raise TypeError(
        f"SiftingDataloader has no default batch transform for a batch of type "
        f"{type(batch).__module__}.{type(batch).__qualname__}; the defaults handle a "
        f"torch.Tensor, a non-empty tuple or list of tensors, and a non-empty dict of "
        f"tensors (a Hugging Face BatchEncoding too); {_CUSTOM_TRANSFORM_HINT}"
    )
