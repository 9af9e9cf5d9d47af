"""experiments/copy_store.py: a sitting's snapshot of the store its sweep is writing, once or after every run."""

import os
import sqlite3
import subprocess
import sys
import time

from mlflow.tracking import MlflowClient

from conftest import ROOT


def test_copy_is_a_readable_store_with_its_artifacts_and_counts_runs_by_status(tmp_path):
    source, target = tmp_path / "sweep" / "results" / "cpu_long", tmp_path / "results" / "cpu_long"
    source.mkdir(parents=True)
    client = MlflowClient(f"sqlite:///{source / 'mlflow.db'}")
    experiment = client.create_experiment("sift_bench", artifact_location="mlartifacts")
    finished, in_flight = client.create_run(experiment).info.run_id, client.create_run(experiment).info.run_id
    client.log_metric(finished, "test_accuracy", 87.5)
    client.set_terminated(finished, "FINISHED")
    (source / "mlartifacts" / finished / "artifacts").mkdir(parents=True)
    (source / "mlartifacts" / finished / "artifacts" / "config.yaml").write_text("seed: 0\n")
    (source / ".live").mkdir()
    (source / ".live" / "token.lock").write_text("")

    copied = subprocess.run([sys.executable, str(ROOT / "experiments" / "copy_store.py"), str(source), str(target)],
                            capture_output=True, text=True, timeout=60)
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout.strip().endswith("1 FINISHED, 1 RUNNING")
    copy = MlflowClient(f"sqlite:///{target / 'mlflow.db'}")
    assert copy.get_run(finished).data.metrics["test_accuracy"] == 87.5
    assert copy.get_run(in_flight).info.status == "RUNNING"
    assert (target / "mlartifacts" / finished / "artifacts" / "config.yaml").read_text() == "seed: 0\n"
    assert not (target / ".live").exists()  # liveness locks belong to the machine that holds them

    again = subprocess.run([sys.executable, str(ROOT / "experiments" / "copy_store.py"), str(source), str(source)],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "are the same folder" in again.stderr


def finished_run(client: MlflowClient, experiment: str) -> str:
    run_id = client.create_run(experiment).info.run_id
    client.set_terminated(run_id, "FINISHED")
    return run_id


def test_following_a_sweep_commits_the_store_alone_after_each_run_that_ends_and_once_it_stops(tmp_path):
    git_env = {**os.environ, "GIT_AUTHOR_NAME": "sitting", "GIT_AUTHOR_EMAIL": "s@example.org",
               "GIT_COMMITTER_NAME": "sitting", "GIT_COMMITTER_EMAIL": "s@example.org"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=checkout, env=git_env, capture_output=True, text=True,
                              check=True).stdout

    source, checkout = tmp_path / "sweep" / "results" / "cpu_long", tmp_path / "checkout"
    source.mkdir(parents=True)
    checkout.mkdir()
    git("init", "-q")
    (checkout / "README.md").write_text("first\n")
    git("add", "README.md")
    git("commit", "-q", "-m", "start")
    (checkout / "README.md").write_text("an edit in progress\n")  # the engineer's, not the follower's to commit
    client = MlflowClient(f"sqlite:///{source / 'mlflow.db'}")
    experiment = client.create_experiment("sift_bench", artifact_location="mlartifacts")
    finished_run(client, experiment)
    in_flight = client.create_run(experiment).info.run_id

    sweep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    follower = subprocess.Popen([sys.executable, str(ROOT / "experiments" / "copy_store.py"), str(source),
                                 str(checkout / "results" / "cpu_long"), "--follow", str(sweep.pid),
                                 "--commit", "store snapshot", "--every", "0.2"],
                                env=git_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def commits() -> list[str]:
            return git("log", "--format=%s").splitlines()

        deadline = time.monotonic() + 60
        while len(commits()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert commits()[0] == "store snapshot (1 FINISHED, 1 RUNNING)"
        time.sleep(1)  # several looks at an unchanged store: no new commit
        assert len(commits()) == 2
        client.set_terminated(in_flight, "FINISHED")  # the job in flight ends, then the sweep
        deadline = time.monotonic() + 60
        while len(commits()) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        sweep.kill()
        sweep.wait()
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert git("log", "--format=%s").splitlines() == [
        "store snapshot (2 FINISHED)", "store snapshot (1 FINISHED, 1 RUNNING)", "start"]
    committed_store = tmp_path / "committed.db"
    committed_store.write_bytes(subprocess.run(["git", "show", "HEAD:results/cpu_long/mlflow.db"], cwd=checkout,
                                               capture_output=True, check=True).stdout)
    with sqlite3.connect(committed_store) as reader:
        assert reader.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall() == [("FINISHED", 2)]
    assert git("status", "--porcelain").strip() == "M README.md"
    assert "(committed)" in out


def test_commit_without_follow_is_refused():
    refused = subprocess.run([sys.executable, str(ROOT / "experiments" / "copy_store.py"), "a", "b",
                              "--commit", "msg"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--commit goes with --follow" in refused.stderr
