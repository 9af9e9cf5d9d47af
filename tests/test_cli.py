"""The real entry point, `python -m sift_bench`, end to end into a temporary sqlite store."""

import fcntl
import math
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import CONF_DIR, ROOT, compose_config, job_env, run_cli

FINAL_METRICS = ("val_accuracy", "test_accuracy", "train_time_s", "sift_time_s", "eval_time_s", "cost_usd", "pct_accepted",
                 "samples_seen", "samples_trained", "time_to_target_s")
EPOCH_METRICS = ("train_loss", "val_accuracy", "test_accuracy", "pct_accepted")
TAGS = ("task", "model", "dataset", "sifter", "scale", "seed", "git_commit", "machine.kind")


def runs_in(store: str):
    client = MlflowClient(store)
    experiments = client.search_experiments()
    return client, client.search_runs([e.experiment_id for e in experiments]) if experiments else []


@pytest.mark.slow
@pytest.mark.parametrize("experiment", ["bert", "resnet"])
def test_experiment_runs_end_to_end_and_logs_everything(experiment, store, tmp_path):
    result = run_cli([f"+experiment={experiment}", "scale=smoke", f"tracking.uri={store}"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "accepted" in result.stdout and "mlflow run" in result.stdout
    client, runs = runs_in(store)
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.info.run_id in result.stdout
    metrics, params, tags = run.data.metrics, run.data.params, run.data.tags
    assert set(FINAL_METRICS) <= set(metrics)
    assert set(TAGS) <= set(tags) and tags["sifter"] == "relative_probabilistic" and tags["scale"] == "smoke"
    assert params["sifter.beta_value"] == "3" and params["sifter.sift_delay"] == "10" and params["seed"] == "0"
    assert 0 < metrics["pct_accepted"] < 100
    assert metrics["samples_trained"] < metrics["samples_seen"]
    assert metrics["pct_accepted"] == pytest.approx(100 * metrics["samples_trained"] / metrics["samples_seen"])
    assert 0 <= metrics["val_accuracy"] <= 100 and 0 <= metrics["test_accuracy"] <= 100 and metrics["train_time_s"] > 0 and metrics["sift_time_s"] > 0
    assert metrics["cost_usd"] == pytest.approx(0.23 * metrics["train_time_s"] / 3600)
    for name in EPOCH_METRICS:
        assert len(client.get_metric_history(run.info.run_id, name)) >= 2, name  # once per epoch, then the final
    # The artifact location is relative to the store's folder, so a committed store moves with its artifacts.
    assert run.info.artifact_uri == f"mlartifacts/{run.info.run_id}/artifacts"
    assert "beta_value: 3" in (tmp_path / run.info.artifact_uri / "config.yaml").read_text()


@pytest.mark.slow
def test_baseline_trains_on_every_sample(store, tmp_path):
    result = run_cli(["task=sst2_bert", "sifter=none", "scale=smoke", f"tracking.uri={store}", "seed=3"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    _, runs = runs_in(store)
    metrics = runs[0].data.metrics
    assert metrics["pct_accepted"] == 100.0 and metrics["samples_trained"] == metrics["samples_seen"]
    assert metrics["sift_time_s"] == 0.0 and runs[0].data.tags["seed"] == "3"


@pytest.mark.slow
def test_random_control_never_scores(store, tmp_path):
    result = run_cli(["task=cifar10_resnet", "sifter=random", "sifter.keep_fraction=0.5", "sifter.sift_delay=0",
                      "scale=smoke", f"tracking.uri={store}"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = runs_in(store)[1][0].data.metrics
    assert metrics["sift_time_s"] == 0.0 and 35 < metrics["pct_accepted"] < 65


@pytest.mark.parametrize("overrides,message", [
    (["sifter=relative_probabilistic", "sifter.beta_value=-1"], "beta_value"),
    (["sifter=random", "sifter.keep_fraction=1.5"], "keep_fraction"),
    (["sifter=relative_probabilistic", "sifter.loss_history_length=0"], "loss_history_length"),
    (["scale=huge"], "scale"),
    (["task=mnist_mlp"], "task"),
    (["paths.data_dir=/does/not/exist", "scale=cpu"], "/does/not/exist"),
    (["trainer.epochs=0"], "trainer.epochs"),
    (["trainer.eval_every_epochs=0"], "trainer.eval_every_epochs"),
    (["trainer.eval_every_epochs=2", "trainer.evals_per_epoch=4"], "trainer.eval_every_epochs"),
    (["tracking.start_before=tomorrow"], "tracking.start_before='tomorrow'"),
    (["+experiment=bert_hf", "trainer.schedule.name=onecycle"], "trainer.schedule.name='onecycle'"),
    (["+sifter.beta_vlaue=1", "sifter=relative_probabilistic"], "Key 'beta_vlaue' not in 'RelativeProbabilisticSifter'"),
    (["task._target_=sift_bench.no_such.build"], "task._target_='sift_bench.no_such.build' is not allowed"),
])
@pytest.mark.slow
def test_bad_values_fail_fast_with_a_clear_message(overrides, message, store, tmp_path):
    result = run_cli([*overrides, f"tracking.uri={store}"], tmp_path, timeout=60)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr  # a message, not a stack trace
    assert runs_in(store)[1] == []  # no run was started: it failed before training


@pytest.mark.slow
@pytest.mark.parametrize("typo", ["trainer.epoch=1", "+trainer.epoch=1"])
def test_a_misspelled_key_is_answered_with_the_key_meant(typo, store, tmp_path):
    # Hydra would advise `+trainer.epoch=1`, which the schema refuses too: the answer is the key the user meant.
    result = run_cli([typo, f"tracking.uri={store}"], tmp_path, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "Key 'epoch' not in 'TrainerConfig'; did you mean trainer.epochs?" in result.stderr
    assert "To append" not in result.stderr
    assert runs_in(store)[1] == []


@pytest.mark.slow
def test_the_experiments_baseline_and_random_control_run_as_a_sweep(store, tmp_path):
    # `+experiment=bert sifter=none` is the README run's baseline: the experiment sets no key of its own sifter.
    result = run_cli(["-m", "+experiment=bert", "sifter=none,random", "scale=smoke", "trainer.epochs=1",
                      f"tracking.uri={store}"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    _, runs = runs_in(store)
    parents = [r for r in runs if r.data.tags.get("run_kind") == "sweep"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(r.data.tags["sifter"] for r in children) == ["none", "random"]
    assert all(r.info.status == "FINISHED" and r.data.tags["task"] == "sst2_bert" for r in children)


@pytest.mark.parametrize("sweep,message", [
    ("trainer.epochs=0,1", "trainer.epochs=0 is not allowed"),  # refused by the job's validation
    ("trainer.epoch=1,2", "did you mean trainer.epochs?"),  # refused by Hydra, composing the sweep's jobs
])
@pytest.mark.slow
def test_a_sweep_refused_before_any_job_ran_leaves_no_parent_run(sweep, message, store, tmp_path):
    result = run_cli(["-m", "task=sst2_bert", "scale=smoke", sweep, f"tracking.uri={store}"], tmp_path, timeout=120)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert runs_in(store)[1] == []  # not even a FAILED parent without children


def train_result(other_cpu_fraction: float):
    from sift_bench.recorder import EvalPoint, TrainResult

    point = EvalPoint(epoch=1.0, samples_seen=20000, samples_trained=5000, train_time_s=100.0, train_loss=0.4,
                      val_accuracy=86.0, test_accuracy=83.0, pct_accepted=25.0, lr_multiplier=0.0)
    return TrainResult(val_accuracy=86.0, test_accuracy=83.0, train_time_s=100.0, sift_time_s=40.0, eval_time_s=15.0,
                       samples_seen=20000, samples_trained=5000, pct_accepted=25.0, time_to_target_s=math.nan,
                       work_trained=5000, other_cpu_s=100.0 * other_cpu_fraction,
                       other_cpu_fraction=other_cpu_fraction, history=[point])


def test_a_run_timed_on_a_busy_machine_says_so_in_its_summary_and_its_tags(store):
    import mlflow

    from sift_bench import tracking
    from sift_bench.store import use_store
    from sift_bench.__main__ import summary

    cfg = compose_config(["+experiment=bert", f"tracking.uri={store}"])
    busy = summary(cfg, train_result(0.31), 0.0064, "run-id")
    assert ("machine      busy: other processes used 0.31 of a core while it trained (over 0.05): its train time is "
            "suspect") in busy
    assert "machine      busy" not in summary(cfg, train_result(0.01), 0.0064, "run-id")
    experiment_id = use_store(store, "sift_bench")
    for fraction, contended in ((0.31, "true"), (0.01, "false")):
        with mlflow.start_run(experiment_id=experiment_id) as run:
            tracking.log_final(train_result(fraction), 0.0064)
        assert MlflowClient(store).get_run(run.info.run_id).data.tags["timing.contended"] == contended


@pytest.mark.slow
def test_a_missing_data_set_is_reported_with_where_it_looked(store, tmp_path):
    empty = tmp_path / "empty_data"
    empty.mkdir()
    result = run_cli(["task=sst2_bert", f"paths.data_dir={empty}", f"tracking.uri={store}"], tmp_path, timeout=60)
    assert result.returncode == 2
    assert str(empty / "sst2" / "train.tsv") in result.stderr and "SIFT_BENCH_DATA_DIR" in result.stderr
    assert runs_in(store)[1] == []


@pytest.mark.slow
def test_interrupted_run_is_marked_killed(store, tmp_path):
    env_args = ["+experiment=bert", "scale=smoke", "trainer.epochs=500", f"tracking.uri={store}",
                f"hydra.run.dir={tmp_path}/outputs"]
    runs_in(store)  # create the store's tables here, so two processes never migrate it at once
    # A shell's background job inherits SIGINT ignored, and Python then never raises KeyboardInterrupt:
    # restore the default so Ctrl-C is what the job sees, however pytest itself was started.
    process = subprocess.Popen([sys.executable, "-m", "sift_bench", *env_args], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            runs = runs_in(store)[1]
            if runs and runs[0].info.status == "RUNNING" and runs[0].data.metrics:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the run never started")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    run = runs_in(store)[1][0]
    assert run.info.status == "KILLED"
    assert f"sift_bench: interrupted, run {run.info.run_id} marked KILLED" in stderr and "Traceback" not in stderr


LOG_PREFIX = re.compile(r"\[\d{4}-\d\d-\d\d [\d:,]+\]\[sift_bench\.train\]\[INFO\]")


def run_in_a_terminal(args: list[str], cwd: Path, timeout: float = 300) -> tuple[int, str]:
    """Run `python -m sift_bench ARGS` with a pseudo-terminal (120 columns) as stdin, stdout and stderr, as a user at
    a shell does; returns the exit status and everything the terminal received."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen([sys.executable, "-m", "sift_bench", *args, f"hydra.run.dir={cwd}/outputs"], cwd=cwd,
                               env=job_env(), stdin=secondary, stdout=secondary, stderr=secondary)
    os.close(secondary)
    received = bytearray()
    try:
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            received += chunk
        status = process.wait(timeout=timeout)
    finally:
        os.close(primary)
        if process.poll() is None:
            process.kill()
    return status, received.decode(errors="replace")


@pytest.mark.slow
def test_in_a_terminal_every_log_line_starts_a_line_of_its_own_under_the_progress_bar(store, tmp_path):
    # A log line written straight to the terminal lands after the bar's text on the bar's line; through tqdm.write
    # (logging_redirect_tqdm) the bar is cleared back to the line's start first, and redrawn after.
    status, received = run_in_a_terminal(["+experiment=bert", "scale=smoke", "trainer.progress=true",
                                          f"tracking.uri={store}"], tmp_path)
    assert status == 0, received[-3000:]
    assert "sample/s" in received or "it/s" in received, "no progress bar was drawn: " + received[-3000:]
    logged = [line for line in received.split("\n") if LOG_PREFIX.search(line)]
    assert len(logged) >= 2, received[-3000:]
    for line in logged:
        before = line[:LOG_PREFIX.search(line).start()]
        assert before.split("\r")[-1] == "", f"a log line shares its line with the bar: {line!r}"


@pytest.mark.slow
def test_multirun_makes_a_parent_with_children_and_resume_skips_finished(store, tmp_path):
    args = ["-m", "+experiment=bert", "scale=smoke", "trainer.epochs=1", "seed=0,1", f"tracking.uri={store}"]
    result = run_cli(args, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    _, runs = runs_in(store)
    parents = [r for r in runs if r.data.tags.get("run_kind") == "sweep"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(r.data.tags["seed"] for r in children) == ["0", "1"]
    assert all(r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for r in children)
    assert all(r.info.status == "FINISHED" for r in children)
    again = run_cli([*args, "tracking.skip_finished=true", "seed=0,1,2"], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("skipped") == 2
    seeds = sorted(r.data.tags["seed"] for r in runs_in(store)[1] if "mlflow.parentRunId" in r.data.tags)
    assert seeds == ["0", "1", "2"]  # only the new seed ran
    # The resumed sweep goes on under its parent instead of adding another.
    parents = [r for r in runs_in(store)[1] if r.data.tags.get("run_kind") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED" and "resumed" in parents[0].data.tags
    assert {r.data.tags["mlflow.parentRunId"] for r in runs_in(store)[1] if "mlflow.parentRunId" in r.data.tags} == {
        parents[0].info.run_id}


@pytest.mark.slow
@pytest.mark.parametrize("table", sorted(p.stem for p in (CONF_DIR / "experiment").glob("*_table.yaml")))
def test_every_table_sweep_runs_at_smoke_scale(table, store, tmp_path):
    result = run_cli([f"+experiment={table}", "scale=smoke", "hydra.sweeper.params.seed=0", f"tracking.uri={store}"],
                     tmp_path, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    _, runs = runs_in(store)
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    rows = len((CONF_DIR / "experiment" / f"{table}.yaml").read_text().split("+table_row:")[1].split("\n")[0].split(","))
    assert len(children) == rows and all(r.info.status == "FINISHED" for r in children)
    assert {r.data.tags["sifter"] for r in children} == {"none", "relative_probabilistic", "random", "stale_loss",
                                                          "stale_sb", "infobatch", "proxy"}
    for run in children:
        metrics = run.data.metrics
        assert 0 < metrics["pct_accepted"] <= 100
        scoring = run.data.tags["sifter"] in ("relative_probabilistic", "stale_sb", "proxy")
        # Only smart sifting, Stale-SB and the proxy scorer score, and they do unless the delay outlasts the run (delay_long here).
        assert (metrics["sift_time_s"] > 0) == (scoring and metrics["pct_accepted"] < 100)


@pytest.mark.slow
def test_an_unreachable_hub_model_is_reported_with_the_offline_alternative(store, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # this machine has no hub; fail at once rather than time out
    result = run_cli(["task=sst2_bert", "scale=smoke", "task.model.source=hub", "task.model.name=no-such-org/no-such-bert",
                      f"tracking.uri={store}"], tmp_path, timeout=120)
    assert result.returncode == 2
    assert "no-such-org/no-such-bert" in result.stderr and "task.model.source=package" in result.stderr
    assert "Traceback" not in result.stderr
    assert runs_in(store)[1] == []


@pytest.mark.slow
def test_a_table_store_refuses_a_second_machine_kind_per_task(store, tmp_path):
    client = MlflowClient(store)
    experiment_id = client.create_experiment("sift_bench", artifact_location=(tmp_path / "mlartifacts").as_uri())
    for task in ("sst2_bert", "cifar10_resnet"):
        run = client.create_run(experiment_id, tags={"task": task, "scale": "smoke", "machine.kind": "Other CPU, 2 cores"})
        client.set_terminated(run.info.run_id, "FINISHED")
    args = ["task=sst2_bert", "sifter=none", "scale=smoke", "trainer.epochs=1", f"tracking.uri={store}"]
    refused = run_cli([*args, "tracking.require_same_machine=true"], tmp_path, timeout=120)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "tracking.require_same_machine=true" in refused.stderr and "1 on 'Other CPU, 2 cores'" in refused.stderr
    assert len(runs_in(store)[1]) == 2  # refused before any run started
    # Off by default and in the table sweeps, whose savings pair each run with its own kind's baseline.
    assert run_cli(args, tmp_path, timeout=300).returncode == 0
    assert len(runs_in(store)[1]) == 3
    for table in ("bert_table", "resnet_table"):
        assert compose_config([f"+experiment={table}"]).tracking.require_same_machine is False


@pytest.mark.slow
def test_resume_times_the_baseline_again_on_a_machine_kind_that_has_none(store, tmp_path):
    args = ["task=sst2_bert", "sifter=none", "scale=smoke", "trainer.epochs=1", "tracking.skip_finished=true",
            f"tracking.uri={store}"]
    assert run_cli(args, tmp_path).returncode == 0
    client, runs = runs_in(store)
    this_kind = runs[0].data.tags["machine.kind"]
    client.set_tag(runs[0].info.run_id, "machine.kind", "Other CPU, 2 cores")  # as if timed in another sitting
    skipped = run_cli(args, tmp_path, timeout=120)  # baseline_per_machine is off by default: plain resume
    assert skipped.returncode == 0 and "skipped, run" in skipped.stdout and len(runs_in(store)[1]) == 1
    again = run_cli([*args, "tracking.baseline_per_machine=true"], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "has no sst2_bert baseline at scale=smoke yet (tracking.baseline_per_machine=true): running it" in again.stdout
    runs = runs_in(store)[1]
    assert sorted(r.data.tags["machine.kind"] for r in runs) == sorted(["Other CPU, 2 cores", this_kind])
    assert len({r.data.tags["config_hash"] for r in runs}) == 1 and all(r.info.status == "FINISHED" for r in runs)
    # Now this kind has its baseline: the next resume skips it, and sifted jobs never rerun for a kind.
    third = run_cli([*args, "tracking.baseline_per_machine=true"], tmp_path, timeout=120)
    assert "skipped, run" in third.stdout and len(runs_in(store)[1]) == 2
    for table in ("bert_table", "resnet_table"):
        config = compose_config([f"+experiment={table}"])
        assert config.tracking.baseline_per_machine is True and config.tracking.skip_finished is True


@pytest.mark.slow
def test_a_job_after_start_before_is_skipped_before_anything_loads(store, tmp_path):
    result = run_cli(["-m", "task=sst2_bert", "scale=smoke", "seed=0,1", "tracking.start_before=2000-01-01T00:00",
                      f"tracking.uri={store}"], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("skipped, tracking.start_before=2000-01-01T00:00 has passed") == 2
    assert [r for r in runs_in(store)[1] if r.data.tags.get("run_kind") != "sweep"] == []


@pytest.mark.slow
def test_the_table_script_goes_on_to_the_next_sweep_when_one_is_refused(store, tmp_path):
    # The store's CIFAR runs came from another machine kind: the ResNet sweep is refused, the BERT sweep runs.
    client = MlflowClient(store)
    # An artifact location of its own: MLflow's default is ./mlruns of the test's process, the checkout.
    experiment_id = client.create_experiment("sift_bench", artifact_location=(tmp_path / "mlartifacts").as_uri())
    run = client.create_run(experiment_id,
                            tags={"task": "cifar10_resnet", "scale": "smoke", "machine.kind": "Other CPU, 2 cores"})
    client.set_terminated(run.info.run_id, "FINISHED")
    out = tmp_path / "results"
    env = job_env(SIFT_BENCH_STORE=store, SIFT_BENCH_OUT=str(out),
                  PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")  # the script calls `python`
    result = subprocess.run(["bash", str(ROOT / "experiments" / "savings_table.sh"), "smoke", "hydra.sweeper.params.seed=0",
                             "tracking.require_same_machine=true", f"hydra.sweep.dir={tmp_path}/multirun"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode != 0  # a refused sweep is not a clean table
    assert "sweep resnet_table stopped" in result.stderr and "require_same_machine" in result.stderr
    children = [r for r in runs_in(store)[1] if "mlflow.parentRunId" in r.data.tags]
    assert children and {r.data.tags["task"] for r in children} == {"sst2_bert"}
    assert all(r.info.status == "FINISHED" for r in children)
    assert (out / "report.md").is_file()


@pytest.mark.slow
def test_a_job_refuses_a_machine_kind_that_lacks_the_required_text(store, tmp_path):
    refused = run_cli(["task=sst2_bert", "scale=smoke", "tracking.require_machine=no_such_cpu_flag", f"tracking.uri={store}"],
                      tmp_path, timeout=120)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "tracking.require_machine='no_such_cpu_flag'" in refused.stderr and "cores" in refused.stderr
    assert runs_in(store)[1] == []
    # The table sweeps take any machine: their savings pair runs within a kind.
    for table in ("resnet_table", "bert_table"):
        assert compose_config([f"+experiment={table}", "scale=cpu"]).tracking.require_machine is None


@pytest.mark.slow
def test_a_table_sitting_times_the_baseline_first_and_last_and_the_next_sitting_again(store, tmp_path):
    args = ["-m", "task=sst2_bert", "scale=smoke", "trainer.epochs=1", "seed=0",
            "+table_row=baseline,random_0.5,baseline_last", "tracking.skip_finished=true",
            "tracking.baseline_per_sitting=true", f"tracking.uri={store}"]
    first = run_cli(args, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    baselines = [r for r in runs_in(store)[1] if r.data.tags.get("sifter") == "none"]
    assert sorted(r.data.tags["timing_slot"] for r in baselines) == ["first", "last"]
    assert len({r.data.tags["config_hash"] for r in baselines}) == 1  # one training, timed twice
    # A new sitting times the baseline again at its first baseline job, and skips the rest.
    second = run_cli(args, tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "this sitting's sweep has timed no sst2_bert baseline" in second.stdout
    assert second.stdout.count("skipped, run") == 2
    assert len([r for r in runs_in(store)[1] if r.data.tags.get("sifter") == "none"]) == 3
    # A single job is no sitting of a sweep: it resumes as before.
    single = run_cli([arg for arg in args if arg != "-m" and not arg.startswith("+table_row")] + ["sifter=none"], tmp_path)
    assert single.returncode == 0 and "skipped, run" in single.stdout


@pytest.mark.slow
def test_a_table_resume_trains_again_a_run_timed_at_another_machine_speed_than_its_baseline(store, tmp_path):
    common = ["task=sst2_bert", "scale=smoke", "trainer.epochs=1", "tracking.skip_finished=true",
              f"tracking.uri={store}"]
    sifted = [*common, "sifter=random"]
    for args in ([*common, "sifter=none"], sifted):
        assert run_cli(args, tmp_path).returncode == 0
    client, runs = runs_in(store)
    by_sifter = {run.data.tags["sifter"]: run.info.run_id for run in runs}
    # The smoke scale evaluates in far less than PACE_PROBE_MIN_S: give the pair a real scale's evaluation times,
    # the random run's 1.5 times its baseline's (a host that slowed between the two).
    client.log_metric(by_sifter["none"], "eval_time_s", 10.0, step=100)
    client.log_metric(by_sifter["random"], "eval_time_s", 15.0, step=100)
    # Both timed on a quiet machine: a smoke run lasts a fraction of a second, in which one blip of another process
    # reads as contention, and that rule (tested on its own below) would retrain it first.
    for run_id in by_sifter.values():
        client.log_metric(run_id, "other_cpu_fraction", 0.0, step=100)
    plain = run_cli(sifted, tmp_path, timeout=120)
    assert f"skipped, run {by_sifter['random']}" in plain.stdout  # off by default
    again = run_cli([*sifted, "tracking.rerun_contended=true"], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (f"its evaluations took 1.50 times as long as those of its time reference, baseline run "
            f"{by_sifter['none']}") in again.stdout and len(runs_in(store)[1]) == 3
    # The new run evaluated at the smoke scale's speed, too briefly to judge: it is done.
    third = run_cli([*sifted, "tracking.rerun_contended=true"], tmp_path, timeout=120)
    assert "skipped, run" in third.stdout and len(runs_in(store)[1]) == 3


def test_help_says_what_sift_bench_does_with_the_commands_and_groups(tmp_path):
    result = run_cli(["--help"], tmp_path, timeout=60)
    assert result.returncode == 0
    assert result.stdout.startswith("sift_bench: does smart sifting")
    assert "python -m sift_bench +experiment=bert" in result.stdout
    # The groups a user picks, each with its options; none of those the configs pick themselves.
    assert "+experiment: bert, bert_hf, bert_table" in result.stdout
    assert "sifter: infobatch, none, proxy, random, relative_probabilistic, stale_loss, stale_sb" in result.stdout
    assert "task: cifar10_resnet, sst2_bert" in result.stdout and "scale: cpu, gpu, smoke" in result.stdout
    assert "joblib" in result.stdout and "slurm" in result.stdout
    for internal in ("schema:", "table_row:", "task_scale:"):
        assert internal not in result.stdout
    assert "beta_value" in result.stdout  # the config's keys follow


@pytest.mark.slow
def test_a_table_resume_trains_again_a_run_timed_on_a_busy_machine(store, tmp_path):
    args = ["task=sst2_bert", "sifter=none", "scale=smoke", "trainer.epochs=1", "tracking.skip_finished=true",
            f"tracking.uri={store}"]
    assert run_cli(args, tmp_path).returncode == 0
    client, runs = runs_in(store)
    client.log_metric(runs[0].info.run_id, "other_cpu_fraction", 0.3, step=100)  # another process shared the machine
    plain = run_cli(args, tmp_path, timeout=120)
    assert "skipped, run" in plain.stdout and len(runs_in(store)[1]) == 1  # off by default
    again = run_cli([*args, "tracking.rerun_contended=true"], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "timed while other processes used the machine" in again.stdout and len(runs_in(store)[1]) == 2
    newest = max(runs_in(store)[1], key=lambda run: run.info.start_time)
    client.log_metric(newest.info.run_id, "other_cpu_fraction", 0.01, step=100)  # pin it clean for this test
    third = run_cli([*args, "tracking.rerun_contended=true"], tmp_path, timeout=120)
    assert f"skipped, run {newest.info.run_id}" in third.stdout and len(runs_in(store)[1]) == 2
    for table in ("bert_table", "resnet_table"):
        assert compose_config([f"+experiment={table}"]).tracking.rerun_contended is True


@pytest.mark.slow
@pytest.mark.parametrize("sweep", [[], ["-m"]], ids=["job", "sweep"])
def test_a_store_that_is_not_a_database_is_refused_and_left_untouched(sweep, tmp_path):
    # A sweep's parent run opens the store before its first job (Hydra turns that refusal into a warning); the job
    # is refused with the one line.
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a db")
    before = bad.stat().st_mtime_ns
    result = run_cli([*sweep, "task=sst2_bert", "scale=smoke", f"tracking.uri=sqlite:///{bad}"], tmp_path, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    said = [line for line in result.stderr.splitlines() if line.startswith("sift_bench: error:")]
    assert said == [f"sift_bench: error: tracking.uri=sqlite:///{bad}: {bad} is not an SQLite database; tracking.uri "
                    "must name an MLflow sqlite store or a new file"]
    assert bad.read_bytes() == b"not a db" and bad.stat().st_mtime_ns == before
    assert not (tmp_path / "bad.db.lock").exists() and not (tmp_path / "mlartifacts").exists()


@pytest.mark.slow
def test_a_run_logs_its_splits_as_dataset_inputs_in_an_experiment_of_model_training(store, tmp_path):
    result = run_cli(["task=sst2_bert", "sifter=none", "scale=smoke", "trainer.epochs=1", f"tracking.uri={store}"],
                     tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    client, runs = runs_in(store)
    by_context = {next(tag.value for tag in found.tags if tag.key == "mlflow.data.context"): found.dataset
                  for found in runs[0].inputs.dataset_inputs}
    assert set(by_context) == {"training", "validation", "test"}
    assert by_context["training"].name == "sst2 training" and by_context["test"].source_type == "code"  # generated
    assert len({dataset.digest for dataset in by_context.values()}) == 3
    # MLflow 3's UI opens it on its runs, not on the GenAI overview.
    assert client.get_experiment(runs[0].info.experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"
