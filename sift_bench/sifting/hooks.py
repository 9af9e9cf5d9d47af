"""A harness's view of every SiftingDataloader built while it runs, without the sifter importing the harness.

`python -m sift_bench.sagemaker` installs one `SifterWatcher` while a user's script runs: each SiftingDataloader
asks it which policy to run (the script's own, or the baseline or the random control in its place) and reports
itself, and `TrainingMetricsRecorder` hands it the metrics it logs. Outside such a harness no watcher is installed
and the sifter does exactly what its arguments say.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from .policy import SiftPolicy


class SifterWatcher:
    """What a harness implements; every method's default does nothing."""

    def policy(self, sift_config: SiftPolicy) -> SiftPolicy:
        """The policy a SiftingDataloader built with ``sift_config`` runs instead; by default ``sift_config``."""
        return sift_config

    def created(self, sifter: Any) -> None:
        """A SiftingDataloader was built (called at the end of its ``__init__``)."""

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Metrics a training-loop callback (``TrainingMetricsRecorder``) records."""


_watchers: list[SifterWatcher] = []


def current() -> SifterWatcher | None:
    """The innermost installed watcher, or None."""
    return _watchers[-1] if _watchers else None


@contextlib.contextmanager
def watching(watcher: SifterWatcher) -> Iterator[SifterWatcher]:
    """Install ``watcher`` for the ``with`` block."""
    _watchers.append(watcher)
    try:
        yield watcher
    finally:
        _watchers.remove(watcher)
