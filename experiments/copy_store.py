"""Copy a sqlite MLflow store folder (mlflow.db and its mlartifacts/) while a sweep may be writing to it.

    python experiments/copy_store.py ../sweep/results/cpu_long results/cpu_long
    python experiments/copy_store.py ../sweep/results/cpu_long results/cpu_long --follow SWEEP_PID --commit "msg"

A sitting runs its sweep from a worktree of the committed code and commits the store from the checkout: this copies
the database with sqlite's online backup (a consistent snapshot, even mid-write, where `cp` can copy half a
transaction) and the artifacts beside it, leaving out the liveness locks (`.live/`). Standard library only, so it
costs the timed sweep next to nothing. Prints what the copy holds, by run status: a RUNNING run in it is the job in
flight (the next sweep on the store marks it lost if its process is gone by then).

With --follow PID it keeps watching the store while process PID (the sweep) lives, and copies it again each time a
run ends there; with --commit it also commits the copy (that folder only, `git commit -- TARGET`) each time. A
sitting cut off mid-sweep then loses at most the job in flight: an hourly snapshot would lose up to an hour of jobs
(a 30-epoch CIFAR-10 job is about 19 minutes of a 2-core machine).
"""

import argparse
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

STORE_FILE = "mlflow.db"
ARTIFACTS_FOLDER = "mlartifacts"
# A commit of the checkout (the engineer's own) can hold git's index lock for a moment: try again after a pause.
COMMIT_TRIES = 5


def copy_store(source: Path, target: Path) -> dict[str, int]:
    """Copies source/mlflow.db and source/mlartifacts into target; returns the copy's run count by status."""
    check_folders(source, target)
    target.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(source / STORE_FILE) as reader, sqlite3.connect(target / STORE_FILE) as writer:
        reader.backup(writer)
        statuses = dict(writer.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
    if (source / ARTIFACTS_FOLDER).is_dir():
        shutil.copytree(source / ARTIFACTS_FOLDER, target / ARTIFACTS_FOLDER, dirs_exist_ok=True)
    return statuses


def check_folders(source: Path, target: Path) -> None:
    if not (source / STORE_FILE).is_file():
        raise SystemExit(f"copy_store: {source / STORE_FILE} does not exist")
    if source.resolve() == target.resolve():
        raise SystemExit(f"copy_store: source and target are the same folder ({source})")


def ended_runs(store: Path) -> int:
    """How many runs of the store are no longer RUNNING (read-only: the sweep keeps writing)."""
    with sqlite3.connect(f"file:{store / STORE_FILE}?mode=ro", uri=True) as reader:
        return reader.execute("SELECT COUNT(*) FROM runs WHERE status != 'RUNNING'").fetchone()[0]


def describe(statuses: dict[str, int]) -> str:
    return ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))


def commit(target: Path, message: str) -> bool:
    """Commits the target folder alone (other changes of the checkout stay as they are); False if git refused."""
    refusal = ""
    for _ in range(COMMIT_TRIES):
        added = subprocess.run(["git", "add", "."], cwd=target, capture_output=True, text=True)
        if added.returncode == 0:
            done = subprocess.run(["git", "commit", "-q", "-m", message, "--", "."], cwd=target,
                                  capture_output=True, text=True)
            if done.returncode == 0 or "nothing to commit" in done.stdout + done.stderr:
                return True
            refusal = done.stderr or done.stdout
        else:
            refusal = added.stderr
        time.sleep(2)
    print(f"copy_store: git could not commit {target}: {refusal.strip()}", flush=True)
    return False


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


def follow(source: Path, target: Path, pid: int, message: str | None, every_s: float) -> None:
    """Copies (and commits) the store each time a run ends in it, until process pid ends; then once more."""
    check_folders(source, target)
    committed = None
    while True:
        alive = process_alive(pid)
        ended = ended_runs(source)
        if ended != committed:
            statuses = copy_store(source, target)
            if message is None or commit(target, f"{message} ({describe(statuses)})"):
                committed = ended
            print(f"{time.strftime('%H:%M:%S')} copied {source} -> {target}: {describe(statuses)}"
                  + (" (committed)" if message is not None and committed == ended else ""), flush=True)
        if not alive:
            return
        time.sleep(every_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the store folder the sweep writes (holds mlflow.db)")
    parser.add_argument("target", type=Path, help="the folder to copy it into (e.g. results/cpu_long)")
    parser.add_argument("--follow", type=int, metavar="PID",
                        help="keep copying each time a run ends, while process PID (the sweep) lives")
    parser.add_argument("--commit", metavar="MESSAGE",
                        help="with --follow: git-commit the target folder after each copy, with this message")
    parser.add_argument("--every", type=float, default=60.0, metavar="SECONDS",
                        help="with --follow: how often to look at the store (default 60)")
    args = parser.parse_args()
    if args.commit is not None and args.follow is None:
        parser.error("--commit goes with --follow PID (a single copy is committed by hand)")
    if args.follow is not None:
        follow(args.source, args.target, args.follow, args.commit, args.every)
        return
    statuses = copy_store(args.source, args.target)
    print(f"copied {args.source} -> {args.target}: {describe(statuses)}")


if __name__ == "__main__":
    main()
