"""The runs frame: what `mlflow.search_runs` returns (run_id, status, start_time, end_time, metrics.*, params.*,
tags.*), read from the store or back from runs.csv, and one row per run in the field's names (`run_rows`). Its
`metrics.*` hold each metric's LAST value, the run's final figure."""

import math

import numpy as np
import pandas as pd

from sift_bench.report.vocabulary import NATIVE_LOOP, SIFTER_PARAMS

INFOBATCH = "infobatch"
INFOBATCH_SCHEDULE = "anneal_by"


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


def sifter_params(runs: pd.DataFrame) -> list[str]:
    """The sifter's params that any run logged (without `name`), SageMaker's first: new sifters add their own."""
    logged = [name[len("params.sifter."):] for name in runs.columns
              if name.startswith("params.sifter.") and name not in ("params.sifter.name", "params.sifter._target_")
              and runs[name].notna().any()]
    if _tag_or_param(runs, "sifter", "sifter.name").eq(INFOBATCH).any() and INFOBATCH_SCHEDULE not in logged:
        logged.append(INFOBATCH_SCHEDULE)  # the runs before it existed say their schedule through it (run_rows)
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
        if name == INFOBATCH_SCHEDULE:
            # InfoBatch runs logged before the setting annealed by samples: a row of their own, named so, apart
            # from the official whole-epoch schedule's.
            unnamed = (rows["sifter"] == INFOBATCH).to_numpy() & rows[name].isna().to_numpy()
            rows[name] = rows[name].where(~unnamed, "samples")
    for name in ("test_accuracy", "val_accuracy", "train_time_s", "sift_time_s", "cost_usd", "pct_accepted",
                 "time_to_target_s", "work_trained", "other_cpu_fraction", "eval_time_s", "samples_trained",
                 "samples_seen", "samples_scored"):
        rows[name] = column(used, f"metrics.{name}").to_numpy()
    # What counting work needs (sift_bench.report.work): the per-rank batch and how many ranks shared the run.
    rows["batch_size"] = column(used, "params.trainer.batch_size").to_numpy()
    rows["world_size"] = column(used, "tags.world_size").fillna("1").to_numpy()
    return rows


def time_midpoints(used: pd.DataFrame) -> pd.Series:
    """Seconds since the epoch halfway through each run, (start_time + end_time) / 2; the start alone when the end
    is unknown, NaN without a start. Times come as MLflow's timestamps or as their text in runs.csv."""
    def seconds(times: pd.Series) -> pd.Series:
        stamps = pd.to_datetime(times, utc=True, errors="coerce", format="ISO8601")
        return (stamps - pd.Timestamp(0, tz="UTC")).dt.total_seconds()

    start, end = seconds(column(used, "start_time")), seconds(column(used, "end_time"))
    return ((start + end) / 2).where(end.notna(), start)
