import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

import sift_bench.schema  # noqa: F401  (registers the typed configs the yaml files extend)

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "conf"
# The data caches the tests build (tokenised sentences, decoded images): outside the checkout, kept between sessions.
CACHE_DIR = Path(tempfile.gettempdir()) / f"sift_bench_test_cache_{os.getuid()}"
# What git does not track that any run of Python or pytest makes in a checkout.
BYTECODE_AND_PYTEST = ("__pycache__", ".pytest_cache")
# The offline data, read once as pytest starts: a relative SIFT_BENCH_DATA_DIR (README's `../shared/data`) names a
# folder beside the one the command ran in, not beside whichever folder a test has moved to since.
OFFLINE_DATA_DIR = Path(os.environ.get("SIFT_BENCH_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


def untracked_paths() -> set[str] | None:
    """What the checkout holds beyond git's tracked files, untracked or ignored, a new folder as one path (bytecode
    and pytest's cache aside); None outside a git checkout."""
    try:
        listed = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if listed.returncode != 0:
        return None
    paths = {line[3:] for line in listed.stdout.splitlines() if line[:2] in ("??", "!!")}
    return {path for path in paths if not set(Path(path).parts) & set(BYTECODE_AND_PYTEST)}


@pytest.fixture(scope="session", autouse=True)
def checkout_stays_clean():
    """Tests write only under temporary folders: the session fails if it left anything new in the checkout (an
    `mlruns/` of a store made without an artifact location, a cache, a run's outputs)."""
    before = untracked_paths()
    with pytest.MonkeyPatch.context() as env:
        # In-process configs resolve paths.cache_dir from it, and every job the tests start inherits it.
        env.setenv("SIFT_BENCH_CACHE_DIR", str(CACHE_DIR))
        # In-process configs resolve paths.data_dir from it: absolute, so a test may change directory.
        env.setenv("SIFT_BENCH_DATA_DIR", str(OFFLINE_DATA_DIR))
        yield
    after = untracked_paths()
    if before is not None and after is not None:
        left = sorted(after - before)
        assert not left, f"the tests left {left} in the checkout {ROOT}: write under tmp_path instead"


def offline_data_dir() -> Path:
    return OFFLINE_DATA_DIR


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


def job_env(**extra: str) -> dict[str, str]:
    """The environment of a job the tests start: this one, with the offline data and the shared cache (and `extra`)."""
    return {**os.environ, "SIFT_BENCH_DATA_DIR": str(offline_data_dir()), "SIFT_BENCH_CACHE_DIR": str(CACHE_DIR), **extra}


def run_cli(args: list[str], cwd: Path, timeout: float = 300, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real entry point, `python -m sift_bench ...`, in its own process; `pythonpath`: a folder a user's
    task or policy module is imported from."""
    env = job_env()
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
