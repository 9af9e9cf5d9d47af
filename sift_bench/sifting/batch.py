"""Batches as per-sample columns, and the transforms to and from a loader's batches.

A ``SiftingBatch`` holds the columns of one batch (tensors, indexed along their
first dimension, and lists or tuples of per-sample values such as strings) plus
the ``structure`` its transform needs to rebuild the original batch. Sifting
selects, concatenates and splits columns; it never looks inside a sample.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

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
        # Lengths are right by construction here, so skip __init__'s validation. The subclass (ListBatch,
        # TensorBatch) is kept, so that a user's reverse_transform reads .inputs and .labels back.
        batch = object.__new__(type(self))
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


class _InputsAndLabels(SiftingBatch):
    """SageMaker's two batch kinds: ``inputs`` and optional ``labels``, one column each, of a type the kind names."""

    __slots__ = ()
    column_types: ClassVar[tuple[type, ...]]
    must_be: ClassVar[str]  # the error's words for what a column must be, and what to use instead
    instead: ClassVar[str]

    def __init__(self, inputs: Any, labels: Any = None) -> None:
        kind = type(self).__name__
        for name, value in (("inputs", inputs), ("labels", labels)):
            if value is not None and not isinstance(value, self.column_types):
                raise TypeError(f"{kind} {name} must be {self.must_be}, got {type(value).__name__}; {self.instead}")
        columns = [inputs] if labels is None else [inputs, labels]
        super().__init__(columns, names=[f"{kind} inputs", f"{kind} labels"][: len(columns)])

    @property
    def inputs(self) -> Any:
        return self.columns[0]

    @property
    def labels(self) -> Any:
        return self.columns[1] if len(self.columns) > 1 else None


class ListBatch(_InputsAndLabels):
    """SageMaker's list batch: per-sample ``inputs`` and optional ``labels``, each a list (or tuple) of n values.

    A custom transform builds ``ListBatch(batch[0].tolist(), batch[-1].tolist())`` and its
    ``reverse_transform`` reads ``.inputs`` and ``.labels`` of the samples kept.
    """

    __slots__ = ()
    column_types = (list, tuple)
    must_be = "a list or tuple with one value per sample (e.g. tensor.tolist())"
    instead = "use TensorBatch for tensors"


class TensorBatch(_InputsAndLabels):
    """SageMaker's tensor batch: ``inputs`` and optional ``labels``, tensors with the samples along dimension 0.

    A custom transform builds ``TensorBatch(batch[0], batch[-1])`` and its ``reverse_transform`` reads
    ``.inputs`` and ``.labels`` of the samples kept.
    """

    __slots__ = ()
    column_types = (torch.Tensor,)
    must_be = "a torch.Tensor with the samples along dimension 0"
    instead = "use ListBatch for lists"


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


class SampleListBatchTransform(SiftingBatchTransform):
    """A list or tuple of samples, one element per sample (``batch_format_index=0``), e.g. ``collate_fn=list``."""

    def transform(self, batch: Sequence[Any]) -> SiftingBatch:
        return SiftingBatch([list(batch)], structure=type(batch), names=[f"the samples of a {type(batch).__name__} batch"])

    def reverse_transform(self, sifting_batch: SiftingBatch) -> Sequence[Any]:
        return sifting_batch.structure(sifting_batch.columns[0])

    def sample_count(self, batch: Sequence[Any]) -> int:
        return len(batch)


class SampleDim1TensorBatchTransform(SiftingBatchTransform):
    """A tensor with the samples along dimension 1 (``batch_format_index=1``), e.g. [time, batch, features]."""

    def transform(self, batch: torch.Tensor) -> SiftingBatch:
        return SiftingBatch([batch.transpose(0, 1)], names=["batch (samples along dimension 1)"])

    def reverse_transform(self, sifting_batch: SiftingBatch) -> torch.Tensor:
        return sifting_batch.columns[0].transpose(0, 1)

    def sample_count(self, batch: torch.Tensor) -> int:
        return batch.shape[1]


# SageMaker's batch_format_index: which dimension of a batch runs over its samples. A list or tuple batch's
# dimension 0 is the sequence itself, so by default (a list of per-feature columns) its samples are dimension 1.
BATCH_FORMAT_INDEXES = (None, 0, 1)


def checked_batch_format_index(batch_format_index: Any) -> int | None:
    if batch_format_index not in BATCH_FORMAT_INDEXES or isinstance(batch_format_index, bool):
        raise ValueError(
            f"batch_format_index must be None, 0 or 1 (the dimension of a batch that runs over its samples: 0 for a "
            f"tensor with samples first or a list of samples, 1 for a list of per-feature columns or a tensor with "
            f"samples second), got {batch_format_index!r}"
        )
    return batch_format_index


def default_batch_transform(batch: Any, batch_format_index: int | None = None) -> SiftingBatchTransform:
    """The transform for ``batch``'s type (and ``batch_format_index``); an error naming the type if there is none."""
    if isinstance(batch, torch.Tensor):
        if batch_format_index == 1:
            if batch.dim() < 2:
                raise ValueError(
                    f"batch_format_index=1 takes the samples along dimension 1, but the batch is a "
                    f"{batch.dim()}-dimensional tensor of shape {list(batch.shape)}"
                )
            return SampleDim1TensorBatchTransform()
        return TensorBatchTransform()
    if isinstance(batch, (tuple, list)) and len(batch) > 0:
        return SampleListBatchTransform() if batch_format_index == 0 else SequenceBatchTransform()
    if isinstance(batch, Mapping) and len(batch) > 0:
        if batch_format_index == 0:
            raise ValueError(
                f"batch_format_index=0 does not apply to a {type(batch).__name__} batch: its dimension 0 is its "
                f"keys (one per feature), so its samples are along dimension 1, the default; leave batch_format_index "
                f"None"
            )
        return MappingBatchTransform()
    name = f"{type(batch).__module__}.{type(batch).__qualname__}"
    raise TypeError(
        f"Batches of type {name} are not supported by default: SiftingDataloader has no default batch transform "
        f"for a batch of type {name}; the defaults handle a "
        f"torch.Tensor, a non-empty tuple or list of tensors, and a non-empty dict of "
        f"tensors (a Hugging Face BatchEncoding too); {_CUSTOM_TRANSFORM_HINT}"
    )


def _leading_size(value: Any) -> int | None:
    if isinstance(value, torch.Tensor):
        return value.shape[0] if value.dim() > 0 else None
    return len(value) if isinstance(value, (list, tuple)) else None


def check_sample_dimension(batch: Any, batch_size: int) -> None:
    """SageMaker's layout checks of a first batch, for the default transforms when batch_format_index is None.

    The default takes a tensor's samples along dimension 0 and a list or tuple's along dimension 1 (each element
    a column). When that dimension is not the loader's batch size but the other one is, the batch is laid out the
    other way (a list of samples, a tensor with samples second) and would be sifted wrongly without a word, so it is
    an error asking for ``batch_format_index``. A dimension smaller than the batch size passes (a data set smaller
    than one batch). When both dimensions equal the batch size the default holds: it never guesses.
    """
    if isinstance(batch, torch.Tensor) and batch.dim() >= 2:
        kind, sizes, default = "tensor", [batch.shape[0], batch.shape[1]], 0
    elif isinstance(batch, (tuple, list)) and len(batch) > 0:
        kind, sizes, default = type(batch).__name__, [len(batch), _leading_size(batch[0])], 1
    else:
        return
    other = 1 - default
    if sizes[default] == batch_size:
        return
    if sizes[other] == batch_size:
        raise ValueError(
            f"Batch size {batch_size} does not match dimension {default} of this {kind} batch (size "
            f"{sizes[default]}), where the default transform takes its samples, but matches dimension {other}: pass "
            f"batch_format_index={other} to SiftingDataloader if dimension {other} runs over the samples, or "
            f"batch_transforms= a SiftingBatchTransform of your own"
        )
    if sizes[default] is not None and sizes[default] > batch_size:
        raise ValueError(
            f"Batch size {batch_size} does not match dimension 0 or dimension 1 sizes ({sizes[0]}, {sizes[1]}) of "
            f"this {kind} batch; {_CUSTOM_TRANSFORM_HINT}"
        )
