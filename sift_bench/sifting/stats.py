"""Running counters of a SiftingDataloader, for a training loop and a report."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SiftingStats:
    """Counters since construction or the last ``reset()``.

    samples_seen: candidate samples drawn from the original loader, including
        those passed through during the delay. Up to date whenever a batch is
        yielded: it includes every candidate consumed to build that batch.
    samples_kept: samples selected for training (during the delay: all of
        them). Kept samples still waiting in the refill buffer are counted; with
        ``drop_last`` the ones left over at the end of an epoch are moved to
        ``samples_sifted_out``, so that at the end of an epoch ``samples_kept``
        is the number of samples yielded and seen = kept + sifted out.
    samples_sifted_out: samples not trained on.
    samples_left_over: of those, the kept samples that were not trained on because under DDP the other ranks
        had no full batch left (every rank must yield the same number of batches); 0 in one process.
    batches_yielded: batches handed to the training loop.
    scoring_seconds: wall time of the scoring forward passes (``Loss.loss``
        and the copy of its losses to the CPU, which waits for the device).
    samples_scored: samples those passes scored, on this rank (the work a scoring pass costs, per sample).
    sync_seconds: wall time of the collectives between ranks under DDP; 0 in one process.

    Under DDP the sample counters are sums over all ranks; ``batches_yielded`` is this rank's count, the same
    on every rank.
    """

    samples_seen: int = 0
    samples_kept: int = 0
    samples_sifted_out: int = 0
    samples_left_over: int = 0
    batches_yielded: int = 0
    scoring_seconds: float = 0.0
    sync_seconds: float = 0.0
    samples_scored: int = 0

    @property
    def pct_accepted(self) -> float:
        """100 * kept / seen; 100.0 while nothing has been seen."""
        if self.samples_seen == 0:
            return 100.0
        return 100.0 * self.samples_kept / self.samples_seen

    def snapshot(self) -> dict[str, float | int]:
        """The counters a report reads, as plain numbers."""
        return {
            "samples_seen": int(self.samples_seen),
            "samples_kept": int(self.samples_kept),
            "samples_left_over": int(self.samples_left_over),
            "batches_yielded": int(self.batches_yielded),
            "scoring_seconds": float(self.scoring_seconds),
            "sync_seconds": float(self.sync_seconds),
            "pct_accepted": float(self.pct_accepted),
        }

    def reset(self) -> None:
        """Zero every counter, e.g. between epochs (the delay and the loss history are kept)."""
        self.samples_seen = 0
        self.samples_kept = 0
        self.samples_sifted_out = 0
        self.samples_left_over = 0
        self.batches_yielded = 0
        self.scoring_seconds = 0.0
        self.sync_seconds = 0.0
        self.samples_scored = 0
