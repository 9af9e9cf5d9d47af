"""Parallel and cluster sweeps through real Hydra launcher plugins, into a real `mlflow server` on loopback or a
sqlite file, and the server command itself."""

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT, offline_data_dir, run_cli
from sift_bench import server

JOB = ["task=cifar10_resnet", "scale=smoke", "trainer.epochs=1"]


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("server")
    with open(folder / "server.log", "w") as log:
        process, uri = server.start(folder / "store", log=log)
    yield uri, folder / "store"
    server.stop(process)


def sweep_runs(uri: str) -> tuple[list, list]:
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parents = [r for r in runs if r.data.tags.get("run_kind") == "sweep"]
    return parents, [r for r in runs if r.data.tags.get("run_kind") != "sweep"]


def assert_one_parent_with_children(uri: str, seeds: list[str]) -> None:
    parents, children = sweep_runs(uri)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(r.data.tags["seed"] for r in children) == seeds, "a job's run is lost"
    assert all(r.info.status == "FINISHED" for r in children)
    assert {r.data.tags.get("mlflow.parentRunId") for r in children} == {parents[0].info.run_id}


@pytest.mark.parametrize("store_kind", ["server", "sqlite"])
def test_joblib_runs_jobs_in_parallel_as_children_of_one_parent(store_kind, tracking_server, tmp_path):
    # A fresh sqlite file: the store and experiment are made once, before the jobs, and under a lock.
    uri = tracking_server[0] if store_kind == "server" else f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    before = len(sweep_runs(uri)[1]) if store_kind == "server" else 0
    result = run_cli(["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=3", *JOB, "seed=0,1,2",
                      f"sweep_name=joblib_{store_kind}", f"tracking.uri={uri}"], tmp_path, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "duplicate column" not in result.stderr and "database is locked" not in result.stderr
    if store_kind == "sqlite":
        assert_one_parent_with_children(uri, ["0", "1", "2"])
        return
    parents, children = sweep_runs(uri)
    mine = [p for p in parents if p.data.tags["sweep"] == "joblib_server"]
    assert len(mine) == 1 and mine[0].info.status == "FINISHED"
    ours = [r for r in children if r.data.tags.get("mlflow.parentRunId") == mine[0].info.run_id]
    assert sorted(r.data.tags["seed"] for r in ours) == ["0", "1", "2"] and len(children) == before + 3
    assert all(r.info.status == "FINISHED" for r in ours)
    # Artifacts go through the server into its store folder, and the report reads the runs from the server.
    assert all(r.info.artifact_uri.startswith("mlflow-artifacts:/") for r in ours)
    assert len(list((tracking_server[1] / "mlartifacts").rglob("config.yaml"))) >= 3
    report = subprocess.run([sys.executable, "-m", "sift_bench.report", "--tracking-uri", uri, "--scale", "smoke",
                             "--out", str(tmp_path / "report")], capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    assert set(pd.read_csv(tmp_path / "report" / "runs.csv")["run_id"]) >= {r.info.run_id for r in ours}


def test_submitit_local_jobs_attach_to_the_parent_across_processes(tracking_server, tmp_path):
    uri = tracking_server[0]
    result = run_cli(["-m", "hydra/launcher=submitit_local", *JOB, "seed=3,4", "sweep_name=submitit",
                      f"tracking.uri={uri}"], tmp_path, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    parents, children = sweep_runs(uri)
    mine = [p for p in parents if p.data.tags["sweep"] == "submitit"]
    assert len(mine) == 1 and mine[0].info.status == "FINISHED"
    ours = [r for r in children if r.data.tags.get("mlflow.parentRunId") == mine[0].info.run_id]
    assert sorted(r.data.tags["seed"] for r in ours) == ["3", "4"]
    assert all(r.info.status == "FINISHED" for r in ours)
    # Each job ran as a submitit job of its own, which left its result there.
    assert len(list((tmp_path / "multirun" / ".submitit").rglob("*_result.pkl"))) == 2


def test_two_jobs_started_at_once_into_a_fresh_sqlite_store_both_finish(tmp_path):
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    env = {**os.environ, "SIFT_BENCH_DATA_DIR": str(offline_data_dir()),
           "SIFT_BENCH_CACHE_DIR": str(ROOT / ".cache" / "sift_bench")}
    jobs = [subprocess.Popen([sys.executable, "-m", "sift_bench", *JOB, f"seed={seed}", f"tracking.uri={store}",
                              f"hydra.run.dir={tmp_path}/outputs{seed}"], cwd=tmp_path, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for seed in (0, 1)]
    outputs = [job.communicate(timeout=300) for job in jobs]
    for job, (_, stderr) in zip(jobs, outputs):
        assert job.returncode == 0 and "duplicate column" not in stderr, stderr[-3000:]
    client = MlflowClient(store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert sorted(r.data.tags["seed"] for r in runs) == ["0", "1"] and all(r.info.status == "FINISHED" for r in runs)
    assert len(client.search_experiments(filter_string="name = 'sift_bench'")) == 1


def test_server_command_prints_the_tracking_uri_and_stops_on_ctrl_c(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "sift_bench.server", "--store", str(tmp_path / "store")],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        lines = [process.stdout.readline() for _ in range(2)]
        setting = next(line.strip() for line in lines if line.startswith("tracking.uri="))
        uri = setting.split("=", 1)[1]
        assert uri.startswith("http://127.0.0.1:")  # loopback only
        with urllib.request.urlopen(f"{uri}/health", timeout=10) as response:
            assert response.status == 200
        MlflowClient(uri).create_experiment("probe")
        assert (tmp_path / "store" / "mlflow.db").is_file()
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)  # it stops its server: politely, then after 10 s for good
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{uri}/health", timeout=5)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def test_slurm_launcher_settings_compose():
    from hydra import compose, initialize_config_dir

    from conftest import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["hydra/launcher=slurm", "hydra.launcher.partition=gpu"],
                      return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("submitit_launcher.SlurmLauncher")
    assert launcher.partition == "gpu" and launcher.gpus_per_node == 1 and launcher.timeout_min == 240
