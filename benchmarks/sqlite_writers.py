"""Can parallel jobs write straight into one sqlite MLflow store? (about a minute on 2 cores)

Run:  python benchmarks/sqlite_writers.py [--writers 12] [--evaluations 150] [--trials 4]

Two checks, each with real MLflow in separate processes started at once:

1. Opening a fresh store: `--writers` processes (at most 3 per trial, `--trials` times) open a new sqlite store
   and create the experiment, first as plain MLflow does it, then through `sift_bench.store.use_store`, which
   holds a file lock around it. It prints how each process ended, by error message.
2. Writing at once: `--writers` processes each log two job-like runs into one store (a `skip_finished` search,
   a run under a sweep parent with 20 tags, 120 params, a config.yaml artifact, `--evaluations` steps of 9
   metrics and 17 final metrics). It prints the time, the processes that failed (with `database is locked`, if
   sqlite gave up waiting for another writer) and how many runs ended FINISHED.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from collections import Counter
from pathlib import Path

EXPERIMENT = "sift_bench"


def open_fresh_store(uri: str, locked: bool, outcomes) -> None:
    try:
        if locked:
            from sift_bench.store import use_store

            use_store(uri, EXPERIMENT)
        else:
            from mlflow.tracking import MlflowClient

            client = MlflowClient(uri)
            if client.get_experiment_by_name(EXPERIMENT) is None:
                client.create_experiment(EXPERIMENT)
        outcomes.put("ok")
    except Exception as error:  # the outcome being measured: any error, by its first line
        outcomes.put(f"{type(error).__name__}: {str(error).splitlines()[0][:120]}")


def write_job_runs(uri: str, parent_run_id: str, writer: int, evaluations: int, outcomes) -> None:
    try:
        import mlflow
        from mlflow.tracking import MlflowClient

        from sift_bench.store import use_store

        experiment_id = use_store(uri, EXPERIMENT)
        for job in range(2):
            MlflowClient(uri).search_runs([experiment_id], max_results=1,
                                          filter_string="tags.config_hash = 'none' and attributes.status = 'FINISHED'")
            mlflow.start_run(experiment_id=experiment_id, run_name=f"writer {writer} job {job}",
                             parent_run_id=parent_run_id, tags={f"tag{i}": str(i) for i in range(20)})
            mlflow.log_params({f"param.{i}": str(i) for i in range(120)})
            mlflow.log_dict({"writer": writer}, "config.yaml")
            for step in range(evaluations):
                mlflow.log_metrics({f"metric{i}": step / 10 + i for i in range(9)}, step=step)
            mlflow.log_metrics({f"final{i}": 1.0 for i in range(17)}, step=evaluations)
            mlflow.end_run()
        outcomes.put("ok")
    except Exception as error:
        outcomes.put(f"{type(error).__name__}: {str(error).splitlines()[0][:120]}")


def run_at_once(target, argument_lists: list[tuple]) -> list[str]:
    context = multiprocessing.get_context("spawn")  # fresh interpreters, as separate jobs are
    outcomes = context.Queue()
    processes = [context.Process(target=target, args=(*arguments, outcomes)) for arguments in argument_lists]
    for process in processes:
        process.start()
    results = [outcomes.get(timeout=900) for _ in processes]
    for process in processes:
        process.join()
    return results


def measure(folder: Path, args: argparse.Namespace) -> None:
    at_once = min(3, args.writers)
    for locked in (False, True):
        outcomes = Counter()
        for trial in range(args.trials):
            store = folder / f"{'locked' if locked else 'plain'}-{trial}"
            store.mkdir()
            uri = f"sqlite:///{store / 'mlflow.db'}"
            outcomes.update(run_at_once(open_fresh_store, [(uri, locked)] * at_once))
        label = "through use_store (locked)" if locked else "plain MLflow"
        print(f"fresh store, {at_once} processes at once, {args.trials} trials, {label}:")
        for outcome, count in outcomes.most_common():
            print(f"  {count:3d}  {outcome}")

    from mlflow.tracking import MlflowClient

    from sift_bench.store import use_store

    uri = f"sqlite:///{folder / 'writers' / 'mlflow.db'}"
    experiment_id = use_store(uri, EXPERIMENT)
    parent = MlflowClient(uri).create_run(experiment_id, tags={"run_kind": "sweep"}).info.run_id
    started = time.perf_counter()
    outcomes = run_at_once(write_job_runs, [(uri, parent, writer, args.evaluations) for writer in range(args.writers)])
    seconds = time.perf_counter() - started
    runs = MlflowClient(uri).search_runs([experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent}'",
                                         max_results=10_000)
    failed = [outcome for outcome in outcomes if outcome != "ok"]
    print(f"{args.writers} processes writing at once, 2 runs x {args.evaluations} evaluations each: {seconds:.1f} s, "
          f"{len(failed)} failed, {sum(run.info.status == 'FINISHED' for run in runs)} of {2 * args.writers} runs "
          "FINISHED")
    for outcome, count in Counter(failed).most_common():
        print(f"  {count:3d}  {outcome}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", type=int, default=12)
    parser.add_argument("--evaluations", type=int, default=150)
    parser.add_argument("--trials", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sqlite_writers_") as name:
        measure(Path(name), args)


if __name__ == "__main__":
    main()
