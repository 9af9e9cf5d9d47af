"""How close each sifting policy comes to its ideal time savings, per task, on this machine.

Run:  python benchmarks/savings_efficiency.py [--task cifar10_resnet|sst2_bert|all]   (minutes on 2 CPU cores)

In one process and on the same batches it measures, per sample:
  t_train  a training step (forward, backward, optimizer step) under the run's autocast,
  t_score  a scoring forward (eval mode, no grad), as smart sifting runs it,
and the loop's own overhead: a baseline run's train time over samples * t_train, minus 1.

From these, the ideal ratio of a sifted run's train time to the baseline's at accept
fraction a is (t_score + a * t_train) / t_train for scoring sifters (SageMaker style)
and a for the random control and for the loss-memory sifters (stale loss, InfoBatch),
which run no scoring pass. Real short runs of every policy (the table's own rows,
sift_delay=0) give the measured ratio, and efficiency = measured savings / ideal savings.
"""

import argparse
import sys

import torch
from omegaconf import open_dict

import sift_bench.schema  # noqa: F401  (registers the typed configs the yaml files extend)
from scoring_cost import passes, per_sample_seconds  # benchmarks/ is the script's folder, first on sys.path
from sift_bench.tasks import build_task
from sift_bench.train import train
from sift_bench.validation import resolve_precision, validate

# The table's rows whose % accepted lands near 0.5 and 0.25, plus the loss-memory policies.
POLICIES = ["beta_1", "beta_3", "random_0.5", "random_0.25", "stale_1", "stale_3", "infobatch_0.5", "infobatch_0.9"]
SIZES = {  # minutes-scale runs: a subset of the training set, a few epochs so loss-memory policies can act
    "cifar10_resnet": ["task.data.train_subset=8192", "trainer.epochs=4"],
    "sst2_bert": ["task.data.train_subset=1024", "trainer.epochs=3"],
}


def compose(task: str, row: str | None, extra: list[str]):
    from hydra import compose as hydra_compose, initialize_config_dir
    from pathlib import Path

    conf = Path(__file__).resolve().parents[1] / "conf"
    overrides = [f"task={task}", "scale=cpu", *SIZES[task], "trainer.progress=false", "trainer.evals_per_epoch=1", *extra]
    if row:
        overrides += [f"+table_row={row}", "sifter.sift_delay=0"]
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = hydra_compose("config", overrides=overrides)
    resolve_precision(cfg)  # scale.precision=auto: bf16 where the CPU has native kernels, else fp32
    return cfg


def per_sample_costs(cfg, n_batches: int = 8) -> tuple[float, float]:
    """Median per-sample seconds of a training step and of a scoring forward, on the same batches, in interleaved
    rounds (scoring_cost.py's passes)."""
    parts, named = passes(cfg, sizes=[])
    seconds = per_sample_seconds(parts, named, n_batches, rounds=2)
    return seconds["training step"], seconds["scoring forward"]


def timed_run(cfg):
    device = torch.device(cfg.scale.device)
    torch.manual_seed(cfg.seed)
    parts = build_task(cfg, device)
    return train(parts, cfg.trainer, device, cfg.scale.precision, validate(cfg), seed=cfg.seed)


def benchmark(task: str, extra: list[str]) -> None:
    t_train, t_score = per_sample_costs(compose(task, None, extra))
    timed_run(compose(task, None, [*extra, "trainer.epochs=1"]))  # warm-up: first-call kernel and allocator costs
    # Baselines between the policies: the machine drifts over minutes, so each policy is set against the
    # mean of the baseline runs just before and just after it.
    baselines = [timed_run(compose(task, None, extra))]
    first = baselines[0]
    overhead = first.train_time_s / (first.samples_trained * t_train) - 1
    print(f"\n{task}: t_train {t_train * 1e3:.3f} ms/sample, t_score {t_score * 1e3:.3f} ms/sample "
          f"(t_score/t_train {t_score / t_train:.3f}), loop overhead {100 * overhead:+.1f} % of samples * t_train, "
          f"baseline train time {first.train_time_s:.1f} s, other processes {first.other_cpu_fraction:.2f} cores")
    print(f"{'policy':<28}{'accepted':>9}{'work':>7}{'ideal':>8}{'measured':>9}{'ideal sav':>10}{'meas sav':>9}"
          f"{'efficiency':>11}{'score s':>9}{'pred score s':>13}{'baselines s':>14}")
    efficiencies = []
    for row in POLICIES:
        cfg = compose(task, row, extra)
        result = timed_run(cfg)
        baselines.append(timed_run(compose(task, None, extra)))
        around = (baselines[-2].train_time_s + baselines[-1].train_time_s) / 2
        accepted = result.samples_trained / result.samples_seen
        # Compute trained on per sample seen, against the baseline's: above `accepted` when the sifter keeps
        # costlier samples (longer sentences), which the ideal ratio in samples does not see.
        work = result.work_trained / result.samples_seen / (first.work_trained / first.samples_seen)
        scoring = validate(cfg).scores  # the policy declares whether it runs the scoring pass
        ideal = accepted + (t_score / t_train if scoring else 0.0)
        measured = result.train_time_s / around
        efficiency = (1 - measured) / (1 - ideal) if ideal < 1 else float("nan")
        efficiencies.append(efficiency)
        predicted_score = result.samples_seen * t_score if scoring else 0.0
        print(f"{cfg.sifter.name + ' ' + row.split('_', 1)[1]:<28}{100 * accepted:>8.1f}%{100 * work:>6.1f}%{ideal:>8.3f}{measured:>9.3f}"
              f"{100 * (1 - ideal):>9.1f}%{100 * (1 - measured):>8.1f}%{efficiency:>11.2f}"
              f"{result.sift_time_s:>9.1f}{predicted_score:>13.1f}"
              f"{baselines[-2].train_time_s:>7.1f}/{baselines[-1].train_time_s:<6.1f}")
    times = [run.train_time_s for run in baselines]
    print(f"baseline train time over the benchmark: {min(times):.1f} to {max(times):.1f} s; "
          f"efficiency {min(efficiencies):.2f} to {max(efficiencies):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=[*SIZES, "all"], default="all")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. paths.data_dir=...")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # rows appear as they are measured, also into a log file
    for task in SIZES if args.task == "all" else [args.task]:
        benchmark(task, args.overrides)


if __name__ == "__main__":
    main()
