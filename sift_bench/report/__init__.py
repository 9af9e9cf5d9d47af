"""The savings table, its control pairing and its headline, from a frame of runs: pure pandas, no I/O.

A runs frame is what `mlflow.search_runs` returns (run_id, status, start_time, metrics.*, params.*, tags.*),
read from the store or back from runs.csv; its `metrics.*` hold each metric's LAST value, the run's final figure.
`python -m sift_bench.report` (__main__.py) does the reading, writing and plotting around these functions.
"""

import math

import numpy as np
import pandas as pd

from sift_bench.tracking import NOT_HASHED, NOT_HASHED_TRAINER

BASELINE = "none"
CONTROL = "random"
# Always columns of table.csv, so the SageMaker-style columns exist whichever sifters have run.
SIFTER_PARAMS = ("beta_value", "loss_history_length", "sift_delay", "keep_fraction")
# Accuracy points a configuration may lose against the baseline and still count for the headline.
HEADLINE_TOLERANCE = 0.5
# Final metrics a row of the table needs; a run lacking one is named in the report's notes.
NEEDED_METRICS = ("eval_accuracy", "train_time_s", "cost_usd", "pct_accepted")
HISTORY_METRICS = ("train_loss", "eval_accuracy", "pct_accepted", "epoch", "train_time_s", "samples_seen",
                   "samples_trained", "lr_multiplier")
EXCLUDED_COLUMNS = ("run_id", "run_name", "status", "scale", "task", "sifter", "seed", "reason")
TABLE_STATS = ("n_seeds", "seeds", "pct_accepted", "pct_accepted_std", "pct_time_savings",
               "pct_time_savings_std", "pct_cost_savings", "accuracy", "accuracy_std", "accuracy_baseline",
               "accuracy_delta", "delta_seeds", "time_to_target_s", "n_reached_target", "train_time_s", "train_time_std",
               "sift_time_s", "cost_usd", "n_runs", "n_machine_kinds", "run_ids")
# Params that differ between runs of one task without changing what is compared: the sifter is the
# configuration, the seed is what is averaged over, the rest only says where files go or how progress shows.
NOT_COMPARED_PREFIXES = ("params.sifter.", *(f"params.{group}." for group in NOT_HASHED))
NOT_COMPARED = ("params.seed", "params.sweep_name", *(f"params.trainer.{key}" for key in NOT_HASHED_TRAINER))


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


def column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A column, or all NaN when no run logged it."""
    if name in frame.columns:
        return frame[name]
    return pd.Series(math.nan, index=frame.index, dtype="float64" if name.startswith("metrics.") else object)


def _tag_or_param(runs: pd.DataFrame, tag: str, param: str) -> pd.Series:
    return column(runs, f"tags.{tag}").where(column(runs, f"tags.{tag}").notna(), column(runs, f"params.{param}"))


def machine_kinds(runs: pd.DataFrame) -> pd.Series:
    """Each run's `machine.kind` tag; runs logged before that tag existed get their CPU name and cores."""
    kinds = column(runs, "tags.machine.kind")
    legacy = (column(runs, "tags.machine.cpu").fillna("unknown CPU").astype(str) + ", "
              + column(runs, "tags.machine.cores").fillna("?").astype(str) + " cores (no machine.kind tag)")
    return kinds.where(kinds.notna(), legacy)


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
    FINISHED one. On two kinds both count (the same baseline timed on each kind is what pairs their savings).
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
    # One run per config and seed per machine kind: the config hash leaves the machine out.
    hashes = column(candidates, "tags.config_hash")
    identity = hashes + " on " + kinds[candidates.index]
    known = identity.notna()
    latest = candidates[known].groupby(identity[known], sort=False)["run_id"].last()
    for index, key in identity.items():
        if pd.notna(key) and latest[key] != candidates.at[index, "run_id"]:
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
              if name.startswith("params.sifter.") and name != "params.sifter.name" and runs[name].notna().any()]
    return [*SIFTER_PARAMS, *sorted(name for name in logged if name not in SIFTER_PARAMS)]


def run_rows(used: pd.DataFrame) -> pd.DataFrame:
    """One row per run in the field's names: task, model, dataset, sifter and its params, seed, final metrics."""
    rows = pd.DataFrame({
        "run_id": column(used, "run_id"),
        "task": _tag_or_param(used, "task", "task.name"),
        "model": column(used, "tags.model"),
        "dataset": _tag_or_param(used, "dataset", "task.dataset"),
        "sifter": _tag_or_param(used, "sifter", "sifter.name"),
        "seed": _tag_or_param(used, "seed", "seed"),
        "machine_kind": machine_kinds(used),
    })
    for name in sifter_params(used):
        rows[name] = column(used, f"params.sifter.{name}")
    for name in ("eval_accuracy", "train_time_s", "sift_time_s", "cost_usd", "pct_accepted", "time_to_target_s",
                 "work_trained"):
        rows[name] = column(used, f"metrics.{name}").to_numpy()
    return rows


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


def paired_savings(rows: pd.DataFrame) -> pd.DataFrame:
    """Each run's % time and cost savings against the mean baseline (sifter=none) of its own task and machine
    kind: 100 * (1 - time / baseline time). NaN where that kind has no baseline run of the task.

    Pairing within a kind is what lets runs from different machines share a table: a ratio measured on one
    machine, not a time, is what is averaged."""
    baselines = rows[rows["sifter"] == BASELINE].groupby(["task", "machine_kind"], dropna=False)[
        ["train_time_s", "cost_usd"]].mean()
    keys = pd.MultiIndex.from_frame(rows[["task", "machine_kind"]])
    base = baselines.reindex(keys)
    rows = rows.copy()
    rows["run_time_savings"] = 100 * (1 - rows["train_time_s"].to_numpy() / base["train_time_s"].to_numpy())
    rows["run_cost_savings"] = 100 * (1 - rows["cost_usd"].to_numpy() / base["cost_usd"].to_numpy())
    return rows


def runs_without_baseline(used: pd.DataFrame) -> dict[str, str]:
    """run_id -> machine kind, for the runs whose kind has no baseline run of their task: no savings for them."""
    rows = paired_savings(run_rows(used))
    lacking = rows[rows["run_time_savings"].isna() & rows["train_time_s"].notna()
                   & rows["task"].isin(rows.loc[rows["sifter"] == BASELINE, "task"])]
    return dict(zip(lacking["run_id"], lacking["machine_kind"]))


def build_table(used: pd.DataFrame) -> pd.DataFrame:
    """One row per task x sifter configuration (all its params), aggregated over seeds, with savings vs the baseline.

    Accuracy and % accepted: mean and sample std (ddof=1, NaN for one seed) over seeds, a seed timed on two
    machine kinds counting once (the mean of its runs). Savings: the mean and std over runs of each run's savings
    against the baseline of its own machine kind (`paired_savings`); on one kind this equals
    100 * (1 - mean time / mean baseline time). Times themselves are means over runs, whatever their kind.
    accuracy_baseline and accuracy_delta are paired by seed (`paired_accuracy`), over the seeds in delta_seeds.
    A run lacking a metric is left out of that metric's mean only.
    """
    rows = paired_savings(run_rows(used))
    params = sifter_params(used)
    keys = ["task", "sifter", *params]
    records, seed_accuracies = [], []
    for _, group in rows.groupby(keys, dropna=False, sort=False):
        reached = group["time_to_target_s"].dropna()
        per_seed = group.groupby("seed", dropna=False)[["eval_accuracy", "pct_accepted"]].mean()
        seed_accuracies.append(per_seed["eval_accuracy"].dropna())
        records.append({
            **{key: group[key].iloc[0] for key in keys},
            "model": first_present(group["model"]), "dataset": first_present(group["dataset"]),
            "n_seeds": len(per_seed), "n_runs": len(group), "n_machine_kinds": group["machine_kind"].nunique(),
            "seeds": " ".join(str(seed) for seed in sorted(group["seed"].dropna().unique(), key=_sort_value)),
            "pct_accepted": per_seed["pct_accepted"].mean(), "pct_accepted_std": per_seed["pct_accepted"].std(),
            "accuracy": per_seed["eval_accuracy"].mean(), "accuracy_std": per_seed["eval_accuracy"].std(),
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
        return pd.DataFrame(columns=["task", "model", "dataset", "sifter", "config", *params, *TABLE_STATS])
    baselines = {}
    for record, accuracies in zip(records, seed_accuracies):
        if record["sifter"] == BASELINE:
            baselines.setdefault(record["task"], accuracies)
    for record, accuracies in zip(records, seed_accuracies):
        base = baselines.get(record["task"])
        record["accuracy_baseline"], record["accuracy_delta"], record["delta_seeds"] = (
            paired_accuracy(accuracies, base) if base is not None else (math.nan, math.nan, np.nan))
    table = pd.DataFrame(records)
    order = sorted(table.index, key=lambda i: (_sort_value(table.at[i, "task"]), _sifter_rank(table.at[i, "sifter"]),
                                               *(_sort_value(table.at[i, name]) for name in params)))
    table = table.loc[order].reset_index(drop=True)
    table["config"] = config_labels(table, params)
    return table[["task", "model", "dataset", "sifter", "config", *params, *TABLE_STATS]]


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


# ---------------------------------------------------------------- control pairing, headline

CONTROL_RULE = ("sifting beat the control when its mean accuracy exceeds the control's by more than the larger "
                "of the two std over seeds; lost to it when below by more than that; otherwise no clear difference. "
                "Needs at least 2 seeds on each side.")


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


def pair_controls(table: pd.DataFrame) -> pd.DataFrame:
    """Each sifted configuration next to the random control of its task whose mean % accepted is closest.

    Ties go to the control listed first in the table (the smaller keep_fraction).
    """
    records = []
    for _, row in table[is_sifted(table)].iterrows():
        controls = table[(table["task"] == row["task"]) & (table["sifter"] == CONTROL)]
        known = controls[controls["pct_accepted"].notna()]
        record = {"task": row["task"], "config": row["config"], "pct_accepted": row["pct_accepted"],
                  "accuracy": row["accuracy"], "accuracy_std": row["accuracy_std"], "n_seeds": row["n_seeds"],
                  "pct_time_savings": row["pct_time_savings"], "control": np.nan, "control_pct_accepted": math.nan,
                  "control_accuracy": math.nan, "control_accuracy_std": math.nan, "control_n_seeds": 0,
                  "control_pct_time_savings": math.nan, "accuracy_difference": math.nan, "spread": math.nan}
        if controls.empty or known.empty or pd.isna(row["pct_accepted"]):
            record["verdict"] = ("no random control for this task" if controls.empty
                                 else "cannot tell: % accepted missing")
            records.append(record)
            continue
        control = known.loc[(known["pct_accepted"] - row["pct_accepted"]).abs().idxmin()]
        record.update({
            "control": control["config"], "control_pct_accepted": control["pct_accepted"],
            "control_accuracy": control["accuracy"], "control_accuracy_std": control["accuracy_std"],
            "control_n_seeds": control["n_seeds"], "control_pct_time_savings": control["pct_time_savings"],
            "accuracy_difference": row["accuracy"] - control["accuracy"],
            "spread": max(row["accuracy_std"], control["accuracy_std"]),
            "verdict": verdict(row["accuracy"], row["accuracy_std"], control["accuracy"], control["accuracy_std"]),
        })
        records.append(record)
    return pd.DataFrame(records, columns=[
        "task", "config", "pct_accepted", "accuracy", "accuracy_std", "n_seeds", "pct_time_savings", "control",
        "control_pct_accepted", "control_accuracy", "control_accuracy_std", "control_n_seeds",
        "control_pct_time_savings", "accuracy_difference", "spread", "verdict"])


def _within_tolerance(table: pd.DataFrame, tolerance: float) -> pd.Series:
    # A hair of slack so 79.5 against 80.0 counts as exactly 0.5 below despite float rounding.
    return table["accuracy_delta"] >= -tolerance - 1e-9


def headline(table: pd.DataFrame, tolerance: float = HEADLINE_TOLERANCE, per_sifter: bool = False) -> pd.DataFrame:
    """Per task: the best % time savings among configurations whose mean accuracy is at most `tolerance`
    points below the baseline's (any sifter, random control included), or a statement that there is none.
    With `per_sifter`, the same per task and selection rule (sifter), so each policy gets its own line."""
    records = []
    if per_sifter:
        groups = list(table.loc[table["sifter"] != BASELINE, ["task", "sifter"]].drop_duplicates().itertuples(
            index=False, name=None))
    else:
        groups = [(task, None) for task in table["task"].drop_duplicates()]
    for task, sifter in groups:
        rows = table[table["task"] == task]
        options = rows[rows["sifter"] != BASELINE] if sifter is None else rows[rows["sifter"] == sifter]
        record = {"task": task, "config": np.nan, "sifter": np.nan if sifter is None else sifter,
                  "pct_time_savings": math.nan, "accuracy": math.nan, "accuracy_baseline": math.nan,
                  "accuracy_delta": math.nan}
        candidates = options[options["pct_time_savings"].notna() & _within_tolerance(options, tolerance)]
        if not (rows["sifter"] == BASELINE).any():
            record["statement"] = "no baseline (sifter=none) at this scale, so no savings to report"
        elif rows.loc[rows["sifter"] == BASELINE, "accuracy"].isna().all():
            record["statement"] = "the baseline has no accuracy, so nothing can be said to be within reach of it"
        elif candidates.empty:
            record["statement"] = f"none: no configuration is within {tolerance:g} accuracy points of the baseline"
        else:
            best = candidates.loc[candidates["pct_time_savings"].idxmax()]
            record.update({name: best[name] for name in ("config", "sifter", "pct_time_savings", "accuracy",
                                                         "accuracy_baseline", "accuracy_delta")})
            record["statement"] = (f"{best['pct_time_savings']:.1f} % time savings with {best['config']} "
                                   f"(accuracy {best['accuracy']:.2f} vs baseline {best['accuracy_baseline']:.2f}, "
                                   f"{best['accuracy_delta']:+.2f} points, n={best['n_seeds']}"
                                   f"{pairing_caveat(best, rows[rows['sifter'] == BASELINE].iloc[0])})")
        records.append(record)
    return pd.DataFrame(records, columns=["task", "config", "sifter", "pct_time_savings", "accuracy",
                                          "accuracy_baseline", "accuracy_delta", "statement"])


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
    """Per task, the table index of the sifted configuration to plot over time: the most time saved within
    `tolerance` points of the baseline, else the most accurate."""
    best = {}
    for task in table["task"].drop_duplicates():
        rows = table[(table["task"] == task) & is_sifted(table)]
        keeping = rows[_within_tolerance(rows, tolerance) & rows["pct_time_savings"].notna()]
        if len(keeping):
            best[task] = keeping["pct_time_savings"].idxmax()
        elif rows["accuracy"].notna().any():
            best[task] = rows["accuracy"].idxmax()
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


CONTENDED_FRACTION = 0.05  # other processes' CPU per second of a run's wall time, in cores


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
    so every selection rule's runs measure the same thing: how fast the machine trained. Every row's savings
    divide by the mean baseline time, so one baseline run timed while the machine ran slow moves all of them
    alike, and other_cpu_fraction does not see a slowdown that no process on the machine caused (a shared or
    throttled host). Each entry gives the odd runs (run_id, seed, pace / median pace) and the baseline's mean
    time as measured and as it would be with every baseline run at the median pace, which bounds how far the
    savings could move. Kinds with fewer than 3 runs that measured their work are left out: no median."""
    rows = run_rows(used)
    # A run without work_trained (or with none) gets a NaN or infinite pace and is left out.
    rows["pace"] = (rows["train_time_s"] - rows["sift_time_s"].fillna(0.0)) / rows["work_trained"]
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
            "baseline_time_s": baseline["train_time_s"].mean(),
            "baseline_time_at_median_s": (median * baseline["work_trained"]).mean(),
        })
    return entries


def varying_settings(used: pd.DataFrame) -> dict:
    """task -> params (other than sifter, seed and where-files-go) whose values differ between its runs,
    which would make its rows compare different training setups."""
    tasks = _tag_or_param(used, "task", "task.name")
    compared = [name for name in used.columns if name.startswith("params.") and name not in NOT_COMPARED
                and not name.startswith(NOT_COMPARED_PREFIXES)]
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


# ---------------------------------------------------------------- markdown

# Dollars per run are small: two decimals would print most of them as 0.00 or 0.01.
DIGITS = {"cost_usd": 4}


def fmt(value, digits: int = 2) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "–"
    if isinstance(value, (int, np.integer)):
        return str(value)
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}f}"
    return str(value).replace("|", "\\|")


def with_spread(mean, std, n) -> str:
    """`mean ± std (n=3)`; the std is left out for a single seed."""
    if pd.isna(mean):
        return "–"
    return f"{mean:.2f} ± {std:.2f} (n={n})" if pd.notna(std) else f"{mean:.2f} (n={n})"


def markdown_table(header: list[str], rows: list[list]) -> str:
    digits = [DIGITS.get(name, 2) for name in header]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(value, places) for value, places in zip(row, digits)) + " |" for row in rows]
    return "\n".join(lines)


def sagemaker_table(table: pd.DataFrame) -> str:
    """SageMaker's savings layout, one row per sifted configuration; `sifter` names the configuration."""
    sifted = table[is_sifted(table)]
    if sifted.empty:
        return "No sifted configuration at this scale (only the baseline and/or the random control)."
    header = ["model", "dataset", "sifter", "% accepted", "% savings", "accuracy baseline", "accuracy sifted"]
    baseline = table[table["sifter"] == BASELINE].drop_duplicates("task").set_index("task")
    rows = []
    for _, row in sifted.iterrows():
        base = baseline.loc[row["task"]] if row["task"] in baseline.index else None
        if base is None:
            base_text = "no baseline"
        elif row["delta_seeds"] == base["delta_seeds"] or pd.isna(row["delta_seeds"]):
            base_text = with_spread(base["accuracy"], base["accuracy_std"], base["n_seeds"])
        else:  # the baseline on the seeds this row has, so the two columns compare like with like
            base_text = f"{row['accuracy_baseline']:.2f} (seeds {row['delta_seeds']} of {base['seeds']})"
        rows.append([row["model"], row["dataset"], row["config"], row["pct_accepted"], row["pct_time_savings"],
                     base_text, with_spread(row["accuracy"], row["accuracy_std"], row["n_seeds"])])
    return markdown_table(header, rows)


def full_table(table: pd.DataFrame) -> str:
    shown = [name for name in table.columns if name not in ("run_ids", "config")]
    return markdown_table(shown, table[shown].values.tolist())


def control_table(pairs: pd.DataFrame) -> str:
    if pairs.empty:
        return "No sifted configuration to compare."
    header = ["task", "sifted", "% accepted", "accuracy", "random control", "% accepted", "accuracy",
              "difference", "spread", "verdict"]
    rows = [[p["task"], p["config"], p["pct_accepted"], with_spread(p["accuracy"], p["accuracy_std"], p["n_seeds"]),
             p["control"], p["control_pct_accepted"],
             with_spread(p["control_accuracy"], p["control_accuracy_std"], p["control_n_seeds"]),
             p["accuracy_difference"], p["spread"], p["verdict"]] for _, p in pairs.iterrows()]
    return markdown_table(header, rows)


def render_report(*, table: pd.DataFrame, used: pd.DataFrame, excluded: pd.DataFrame, scale: str, source: str,
                  report_command: str, plots: dict[str, str], notes: list[str]) -> str:
    """report.md: SageMaker's layout first, then headline, control comparison, full table, plots, provenance."""
    pairs = pair_controls(table)
    headlines = headline(table)
    other_scales = excluded[excluded["reason"].str.startswith("scale ", na=False)]
    unfinished = excluded[excluded["reason"].str.startswith("status ", na=False)]
    reruns = excluded[excluded["reason"].str.startswith("rerun", na=False)]
    other_machines = excluded[excluded["reason"].str.startswith("machine ", na=False)]
    other_tasks = excluded[excluded["reason"].str.startswith("task ", na=False)]
    parents = excluded[excluded["reason"] == "sweep parent"]
    lines = [
        f"# Smart sifting savings, scale `{scale}`", "",
        f"Built by `{report_command}` from {len(used)} FINISHED runs ({source}). "
        "Every number below comes from the commands under *How this was made*.", "",
        "## Savings (SageMaker layout)", "", sagemaker_table(table), "",
        "% accepted: samples trained on / samples seen. % savings: training wall time (scoring passes included, "
        "evaluation excluded) saved against the baseline (sifter=none) of the same task and scale on the same "
        "machine kind, 100 × (1 − time / mean baseline time of that kind), averaged over runs (std in the full "
        "table). Accuracy: test accuracy in %, mean ± sample std over seeds; a configuration that lacks some of "
        "the baseline's seeds is set against the baseline on the seeds it has. "
        "A configuration's name shows only the params that differ between that sifter's configurations; "
        "the full table has them all.", "",
        "## Headline", "",
        f"Per task, the best % time savings among configurations whose mean accuracy is at most "
        f"{HEADLINE_TOLERANCE:g} points below the baseline's, paired by seed (the mean of per-seed differences):", "",
        *[f"- **{fmt(h['task'])}**: {h['statement']}" for _, h in headlines.iterrows()], "",
        "The same per selection rule:", "",
        *[f"- {fmt(h['task'])}, `{fmt(h['sifter'])}`: {h['statement']}"
          for _, h in headline(table, per_sifter=True).iterrows()], "",
        "## Sifting against the random control", "",
        "Each sifted configuration is paired with the random control (sifter=random) of the same task whose "
        "mean % accepted is closest, so both train on about as many samples. Rule: " + CONTROL_RULE, "",
        control_table(pairs), "",
        "## Full table", "",
        f"Also in `table.csv` (with the run ids of each row). {', '.join(SIFTER_PARAMS)} and the other sifter "
        "params identify a configuration; std is over seeds; `–` is missing.", "",
        full_table(table), "",
    ]
    if plots:
        lines += ["## Plots", ""]
        for file_name, caption in plots.items():
            lines += [f"![{file_name}]({file_name})", "", caption, ""]
    if notes:
        lines += ["## Notes", "", *[f"- {note}" for note in notes], ""]
    scale_counts = ", ".join(f"{name}: {count}" for name, count in
                             other_scales["reason"].str.removeprefix("scale ").value_counts(sort=False).items())
    lines += [
        "## Runs and machine", "",
        f"- Scale: `{scale}`.",
        f"- Runs used: {len(used)} FINISHED.",
        f"- Left out: not FINISHED {len(unfinished)}" + (" (listed below)" if len(unfinished) else "")
        + f"; other scales {len(other_scales)}" + (f" ({scale_counts})" if scale_counts else "")
        + f"; reruns of an identical config and seed {len(reruns)} (the latest kept); sweep parents {len(parents)}"
        + (f"; runs of machine kinds other than `--machine` {len(other_machines)}" if len(other_machines) else "")
        + (f"; runs of tasks not asked for with `--task` {len(other_tasks)} ("
           + ", ".join(f"{name}: {count}" for name, count in
                       other_tasks["reason"].str.removeprefix("task ").value_counts(sort=False).items()) + ")"
           if len(other_tasks) else "")
        + ".",
        "- Machine kinds (CPU model and the flags that pick its kernels, cores, GPU) per task, with their runs: "
        "a time is compared only with the baseline timed on the same kind, so kinds can share a table; "
        "`--machine` builds it from one kind.",
        *[f"  - {fmt(task)}: {count} runs on `{kind}`" for (task, kind), count in
          pd.DataFrame({"task": column(used, "tags.task"), "kind": machine_kinds(used)}).value_counts(
              sort=False).items()],
        *(["- Left out as runs of other machine kinds:"] if len(other_machines) else []),
        *[f"  - {count} on `{kind}`" for kind, count in
          other_machines["reason"].str.removeprefix("machine ").value_counts(sort=False).items()],
        *[f"- Machine: {line}" for line in machines(used)],
        *[f"- git commit: `{commit}`" for commit in column(used, "tags.git_commit").dropna().drop_duplicates()],
        "",
    ]
    if len(unfinished):
        shown = ["run_id", "run_name", "status", "task", "sifter", "seed"]
        lines += [markdown_table(["run id", "name", "status", "task", "sifter", "seed"],
                                 unfinished[shown].values.tolist()), ""]
    lines += ["## How this was made", "", "```", *commands(used), report_command, "```", ""]
    return "\n".join(lines)
