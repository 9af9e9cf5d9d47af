"""Whether a job runs: the sweep rules read from the store and the machine, before anything is built or trained.

A sweep resumes where it stopped (a job whose identical config FINISHED is skipped), trains again what was timed on
a busy or slowed machine, times the baseline again on a new machine kind or in a new sitting, ends a sitting between
jobs, and refuses a machine the config rules out. `decide` applies them in that order and returns a `Decision`;
`run_job` (sift_bench.__main__) acts on it. Under DDP rank 0 alone decides and every rank follows.
"""

import os
from dataclasses import dataclass
from datetime import datetime

from omegaconf import DictConfig

from sift_bench import liveness, tracking
from sift_bench.identity import config_hash
from sift_bench.machine import machine_tags
from sift_bench.store import Store, other_machine_error
from sift_bench.targets import BASELINE, is_baseline
from sift_bench.validation import start_deadline

RUN, SKIP, FAIL = "run", "skip", "fail"


@dataclass(frozen=True)
class Decision:
    """`action` RUN (in the store's experiment `experiment_id`), SKIP or FAIL, with the `reason` a person reads."""

    action: str
    experiment_id: str | None = None
    reason: str = ""


def baseline_retime_reason(cfg: DictConfig, store: Store, this_kind: str) -> str | None:
    """Why a baseline that already FINISHED is timed again, or None. Savings measure each run against the
    baseline pace nearest in time on its own machine kind (sift_bench.report)."""
    task, scale = cfg.task.name, cfg.scale.name
    if cfg.tracking.baseline_per_machine and this_kind not in store.finished_machine_kinds(task, scale, BASELINE):
        return (f"this machine kind ('{this_kind}') has no {task} baseline at scale={scale} yet "
                "(tracking.baseline_per_machine=true)")
    sweep_started = os.environ.get(tracking.SWEEP_STARTED_ENV)
    if cfg.tracking.baseline_per_sitting and sweep_started and this_kind not in store.finished_machine_kinds(
            task, scale, BASELINE, since_ms=int(sweep_started)):
        return (f"this sitting's sweep has timed no {task} baseline at scale={scale} on this machine kind yet "
                "(tracking.baseline_per_sitting=true)")
    return None


def finished_run_to_skip(cfg: DictConfig, store: Store, fingerprint: str, this_kind: str) -> str | None:
    """The FINISHED run of this config that makes the job unnecessary, or None: a run timed on a busy machine, at
    another machine speed than its reference (tracking.rerun_contended), or a baseline this machine kind or sitting
    must time again does not count."""
    rerun_contended, slot = cfg.tracking.rerun_contended, cfg.tracking.timing_slot
    done = store.find_finished_run(fingerprint, slot, clean_only=rerun_contended)
    if not done and rerun_contended and store.find_finished_run(fingerprint, slot):
        print("sift_bench: every FINISHED run with this config was timed while other processes used the machine "
              "(tracking.rerun_contended=true): running it again")
    mismatch = (done and rerun_contended and not is_baseline(cfg.sifter)
                and store.pace_mismatch_of(done))
    if mismatch:
        print(f"sift_bench: run {done} already FINISHED with this config, but its evaluations took "
              f"{mismatch[0]:.2f} times as long as those of its time reference, baseline run {mismatch[1]}: the "
              "machine ran at another speed for the two (tracking.rerun_contended=true): running it again")
        return None
    retime = done and is_baseline(cfg.sifter) and baseline_retime_reason(cfg, store, this_kind)
    if retime:
        print(f"sift_bench: run {done} already FINISHED with this config, but {retime}: running it again")
        return None
    return done or None


def machine_refusal(cfg: DictConfig, store: Store, this_kind: str) -> str | None:
    """Why this machine may not run the job (tracking.require_machine, tracking.require_same_machine), or None."""
    required = cfg.tracking.require_machine
    if required and required not in this_kind:
        return (f"tracking.require_machine={required!r}: this machine's kind is '{this_kind}', which does not "
                "contain it (see README.md, 'Machine kinds'); set tracking.require_machine=null to run here anyway")
    if cfg.tracking.require_same_machine:
        kinds = store.finished_machine_kinds(cfg.task.name, cfg.scale.name)
        return other_machine_error(cfg, kinds, this_kind)
    return None


def decide(cfg: DictConfig, world_size: int) -> Decision:
    """Whether this job runs, from the store and the machine."""
    deadline = start_deadline(cfg.tracking.start_before)
    if deadline is not None and datetime.now(deadline.tzinfo) >= deadline:
        # A sitting ends between jobs, not in the middle of one that would be lost (marked KILLED).
        return Decision(SKIP, reason=f"tracking.start_before={cfg.tracking.start_before} has passed "
                                     f"({tracking.run_name(cfg)})")
    store = Store.open(cfg.tracking.uri, cfg.tracking.experiment_name)
    if not os.environ.get(tracking.PARENT_RUN_ENV):  # a sweep's parent marked them before its first job
        liveness.mark_lost_runs(store.uri, store.experiment_id)
    this_kind = machine_tags()["machine.kind"]
    if cfg.tracking.skip_finished:
        done = finished_run_to_skip(cfg, store, config_hash(cfg, world_size), this_kind)
        if done:
            return Decision(SKIP, store.experiment_id, f"run {done} already FINISHED with this config "
                                                       f"({tracking.run_name(cfg)})")
    refusal = machine_refusal(cfg, store, this_kind)
    if refusal:
        return Decision(FAIL, store.experiment_id, refusal)
    return Decision(RUN, store.experiment_id)
