"""report.md's notes: what a reader of the table must be warned of before trusting a row (a task without baseline,
seeds missing, metrics missing, runs timed on a kind without baseline, on a busy machine or at another machine speed
than their reference, a baseline at an odd pace or left out as a reference, runs that differ in more than the
sifter). Pure pandas, from the table and the runs frame."""

import pandas as pd

from sift_bench.machine import CONTENDED_FRACTION, PACE_MISMATCH
from sift_bench.report.diagnostics import baseline_pace, contended_runs, fewer_seeds, missing_metrics, varying_settings
from sift_bench.report.frame import column
from sift_bench.report.markdown import fmt
from sift_bench.report.timing import off_pace_baselines, pace_mismatched_runs, runs_without_baseline, timed_runs
from sift_bench.report.verdicts import tasks_without_baseline


def _pace_note(pace: dict) -> str:
    odd = "; ".join(f"run {run_id} (seed {seed}) at {100 * (ratio - 1):+.0f} %, the time reference of "
                    f"{pace['referenced_by'][run_id]} runs (x {ratio:.3f})" for run_id, seed, ratio in pace["odd"])
    measured, at_median = pace["baseline_time_s"], pace["baseline_time_at_median_s"]
    return (f"Task {fmt(pace['task'])} on `{pace['machine_kind']}`: the baseline trained at an odd pace "
            f"(seconds per unit of work, scoring left out, against the median of the task's {pace['n_runs']} runs "
            f"on that kind): {odd}. Each run's savings divide by the pace of the baseline nearest it in time; at "
            f"the median pace a run that takes an odd baseline as reference would read 100 - (100 - S) x that "
            f"factor instead of its % time savings S. The baseline's mean time is {measured:.1f} s, "
            f"{at_median:.1f} s at the median pace. The machine's speed drifted between runs: read savings within "
            "that margin as noise, unless the drift lasted long enough for the nearest baseline to share it.")


def retimed_runs(used: pd.DataFrame, timed: pd.DataFrame, run_ids) -> dict[str, tuple[str, str]]:
    """run_id -> (run_id, machine kind) of the latest run in the table of the same config and seed (config_hash)
    whose savings count, for each of `run_ids` that one timed again. The table keeps one run per config and seed per
    machine kind, so such a twin ran on another kind, and both count for accuracy."""
    hashes = dict(zip(used["run_id"], column(used, "tags.config_hash")))
    counted = timed[timed["run_time_savings"].notna()].sort_values("midpoint_s", kind="stable")
    counted_configs = counted["run_id"].map(hashes)  # once, not per run looked up
    retimes = {}
    for run_id in run_ids:
        config = hashes.get(run_id)
        if pd.isna(config):
            continue  # a run logged before config_hash existed: no twin can be told apart
        twins = counted[(counted["run_id"] != run_id) & (counted_configs == config)]
        if len(twins):
            retimes[run_id] = (twins["run_id"].iloc[-1], twins["machine_kind"].iloc[-1])
    return retimes


def report_notes(table: pd.DataFrame, used: pd.DataFrame, time_plot_drawn: bool) -> list[str]:
    notes = []
    timed = timed_runs(used)  # each run's time reference, read by the timing notes below
    for task in tasks_without_baseline(table):
        notes.append(f"Task {fmt(task)} has no baseline (sifter=none) run at this scale: its savings, "
                     "accuracy_baseline and accuracy_delta are empty.")
    for task, short in fewer_seeds(table).items():
        notes.append(f"Task {fmt(task)}: {len(short)} configurations lack some of the baseline's seeds "
                     "(an unfinished sweep or a failed run); their accuracy delta is paired over the seeds they "
                     "have: " + "; ".join(f"{config} (seeds {seeds})" for config, seeds in short) + ".")
    for run_id, names in missing_metrics(used).items():
        notes.append(f"Run {run_id} lacks {', '.join(names)}: left out of those means.")
    for run_id, kind in runs_without_baseline(timed).items():
        notes.append(f"Run {run_id} ran on `{kind}`, where its task has no baseline run: its savings are unknown "
                     "and left out of the means (its accuracy counts). Run the baseline on that kind to pair it.")
    for run_id, fraction in contended_runs(used).items():
        notes.append(f"Run {run_id}: other processes used {fraction:.2f} of a core per second while it trained "
                     f"(over {CONTENDED_FRACTION:g}): its time is suspect.")
    mismatched = pace_mismatched_runs(timed)
    retimes = retimed_runs(used, timed, mismatched)
    for run_id, (ratio, reference) in mismatched.items():
        retime = (f"Run {retimes[run_id][0]} timed the same config and seed again on `{retimes[run_id][1]}`: its "
                  "savings stand for that seed." if run_id in retimes
                  else "The table sweeps (tracking.rerun_contended) train it again.")
        notes.append(f"Run {run_id}: its evaluations (the same work in every run of its task) took {ratio:.2f} times "
                     f"as long as those of its time reference, baseline run {reference} (outside 1/{PACE_MISMATCH:g} "
                     f"to {PACE_MISMATCH:g}): the machine ran at another speed for the two, which other_cpu_fraction "
                     "does not see (a slowed host). Its savings are left out of its row's; its accuracy counts. "
                     + retime)
    for run_id, ratio in off_pace_baselines(timed).items():
        notes.append(f"Baseline run {run_id}: its evaluations took {ratio:.2f} times the median of its kind's "
                     f"baselines' (outside 1/{PACE_MISMATCH:g} to {PACE_MISMATCH:g}): the host ran at another speed "
                     "for it, so it is no run's time reference (the baseline timed nearest in time among the others "
                     "is); its accuracy counts.")
    notes += [_pace_note(pace) for pace in baseline_pace(timed)]
    for task, names in varying_settings(used).items():
        notes.append(f"Runs of task {fmt(task)} differ in {', '.join(names)}, not only in the sifter and "
                     "seed: its rows may compare different training setups.")
    if not time_plot_drawn:
        notes.append("No per-evaluation history for the configurations to plot: accuracy_vs_time.png not drawn.")
    return notes
