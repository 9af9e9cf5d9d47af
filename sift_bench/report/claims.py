"""results/claims.md: what each anchor claims, beside what sift_bench measured for the closest configuration.

Built from report folders (their table.csv, and runs.csv for the budget in epochs), never by hand: per claim and
per task and budget, the configuration that comes closest to the claim's method and reading (`Claim.pick`), with
its % time saved, test accuracy against the baseline, and the frontier verdicts at equal time and at equal work.
A claim whose method sift_bench has not measured says so instead of borrowing another method's figures.
"""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from sift_bench.report import budget
from sift_bench.report.markdown import fmt
from sift_bench.report.verdicts import interval_text, within_tolerance
from sift_bench.report.vocabulary import BASELINE, HEADLINE_TOLERANCE

SMART_SIFTING = "relative_probabilistic"


def _most_time_within_tolerance(rows: pd.DataFrame) -> pd.Series | None:
    """The row that saves the most time while its validation accuracy is within HEADLINE_TOLERANCE points of the
    baseline's (the reading of "little or no accuracy impact" and "lossless"); else the most accurate on
    validation."""
    timed = rows[rows["pct_time_savings"].notna()]
    if timed.empty:
        return None
    close = timed[within_tolerance(timed, HEADLINE_TOLERANCE)]
    return close.loc[close["pct_time_savings"].idxmax()] if len(close) else timed.loc[timed["val_accuracy"].idxmax()]


def smart_sifting(rows: pd.DataFrame) -> pd.Series | None:
    return _most_time_within_tolerance(rows[rows["sifter"] == SMART_SIFTING])


def infobatch_as_written(rows: pd.DataFrame) -> pd.Series | None:
    """InfoBatch's default prune_ratio (0.5) on the official whole-epoch schedule; the by-samples runs only where
    the official one was not run, named so by their config."""
    if "prune_ratio" not in rows or "anneal_by" not in rows:
        return None
    infobatch = rows[(rows["sifter"] == "infobatch") & (pd.to_numeric(rows["prune_ratio"]) == 0.5)]
    official = infobatch[infobatch["anneal_by"].astype(str) == "epochs"]
    chosen = official if len(official) else infobatch
    return chosen.iloc[0] if len(chosen) else None


def fastest_to_target(sifter: str) -> Callable[[pd.DataFrame], pd.Series | None]:
    """The configuration of `sifter` that reached the task's target accuracy soonest (seconds to target over the
    seeds that reached it); else its most accurate on validation."""
    def pick(rows: pd.DataFrame) -> pd.Series | None:
        own = rows[rows["sifter"] == sifter]
        reached = own[own["time_to_target_s"].notna()]
        if len(reached):
            return reached.loc[reached["time_to_target_s"].idxmin()]
        return own.loc[own["val_accuracy"].idxmax()] if own["val_accuracy"].notna().any() else None
    return pick


def proxy_scorer(rows: pd.DataFrame) -> pd.Series | None:
    return _most_time_within_tolerance(rows[rows["sifter"] == "proxy"])


@dataclass(frozen=True)
class Claim:
    source: str
    claim: str  # in its authors' terms
    setting: str  # where they measured it
    method: str  # what sift_bench compares it with, in words
    pick: Callable[[pd.DataFrame], pd.Series | None]


CLAIMS = (
    Claim("Amazon SageMaker smart sifting (AWS documentation and launch post, 2023)",
          "up to 35 % lower training cost, nearly 40 % less training time, little or no accuracy impact",
          "their own models and data (not published as a benchmark)",
          "smart sifting (`relative_probabilistic`): the configuration saving the most time within "
          f"{HEADLINE_TOLERANCE:g} points of the baseline on validation", smart_sifting),
    Claim("InfoBatch (Qin et al., ICLR 2024)",
          "about 40 % of the overall training cost saved, lossless",
          "CIFAR-10/100 with ResNet-18 (200 epochs), ImageNet, segmentation, LLM instruction tuning",
          "`infobatch` at its default prune_ratio 0.5 on the official whole-epoch schedule", infobatch_as_written),
    Claim("Selective Backprop (Jiang et al., 2019)",
          "up to 3.5x faster to a target error than standard training",
          "CIFAR-10, CIFAR-100 and SVHN with WideResNet, ResNet and MobileNet",
          "smart sifting, Selective Backprop's rule (keep with probability percentile ** beta after a scoring "
          "forward): the configuration fastest to the task's target accuracy", fastest_to_target(SMART_SIFTING)),
    Claim("Stale-SB (Jiang et al., 2019)",
          "up to 26 % more speed-up than Selective Backprop, from scoring every few epochs",
          "the same as Selective Backprop",
          "`stale_sb`, Stale-SB as written: the configuration fastest to the task's target accuracy",
          fastest_to_target("stale_sb")),
    Claim("airbench96 (Jordan, 2024)",
          "96.00 % CIFAR-10 accuracy in 27.3 s with batches chosen by a small proxy model, against 96.03 % in "
          "34.7 s without (no random control)",
          "CIFAR-10, its own fast ResNet, one A100",
          "`proxy`, sift_bench's proxy scorer (smart sifting's rule on a quarter-size model's losses, the model "
          f"learning alongside): the configuration saving the most time within {HEADLINE_TOLERANCE:g} points of the "
          "baseline on validation", proxy_scorer),
)

COLUMNS = ("source", "claim", "setting", "method", "task", "budget_epochs", "config", "n_seeds", "pct_time_savings",
           "pct_time_savings_std", "pct_cost_savings", "test_accuracy", "accuracy_delta", "speedup_to_target",
           "n_reached_target", "accuracy_vs_frontier", "accuracy_vs_frontier_lo", "accuracy_vs_frontier_hi",
           "verdict_vs_frontier", "work_savings", "work_verdict_vs_frontier", "break_even_scoring_cost", "table")


def speedup_to_target(row: pd.Series, rows: pd.DataFrame) -> float:
    """The baseline's seconds to the target accuracy over the row's (means over the seeds that reached it)."""
    baseline = rows.loc[rows["sifter"] == BASELINE, "time_to_target_s"]
    if baseline.empty or not (row["time_to_target_s"] > 0):
        return math.nan
    return float(baseline.iloc[0] / row["time_to_target_s"])


def claims_table(folders: list[Path]) -> pd.DataFrame:
    """One row per claim and per task and budget of the folders' tables (a claim sift_bench has not measured: one
    row, no task)."""
    records = []
    tables = []
    for folder in folders:
        table, epochs = budget.read_report(folder)
        tables.append((folder, table, epochs))
    for claim in CLAIMS:
        described = {"source": claim.source, "claim": claim.claim, "setting": claim.setting, "method": claim.method}
        found = False
        for folder, table, epochs in tables:
            for task, rows in table.groupby("task", sort=False):
                row = claim.pick(rows)
                if row is None:
                    continue
                found = True
                records.append({**described, "task": task, "budget_epochs": epochs.get(task),
                                **{name: row.get(name, np.nan) for name in COLUMNS if name in row.index},
                                "speedup_to_target": speedup_to_target(row, rows), "table": str(folder)})
        if not found:
            records.append(described)
    return pd.DataFrame(records).reindex(columns=list(COLUMNS))


def _signed(value) -> str:
    return "–" if pd.isna(value) else f"{value:+.2f}"


def markdown_lines(claims: pd.DataFrame, command: str) -> list[str]:
    lines = ["# The anchors' claims beside what sift_bench measured", "",
             f"Made by `{command}`, from the tables it names. Each claim is in its authors' terms and setting; "
             "beside it, per task and training budget, the configuration sift_bench measured that comes closest "
             "(the method column says how it was chosen). Time saved and accuracy are means over seeds on the CPU "
             "tables (their own machines, docs/methodology.md); `vs frontier` is test accuracy minus the "
             "uniform-subsampling frontier at the same % time saved, with its 95 % interval over seeds, and the "
             "verdict reads that interval; `at equal work` is the same verdict with scoring counted at its measured "
             "cost (report.md, *At equal work*). Speed-up to target: the baseline's seconds to the task's target "
             "accuracy over the configuration's.", ""]
    for source, rows in claims.groupby("source", sort=False):
        first = rows.iloc[0]
        lines += [f"## {source}", "", f"- Claim: {first['claim']}.", f"- Their setting: {first['setting']}.",
                  f"- Compared with: {first['method']}.", ""]
        measured = rows[rows["task"].notna()]
        if measured.empty:
            lines += ["Nothing measured by sift_bench comes close: no figure is set against this claim.", ""]
            continue
        lines += ["| task | epochs | configuration | n | % time saved | test accuracy (vs baseline) | "
                  "speed-up to target | vs frontier [95 %] | verdict | verdict at equal work | table |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for _, row in measured.iterrows():
            lines.append(" | ".join([
                f"| {row['task']}", fmt(row["budget_epochs"], 0), str(row["config"]), f"{int(row['n_seeds'])}",
                f"{fmt(row['pct_time_savings'], 1)} ± {fmt(row['pct_time_savings_std'], 1)}",
                f"{fmt(row['test_accuracy'])} ({_signed(row['accuracy_delta'])})",
                fmt(row["speedup_to_target"]) + ("x" if pd.notna(row["speedup_to_target"]) else ""),
                interval_text(row["accuracy_vs_frontier"], row["accuracy_vs_frontier_lo"],
                              row["accuracy_vs_frontier_hi"]),
                fmt(row["verdict_vs_frontier"]), fmt(row["work_verdict_vs_frontier"]),
                f"{row['table']} |"]))
        lines.append("")
    return lines


def write(folders: list[Path], path: Path, command: str) -> pd.DataFrame:
    """claims.md at `path` and claims.csv beside it."""
    claims = claims_table(folders)
    path.parent.mkdir(parents=True, exist_ok=True)
    claims.replace({np.nan: None}).to_csv(path.with_suffix(".csv"), index=False)
    path.write_text("\n".join(markdown_lines(claims, command)) + "\n")
    return claims
