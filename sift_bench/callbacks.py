"""Hydra callback: a multirun becomes one MLflow parent run with each job as a child."""

import atexit
import os
from datetime import datetime

from hydra.experimental.callback import Callback
from mlflow.tracking import MlflowClient

from sift_bench.tracking import PARENT_RUN_ENV, SWEEP_STARTED_ENV, use_store


class MlflowSweepParent(Callback):
    def __init__(self):
        self.client = None
        self.run_id = None

    def on_multirun_start(self, config, **kwargs) -> None:
        experiment_id = use_store(config.tracking.uri, config.tracking.experiment_name)
        self.client = MlflowClient(config.tracking.uri)
        name = config.get("sweep_name") or "sweep"
        run = self.client.create_run(
            experiment_id,
            run_name=f"{name} {config.scale.name} {datetime.now():%Y-%m-%d %H:%M}",
            tags={"sweep": name, "scale": config.scale.name, "run_kind": "sweep"},
        )
        self.run_id = run.info.run_id
        os.environ[PARENT_RUN_ENV] = self.run_id
        os.environ[SWEEP_STARTED_ENV] = str(run.info.start_time)
        # A sweep that dies part-way never reaches on_multirun_end; do not leave its parent RUNNING.
        atexit.register(self._end, "FAILED")

    def on_multirun_end(self, config, **kwargs) -> None:
        self._end("FINISHED")

    def _end(self, status: str) -> None:
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, status)
            os.environ.pop(PARENT_RUN_ENV, None)
            os.environ.pop(SWEEP_STARTED_ENV, None)
            self.run_id = None
