"""The savings report, from a frame of runs: which runs go in, their savings against the baseline timed nearest on
their own machine kind, the table, its verdicts (the uniform-subsampling frontier at equal time, the random control
at equal data, the headlines) and diagnostics. Pure pandas: reading a store (mlflow) is `sources`, writing and
plotting `__main__`, `plots`, `markdown` (and its `notes`), `budget` and `status` (the tables' status, from
table.csv), so `import sift_bench.report` imports no mlflow.

One question per module: `vocabulary` (names and columns), `frame` (the runs frame, a row per run), `selection`
(which runs go in, and why not), `timing` (time references and paired savings), `table` (a row per configuration),
`frontier` (the piecewise-linear curves), `verdicts`, `diagnostics`. Their public names are gathered here.

Accuracy comes twice: validation accuracy chooses (the headlines pick on it), test accuracy reports (every figure
printed as "the" accuracy is test accuracy), so a configuration is never chosen on the figure it is reported with.
"""

from sift_bench.machine import CONTENDED_FRACTION
from sift_bench.report.diagnostics import (PACE_TOLERANCE, baseline_pace, commands, contended_runs, fewer_seeds,
                                           machines, missing_metrics, varying_settings)
from sift_bench.report.frame import (column, machine_kinds, normalise, run_rows, sifter_params, task_labels,
                                     time_midpoints, with_accuracy_metric)
from sift_bench.report.selection import choose_machine, exclusion_of_reason, split_runs
from sift_bench.report.table import sifter_rank, build_table, config_labels, first_present, paired_accuracy
from sift_bench.report.timing import (baselines_off_pace, eval_pace, off_pace_baselines, pace_mismatched_runs,
                                      paired_savings, runs_without_baseline, savings_stats, timed_runs,
                                      timing_references)
from sift_bench.report.verdicts import (CONTROL_RULE, best_sifted, control_curve, frontier_columns, frontier_points,
                                        headline, headline_at_equal_time, pair_controls, pairing_caveat,
                                        tasks_without_baseline, verdict)
from sift_bench.report.vocabulary import (ACCURACIES, BASELINE, CONTROL, EXCLUDED_COLUMNS, FRONTIER_COLUMNS,
                                          FRONTIER_STATS, HEADLINE_TOLERANCE, HISTORY_METRICS, NATIVE_LOOP,
                                          NEEDED_METRICS, SIFTER_PARAMS, TABLE_STATS, Exclusion, is_sifted)

__all__ = [
    "ACCURACIES", "BASELINE", "CONTENDED_FRACTION", "CONTROL", "CONTROL_RULE", "EXCLUDED_COLUMNS", "Exclusion",
    "FRONTIER_COLUMNS", "FRONTIER_STATS", "HEADLINE_TOLERANCE", "HISTORY_METRICS", "NATIVE_LOOP", "NEEDED_METRICS",
    "PACE_TOLERANCE", "SIFTER_PARAMS", "TABLE_STATS", "sifter_rank", "baseline_pace", "baselines_off_pace",
    "best_sifted", "build_table", "choose_machine", "column", "commands", "config_labels", "contended_runs",
    "control_curve", "eval_pace", "exclusion_of_reason", "fewer_seeds", "first_present", "frontier_columns",
    "frontier_points", "headline", "headline_at_equal_time", "is_sifted", "machine_kinds", "machines",
    "missing_metrics", "normalise", "off_pace_baselines", "pace_mismatched_runs", "pair_controls",
    "paired_accuracy", "paired_savings", "pairing_caveat", "run_rows", "runs_without_baseline", "savings_stats",
    "sifter_params", "split_runs", "task_labels", "tasks_without_baseline", "time_midpoints", "timed_runs",
    "timing_references", "varying_settings", "verdict", "with_accuracy_metric",
]
