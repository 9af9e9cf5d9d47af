"""`python -m sift_bench.server --store DIR`: an MLflow tracking server on loopback for many writers at once.

Parallel jobs (a joblib or SLURM sweep, several machines) should log through one server rather than each opening
the same sqlite file. The server keeps its store in DIR: `mlflow.db` (sqlite) and `mlartifacts/` (each run's
artifacts, served by the server), the same layout a job makes beside a sqlite store. It prints the setting to
give jobs and the report, `tracking.uri=http://127.0.0.1:PORT`, and runs until Ctrl-C.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def server_command(store: Path, port: int) -> list[str]:
    store = store.resolve()
    return [sys.executable, "-m", "mlflow", "server", "--host", LOOPBACK, "--port", str(port),
            "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}",
            "--artifacts-destination", str(store / "mlartifacts"), "--workers", "1"]


def wait_until_up(uri: str, process: subprocess.Popen, timeout_s: float) -> None:
    """Poll the server's /health until it answers; an error that says why if it exits or never does."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"mlflow server exited with status {process.returncode} before answering at {uri}")
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"mlflow server did not answer at {uri} within {timeout_s:.0f} s")


def start(store: Path, port: int | None = None, timeout_s: float = 120.0, log=None) -> tuple[subprocess.Popen, str]:
    """Start `mlflow server` over `store` and wait until it answers; (process, tracking URI)."""
    store.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    uri = f"http://{LOOPBACK}:{port}"
    # Its own session, so that stopping it stops its workers too.
    process = subprocess.Popen(server_command(store, port), stdout=log, stderr=log, start_new_session=True)
    try:
        wait_until_up(uri, process, timeout_s)
    except BaseException:
        stop(process)
        raise
    return process, uri


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m sift_bench.server",
        description="An MLflow tracking server on 127.0.0.1 over a store folder (mlflow.db and mlartifacts/ in it), "
                    "for parallel jobs: give them the tracking.uri it prints.")
    parser.add_argument("--store", required=True, type=Path, help="the store's folder (made if missing)")
    parser.add_argument("--port", type=int, default=None, help="the port (default: a free one)")
    args = parser.parse_args()
    # The server's own log goes to stderr, so that stdout holds just the two lines below.
    process, uri = start(args.store, args.port, log=sys.stderr)
    print(f"sift_bench.server: MLflow tracking server over {args.store}/ (mlflow.db, mlartifacts/); Ctrl-C stops it",
          flush=True)
    print(f"tracking.uri={uri}", flush=True)
    try:
        process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop(process)


if __name__ == "__main__":
    main()
