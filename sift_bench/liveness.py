"""Is a RUNNING run still alive? A job killed with its machine (SIGKILL, a sitting that ends) runs no `finally`,
so MLflow keeps its run RUNNING forever and the UI shows it as live. This module tells such a run from a live one
and marks it lost.

A job takes an exclusive lock on a fresh file beside a sqlite store (`.live/<token>.lock`) before it creates its
run, names that file in the run's tags, and holds the lock until the run's end is recorded. The lock is filelock's
FileLock, an OS lock (flock on Unix, LockFileEx on Windows) that the kernel drops when the process dies, however it
dies, so a RUNNING run whose lock nobody holds (or that names none: a run of older code) is lost. On a file system
without OS locks filelock falls back to a marker file (and warns): a job killed there leaves its marker behind, so
its run reads as alive until the marker is removed. On a server store (`http://...`) jobs may run on other hosts, whose locks cannot be
seen from here: there nothing is marked.
"""

import contextlib
import uuid
from datetime import datetime
from pathlib import Path

from filelock import FileLock, Timeout
from mlflow.tracking import MlflowClient

from sift_bench.store import sqlite_file

LIVE_FOLDER = ".live"
LOCK_TAG = "sift_bench.live_lock"
LOST_TAG = "sift_bench.lost"
LOST_STATUS = "KILLED"


def _live_folder(uri: str) -> Path | None:
    store_file = sqlite_file(uri)
    return None if store_file is None else store_file.parent / LIVE_FOLDER


@contextlib.contextmanager
def hold(uri: str):
    """Says "this process is alive" while the block runs, and no longer, whatever ends the process. Yields the tags
    that tie a run to it (none for a server store): give them to the run when it is created."""
    folder = _live_folder(uri)
    if folder is None:
        yield {}
        return
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex}.lock"
    try:
        with FileLock(path):
            yield {LOCK_TAG: path.name}
    finally:
        # Removed after the release: Windows cannot remove a file that is open. A look at it in between finds it
        # free and reads the run's end, which was recorded before (is_lost).
        path.unlink(missing_ok=True)


def is_held(path: Path) -> bool:
    """Whether some process holds the lock at `path` (this one too, through another FileLock: an OS lock belongs to
    an open file, not to a process). Tried without waiting; a missing file is held by nobody, and is not made."""
    if not path.exists():
        return False
    probe = FileLock(path)
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return True
    probe.release()
    return False


def is_lost(client: MlflowClient, uri: str, run) -> bool:
    """A RUNNING run of a sqlite store whose process is gone."""
    lock = run.data.tags.get(LOCK_TAG)
    if lock and is_held(_live_folder(uri) / lock):
        return False
    # Read again after the lock: a job records its run's end before it lets go of the lock, so a run that ended
    # while we looked reads FINISHED here.
    return client.get_run(run.info.run_id).info.status == "RUNNING"


def mark_lost_runs(uri: str, experiment_id: str) -> list[str]:
    """Marks every RUNNING run of the experiment whose process is gone as KILLED, tagged with why and when it was
    found, and says so on stdout; returns their ids. Runs of a server store are left as they are (see the module's
    docstring)."""
    if _live_folder(uri) is None:
        return []
    client = MlflowClient(uri)
    runs = client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=50_000)
    lost = [run for run in runs if is_lost(client, uri, run)]
    found = datetime.now().isoformat(timespec="seconds")
    for run in lost:
        run_id = run.info.run_id
        client.set_tag(run_id, LOST_TAG, "its process ended without ending the run (killed, or its machine stopped); "
                                         f"found RUNNING with no live process on {found}")
        # The true end is unknown: the last metric the run wrote is the latest it was seen alive.
        seen = max((metric.timestamp for key in run.data.metrics for metric in client.get_metric_history(run_id, key)),
                   default=run.info.start_time)
        client.set_terminated(run_id, LOST_STATUS, end_time=seen)
        if run.data.tags.get(LOCK_TAG):
            (_live_folder(uri) / run.data.tags[LOCK_TAG]).unlink(missing_ok=True)  # nobody holds it any more
        print(f"sift_bench: run {run_id} ({run.info.run_name}) was left RUNNING by a process that is gone: marked "
              f"{LOST_STATUS}, tag {LOST_TAG}")
    return [run.info.run_id for run in lost]
