"""`python -m sift_bench.report`: the savings table, report.md, plots and CSVs of one scale.

Reads the harness's MLflow store (or, with --from-csv, the runs.csv/history.csv/excluded.csv an earlier report
wrote, so results/ can be rebuilt without the sqlite file) and writes to --out, by default results/<scale>/. There it
never replaces a report of another source (the committed tables) unless told to with --force. No file it writes
holds an absolute path (sift_bench.portable): results/ is read on other machines.
Exit status: 0 written; 1 nothing to report (no store, no experiment, or no FINISHED run of the scale), in
which case nothing is written and earlier results stay; 2 bad usage.
"""

import argparse
import shlex
import sys
from pathlib import Path

import pandas as pd

from sift_bench import report
from sift_bench.cli import DEFAULT_URI, add_store_arguments, experiment_of
from sift_bench.portable import relative_frame, relative_text
from sift_bench.report import budget, claims, markdown, status
from sift_bench.report.notes import report_notes
from sift_bench.report.plots import (BREAK_EVEN_CAPTION, BREAK_EVEN_PLOT, PLOT_FILES, SAVINGS_PLOT,
                                     SAVINGS_PLOT_CAPTION, TIME_PLOT, plot_accuracy_vs_savings, plot_accuracy_vs_time,
                                     plot_break_even, time_plot_caption)
from sift_bench.report.sources import NothingToReport, read_csv_dir, read_history, read_store, runs_csv_path
from sift_bench.report.verdicts import interval_text

# conf/tracking/mlflow.yaml's defaults, so a bare `python -m sift_bench.report` reads what a bare job wrote.
DEFAULT_SCALE = "cpu"
REPORT_FILES = ("report.md", "table.csv")  # what says a folder holds a report
BUDGET_FILES = ("budget.md", "budget.csv")
def warn(message: str) -> None:
    print(f"sift_bench.report: {message}", file=sys.stderr)


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
    plot_accuracy_vs_savings(table, scale, out / SAVINGS_PLOT)
    plots = {SAVINGS_PLOT: SAVINGS_PLOT_CAPTION}
    kinds = dict(zip(used["run_id"], report.machine_kinds(used)))
    drawn = plot_accuracy_vs_time(table, history, kinds, scale, out / TIME_PLOT)
    if drawn:
        plots[TIME_PLOT] = time_plot_caption(drawn)
    if plot_break_even(table, scale, out / BREAK_EVEN_PLOT):
        plots[BREAK_EVEN_PLOT] = BREAK_EVEN_CAPTION

    notes = report_notes(table, used, time_plot_drawn=TIME_PLOT in plots)
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
    add_store_arguments(cli, f"{DEFAULT_URI}, the harness default")
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
    cli.add_argument("--out", type=Path,
                     help="output folder (default results/<scale>, where a report of another store is not replaced "
                          "without --force)")
    cli.add_argument("--force", action="store_true",
                     help="without --out: replace the report in results/<scale> (results/budget) even when another "
                          "store made it")
    cli.add_argument("--from-csv", type=Path, metavar="DIR",
                     help="rebuild from DIR/runs.csv, excluded.csv and history.csv instead of a store (DIR may "
                          "also be the path of the runs.csv, with the other two next to it)")
    cli.add_argument("--budget-from", type=Path, nargs="+", metavar="DIR",
                     help="instead of a table: the budget view (budget.csv, budget.md, budget.png in --out, default "
                          "results/budget) from two or more report folders of the same tasks at different training "
                          "budgets, e.g. --budget-from results/cpu results/cpu_long")
    cli.add_argument("--claims", type=Path, metavar="PATH",
                     help="with --budget-from: also the anchors' claims beside the closest measured configurations "
                          "of those folders' tables, in PATH (markdown, e.g. results/claims.md) and a .csv beside it")
    return cli


def output_folder(cli, args, default: Path, names: tuple[str, ...], own_folder: Path | None = None) -> Path:
    """--out, else `default`, refused (exit 2) when it holds a report (`names`) that another source made, unless
    --force: a bare command in a checkout must not replace the published tables. `own_folder`: the folder of what
    is read (a store's mlflow.db, the CSVs), which may rebuild its own report."""
    if args.out is not None:
        return args.out
    held = [name for name in names if (default / name).is_file()]
    if held and not args.force and (own_folder is None or own_folder.resolve() != default.resolve()):
        cli.error(f"{default} holds a report ({', '.join(held)}) that another source made, which this one would "
                  f"replace: write elsewhere with --out DIR, or replace it with --force")
    return default


def replaced_note(out: Path, names: tuple[str, ...]) -> str:
    """What the command's last line adds when it writes over a report, so no report is replaced without a word."""
    return " (replacing the report that was there)" if any((out / name).is_file() for name in names) else ""


def csv_scale(runs: pd.DataFrame) -> str | None:
    scales = report.column(runs, "tags.scale").dropna().unique()
    return scales[0] if len(scales) == 1 else None


def budget_view(cli, args, command: str) -> int:
    if len(args.budget_from) < 2:
        cli.error("--budget-from takes two or more report folders, one per training budget")
    for folder in args.budget_from:
        if not (folder / "table.csv").is_file() or not (folder / "runs.csv").is_file():
            cli.error(f"--budget-from: {folder} holds no table.csv and runs.csv (write its report first)")
    out = output_folder(cli, args, Path("results") / "budget", BUDGET_FILES)
    replacing = replaced_note(out, BUDGET_FILES)
    try:
        lines = status.status_lines(args.budget_from)
        view = budget.write(args.budget_from, out, command, lines)
    except ValueError as error:
        cli.error(str(error))
    if args.claims is not None:
        written = claims.write(args.budget_from, args.claims, command)
        print(f"sift_bench.report: {len(written)} claim rows; wrote {args.claims} and "
              f"{args.claims.with_suffix('.csv')}")
    print(f"sift_bench.report: {len(view)} rows over budgets "
          + ", ".join(f"{task} {sorted(int(epochs) for epochs in rows['budget_epochs'].unique())} epochs"
                      for task, rows in view.groupby("task", sort=False))
          + f"; wrote {out}/budget.csv, budget.md, budget.png{replacing}")
    for _, row in view[report.is_sifted(view)].iterrows():
        versus = interval_text(row["accuracy_vs_frontier"], row["accuracy_vs_frontier_lo"],
                               row["accuracy_vs_frontier_hi"])
        extra = interval_text(row["extra_savings"], row["extra_savings_lo"], row["extra_savings_hi"], 1)
        print(f"  {row['task']} {row['budget_epochs']} epochs  {row['config']}: vs frontier {versus} "
              f"({markdown.fmt(row['verdict_vs_frontier'])}), extra savings {extra} %")
    # The status table README.md shows, as budget.md's top holds it (tests/test_readme.py checks they agree).
    print("status:")
    print("\n".join(lines))
    return 0


def read_source(cli: argparse.ArgumentParser, args) -> tuple:
    """(runs, runs excluded before, history or None, scale, output folder, source in words) from --from-csv or
    the store; the history of a store's runs is read once the used runs are known."""
    if args.from_csv:
        if not runs_csv_path(args.from_csv).is_file():
            cli.error(f"--from-csv: no runs.csv in {args.from_csv}")
        runs, excluded_before, history = read_csv_dir(args.from_csv)
        scale = args.scale or csv_scale(runs) or DEFAULT_SCALE
        out = output_folder(cli, args, Path("results") / scale, REPORT_FILES, runs_csv_path(args.from_csv).parent)
        source = f"rebuilt from the CSV files in {relative_text(str(runs_csv_path(args.from_csv).parent))}"
        return runs, excluded_before, history, scale, out, source
    uri = args.tracking_uri
    experiment_name = experiment_of(args)
    scale = args.scale or DEFAULT_SCALE
    # Refused before the store is read; a folder's own store (results/cpu/mlflow.db) may rebuild its report.
    own_store = uri.startswith("sqlite:///") and uri.endswith("/mlflow.db")
    out = output_folder(cli, args, Path("results") / scale, REPORT_FILES,
                        Path(uri[len("sqlite:///"):]).parent if own_store else None)
    runs = read_store(uri, experiment_name)
    excluded_before = pd.DataFrame(columns=list(report.EXCLUDED_COLUMNS))
    return runs, excluded_before, None, scale, out, f"experiment `{experiment_name}` in `{relative_text(uri)}`"


def warn_left_out(excluded: pd.DataFrame, scale: str, machine: str | None) -> None:
    """Says on stderr which runs the report leaves out: unfinished, of other scales, of other machine kinds."""
    unfinished = excluded[excluded["kind"] == report.Exclusion.UNFINISHED]
    if len(unfinished):
        warn(f"warning: {len(unfinished)} runs of scale {scale} are not FINISHED and are left out:")
        for _, run in unfinished.iterrows():
            print(f"  {run['run_id']}  {markdown.fmt(run['run_name'])}  {run['status']}", file=sys.stderr)
    other_scales = (excluded["kind"] == report.Exclusion.OTHER_SCALE).sum()
    if other_scales:
        warn(f"ignored {other_scales} runs of other scales (--scale {scale})")
    other_machines = excluded[excluded["kind"] == report.Exclusion.OTHER_MACHINE]
    if len(other_machines):
        warn(f"{len(other_machines)} FINISHED runs on machine kinds other than --machine {machine!r} are "
             "left out: "
             + "; ".join(f"{count} on {kind}" for kind, count in
                         other_machines["reason"].str.removeprefix("machine ").value_counts(sort=False).items()))


def print_headlines(table: pd.DataFrame) -> None:
    """The headlines per task, then per selection rule, as report.md has them."""
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cli = parser()
    args = cli.parse_args(argv)
    # Relative paths only: report.md quotes this command, and results/ is read on other machines.
    report_command = shlex.join(["python", "-m", "sift_bench.report", *map(relative_text, argv)])
    if args.budget_from:
        return budget_view(cli, args, report_command)
    if args.claims is not None:
        cli.error("--claims is built from the tables of --budget-from DIR DIR...; give those folders")
    if args.from_csv and (args.tracking_uri or args.experiment_name):
        cli.error("--from-csv reads CSV files; it takes no --tracking-uri or --experiment-name")
    if not args.from_csv:
        args.tracking_uri = args.tracking_uri or DEFAULT_URI
    try:
        runs, excluded_before, history, scale, out, source = read_source(cli, args)
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
        warn_left_out(excluded, scale, args.machine)
        if used.empty:
            present = sorted(set(excluded.loc[excluded["status"] == "FINISHED", "scale"].dropna()) - {scale})
            hint = f" (FINISHED runs exist at: {', '.join(present)}; pick one with --scale)" if present else ""
            raise NothingToReport(f"no FINISHED run of scale {scale!r}{hint}")
        if history is None:
            history = read_history(args.tracking_uri, list(used["run_id"]))
        # runs.csv, excluded.csv and the commands in report.md carry no absolute path (data_dir, source.name, ...).
        used, excluded = relative_frame(used), relative_frame(excluded)
        replacing = replaced_note(out, REPORT_FILES)
        table = write_results(out, used, excluded, history, scale, source, report_command)
    except NothingToReport as reason:
        warn(f"{reason}; nothing written")
        return 1
    print(f"sift_bench.report: {len(used)} runs -> {len(table)} rows; wrote {out}/report.md, table.csv, runs.csv, "
          f"history.csv, excluded.csv and plots{replacing}")
    print_headlines(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
