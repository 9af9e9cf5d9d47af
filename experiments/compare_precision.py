"""Set one report folder's runs beside another's, seed by seed: the same training in two precisions (or on two kinds).

    python experiments/compare_precision.py results/cpu results/cpu_fp32 --task sst2_bert

Reads each folder's runs.csv (what `python -m sift_bench.report` wrote) and pairs runs by their run name (task,
scale, sifter settings, seed: the precision is not in it), leaving out runs the report excluded (excluded.csv) and
runs that did not finish. Prints, for every run name both folders have, each kind's test accuracy in either folder
and the difference; then, per row, the mean difference over the paired seeds beside the spread between machine kinds
within the first folder (bf16 kernels differ between kinds, so that spread is the yardstick a difference is read
against). Accuracy only: times compare within a kind, and the reports give each folder's savings.
"""

import argparse
import re
from pathlib import Path

import pandas as pd

KIND_SHORT = re.compile(r"(family \d+ model \d+)")


def finished_runs(folder: Path, task: str) -> pd.DataFrame:
    """The finished, counted runs of `task` in a report folder: run name, row (the name less its seed), seed, the
    machine kind (family and model) and the test accuracy."""
    runs = pd.read_csv(folder / "runs.csv")
    excluded = folder / "excluded.csv"
    left_out = set(pd.read_csv(excluded)["run_id"]) if excluded.is_file() else set()
    runs = runs[(runs["status"] == "FINISHED") & (runs["params.task.name"] == task) & ~runs["run_id"].isin(left_out)]
    names = runs["tags.mlflow.runName"]
    return pd.DataFrame({
        "name": names,
        "row": names.str.replace(r" seed=\d+$", "", regex=True),
        "seed": runs["params.seed"].astype(int),
        "kind": runs["tags.machine.kind"].str.extract(KIND_SHORT, expand=False).fillna("?"),
        "test": runs["metrics.test_accuracy"].astype(float),
    })


def per_seed(runs: pd.DataFrame) -> pd.DataFrame:
    """One line per run name: the mean test accuracy over machine kinds (a seed on two kinds counts once, as in the
    report) and the kinds with theirs."""
    by_kind = runs.groupby(["name", "row", "seed", "kind"], as_index=False)["test"].mean()
    by_kind["each"] = by_kind["test"].map("{:.2f}".format) + " (" + by_kind["kind"] + ")"
    return by_kind.groupby(["name", "row", "seed"], as_index=False).agg(
        test=("test", "mean"), kinds=("kind", "nunique"), spread=("test", lambda tests: tests.max() - tests.min()),
        each=("each", " / ".join))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path, help="a report folder (e.g. results/cpu, the bf16 table)")
    parser.add_argument("second", type=Path, help="another (e.g. results/cpu_fp32)")
    parser.add_argument("--task", required=True, help="cifar10_resnet or sst2_bert")
    args = parser.parse_args()
    first, second = per_seed(finished_runs(args.first, args.task)), per_seed(finished_runs(args.second, args.task))
    paired = first.merge(second, on=["name", "row", "seed"], suffixes=("_1", "_2"))
    if paired.empty:
        raise SystemExit(f"compare_precision: no run of {args.task} is in both {args.first} and {args.second}")
    paired["difference"] = paired["test_2"] - paired["test_1"]
    print(f"test accuracy, %: {args.second} minus {args.first}, paired by run name ({args.task})\n")
    lines = paired.sort_values(["row", "seed"])
    print(pd.DataFrame({"run": lines["name"], f"{args.first} (each kind)": lines["each_1"],
                        f"{args.second} (each kind)": lines["each_2"],
                        "difference": lines["difference"].map("{:+.2f}".format)})
          .to_string(index=False))
    rows = paired.groupby("row").agg(seeds=("seed", "count"), difference=("difference", "mean"),
                                     lowest=("difference", "min"), highest=("difference", "max"))
    kinds = first[first["kinds"] > 1]
    table = rows.to_string(float_format="{:+.2f}".format)
    print(f"\nper row, over the paired seeds (mean, lowest, highest difference):\n{table}")
    if not kinds.empty:
        print(f"\nyardstick: in {args.first}, a seed trained on two machine kinds differs by "
              f"{kinds['spread'].mean():.2f} points on average (largest {kinds['spread'].max():.2f}; "
              f"{len(kinds)} run name(s) on two kinds)")


if __name__ == "__main__":
    main()
