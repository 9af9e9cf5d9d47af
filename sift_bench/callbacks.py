"""Hydra callback: a multirun becomes one MLflow parent run with each job as a child.

The parent is made (or, for a resumed sweep, found) once, before the launcher starts any job, by rank 0 alone.
Its id reaches each job in two ways: the environment (SIFT_BENCH_PARENT_RUN_ID, which joblib's workers and
submitit's local jobs inherit) and this callback itself, which Hydra pickles into every job it launches (a
joblib worker, a submitit job, local or on SLURM) and runs there (on_job_start), so a SLURM job started with
`--export=NONE` finds its parent too. Each job then starts its run with `parent_run_id=`. A sweep that stops before
any job started a run (a job's settings refused) leaves no parent behind.
"""

import atexit
import contextlib
import os
from datetime import datetime

from hydra.experimental.callback import Callback
from mlflow.tracking import MlflowClient

from sift_bench import liveness
from sift_bench.distributed import rank_from_env
from sift_bench.store import use_store
from sift_bench.tracking import PARENT_RUN_ENV, SWEEP_STARTED_ENV

# The sweep parent's liveness lock, held by the process that runs the sweep: an open file does not pickle, and Hydra
# pickles the callback into every job.
_parent_alive = contextlib.ExitStack()


def find_sweep_parent(client: MlflowClient, experiment_id: str, name: str, scale: str) -> str | None:
    """The latest parent run of the sweep `name` at `scale` in the store, so that a resumed sweep reuses it."""
    runs = client.search_runs(
        [experiment_id], max_results=1, order_by=["attributes.start_time DESC"],
        filter_string=f"tags.run_kind = 'sweep' and tags.sweep = '{name}' and tags.scale = '{scale}'")
    return runs[0].info.run_id if runs else None


class MlflowSweepParent(Callback):
    def __init__(self):
        # Only plain values: Hydra pickles this object into every job's process.
        self.uri = None
        self.experiment_id = None
        self.run_id = None
        self.created = False  # this sitting made the parent (not a resumed sweep's)
        self.sweep_started_ms = None

    def on_multirun_start(self, config, **kwargs) -> None:
        if rank_from_env() != 0:
            return  # under torchrun every rank runs the sweep; rank 0 alone talks to MLflow
        # Made here, once, before any job: parallel jobs then never create the store or the experiment at once.
        experiment_id = use_store(config.tracking.uri, config.tracking.experiment_name)
        self.uri, self.experiment_id = config.tracking.uri, experiment_id
        client = MlflowClient(self.uri)
        # Runs a killed sitting left RUNNING (and its sweep's parent) end as lost before this sweep adds any.
        liveness.mark_lost_runs(self.uri, experiment_id)
        name = config.get("sweep_name") or "sweep"
        # A resumed sweep (tracking.skip_finished, as the tables run) goes on under its parent; any other is new.
        resumed = config.tracking.skip_finished
        parent = find_sweep_parent(client, experiment_id, name, config.scale.name) if resumed else None
        alive = _parent_alive.enter_context(liveness.hold(self.uri))
        if parent is None:
            parent = client.create_run(
                experiment_id,
                run_name=f"{name} {config.scale.name} {datetime.now():%Y-%m-%d %H:%M}",
                tags={"sweep": name, "scale": config.scale.name, "run_kind": "sweep", **alive},
            ).info.run_id
            self.created = True
        else:
            for key, value in alive.items():
                client.set_tag(parent, key, value)
            client.update_run(parent, status="RUNNING")
            client.set_tag(parent, "resumed", datetime.now().isoformat(timespec="seconds"))
            if liveness.LOST_TAG in client.get_run(parent).data.tags:
                client.delete_tag(parent, liveness.LOST_TAG)  # a sitting lost it; this one resumes it
        self.run_id = parent
        # When this sitting's sweep began (not the parent's first start), for tracking.baseline_per_sitting.
        self.sweep_started_ms = str(int(datetime.now().timestamp() * 1000))
        self._export()
        # A sweep that dies part-way never reaches on_multirun_end; do not leave its parent RUNNING.
        atexit.register(self._end, "FAILED")

    def on_job_start(self, config, **kwargs) -> None:
        # In a launcher's worker or SLURM job this is the pickled copy, which carries the parent's id.
        if self.run_id is not None:
            self._export()

    def on_multirun_end(self, config, **kwargs) -> None:
        self._end("FINISHED")

    def _export(self) -> None:
        os.environ[PARENT_RUN_ENV] = self.run_id
        os.environ[SWEEP_STARTED_ENV] = self.sweep_started_ms

    def _end(self, status: str) -> None:
        if self.run_id is not None:
            client = MlflowClient(self.uri)
            if status == "FAILED" and self.created and not self._has_children(client):
                # Stopped before any job started a run (a job's settings were refused): a parent without children
                # would record only that a sweep was tried, so this sitting leaves none behind.
                client.delete_run(self.run_id)
            else:
                client.set_terminated(self.run_id, status)
            _parent_alive.close()
            os.environ.pop(PARENT_RUN_ENV, None)
            os.environ.pop(SWEEP_STARTED_ENV, None)
            self.run_id = None

    def _has_children(self, client: MlflowClient) -> bool:
        return bool(client.search_runs([self.experiment_id], max_results=1,
                                       filter_string=f"tags.mlflow.parentRunId = '{self.run_id}'"))
