"""sift_bench.store, against a real sqlite store: opening it portably, and the questions a job asks it before it runs
(already FINISHED? timed cleanly? on which machine kinds?)."""

import sqlite3

import pytest
from mlflow.tracking import MlflowClient

from sift_bench import store
from sift_bench.report.sources import read_store

AMX, ZEN5 = "Xeon, 2 cores, family 6 model 167 amx_bf16", "EPYC, 2 cores, family 26 model 2 avx512f"


@pytest.fixture
def runs(tmp_path) -> store.Store:
    """A fresh store opened as a job opens it."""
    return store.Store.open(f"sqlite:///{tmp_path / 'mlflow.db'}", "sift_bench")


def finished(client: MlflowClient, experiment_id: str, tags: dict, other_cpu_fraction: float = 0.0,
             status: str = "FINISHED") -> str:
    run_id = client.create_run(experiment_id, tags=tags).info.run_id
    client.log_metric(run_id, "other_cpu_fraction", other_cpu_fraction)
    client.set_terminated(run_id, status)
    return run_id


def test_a_new_store_keeps_its_artifacts_beside_it_at_a_relative_location(tmp_path):
    uri = f"sqlite:///{tmp_path / 'results' / 'mlflow.db'}"
    experiment_id = store.use_store(uri, "sift_bench")
    assert store.Store.open(uri, "sift_bench") == store.Store(uri, "sift_bench", experiment_id)  # found, not made twice
    with sqlite3.connect(tmp_path / "results" / "mlflow.db") as connection:
        locations = dict(connection.execute("SELECT experiment_id, artifact_location FROM experiments"))
    # No absolute path in the file: the folder can be cloned anywhere and resumed there.
    assert locations == {0: store.ARTIFACTS_FOLDER, int(experiment_id): store.ARTIFACTS_FOLDER}
    assert store.sqlite_file("http://127.0.0.1:5000") is None
    assert store.sqlite_file(uri) == tmp_path / "results" / "mlflow.db"


def test_finished_runs_are_found_by_config_hash_slot_and_cleanliness(runs):
    client, experiment_id = MlflowClient(runs.uri), runs.experiment_id
    busy = finished(client, experiment_id, {"config_hash": "h1"}, other_cpu_fraction=0.3)
    assert runs.find_finished_run("h1") == busy
    # rerun_contended: a run timed while other processes used the machine is not done.
    assert runs.find_finished_run("h1", clean_only=True) is None
    clean = finished(client, experiment_id, {"config_hash": "h1"}, other_cpu_fraction=0.01)
    assert runs.find_finished_run("h1", clean_only=True) == clean
    finished(client, experiment_id, {"config_hash": "h2"}, status="FAILED")
    assert runs.find_finished_run("h2") is None
    # The `last` timing slot of a table's baseline is done only by a run in that slot.
    assert runs.find_finished_run("h1", timing_slot="last") is None
    last = finished(client, experiment_id, {"config_hash": "h1", "timing_slot": "last"})
    assert runs.find_finished_run("h1", timing_slot="last") == last


def test_a_run_timed_at_another_machine_speed_than_its_reference_baseline_is_named_with_the_ratio(runs):
    client, experiment_id = MlflowClient(runs.uri), runs.experiment_id

    def timed(sifter: str, eval_time_s: float, config_hash: str) -> str:
        run_id = client.create_run(experiment_id, tags={
            "task": "sst2_bert", "scale": "cpu", "sifter": sifter, "seed": "0", "machine.kind": AMX,
            "config_hash": config_hash}).info.run_id
        for name, value in (("other_cpu_fraction", 0.0), ("train_time_s", 100.0), ("cost_usd", 0.01),
                            ("eval_time_s", eval_time_s)):
            client.log_metric(run_id, name, value)
        client.set_terminated(run_id, "FINISHED")
        return run_id

    baseline = timed("none", 10.0, "base")
    slowed, alike = timed("random", 15.0, "keep50"), timed("random", 11.0, "keep25")
    assert runs.pace_mismatch_of(slowed) == (pytest.approx(1.5), baseline)
    assert runs.pace_mismatch_of(alike) is None
    assert runs.pace_mismatch_of(baseline) is None  # its own reference


def test_machine_kinds_are_counted_per_task_scale_sifter_and_time(runs):
    client, experiment_id = MlflowClient(runs.uri), runs.experiment_id
    for kind, sifter in ((AMX, "none"), (AMX, "random"), (ZEN5, "none")):
        finished(client, experiment_id, {"task": "sst2_bert", "scale": "cpu", "sifter": sifter, "machine.kind": kind})
    finished(client, experiment_id, {"task": "sst2_bert", "scale": "smoke", "sifter": "none", "machine.kind": AMX})
    assert runs.finished_machine_kinds("sst2_bert", "cpu") == {AMX: 2, ZEN5: 1}
    assert runs.finished_machine_kinds("sst2_bert", "cpu", "none") == {AMX: 1, ZEN5: 1}
    later = max(run.info.start_time for run in client.search_runs([experiment_id])) + 1
    assert runs.finished_machine_kinds("sst2_bert", "cpu", since_ms=later) == {}


def test_another_machine_kind_is_refused_with_the_kinds_named():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"tracking": {"uri": "sqlite:///s.db"}, "task": {"name": "sst2_bert"},
                            "scale": {"name": "cpu"}})
    assert store.other_machine_error(cfg, {AMX: 3}, AMX) is None
    error = store.other_machine_error(cfg, {AMX: 3, ZEN5: 1}, AMX)
    assert f"1 on '{ZEN5}'" in error and "tracking.require_same_machine=false" in error


@pytest.mark.parametrize("content", [b"not a db", b"SQLite format 2\x00 and more", b"x" * 100])
def test_a_file_that_is_not_a_database_is_refused_and_left_untouched(tmp_path, content):
    from sift_bench.errors import ConfigError

    bad = tmp_path / "bad.db"
    bad.write_bytes(content)
    before = bad.stat()
    with pytest.raises(ConfigError) as refused:
        store.use_store(f"sqlite:///{bad}", "sift_bench")
    assert str(refused.value) == (f"tracking.uri=sqlite:///{bad}: {bad} is not an SQLite database; tracking.uri must "
                                  "name an MLflow sqlite store or a new file")
    assert bad.read_bytes() == content and bad.stat().st_mtime_ns == before.st_mtime_ns
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bad.db"]  # not even a lock file beside it


def test_an_empty_or_missing_file_is_a_new_store(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (empty, tmp_path / "missing.db"):
        store.check_sqlite_store(f"sqlite:///{path}")
    store.check_sqlite_store("http://127.0.0.1:5000")  # a server: nothing to read here
    uri = f"sqlite:///{empty}"
    experiment_id = store.use_store(uri, "sift_bench")
    assert empty.read_bytes().startswith(store.SQLITE_HEADER)
    store.check_sqlite_store(uri)  # what MLflow made is a store
    assert store.use_store(uri, "sift_bench") == experiment_id
    # An experiment of model training: MLflow's UI opens it on its runs, not on the GenAI overview.
    assert MlflowClient(uri).get_experiment(experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"
    # One made before the tag existed gets it at its next job.
    client = MlflowClient(uri)
    client.delete_experiment_tag(experiment_id, "mlflow.experimentKind")
    assert "mlflow.experimentKind" not in client.get_experiment(experiment_id).tags
    assert store.use_store(uri, "sift_bench") == experiment_id
    assert client.get_experiment(experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"


def test_the_report_reads_a_store_with_its_columns_in_one_order(runs):
    """MLflow's column order of metrics, params and tags varies between processes; runs.csv must not."""
    client = MlflowClient(runs.uri)
    for names in (("zeta", "alpha"), ("mid", "beta")):
        run_id = client.create_run(runs.experiment_id, tags={"task": "t", "scale": names[0]}).info.run_id
        for name in names:
            client.log_metric(run_id, name, 1.0)
            client.log_param(run_id, name, "x")
        client.set_terminated(run_id, "FINISHED")
    columns = list(read_store(runs.uri, "sift_bench").columns)
    dotted = [name for name in columns if name.startswith(("metrics.", "params.", "tags."))]
    assert dotted == sorted(dotted) and "metrics.zeta" in dotted
    # The pre-run pace check reads one task and scale: a filter in MLflow's search syntax.
    assert len(read_store(runs.uri, "sift_bench", "tags.scale = 'mid'")) == 1
