"""Parallel and cluster sweeps through the real Hydra launcher plugins (joblib, submitit), under torchrun, into a
real `mlflow server` on loopback (sift_bench.server) or straight into one sqlite file."""

import os
import pickle
import signal
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient

from conftest import CONF_DIR, ROOT, compose_config, job_env, run_cli
from sift_bench.callbacks import MlflowSweepParent
from sift_bench.tracking import PARENT_RUN_ENV, SWEEP_STARTED_ENV

# The smallest job the project has: tiny ResNet on synthetic-size CIFAR at scale=smoke, one epoch (seconds).
JOB = ["task=cifar10_resnet", "scale=smoke", "trainer.epochs=1"]
# What a race or a contended sqlite file prints; none of it may appear.
STORE_ERRORS = ("duplicate column", "database is locked", "alembic", "Traceback")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def sweep_runs(uri: str) -> tuple[list, list]:
    """(sweep parents, job runs) in every experiment of the store."""
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=1000)
    return ([r for r in runs if r.data.tags.get("run_kind") == "sweep"],
            [r for r in runs if r.data.tags.get("run_kind") != "sweep"])


def assert_one_parent_with_children(uri: str, seeds: list[str]) -> tuple:
    parents, children = sweep_runs(uri)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED", [p.info.status for p in parents]
    assert sorted(r.data.tags["seed"] for r in children) == seeds, "a job's run is lost, or one ran twice"
    assert all(r.info.status == "FINISHED" for r in children)
    assert {r.data.tags.get("mlflow.parentRunId") for r in children} == {parents[0].info.run_id}
    return parents[0], children


def assert_clean(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    for error in STORE_ERRORS:
        assert error not in result.stderr, result.stderr[-3000:]


@pytest.mark.slow
def test_joblib_runs_three_jobs_at_once_as_children_of_one_parent_on_a_server(tracking_server, tmp_path):
    uri, folder = tracking_server
    result = run_cli(["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=3", *JOB, "seed=0,1,2",
                      f"tracking.uri={uri}"], tmp_path, timeout=300)
    assert_clean(result)
    _, children = assert_one_parent_with_children(uri, ["0", "1", "2"])
    # They ran at once: every job started before any ended.
    assert max(r.info.start_time for r in children) < min(r.info.end_time for r in children)
    # Artifacts go through the server into its store folder.
    assert all(r.info.artifact_uri.startswith("mlflow-artifacts:/") for r in children)
    assert len(list((folder / "mlartifacts").rglob("config.yaml"))) == 3


@pytest.mark.slow
def test_submitit_local_jobs_attach_to_the_parent_across_processes(tracking_server, tmp_path):
    uri, _ = tracking_server
    result = run_cli(["-m", "hydra/launcher=submitit_local", *JOB, "seed=3,4", f"tracking.uri={uri}"], tmp_path,
                     timeout=300)
    assert_clean(result)
    assert_one_parent_with_children(uri, ["3", "4"])
    # Each job ran as a submitit job of its own, which left its result there.
    assert len(list((tmp_path / "multirun" / ".submitit").rglob("*_result.pkl"))) == 2


@pytest.mark.slow
def test_a_resumed_parallel_sweep_reuses_its_parent_and_adds_no_children(tracking_server, tmp_path):
    uri, _ = tracking_server
    sweep = ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *JOB, "tracking.skip_finished=true",
             f"tracking.uri={uri}"]
    args = [*sweep, "seed=0,1", "sweep_name=resume_me"]
    assert_clean(run_cli(args, tmp_path, timeout=300))
    first_parent, first_children = assert_one_parent_with_children(uri, ["0", "1"])
    again = run_cli(args, tmp_path, timeout=300)
    assert_clean(again)
    assert again.stdout.count("skipped, run") == 2
    parent, children = assert_one_parent_with_children(uri, ["0", "1"])
    assert parent.info.run_id == first_parent.info.run_id and "resumed" in parent.data.tags
    assert {r.info.run_id for r in children} == {r.info.run_id for r in first_children}
    # Another sweep name is another sweep.
    other = run_cli([*sweep, "seed=0", "sweep_name=other"], tmp_path, timeout=300)
    assert_clean(other)
    assert sorted(p.data.tags["sweep"] for p in sweep_runs(uri)[0]) == ["other", "resume_me"]


@pytest.mark.slow
def test_parallel_jobs_into_one_fresh_sqlite_file_all_finish(tmp_path):
    # The store and experiment are made once before the jobs, under a file lock: no race in MLflow's migration.
    store = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    result = run_cli(["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=3", *JOB, "seed=0,1,2",
                      f"tracking.uri={store}"], tmp_path, timeout=300)
    assert_clean(result)
    assert_one_parent_with_children(store, ["0", "1", "2"])


@pytest.mark.slow
def test_two_single_jobs_started_at_once_into_a_fresh_sqlite_file_both_finish(tmp_path):
    # No sweep callback here: each job opens the fresh store itself, and the lock in use_store orders them.
    store = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    env = job_env()
    jobs = [subprocess.Popen([sys.executable, "-m", "sift_bench", *JOB, f"seed={seed}", f"tracking.uri={store}",
                              f"hydra.run.dir={tmp_path}/outputs{seed}"], cwd=tmp_path, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for seed in (0, 1)]
    try:
        results = [subprocess.CompletedProcess(job.args, 0, *job.communicate(timeout=300)) for job in jobs]
    finally:
        for job in jobs:
            if job.poll() is None:
                job.kill()
    for job, result in zip(jobs, results):
        assert_clean(subprocess.CompletedProcess(job.args, job.returncode, result.stdout, result.stderr))
    client = MlflowClient(store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert sorted(r.data.tags["seed"] for r in runs) == ["0", "1"] and all(r.info.status == "FINISHED" for r in runs)
    assert len(client.search_experiments(filter_string="name = 'sift_bench'")) == 1


@pytest.mark.slow
def test_under_torchrun_rank_0_alone_makes_the_sweep_parent(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = job_env()
    process = subprocess.Popen([*TORCHRUN, "-m", "sift_bench", "-m", *JOB, "seed=0,1", f"tracking.uri={store}",
                                f"hydra.sweep.dir={tmp_path}/multirun"], cwd=tmp_path, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # torchrun and both ranks
    assert_clean(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr))
    _, children = assert_one_parent_with_children(store, ["0", "1"])
    assert {r.data.tags["world_size"] for r in children} == {"2"}


def test_the_parent_id_travels_with_the_callback_hydra_ships_to_each_job(tmp_path, monkeypatch):
    # A SLURM job started with --export=NONE gets no environment from the sweep, only what Hydra pickles for it.
    monkeypatch.delenv(PARENT_RUN_ENV, raising=False)
    monkeypatch.delenv(SWEEP_STARTED_ENV, raising=False)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = compose_config(["scale=smoke", f"tracking.uri={store}"])
    callback = MlflowSweepParent()
    callback.on_multirun_start(config)
    try:
        shipped = pickle.dumps(callback)
        parent = os.environ[PARENT_RUN_ENV]
    finally:
        callback.on_multirun_end(config)
    env = {key: value for key, value in os.environ.items() if key not in (PARENT_RUN_ENV, SWEEP_STARTED_ENV)}
    job = subprocess.run(
        [sys.executable, "-c", "import os, pickle, sys; callback = pickle.load(sys.stdin.buffer); "
         f"callback.on_job_start(None); print(os.environ['{PARENT_RUN_ENV}'], os.environ['{SWEEP_STARTED_ENV}'])"],
        input=shipped, capture_output=True, env=env, cwd=ROOT, timeout=120)
    assert job.returncode == 0, job.stderr.decode()[-2000:]
    assert job.stdout.decode().split()[0] == parent
    assert PARENT_RUN_ENV not in os.environ  # the sweep's end clears it in the sweep's own process
    assert MlflowClient(store).get_run(parent).info.status == "FINISHED"


@pytest.mark.parametrize("launcher", ["joblib", "submitit_local", "slurm"])
def test_launcher_settings_compose(launcher):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
    target = cfg.hydra.launcher._target_
    expected = {"joblib": "JoblibLauncher", "submitit_local": "LocalLauncher", "slurm": "SlurmLauncher"}[launcher]
    assert target.endswith(expected), target
    if launcher == "slurm":
        # The project's defaults: one GPU per job, a time limit, a bound on jobs at once.
        launcher_cfg = cfg.hydra.launcher
        assert launcher_cfg.partition is None and launcher_cfg.gpus_per_node == 1
        assert launcher_cfg.timeout_min == 240 and launcher_cfg.array_parallelism == 16
