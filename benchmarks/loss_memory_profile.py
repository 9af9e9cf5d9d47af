"""Where a loss-memory sifter's run spends its time: the profile behind savings_efficiency.py's figures.

Run:  python benchmarks/loss_memory_profile.py [--task cifar10_resnet|sst2_bert|all]   (minutes on 2 CPU cores)

At savings_efficiency.py's sizes it runs, under cProfile and in one process, a baseline, stale loss at
beta_value 1 and InfoBatch at prune_ratio 0.5 and 0.9 (sift_delay=0), then a second baseline. Per run it
prints the train time, the optimizer steps and the work trained (samples, or padded tokens), the time per
step, and the sifter's own time, bounded two ways:
  own      the time spent in sift_bench/sifting's own Python lines (cProfile's tottime), a lower bound;
  entries  the cumulative time of the sifter's entry points (its __iter__, which includes drawing the
           wrapped loader's batches that a baseline draws too, record_losses and batch_weights), an upper bound.
Then the functions that took the most time in each run. cProfile slows Python-level code, so both bounds
overstate the sifter's share of an unprofiled run; the train times are for comparison within this output only.
"""

import argparse
import cProfile
import pstats

from savings_efficiency import SIZES, compose, timed_run  # this folder is on sys.path when run as a script

RUNS = [None, "stale_1", "infobatch_0.5", "infobatch_0.9", None]
SIFTER_CODE = "sift_bench/sifting/"
ENTRY_POINTS = {"__iter__", "record_losses", "batch_weights"}
TOP = 6


def profiled_run(cfg):
    profile = cProfile.Profile()
    profile.enable()
    result = timed_run(cfg)
    profile.disable()
    return result, pstats.Stats(profile).stats


def sifter_seconds(stats) -> tuple[float, float]:
    """(own, entries): the sifter's tottime, and the cumulative time of its entry points."""
    own = sum(row[2] for (file, _, _), row in stats.items() if SIFTER_CODE in file)
    entries = sum(row[3] for (file, _, name), row in stats.items()
                  if file.endswith(SIFTER_CODE + "dataloader.py") and name in ENTRY_POINTS)
    return own, entries


def optimizer_steps(stats) -> int:
    # The loop calls zero_grad once per step, and nothing else calls it.
    return sum(row[1] for (file, _, name), row in stats.items()
               if file.endswith("torch/optim/optimizer.py") and name == "zero_grad")


def top_functions(stats) -> str:
    # As a share of everything profiled: the evaluations and the model's set-up are in the profile too.
    total = sum(row[2] for row in stats.values())
    rows = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:TOP]
    return "; ".join(f"{name if file == '~' else file.rsplit('/', 1)[-1] + ':' + name} "
                     f"{100 * row[2] / total:.0f}%" for (file, _, name), row in rows)


def profile_task(task: str, extra: list[str]) -> None:
    timed_run(compose(task, None, [*extra, "trainer.epochs=1"]))  # warm-up: first-call kernel and allocator costs
    print(f"\n{task} ({' '.join(SIZES[task])}), under cProfile")
    print(f"{'run':<16}{'train s':>8}{'steps':>7}{'trained':>9}{'work':>10}{'ms/step':>9}"
          f"{'own s':>7}{'entries s':>10}{'sifter % of train':>19}")
    tops = []
    for row in RUNS:
        cfg = compose(task, row, extra)
        result, stats = profiled_run(cfg)
        steps = optimizer_steps(stats)
        own, entries = sifter_seconds(stats) if row else (0.0, 0.0)
        name = row or "baseline"
        print(f"{name:<16}{result.train_time_s:>8.2f}{steps:>7}{result.samples_trained:>9}{result.work_trained:>10}"
              f"{1e3 * result.train_time_s / steps:>9.1f}{own:>7.3f}{entries:>10.3f}"
              f"{100 * own / result.train_time_s:>11.2f} to {100 * entries / result.train_time_s:.2f}")
        tops.append(f"  {name}: {top_functions(stats)}")
    print("most time (cProfile tottime, % of the whole profiled run, evaluations included):")
    print("\n".join(tops))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=[*SIZES, "all"], default="all")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. paths.data_dir=...")
    args = parser.parse_args()
    for task in (SIZES if args.task == "all" else [args.task]):
        profile_task(task, args.overrides)


if __name__ == "__main__":
    main()
