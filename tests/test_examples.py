"""examples/digits: a user's task outside the package, run through the CLI into a store and through the report."""

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT, run_cli, run_report

DIGITS = ROOT / "examples" / "digits"


@pytest.mark.slow
def test_the_digits_example_runs_through_the_cli_and_the_report(store, tmp_path):
    result = run_cli(["-m", f"--config-dir={DIGITS / 'conf'}", "+experiment=digits", "scale=smoke", "trainer.epochs=2",
                      "sifter=none,random,relative_probabilistic", f"tracking.uri={store}"], tmp_path,
                     pythonpath=DIGITS)
    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("sift_bench").experiment_id],
                              filter_string="tags.task = 'digits'")
    assert sorted(run.data.tags["sifter"] for run in runs) == ["none", "random", "relative_probabilistic"]
    for run in runs:
        assert run.info.status == "FINISHED" and run.data.tags["model"] == "digits-cnn-16"
        # 1,797 images less 300 validation and 360 test: 1,137 trained on per epoch by the baseline.
        assert run.data.metrics["samples_seen"] == 2 * 1137
        assert run.data.metrics["test_accuracy"] > 20  # ten classes: far above chance after two epochs
    out = tmp_path / "report"
    report = run_report(store, out)
    assert report.returncode == 0, report.stderr[-3000:]
    table = pd.read_csv(out / "table.csv")
    assert sorted(table.loc[table["task"] == "digits", "sifter"]) == ["none", "random", "relative_probabilistic"]


def test_a_task_target_that_does_not_import_is_refused_before_training(store, tmp_path):
    result = run_cli([f"--config-dir={DIGITS / 'conf'}", "+experiment=digits", "scale=smoke", f"tracking.uri={store}"],
                     tmp_path)  # no PYTHONPATH: digits_task cannot be imported
    assert result.returncode == 2
    assert "task._target_='digits_task.build' is not allowed" in result.stderr and "Traceback" not in result.stderr
