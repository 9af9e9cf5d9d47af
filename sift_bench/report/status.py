"""The status of the published tables in one markdown table: per task and training budget, the seeds, the baseline,
the verdict that decides (the equal-time headline: chosen on validation, reported with test figures), SageMaker's
example setting and a uniform half of the data.

Built from report folders' table.csv alone, so the status a README shows can be rebuilt from what is committed and
checked against it (tests/test_readme.py does): `python -m sift_bench.report --budget-from results/cpu
results/cpu_long` prints it and writes it at the top of budget.md. Pure pandas.
"""

from pathlib import Path

import pandas as pd

from sift_bench import report
from sift_bench.report.bootstrap import MIN_SEEDS
from sift_bench.report.budget import read_report
from sift_bench.report.verdicts import interval_text

# SageMaker's documented example (and README's second command): beta_value=3, loss_history_length=500, sift_delay=10.
SAGEMAKER_EXAMPLE = {"sifter": "relative_probabilistic", "beta_value": 3, "loss_history_length": 500,
                     "sift_delay": 10}
UNIFORM_HALF = {"sifter": report.CONTROL, "keep_fraction": 0.5}
COLUMNS = ("task", "budget", "seeds", "baseline, test accuracy",
           "best against the uniform-subsampling frontier (chosen on validation, test figures)",
           "SageMaker's example, `beta_value=3`", "a uniform half of the data, `random keep_fraction=0.5`")


def _matching(rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
    chosen = pd.Series(True, index=rows.index)
    for name, value in settings.items():
        if name not in rows.columns:
            return rows.iloc[0:0]
        column = rows[name]
        chosen &= (column == value) if isinstance(value, str) else (pd.to_numeric(column, errors="coerce") == value)
    return rows[chosen]


def _accuracy(row: pd.Series) -> str:
    spread = f" ± {row['test_accuracy_std']:.2f}" if pd.notna(row["test_accuracy_std"]) else ""
    return f"{row['test_accuracy']:.2f}{spread} %"


def _saved_at(row: pd.Series) -> str:
    if pd.isna(row["pct_time_savings"]):  # every run's savings left out (a slowed host, no baseline on its kind)
        return f"no savings counted (report.md's notes say why) at {row['test_accuracy']:.2f} %"
    return f"{row['pct_time_savings']:.1f} % saved at {row['test_accuracy']:.2f} %"


def _against_frontier(row: pd.Series) -> str:
    """`-3.33 [-4.10, -2.52] points (below)`: the difference, its 95 % interval (`-3.33 (no interval)` under
    MIN_SEEDS seeds) and the verdict the table gives."""
    if pd.isna(row["accuracy_vs_frontier"]):
        return "outside the frontier's range"
    versus = interval_text(row["accuracy_vs_frontier"], row["accuracy_vs_frontier_lo"],
                           row["accuracy_vs_frontier_hi"])
    return f"{versus} points ({row['verdict_vs_frontier']})"


def _seeds(rows: pd.DataFrame) -> str:
    fewest, most = int(rows["n_seeds"].min()), int(rows["n_seeds"].max())
    return str(most) if fewest == most else f"{fewest} to {most} (unfinished)"


def _best(rows: pd.DataFrame) -> str:
    sifted = rows[report.is_sifted(rows)]
    if sifted.empty:
        return "no selection rule in this table"
    if sifted["n_seeds"].max() < MIN_SEEDS:
        return f"no verdict yet: no configuration has {MIN_SEEDS} seeds"
    in_range = sifted[sifted["val_frontier_accuracy"].notna()]
    if len(in_range) and (in_range["val_bootstrap_seeds"].fillna(0) < MIN_SEEDS).all():
        # A verdict's interval is over the seeds a configuration shares with every frontier point (an unfinished
        # sweep can have 3 seeds of a rule and 2 of a random control): "none above it" would read as a verdict.
        return f"no verdict yet: no configuration has {MIN_SEEDS} seeds in common with every point of the frontier"
    chosen = report.headline_at_equal_time(rows).iloc[0]
    if pd.notna(chosen["config"]):
        return f"{chosen['config']}: {_saved_at(chosen)}, {_against_frontier(chosen)}"
    differences = sifted["accuracy_vs_frontier"].dropna()
    on_test = (f"; on test every one is {differences.min():+.2f} to {differences.max():+.2f} points from it"
               if len(differences) else "")
    return f"none above it on validation{on_test}"


def task_status(rows: pd.DataFrame, epochs: int) -> list[str]:
    """One task's rows of one table.csv -> the status table's cells."""
    baseline = rows[rows["sifter"] == report.BASELINE]
    example, half = _matching(rows, SAGEMAKER_EXAMPLE), _matching(rows, UNIFORM_HALF)
    if len(baseline) == 0:
        return [rows["task"].iloc[0], f"{epochs} epochs", _seeds(rows), "no baseline", "no baseline, so no frontier",
                "", ""]
    return [rows["task"].iloc[0], f"{epochs} epochs", _seeds(rows), _accuracy(baseline.iloc[0]), _best(rows),
            f"{_saved_at(example.iloc[0])}, {_against_frontier(example.iloc[0])}" if len(example) else "not run",
            _saved_at(half.iloc[0]) if len(half) else "not run"]


def status_lines(folders: list[Path]) -> list[str]:
    """The status table (markdown lines) of report folders, one row per task and budget, by task then budget."""
    rows = []
    for folder in folders:
        table, epochs = read_report(folder)
        for task, task_rows in table.groupby("task", sort=False):
            rows.append((task, epochs[task], task_status(task_rows.reset_index(drop=True), epochs[task])))
    rows.sort(key=lambda row: (row[0], row[1]))
    cells = [COLUMNS, ("---",) * len(COLUMNS), *(row[2] for row in rows)]
    return ["| " + " | ".join(line) + " |" for line in cells]
