"""The report's vocabulary: the names of the baseline and the control, the metrics a row needs, the columns of
table.csv, the params that are not compared, and why a run is left out. Declared once, read by every report module."""

from enum import Enum

import pandas as pd

from sift_bench.identity import NOT_HASHED, NOT_HASHED_TRAINER
from sift_bench.metrics import EVAL_METRICS


BASELINE = "none"
CONTROL = "random"
# Always columns of table.csv, so the SageMaker-style columns exist whichever sifters have run.
SIFTER_PARAMS = ("beta_value", "loss_history_length", "sift_delay", "keep_fraction")
# Accuracy points a configuration may lose against the baseline (on validation) and still count for the headline.
HEADLINE_TOLERANCE = 0.5
# Final metrics a row of the table needs; a run lacking one is named in the report's notes.
NEEDED_METRICS = ("val_accuracy", "test_accuracy", "train_time_s", "cost_usd", "pct_accepted")
HISTORY_METRICS = EVAL_METRICS
EXCLUDED_COLUMNS = ("run_id", "run_name", "status", "scale", "task", "sifter", "seed", "reason", "kind")


class Exclusion(str, Enum):
    """Why a run is left out of the table: the `kind` column of excluded.csv (its `reason` says it in words)."""
    SWEEP_PARENT = "sweep parent"
    OTHER_SCALE = "other scale"
    OTHER_TASK = "other task"
    UNFINISHED = "unfinished"
    OTHER_MACHINE = "other machine"
    RERUN = "rerun"  # a later run of the same config and seed, or a contended baseline a clean one replaced
    SUPERSEDED = "superseded"  # a method's earlier variant, replaced by the method as its authors wrote it


# The two accuracies and the prefix of their columns: unprefixed columns are test accuracy, `val_` validation.
ACCURACIES = (("test_accuracy", ""), ("val_accuracy", "val_"))
# _lo and _hi: the 95 % interval of the bootstrap over seeds (`bootstrap.frontier_intervals`), over bootstrap_seeds
# seeds; the verdict reads it. _std describes the accuracy's spread at fixed savings only.
FRONTIER_STATS = ("frontier_accuracy", "accuracy_vs_frontier", "accuracy_vs_frontier_std", "accuracy_vs_frontier_lo",
                  "accuracy_vs_frontier_hi", "verdict_vs_frontier", "frontier_savings", "extra_savings",
                  "extra_savings_lo", "extra_savings_hi", "bootstrap_seeds")
FRONTIER_COLUMNS = tuple(prefix + name for _, prefix in ACCURACIES for name in FRONTIER_STATS)
# The same frontier on the % work saved axis (sift_bench.report.work): training-sample equivalents, scoring counted
# at its measured cost ratio, so the verdict says what selection buys before the machine prices its scoring.
WORK_FRONTIER_STATS = ("work_frontier_accuracy", "work_accuracy_vs_frontier", "work_accuracy_vs_frontier_lo",
                       "work_accuracy_vs_frontier_hi", "work_verdict_vs_frontier")
WORK_COLUMNS = ("samples_trained", "samples_scored", "scoring_cost_ratio", "work_savings",
                *(prefix + name for _, prefix in ACCURACIES for name in WORK_FRONTIER_STATS),
                "break_even_scoring_cost")
TABLE_STATS = ("n_seeds", "seeds", "pct_accepted", "pct_accepted_std", "pct_time_savings",
               "pct_time_savings_std", "pct_cost_savings", "test_accuracy", "test_accuracy_std", "val_accuracy",
               "val_accuracy_std", "accuracy_baseline", "accuracy_delta", "val_accuracy_baseline",
               "val_accuracy_delta", "delta_seeds", *FRONTIER_COLUMNS, *WORK_COLUMNS, "time_to_target_s",
               "n_reached_target", "train_time_s", "train_time_std", "sift_time_s", "cost_usd", "n_runs",
               "n_machine_kinds", "run_ids")
# Params that differ between runs of one task without changing what is compared: the sifter is the
# configuration, the seed is what is averaged over, the rest only says where files go or how progress shows.
NOT_COMPARED_PREFIXES = ("params.sifter.", *(f"params.{group}." for group in NOT_HASHED))
# trainer.loop is part of a row's task instead (`task_labels`).
NOT_COMPARED = ("params.seed", "params.sweep_name", "params.trainer.loop",
                *(f"params.trainer.{key}" for key in NOT_HASHED_TRAINER))
# The code a task or a sifter names by import path: its name already says which, and runs logged before the key
# existed lack it.
NOT_COMPARED_SUFFIXES = ("._target_",)
NATIVE_LOOP = "native"


def is_sifted(table: pd.DataFrame) -> pd.Series:
    """A real sifter: neither the baseline nor the random control."""
    return ~table["sifter"].isin([BASELINE, CONTROL]) & table["sifter"].notna()
