"""experiments/copy_store.py: a sitting's hourly snapshot of the store its sweep is writing."""

import subprocess
import sys

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
