"""Is a run's evaluation time a normaliser of its training time, or only a gate? (seconds; reads a report folder)

Run:  python benchmarks/pace_probe.py [results/cpu]

Every run of a task's table evaluates the same held-out sets at the same points, so its `eval_time_s` probes how
fast the machine was for it; the report uses it as a gate (a run whose evaluations took outside 1/1.2 to 1.2 times
its reference baseline's has its savings left out, `sift_bench.report.timing.eval_pace`). Dividing every training
time by it would instead remove the machine's pace from the savings, if the probe were less noisy than the training
time it divides. This prints, over the clean baselines of each task and machine kind in the report's runs.csv (the
same training repeated, across sittings): the coefficient of variation (std / mean, %) of the training time, of the
evaluation time and of their ratio, and how the two correlate. A ratio no less spread than the training time means
normalising would not make the savings less noisy.
"""

import argparse
from pathlib import Path

import pandas as pd

from sift_bench.machine import CONTENDED_FRACTION
from sift_bench.report import BASELINE, run_rows
from sift_bench.report.sources import read_csv_dir


def probe_spread(used: pd.DataFrame) -> pd.DataFrame:
    """Per task and machine kind, over the runs a report used (runs.csv holds FINISHED runs only): the spread of the
    clean baselines' (other processes at or under CONTENDED_FRACTION of a core) training and evaluation times."""
    runs = run_rows(used)
    baselines = runs[(runs["sifter"] == BASELINE) & ~(runs["other_cpu_fraction"] > CONTENDED_FRACTION)]
    rows = []
    for (task, kind), group in baselines.groupby(["task", "machine_kind"]):
        train, evaluation = group["train_time_s"], group["eval_time_s"]
        ratio = train / evaluation

        def spread(values: pd.Series) -> float:
            return 100 * values.std() / values.mean()

        rows.append({"task": task, "machine_kind": kind, "baselines": len(group),
                     "train_cv_pct": spread(train), "eval_cv_pct": spread(evaluation),
                     "train_over_eval_cv_pct": spread(ratio), "correlation": train.corr(evaluation),
                     "eval_min_s": evaluation.min(), "eval_max_s": evaluation.max()})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", type=Path, default=Path("results/cpu"),
                        help="a report folder holding runs.csv (default results/cpu)")
    args = parser.parse_args()
    used, _, _ = read_csv_dir(args.report)
    spread = probe_spread(used)
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(spread.drop(columns="machine_kind").round(2).to_string(index=False))
    print("\nkinds:", "; ".join(sorted(spread["machine_kind"].unique())))


if __name__ == "__main__":
    main()
