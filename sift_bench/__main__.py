"""`python -m sift_bench +experiment=bert`: one training job (or a sweep with -m), logged to MLflow."""

import contextlib
import math
import os
import signal
import sys

import hydra
from hydra.core.global_hydra import GlobalHydra
import mlflow
import torch
from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from tqdm.contrib.logging import logging_redirect_tqdm

from sift_bench import distributed, liveness, store, tracking
from sift_bench.data import DataNotFoundError
from sift_bench.decision import FAIL, SKIP, decide
from sift_bench.identity import config_hash
from sift_bench.machine import CONTENDED_FRACTION, is_contended
from sift_bench.cli import summary_block
from sift_bench.schema import refused_key  # importing it registers the typed configs the yaml files extend
from sift_bench.seeding import seed_everything
from sift_bench.tasks import build_task
from sift_bench.train import train as native_train
from sift_bench.validation import ConfigError, resolve_precision, validate


def fail(message: str) -> None:
    print(f"sift_bench: error: {message}", file=sys.stderr)
    sys.exit(2)


def summary(cfg: DictConfig, result, cost_usd: float, run_id: str) -> str:
    label = tracking.sifter_label(cfg.sifter)
    target = "not reached" if math.isnan(result.time_to_target_s) else f"{result.time_to_target_s:.1f} s"
    ranks = []
    if result.world_size > 1:
        ranks = [("ranks", f"{result.world_size} x {cfg.trainer.batch_size // result.world_size} of the batch "
                           f"{cfg.trainer.batch_size}, {result.steps} steps each; {result.samples_left_over} kept "
                           f"samples left over, {result.sift_sync_time_s:.1f} s in the sifter's collectives")]
    busy = []
    if is_contended(result.other_cpu_fraction):
        busy = [("machine", f"busy: other processes used {result.other_cpu_fraction:.2f} of a core while it trained "
                            f"(over {CONTENDED_FRACTION:g}): its train time is suspect")]
    return summary_block([
        *ranks,
        ("task", f"{cfg.task.name} (scale={cfg.scale.name}, seed={cfg.seed})"),
        ("sifter", f"{cfg.sifter.name} {label}"),
        ("accepted", f"{result.pct_accepted:.1f} % ({result.samples_trained} of {result.samples_seen} samples)"),
        ("train time", f"{result.train_time_s:.1f} s (scoring {result.sift_time_s:.1f} s, eval "
                       f"{result.eval_time_s:.1f} s apart)"),
        *busy,
        ("cost", f"${cost_usd:.4f} at ${cfg.cost.usd_per_hour}/h"),
        ("accuracy", f"{result.test_accuracy:.2f} % test, {result.val_accuracy:.2f} % validation "
                     f"(target {cfg.task.target_accuracy} % on validation: {target})"),
        ("mlflow run", f"{run_id} in {cfg.tracking.uri}"),
    ])


def _terminate(signum, frame):
    # `kill` (SIGTERM) ends the job like Ctrl-C, so its MLflow run is marked KILLED, not left RUNNING.
    raise KeyboardInterrupt(f"signal {signum}")


def checked_config(cfg: DictConfig):
    """The policy config of a valid job, its precision settled for this machine; exit 2 naming a bad setting."""
    try:
        sift_config = validate(cfg)
        # `auto` settled for this machine here, once: the run's params, its config_hash and its training all see the
        # precision it trains in.
        resolve_precision(cfg)
        store.check_sqlite_store(cfg.tracking.uri)  # before MLflow opens the file
    except ConfigError as error:
        fail(str(error))
    if cfg.scale.device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"scale.device={cfg.scale.device!r} but no CUDA device is available; use scale=cpu or scale=smoke")
    return sift_config


def train_job(cfg: DictConfig, parts, sift_config, device, run):
    """The job's training in the loop it names, its final metrics logged to `run` (None on a rank other than 0)."""
    train = native_train
    if cfg.trainer.loop == "hf_trainer":
        # The Trainer (transformers, accelerate) costs seconds to import; only trainer.loop=hf_trainer needs it.
        from sift_bench.train_hf import train
    # Log lines go through tqdm.write, so none lands on the progress bar's line in a terminal.
    with logging_redirect_tqdm():
        result = train(parts, cfg.trainer, device, cfg.scale.precision, sift_config, seed=cfg.seed,
                       target_accuracy=cfg.task.target_accuracy,
                       on_eval=tracking.EvalLogger() if run else None)
    cost_usd = cfg.cost.usd_per_hour * result.train_time_s / 3600.0
    if run:
        tracking.log_final(result, cost_usd)
    return result, cost_usd


def run_job(cfg: DictConfig) -> float | None:
    """One job: validate, decide (sift_bench.decision), build, train, log; the test accuracy, None when skipped."""
    signal.signal(signal.SIGTERM, _terminate)
    sift_config = checked_config(cfg)
    if cfg.trainer.num_threads:
        torch.set_num_threads(cfg.trainer.num_threads)
    world, device = distributed.start(cfg.scale.device)
    decision = distributed.broadcast(decide(cfg, world.world_size) if world.is_main else None, world)
    if decision.action == FAIL:
        fail(decision.reason)
    if decision.action == SKIP:
        if world.is_main:
            print(f"sift_bench: skipped, {decision.reason}")
        return None

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
        run = tracking.start_run(cfg, decision.experiment_id, tags, world.world_size)
    with alive:
        try:
            result, cost_usd = train_job(cfg, parts, sift_config, device, run)
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
