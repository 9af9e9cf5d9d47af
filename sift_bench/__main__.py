"""`python -m sift_bench +experiment=bert`: one training job (or a sweep with -m), logged to MLflow."""

import contextlib
import math
import os
import random
import signal
import sys
from datetime import datetime

import hydra
import mlflow
import numpy as np
import torch
from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from tqdm.contrib.logging import logging_redirect_tqdm

from sift_bench import distributed, liveness, store, tracking
from sift_bench.data import DataNotFoundError
from sift_bench.identity import config_hash
from sift_bench.machine import CONTENDED_FRACTION, is_contended, machine_tags
from sift_bench.schema import refused_key  # importing it registers the typed configs the yaml files extend
from sift_bench.targets import BASELINE, is_baseline
from sift_bench.tasks import build_task
from sift_bench.train import train as native_train
from sift_bench.validation import ConfigError, start_deadline, validate


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def fail(message: str) -> None:
    print(f"sift_bench: error: {message}", file=sys.stderr)
    sys.exit(2)


def summary(cfg: DictConfig, result, cost_usd: float, run_id: str) -> str:
    label = tracking.sifter_label(cfg.sifter)
    target = "not reached" if math.isnan(result.time_to_target_s) else f"{result.time_to_target_s:.1f} s"
    ranks = []
    if result.world_size > 1:
        ranks = [f"ranks        {result.world_size} x {cfg.trainer.batch_size // result.world_size} of the batch "
                 f"{cfg.trainer.batch_size}, {result.steps} steps each; {result.samples_left_over} kept samples left "
                 f"over, {result.sift_sync_time_s:.1f} s in the sifter's collectives"]
    busy = []
    if is_contended(result.other_cpu_fraction):
        busy = [f"machine      busy: other processes used {result.other_cpu_fraction:.2f} of a core while it trained "
                f"(over {CONTENDED_FRACTION:g}): its train time is suspect"]
    return "\n".join([*ranks,
        f"task         {cfg.task.name} (scale={cfg.scale.name}, seed={cfg.seed})",
        f"sifter       {cfg.sifter.name} {label}".rstrip(),
        f"accepted     {result.pct_accepted:.1f} % ({result.samples_trained} of {result.samples_seen} samples)",
        f"train time   {result.train_time_s:.1f} s (scoring {result.sift_time_s:.1f} s, eval {result.eval_time_s:.1f} s apart)",
        *busy,
        f"cost         ${cost_usd:.4f} at ${cfg.cost.usd_per_hour}/h",
        f"accuracy     {result.test_accuracy:.2f} % test, {result.val_accuracy:.2f} % validation "
        f"(target {cfg.task.target_accuracy} % on validation: {target})",
        f"mlflow run   {run_id} in {cfg.tracking.uri}",
    ])


def _terminate(signum, frame):
    # `kill` (SIGTERM) ends the job like Ctrl-C, so its MLflow run is marked KILLED, not left RUNNING.
    raise KeyboardInterrupt(f"signal {signum}")


def baseline_retime_reason(cfg: DictConfig, experiment_id: str, this_kind: str) -> str | None:
    """Why a baseline that already FINISHED is timed again, or None. Savings measure each run against the
    baseline pace nearest in time on its own machine kind (sift_bench.report)."""
    uri, task, scale = cfg.tracking.uri, cfg.task.name, cfg.scale.name
    if cfg.tracking.baseline_per_machine and this_kind not in store.finished_machine_kinds(
            uri, experiment_id, task, scale, BASELINE):
        return (f"this machine kind ('{this_kind}') has no {task} baseline at scale={scale} yet "
                "(tracking.baseline_per_machine=true)")
    sweep_started = os.environ.get(tracking.SWEEP_STARTED_ENV)
    if cfg.tracking.baseline_per_sitting and sweep_started and this_kind not in store.finished_machine_kinds(
            uri, experiment_id, task, scale, BASELINE, since_ms=int(sweep_started)):
        return (f"this sitting's sweep has timed no {task} baseline at scale={scale} on this machine kind yet "
                "(tracking.baseline_per_sitting=true)")
    return None


def store_verdict(cfg: DictConfig, world_size: int) -> tuple[str, str]:
    """Whether this job runs, from the store and the machine: ("run", experiment_id), ("skip", why) or
    ("fail", why). Under DDP rank 0 alone asks, and every rank follows its verdict."""
    deadline = start_deadline(cfg.tracking.start_before)
    if deadline is not None and datetime.now(deadline.tzinfo) >= deadline:
        # A sitting ends between jobs, not in the middle of one that would be lost (marked KILLED).
        return "skip", f"tracking.start_before={cfg.tracking.start_before} has passed ({tracking.run_name(cfg)})"
    experiment_id = store.use_store(cfg.tracking.uri, cfg.tracking.experiment_name)
    if not os.environ.get(tracking.PARENT_RUN_ENV):  # a sweep's parent marked them before its first job
        liveness.mark_lost_runs(cfg.tracking.uri, experiment_id)
    fingerprint = config_hash(cfg, world_size)
    this_kind = machine_tags()["machine.kind"]
    if cfg.tracking.skip_finished:
        done = store.find_finished_run(cfg.tracking.uri, experiment_id, fingerprint, cfg.tracking.timing_slot,
                                          clean_only=cfg.tracking.rerun_contended)
        if not done and cfg.tracking.rerun_contended and store.find_finished_run(
                cfg.tracking.uri, experiment_id, fingerprint, cfg.tracking.timing_slot):
            print("sift_bench: every FINISHED run with this config was timed while other processes used the machine "
                  "(tracking.rerun_contended=true): running it again")
        mismatch = (done and cfg.tracking.rerun_contended and not is_baseline(cfg.sifter)
                    and store.pace_mismatch_of(cfg.tracking.uri, cfg.tracking.experiment_name, done))
        if mismatch:
            print(f"sift_bench: run {done} already FINISHED with this config, but its evaluations took "
                  f"{mismatch[0]:.2f} times as long as those of its time reference, baseline run {mismatch[1]}: the "
                  "machine ran at another speed for the two (tracking.rerun_contended=true): running it again")
            done = None
        retime = done and is_baseline(cfg.sifter) and baseline_retime_reason(cfg, experiment_id, this_kind)
        if retime:
            print(f"sift_bench: run {done} already FINISHED with this config, but {retime}: running it again")
        elif done:
            return "skip", f"run {done} already FINISHED with this config ({tracking.run_name(cfg)})"
    required = cfg.tracking.require_machine
    if required and required not in this_kind:
        return "fail", (f"tracking.require_machine={required!r}: this machine's kind is '{this_kind}', which does not "
                        "contain it (see README.md, 'Machine kinds'); set tracking.require_machine=null to run here "
                        "anyway")
    if cfg.tracking.require_same_machine:
        kinds = store.finished_machine_kinds(cfg.tracking.uri, experiment_id, cfg.task.name, cfg.scale.name)
        error = store.other_machine_error(cfg, kinds, this_kind)
        if error:
            return "fail", error
    return "run", experiment_id


def run_job(cfg: DictConfig) -> float | None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        sift_config = validate(cfg)
    except ConfigError as error:
        fail(str(error))
    if cfg.scale.device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"scale.device={cfg.scale.device!r} but no CUDA device is available; use scale=cpu or scale=smoke")
    if cfg.trainer.num_threads:
        torch.set_num_threads(cfg.trainer.num_threads)

    world, device = distributed.start(cfg.scale.device)
    verdict, detail = distributed.broadcast(store_verdict(cfg, world.world_size) if world.is_main else None, world)
    if verdict == "fail":
        fail(detail)
    if verdict == "skip":
        if world.is_main:
            print(f"sift_bench: skipped, {detail}")
        return None
    experiment_id = detail

    seed_everything(cfg.seed)
    try:
        parts = build_task(cfg, device)
    except (DataNotFoundError, ConfigError) as error:
        fail(str(error))

    run = None
    alive = contextlib.ExitStack()  # the run's liveness lock, held until its end is recorded (sift_bench.liveness)
    if world.is_main:
        tags = tracking.run_tags(cfg, parts.model_name, parts.dataset_name, config_hash(cfg, world.world_size),
                                 world.world_size)
        tags.update(alive.enter_context(liveness.hold(cfg.tracking.uri)))
        run = tracking.start_run(cfg, experiment_id, tags, world.world_size)
    with alive:
        try:
            train = native_train
            if cfg.trainer.loop == "hf_trainer":
                from sift_bench.train_hf import train
            # Log lines go through tqdm.write, so none lands on the progress bar's line in a terminal.
            with logging_redirect_tqdm():
                result = train(parts, cfg.trainer, device, cfg.scale.precision, sift_config, seed=cfg.seed,
                               target_accuracy=cfg.task.target_accuracy,
                               on_eval=tracking.EvalLogger() if run else None, sync=cfg.sifter.get("sync", "global"))
            cost_usd = cfg.cost.usd_per_hour * result.train_time_s / 3600.0
            if run:
                tracking.log_final(result, cost_usd)
        except KeyboardInterrupt:
            if run:
                mlflow.end_run("KILLED")
                # One line, not a traceback: what was stopped and where it is recorded. Exit status as for SIGINT.
                print(f"sift_bench: interrupted, run {run.info.run_id} marked KILLED in {cfg.tracking.uri}",
                      file=sys.stderr)
            sys.exit(130)
        except BaseException:
            if run:
                mlflow.end_run("FAILED")
            raise
        if not run:
            return None
        mlflow.end_run("FINISHED")
    print(summary(cfg, result, cost_usd, run.info.run_id))
    return result.test_accuracy


def group_options(group: str) -> str:
    """A config group's options, wherever on the search path (`--config-dir` included), for --help's template."""
    from hydra.core.global_hydra import GlobalHydra

    return ", ".join(sorted(GlobalHydra.instance().config_loader().get_group_options(group)))


OmegaConf.register_new_resolver("sift_bench.options", group_options, replace=True)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    return run_job(cfg)


def refusal(error: CompactHydraException) -> str:
    """Hydra's refusal of the command's settings. For a key a typed group lacks, the field most likely meant instead
    of Hydra's advice to append it with `+`, which the schema refuses as well."""
    first_line, *rest = (str(error) or type(error).__name__).splitlines()
    typed = refused_key(error.__cause__)
    if typed:
        return f"{first_line.rstrip('.')}: {typed}"
    cause = [str(error.__cause__)] if isinstance(error.__cause__, OmegaConfBaseException) else []
    return "\n".join([first_line, *rest, *cause])


def cli() -> None:
    """`python -m sift_bench`: Hydra's main, its refusals of bad settings answered as sift_bench's own are."""
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        main()  # the user asked for Hydra's full stack traces
        return
    # Hydra prints a refusal itself and exits; told to raise it instead, it lets the answer name the key meant.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        main()
    except CompactHydraException as error:
        fail(refusal(error))


if __name__ == "__main__":
    cli()
