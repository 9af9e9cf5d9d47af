"""The refill: kept samples wait here, in the order they were kept, until a full batch of them is ready."""

from __future__ import annotations

import torch

from .batch import SiftingBatch


class Refill:
    """Kept samples (and their sample ids, when a policy tracks them) waiting to fill batches of `batch_size`."""

    def __init__(self, batch_size: int, tracking: bool) -> None:
        self.batch_size, self.tracking = batch_size, tracking
        self.pieces: list[SiftingBatch] = []
        self.id_pieces: list[torch.Tensor] = []
        self.pending = 0  # samples waiting

    def add(self, sifting_batch: SiftingBatch, ids: torch.Tensor | None, keep: torch.Tensor, n_kept: int) -> None:
        """The kept samples of one candidate batch (`keep`: its boolean mask, `n_kept` of them true)."""
        if n_kept == len(sifting_batch):
            self.pieces.append(sifting_batch)
            if self.tracking:
                self.id_pieces.append(ids)
        elif n_kept > 0:
            kept_indices = keep.nonzero().reshape(-1)
            self.pieces.append(sifting_batch.select(kept_indices))
            if self.tracking:
                self.id_pieces.append(ids[kept_indices])
        self.pending += n_kept

    def take(self) -> tuple[SiftingBatch, torch.Tensor | None]:
        """One full batch off the front, with its ids (None untracked); at least `batch_size` must be waiting."""
        batch_size = self.batch_size
        merged = SiftingBatch.concat(self.pieces)
        ready_ids = rest_ids = None
        if self.tracking:
            merged_ids = torch.cat(self.id_pieces) if len(self.id_pieces) > 1 else self.id_pieces[0]
            ready_ids, rest_ids = merged_ids[:batch_size], merged_ids[batch_size:]
        if self.pending == batch_size:
            ready, self.pieces, self.id_pieces = merged, [], []
        else:
            ready, rest = merged.split(batch_size)
            self.pieces = [rest]
            self.id_pieces = [rest_ids] if self.tracking else []
        self.pending -= batch_size
        return ready, ready_ids

    def rest(self) -> tuple[SiftingBatch, torch.Tensor | None]:
        """Everything still waiting, as one batch (an epoch's last, smaller one), with its ids."""
        return SiftingBatch.concat(self.pieces), torch.cat(self.id_pieces) if self.tracking else None
