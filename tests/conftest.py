import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

import sift_bench.schema  # noqa: F401  (registers the typed configs the yaml files extend)

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "conf"


def offline_data_dir() -> Path:
    return Path(os.environ.get("SIFT_BENCH_DATA_DIR", ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The offline data sets. Missing data is a failure, never a skip: CI always has ../shared/data."""
    path = offline_data_dir()
    assert (path / "cifar10-jpeg.zip").is_file() and (path / "sst2" / "train.tsv").is_file(), (
        f"offline data not found in {path}; set SIFT_BENCH_DATA_DIR to the folder holding cifar10-jpeg.zip and sst2/"
    )
    return path


@pytest.fixture
def store(tmp_path) -> str:
    """A fresh, real sqlite MLflow store for one test."""
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def compose_config(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=False)


def run_cli(args: list[str], cwd: Path, timeout: float = 300, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real entry point, `python -m sift_bench ...`, in its own process; `pythonpath`: a folder a user's
    task or policy module is imported from."""
    env = {**os.environ, "SIFT_BENCH_DATA_DIR": str(offline_data_dir()), "SIFT_BENCH_CACHE_DIR": str(ROOT / ".cache" / "sift_bench")}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "sift_bench", *args, f"hydra.run.dir={cwd}/outputs", f"hydra.sweep.dir={cwd}/multirun"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )


def run_report(store: str, out: Path, scale: str = "smoke") -> subprocess.CompletedProcess:
    """Run the real report command, `python -m sift_bench.report`, over a store, in its own process."""
    return subprocess.run([sys.executable, "-m", "sift_bench.report", "--tracking-uri", store, "--scale", scale,
                           "--out", str(out)], capture_output=True, text=True, timeout=300)


@pytest.fixture
def tracking_server(tmp_path):
    """A real `mlflow server` on loopback over a fresh store folder, started by sift_bench.server and stopped after;
    yields (tracking URI, store folder)."""
    from sift_bench import server

    folder = tmp_path / "server"
    with open(tmp_path / "server.log", "w") as log:
        process, uri = server.start(folder, log=log)
    try:
        yield uri, folder
    finally:
        server.stop(process)
