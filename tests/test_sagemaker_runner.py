"""`python -m sift_bench.sagemaker` (#22): the three examples/sagemaker scripts, written the way AWS documents smart
sifting, run unchanged through the runner into a real sqlite MLflow store, and `--compare` through the report."""

import os
import subprocess
import sys

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT

EXAMPLES = ROOT / "examples" / "sagemaker"
DIGITS_TRAIN = 1797 - 300  # examples hold out 300 of scikit-learn's 1,797 digits for validation


def run_runner(args: list[str], cwd, timeout: float = 600) -> subprocess.CompletedProcess:
    """The real command, in its own process, importing this checkout's sift_bench, working in `cwd`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "sift_bench.sagemaker", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def runs_of(store: str, task: str) -> list:
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("sift_bench")
    return client.search_runs([experiment.experiment_id], filter_string=f"tags.task = '{task}'",
                              order_by=["attributes.start_time ASC"])


@pytest.mark.slow
def test_a_plain_pytorch_script_runs_unchanged_and_its_run_records_the_sifting(store, tmp_path):
    result = run_runner(["--tracking-uri", store, "--seeds", "0", str(EXAMPLES / "pytorch_listbatch.py"),
                         "--epochs", "2", "--beta", "1"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = runs_of(store, "pytorch_listbatch")
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    assert run.info.status == "FINISHED"
    assert (tags["sifter"], tags["scale"], tags["seed"], tags["arm"]) == ("relative_probabilistic", "script", "0",
                                                                        "as-written")
    assert tags["sifters_built"] == "1" and tags["script_seeds_itself"] == "false" and tags["git_commit"]
    assert tags["command"].startswith("python -m sift_bench.sagemaker --tracking-uri")
    assert tags["machine.kind"] and tags["model"] == "Sequential" and tags["dataset"] == "TensorDataset"
    assert (params["sifter.beta_value"], params["sifter.loss_history_length"], params["sifter.sift_delay"]) == \
        ("1.0", "500", "10")
    assert params["script.args"] == "--epochs 2 --beta 1"
    assert metrics["samples_seen"] == 2 * DIGITS_TRAIN
    assert 30 < metrics["pct_accepted"] < 80  # beta 1 keeps about half after the delay
    assert metrics["samples_kept"] == pytest.approx(metrics["samples_seen"] * metrics["pct_accepted"] / 100)
    assert metrics["sift_time_s"] > 0 and metrics["train_time_s"] > metrics["sift_time_s"]
    assert metrics["cost_usd"] == pytest.approx(0.23 * metrics["train_time_s"] / 3600)
    assert 0.5 < metrics["val_acc"] <= 1  # the script's own metric, logged into the runner's run
    assert "mlflow run" in result.stdout and "accepted" in result.stdout


@pytest.mark.slow
def test_the_baseline_passes_everything_through_and_the_control_keeps_what_beta_implies(store, tmp_path):
    script = str(EXAMPLES / "pytorch_listbatch.py")
    for arm in ("none", "random"):
        result = run_runner(["--tracking-uri", store, "--sifter", arm, "--seeds", "1", script, "--epochs", "1",
                             "--beta", "3"], tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
    baseline, control = runs_of(store, "pytorch_listbatch")
    assert baseline.data.tags["sifter"] == "none" and baseline.data.metrics["pct_accepted"] == 100
    assert baseline.data.metrics["samples_kept"] == baseline.data.metrics["samples_seen"] == DIGITS_TRAIN
    assert baseline.data.metrics["sift_time_s"] == 0  # nothing scored
    assert control.data.tags["sifter"] == "random" and control.data.params["sifter.keep_fraction"] == "0.25"
    # The 10 delay batches of 32 pass, then a quarter of the rest: (320 + 0.25 * 1177) / 1497 = 41 %.
    assert control.data.metrics["sift_time_s"] == 0 and control.data.metrics["pct_accepted"] == pytest.approx(41, abs=5)


@pytest.mark.slow
@pytest.mark.parametrize("setup", ["simple", "custom"])
def test_a_hugging_face_trainer_script_runs_unchanged_in_both_documented_setups(store, tmp_path, setup):
    result = run_runner(["--tracking-uri", store, "--seeds", "0", str(EXAMPLES / "hf_trainer.py"), "--setup", setup,
                         "--epochs", "1", "--train-size", "128", "--batch-size", "16"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = runs_of(store, "hf_trainer")
    assert run.info.status == "FINISHED" and run.data.tags["sifter"] == "relative_probabilistic"
    assert run.data.tags["model"] == "BertForSequenceClassification"
    metrics = run.data.metrics
    assert metrics["pct_accepted"] < 100 and metrics["samples_seen"] >= 128 - 16
    assert 0 <= metrics["eval_accuracy"] <= 1  # logged by the Trainer's own MLflowCallback into the same run


@pytest.mark.slow
def test_a_lightning_script_runs_unchanged_with_its_metrics_recorder(store, tmp_path):
    result = run_runner(["--tracking-uri", store, "--seeds", "0", str(EXAMPLES / "lightning_datamodule.py"),
                         "--epochs", "2"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = runs_of(store, "lightning_datamodule")
    metrics = run.data.metrics
    assert run.info.status == "FINISHED" and run.data.tags["model"] == "DigitsModule"
    assert metrics["samples_seen"] == 2 * DIGITS_TRAIN and metrics["pct_accepted"] < 100
    assert 0.5 < metrics["val_acc"] <= 1  # logged by the LightningModule
    # TrainingMetricsRecorder: sifting counts and latencies per step.
    history = MlflowClient(store).get_metric_history(run.info.run_id, "sifting_samples_seen")
    assert len(history) > 10 and max(point.value for point in history) == metrics["samples_seen"]
    assert metrics["step_latency_s"] > 0 and metrics["data_latency_s"] > 0
    assert 0 < metrics["sifting_pct_accepted"] < 100


def test_outside_the_runner_smart_sifting_does_not_resolve(tmp_path):
    result = subprocess.run([sys.executable, str(EXAMPLES / "pytorch_listbatch.py"), "--epochs", "1"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and "No module named 'smart_sifting'" in result.stderr


@pytest.mark.slow
def test_bad_usage_is_named(tmp_path):
    result = run_runner(["--metric", "val_acc", str(EXAMPLES / "pytorch_listbatch.py")], tmp_path)
    assert result.returncode == 2 and "--metric and --out go with --compare" in result.stderr
    result = run_runner(["--seeds", "0,x", str(EXAMPLES / "pytorch_listbatch.py")], tmp_path)
    assert result.returncode == 2 and "--seeds must be comma-separated integers such as 0,1,2, got '0,x'" in result.stderr
    result = run_runner(["missing.py"], tmp_path)
    assert result.returncode == 2 and "SCRIPT 'missing.py' is not a file" in result.stderr


@pytest.mark.slow
def test_compare_writes_the_verdict_against_the_baseline_and_the_random_control(store, tmp_path):
    out = tmp_path / "report"
    result = run_runner(["--tracking-uri", store, "--compare", "--seeds", "0,1", "--metric", "val_acc", "--out",
                         str(out), str(EXAMPLES / "pytorch_listbatch.py"), "--epochs", "2", "--beta", "1"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = runs_of(store, "pytorch_listbatch")
    assert sorted((run.data.tags["sifter"], run.data.tags["seed"]) for run in runs) == [
        (sifter, seed) for sifter in ("none", "random", "relative_probabilistic") for seed in ("0", "1")]
    table = pd.read_csv(out / "table.csv")
    assert list(table["sifter"]) == ["none", "relative_probabilistic", "random"]
    assert (table["n_seeds"] == 2).all() and table["test_accuracy"].between(50, 100).all()  # val_acc, in percent
    assert table.loc[table["sifter"] == "random", "keep_fraction"].item() == 0.5
    sifted = table[table["sifter"] == "relative_probabilistic"].iloc[0]
    # Two seeds: the bootstrap interval needs three, so the verdict says so (or the frontier was not measured).
    assert sifted["verdict_vs_frontier"] in ("cannot tell: needs at least 3 seeds", "outside range")
    assert "at equal time:" in result.stdout
    assert "pytorch_listbatch" in (out / "report.md").read_text()
