"""Work in training-sample equivalents: why a selection rule pays at equal time or does not.

% time saved mixes two things a user on other hardware cannot separate: how good the rule's selection is, and what
its scoring pass costs on this machine. Counting work instead splits them. A run's work is the samples it trained
plus the candidates its scoring passes scored, each scored one weighted by the scoring cost ratio: the time of a
scoring forward per sample over the time of a training step per trained sample, measured from the runs themselves
per task, machine kind and scorer (`scoring_cost_ratios`). Against the uniform-subsampling frontier drawn on the same axis
(the random controls score nothing: their work is what they trained), a rule that is above the frontier at equal
work but below it at equal time loses to its scoring, and `break_even_scoring_cost` says how cheap the scoring
would have to be for it to meet the frontier: the figure that carries over to a GPU or a cheaper scorer.
"""

import math

import numpy as np
import pandas as pd

from sift_bench.report import frontier
from sift_bench.report.bootstrap import SeedValues
from sift_bench.report.verdicts import against_frontier
from sift_bench.report.vocabulary import ACCURACIES, BASELINE, CONTROL, WORK_FRONTIER_STATS, is_sifted

SMART_SIFTING = "relative_probabilistic"
# Built-in policies that never run a scoring pass: random draws, InfoBatch and the loss-memory variant read the
# training losses. Their runs logged before `samples_scored` existed scored nothing. The report loads no torch, so it
# cannot read the policies' own declarations (`scores`): tests/test_report_work.py checks this list against them.
NEVER_SCORE = (BASELINE, CONTROL, "infobatch", "stale_loss")


def _numbers(rows: pd.DataFrame, name: str) -> pd.Series:
    if name not in rows.columns:
        return pd.Series(math.nan, index=rows.index, dtype="float64")
    return pd.to_numeric(rows[name], errors="coerce").astype("float64")


def samples_scored(rows: pd.DataFrame) -> pd.Series:
    """Each run's candidates scored over all ranks: its `samples_scored` metric (one rank's) times its world size.

    Runs logged before the metric existed: smart sifting scores every candidate once its `sift_delay` steps are
    over, so samples_seen - sift_delay * batch_size (trainer.batch_size is the global batch, all ranks'; checked
    against the runs that log both); one whose delay repeated every epoch is unknown (no table ran one); the
    policies of NEVER_SCORE scored nothing; any other policy's is unknown (NaN)."""
    world = _numbers(rows, "world_size").fillna(1.0)
    logged = _numbers(rows, "samples_scored") * world
    delayed = _numbers(rows, "sift_delay").fillna(0.0) * _numbers(rows, "batch_size")
    smart = (_numbers(rows, "samples_seen") - delayed).clip(lower=0.0)
    repeated = (rows["repeat_delay_per_epoch"].astype(str) == "True" if "repeat_delay_per_epoch" in rows.columns
                else pd.Series(False, index=rows.index))
    derived = pd.Series(np.select([(rows["sifter"] == SMART_SIFTING) & ~repeated, rows["sifter"].isin(NEVER_SCORE)],
                                  [smart, 0.0], math.nan), index=rows.index)
    return logged.where(logged.notna(), derived)


def run_scoring_cost(rows: pd.DataFrame, scored: pd.Series) -> pd.Series:
    """Per run that scored, its scoring cost ratio: scoring seconds per scored sample over the rest of its training
    time per trained sample (one rank's figures: `sift_time_s` and `train_time_s` are rank 0's, samples_trained is
    the sum over ranks). NaN for runs that scored nothing or lack a figure. The same run times both, so a machine's
    speed cancels out."""
    world = _numbers(rows, "world_size").fillna(1.0)
    scoring = _numbers(rows, "sift_time_s")
    training = _numbers(rows, "train_time_s") - scoring
    per_scored = scoring / (scored / world)
    per_trained = training / (_numbers(rows, "samples_trained") / world)
    ratio = per_scored / per_trained
    return ratio.where((scored > 0) & (scoring > 0) & (training > 0) & np.isfinite(ratio))


def scoring_cost_ratios(rows: pd.DataFrame, run_ratio: pd.Series) -> pd.Series:
    """Per run, the scoring cost ratio of its task, machine kind and scorer: the median over the runs of that task and
    kind by the same sifter (and proxy size) that scored (`run_scoring_cost`); NaN where none did. One figure per
    scorer and kind, so a run's work does not carry its own timing noise twice, and a proxy's cheaper forward is
    not mixed with the model's."""
    proxy_size = rows["proxy_size"] if "proxy_size" in rows.columns else pd.Series(np.nan, index=rows.index)
    frame = pd.DataFrame({"task": rows["task"], "kind": rows["machine_kind"], "sifter": rows["sifter"],
                          "proxy_size": proxy_size.astype(object), "ratio": run_ratio})
    return frame.groupby(["task", "kind", "sifter", "proxy_size"], dropna=False)["ratio"].transform("median")


def add_work(rows: pd.DataFrame) -> pd.DataFrame:
    """The runs frame (`run_rows`) with samples_scored (over all ranks), run_scoring_cost, scoring_cost_ratio (its
    kind's), work (samples trained + scoring_cost_ratio * samples scored; a run that scored nothing needs no ratio)
    and run_work_savings: 100 * (1 - work / the mean samples trained of its task's baseline runs)."""
    rows = rows.copy()
    rows["samples_scored"] = samples_scored(rows)
    rows["run_scoring_cost"] = run_scoring_cost(rows, rows["samples_scored"])
    rows["scoring_cost_ratio"] = scoring_cost_ratios(rows, rows["run_scoring_cost"])
    trained = _numbers(rows, "samples_trained")
    scoring_work = (rows["scoring_cost_ratio"] * rows["samples_scored"]).where(rows["samples_scored"] != 0, 0.0)
    rows["work"] = trained + scoring_work
    baseline_work = trained.where(rows["sifter"] == BASELINE).groupby(rows["task"]).transform("mean")
    rows["run_work_savings"] = 100 * (1 - rows["work"] / baseline_work)
    return rows


def work_stats(group: pd.DataFrame) -> dict:
    """A row's means over its runs: samples trained and scored, scoring cost ratio, % work saved (0 for the
    baseline, the reference); and, per seed, the mean work saved of its runs, for the bootstrap. Not every column
    is in table.csv: `work_savings_by_seed` is not."""
    baseline = (group["sifter"] == BASELINE).all()
    savings = group["run_work_savings"]
    by_seed = group.groupby("seed", dropna=False)["run_work_savings"].mean().dropna()
    return {"samples_trained": _numbers(group, "samples_trained").mean(),
            "samples_scored": group["samples_scored"].mean(),
            "scoring_cost_ratio": group["scoring_cost_ratio"].mean(),
            "work_savings": 0.0 if baseline and savings.notna().any() else savings.mean(),
            "work_savings_by_seed": by_seed * 0.0 if baseline else by_seed}


def break_even(accuracy: float, trained: float, scored: float, baseline_samples: float,
               work_curve: frontier.Curve) -> float:
    """The scoring cost ratio at which the row's work savings would put it exactly on the work frontier: the
    frontier reaches the row's accuracy at most at x % work saved (`frontier.largest_x_at`), and the row's work
    savings are 100 * (1 - (trained + c * scored) / baseline), so c = (baseline * (1 - x/100) - trained) / scored.
    Below it the rule is above the frontier, above it below. Negative: it would lose with free scoring.
    Infinite when its accuracy is above every frontier point (no uniform subsampling reaches it, however cheap);
    NaN when below all of them, or for a rule that scores nothing."""
    if not (scored > 0) or not np.isfinite(accuracy) or len(work_curve[0]) == 0:
        return math.nan
    reached_at = frontier.largest_x_at(work_curve, accuracy)
    if np.isnan(reached_at):
        return math.inf if accuracy > work_curve[1].max() else math.nan
    return (baseline_samples * (1 - reached_at / 100) - trained) / scored


def work_frontier_columns(table: pd.DataFrame) -> pd.DataFrame:
    """WORK_FRONTIER_STATS (test, and `val_` for validation) of every sifted row, as `verdicts.frontier_columns` does
    at equal time but on the % work saved axis: the frontier through the baseline (0) and the random controls at
    their work savings; work_accuracy_vs_frontier with its 95 % bootstrap interval over seeds and its verdict; and,
    on test accuracy, break_even_scoring_cost (`break_even`). Table rows carry `*_by_seed` Series."""
    out = pd.DataFrame({name: pd.Series(np.nan, index=table.index, dtype=object if "verdict" in name else float)
                        for name in work_column_names()})
    for _, rows in table.groupby("task", dropna=False, sort=False):
        points = rows[rows["sifter"].isin([BASELINE, CONTROL])]
        baseline_samples = points.loc[points["sifter"] == BASELINE, "samples_trained"].mean()
        for name, prefix in ACCURACIES:
            measured = points[points["work_savings"].notna() & points[name].notna()]
            work_curve = frontier.curve(measured["work_savings"], measured[name])
            seed_values = [SeedValues(accuracy.to_dict(), savings.to_dict()) for accuracy, savings
                           in zip(measured[f"{name}_by_seed"], measured["work_savings_by_seed"])]
            for index, row in rows[is_sifted(rows)].iterrows():
                at_savings, difference, versus, verdict, _ = against_frontier(
                    row, name, "work_savings", work_curve, seed_values)
                out.loc[index, [prefix + stat for stat in WORK_FRONTIER_STATS]] = [at_savings, difference, *versus,
                                                                                    verdict]
                if not prefix:
                    out.loc[index, "break_even_scoring_cost"] = break_even(
                        row[name], row["samples_trained"], row["samples_scored"], baseline_samples, work_curve)
    return out


def work_column_names() -> list[str]:
    return [*(prefix + stat for _, prefix in ACCURACIES for stat in WORK_FRONTIER_STATS), "break_even_scoring_cost"]
