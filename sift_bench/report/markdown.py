"""report.md: the text around the savings table, from the table and the runs frame. Pure pandas, no I/O."""

import json
from urllib.parse import quote

import numpy as np
import pandas as pd

from sift_bench.machine import CONTENDED_FRACTION, PACE_MISMATCH, PACE_PROBE_MIN_S

from sift_bench.report.bootstrap import MAX_UNDEFINED, MIN_SEEDS, RESAMPLES
from sift_bench.report.diagnostics import commands, machines
from sift_bench.report.frame import column, machine_kinds
from sift_bench.report.frontier import WITHIN
from sift_bench.report.verdicts import (CONTROL_RULE, frontier_points, headline, headline_at_equal_time, interval_text,
                                        pair_controls)
from sift_bench.report.vocabulary import BASELINE, HEADLINE_TOLERANCE, SIFTER_PARAMS, Exclusion, is_sifted

TIMING_RULE = (
    "Each run's % time savings is measured against the baseline run (sifter=none) of its task, scale and machine "
    "kind whose midpoint in time ((start + end) / 2) is nearest its own, at that baseline's pace: reference time = "
    "its train_time_s / work_trained × the mean work_trained of the task's baseline runs on that kind, and "
    "savings = 100 × (1 − time / reference time), averaged over a row's runs. A machine drifts between sittings "
    "and within one, so the baseline timed closest to a run says best how fast the machine was for it. The "
    "baseline row's % time saved is 0 by definition (it is the reference); its ± is the spread of its own timings, "
    "each reference baseline's time at the mean work against the mean of its kind's: the noise under every other "
    f"row's savings. A baseline during which other processes used more than {CONTENDED_FRACTION:g} of a core is a "
    "reference only when its kind has no clean baseline of the task, and one that a clean run of the same config and "
    "seed replaced (tracking.rerun_contended) counts in no figure at all (`excluded.csv` names it). A host can slow "
    "the machine with no process busy, so each run's evaluation time (the same work in every run of a task) is "
    "compared with its reference baseline's: a run outside "
    f"1/{PACE_MISMATCH:g} to {PACE_MISMATCH:g} times it (both over {PACE_PROBE_MIN_S:g} s) was timed at another "
    "machine speed, and its savings are left out of its row's (its accuracy counts; the notes name it, and the "
    "table sweeps train it again; once timed again on another kind, the notes name that run). By the same measure "
    "a baseline whose evaluations took outside that range of the median of its kind's baselines' was timed on a "
    "slowed host: it is no run's time reference while one in pace exists (its accuracy counts; the notes name it).")

FRONTIER_RULE = (
    "A data-selection method must beat simply training for less at the same compute: a budget-matched "
    "comparison, as in \"No Train No Gain\" (Kaddour et al., 2023). Training for less is here uniform random "
    "subsampling (sifter=random, with the schedule over samples seen), so per task the *frontier* is the "
    "piecewise-linear curve through the baseline (at 0 % time saved, its mean accuracy) and every random control "
    "(at its mean % time saved and mean accuracy), sorted by % time saved; controls at the same % time saved "
    "count as one point, their mean. For every other configuration, `frontier_accuracy` is the curve at the "
    "configuration's own % time saved (none outside the curve's range: `outside range`); `accuracy_vs_frontier` "
    "is its accuracy minus that, printed with its 95 % interval `[lo, hi]` (`accuracy_vs_frontier_lo`, `_hi`). "
    "% time saved is measured, not set, so the interval resamples both axes: a bootstrap over seeds "
    f"({RESAMPLES} resamples, a fixed generator seed) over the `bootstrap_seeds` seeds the configuration, the "
    "baseline and every random control all have, each resample drawing that many seeds with replacement and taking "
    "a drawn seed's runs of the configuration, of every random control and of the baseline together; per resample "
    "the frontier is drawn through the resampled means and read at the configuration's resampled % time saved, and "
    "the interval is the 2.5th to 97.5th percentile of the differences (none when more than "
    f"{100 * MAX_UNDEFINED:g} % of them fall outside the frontier's range), moved by the point estimate minus the "
    "same difference on the shared seeds as measured, so that a row with fewer seeds than its frontier (or a seed "
    "whose savings were left out) has its interval around its own point estimate. The configuration is `above` the frontier "
    f"exactly when the interval lies above 0, `below` exactly when it lies below 0, else `{WITHIN}`; no verdict "
    f"over fewer than {MIN_SEEDS} seeds. `accuracy_vs_frontier_std` is the std over seeds of the difference taken "
    "seed by seed at the mean % time saved: the accuracy's spread alone, which no verdict reads. "
    "`frontier_savings` is the % time saved at which the curve reaches the configuration's accuracy (the largest, "
    "where it reaches it more than once; none when the accuracy is above every point of the curve or below all of "
    "them), and `extra_savings` = % time saved − `frontier_savings`: what selection buys over uniform subsampling "
    "at equal accuracy, with its interval from the same resamples (`extra_savings_lo`, `_hi`). The same on "
    "validation accuracy (`val_*` columns) chooses; test accuracy reports. Every point estimate can be recomputed "
    "from the `pct_time_savings`, `test_accuracy` and `val_accuracy` of the baseline and random-control rows of "
    "`table.csv`, and every interval from the runs in `runs.csv`.")

WORK_RULE = (
    "% time saved prices a rule's selection and its scoring pass together, at this machine's cost of a scoring "
    "forward. Counting work separates them: a run's work is its samples trained plus its candidates scored times "
    "`scoring_cost_ratio`, the seconds of scoring per scored sample over the rest of the training time per trained "
    "sample, measured in every run that scored and taken as the median over the task's runs of the same sifter "
    "(and proxy size) on the same machine kind; `work_savings` = 100 × (1 − work / the baseline's samples trained). Runs logged before `samples_scored` "
    "existed: smart sifting scored every candidate after its `sift_delay` steps (samples seen − sift_delay × batch "
    "size, what the runs that log both show), the random control, InfoBatch and the loss-memory variant nothing. "
    "The frontier is drawn as at equal time through the baseline (0) and the random controls, which score nothing, "
    "at their % work saved, and the verdict reads the same bootstrap interval. `break_even_scoring_cost` is the "
    "scoring cost ratio at which the row would sit exactly on that frontier: (baseline samples × (1 − x / 100) − "
    "samples trained) / samples scored, x the largest % work saved at which the frontier reaches the row's test "
    "accuracy; a scorer cheaper than it puts the row above the frontier, a dearer one below. `inf`: the row's "
    "accuracy is above every frontier point; negative: it would be below the frontier with free scoring; `–` for a "
    "rule that scores nothing, or an accuracy below every frontier point.")

# What each built-in sifter name means, so that a row is read as the method it is.
SIFTER_LEGEND = (
    "Sifters: `none`, the baseline (every sample trained on); `random`, the control (keeps `keep_fraction` "
    "whatever the loss); `relative_probabilistic`, SageMaker's smart sifting (scores every candidate, keeps it with "
    "probability p ** beta_value, p its mid-rank in the loss history); `stale_sb`, Selective Backprop's Stale-SB "
    "as written (the same rule on losses scored every `rescore_every_epochs` epochs, its scoring passes paid for); "
    "`stale_loss`, sift_bench's own loss-memory variant, not Stale-SB (the same rule on each sample's last "
    "training loss, no scoring pass, a sample whose loss is older than `max_loss_age_epochs` kept); `proxy`, the "
    "cheaper scorer (the same rule on losses from a model of `proxy_size` times the model's size that learns from "
    "the candidates it scores, its forward, backward and step counted as scoring); `infobatch`, "
    "InfoBatch (prunes below-mean training losses at random and upweights the rest; `anneal_by=epochs` is the "
    "official schedule, whole epochs; runs without `anneal_by` ran the earlier by-samples schedule).")

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
            base_text = with_spread(base["test_accuracy"], base["test_accuracy_std"], base["n_seeds"])
        else:  # the baseline on the seeds this row has, so the two columns compare like with like
            base_text = f"{row['accuracy_baseline']:.2f} (seeds {row['delta_seeds']} of {base['seeds']})"
        rows.append([row["model"], row["dataset"], row["config"], row["pct_accepted"], row["pct_time_savings"],
                     base_text, with_spread(row["test_accuracy"], row["test_accuracy_std"], row["n_seeds"])])
    return markdown_table(header, rows)


def frontier_tables(table: pd.DataFrame) -> list[str]:
    """Per task: the frontier's points, then every sifted configuration against it (test, then validation)."""
    lines = []
    for task, rows in table.groupby("task", dropna=False, sort=False):
        points = frontier_points(rows).sort_values("frontier_x", kind="stable")
        point_rows = [[p["config"], p["frontier_x"], p["test_accuracy"], p["val_accuracy"], p["n_seeds"]]
                      for _, p in points.iterrows()]
        lines += [f"**{fmt(task)}**: the frontier's points", "",
                  markdown_table(["point", "% time saved", "test accuracy", "val accuracy", "n"], point_rows)
                  if point_rows else "No baseline or random control.", ""]
        sifted = rows[is_sifted(rows)]
        if sifted.empty:
            continue
        header = ["configuration", "% time saved", "test accuracy", "frontier", "frontier savings",
                  "vs frontier [95 %]", "verdict", "extra savings [95 %]", "val vs frontier [95 %]", "val verdict",
                  "val extra savings [95 %]", "seeds resampled"]
        lines += [markdown_table(header, [
            [r["config"], r["pct_time_savings"], r["test_accuracy"], r["frontier_accuracy"], r["frontier_savings"],
             *_against_frontier(r, ""), *_against_frontier(r, "val_"), r["bootstrap_seeds"]]
            for _, r in sifted.iterrows()]), ""]
    return lines


def work_tables(table: pd.DataFrame) -> list[str]:
    """Per task, every sifted configuration at equal time and at equal work, with its break-even scoring cost."""
    lines = []
    for task, rows in table.groupby("task", dropna=False, sort=False):
        sifted = rows[is_sifted(rows)]
        if sifted.empty:
            continue
        baseline_samples = rows.loc[rows["sifter"] == BASELINE, "samples_trained"].mean()
        header = ["configuration", "% samples trained", "scored per sample trained", "% time saved",
                  "verdict at equal time", "% work saved", "vs frontier at equal work [95 %]",
                  "verdict at equal work", "scoring cost ratio", "break-even ratio"]
        lines += [f"**{fmt(task)}**", "", markdown_table(header, [
            [r["config"], 100 * r["samples_trained"] / baseline_samples, r["samples_scored"] / r["samples_trained"],
             r["pct_time_savings"], r["verdict_vs_frontier"], r["work_savings"],
             interval_text(r["work_accuracy_vs_frontier"], r["work_accuracy_vs_frontier_lo"],
                           r["work_accuracy_vs_frontier_hi"]),
             r["work_verdict_vs_frontier"], r["scoring_cost_ratio"], r["break_even_scoring_cost"]]
            for _, r in sifted.iterrows()]), ""]
    return lines


def _against_frontier(row: pd.Series, prefix: str) -> list[str]:
    """One accuracy's (prefix '' test, 'val_' validation) difference from the frontier with its 95 % interval, the
    verdict, and the extra savings with theirs."""
    return [interval_text(row[f"{prefix}accuracy_vs_frontier"], row[f"{prefix}accuracy_vs_frontier_lo"],
                          row[f"{prefix}accuracy_vs_frontier_hi"]),
            row[f"{prefix}verdict_vs_frontier"],
            interval_text(row[f"{prefix}extra_savings"], row[f"{prefix}extra_savings_lo"],
                          row[f"{prefix}extra_savings_hi"], 1)]


def full_table(table: pd.DataFrame) -> str:
    shown = [name for name in table.columns if name not in ("run_ids", "config")]
    return markdown_table(shown, table[shown].values.tolist())


# A local `mlflow ui` (its default address): report.md links each row's runs to its compare view there.
MLFLOW_UI = "http://127.0.0.1:5000"


def compare_link(run_ids: list[str], experiment_ids: list[str]) -> str:
    """The MLflow UI's compare view of these runs (its route `#/compare-runs?runs=[...]&experiments=[...]`, each a
    JSON list), percent-encoded so the link holds in markdown."""
    runs = quote(json.dumps(run_ids, separators=(",", ":")))
    experiments = quote(json.dumps(sorted(set(experiment_ids)), separators=(",", ":")))
    return f"{MLFLOW_UI}/#/compare-runs?runs={runs}&experiments={experiments}"


def ui_links(table: pd.DataFrame, used: pd.DataFrame) -> list[str]:
    """One line per row of the table: its configuration, linked to the compare view of its runs."""
    experiment_of = dict(zip(column(used, "run_id"), column(used, "experiment_id").astype(str)))
    lines = []
    for _, row in table.iterrows():
        run_ids = str(row["run_ids"]).split()
        experiments = [experiment_of[run_id] for run_id in run_ids if run_id in experiment_of]
        lines.append(f"- {row['task']}, {row['config']}: [{len(run_ids)} runs]({compare_link(run_ids, experiments)})")
    return lines


def control_table(pairs: pd.DataFrame) -> str:
    if pairs.empty:
        return "No sifted configuration to compare."
    header = ["task", "sifted", "% accepted", "accuracy", "random control (between)", "accuracy there",
              "difference", "spread", "verdict"]
    rows = [[p["task"], p["config"], p["pct_accepted"], with_spread(p["accuracy"], p["accuracy_std"], p["n_seeds"]),
             p["control"], with_spread(p["control_accuracy"], p["control_accuracy_std"], p["control_n_seeds"]),
             p["accuracy_difference"], p["spread"], p["verdict"]] for _, p in pairs.iterrows()]
    return markdown_table(header, rows)


def headline_lines(table: pd.DataFrame) -> list[str]:
    at_equal_time = headline_at_equal_time(table).set_index("task", drop=False)
    within_reach = headline(table).set_index("task", drop=False)
    lines = []
    for task in table["task"].drop_duplicates():
        lines += [f"- **{fmt(task)}**",
                  f"  1. At equal time (the verdict that decides): {at_equal_time.loc[task, 'statement']}",
                  f"  2. Best % time savings within {HEADLINE_TOLERANCE:g} points of the baseline: "
                  f"{within_reach.loc[task, 'statement']}"]
    return lines


def savings_section(table: pd.DataFrame) -> list[str]:
    """SageMaker's layout and what its columns mean."""
    return [
        "## Savings (SageMaker layout)", "", sagemaker_table(table), "",
        "% accepted: samples trained on / samples seen. % savings: training wall time (scoring passes included, "
        "evaluation excluded) saved against the baseline (sifter=none) of the same task and scale on the same "
        "machine kind, timed nearest in time (std in the full table). " + TIMING_RULE + " Accuracy: test accuracy "
        "in %, mean ± sample std over seeds (validation accuracy only chooses); a configuration that lacks some of "
        "the baseline's seeds is set against the baseline on the seeds it has. "
        "A configuration's name shows only the params that differ between that sifter's configurations; "
        "the full table has them all. " + SIFTER_LEGEND, ""]


def headline_section(table: pd.DataFrame) -> list[str]:
    """The two headlines per task, then the same per selection rule."""
    return [
        "## Headline", "",
        "Per task, two headlines, each CHOSEN on validation accuracy and REPORTED with test accuracy: (1) among "
        "configurations above the uniform-subsampling frontier on validation (see *Against the uniform-subsampling "
        "frontier*), the one with the most extra savings over it; (2) the best % time savings among configurations "
        f"whose validation accuracy is at most {HEADLINE_TOLERANCE:g} points below the baseline's, paired by seed "
        "(the mean of per-seed differences).", "",
        *headline_lines(table), "",
        "The same per selection rule:", "",
        *[f"- {fmt(h['task'])}, `{fmt(h['sifter'])}`, at equal time: {h['statement']}"
          for _, h in headline_at_equal_time(table, per_sifter=True).iterrows()],
        *[f"- {fmt(h['task'])}, `{fmt(h['sifter'])}`, within {HEADLINE_TOLERANCE:g} points: {h['statement']}"
          for _, h in headline(table, per_sifter=True).iterrows()], ""]


def comparison_sections(table: pd.DataFrame, used: pd.DataFrame) -> list[str]:
    """The frontier, the random control at equal data, the full table and each row's runs in the MLflow UI."""
    return [
        "## Against the uniform-subsampling frontier", "",
        FRONTIER_RULE, "",
        *frontier_tables(table),
        "## At equal work: what selection buys before scoring is paid", "",
        WORK_RULE, "",
        *work_tables(table),
        "## Sifting against the random control", "",
        "Each sifted configuration against the random control (sifter=random) of the same task at the same % "
        "accepted, so both train on as many samples. Rule: " + CONTROL_RULE + " This compares at equal data, not "
        "at equal time: a rule whose scoring pass costs time can beat the control here and still be below the "
        "frontier.", "",
        control_table(pair_controls(table)), "",
        "## Full table", "",
        f"Also in `table.csv` (with the run ids of each row). {', '.join(SIFTER_PARAMS)} and the other sifter "
        "params identify a configuration; std is over seeds; `–` is missing; `accuracy_*` and `*_frontier*` "
        "columns without `val_` are test accuracy.", "",
        full_table(table), "",
        "## Runs in the MLflow UI", "",
        f"Each row's runs side by side in a local `mlflow ui --backend-store-uri <this store>` (at {MLFLOW_UI}, its "
        "default; docs/configuration.md, *Looking at runs*):", "",
        *ui_links(table, used), ""]


def runs_section(used: pd.DataFrame, excluded: pd.DataFrame, scale: str) -> list[str]:
    """What the report used and left out, the machine kinds and the commits; the unfinished runs listed."""
    def left_out(kind: Exclusion) -> pd.DataFrame:
        return excluded[excluded["kind"] == kind]

    other_scales, unfinished, reruns = (left_out(Exclusion.OTHER_SCALE), left_out(Exclusion.UNFINISHED),
                                        left_out(Exclusion.RERUN))
    other_machines, other_tasks, parents = (left_out(Exclusion.OTHER_MACHINE), left_out(Exclusion.OTHER_TASK),
                                            left_out(Exclusion.SWEEP_PARENT))
    scale_counts = ", ".join(f"{name}: {count}" for name, count in
                             other_scales["reason"].str.removeprefix("scale ").value_counts(sort=False).items())
    lines = [
        "## Runs and machine", "",
        f"- Scale: `{scale}`.",
        f"- Runs used: {len(used)} FINISHED"
        + (f", of which {int((column(used, 'tags.timing_slot').notna()).sum())} baselines tagged `timing_slot` "
           "(timed first and last in a seed's block; every baseline run of a seed is a timing of the machine, and "
           "together one seed for accuracy)"
           if column(used, "tags.timing_slot").notna().any() else "") + ".",
        f"- Left out: not FINISHED {len(unfinished)}" + (" (listed below)" if len(unfinished) else "")
        + f"; other scales {len(other_scales)}" + (f" ({scale_counts})" if scale_counts else "")
        + f"; reruns of an identical config and seed {len(reruns)} (the latest kept; every clean baseline run stays, "
        "each a timing of the machine, and a contended one goes when a clean twin replaced it)"
        + f"; sweep parents {len(parents)}"
        + (f"; superseded variants {len(left_out(Exclusion.SUPERSEDED))} (InfoBatch's earlier by-samples schedule, "
           "logged before `anneal_by`: the table holds InfoBatch as written)"
           if len(left_out(Exclusion.SUPERSEDED)) else "")
        + (f"; runs of machine kinds other than `--machine` {len(other_machines)}" if len(other_machines) else "")
        + (f"; runs of tasks not asked for with `--task` {len(other_tasks)} ("
           + ", ".join(f"{name}: {count}" for name, count in
                       other_tasks["reason"].str.removeprefix("task ").value_counts(sort=False).items()) + ")"
           if len(other_tasks) else "")
        + ".",
        "- Machine kinds (CPU model and the flags that pick its kernels, cores, GPU) per task, with their runs: "
        "a time is compared only with a baseline timed on the same kind, so kinds can share a table; "
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
    return lines


def render_report(*, table: pd.DataFrame, used: pd.DataFrame, excluded: pd.DataFrame, scale: str, source: str,
                  report_command: str, plots: dict[str, str], notes: list[str]) -> str:
    """report.md: SageMaker's layout first, then headlines, the frontier, the control comparison, the full table,
    plots, provenance. `source` and `report_command` come with their paths already relative."""
    lines = [
        f"# Smart sifting savings, scale `{scale}`", "",
        f"Built by `{report_command}` from {len(used)} FINISHED runs ({source}). "
        "Every number below comes from the commands under *How this was made*.", "",
        *savings_section(table), *headline_section(table), *comparison_sections(table, used),
    ]
    if plots:
        lines += ["## Plots", ""]
        for file_name, caption in plots.items():
            lines += [f"![{file_name}]({file_name})", "", caption, ""]
    if notes:
        lines += ["## Notes", "", *[f"- {note}" for note in notes], ""]
    lines += runs_section(used, excluded, scale)
    lines += ["## How this was made", "", "```", *commands(used), report_command, "```", ""]
    return "\n".join(lines)
