"""The savings table: one row per task x sifter configuration, aggregated over seeds (table.csv)."""

import math

import numpy as np
import pandas as pd

from sift_bench.report.frame import sifter_params
from sift_bench.report.timing import savings_stats, timed_runs
from sift_bench.report.verdicts import frontier_columns
from sift_bench.report.work import add_work, work_frontier_columns, work_stats
from sift_bench.report.vocabulary import ACCURACIES, BASELINE, CONTROL, TABLE_STATS


def _sort_value(value):
    """Numbers in numeric order, then text, then missing: '0.5' < '3' < '10'."""
    if not isinstance(value, str) and pd.isna(value):
        return (2, 0.0, "")
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def sifter_rank(sifter) -> tuple:
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


def build_table(used: pd.DataFrame) -> pd.DataFrame:
    """One row per task x sifter configuration (all its params), aggregated over seeds, with savings vs the
    baseline and the configuration against the uniform-subsampling frontier (`frontier_columns`).

    Accuracies (test and validation) and % accepted: mean and sample std (ddof=1, NaN for one seed) over seeds,
    a seed timed twice (on two machine kinds, or first and last in its block) counting once, the mean of its
    runs: it is the same training. Savings: the mean and std over runs of each run's savings against its time
    reference (`paired_savings`); the frontier's bootstrap resamples them seed by seed, each seed's the mean of its
    runs'. Times themselves are means over runs, whatever their kind.
    accuracy_baseline and accuracy_delta (test) and their val_ twins are paired by seed (`paired_accuracy`),
    over the seeds in delta_seeds. A run lacking a metric is left out of that metric's mean only.
    Work (`sift_bench.report.work`): samples trained and scored, the scoring cost ratio and % work saved, means over
    runs, and the frontier verdict at equal work with the break-even scoring cost (`work_frontier_columns`).
    """
    rows = add_work(timed_runs(used))
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
            **savings_stats(group),
            **work_stats(group),
            # Per seed, the mean savings of its timed runs, for the frontier's bootstrap (which resamples a seed's
            # savings with its accuracy); seeds whose savings were all left out are not in it. Not a column.
            "pct_time_savings_by_seed": group.groupby("seed", dropna=False)["run_time_savings"].mean().dropna(),
            # Over the seeds that reached the target; n_reached_target says how many did.
            "time_to_target_s": reached.mean() if len(reached) else math.nan, "n_reached_target": len(reached),
            "train_time_s": group["train_time_s"].mean(), "train_time_std": group["train_time_s"].std(),
            "sift_time_s": group["sift_time_s"].mean(), "cost_usd": group["cost_usd"].mean(),
            "run_ids": " ".join(group["run_id"]),
        })
    if not records:
        return pd.DataFrame(columns=columns)
    add_baseline_deltas(records)
    table = pd.DataFrame(records)
    order = sorted(table.index, key=lambda i: (_sort_value(table.at[i, "task"]), sifter_rank(table.at[i, "sifter"]),
                                               *(_sort_value(table.at[i, name]) for name in params)))
    table = table.loc[order].reset_index(drop=True)
    table["config"] = config_labels(table, params)
    table = pd.concat([table, frontier_columns(table), work_frontier_columns(table)], axis=1)
    return table[columns]


def add_baseline_deltas(records: list[dict]) -> None:
    """Each record's accuracy_baseline and accuracy_delta (and val_ twins, and delta_seeds), paired by seed with the
    baseline of its task (`paired_accuracy`)."""
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
