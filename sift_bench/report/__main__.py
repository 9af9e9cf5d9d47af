"""`python -m sift_bench.report`: the savings table, report.md, plots and CSVs of one scale.

Reads the harness's MLflow store (or, with --from-csv, the runs.csv/history.csv/excluded.csv an earlier report
wrote, so results/ can be rebuilt without the sqlite file) and writes under results/<scale>/. No file it writes
holds an absolute path (paths.py): results/ is read on other machines.
Exit status: 0 written; 1 nothing to report (no store, no experiment, or no FINISHED run of the scale), in
which case nothing is written and earlier results stay; 2 bad usage.
"""

import argparse
import shlex
import sys
from pathlib import Path

import pandas as pd

from sift_bench import report
from sift_bench.report import markdown, paths

# conf/tracking/mlflow.yaml's defaults, so a bare `python -m sift_bench.report` reads what a bare job wrote.
DEFAULT_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "sift_bench"
DEFAULT_SCALE = "cpu"
SAVINGS_PLOT = "accuracy_vs_savings.png"
TIME_PLOT = "accuracy_vs_time.png"
PLOT_FILES = (SAVINGS_PLOT, TIME_PLOT)


class NothingToReport(Exception):
    pass


def warn(message: str) -> None:
    print(f"sift_bench.report: {message}", file=sys.stderr)


# ---------------------------------------------------------------- reading

def read_store(uri: str, experiment_name: str) -> pd.DataFrame:
    """Every active run of the experiment, as `mlflow.search_runs` returns them."""
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
    return report.normalise(mlflow.search_runs([experiment.experiment_id], max_results=100_000))


def read_history(uri: str, run_ids: list[str]) -> pd.DataFrame:
    """Per-evaluation metrics, one row per run and step; at a step logged twice (the last evaluation and the
    final figures) the later value wins, as in `metrics.*`."""
    from mlflow.tracking import MlflowClient

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
    history = pd.DataFrame(columns=["run_id", "step", *report.HISTORY_METRICS])
    if (directory / "history.csv").is_file():
        history = pd.read_csv(directory / "history.csv", dtype={"run_id": str})
    return runs, excluded, history


# ---------------------------------------------------------------- plots

def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _task_title(rows: pd.DataFrame, task) -> str:
    model, dataset = report.first_present(rows["model"]), report.first_present(rows["dataset"])
    return f"{markdown.fmt(task)} ({markdown.fmt(model)}, {markdown.fmt(dataset)})"


# Offsets (points, from the label's lower left corner) tried in turn for a point's number: eight directions on
# rings ever farther out, so the numbers of crowded points do not overlap; beyond the first ring a thin line
# leads back to the point.
LABEL_SIZE = (11, 9)  # a number's box in points at fontsize 7: up to two digits
LABEL_OFFSETS = tuple((round(radius * dx) - (LABEL_SIZE[0] if dx < 0 else 0) + (2 if dx >= 0 else -2),
                       round(radius * dy) - (LABEL_SIZE[1] if dy < 0 else 0) + (2 if dy >= 0 else -2))
                      for radius in (4, 14, 26, 40)
                      for dx, dy in ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1), (1, 0), (-1, 0)))
NEAR_LABELS = 8  # the first ring: no leader line


def place_labels(axis, positions: list[tuple[float, float]]) -> list[int]:
    """Greedy placement: for each point (data coordinates) the index into LABEL_OFFSETS of the first offset whose
    label box overlaps neither an earlier label nor any point's marker; the first offset when all overlap."""
    to_points = 72.0 / axis.figure.dpi
    anchors = [tuple(axis.transData.transform(position) * to_points) for position in positions]
    width, height = LABEL_SIZE
    markers = [(x - 3, y - 3, x + 3, y + 3) for x, y in anchors]
    placed, chosen = [], []
    for x, y in anchors:
        def overlaps(box):
            return any(box[0] < other[2] and other[0] < box[2] and box[1] < other[3] and other[1] < box[3]
                       for other in placed + markers)
        boxes = [(x + dx, y + dy, x + dx + width, y + dy + height) for dx, dy in LABEL_OFFSETS]
        free = next((i for i, box in enumerate(boxes) if not overlaps(box)), 0)
        placed.append(boxes[free])
        chosen.append(free)
    return chosen


def plot_accuracy_vs_savings(table: pd.DataFrame, scale: str, path: Path) -> None:
    """Per task, test accuracy against % time saved: the uniform-subsampling frontier as a line through the
    baseline and the random controls, every other configuration a numbered point (error bars = std over seeds)
    coloured by sifter, with a key of number -> configuration under the axes."""
    plt = _pyplot()
    tasks = list(table["task"].drop_duplicates())
    most = max((int(report.is_sifted(table[table["task"] == task]).sum()) for task in tasks), default=0)
    figure, axes = plt.subplots(1, len(tasks), figsize=(6.5 * len(tasks), 4.8 + 0.17 * most), squeeze=False)
    for axis, task in zip(axes[0], tasks):
        rows = table[table["task"] == task]
        axis.set_title(_task_title(rows, task))
        axis.set_xlabel("% training time saved vs baseline")
        axis.set_ylabel("test accuracy (%)")
        if not (rows["sifter"] == report.BASELINE).any():
            axis.text(0.5, 0.5, "no baseline at this scale:\n% savings unknown", transform=axis.transAxes,
                      ha="center", va="center")
            continue
        points = report.frontier_points(rows).dropna(subset=["frontier_x", "test_accuracy"])
        points = points.sort_values("frontier_x", kind="stable")
        axis.plot(points["frontier_x"], points["test_accuracy"], color="gray", marker="s", markersize=4,
                  label="frontier: baseline + random controls")
        sifted = rows[report.is_sifted(rows)].dropna(subset=["pct_time_savings", "test_accuracy"])
        colors = {sifter: f"C{number % 10}" for number, sifter in enumerate(sifted["sifter"].drop_duplicates())}
        keys = []
        for number, (_, row) in enumerate(sifted.iterrows(), start=1):
            axis.errorbar([row["pct_time_savings"]], [row["test_accuracy"]],
                          yerr=[0 if pd.isna(row["test_accuracy_std"]) else row["test_accuracy_std"]],
                          fmt="o", color=colors[row["sifter"]], capsize=3, markersize=4,
                          label=f"{number}: {row['config']} ({row['pct_accepted']:.0f} % kept)")
            keys.append(number)
        axis.autoscale_view()
        positions = list(zip(sifted["pct_time_savings"], sifted["test_accuracy"]))
        for number, position, choice in zip(keys, positions, place_labels(axis, positions)):
            leader = {"arrowstyle": "-", "color": "gray", "linewidth": 0.5} if choice >= NEAR_LABELS else None
            axis.annotate(str(number), position, textcoords="offset points", xytext=LABEL_OFFSETS[choice],
                          fontsize=7, ha="left", va="bottom", arrowprops=leader)
        axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    figure.suptitle(f"scale={scale}: mean over seeds, error bars = std; a point above the gray line beats uniform "
                    "subsampling at equal time", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def _curve(history: pd.DataFrame, run_ids: list[str]) -> pd.DataFrame:
    """Mean cumulative train time and accuracy over a configuration's seeds at each evaluation step."""
    points = history[history["run_id"].isin(run_ids)].dropna(subset=["train_time_s", "test_accuracy"])
    return points.groupby("step").agg(train_time_s=("train_time_s", "mean"), accuracy=("test_accuracy", "mean"),
                                      accuracy_std=("test_accuracy", "std")).reset_index()


def plot_accuracy_vs_time(table: pd.DataFrame, history: pd.DataFrame, kinds: dict[str, str], scale: str,
                          path: Path) -> dict:
    """Per task, accuracy against cumulative training time for the baseline, the best sifted configuration
    and its paired random control, from the runs of one machine kind (`kinds`: run_id -> kind), the kind with
    the most runs among those configurations, since seconds of two kinds do not compare.
    Returns task -> the kind drawn; empty (and no file) when there is no history to draw."""
    best = report.best_sifted(table)
    pairs = report.pair_controls(table)
    tasks = list(table["task"].drop_duplicates())
    plt = _pyplot()
    figure, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.5), squeeze=False)
    drawn = {}
    for axis, task in zip(axes[0], tasks):
        rows = table[table["task"] == task]
        axis.set_title(_task_title(rows, task))
        axis.set_xlabel("cumulative training time (s)")
        axis.set_ylabel("test accuracy (%)")
        lines = [(rows[rows["sifter"] == report.BASELINE].head(1), "baseline (sifter=none)", "black", "-")]
        if task in best:
            sifted = table.loc[[best[task]]]
            lines.append((sifted, f"best sifted: {sifted['config'].iloc[0]}", "C0", "-"))
            pair = pairs[(pairs["task"] == task) & (pairs["config"] == sifted["config"].iloc[0])]
            if len(pair) and pd.notna(pair["nearest_control"].iloc[0]):
                nearest = pair["nearest_control"].iloc[0]
                control = rows[(rows["sifter"] == report.CONTROL) & (rows["config"] == nearest)]
                lines.append((control, f"nearest control: {nearest}", "C1", "--"))
        lines = [line for line in lines if not line[0].empty]
        run_ids = [run_id for config, *_ in lines for run_id in config["run_ids"].iloc[0].split()]
        plotted = pd.Series([kinds.get(run_id) for run_id in run_ids], dtype=object).dropna()
        kind = plotted.value_counts(sort=False).idxmax() if len(plotted) else None
        for config, label, color, style in lines:
            curve = _curve(history, [run_id for run_id in config["run_ids"].iloc[0].split()
                                     if kinds.get(run_id) == kind])
            if curve.empty:
                continue
            axis.errorbar(curve["train_time_s"], curve["accuracy"], yerr=curve["accuracy_std"].fillna(0),
                          color=color, linestyle=style, marker="o", markersize=3, capsize=2, label=label)
            drawn[task] = kind
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=8)
        else:
            axis.text(0.5, 0.5, "no metric history", transform=axis.transAxes, ha="center", va="center")
    if drawn:
        figure.suptitle(f"scale={scale}: mean over seeds at each evaluation, error bars = std", fontsize=9)
        figure.tight_layout()
        figure.savefig(path, dpi=120)
    plt.close(figure)
    return drawn


# ---------------------------------------------------------------- writing

def write_results(out: Path, used: pd.DataFrame, excluded: pd.DataFrame, history: pd.DataFrame, scale: str,
                  source: str, report_command: str) -> pd.DataFrame:
    out.mkdir(parents=True, exist_ok=True)
    table = report.build_table(used)
    # Columns no used run logged (another scale's or sifter's params) say nothing about these runs.
    used.dropna(axis=1, how="all").to_csv(out / "runs.csv", index=False)
    excluded.to_csv(out / "excluded.csv", index=False)
    history.to_csv(out / "history.csv", index=False)
    table.round(6).to_csv(out / "table.csv", index=False)

    for name in PLOT_FILES:
        (out / name).unlink(missing_ok=True)  # a plot this report cannot draw must not be left from an older one
    plots = {}
    plot_accuracy_vs_savings(table, scale, out / SAVINGS_PLOT)
    plots[SAVINGS_PLOT] = ("Test accuracy against % training time saved, per task: the gray line is the "
                           "uniform-subsampling frontier (the baseline at 0 and the random controls), every other "
                           "configuration a numbered point, its number in the key under the axes. Error bars: std "
                           "over seeds.")
    kinds = dict(zip(used["run_id"], report.machine_kinds(used)))
    drawn = plot_accuracy_vs_time(table, history, kinds, scale, out / TIME_PLOT)
    if drawn:
        plots[TIME_PLOT] = ("Accuracy against cumulative training time at each evaluation, for the baseline, the "
                            "best sifted configuration (chosen on validation: the equal-time headline's, else "
                            f"the most time saved within {report.HEADLINE_TOLERANCE:g} points of the baseline, "
                            "else the most accurate) and the random control nearest it in % accepted; test "
                            "accuracy, mean over the seeds run on one machine kind per task: "
                            + "; ".join(f"{markdown.fmt(task)} on `{kind}`" for task, kind in drawn.items()) + ".")

    notes = []
    for task in report.tasks_without_baseline(table):
        notes.append(f"Task {markdown.fmt(task)} has no baseline (sifter=none) run at this scale: its savings, "
                     "accuracy_baseline and accuracy_delta are empty.")
    for task, short in report.fewer_seeds(table).items():
        notes.append(f"Task {markdown.fmt(task)}: {len(short)} configurations lack some of the baseline's seeds "
                     "(an unfinished sweep or a failed run); their accuracy delta is paired over the seeds they "
                     "have: " + "; ".join(f"{config} (seeds {seeds})" for config, seeds in short) + ".")
    for run_id, names in report.missing_metrics(used).items():
        notes.append(f"Run {run_id} lacks {', '.join(names)}: left out of those means.")
    for run_id, kind in report.runs_without_baseline(used).items():
        notes.append(f"Run {run_id} ran on `{kind}`, where its task has no baseline run: its savings are unknown "
                     "and left out of the means (its accuracy counts). Run the baseline on that kind to pair it.")
    for run_id, fraction in report.contended_runs(used).items():
        notes.append(f"Run {run_id}: other processes used {fraction:.2f} of a core per second while it trained "
                     f"(over {report.CONTENDED_FRACTION:g}): its time is suspect.")
    for pace in report.baseline_pace(used):
        odd = "; ".join(f"run {run_id} (seed {seed}) at {100 * (ratio - 1):+.0f} %, the time reference of "
                        f"{pace['referenced_by'][run_id]} runs (x {ratio:.3f})" for run_id, seed, ratio in pace["odd"])
        measured, at_median = pace["baseline_time_s"], pace["baseline_time_at_median_s"]
        notes.append(
            f"Task {markdown.fmt(pace['task'])} on `{pace['machine_kind']}`: the baseline trained at an odd pace "
            f"(seconds per unit of work, scoring left out, against the median of the task's {pace['n_runs']} runs "
            f"on that kind): {odd}. Each run's savings divide by the pace of the baseline nearest it in time; at "
            f"the median pace a run that takes an odd baseline as reference would read 100 - (100 - S) x that "
            f"factor instead of its % time savings S. The baseline's mean time is {measured:.1f} s, "
            f"{at_median:.1f} s at the median pace. The machine's speed drifted between runs: read savings within "
            "that margin as noise, unless the drift lasted long enough for the nearest baseline to share it.")
    for task, names in report.varying_settings(used).items():
        notes.append(f"Runs of task {markdown.fmt(task)} differ in {', '.join(names)}, not only in the sifter and "
                     "seed: its rows may compare different training setups.")
    if TIME_PLOT not in plots:
        notes.append("No per-evaluation history for the configurations to plot: accuracy_vs_time.png not drawn.")
    (out / "report.md").write_text(markdown.render_report(
        table=table, used=used, excluded=excluded, scale=scale, source=source, report_command=report_command,
        plots=plots, notes=notes))
    return table


# ---------------------------------------------------------------- command line

def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m sift_bench.report",
        description="Build the smart-sifting savings table (table.csv, report.md, plots, runs.csv, history.csv, "
                    "excluded.csv) for one scale from the harness's MLflow store, using FINISHED runs only.",
        epilog="Exit status: 0 written; 1 nothing to report (no store, no experiment, or no FINISHED run of the "
               "scale): nothing is written; 2 bad usage.")
    cli.add_argument("--tracking-uri", help=f"MLflow store to read (default {DEFAULT_URI}, the harness default)")
    cli.add_argument("--experiment-name", help=f"MLflow experiment (default {DEFAULT_EXPERIMENT})")
    cli.add_argument("--scale", help=f"only runs of this scale go in (default {DEFAULT_SCALE}; with --from-csv, "
                                     "the scale of the runs in the CSV)")
    cli.add_argument("--machine", metavar="TEXT",
                     help="only runs whose machine kind (tag machine.kind) contains TEXT go in, one kind per task "
                          "(default: every kind, each run's savings measured against the baseline of its own kind)")
    cli.add_argument("--task", action="append", metavar="NAME",
                     help="only this task's runs go in (repeat for more; default: every task), for example to "
                          "publish one task's finished table while the other's sweep is still being run")
    cli.add_argument("--metric", metavar="NAME", help="each run's test and validation accuracy is its metric NAME, "
                     "e.g. the val_acc a script run by python -m sift_bench.sagemaker logged (percent; a metric "
                     "within [0, 1] is read as a fraction)")
    cli.add_argument("--out", type=Path, help="output folder (default results/<scale>)")
    cli.add_argument("--from-csv", type=Path, metavar="DIR",
                     help="rebuild from DIR/runs.csv, excluded.csv and history.csv instead of a store (DIR may "
                          "also be the path of the runs.csv, with the other two next to it)")
    cli.add_argument("--budget-from", type=Path, nargs="+", metavar="DIR",
                     help="instead of a table: the budget view (budget.csv, budget.md, budget.png in --out, default "
                          "results/budget) from two or more report folders of the same tasks at different training "
                          "budgets, e.g. --budget-from results/cpu results/cpu_long")
    return cli


def csv_scale(runs: pd.DataFrame) -> str | None:
    scales = report.column(runs, "tags.scale").dropna().unique()
    return scales[0] if len(scales) == 1 else None


def budget_view(cli, args, command: str) -> int:
    from sift_bench.report import budget

    if len(args.budget_from) < 2:
        cli.error("--budget-from takes two or more report folders, one per training budget")
    for folder in args.budget_from:
        if not (folder / "table.csv").is_file() or not (folder / "runs.csv").is_file():
            cli.error(f"--budget-from: {folder} holds no table.csv and runs.csv (write its report first)")
    out = args.out or Path("results") / "budget"
    try:
        view = budget.write(args.budget_from, out, command)
    except ValueError as error:
        cli.error(str(error))
    print(f"sift_bench.report: {len(view)} rows over budgets "
          + ", ".join(f"{task} {sorted(rows['budget_epochs'].unique())} epochs"
                      for task, rows in view.groupby("task", sort=False))
          + f"; wrote {out}/budget.csv, budget.md, budget.png")
    for _, row in view[report.is_sifted(view)].iterrows():
        print(f"  {row['task']} {row['budget_epochs']} epochs  {row['config']}: vs frontier "
              f"{row['accuracy_vs_frontier']:+.2f} ± {row['accuracy_vs_frontier_std']:.2f}, extra savings "
              f"{row['extra_savings']:+.1f} %")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cli = parser()
    args = cli.parse_args(argv)
    # Relative paths only: report.md quotes this command, and results/ is read on other machines.
    report_command = shlex.join(["python", "-m", "sift_bench.report", *map(paths.relative_text, argv)])
    if args.budget_from:
        return budget_view(cli, args, report_command)
    if args.from_csv and (args.tracking_uri or args.experiment_name):
        cli.error("--from-csv reads CSV files; it takes no --tracking-uri or --experiment-name")
    try:
        if args.from_csv:
            if not runs_csv_path(args.from_csv).is_file():
                cli.error(f"--from-csv: no runs.csv in {args.from_csv}")
            runs, excluded_before, history = read_csv_dir(args.from_csv)
            scale = args.scale or csv_scale(runs) or DEFAULT_SCALE
            source = f"rebuilt from the CSV files in {paths.relative_text(str(runs_csv_path(args.from_csv).parent))}"
        else:
            uri = args.tracking_uri or DEFAULT_URI
            experiment_name = args.experiment_name or DEFAULT_EXPERIMENT
            runs = read_store(uri, experiment_name)
            excluded_before = pd.DataFrame(columns=list(report.EXCLUDED_COLUMNS))
            scale = args.scale or DEFAULT_SCALE
            source = f"experiment `{experiment_name}` in `{paths.relative_text(uri)}`"
        if runs.empty:
            raise NothingToReport(f"{runs_csv_path(args.from_csv)} has no runs" if args.from_csv
                                  else "the store has no runs")
        try:
            runs = report.with_accuracy_metric(runs, args.metric) if args.metric else runs
            used, excluded = report.split_runs(runs, scale, args.machine, args.task)
        except ValueError as error:
            cli.error(str(error))
        if len(excluded_before):
            excluded = pd.concat([frame for frame in (excluded_before, excluded) if len(frame)], ignore_index=True)
        unfinished = excluded[excluded["reason"].str.startswith("status ", na=False)]
        if len(unfinished):
            warn(f"warning: {len(unfinished)} runs of scale {scale} are not FINISHED and are left out:")
            for _, run in unfinished.iterrows():
                print(f"  {run['run_id']}  {markdown.fmt(run['run_name'])}  {run['status']}", file=sys.stderr)
        other_scales = excluded["reason"].str.startswith("scale ", na=False).sum()
        if other_scales:
            warn(f"ignored {other_scales} runs of other scales (--scale {scale})")
        other_machines = excluded[excluded["reason"].str.startswith("machine ", na=False)]
        if len(other_machines):
            warn(f"{len(other_machines)} FINISHED runs on machine kinds other than --machine {args.machine!r} are "
                 "left out: "
                 + "; ".join(f"{count} on {kind}" for kind, count in
                             other_machines["reason"].str.removeprefix("machine ").value_counts(sort=False).items()))
        if used.empty:
            present = sorted(set(excluded.loc[excluded["status"] == "FINISHED", "scale"].dropna()) - {scale})
            hint = f" (FINISHED runs exist at: {', '.join(present)}; pick one with --scale)" if present else ""
            raise NothingToReport(f"no FINISHED run of scale {scale!r}{hint}")
        if not args.from_csv:
            history = read_history(uri, list(used["run_id"]))
        # runs.csv, excluded.csv and the commands in report.md carry no absolute path (data_dir, source.name, ...).
        used, excluded = paths.relative_frame(used), paths.relative_frame(excluded)
        out = args.out or Path("results") / scale
        table = write_results(out, used, excluded, history, scale, source, report_command)
    except NothingToReport as reason:
        warn(f"{reason}; nothing written")
        return 1
    print(f"sift_bench.report: {len(used)} runs -> {len(table)} rows; wrote {out}/report.md, table.csv, runs.csv, "
          "history.csv, excluded.csv and plots")
    for _, line in report.headline_at_equal_time(table).iterrows():
        print(f"  {markdown.fmt(line['task'])} at equal time: {line['statement']}")
    for _, line in report.headline(table).iterrows():
        print(f"  {markdown.fmt(line['task'])} within {report.HEADLINE_TOLERANCE:g} points: {line['statement']}")
    print("  per selection rule:")
    for _, line in report.headline_at_equal_time(table, per_sifter=True).iterrows():
        print(f"    {markdown.fmt(line['task'])} {markdown.fmt(line['sifter'])} at equal time: {line['statement']}")
    for _, line in report.headline(table, per_sifter=True).iterrows():
        print(f"    {markdown.fmt(line['task'])} {markdown.fmt(line['sifter'])} within "
              f"{report.HEADLINE_TOLERANCE:g} points: {line['statement']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
