"""Diagnostics on the runs, for the report's notes: missing metrics, contended or oddly paced timings, settings
that vary within a task, the machines and the commands."""

import numpy as np
import pandas as pd

from sift_bench.machine import CONTENDED_FRACTION
from sift_bench.report.frame import _tag_or_param, column
from sift_bench.report.vocabulary import (BASELINE, NEEDED_METRICS, NOT_COMPARED, NOT_COMPARED_PREFIXES,
                                          NOT_COMPARED_SUFFIXES)


def missing_metrics(used: pd.DataFrame) -> dict[str, list[str]]:
    """run_id -> the needed final metrics it lacks."""
    missing = {}
    for index, run_id in used["run_id"].items():
        lacks = [name for name in NEEDED_METRICS if pd.isna(column(used, f"metrics.{name}")[index])]
        if lacks:
            missing[run_id] = lacks
    return missing


def contended_runs(used: pd.DataFrame, threshold: float = CONTENDED_FRACTION) -> dict[str, float]:
    """run_id -> other_cpu_fraction, for the runs whose machine was busy with other work while they trained,
    so their times (and so their savings) are suspect. Runs that did not measure it are not listed."""
    fraction = column(used, "metrics.other_cpu_fraction")
    busy = fraction > threshold
    return dict(zip(used["run_id"][busy], fraction[busy]))


PACE_TOLERANCE = 0.10  # a baseline run this far from its task's median pace is named in the notes


def baseline_pace(timed: pd.DataFrame, tolerance: float = PACE_TOLERANCE) -> list[dict]:
    """The baselines timed at an odd pace: one entry per task and machine kind whose baseline has a run more than
    `tolerance` (a fraction) slower or faster than the median pace of all that task's runs on that kind.

    Pace is training seconds per unit of work trained (a sample, or a padded token), the scoring pass left out,
    so every selection rule's runs measure the same thing: how fast the machine trained. Each run's savings
    divide by the pace of the baseline nearest it in time (`timing_references`), so a baseline timed while the
    machine ran slow moves the savings of every run that takes it as reference, and other_cpu_fraction does not
    see a slowdown that no process on the machine caused (a shared or throttled host). Each entry gives the odd
    runs (run_id, seed, pace / median pace), how many runs take each odd one as reference (`referenced_by`), and
    the baseline's mean time as measured and as it would be with every baseline run at the median pace.
    Kinds with fewer than 3 runs that measured their work are left out: no median. `timed` is
    `timing.timed_runs(used)`."""
    rows = timed.copy()
    # A run without work_trained (or with none) gets a NaN or infinite pace and is left out.
    rows["pace"] = (rows["train_time_s"] - rows["sift_time_s"].fillna(0.0)) / rows["work_trained"]
    references = rows["reference_run"].value_counts()
    entries = []
    for (task, kind), runs in rows[np.isfinite(rows["pace"])].groupby(["task", "machine_kind"], dropna=False, sort=True):
        baseline = runs[runs["sifter"] == BASELINE]
        if len(runs) < 3 or baseline.empty:
            continue
        median = runs["pace"].median()
        ratio = baseline["pace"] / median
        odd = baseline[(ratio - 1).abs() > tolerance]
        if odd.empty:
            continue
        entries.append({
            "task": task, "machine_kind": kind, "n_runs": len(runs), "median_pace": median,
            "odd": [(run_id, seed, ratio[index]) for index, run_id, seed in zip(odd.index, odd["run_id"], odd["seed"])],
            "referenced_by": {run_id: int(references.get(run_id, 0)) for run_id in odd["run_id"]},
            "baseline_time_s": baseline["train_time_s"].mean(),
            "baseline_time_at_median_s": (median * baseline["work_trained"]).mean(),
        })
    return entries


def varying_settings(used: pd.DataFrame) -> dict:
    """task -> params (other than sifter, seed and where-files-go) whose values differ between its runs,
    which would make its rows compare different training setups."""
    tasks = _tag_or_param(used, "task", "task.name")
    compared = [name for name in used.columns if name.startswith("params.") and name not in NOT_COMPARED
                and not name.startswith(NOT_COMPARED_PREFIXES) and not name.endswith(NOT_COMPARED_SUFFIXES)]
    varying = {}
    for task in tasks.drop_duplicates():
        runs = used[tasks == task] if pd.notna(task) else used[tasks.isna()]
        names = [name for name in compared if runs[name].fillna("\0").nunique() > 1]
        if names:
            varying[task] = names
    return varying


def machines(used: pd.DataFrame) -> list[str]:
    """Each distinct machine the runs ran on, with how many runs: CPU model, cores, torch, GPU if any."""
    described = pd.DataFrame({name: column(used, f"tags.{name}").fillna("unknown")
                              for name in ("machine.cpu", "machine.cores", "torch_version", "machine.gpu")})
    lines = []
    for (cpu, cores, torch_version, gpu), count in described.value_counts(sort=False).items():
        gpu_text = "" if gpu == "unknown" else f", GPU {gpu}"
        lines.append(f"CPU {cpu}, {cores} cores{gpu_text}, torch {torch_version} ({count} runs)")
    return lines


def commands(used: pd.DataFrame) -> list[str]:
    """The distinct command lines that launched the runs, oldest first."""
    ordered = used.sort_values("start_time", kind="stable") if "start_time" in used else used
    return list(column(ordered, "tags.command").dropna().drop_duplicates())


def fewer_seeds(table: pd.DataFrame) -> dict:
    """task -> the configurations (config, seeds) that lack some of the seeds their task's baseline ran: an
    unfinished sweep or a failed run. Their accuracy delta is paired over the seeds they have."""
    lacking = {}
    for task, rows in table.groupby("task", sort=False):
        base = rows[rows["sifter"] == BASELINE]
        if base.empty:
            continue
        # delta_seeds is the seeds shared with the baseline: short of the baseline's own, some are missing.
        short = rows[rows["delta_seeds"] != base.iloc[0]["delta_seeds"]]
        if len(short):
            lacking[task] = list(zip(short["config"], short["seeds"]))
    return lacking
