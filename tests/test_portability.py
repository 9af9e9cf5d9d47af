"""What is committed reads and resumes from a clone anywhere: no absolute path of the machine that made it."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT, run_cli

# An absolute filesystem path in a text or in the sqlite file's bytes: a file URI or a path under a usual root.
ABSOLUTE_PATH = re.compile(rb"file://|(?<![\w.~-])/(?:work|home|root|tmp|Users|mnt|opt|var|srv|scratch)/")


def committed_files(folder: str) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in listed.stdout.split()]


def test_no_committed_result_holds_an_absolute_path():
    files = committed_files("results")
    assert files, "git ls-files found nothing under results/"
    offenders = [str(path.relative_to(ROOT)) for path in files
                 if path.is_file() and ABSOLUTE_PATH.search(path.read_bytes())]
    assert offenders == []


def test_the_pattern_finds_the_paths_a_store_used_to_carry():
    for text in (b"file:///work/main/results/cpu/mlartifacts", b"data_dir\x00/work/shared/data", b"/root/x", b"/tmp/a"):
        assert ABSOLUTE_PATH.search(text), text
    for text in (b"sqlite:///results/cpu/mlflow.db", b"../shared/data", b"mlartifacts/abc/artifacts", b"a/work/b"):
        assert not ABSOLUTE_PATH.search(text), text


@pytest.mark.slow
def test_a_store_moves_with_its_artifacts_and_resumes_from_anywhere(tmp_path):
    made_here, clone = tmp_path / "made", tmp_path / "clone"
    (made_here / "results").mkdir(parents=True)
    args = ["task=sst2_bert", "sifter=none", "scale=smoke", "trainer.epochs=1", "tracking.skip_finished=true"]
    # An absolute store URI, data and cache dirs (run_cli's environment): nothing of them may stay in the store.
    first = run_cli([*args, f"tracking.uri=sqlite:///{made_here / 'results' / 'mlflow.db'}"], made_here)
    assert first.returncode == 0, first.stderr[-3000:]
    shutil.copytree(made_here / "results", clone / "results")
    shutil.rmtree(made_here)
    assert not ABSOLUTE_PATH.search((clone / "results" / "mlflow.db").read_bytes())
    assert str(tmp_path).encode() not in (clone / "results" / "mlflow.db").read_bytes()

    store = "sqlite:///results/mlflow.db"
    resumed = run_cli([*args, f"tracking.uri={store}"], clone, timeout=120)
    assert resumed.returncode == 0 and "skipped, run" in resumed.stdout
    added = run_cli([*args, "seed=1", f"tracking.uri={store}"], clone)
    assert added.returncode == 0, added.stderr[-3000:]
    assert not made_here.exists()  # nothing was written to the folder the store came from
    runs = MlflowClient(f"sqlite:///{clone / 'results' / 'mlflow.db'}").search_runs(
        [MlflowClient(f"sqlite:///{clone / 'results' / 'mlflow.db'}").get_experiment_by_name("sift_bench").experiment_id])
    assert sorted(run.data.tags["seed"] for run in runs) == ["0", "1"]
    for run in runs:
        assert (clone / "results" / run.info.artifact_uri / "config.yaml").is_file()
        assert not ABSOLUTE_PATH.search(" ".join([*run.data.params.values(), *run.data.tags.values()]).encode())


def test_portable_makes_absolute_paths_and_uris_relative_and_leaves_the_rest(tmp_path, monkeypatch):
    from sift_bench.portable import portable

    monkeypatch.chdir(tmp_path)
    assert portable(str(tmp_path / "data")) == "data"
    assert portable(f"sqlite:///{tmp_path}/results/mlflow.db") == "sqlite:///results/mlflow.db"
    assert portable(f"file://{tmp_path.parent}/origin.git") == "../origin.git"
    for unchanged in ("sqlite:///mlflow.db", "https://github.com/o/r.git", "../shared/data", 3):
        assert portable(unchanged) == unchanged
    assert portable(f"paths.data_dir={tmp_path}/d") == "paths.data_dir=d"


def test_dataset_inputs_name_their_files_by_relative_paths_and_digest_them_in_a_moment(data_dir, tmp_path, monkeypatch):
    import time
    import warnings

    from conftest import compose_config
    from sift_bench.tracking import datasets, file_digest

    monkeypatch.chdir(tmp_path)  # the data lies outside the folder the command runs in
    for task in ("cifar10_resnet", "sst2_bert"):
        cfg = compose_config([f"task={task}", "scale=cpu", f"paths.data_dir={data_dir.resolve()}"])
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a source MLflow reads two ways warns in every run's output
            found = datasets(cfg)
        assert set(found) == {"training", "validation", "test"}
        assert {dataset.source._get_source_type() for dataset in found.values()} == {"local"}
        assert len({dataset.digest for dataset in found.values()}) == 3  # one file may hold two splits, told apart
        for context, dataset in found.items():
            assert dataset.name == f"{cfg.task.dataset} {context}"
            assert not ABSOLUTE_PATH.search(dataset.source.to_json().encode()), dataset.source.to_json()
        assert datasets(cfg)["training"].digest == found["training"].digest  # the same file, the same digest
    zip_file = data_dir / "cifar10-jpeg.zip"
    start = time.perf_counter()
    file_digest(zip_file)
    assert time.perf_counter() - start < 0.5  # its first MiB, not the whole zip
