"""Timing references and paired savings: each run's % time saved against the baseline of its own task and machine
kind timed nearest to it (among those timed at the kind's usual speed), unless the machine ran at another speed for
the run than for that baseline; the baseline row's own spread."""

import math

import numpy as np
import pandas as pd

from sift_bench.machine import CONTENDED_FRACTION, pace_mismatch
from sift_bench.report.frame import run_rows
from sift_bench.report.vocabulary import BASELINE


REFERENCE_COLUMNS = ["reference_run", "reference_time_s", "reference_cost_usd", "reference_eval_time_s"]


def timing_references(rows: pd.DataFrame) -> pd.DataFrame:
    """Each run's time reference: the baseline run (sifter=none) of its task and machine kind whose midpoint in
    time is nearest the run's own (the earlier one on a tie), at that baseline's pace (train_time_s / work_trained)
    times the mean work_trained of the task's baseline runs on that kind. Columns reference_run,
    reference_time_s and reference_cost_usd (cost scaled alike), and reference_eval_time_s (that baseline's
    evaluation time, the same work in every run: `eval_pace`); NaN where the kind has no baseline of the task.
    baseline_deviation, for the baselines that serve as references: 100 * (1 - its time at the mean work / the mean
    of those), the spread of the baseline's own timing.

    A machine drifts between sittings and within one (a shared or throttled host), so the baseline timed closest
    to a run says best how fast the machine was for it; the work scaling makes baselines of seeds that trained
    different amounts of work (padded tokens differ by seed) compare as paces. A contended baseline (other
    processes above CONTENDED_FRACTION of a core) is left out while a clean one exists, and so is a baseline timed
    while the host ran at another speed than for the others (`baselines_off_pace`; column baseline_off_pace, its
    evaluation time over their median) while one in pace exists. A baseline that logged no work stands for its own
    time, and runs without time stamps take the mean over the kind's baselines."""
    references = pd.DataFrame({"reference_run": pd.Series(np.nan, index=rows.index, dtype=object),
                               "reference_time_s": math.nan, "reference_cost_usd": math.nan,
                               "reference_eval_time_s": math.nan, "baseline_deviation": math.nan,
                               "baseline_off_pace": math.nan}, index=rows.index)
    for _, runs in rows.groupby(["task", "machine_kind"], dropna=False, sort=False):
        baselines = runs[(runs["sifter"] == BASELINE) & runs["train_time_s"].notna()]
        if baselines.empty:
            continue
        # A baseline timed while other processes used the machine measures them too: it is a reference only
        # when its kind has no clean baseline of the task.
        clean = baselines[~(baselines["other_cpu_fraction"] > CONTENDED_FRACTION)]
        baselines = clean if not clean.empty else baselines
        # A baseline timed on a slowed host lends that speed to every run timed nearest it: their savings read
        # too high, or their evaluations mismatch its own and their savings are lost (`eval_pace`).
        off_pace = baselines_off_pace(baselines)
        if off_pace.isna().any():
            references.loc[off_pace.dropna().index, "baseline_off_pace"] = off_pace.dropna()
            baselines = baselines[off_pace.isna()]
        # In time order, so idxmin's first-of-equals is the earlier baseline, whatever the frame's order.
        baselines = baselines.sort_values("midpoint_s", kind="stable")
        to_mean_work = (baselines["work_trained"].mean() / baselines["work_trained"]).fillna(1.0)
        time_at_mean_work = baselines["train_time_s"] * to_mean_work
        cost_at_mean_work = baselines["cost_usd"] * to_mean_work
        for index in runs.index:
            distance = (baselines["midpoint_s"] - runs.at[index, "midpoint_s"]).abs()
            if distance.notna().any():
                nearest = distance.idxmin()
                references.loc[index, REFERENCE_COLUMNS] = [baselines.at[nearest, "run_id"],
                                                            time_at_mean_work[nearest], cost_at_mean_work[nearest],
                                                            baselines.at[nearest, "eval_time_s"]]
            else:
                references.loc[index, REFERENCE_COLUMNS] = [np.nan, time_at_mean_work.mean(),
                                                            cost_at_mean_work.mean(), baselines["eval_time_s"].mean()]
        # How far each reference baseline's own timing is from their mean: the noise any savings figure sits on.
        references.loc[baselines.index, "baseline_deviation"] = 100 * (1 - time_at_mean_work
                                                                       / time_at_mean_work.mean())
    return references


def baselines_off_pace(baselines: pd.DataFrame) -> pd.Series:
    """Per baseline run (of one task and machine kind), its evaluation time over the median of theirs where the
    two lie outside [1 / PACE_MISMATCH, PACE_MISMATCH] (`machine.pace_mismatch`), else NaN. The evaluations are
    the same work in every run of a task, so this sees a baseline timed while the host ran at another speed."""
    median = baselines["eval_time_s"].median()
    return pd.Series([pace_mismatch(eval_s, median) or math.nan for eval_s in baselines["eval_time_s"]],
                     index=baselines.index, dtype="float64")


def paired_savings(rows: pd.DataFrame) -> pd.DataFrame:
    """Each run's % time and cost savings against its time reference (`timing_references`: the baseline of its
    own task and machine kind nearest in time): 100 * (1 - time / reference time). NaN where that kind has no
    baseline run of the task, and for a run whose pace mismatches its reference's (`eval_pace`, column
    pace_mismatch: the machine ran at another speed for it), whose accuracy still counts. (A baseline row reports
    0 by definition: `savings_stats`.)

    Pairing within a kind and in time is what lets runs from different machines and sittings share a table: a
    ratio measured on one machine at one time, not a time, is what is averaged."""
    rows = pd.concat([rows, timing_references(rows)], axis=1)
    rows["pace_mismatch"] = eval_pace(rows)
    timed_alike = rows["pace_mismatch"].isna()
    rows["run_time_savings"] = (100 * (1 - rows["train_time_s"] / rows["reference_time_s"].astype(float))
                                ).where(timed_alike)
    rows["run_cost_savings"] = (100 * (1 - rows["cost_usd"] / rows["reference_cost_usd"].astype(float))
                                ).where(timed_alike)
    return rows


def eval_pace(rows: pd.DataFrame) -> pd.Series:
    """Per run (rows with `timing_references`' columns), its evaluation time over its reference baseline's where
    the machine ran at another speed for the two (`machine.pace_mismatch`), else NaN; NaN for baselines, which are
    the references and are not judged against one another. The evaluations are the same work in every run of a
    task's table, so this sees a slowed host, which other_cpu_fraction does not."""
    ratios = [pace_mismatch(run, reference) or math.nan for run, reference
              in zip(rows["eval_time_s"], rows["reference_eval_time_s"].astype(float))]
    return pd.Series(ratios, index=rows.index, dtype="float64").where(rows["sifter"] != BASELINE)


def timed_runs(used: pd.DataFrame) -> pd.DataFrame:
    """The runs frame (`run_rows`) with each run's time reference and paired savings (`paired_savings`): what the
    table reads, and the notes' timing helpers below, which report_notes hands one copy of it."""
    return paired_savings(run_rows(used))


def pace_mismatched_runs(timed: pd.DataFrame) -> dict[str, tuple[float, str]]:
    """run_id -> (its evaluation time over its reference's, the reference baseline's run_id), for the runs other
    than baselines timed at another machine speed than their reference: their savings are left out. `timed` is
    `timed_runs(used)`."""
    odd = timed[timed["pace_mismatch"].notna()]
    return {run_id: (ratio, reference) for run_id, ratio, reference
            in zip(odd["run_id"], odd["pace_mismatch"], odd["reference_run"])}


def off_pace_baselines(timed: pd.DataFrame) -> dict[str, float]:
    """run_id -> its evaluation time over the median of its kind's baselines', for the baselines that serve as no
    run's time reference because the host ran at another speed for them (`timing_references`). `timed` is
    `timed_runs(used)`."""
    odd = timed[timed["baseline_off_pace"].notna()]
    return dict(zip(odd["run_id"], odd["baseline_off_pace"]))


def runs_without_baseline(timed: pd.DataFrame) -> dict[str, str]:
    """run_id -> machine kind, for the runs whose kind has no baseline run of their task: no savings for them.
    `timed` is `timed_runs(used)`."""
    lacking = timed[timed["reference_time_s"].isna() & timed["train_time_s"].notna()
                    & timed["task"].isin(timed.loc[timed["sifter"] == BASELINE, "task"])]
    return dict(zip(lacking["run_id"], lacking["machine_kind"]))


def savings_stats(group: pd.DataFrame) -> dict[str, float]:
    """A row's % time and cost savings and their spread over its runs. The baseline row's savings are 0 by
    definition (it is the reference), and its std is the spread of its own timings (`baseline_deviation`): what a
    baseline would read as "savings" against its mean, the floor under every other row's std."""
    if (group["sifter"] == BASELINE).all():
        deviation = group["baseline_deviation"].dropna()
        return {"pct_time_savings": 0.0 if len(deviation) else math.nan, "pct_time_savings_std": deviation.std(),
                "pct_cost_savings": 0.0 if len(deviation) else math.nan}
    return {"pct_time_savings": group["run_time_savings"].mean(),
            "pct_time_savings_std": group["run_time_savings"].std(),
            "pct_cost_savings": group["run_cost_savings"].mean()}
