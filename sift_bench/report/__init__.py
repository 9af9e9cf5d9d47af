"""The savings table, its frontier, its control pairing and its headlines, from a frame of runs: pure pandas, no I/O.

A runs frame is what `mlflow.search_runs` returns (run_id, status, start_time, end_time, metrics.*, params.*,
tags.*), read from the store or back from runs.csv; its `metrics.*` hold each metric's LAST value, the run's final
figure. `python -m sift_bench.report` (__main__.py) does the reading, writing and plotting around these functions,
markdown.py the text of report.md, frontier.py the piecewise-linear curves.

Accuracy comes twice: validation accuracy chooses (the headlines pick on it), test accuracy reports (every figure
printed as "the" accuracy is test accuracy), so a configuration is never chosen on the figure it is reported with.
"""

import math

import numpy as np
import pandas as pd

from sift_bench.report import frontier
from sift_bench.machine import CONTENDED_FRACTION
from sift_bench.tracking import NOT_HASHED, NOT_HASHED_TRAINER

BASELINE = "none"
CONTROL = "random"
# Always columns of table.csv, so the SageMaker-style columns exist whichever sifters have run.
SIFTER_PARAMS = ("beta_value", "loss_history_length", "sift_delay", "keep_fraction")
# Accuracy points a configuration may lose against the baseline (on validation) and still count for the headline.
HEADLINE_TOLERANCE = 0.5
# Final metrics a row of the table needs; a run lacking one is named in the report's notes.
NEEDED_METRICS = ("val_accuracy", "test_accuracy", "train_time_s", "cost_usd", "pct_accepted")
HISTORY_METRICS = ("train_loss", "val_accuracy", "test_accuracy", "pct_accepted", "epoch", "train_time_s",
                   "samples_seen", "samples_trained", "lr_multiplier")
EXCLUDED_COLUMNS = ("run_id", "run_name", "status", "scale", "task", "sifter", "seed", "reason")
# The two accuracies and the prefix of their columns: unprefixed columns are test accuracy, `val_` validation.
ACCURACIES = (("test_accuracy", ""), ("val_accuracy", "val_"))
FRONTIER_STATS = ("frontier_accuracy", "accuracy_vs_frontier", "accuracy_vs_frontier_std", "verdict_vs_frontier",
                  "frontier_savings", "extra_savings")
FRONTIER_COLUMNS = tuple(prefix + name for _, prefix in ACCURACIES for name in FRONTIER_STATS)
TABLE_STATS = ("n_seeds", "seeds", "pct_accepted", "pct_accepted_std", "pct_time_savings",
               "pct_time_savings_std", "pct_cost_savings", "test_accuracy", "test_accuracy_std", "val_accuracy",
               "val_accuracy_std", "accuracy_baseline", "accuracy_delta", "val_accuracy_baseline",
               "val_accuracy_delta", "delta_seeds", *FRONTIER_COLUMNS, "time_to_target_s", "n_reached_target",
               "train_time_s", "train_time_std", "sift_time_s", "cost_usd", "n_runs", "n_machine_kinds", "run_ids")
# Params that differ between runs of one task without changing what is compared: the sifter is the
# configuration, the seed is what is averaged over, the rest only says where files go or how progress shows.
NOT_COMPARED_PREFIXES = ("params.sifter.", *(f"params.{group}." for group in NOT_HASHED))
# trainer.loop is part of a row's task instead (`task_labels`).
NOT_COMPARED = ("params.seed", "params.sweep_name", "params.trainer.loop",
                *(f"params.trainer.{key}" for key in NOT_HASHED_TRAINER))
# The code a task or a sifter names by import path: its name already says which, and runs logged before the key
# existed lack it.
NOT_COMPARED_SUFFIXES = ("._target_",)
NATIVE_LOOP = "native"


# ---------------------------------------------------------------- runs frame

def _text(value):
    if value is None or value == "" or (not isinstance(value, str) and pd.isna(value)):
        return np.nan
    return str(value)


def _number(value) -> float:
    # float() of a string is exact, so a metric written to CSV and read back is the same float.
    if value is None or value == "" or (not isinstance(value, str) and pd.isna(value)):
        return math.nan
    return float(value)


def normalise(runs: pd.DataFrame) -> pd.DataFrame:
    """The same frame whether it came from the store or from CSV: metrics float, everything else str or NaN."""
    columns = {}
    for name in runs.columns:
        if name.startswith("metrics."):
            columns[name] = runs[name].map(_number).astype("float64")
        else:
            columns[name] = runs[name].astype(object).map(_text).astype(object)
    return pd.DataFrame(columns, index=pd.RangeIndex(len(runs)))


def with_accuracy_metric(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The runs with the metric `metric` (one a script logged under its own name, such as `val_acc`) as their test
    and validation accuracy, where they logged it; in percent, a metric whose values all lie in [0, 1] being read as
    a fraction. A script has one accuracy, so for its rows the same figure chooses and reports."""
    name = f"metrics.{metric}"
    if name not in runs.columns or runs[name].isna().all():
        logged = sorted(key[len("metrics."):] for key in runs.columns
                        if key.startswith("metrics.") and runs[key].notna().any())
        raise ValueError(f"--metric {metric!r}: no run logged a metric of that name; the runs logged: "
                         + ", ".join(logged))
    values = runs[name]
    percent = values * 100.0 if values.dropna().between(0.0, 1.0).all() else values
    runs = runs.copy()
    for accuracy in ("metrics.test_accuracy", "metrics.val_accuracy"):
        runs[accuracy] = percent.where(values.notna(), column(runs, accuracy))
    return runs


def column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A column, or all NaN when no run logged it."""
    if name in frame.columns:
        return frame[name]
    return pd.Series(math.nan, index=frame.index, dtype="float64" if name.startswith("metrics.") else object)


def _tag_or_param(runs: pd.DataFrame, tag: str, param: str) -> pd.Series:
    return column(runs, f"tags.{tag}").where(column(runs, f"tags.{tag}").notna(), column(runs, f"params.{param}"))


def machine_kinds(runs: pd.DataFrame) -> pd.Series:
    """Each run's `machine.kind` tag; runs logged before that tag existed get their CPU name and cores. A run of
    several DDP ranks (tag world_size > 1) is of its own kind, "<kind>, N ranks": its time pairs only with runs of
    the same world size."""
    kinds = column(runs, "tags.machine.kind")
    legacy = (column(runs, "tags.machine.cpu").fillna("unknown CPU").astype(str) + ", "
              + column(runs, "tags.machine.cores").fillna("?").astype(str) + " cores (no machine.kind tag)")
    kinds = kinds.where(kinds.notna(), legacy)
    ranks = column(runs, "tags.world_size").fillna("1").astype(str)
    return kinds.where(ranks == "1", kinds + ", " + ranks + " ranks")


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
    savings take from the baseline nearest in time; `build_table` counts them as one seed for accuracy.
    With `tasks_wanted`, the runs of other tasks are left out (a task whose table is still being run).
    """
    scales = _tag_or_param(runs, "scale", "scale.name")
    tasks = _tag_or_param(runs, "task", "task.name").fillna("unknown task")
    reason = pd.Series(np.nan, index=runs.index, dtype=object)
    reason[column(runs, "tags.run_kind") == "sweep"] = "sweep parent"
    other_scale = reason.isna() & (scales != scale)
    reason[other_scale] = "scale " + scales[other_scale].fillna("unknown")
    if tasks_wanted is not None:
        other_task = reason.isna() & ~tasks.isin(tasks_wanted)
        reason[other_task] = "task " + tasks[other_task]
    unfinished = reason.isna() & (column(runs, "status") != "FINISHED")
    reason[unfinished] = "status " + column(runs, "status")[unfinished].fillna("unknown")
    kinds = machine_kinds(runs)
    eligible = reason.isna()
    if machine is not None:
        chosen = {task: choose_machine(kinds[eligible & (tasks == task)], machine)
                  for task in tasks[eligible].drop_duplicates()}
        if chosen and all(kind is None for kind in chosen.values()):
            raise ValueError(f"--machine {machine!r} matches no machine kind of the FINISHED runs; the kinds are: "
                             + "; ".join(kinds[eligible].drop_duplicates()))
        other_machine = eligible & (kinds != tasks.map(chosen))
        reason[other_machine] = "machine " + kinds[other_machine]

    candidates = runs[reason.isna()]
    if "start_time" in candidates:
        candidates = candidates.sort_values("start_time", kind="stable")
    # One run per config and seed per machine kind (the config hash leaves the machine out); baselines all stay.
    hashes = column(candidates, "tags.config_hash")
    identity = hashes + " on " + kinds[candidates.index]
    known = identity.notna() & (_tag_or_param(candidates, "sifter", "sifter.name") != BASELINE)
    latest = candidates[known].groupby(identity[known], sort=False)["run_id"].last()
    for index, key in identity[known].items():
        if latest[key] != candidates.at[index, "run_id"]:
            reason[index] = f"rerun: same config_hash as {latest[key]}"

    used = runs[reason.isna()].reset_index(drop=True)
    left_out = runs[reason.notna()]
    excluded = pd.DataFrame({
        "run_id": left_out["run_id"], "run_name": column(left_out, "tags.mlflow.runName"),
        "status": column(left_out, "status"), "scale": scales[reason.notna()],
        "task": column(left_out, "tags.task"), "sifter": column(left_out, "tags.sifter"),
        "seed": column(left_out, "tags.seed"), "reason": reason[reason.notna()],
    }, columns=list(EXCLUDED_COLUMNS)).reset_index(drop=True)
    return used, excluded


# ---------------------------------------------------------------- table

def sifter_params(runs: pd.DataFrame) -> list[str]:
    """The sifter's params that any run logged (without `name`), SageMaker's first: new sifters add their own."""
    logged = [name[len("params.sifter."):] for name in runs.columns
              if name.startswith("params.sifter.") and name not in ("params.sifter.name", "params.sifter._target_")
              and runs[name].notna().any()]
    return [*SIFTER_PARAMS, *sorted(name for name in logged if name not in SIFTER_PARAMS)]


def task_labels(used: pd.DataFrame) -> pd.Series:
    """Each run's task, with the training loop when it is not sift_bench's own: `sst2_bert (hf_trainer)`. Runs of
    another loop get their own baseline, frontier and timing references, and sit beside the native rows."""
    tasks = _tag_or_param(used, "task", "task.name")
    loops = column(used, "params.trainer.loop").fillna(NATIVE_LOOP)  # runs logged before the setting: native
    return tasks.where(loops == NATIVE_LOOP, tasks.astype(str) + " (" + loops.astype(str) + ")")


def run_rows(used: pd.DataFrame) -> pd.DataFrame:
    """One row per run in the field's names: task, model, dataset, sifter and its params, seed, final metrics."""
    rows = pd.DataFrame({
        "run_id": column(used, "run_id"),
        "task": task_labels(used),
        "model": column(used, "tags.model"),
        "dataset": _tag_or_param(used, "dataset", "task.dataset"),
        "sifter": _tag_or_param(used, "sifter", "sifter.name"),
        "seed": _tag_or_param(used, "seed", "seed"),
        "machine_kind": machine_kinds(used),
        "midpoint_s": time_midpoints(used).to_numpy(),
    })
    one_process = column(used, "tags.world_size").fillna("1").astype(str).to_numpy() == "1"
    for name in sifter_params(used):
        rows[name] = column(used, f"params.sifter.{name}")
        if name == "sync":
            # Only DDP reads it: in one process a run logged before it existed trained alike, and is the same row.
            rows[name] = rows[name].where(~one_process)
    for name in ("test_accuracy", "val_accuracy", "train_time_s", "sift_time_s", "cost_usd", "pct_accepted",
                 "time_to_target_s", "work_trained", "other_cpu_fraction"):
        rows[name] = column(used, f"metrics.{name}").to_numpy()
    return rows


def time_midpoints(used: pd.DataFrame) -> pd.Series:
    """Seconds since the epoch halfway through each run, (start_time + end_time) / 2; the start alone when the end
    is unknown, NaN without a start. Times come as MLflow's timestamps or as their text in runs.csv."""
    def seconds(times: pd.Series) -> pd.Series:
        stamps = pd.to_datetime(times, utc=True, errors="coerce", format="ISO8601")
        return (stamps - pd.Timestamp(0, tz="UTC")).dt.total_seconds()

    start, end = seconds(column(used, "start_time")), seconds(column(used, "end_time"))
    return ((start + end) / 2).where(end.notna(), start)


def _sort_value(value):
    """Numbers in numeric order, then text, then missing: '0.5' < '3' < '10'."""
    if not isinstance(value, str) and pd.isna(value):
        return (2, 0.0, "")
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def _sifter_rank(sifter) -> tuple:
    # The baseline first, the control last, every other sifter by name in between.
    return ({BASELINE: 0, CONTROL: 2}.get(sifter, 1), _sort_value(sifter))


def first_present(values: pd.Series):
    present = values.dropna()
    return present.iloc[0] if len(present) else np.nan


def config_labels(table: pd.DataFrame, params: list[str]) -> pd.Series:
    """`sifter` plus the params that differ between that sifter's configurations: short, and unique per task."""
    labels = pd.Series("", index=table.index, dtype=object)
    for sifter, rows in table.groupby("sifter", dropna=False, sort=False):
        varying = [name for name in params if rows[name].astype(object).fillna("\0").nunique() > 1]
        for index, row in rows.iterrows():
            settings = [f"{name}={row[name]}" for name in varying if pd.notna(row[name])]
            labels[index] = " ".join([str(sifter) if pd.notna(sifter) else "unknown", *settings])
    return labels


def timing_references(rows: pd.DataFrame) -> pd.DataFrame:
    """Each run's time reference: the baseline run (sifter=none) of its task and machine kind whose midpoint in
    time is nearest the run's own (the earlier one on a tie), at that baseline's pace (train_time_s / work_trained)
    times the mean work_trained of the task's baseline runs on that kind. Columns reference_run,
    reference_time_s and reference_cost_usd (cost scaled alike); NaN where the kind has no baseline of the task.

    A machine drifts between sittings and within one (a shared or throttled host), so the baseline timed closest
    to a run says best how fast the machine was for it; the work scaling makes baselines of seeds that trained
    different amounts of work (padded tokens differ by seed) compare as paces. A contended baseline (other
    processes above CONTENDED_FRACTION of a core) is left out while a clean one exists. A baseline that logged no work
    stands for its own time, and runs without time stamps take the mean over the kind's baselines."""
    references = pd.DataFrame({"reference_run": pd.Series(np.nan, index=rows.index, dtype=object),
                               "reference_time_s": math.nan, "reference_cost_usd": math.nan}, index=rows.index)
    for _, runs in rows.groupby(["task", "machine_kind"], dropna=False, sort=False):
        baselines = runs[(runs["sifter"] == BASELINE) & runs["train_time_s"].notna()]
        if baselines.empty:
            continue
        # A baseline timed while other processes used the machine measures them too: it is a reference only
        # when its kind has no clean baseline of the task.
        clean = baselines[~(baselines["other_cpu_fraction"] > CONTENDED_FRACTION)]
        baselines = clean if not clean.empty else baselines
        # In time order, so idxmin's first-of-equals is the earlier baseline, whatever the frame's order.
        baselines = baselines.sort_values("midpoint_s", kind="stable")
        to_mean_work = (baselines["work_trained"].mean() / baselines["work_trained"]).fillna(1.0)
        time_at_mean_work = baselines["train_time_s"] * to_mean_work
        cost_at_mean_work = baselines["cost_usd"] * to_mean_work
        for index in runs.index:
            distance = (baselines["midpoint_s"] - runs.at[index, "midpoint_s"]).abs()
            if distance.notna().any():
                nearest = distance.idxmin()
                references.loc[index] = [baselines.at[nearest, "run_id"], time_at_mean_work[nearest],
                                         cost_at_mean_work[nearest]]
            else:
                references.loc[index] = [np.nan, time_at_mean_work.mean(), cost_at_mean_work.mean()]
    return references


def paired_savings(rows: pd.DataFrame) -> pd.DataFrame:
    """Each run's % time and cost savings against its time reference (`timing_references`: the baseline of its
    own task and machine kind nearest in time): 100 * (1 - time / reference time). NaN where that kind has no
    baseline run of the task. A baseline run is its own nearest, so its savings are about 0.

    Pairing within a kind and in time is what lets runs from different machines and sittings share a table: a
    ratio measured on one machine at one time, not a time, is what is averaged."""
    rows = pd.concat([rows, timing_references(rows)], axis=1)
    rows["run_time_savings"] = 100 * (1 - rows["train_time_s"] / rows["reference_time_s"].astype(float))
    rows["run_cost_savings"] = 100 * (1 - rows["cost_usd"] / rows["reference_cost_usd"].astype(float))
    return rows


def runs_without_baseline(used: pd.DataFrame) -> dict[str, str]:
    """run_id -> machine kind, for the runs whose kind has no baseline run of their task: no savings for them."""
    rows = paired_savings(run_rows(used))
    lacking = rows[rows["run_time_savings"].isna() & rows["train_time_s"].notna()
                   & rows["task"].isin(rows.loc[rows["sifter"] == BASELINE, "task"])]
    return dict(zip(lacking["run_id"], lacking["machine_kind"]))


def build_table(used: pd.DataFrame) -> pd.DataFrame:
    """One row per task x sifter configuration (all its params), aggregated over seeds, with savings vs the
    baseline and the configuration against the uniform-subsampling frontier (`frontier_columns`).

    Accuracies (test and validation) and % accepted: mean and sample std (ddof=1, NaN for one seed) over seeds,
    a seed timed twice (on two machine kinds, or first and last in its block) counting once, the mean of its
    runs: it is the same training. Savings: the mean and std over runs of each run's savings against its time
    reference (`paired_savings`). Times themselves are means over runs, whatever their kind.
    accuracy_baseline and accuracy_delta (test) and their val_ twins are paired by seed (`paired_accuracy`),
    over the seeds in delta_seeds. A run lacking a metric is left out of that metric's mean only.
    """
    rows = paired_savings(run_rows(used))
    params = sifter_params(used)
    keys = ["task", "sifter", *params]
    columns = ["task", "model", "dataset", "sifter", "config", *params, *TABLE_STATS]
    records = []
    for _, group in rows.groupby(keys, dropna=False, sort=False):
        reached = group["time_to_target_s"].dropna()
        per_seed = group.groupby("seed", dropna=False)[["test_accuracy", "val_accuracy", "pct_accepted"]].mean()
        records.append({
            **{key: group[key].iloc[0] for key in keys},
            "model": first_present(group["model"]), "dataset": first_present(group["dataset"]),
            "n_seeds": len(per_seed), "n_runs": len(group), "n_machine_kinds": group["machine_kind"].nunique(),
            "seeds": " ".join(str(seed) for seed in sorted(group["seed"].dropna().unique(), key=_sort_value)),
            "pct_accepted": per_seed["pct_accepted"].mean(), "pct_accepted_std": per_seed["pct_accepted"].std(),
            **{name: per_seed[name].mean() for name, _ in ACCURACIES},
            **{f"{name}_std": per_seed[name].std() for name, _ in ACCURACIES},
            # Per-seed accuracies, for the paired deltas and the frontier's spread; not columns of table.csv.
            **{f"{name}_by_seed": per_seed[name].dropna() for name, _ in ACCURACIES},
            "pct_time_savings": group["run_time_savings"].mean(),
            "pct_time_savings_std": group["run_time_savings"].std(),
            "pct_cost_savings": group["run_cost_savings"].mean(),
            # Over the seeds that reached the target; n_reached_target says how many did.
            "time_to_target_s": reached.mean() if len(reached) else math.nan, "n_reached_target": len(reached),
            "train_time_s": group["train_time_s"].mean(), "train_time_std": group["train_time_s"].std(),
            "sift_time_s": group["sift_time_s"].mean(), "cost_usd": group["cost_usd"].mean(),
            "run_ids": " ".join(group["run_id"]),
        })
    if not records:
        return pd.DataFrame(columns=columns)
    for name, prefix in ACCURACIES:
        baselines = {}
        for record in records:
            if record["sifter"] == BASELINE:
                baselines.setdefault(record["task"], record[f"{name}_by_seed"])
        for record in records:
            base = baselines.get(record["task"])
            baseline, delta, seeds = (paired_accuracy(record[f"{name}_by_seed"], base) if base is not None
                                      else (math.nan, math.nan, np.nan))
            record[f"{prefix}accuracy_baseline"], record[f"{prefix}accuracy_delta"] = baseline, delta
            if name == "test_accuracy":
                record["delta_seeds"] = seeds
    table = pd.DataFrame(records)
    order = sorted(table.index, key=lambda i: (_sort_value(table.at[i, "task"]), _sifter_rank(table.at[i, "sifter"]),
                                               *(_sort_value(table.at[i, name]) for name in params)))
    table = table.loc[order].reset_index(drop=True)
    table["config"] = config_labels(table, params)
    table = pd.concat([table, frontier_columns(table)], axis=1)
    return table[columns]


def paired_accuracy(accuracy: pd.Series, baseline: pd.Series) -> tuple[float, float, object]:
    """(baseline accuracy, accuracy delta, the seeds they are over) for one configuration, from per-seed accuracies.

    The delta is paired: the mean of per-seed differences over the seeds both have, and the baseline is its mean
    over those seeds. A row that lacks a seed (an unfinished sweep, a failed run) is then compared with the
    baseline on the seeds it has, not with a baseline mean that includes seeds it never ran; when the seeds
    match this equals mean accuracy - mean baseline accuracy. With no seed in common the delta is unpaired,
    against the baseline's mean over its own seeds, and the seeds are NaN."""
    shared = sorted(set(accuracy.index) & set(baseline.index), key=_sort_value)
    if not shared:
        if baseline.empty or accuracy.empty:
            return math.nan, math.nan, np.nan
        return baseline.mean(), accuracy.mean() - baseline.mean(), np.nan
    return (baseline[shared].mean(), (accuracy[shared] - baseline[shared]).mean(),
            " ".join(str(seed) for seed in shared))


def is_sifted(table: pd.DataFrame) -> pd.Series:
    """A real sifter: neither the baseline nor the random control."""
    return ~table["sifter"].isin([BASELINE, CONTROL]) & table["sifter"].notna()


def tasks_without_baseline(table: pd.DataFrame) -> list:
    with_baseline = set(table.loc[table["sifter"] == BASELINE, "task"])
    return [task for task in table["task"].drop_duplicates() if task not in with_baseline]


# ---------------------------------------------------------------- the uniform-subsampling frontier

def frontier_points(rows: pd.DataFrame) -> pd.DataFrame:
    """A task's frontier points: its baseline at 0 % time saved and every random control at its mean % time
    saved, in column `frontier_x`. Uniform random subsampling is what "training for less" costs nothing to do,
    so it is the curve a selection rule must beat at equal time."""
    points = rows[rows["sifter"].isin([BASELINE, CONTROL])]
    return points.assign(frontier_x=np.where(points["sifter"] == BASELINE, 0.0, points["pct_time_savings"]))


def frontier_columns(table: pd.DataFrame) -> pd.DataFrame:
    """FRONTIER_COLUMNS for every sifted configuration (neither baseline nor random control), NaN for the others.

    Per task and accuracy (test, and validation as `val_*`), the frontier is the piecewise-linear curve through
    `frontier_points`. frontier_accuracy: the curve at the row's pct_time_savings (NaN outside its range);
    accuracy_vs_frontier: the row's mean accuracy minus that, from the row means so it can be checked by hand;
    its _std: the spread of the same difference seed by seed (`frontier.spread_over_seeds`); verdict_vs_frontier
    from those two; frontier_savings: the largest % time saved at which the curve reaches the row's accuracy;
    extra_savings: pct_time_savings - frontier_savings, what selection buys over uniform subsampling."""
    out = pd.DataFrame({name: pd.Series(np.nan, index=table.index, dtype=object if "verdict" in name else float)
                        for name in FRONTIER_COLUMNS})
    for _, rows in table.groupby("task", dropna=False, sort=False):
        points = frontier_points(rows)
        for name, prefix in ACCURACIES:
            measured = points[points["frontier_x"].notna() & points[name].notna()]
            mean_curve = frontier.curve(measured["frontier_x"], measured[name])
            points_by_seed = [by_seed.to_dict() for by_seed in measured[f"{name}_by_seed"]]
            for index, row in rows[is_sifted(rows)].iterrows():
                savings, accuracy = row["pct_time_savings"], row[name]
                at_savings = frontier.value_at(mean_curve, savings)
                difference = accuracy - at_savings
                spread = frontier.spread_over_seeds(savings, row[f"{name}_by_seed"].to_dict(), measured["frontier_x"],
                                                    points_by_seed)
                reached_at = frontier.largest_x_at(mean_curve, accuracy)
                out.loc[index, [prefix + stat for stat in FRONTIER_STATS]] = [
                    at_savings, difference, spread, frontier.verdict_vs_frontier(at_savings, difference, spread),
                    reached_at, savings - reached_at]
    return out


# ---------------------------------------------------------------- control pairing, headlines

CONTROL_RULE = ("the control's accuracy at the configuration's % accepted is interpolated linearly between the two "
                "neighbouring points of the curve through the task's random controls and its baseline (at 100 % "
                "accepted), and so is its std over seeds; sifting beat the control when its mean accuracy exceeds "
                "that by more than the larger of the two std; lost to it when below by more than that; otherwise "
                "no clear difference. Needs at least 2 seeds on each side. Outside the curve's range of % accepted "
                "there is no verdict (outside range): a far-off control says nothing about equal data.")


def verdict(accuracy, accuracy_std, control_accuracy, control_std) -> str:
    """CONTROL_RULE applied to one pair."""
    if pd.isna(accuracy) or pd.isna(control_accuracy):
        return "cannot tell: accuracy missing"
    if pd.isna(accuracy_std) or pd.isna(control_std):
        return "cannot tell: needs at least 2 seeds on each side"
    spread = max(accuracy_std, control_std)
    difference = accuracy - control_accuracy
    if difference > spread:
        return "beat the control"
    if difference < -spread:
        return "lost to the control"
    return "no clear difference (within the spread)"


def control_curve(rows: pd.DataFrame) -> pd.DataFrame:
    """A task's random-control curve against % accepted: each random control at its mean % accepted and the
    baseline at 100 %, points at the same % accepted merged (mean accuracy and std, fewest seeds), sorted."""
    points = rows[rows["sifter"].isin([BASELINE, CONTROL])]
    points = points.assign(x=np.where(points["sifter"] == BASELINE, 100.0, points["pct_accepted"]),
                           label=np.where(points["sifter"] == BASELINE, "baseline", points["config"]))
    points = points[points["x"].notna() & points["test_accuracy"].notna()]
    return points.groupby("x", sort=True).agg(
        accuracy=("test_accuracy", "mean"), accuracy_std=("test_accuracy_std", "mean"), n_seeds=("n_seeds", "min"),
        label=("label", " / ".join), is_control=("sifter", lambda sifters: (sifters == CONTROL).any())).reset_index()


def pair_controls(table: pd.DataFrame) -> pd.DataFrame:
    """Each sifted configuration against the random control at its own % accepted (CONTROL_RULE): `control` names
    the curve's points it lies between, `nearest_control` the random control among them nearest in % accepted."""
    records = []
    for _, row in table[is_sifted(table)].iterrows():
        rows = table[table["task"] == row["task"]]
        record = {"task": row["task"], "config": row["config"], "pct_accepted": row["pct_accepted"],
                  "accuracy": row["test_accuracy"], "accuracy_std": row["test_accuracy_std"],
                  "n_seeds": row["n_seeds"], "pct_time_savings": row["pct_time_savings"], "control": np.nan,
                  "nearest_control": np.nan, "control_pct_accepted": math.nan, "control_accuracy": math.nan,
                  "control_accuracy_std": math.nan, "control_n_seeds": 0, "accuracy_difference": math.nan,
                  "spread": math.nan}
        curve = control_curve(rows)
        accepted = row["pct_accepted"]
        if not (rows["sifter"] == CONTROL).any():
            record["verdict"] = "no random control for this task"
        elif pd.isna(accepted) or not curve["is_control"].any():
            record["verdict"] = "cannot tell: % accepted missing"
        elif accepted < curve["x"].min() or accepted > curve["x"].max():
            record["verdict"] = "outside range"
        else:
            below, above = curve[curve["x"] <= accepted].iloc[-1], curve[curve["x"] >= accepted].iloc[0]
            ends = curve.loc[sorted({below.name, above.name})]
            controls = ends[ends["is_control"]]
            accuracy = frontier.value_at((curve["x"].to_numpy(), curve["accuracy"].to_numpy()), accepted)
            # The std through the same two points; NaN when either has one seed.
            std = frontier.value_at((curve["x"].to_numpy(), curve["accuracy_std"].to_numpy()), accepted)
            record.update({
                "control": " to ".join(ends["label"]),
                "nearest_control": (controls.loc[(controls["x"] - accepted).abs().idxmin(), "label"]
                                    if len(controls) else np.nan),
                "control_pct_accepted": accepted, "control_accuracy": accuracy, "control_accuracy_std": std,
                "control_n_seeds": ends["n_seeds"].min(), "accuracy_difference": row["test_accuracy"] - accuracy,
                "spread": max(row["test_accuracy_std"], std),
                "verdict": verdict(row["test_accuracy"], row["test_accuracy_std"], accuracy, std),
            })
        records.append(record)
    return pd.DataFrame(records, columns=[
        "task", "config", "pct_accepted", "accuracy", "accuracy_std", "n_seeds", "pct_time_savings", "control",
        "nearest_control", "control_pct_accepted", "control_accuracy", "control_accuracy_std", "control_n_seeds",
        "accuracy_difference", "spread", "verdict"])


def _within_tolerance(table: pd.DataFrame, tolerance: float) -> pd.Series:
    # On validation, which chooses. A hair of slack so 79.5 against 80.0 counts as exactly 0.5 below.
    return table["val_accuracy_delta"] >= -tolerance - 1e-9


def _headline_groups(table: pd.DataFrame, per_sifter: bool, sifters: pd.Series) -> list[tuple]:
    if per_sifter:
        return list(table.loc[sifters, ["task", "sifter"]].drop_duplicates().itertuples(index=False, name=None))
    return [(task, None) for task in table["task"].drop_duplicates()]


def headline(table: pd.DataFrame, tolerance: float = HEADLINE_TOLERANCE, per_sifter: bool = False) -> pd.DataFrame:
    """Per task: the best % time savings among configurations whose validation accuracy is at most `tolerance`
    points below the baseline's, paired by seed (any sifter, random control included), reported with its test
    accuracy and test delta; or a statement that there is none. With `per_sifter`, the same per task and
    selection rule (sifter), so each policy gets its own line."""
    records = []
    for task, sifter in _headline_groups(table, per_sifter, table["sifter"] != BASELINE):
        rows = table[table["task"] == task]
        options = rows[rows["sifter"] != BASELINE] if sifter is None else rows[rows["sifter"] == sifter]
        record = {"task": task, "config": np.nan, "sifter": np.nan if sifter is None else sifter,
                  "pct_time_savings": math.nan, "test_accuracy": math.nan, "accuracy_baseline": math.nan,
                  "accuracy_delta": math.nan, "val_accuracy_delta": math.nan}
        candidates = options[options["pct_time_savings"].notna() & _within_tolerance(options, tolerance)]
        if not (rows["sifter"] == BASELINE).any():
            record["statement"] = "no baseline (sifter=none) at this scale, so no savings to report"
        elif rows.loc[rows["sifter"] == BASELINE, "val_accuracy"].isna().all():
            record["statement"] = ("the baseline has no validation accuracy, so nothing can be said to be within "
                                   "reach of it")
        elif candidates.empty:
            record["statement"] = (f"none: no configuration is within {tolerance:g} points of the baseline's "
                                   "validation accuracy")
        else:
            best = candidates.loc[candidates["pct_time_savings"].idxmax()]
            record.update({name: best[name] for name in ("config", "sifter", "pct_time_savings", "test_accuracy",
                                                         "accuracy_baseline", "accuracy_delta", "val_accuracy_delta")})
            record["statement"] = (f"{best['pct_time_savings']:.1f} % time savings with {best['config']} "
                                   f"(test accuracy {best['test_accuracy']:.2f} vs baseline "
                                   f"{best['accuracy_baseline']:.2f}, {best['accuracy_delta']:+.2f} points; chosen on "
                                   f"validation, {best['val_accuracy_delta']:+.2f} points; n={best['n_seeds']}"
                                   f"{pairing_caveat(best, rows[rows['sifter'] == BASELINE].iloc[0])})")
        records.append(record)
    return pd.DataFrame(records, columns=["task", "config", "sifter", "pct_time_savings", "test_accuracy",
                                          "accuracy_baseline", "accuracy_delta", "val_accuracy_delta", "statement"])


def _points_vs_frontier(difference, spread) -> str:
    return f"{difference:+.2f} ± {spread:.2f}" if pd.notna(spread) else f"{difference:+.2f} (one seed, no spread)"


def _test_extra_savings(row: pd.Series) -> str:
    if pd.notna(row["extra_savings"]):
        return f"{row['extra_savings']:+.1f} % time saved beyond uniform subsampling at equal test accuracy"
    if pd.notna(row["frontier_accuracy"]) and row["test_accuracy"] > row["frontier_accuracy"]:
        return "its test accuracy is above every point of the frontier: no uniform subsampling reaches it"
    return "extra savings unknown: its test accuracy is below every point of the frontier"


def headline_at_equal_time(table: pd.DataFrame, per_sifter: bool = False) -> pd.DataFrame:
    """Per task, the verdict that decides: among sifted configurations `above` the uniform-subsampling frontier
    on validation, the one with the most val_extra_savings (one whose validation accuracy is above every
    frontier point has no frontier_savings: it ranks by its whole pct_time_savings, and says so), reported with
    its test figures; or a statement that there is none. With `per_sifter`, the same per selection rule."""
    records = []
    for task, sifter in _headline_groups(table, per_sifter, is_sifted(table)):
        rows = table[table["task"] == task]
        options = rows[is_sifted(rows)] if sifter is None else rows[rows["sifter"] == sifter]
        record = {"task": task, "config": np.nan, "sifter": np.nan if sifter is None else sifter,
                  **{name: math.nan for name in ("pct_time_savings", "test_accuracy", "frontier_accuracy",
                                                 "accuracy_vs_frontier", "accuracy_vs_frontier_std", "extra_savings",
                                                 "val_accuracy_vs_frontier", "val_extra_savings")},
                  "verdict_vs_frontier": np.nan, "ranked_by_full_savings": False}
        above = options[options["val_verdict_vs_frontier"] == "above"]
        if not (rows["sifter"] == BASELINE).any():
            record["statement"] = "no baseline (sifter=none) at this scale, so no frontier"
        elif above.empty and not (rows["sifter"] == CONTROL).any():
            record["statement"] = ("none: no random control (sifter=random) for this task, so the frontier is the "
                                   "baseline alone")
        elif above.empty:
            record["statement"] = "none: no configuration is above the uniform-subsampling frontier on validation"
        else:
            ranking = above["val_extra_savings"].where(above["val_extra_savings"].notna(), above["pct_time_savings"])
            best = above.loc[ranking.idxmax()]
            full = pd.isna(best["val_extra_savings"])
            record.update({name: best[name] for name in record if name in best.index and name != "sifter"},
                          sifter=best["sifter"], ranked_by_full_savings=full)
            chosen = (f"its validation accuracy is above every point of the frontier, so it ranks by its whole "
                      f"{best['pct_time_savings']:.1f} % time saved" if full
                      else f"{best['val_extra_savings']:+.1f} % extra savings")
            versus = _points_vs_frontier(best["accuracy_vs_frontier"], best["accuracy_vs_frontier_std"])
            record["statement"] = (
                f"{best['config']}: {best['pct_time_savings']:.1f} % time saved at test accuracy "
                f"{best['test_accuracy']:.2f}, {versus} "
                f"points against the frontier's {best['frontier_accuracy']:.2f} ({best['verdict_vs_frontier']}); "
                f"{_test_extra_savings(best)} (chosen on validation: "
                f"{best['val_accuracy_vs_frontier']:+.2f} points above the frontier, {chosen}; n={best['n_seeds']})")
        records.append(record)
    return pd.DataFrame(records, columns=[
        "task", "config", "sifter", "pct_time_savings", "test_accuracy", "frontier_accuracy", "accuracy_vs_frontier",
        "accuracy_vs_frontier_std", "verdict_vs_frontier", "extra_savings", "val_accuracy_vs_frontier",
        "val_extra_savings", "ranked_by_full_savings", "statement"])


def pairing_caveat(row: pd.Series, baseline: pd.Series) -> str:
    """Text for a row whose accuracy delta is not over all of its own and the baseline's seeds; else ''."""
    if pd.isna(row["delta_seeds"]):
        return "; unpaired: no seed in common with the baseline"
    if row["delta_seeds"] == row["seeds"] == baseline["seeds"]:
        return ""
    return f"; delta over seeds {row['delta_seeds']} only, the baseline has {baseline['seeds']}"


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


def best_sifted(table: pd.DataFrame, tolerance: float = HEADLINE_TOLERANCE) -> dict:
    """Per task, the table index of the sifted configuration to plot over time, chosen on validation: the
    equal-time headline's, else the most time saved within `tolerance` points of the baseline, else the most
    accurate."""
    chosen = headline_at_equal_time(table).set_index("task")["config"]
    best = {}
    for task in table["task"].drop_duplicates():
        rows = table[(table["task"] == task) & is_sifted(table)]
        keeping = rows[_within_tolerance(rows, tolerance) & rows["pct_time_savings"].notna()]
        if task in chosen.index and pd.notna(chosen[task]):
            best[task] = rows.index[rows["config"] == chosen[task]][0]
        elif len(keeping):
            best[task] = keeping["pct_time_savings"].idxmax()
        elif rows["val_accuracy"].notna().any():
            best[task] = rows["val_accuracy"].idxmax()
    return best


# ---------------------------------------------------------------- notes on the runs

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


def baseline_pace(used: pd.DataFrame, tolerance: float = PACE_TOLERANCE) -> list[dict]:
    """The baselines timed at an odd pace: one entry per task and machine kind whose baseline has a run more than
    `tolerance` (a fraction) slower or faster than the median pace of all that task's runs on that kind.

    Pace is training seconds per unit of work trained (a sample, or a padded token), the scoring pass left out,
    so every selection rule's runs measure the same thing: how fast the machine trained. Each run's savings
    divide by the pace of the baseline nearest it in time (`timing_references`), so a baseline timed while the
    machine ran slow moves the savings of every run that takes it as reference, and other_cpu_fraction does not
    see a slowdown that no process on the machine caused (a shared or throttled host). Each entry gives the odd
    runs (run_id, seed, pace / median pace), how many runs take each odd one as reference (`referenced_by`), and
    the baseline's mean time as measured and as it would be with every baseline run at the median pace.
    Kinds with fewer than 3 runs that measured their work are left out: no median."""
    rows = paired_savings(run_rows(used))
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
