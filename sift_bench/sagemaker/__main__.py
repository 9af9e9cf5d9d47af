"""`python -m sift_bench.sagemaker [OPTIONS] SCRIPT [ARGS...]`: a SageMaker smart-sifting script, run unchanged.

While the script runs, `import smart_sifting...` resolves to sift_bench (aliases.py) and every SiftingDataloader it
builds is recorded in one MLflow run (recording.py). `--sifter none|random` runs the same script as the baseline or
the random control, `--seeds` repeats it per seed, `--compare` runs all three arms over the seeds and writes the
report with the frontier verdict. Arguments after SCRIPT are the script's own.
Exit status: the script's (0 when every run finished); 2 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import shlex
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Iterator

import mlflow
import torch
from mlflow.tracking import MlflowClient

from sift_bench import liveness
from sift_bench.cli import DEFAULT_URI, add_store_arguments, experiment_of, summary_block
from sift_bench.machine import OtherCpuMeter
from sift_bench.portable import portable
from sift_bench.report.__main__ import main as report_main
from sift_bench.sagemaker import aliases, recording
from sift_bench.sagemaker.recording import ARMS, SCALE
from sift_bench.seeding import seed_everything
from sift_bench.sifting import hooks

DEFAULT_USD_PER_HOUR = 0.23  # conf/scale/cpu.yaml's assumed price of a small CPU instance
COMPARE_ARMS = ("none", "as-written", "random")  # per seed, in this order: the baseline nearest in time pairs best
DEFAULT_COMPARE_SEEDS = [0, 1, 2]


def seeds_list(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds must be comma-separated integers such as 0,1,2, got {text!r}")
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"--seeds must not repeat a seed, got {text!r}")
    return seeds


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m sift_bench.sagemaker",
        description="Run a training script written for Amazon SageMaker smart sifting, unchanged, on sift_bench's "
                    "sifter, recording every SiftingDataloader it builds in an MLflow run.",
        epilog="Arguments after SCRIPT are the script's own. Exit status: the script's; 2 bad usage.")
    cli.add_argument("--sifter", choices=ARMS, default="as-written",
                     help="as-written: the script's own sift config (default); none: every SiftingDataloader passes "
                          "batches through untouched (the baseline); random: the random control keeping "
                          "1 / (1 + beta_value) of the samples, beta_value being the script's")
    cli.add_argument("--seeds", type=seeds_list, metavar="0,1,2",
                     help="seed python, numpy, torch and Lightning (PL_GLOBAL_SEED) before the script runs, one run "
                          "per seed (default: no seeding, the script's own)")
    cli.add_argument("--compare", action="store_true",
                     help=f"run the baseline, the script as written and the random control over the seeds (default "
                          f"{','.join(map(str, DEFAULT_COMPARE_SEEDS))}), then the report with the frontier verdict")
    cli.add_argument("--metric", metavar="NAME",
                     help="with --compare: the accuracy metric the script logs (e.g. val_acc), which the report "
                          "tables")
    cli.add_argument("--out", type=Path, metavar="DIR",
                     help="with --compare: the report's folder (default results/script/<script name>)")
    add_store_arguments(cli, f"$MLFLOW_TRACKING_URI, else {DEFAULT_URI}")
    cli.add_argument("--usd-per-hour", type=float, default=DEFAULT_USD_PER_HOUR,
                     help=f"price of the machine, for cost_usd (default {DEFAULT_USD_PER_HOUR})")
    cli.add_argument("script", metavar="SCRIPT", help="the training script, run as `python SCRIPT ARGS...` would")
    cli.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's own arguments")
    return cli


@contextlib.contextmanager
def as_script(script: Path, script_args: list[str]) -> Iterator[None]:
    """sys.argv and sys.path[0] as `python SCRIPT ARGS...` would set them, for the `with` block."""
    argv, path = sys.argv, list(sys.path)
    sys.argv = [str(script), *script_args]
    sys.path.insert(0, str(script.resolve().parent))
    try:
        yield
    finally:
        sys.argv, sys.path[:] = argv, path


def command_text(argv: list[str]) -> str:
    return " ".join(["python -m sift_bench.sagemaker", *map(portable, argv)])


def run_once(args, seed: int | None, argv: list[str]) -> int:
    """Run the script once, in this process, under one arm and seed, recorded in one MLflow run; its exit status."""
    script = Path(args.script)
    recorder = recording.ScriptRecorder(args.sifter)
    # The run's liveness lock (sift_bench.liveness), held until its end is recorded, so a sweep on the same store
    # never takes it for a run left behind by a killed process.
    alive = contextlib.ExitStack()
    run = recording.start_run(args.tracking_uri, args.experiment_name, args.script, args.script_args, args.sifter,
                              seed, command_text(argv), alive.enter_context(liveness.hold(args.tracking_uri)))
    os.environ["MLFLOW_TRACKING_URI"] = args.tracking_uri  # the script's own MLflow use defaults to this store
    if seed is not None:
        seed_everything(seed, lightning=True)
    status, code = "FINISHED", 0
    meter = OtherCpuMeter().start()
    started = time.perf_counter()
    try:
        with aliases.aliased(), hooks.watching(recorder), as_script(script, args.script_args):
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    wall_s = time.perf_counter() - started
    other_cpu = meter.stop()
    if code:
        status = "KILLED" if code == 130 else "FAILED"
    final = recording.finish_run(args.tracking_uri, run, recorder, args.script_args, wall_s, other_cpu,
                                 args.usd_per_hour, seed, torch.initial_seed() if seed is not None else None)
    active = mlflow.active_run()
    if active is not None and active.info.run_id == run.info.run_id:
        mlflow.end_run(status)
    else:  # the script ended the run itself
        MlflowClient(args.tracking_uri).set_terminated(run.info.run_id, status)
    alive.close()
    print(summary(args, recorder, final, seed, run.info.run_id, status))
    if not recorder.sifters:
        print(f"sift_bench.sagemaker: warning: {script.name} built no SiftingDataloader: nothing was sifted",
              file=sys.stderr)
    if seed is not None and torch.initial_seed() != seed:
        print(f"sift_bench.sagemaker: warning: {script.name} seeds torch itself (seed {torch.initial_seed()}), so "
              f"--seeds does not vary what it draws; the run is tagged script_seeds_itself=true", file=sys.stderr)
    return code


def summary(args, recorder, final: dict, seed: int | None, run_id: str, status: str) -> str:
    settings = " ".join(f"{key.removeprefix('sifter.')}={value}" for key, value in recorder.params().items()
                        if key != "sifter.name")
    return summary_block([
        ("script", f"{args.script} {shlex.join(args.script_args)}"),
        ("sifter", f"{args.sifter}: {recorder.sifter_name()} {settings}"),
        ("seed", f"{'none (the script seeds itself or not)' if seed is None else seed}"),
        ("accepted", f"{final['pct_accepted']:.1f} % ({final['samples_kept']:.0f} of {final['samples_seen']:.0f} "
                     f"samples, {len(recorder.sifters)} SiftingDataloader)"),
        ("time", f"{final['train_time_s']:.1f} s wall (scoring {final['sift_time_s']:.1f} s)"),
        ("cost", f"${final['cost_usd']:.4f} at ${args.usd_per_hour}/h"),
        ("mlflow run", f"{run_id} ({status}) in {args.tracking_uri}"),
    ])


def child_argv(args, arm: str, seed: int) -> list[str]:
    return ["--sifter", arm, "--seeds", str(seed), "--tracking-uri", args.tracking_uri, "--experiment-name",
            args.experiment_name, "--usd-per-hour", str(args.usd_per_hour), args.script, *args.script_args]


def run_many(args, arms: tuple[str, ...], seeds: list[int]) -> int:
    """Each arm and seed in its own process (a script's global state must not leak into the next run)."""
    for seed in seeds:
        for arm in arms:
            print(f"sift_bench.sagemaker: {Path(args.script).name} --sifter {arm} seed {seed}", flush=True)
            done = subprocess.run([sys.executable, "-m", "sift_bench.sagemaker", *child_argv(args, arm, seed)])
            if done.returncode != 0:
                print(f"sift_bench.sagemaker: error: the run --sifter {arm} seed {seed} exited with status "
                      f"{done.returncode}; stopping", file=sys.stderr)
                return done.returncode
    return 0


def report(args) -> int:
    out = args.out or Path("results") / SCALE / Path(args.script).stem
    argv = ["--tracking-uri", args.tracking_uri, "--experiment-name", args.experiment_name, "--scale", SCALE,
            "--task", Path(args.script).stem, "--out", str(out)]
    return report_main(argv + (["--metric", args.metric] if args.metric else []))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cli = parser()
    args = cli.parse_args(argv)
    if not Path(args.script).is_file():
        cli.error(f"SCRIPT {args.script!r} is not a file")
    if (args.metric or args.out) and not args.compare:
        cli.error("--metric and --out go with --compare (they are the report's); without it, pass them to "
                  "python -m sift_bench.report")
    if args.compare and args.sifter != "as-written":
        cli.error(f"--compare runs every arm (none, as-written, random); it takes no --sifter {args.sifter}")
    args.tracking_uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    args.experiment_name = experiment_of(args)
    if args.compare:
        seeds = args.seeds or DEFAULT_COMPARE_SEEDS
        code = run_many(args, COMPARE_ARMS, seeds)
        return code if code else report(args)
    if args.seeds and len(args.seeds) > 1:
        return run_many(args, (args.sifter,), args.seeds)
    return run_once(args, args.seeds[0] if args.seeds else None, argv)


if __name__ == "__main__":
    sys.exit(main())
