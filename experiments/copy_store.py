"""Copy a sqlite MLflow store folder (mlflow.db and its mlartifacts/) while a sweep may be writing to it.

    python experiments/copy_store.py ../sweep/results/cpu_long results/cpu_long

A sitting runs its sweep from a worktree of the committed code and commits the store every hour from the checkout:
this copies the database with sqlite's online backup (a consistent snapshot, even mid-write, where `cp` can copy
half a transaction) and the artifacts beside it, leaving out the liveness locks (`.live/`). Standard library only,
so it costs the timed sweep next to nothing. Prints what the copy holds, by run status: a RUNNING run in it is the
job in flight (the next sweep on the store marks it lost if its process is gone by then).
"""

import argparse
import shutil
import sqlite3
from pathlib import Path

STORE_FILE = "mlflow.db"
ARTIFACTS_FOLDER = "mlartifacts"


def copy_store(source: Path, target: Path) -> dict[str, int]:
    """Copies source/mlflow.db and source/mlartifacts into target; returns the copy's run count by status."""
    if not (source / STORE_FILE).is_file():
        raise SystemExit(f"copy_store: {source / STORE_FILE} does not exist")
    if source.resolve() == target.resolve():
        raise SystemExit(f"copy_store: source and target are the same folder ({source})")
    target.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(source / STORE_FILE) as reader, sqlite3.connect(target / STORE_FILE) as writer:
        reader.backup(writer)
        statuses = dict(writer.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
    if (source / ARTIFACTS_FOLDER).is_dir():
        shutil.copytree(source / ARTIFACTS_FOLDER, target / ARTIFACTS_FOLDER, dirs_exist_ok=True)
    return statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the store folder the sweep writes (holds mlflow.db)")
    parser.add_argument("target", type=Path, help="the folder to copy it into (e.g. results/cpu_long)")
    args = parser.parse_args()
    statuses = copy_store(args.source, args.target)
    print(f"copied {args.source} -> {args.target}: "
          + ", ".join(f"{count} {status}" for status, count in sorted(statuses.items())))


if __name__ == "__main__":
    main()
