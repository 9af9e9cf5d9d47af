"""`python -m sift_bench.server`: a real `mlflow server` on loopback that jobs and the report use, and that stops
with the command."""

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from conftest import run_cli

SERVER = [sys.executable, "-m", "sift_bench.server"]


def start_server_command(store: Path, sigint: object = signal.SIG_DFL) -> tuple[subprocess.Popen, str]:
    """`python -m sift_bench.server --store STORE` in its own session; (process, the URI its tracking.uri line names).

    `sigint` is the SIGINT disposition it starts with: a script's background job starts with SIG_IGN."""
    process = subprocess.Popen([*SERVER, "--store", str(store)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    printed = []
    try:
        while True:
            printed.append(lines.get(timeout=120))
            if printed[-1].startswith("tracking.uri="):
                return process, printed[-1].strip().split("=", 1)[1]
    except queue.Empty:
        kill_everything(process, server_pids(process.pid))
        pytest.fail(f"no tracking.uri line within 120 s; it printed {printed}")


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid:  # the parent's pid
            found.append(int(stat.parent.name))
    return found


def server_pids(command_pid: int) -> list[int]:
    """The `mlflow server` the command started (its child) and that server's own children."""
    found, todo = [], children(command_pid)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children(pid))
    return found


def kill_everything(process: subprocess.Popen, server: list[int]) -> None:
    """After a failure: the command and the server it started (in a session of its own), so no test leaves one."""
    for pid in [*server, process.pid]:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
    process.wait()


def listening_addresses(port: int) -> set[str]:
    """The local IPv4 addresses with a socket listening on `port` (from /proc/net/tcp; state 0A is LISTEN)."""
    addresses = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, local_port = local.split(":")
        if int(local_port, 16) == port and state == "0A":
            addresses.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return addresses


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # not a zombie
    except FileNotFoundError:
        return False


def stop_and_check_nothing_is_left(process: subprocess.Popen, started: list[int], uri: str, signum: int) -> None:
    assert started, "the command started no mlflow server"
    os.kill(process.pid, signum)  # the command alone, as a terminal's Ctrl-C or `kill PID` reaches it
    assert process.wait(timeout=60) == 0
    deadline = time.monotonic() + 15
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in started if alive(pid)], "the mlflow server outlived the command"
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{uri}/health", timeout=5)


@pytest.mark.slow
def test_the_printed_tracking_uri_serves_a_job_and_the_report_and_ctrl_c_stops_it(tmp_path):
    store = tmp_path / "store"
    # Started as a script's background job is (SIGINT ignored): Ctrl-C must still stop it.
    process, uri = start_server_command(store, sigint=signal.SIG_IGN)
    server = server_pids(process.pid)
    try:
        assert uri.startswith("http://127.0.0.1:")
        assert listening_addresses(int(uri.rsplit(":", 1)[1])) == {"127.0.0.1"}  # loopback only
        job = run_cli(["task=cifar10_resnet", "scale=smoke", "trainer.epochs=1", f"tracking.uri={uri}"], tmp_path,
                      timeout=300)
        assert job.returncode == 0, job.stderr[-3000:]
        run = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("sift_bench").experiment_id])[0]
        assert run.info.status == "FINISHED" and run.info.run_id in job.stdout
        assert len(list((store / "mlartifacts").rglob("config.yaml"))) == 1  # the server keeps the artifacts
        report = subprocess.run([sys.executable, "-m", "sift_bench.report", "--tracking-uri", uri, "--scale", "smoke",
                                 "--out", str(tmp_path / "report")], capture_output=True, text=True, timeout=300)
        assert report.returncode == 0, report.stderr[-3000:]
        assert list(pd.read_csv(tmp_path / "report" / "runs.csv")["run_id"]) == [run.info.run_id]
        assert (store / "mlflow.db").is_file()
        stop_and_check_nothing_is_left(process, server, uri, signal.SIGINT)
    finally:
        kill_everything(process, server)


@pytest.mark.slow
def test_kill_stops_the_server_too(tmp_path):
    process, uri = start_server_command(tmp_path / "store")
    server = server_pids(process.pid)
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=10) as response:
            assert response.status == 200
        stop_and_check_nothing_is_left(process, server, uri, signal.SIGTERM)
    finally:
        kill_everything(process, server)


def test_a_port_in_use_is_refused_naming_the_setting(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([*SERVER, "--store", str(tmp_path / "store"), "--port", str(port)],
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"--port {port}: 127.0.0.1:{port} is in use" in result.stderr and "leave --port out" in result.stderr
    assert "tracking.uri=" not in result.stdout
