"""`python -m sift_bench.server --store DIR`: an MLflow tracking server on loopback for many writers at once.

Parallel jobs (a joblib or SLURM sweep, several machines) can log through one server rather than each opening
the same sqlite file. The server keeps its store in DIR: `mlflow.db` (sqlite) and `mlartifacts/` (each run's
artifacts, served by the server), the same layout a job makes beside a sqlite store. It prints the setting to
give jobs and the report, `tracking.uri=http://127.0.0.1:PORT`, and runs until Ctrl-C (or SIGTERM, or the
terminal closing), which stop the `mlflow server` it started too.
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
DATABASE = "mlflow.db"
ARTIFACTS = "mlartifacts"


class ServerError(Exception):
    """The server could not start; the message says why and what to change."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return True
    return False


def server_command(store: Path, port: int) -> list[str]:
    store = store.resolve()
    # One worker: it is the only writer of the sqlite file, so no two server processes contend for it.
    return [sys.executable, "-m", "mlflow", "server", "--host", LOOPBACK, "--port", str(port),
            "--backend-store-uri", f"sqlite:///{store / DATABASE}",
            "--artifacts-destination", str(store / ARTIFACTS), "--workers", "1"]


def server_environment() -> dict[str, str]:
    # MLflow's server-side jobs (GenAI scorers, trace archival) are unused here, and would start eight more
    # processes (about 2 GB).
    return {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def wait_until_up(uri: str, process: subprocess.Popen, timeout_s: float) -> None:
    """Poll the server's /health until it answers; an error that says why if it exits or never does."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerError(f"mlflow server exited with status {process.returncode} before answering at {uri} "
                              "(its log says why)")
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise ServerError(f"mlflow server did not answer at {uri} within {timeout_s:.0f} s")


def start(store: Path, port: int | None = None, timeout_s: float = 120.0, log=None) -> tuple[subprocess.Popen, str]:
    """Start `mlflow server` over the folder `store` and wait until it answers; (process, tracking URI)."""
    if store.exists() and not store.is_dir():
        raise ServerError(f"--store {store}: a file, not a folder; give a folder (made if missing)")
    if port is not None and not 1 <= port <= 65535:
        raise ServerError(f"--port {port}: not a port; give one from 1 to 65535, or leave --port out for a free one")
    if port is not None and port_in_use(port):
        raise ServerError(f"--port {port}: {LOOPBACK}:{port} is in use; give another, or leave --port out for a "
                          "free one")
    store.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    uri = f"http://{LOOPBACK}:{port}"
    # Its own session, so that stopping it reaches its uvicorn worker too.
    process = subprocess.Popen(server_command(store, port), stdout=log, stderr=log, env=server_environment(),
                               start_new_session=True)
    try:
        wait_until_up(uri, process, timeout_s)
    except BaseException:
        stop(process)
        raise
    return process, uri


def stop(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to the server's session (mlflow server passes it on to uvicorn), SIGKILL after `grace_s`."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        process.wait()


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def stop_on_signals() -> None:
    """Ctrl-C, `kill` and a closed terminal all end main() through KeyboardInterrupt, which stops the server.

    The server runs in a session of its own, so a signal that ended this process alone would leave it running.
    SIGINT is set explicitly: a process started in the background by a script begins with it ignored."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # under nohup, outlive the terminal as asked
        signal.signal(signal.SIGHUP, _interrupt)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sift_bench.server",
        description="An MLflow tracking server on 127.0.0.1 over a store folder (mlflow.db and mlartifacts/ in it), "
                    "for parallel jobs: give them, and `python -m sift_bench.report --tracking-uri`, the "
                    "tracking.uri it prints. Ctrl-C stops it.")
    parser.add_argument("--store", required=True, type=Path, help="the store's folder (made if missing)")
    parser.add_argument("--port", type=int, default=None, help="the port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args(argv)
    stop_on_signals()
    process = None
    try:
        # The server's own log goes to stderr, so that stdout holds just the two lines below.
        process, uri = start(args.store, args.port, log=sys.stderr)
        print(f"sift_bench.server: MLflow tracking server over {args.store}/ ({DATABASE}, {ARTIFACTS}/); "
              "Ctrl-C stops it", flush=True)
        print(f"tracking.uri={uri}", flush=True)
        status = process.wait()
        print(f"sift_bench.server: error: mlflow server exited with status {status}", file=sys.stderr)
        return 1
    except ServerError as error:
        print(f"sift_bench.server: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sift_bench.server: stopped", file=sys.stderr)
        return 0
    finally:
        if process is not None:
            # A second Ctrl-C while it shuts down must not leave it running.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            stop(process)


if __name__ == "__main__":
    sys.exit(main())
