"""Which runs go into the table, and why each other run does not (`excluded.csv`)."""

import numpy as np
import pandas as pd

from sift_bench.machine import CONTENDED_FRACTION
from sift_bench.report.frame import INFOBATCH, INFOBATCH_SCHEDULE, _tag_or_param, column, machine_kinds
from sift_bench.report.vocabulary import BASELINE, EXCLUDED_COLUMNS, Exclusion


SUPERSEDED_INFOBATCH = ("superseded: InfoBatch's earlier by-samples schedule (logged before anneal_by); the table "
                        "holds InfoBatch as written, anneal_by=epochs")


def choose_machine(kinds: pd.Series, machine: str | None) -> str | None:
    """The one machine kind a task's rows are built from: the kind whose name contains `machine` (None when
    none does), or else the kind with the most runs (the first seen on a tie). None when there are no runs."""
    present = list(kinds.drop_duplicates())
    if machine is not None:
        matches = [kind for kind in present if machine in kind]
        if len(matches) > 1:
            raise ValueError(f"--machine {machine!r} must match one machine kind per task, matched {len(matches)}: "
                             + "; ".join(matches))
        return matches[0] if matches else None
    return kinds.value_counts(sort=False).idxmax() if present else None


def split_runs(runs: pd.DataFrame, scale: str, machine: str | None = None,
               tasks_wanted: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The FINISHED job runs of this scale, and every other run with the reason it was left out.

    Every machine kind goes in: `build_table` measures each run's savings against the baseline of its own kind,
    so a table can grow across sittings on different machines. With `machine`, only the kind (one per task,
    see `choose_machine`) whose name contains it goes in.
    A rerun of an identical config and seed (same config_hash) on the same machine kind counts once: the latest
    FINISHED one. On two kinds both count. Every FINISHED baseline run counts, whatever its hash: the two of a
    seed's block tagged `timing_slot` first and last, and those timed again on a new kind or in a new sitting
    (tracking.baseline_per_machine, baseline_per_sitting) are each a measurement of the machine's pace, which
    savings take from the baseline nearest in time; `build_table` counts them as one seed for accuracy. A baseline
    timed under contention (other processes above CONTENDED_FRACTION of a core) whose config and seed has a clean
    FINISHED run on the same kind is left out, a rerun replaced by its clean twin, as for every other sifter.
    With `tasks_wanted`, the runs of other tasks are left out (a task whose table is still being run).
    """
    scales = _tag_or_param(runs, "scale", "scale.name")
    tasks = _tag_or_param(runs, "task", "task.name").fillna("unknown task")
    reason = pd.Series(np.nan, index=runs.index, dtype=object)
    exclusion = pd.Series(np.nan, index=runs.index, dtype=object)

    def leave_out(which: pd.Series, why: Exclusion, words) -> None:
        reason[which], exclusion[which] = words, why.value

    leave_out(column(runs, "tags.run_kind") == "sweep", Exclusion.SWEEP_PARENT, "sweep parent")
    other_scale = reason.isna() & (scales != scale)
    leave_out(other_scale, Exclusion.OTHER_SCALE, "scale " + scales[other_scale].fillna("unknown"))
    if tasks_wanted is not None:
        other_task = reason.isna() & ~tasks.isin(tasks_wanted)
        leave_out(other_task, Exclusion.OTHER_TASK, "task " + tasks[other_task])
    unfinished = reason.isna() & (column(runs, "status") != "FINISHED")
    leave_out(unfinished, Exclusion.UNFINISHED, "status " + column(runs, "status")[unfinished].fillna("unknown"))
    # InfoBatch before `anneal_by` existed annealed by samples, mid-epoch: not InfoBatch as written (issue 33).
    # Its runs stay in the store and in excluded.csv; the table holds the official whole-epoch schedule (and
    # `anneal_by=samples` where a run asks for it by name).
    superseded = (reason.isna() & (_tag_or_param(runs, "sifter", "sifter.name") == INFOBATCH)
                  & column(runs, f"params.sifter.{INFOBATCH_SCHEDULE}").isna())
    leave_out(superseded, Exclusion.SUPERSEDED, SUPERSEDED_INFOBATCH)
    kinds = machine_kinds(runs)
    eligible = reason.isna()
    if machine is not None:
        chosen = {task: choose_machine(kinds[eligible & (tasks == task)], machine)
                  for task in tasks[eligible].drop_duplicates()}
        if chosen and all(kind is None for kind in chosen.values()):
            raise ValueError(f"--machine {machine!r} matches no machine kind of the FINISHED runs; the kinds are: "
                             + "; ".join(kinds[eligible].drop_duplicates()))
        other_machine = eligible & (kinds != tasks.map(chosen))
        leave_out(other_machine, Exclusion.OTHER_MACHINE, "machine " + kinds[other_machine])

    for index, words in rerun_reasons(runs[reason.isna()], kinds).items():
        reason[index], exclusion[index] = words, Exclusion.RERUN.value

    used = runs[reason.isna()].reset_index(drop=True)
    excluded = excluded_frame(runs[reason.notna()], scales[reason.notna()], reason, exclusion)
    return used, excluded


def excluded_frame(left_out: pd.DataFrame, scales: pd.Series, reason: pd.Series, exclusion: pd.Series) -> pd.DataFrame:
    """The left-out runs as excluded.csv lists them: who they are, and why (`reason` in words, `kind` its key)."""
    return pd.DataFrame({
        "run_id": left_out["run_id"], "run_name": column(left_out, "tags.mlflow.runName"),
        "status": column(left_out, "status"), "scale": scales,
        "task": column(left_out, "tags.task"), "sifter": column(left_out, "tags.sifter"),
        "seed": column(left_out, "tags.seed"), "reason": reason[left_out.index], "kind": exclusion[left_out.index],
    }, columns=list(EXCLUDED_COLUMNS)).reset_index(drop=True)


def rerun_reasons(candidates: pd.DataFrame, kinds: pd.Series) -> dict:
    """{index: why} for the runs another run of the same config and seed on the same machine kind replaces: an
    earlier FINISHED run (the latest counts), and a baseline timed under contention that has a clean twin."""
    reasons = {}
    if "start_time" in candidates:
        candidates = candidates.sort_values("start_time", kind="stable")
    # One run per config and seed per machine kind (the config hash leaves the machine out); baselines all stay.
    hashes = column(candidates, "tags.config_hash")
    identity = hashes + " on " + kinds[candidates.index]
    known = identity.notna() & (_tag_or_param(candidates, "sifter", "sifter.name") != BASELINE)
    latest = candidates[known].groupby(identity[known], sort=False)["run_id"].last()
    for index, key in identity[known].items():
        if latest[key] != candidates.at[index, "run_id"]:
            reasons[index] = f"rerun: same config_hash as {latest[key]}"
    # A baseline timed under contention that a clean run of the same config and seed replaced (the table sweeps'
    # tracking.rerun_contended trains it again) is in no figure: its time measured the other processes too.
    contended = column(candidates, "metrics.other_cpu_fraction") > CONTENDED_FRACTION
    clean_baselines = identity.notna() & ~known & ~contended
    clean_twin = candidates[clean_baselines].groupby(identity[clean_baselines], sort=False)["run_id"].last()
    for index in candidates.index[identity.notna() & ~known & contended]:
        if identity[index] in clean_twin:
            fraction = candidates.at[index, "metrics.other_cpu_fraction"]
            reasons[index] = (f"rerun: timed under contention (other processes {fraction:.2f} of a core), replaced "
                              f"by the clean run {clean_twin[identity[index]]}")
    return reasons


def exclusion_of_reason(reason) -> str | float:
    """The Exclusion of a reason in words, for an excluded.csv written before it had its `kind` column."""
    if not isinstance(reason, str):
        return np.nan
    if reason == "sweep parent":
        return Exclusion.SWEEP_PARENT.value
    prefixes = {"scale ": Exclusion.OTHER_SCALE, "task ": Exclusion.OTHER_TASK, "status ": Exclusion.UNFINISHED,
                "machine ": Exclusion.OTHER_MACHINE, "rerun": Exclusion.RERUN, "superseded": Exclusion.SUPERSEDED}
    return next((kind.value for prefix, kind in prefixes.items() if reason.startswith(prefix)), np.nan)
