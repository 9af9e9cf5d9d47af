"""The verdict as the training budget grows: several reports of one task at different budgets, side by side.

Each folder is a report `python -m sift_bench.report` wrote (its table.csv and runs.csv), one budget each, e.g.
results/cpu (CIFAR-10 for 12 epochs, SST-2 for 2) and results/cpu_long (30 and 4). A policy's configuration is
matched across budgets by its settings (sifter and every sifter param), so a row reads: at this many epochs, this
is how far the configuration sits from the uniform-subsampling frontier, and how much time selection itself saves
there (`extra_savings`). Pure pandas, except `plot`.
"""

from pathlib import Path

import numpy as np
import pandas as pd

from sift_bench import report
from sift_bench.report.bootstrap import MIN_SEEDS
from sift_bench.report.plots import _pyplot
from sift_bench.report.verdicts import interval_text

COLUMNS = ("task", "budget_epochs", "sifter", "settings", "config", "n_seeds", "pct_accepted", "pct_time_savings",
           "pct_time_savings_std", "test_accuracy", "test_accuracy_std", "accuracy_baseline", "frontier_accuracy",
           "accuracy_vs_frontier", "accuracy_vs_frontier_std", "accuracy_vs_frontier_lo", "accuracy_vs_frontier_hi",
           "verdict_vs_frontier", "extra_savings", "extra_savings_lo", "extra_savings_hi", "bootstrap_seeds",
           "val_accuracy_vs_frontier", "val_accuracy_vs_frontier_lo", "val_accuracy_vs_frontier_hi", "source")


def settings_key(table: pd.DataFrame) -> pd.Series:
    """`relative_probabilistic beta_value=1 loss_history_length=500 sift_delay=10`: every setting a row has."""
    params = [name for name in table.columns if name not in report.TABLE_STATS and name not in
              ("task", "model", "dataset", "sifter", "config", *report.FRONTIER_COLUMNS)]

    def key(row):
        settings = [f"{name}={row[name]}" for name in params if pd.notna(row[name]) and str(row[name]) != ""]
        return " ".join([str(row["sifter"]), *settings])

    return table.apply(key, axis=1) if len(table) else pd.Series(dtype=object)


def epochs_per_task(runs: pd.DataFrame) -> dict:
    """task -> the training budget of its runs in epochs (`params.trainer.epochs`); a report holds one per task."""
    tasks = report.task_labels(runs)
    epochs = report.column(runs, "params.trainer.epochs")
    budgets = {}
    for task in tasks.dropna().unique():
        values = sorted(set(epochs[tasks == task].dropna().astype(str)))
        if len(values) != 1:
            raise ValueError(f"the runs of {task} were trained for {values or 'unknown'} epochs; a report used as "
                             "one budget must hold one (build one report per budget)")
        budgets[task] = int(float(values[0]))
    return budgets


def read_report(folder: Path) -> tuple[pd.DataFrame, dict]:
    """A report folder's table.csv, and its budget in epochs per task (from its runs.csv)."""
    runs = report.normalise(pd.read_csv(folder / "runs.csv", dtype=str, keep_default_na=False))
    return pd.read_csv(folder / "table.csv"), epochs_per_task(runs)


def budget_table(folders: list[Path]) -> pd.DataFrame:
    """One row per task, configuration and budget, from each folder's table.csv and runs.csv."""
    frames = []
    for folder in folders:
        table, epochs = read_report(folder)
        # The settings as written (`500`, not `500.0`), to match a configuration across folders.
        table["settings"] = settings_key(pd.read_csv(folder / "table.csv", dtype=str, keep_default_na=False))
        table["budget_epochs"] = table["task"].map(epochs)
        table["source"] = str(folder)
        frames.append(table.reindex(columns=list(COLUMNS)))
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    combined = pd.concat(frames, ignore_index=True)
    duplicated = combined.duplicated(["task", "budget_epochs", "settings"], keep=False)
    if duplicated.any():
        first = combined[duplicated].iloc[0]
        raise ValueError(f"{first['task']} at {first['budget_epochs']} epochs is in more than one folder "
                         f"({', '.join(combined.loc[duplicated, 'source'].unique())}): give one report per budget")
    # Configurations measured at one budget only say nothing about the curve.
    budgets_per_setting = combined.groupby(["task", "settings"])["budget_epochs"].transform("nunique")
    combined = combined[budgets_per_setting > 1]
    order = sorted(combined.index, key=lambda i: (str(combined.at[i, "task"]),
                                                  report.sifter_rank(combined.at[i, "sifter"]),
                                                  combined.at[i, "settings"], combined.at[i, "budget_epochs"]))
    return combined.loc[order].reset_index(drop=True)


def plot(budget: pd.DataFrame, path: Path) -> None:
    """Per task: budget on x, extra savings on y (bars: its 95 % interval, the bootstrap over seeds), one line per
    policy configuration, zero marked."""
    plt = _pyplot()
    sifted = budget[report.is_sifted(budget)]
    tasks = list(dict.fromkeys(sifted["task"]))
    figure, axes = plt.subplots(1, max(len(tasks), 1), figsize=(6.5 * max(len(tasks), 1), 4.5), squeeze=False)
    for axis, task in zip(axes[0], tasks):
        rows = sifted[sifted["task"] == task]
        for settings, line in rows.groupby("settings", sort=False):
            line = line.sort_values("budget_epochs")
            extra = line["extra_savings"].astype(float)
            # A percentile interval need not hold the point estimate; matplotlib refuses a negative bar.
            below = (extra - line["extra_savings_lo"].astype(float)).clip(lower=0)
            above = (line["extra_savings_hi"].astype(float) - extra).clip(lower=0)
            axis.errorbar(line["budget_epochs"], extra, yerr=[below.to_numpy(), above.to_numpy()], marker="o",
                          capsize=3, label=str(line["config"].iloc[-1]))
        axis.axhline(0.0, color="black", linewidth=1)
        axis.set_xlabel("training budget (epochs)")
        axis.set_ylabel("extra savings over uniform subsampling (% time)")
        axis.set_title(f"{task}: selection against the frontier")
        axis.set_xticks(sorted(rows["budget_epochs"].dropna().unique()))
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def markdown_lines(budget: pd.DataFrame, command: str, status: list[str] = ()) -> list[str]:
    """budget.md: the status table (`status.status_lines`, when given), then per task each configuration's distance
    to the frontier and extra savings at each budget."""
    lines = ["# The savings table as the training budget grows", "", f"Made by `{command}`.", ""]
    if status:
        lines += ["## Status", "", "Per task and budget, from each folder's table.csv: test accuracy in %, mean ± std "
                  "over seeds; points against the frontier with their 95 % interval [lo, hi] (a bootstrap over "
                  "seeds that resamples accuracy and % time saved together), and the verdict.", "",
                  *status, ""]
    lines += ["`vs frontier`: test accuracy minus the uniform-subsampling frontier at the same % time saved, "
              "[its 95 % interval]; `extra savings`: % time saved beyond what uniform subsampling saves at equal "
              "accuracy, [its 95 % interval]; both empty outside the frontier's range, and no interval under "
              f"{MIN_SEEDS} seeds in common with the frontier.", ""]
    for task, rows in budget.groupby("task", sort=False):
        epochs = sorted(rows["budget_epochs"].unique())
        lines += [f"## {task}", "",
                  "| configuration | " + " | ".join(f"{e} epochs: vs frontier | extra savings" for e in epochs) + " |",
                  "| --- |" + " --- | --- |" * len(epochs)]
        for settings, line in rows.groupby("settings", sort=False):
            cells = []
            for e in epochs:
                at = line[line["budget_epochs"] == e]
                if at.empty:
                    cells += ["", ""]
                    continue
                row = at.iloc[0]
                cells += [interval_text(row["accuracy_vs_frontier"], row["accuracy_vs_frontier_lo"],
                                        row["accuracy_vs_frontier_hi"]),
                          interval_text(row["extra_savings"], row["extra_savings_lo"], row["extra_savings_hi"], 1)]
            lines.append(f"| {line['config'].iloc[-1]} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def write(folders: list[Path], out: Path, command: str, status: list[str] = ()) -> pd.DataFrame:
    budget = budget_table(folders)
    out.mkdir(parents=True, exist_ok=True)
    budget.replace({np.nan: None}).to_csv(out / "budget.csv", index=False)
    (out / "budget.md").write_text("\n".join(markdown_lines(budget, command, status)) + "\n")
    plot(budget, out / "budget.png")
    return budget
