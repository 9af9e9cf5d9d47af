"""Where the report's runs come from: the harness's MLflow store, or the CSVs an earlier report wrote (runs.csv,
excluded.csv, history.csv), so results/ can be rebuilt without the sqlite file."""

from pathlib import Path

import pandas as pd

from sift_bench import report


class NothingToReport(Exception):
    pass


def read_store(uri: str, experiment_name: str, filter_string: str = "") -> pd.DataFrame:
    """Every active run of the experiment (those `filter_string` selects, in MLflow's search syntax, where given), as
    `mlflow.search_runs` returns them."""
    # MLflow loads only when a store is read: `import sift_bench.report` and a --from-csv rebuild need none.
    import mlflow
    from mlflow.tracking import MlflowClient

    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):])
        # Opening a missing sqlite file would create an empty store; a report should not leave one behind.
        if not path.is_file():
            raise NothingToReport(f"no MLflow store at {path} (tracking URI {uri})")
    experiment = MlflowClient(uri).get_experiment_by_name(experiment_name)
    if experiment is None:
        raise NothingToReport(f"no experiment named {experiment_name!r} in {uri}")
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs([experiment.experiment_id], filter_string=filter_string, max_results=100_000)
    # MLflow orders the metrics.*, params.* and tags.* columns differently from one process to the next; sorted, the
    # same store always gives the same runs.csv.
    runs = runs[[name for name in runs.columns if "." not in name] + sorted(name for name in runs.columns if "." in name)]
    return report.normalise(runs)


def read_history(uri: str, run_ids: list[str]) -> pd.DataFrame:
    """Per-evaluation metrics, one row per run and step; at a step logged twice (the last evaluation and the
    final figures) the later value wins, as in `metrics.*`."""
    from mlflow.tracking import MlflowClient  # as in read_store: only a store's reader loads MLflow

    client = MlflowClient(uri)
    records = [(run_id, point.step, point.timestamp, order, name, point.value)
               for run_id in run_ids for name in report.HISTORY_METRICS
               for order, point in enumerate(client.get_metric_history(run_id, name))]
    return wide_history(pd.DataFrame(records, columns=["run_id", "step", "timestamp", "order", "metric", "value"]))


def wide_history(long: pd.DataFrame) -> pd.DataFrame:
    columns = ["run_id", "step", *report.HISTORY_METRICS]
    if long.empty:
        return pd.DataFrame(columns=columns)
    latest = long.sort_values(["run_id", "metric", "step", "timestamp", "order"]).drop_duplicates(
        ["run_id", "metric", "step"], keep="last")
    wide = latest.pivot(index=["run_id", "step"], columns="metric", values="value").reset_index()
    return wide.reindex(columns=columns)


def runs_csv_path(from_csv: Path) -> Path:
    """--from-csv names the folder of an earlier report or its runs.csv itself."""
    return from_csv if from_csv.is_file() else from_csv / "runs.csv"


def read_csv_dir(from_csv: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """runs.csv (the runs a report used), excluded.csv and history.csv next to it, as the store would have given
    them. `from_csv`: the folder, or the path of its runs.csv."""
    runs_path = runs_csv_path(from_csv)
    directory = runs_path.parent
    runs = report.normalise(pd.read_csv(runs_path, dtype=str, keep_default_na=False))
    excluded = pd.DataFrame(columns=list(report.EXCLUDED_COLUMNS))
    if (directory / "excluded.csv").is_file():
        excluded = report.normalise(pd.read_csv(directory / "excluded.csv", dtype=str, keep_default_na=False))
        if "kind" not in excluded:  # written before excluded.csv had the column
            excluded["kind"] = excluded["reason"].map(report.exclusion_of_reason)
    history = pd.DataFrame(columns=["run_id", "step", *report.HISTORY_METRICS])
    if (directory / "history.csv").is_file():
        history = pd.read_csv(directory / "history.csv", dtype={"run_id": str})
    return runs, excluded, history
