"""Verdicts on the table: against the uniform-subsampling frontier (at equal time), against the random control
(at equal data), and the headlines, chosen on validation accuracy and reported with test accuracy."""

import math

import numpy as np
import pandas as pd

from sift_bench.report import frontier
from sift_bench.report.bootstrap import SeedValues, frontier_intervals, recentred
from sift_bench.report.vocabulary import (ACCURACIES, BASELINE, CONTROL, FRONTIER_COLUMNS, FRONTIER_STATS,
                                          HEADLINE_TOLERANCE, is_sifted)


def tasks_without_baseline(table: pd.DataFrame) -> list:
    with_baseline = set(table.loc[table["sifter"] == BASELINE, "task"])
    return [task for task in table["task"].drop_duplicates() if task not in with_baseline]


def frontier_points(rows: pd.DataFrame) -> pd.DataFrame:
    """A task's frontier points: its baseline at 0 % time saved and every random control at its mean % time
    saved, in column `frontier_x`. Uniform random subsampling is what "training for less" costs nothing to do,
    so it is the curve a selection rule must beat at equal time."""
    points = rows[rows["sifter"].isin([BASELINE, CONTROL])]
    return points.assign(frontier_x=np.where(points["sifter"] == BASELINE, 0.0, points["pct_time_savings"]))


def seed_values(points: pd.DataFrame, name: str) -> list[SeedValues]:
    """Each frontier point seed by seed, for the bootstrap: its accuracy `name` and its % time saved, the baseline's
    0 in every seed (it is the reference), a random control's the mean of each seed's timed runs."""
    return [SeedValues(accuracy.to_dict(), {seed: 0.0 for seed in accuracy.index} if sifter == BASELINE
                       else savings.to_dict())
            for sifter, accuracy, savings in zip(points["sifter"], points[f"{name}_by_seed"],
                                                 points["pct_time_savings_by_seed"])]


def frontier_columns(table: pd.DataFrame) -> pd.DataFrame:
    """FRONTIER_COLUMNS for every sifted configuration (neither baseline nor random control), NaN for the others.

    Per task and accuracy (test, and validation as `val_*`), the frontier is the piecewise-linear curve through
    `frontier_points`. frontier_accuracy: the curve at the row's pct_time_savings (NaN outside its range);
    accuracy_vs_frontier: the row's mean accuracy minus that, from the row means so it can be checked by hand;
    its _std: the spread of the same difference seed by seed at fixed savings (`frontier.spread_over_seeds`);
    its _lo and _hi: the 95 % interval of the bootstrap over seeds that resamples accuracy and savings together
    (`bootstrap.frontier_intervals`, over bootstrap_seeds seeds); verdict_vs_frontier from that interval
    (`frontier.verdict_vs_frontier`); frontier_savings: the largest % time saved at which the curve reaches the
    row's accuracy; extra_savings: pct_time_savings - frontier_savings, what selection buys over uniform
    subsampling, with its interval from the same resamples. Table rows carry `*_by_seed` Series (`build_table`)."""
    out = pd.DataFrame({name: pd.Series(np.nan, index=table.index,
                                        dtype=object if "verdict" in name or "bootstrap" in name else float)
                        for name in FRONTIER_COLUMNS})
    for _, rows in table.groupby("task", dropna=False, sort=False):
        points = frontier_points(rows)
        for name, prefix in ACCURACIES:
            measured = points[points["frontier_x"].notna() & points[name].notna()]
            mean_curve = frontier.curve(measured["frontier_x"], measured[name])
            points_by_seed = [by_seed.to_dict() for by_seed in measured[f"{name}_by_seed"]]
            points_seed_values = seed_values(measured, name)
            for index, row in rows[is_sifted(rows)].iterrows():
                savings, accuracy = row["pct_time_savings"], row[name]
                at_savings, difference, versus, verdict, intervals = against_frontier(
                    row, name, "pct_time_savings", mean_curve, points_seed_values)
                spread = frontier.spread_over_seeds(savings, row[f"{name}_by_seed"].to_dict(), measured["frontier_x"],
                                                    points_by_seed)
                reached_at = frontier.largest_x_at(mean_curve, accuracy)
                extra = recentred(intervals.extra_savings, intervals.observed[1], savings - reached_at)
                out.loc[index, [prefix + stat for stat in FRONTIER_STATS]] = [
                    at_savings, difference, spread, *versus, verdict, reached_at, savings - reached_at, *extra,
                    intervals.n_seeds]
    return out


def against_frontier(row: pd.Series, accuracy: str, savings: str, curve: frontier.Curve,
                     points: list[SeedValues]) -> tuple:
    """One table row (with its `*_by_seed` Series) against a frontier drawn on the `savings` axis (% time saved, or
    % work saved): the frontier's accuracy at the row's savings, the row's `accuracy` minus it, that difference's 95 %
    interval from the bootstrap over seeds (moved onto the point estimate, `recentred`), its verdict, and the
    bootstrap's intervals (`points`: the frontier points seed by seed on the same axis)."""
    at_savings = frontier.value_at(curve, row[savings])
    difference = row[accuracy] - at_savings
    intervals = frontier_intervals(
        SeedValues(row[f"{accuracy}_by_seed"].to_dict(), row[f"{savings}_by_seed"].to_dict()), points)
    versus = recentred(intervals.accuracy_vs_frontier, intervals.observed[0], difference)
    return (at_savings, difference, versus,
            frontier.verdict_vs_frontier(at_savings, difference, versus, intervals.n_seeds), intervals)


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


def within_tolerance(table: pd.DataFrame, tolerance: float) -> pd.Series:
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
        candidates = options[options["pct_time_savings"].notna() & within_tolerance(options, tolerance)]
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


def interval_text(value, lo, hi, digits: int = 2) -> str:
    """`+0.72 [+0.44, +0.98]`: a difference from the frontier and its 95 % interval (the bootstrap over seeds);
    `+0.72 (no interval)` where there is none (fewer than MIN_SEEDS seeds in common with the frontier, or a
    configuration at the frontier's edge); `–` where the difference is missing."""
    if pd.isna(value):
        return "–"
    if pd.isna(lo) or pd.isna(hi):
        return f"{value:+.{digits}f} (no interval)"
    return f"{value:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def _test_extra_savings(row: pd.Series) -> str:
    if pd.notna(row["extra_savings"]):
        return (f"{interval_text(row['extra_savings'], row['extra_savings_lo'], row['extra_savings_hi'], 1)} % time "
                "saved beyond uniform subsampling at equal test accuracy")
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
                                                 "accuracy_vs_frontier", "accuracy_vs_frontier_lo",
                                                 "accuracy_vs_frontier_hi", "extra_savings",
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
            val_extra = interval_text(best["val_extra_savings"], best["val_extra_savings_lo"],
                                      best["val_extra_savings_hi"], 1)
            chosen = (f"its validation accuracy is above every point of the frontier, so it ranks by its whole "
                      f"{best['pct_time_savings']:.1f} % time saved" if full else f"{val_extra} % extra savings")
            versus = interval_text(best["accuracy_vs_frontier"], best["accuracy_vs_frontier_lo"],
                                   best["accuracy_vs_frontier_hi"])
            on_validation = interval_text(best["val_accuracy_vs_frontier"], best["val_accuracy_vs_frontier_lo"],
                                          best["val_accuracy_vs_frontier_hi"])
            record["statement"] = (
                f"{best['config']}: {best['pct_time_savings']:.1f} % time saved at test accuracy "
                f"{best['test_accuracy']:.2f}, {versus} "
                f"points against the frontier's {best['frontier_accuracy']:.2f} ({best['verdict_vs_frontier']}); "
                f"{_test_extra_savings(best)} (chosen on validation: "
                f"{on_validation} points above the frontier, {chosen}; n={best['n_seeds']}, interval over "
                f"{int(best['val_bootstrap_seeds'])} seeds)")
        records.append(record)
    return pd.DataFrame(records, columns=[
        "task", "config", "sifter", "pct_time_savings", "test_accuracy", "frontier_accuracy", "accuracy_vs_frontier",
        "accuracy_vs_frontier_lo", "accuracy_vs_frontier_hi", "verdict_vs_frontier", "extra_savings",
        "val_accuracy_vs_frontier", "val_extra_savings", "ranked_by_full_savings", "statement"])


def pairing_caveat(row: pd.Series, baseline: pd.Series) -> str:
    """Text for a row whose accuracy delta is not over all of its own and the baseline's seeds; else ''."""
    if pd.isna(row["delta_seeds"]):
        return "; unpaired: no seed in common with the baseline"
    if row["delta_seeds"] == row["seeds"] == baseline["seeds"]:
        return ""
    return f"; delta over seeds {row['delta_seeds']} only, the baseline has {baseline['seeds']}"


def best_sifted(table: pd.DataFrame, tolerance: float = HEADLINE_TOLERANCE) -> dict:
    """Per task, the table index of the sifted configuration to plot over time, chosen on validation: the
    equal-time headline's, else the most time saved within `tolerance` points of the baseline, else the most
    accurate."""
    chosen = headline_at_equal_time(table).set_index("task")["config"]
    best = {}
    for task in table["task"].drop_duplicates():
        rows = table[(table["task"] == task) & is_sifted(table)]
        keeping = rows[within_tolerance(rows, tolerance) & rows["pct_time_savings"].notna()]
        if task in chosen.index and pd.notna(chosen[task]):
            best[task] = rows.index[rows["config"] == chosen[task]][0]
        elif len(keeping):
            best[task] = keeping["pct_time_savings"].idxmax()
        elif rows["val_accuracy"].notna().any():
            best[task] = rows["val_accuracy"].idxmax()
    return best
