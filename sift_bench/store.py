"""The MLflow store a sweep writes: opening it (a sqlite file under a lock, its artifacts beside it) and the questions
a job asks it before it runs (is this config FINISHED already, and timed cleanly? which machine kinds timed this
task?)."""

import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import mlflow
from filelock import FileLock
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from sift_bench.errors import ConfigError
from sift_bench.machine import CONTENDED_FRACTION
# The pre-run pace check applies the report's own rule to the runs the report would use (one rule, not a twin).
from sift_bench.report.selection import split_runs
from sift_bench.report.sources import read_store
from sift_bench.report.timing import pace_mismatched_runs, timed_runs

ARTIFACTS_FOLDER = "mlartifacts"
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file
# An experiment of model training, not of GenAI: MLflow 3's UI reads this tag (its experiment-kind selector writes
# it) and then opens the experiment on its runs, not on the GenAI overview and traces. Set when sift_bench creates
# an experiment, and on one made before at its next job (docs/configuration.md, "Looking at runs").
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}


def sqlite_file(uri: str) -> Path | None:
    """A sqlite store's file, or None for any other store."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def check_sqlite_store(uri: str) -> None:
    """Raises ConfigError when a sqlite store URI names a file that is not an SQLite database (a report, a typo'd
    path), before MLflow opens it: MLflow would fail deep in its schema migrations, with a stack trace. An empty or
    missing file is a new store. Reads 16 bytes and writes nothing."""
    store_file = sqlite_file(uri)
    if store_file is None:
        return
    if store_file.is_dir():
        problem = "is a folder, not an SQLite database"
    else:
        try:
            with open(store_file, "rb") as handle:
                head = handle.read(len(SQLITE_HEADER))
        except FileNotFoundError:
            return
        if not head or head == SQLITE_HEADER:
            return
        problem = "is not an SQLite database"
    raise ConfigError(f"tracking.uri={uri}: {store_file} {problem}; tracking.uri must name an MLflow sqlite store "
                      "or a new file")


@contextlib.contextmanager
def store_lock(store_file: Path | None):
    """Holds an exclusive lock on a sqlite store (a `.lock` file beside it) across processes; no-op for a server.

    Opening a new sqlite store runs MLflow's schema migrations, and two processes that do it at once fail
    (`duplicate column name: step`); two that create the experiment at once fail likewise."""
    if store_file is None:
        yield
        return
    store_file.parent.mkdir(parents=True, exist_ok=True)
    # filelock's OS lock (flock on Unix, LockFileEx on Windows); the `.lock` file stays, so waiters share one file.
    with FileLock(store_file.with_name(store_file.name + ".lock")):
        yield


def use_store(uri: str, experiment_name: str) -> str:
    """Point MLflow at the store and experiment, creating the experiment with artifacts next to a sqlite file; its
    experiment id. Raises ConfigError for a sqlite URI naming a file that is not a database (check_sqlite_store),
    left untouched."""
    return Store.open(uri, experiment_name).experiment_id


def _use_store(uri: str, experiment_name: str) -> str:
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is not None:
        # An experiment made before the tag existed (the committed stores) gets it at its next job, once.
        for key, value in EXPERIMENT_TAGS.items():
            if experiment.tags.get(key) != value:
                client.set_experiment_tag(experiment.experiment_id, key, value)
        return experiment.experiment_id
    store_file = sqlite_file(uri)
    if store_file is None:
        return client.create_experiment(experiment_name, tags=EXPERIMENT_TAGS)
    experiment_id = client.create_experiment(
        experiment_name, artifact_location=(store_file.parent.resolve() / ARTIFACTS_FOLDER).as_uri(),
        tags=EXPERIMENT_TAGS)
    # MLflow stores an absolute artifact location; a relative one, read against the store's own folder (see
    # log_config), lets a committed store move to any clone and resume there.
    with sqlite3.connect(store_file) as connection:
        connection.execute("PRAGMA secure_delete = ON")  # so the replaced absolute path leaves no trace in the file
        # Experiment 0 is MLflow's own "Default", made with the store, at an absolute ./mlruns of the caller.
        connection.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id IN (0, ?)",
                           (ARTIFACTS_FOLDER, int(experiment_id)))
    return experiment_id


@dataclass(frozen=True)
class Store:
    """One MLflow store and experiment, as a job sees it: where it is (`uri`), which experiment (`experiment_name`,
    `experiment_id`), and the questions a job asks it before it runs. `Store.open` makes the experiment if it is new;
    every MLflow workaround of opening one (the lock, the relative artifact location, the experiment kind) is
    `open`'s."""

    uri: str
    experiment_name: str
    experiment_id: str

    @classmethod
    def open(cls, uri: str, experiment_name: str) -> "Store":
        check_sqlite_store(uri)
        with store_lock(sqlite_file(uri)):
            return cls(uri, experiment_name, _use_store(uri, experiment_name))

    def find_finished_run(self, fingerprint: str, timing_slot: str | None = None,
                          clean_only: bool = False) -> str | None:
        """A FINISHED run with this config hash; for the `last` timing slot of a table's baseline, one in that slot;
        with `clean_only`, one during which other processes used at most CONTENDED_FRACTION of a core."""
        slot = " and tags.timing_slot = 'last'" if timing_slot == "last" else ""
        clean = f" and metrics.other_cpu_fraction <= {CONTENDED_FRACTION}" if clean_only else ""
        runs = MlflowClient(self.uri).search_runs(
            [self.experiment_id], max_results=1,
            filter_string=f"tags.config_hash = '{fingerprint}' and attributes.status = 'FINISHED'{slot}{clean}")
        return runs[0].info.run_id if runs else None

    def pace_mismatch_of(self, run_id: str) -> tuple[float, str] | None:
        """(its evaluation time over its time reference's, that baseline's run_id) when the FINISHED run `run_id` was
        timed at another machine speed than the baseline its savings divide by, else None: the report's own rule
        (`report.pace_mismatched_runs`) over the runs the report of its task and scale would use, read as it reads
        them: it reads the runs of that task and scale only."""
        tags = MlflowClient(self.uri).get_run(run_id).data.tags
        if "task" not in tags or "scale" not in tags:
            return None
        same = f"tags.task = '{tags['task']}' and tags.scale = '{tags['scale']}'"
        used, _ = split_runs(read_store(self.uri, self.experiment_name, same), tags["scale"],
                             tasks_wanted=[tags["task"]])
        return pace_mismatched_runs(timed_runs(used)).get(run_id)

    def finished_machine_kinds(self, task: str, scale: str, sifter: str | None = None,
                               since_ms: int | None = None) -> dict[str, int]:
        """How many FINISHED runs of this task and scale (and sifter, and started at or after `since_ms`, if given)
        the store holds per machine kind."""
        sifter_filter = f" and tags.sifter = '{sifter}'" if sifter else ""
        if since_ms is not None:
            sifter_filter += f" and attributes.start_time >= {since_ms}"
        runs = MlflowClient(self.uri).search_runs(
            [self.experiment_id], max_results=50_000,
            filter_string=f"tags.task = '{task}' and tags.scale = '{scale}'{sifter_filter} "
                          "and attributes.status = 'FINISHED'")
        kinds: dict[str, int] = {}
        for run in runs:
            kind = run.data.tags.get("machine.kind", "untagged (logged before machine.kind existed)")
            kinds[kind] = kinds.get(kind, 0) + 1
        return kinds


def other_machine_error(cfg: DictConfig, kinds: dict[str, int], this_kind: str) -> str | None:
    """Why this machine must not add runs to a store whose runs of the same task and scale came from another
    machine kind (their training times cannot be compared), or None when it may."""
    others = {kind: count for kind, count in kinds.items() if kind != this_kind}
    if not others:
        return None
    held = "; ".join(f"{count} on '{kind}'" for kind, count in others.items())
    return (f"tracking.require_same_machine=true: {cfg.tracking.uri} holds FINISHED {cfg.task.name} runs at "
            f"scale={cfg.scale.name} from another machine kind ({held}), and this machine is '{this_kind}'. "
            "Training times from different kinds cannot be compared in one table. Run it on a machine of that "
            "kind, point tracking.uri (SIFT_BENCH_STORE for experiments/savings_table.sh) at another store, or set "
            "tracking.require_same_machine=false")
