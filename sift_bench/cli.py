"""What sift_bench's three commands share (`python -m sift_bench`, `sift_bench.sagemaker`, `sift_bench.report`):
the store they default to, the options that name a store, and the aligned summary block they print.

Standard library only: the report's command loads neither torch nor MLflow through it.
"""

import argparse

# The harness's default store (conf/tracking/*.yaml): relative to where a command runs, so `mlflow ui` started in
# the same folder shows its runs.
DEFAULT_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "sift_bench"
SUMMARY_LABEL_WIDTH = 13  # "train time   " and its neighbours: the values start in one column


def add_store_arguments(cli: argparse.ArgumentParser, uri_default: str) -> None:
    """--tracking-uri and --experiment-name, both defaulting to None (the command resolves them, see
    `experiment_of`); `uri_default` says in the help what a missing --tracking-uri means for this command."""
    cli.add_argument("--tracking-uri", metavar="URI", help=f"MLflow store (default {uri_default})")
    cli.add_argument("--experiment-name", metavar="NAME", help=f"MLflow experiment (default {DEFAULT_EXPERIMENT})")


def experiment_of(args: argparse.Namespace) -> str:
    return args.experiment_name or DEFAULT_EXPERIMENT


def summary_block(rows: list[tuple[str, str]]) -> str:
    """One line a row, `label` padded so that every value starts in the same column."""
    return "\n".join(f"{label:<{SUMMARY_LABEL_WIDTH}}{text}".rstrip() for label, text in rows)
