"""A run whose process was killed (SIGKILL: no `finally` runs) is found RUNNING by the next sweep on its store and
marked lost; a run whose process is alive is left alone. Real processes, a real sqlite store."""

import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_cli
from sift_bench import liveness

LONG_JOB = ["+experiment=bert", "scale=smoke", "trainer.epochs=500"]


def start_job(store: str, tmp_path, name: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sift_bench", *LONG_JOB, f"tracking.uri={store}", f"tracking.run_name={name}",
         f"hydra.run.dir={tmp_path}/outputs_{name}"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_training(client: MlflowClient, name: str):
    deadline = time.time() + 180
    while time.time() < deadline:
        runs = [run for experiment in client.search_experiments()
                for run in client.search_runs([experiment.experiment_id], f"tags.mlflow.runName = '{name}'")]
        if runs and runs[0].info.status == "RUNNING" and runs[0].data.metrics:
            return runs[0]
        time.sleep(0.5)
    pytest.fail(f"run {name} never started training")


@pytest.mark.slow
def test_killed_run_is_marked_lost_by_the_next_sweep_and_a_live_one_is_not(store, tmp_path):
    client = MlflowClient(store)
    client.search_experiments()  # create the store's tables here, so two processes never migrate it at once
    killed, alive = start_job(store, tmp_path, "killed"), start_job(store, tmp_path, "alive")
    try:
        killed_run, alive_run = wait_training(client, "killed"), wait_training(client, "alive")
        assert liveness.LOCK_TAG in killed_run.data.tags
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert client.get_run(killed_run.info.run_id).info.status == "RUNNING"  # what SIGKILL leaves behind

        sweep = run_cli(["-m", "task=sst2_bert", "sifter=none", "scale=smoke", "trainer.epochs=1", "seed=0",
                         f"tracking.uri={store}"], tmp_path)
        assert sweep.returncode == 0, sweep.stderr[-3000:]

        lost = client.get_run(killed_run.info.run_id)
        assert lost.info.status == liveness.LOST_STATUS
        assert "no live process" in lost.data.tags[liveness.LOST_TAG]
        # Its end is the last time it was seen alive, not the moment it was found.
        assert lost.info.start_time <= lost.info.end_time < int(time.time() * 1000) - 1000
        assert f"run {killed_run.info.run_id} (killed) was left RUNNING" in sweep.stdout
        assert client.get_run(alive_run.info.run_id).info.status == "RUNNING"
        assert alive_run.info.run_id not in sweep.stdout
        # The sweep itself ended its parent and its job: nothing of it is left RUNNING, or taken for lost.
        experiment = lost.info.experiment_id
        running = client.search_runs([experiment], "attributes.status = 'RUNNING'")
        assert [run.info.run_id for run in running] == [alive_run.info.run_id]
        assert liveness.mark_lost_runs(store, experiment) == []
    finally:
        for process in (killed, alive):
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
    assert client.get_run(alive_run.info.run_id).info.status == "KILLED"  # ended by its own Ctrl-C handler
    assert liveness.LOST_TAG not in client.get_run(alive_run.info.run_id).data.tags
    # Every lock file went: with its process, or (the killed job's) with the run marked lost.
    assert not list((tmp_path / liveness.LIVE_FOLDER).glob("*.lock"))


def test_run_of_older_code_naming_no_lock_is_lost_and_a_server_store_marks_nothing(store):
    client = MlflowClient(store)
    experiment = client.create_experiment("legacy")
    legacy = client.create_run(experiment).info.run_id  # RUNNING, as a killed job of older code left it
    assert liveness.mark_lost_runs(store, experiment) == [legacy]
    assert client.get_run(legacy).info.status == liveness.LOST_STATUS
    assert liveness.mark_lost_runs("http://127.0.0.1:1", experiment) == []


def test_a_held_lock_reads_held_until_its_holder_lets_go_and_a_missing_one_is_not_made(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with liveness.hold(uri) as tags:
        path = tmp_path / liveness.LIVE_FOLDER / tags[liveness.LOCK_TAG]
        assert path.is_file()
        assert liveness.is_held(path)  # another lock on it, even in this process, is refused
        assert liveness.is_held(path)  # and asking twice does not take it
    assert not path.exists()  # removed once released
    assert not liveness.is_held(path)
    assert not path.exists()  # asking about a missing lock does not make one
    left = tmp_path / liveness.LIVE_FOLDER / "left_behind.lock"
    left.touch()  # a lock file whose process is gone: nobody holds it
    assert not liveness.is_held(left)
    with liveness.hold("http://127.0.0.1:1") as tags:
        assert tags == {}  # a server store: nothing to hold here
