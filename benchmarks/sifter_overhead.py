"""The sifter's own overhead per yielded batch, as a % of one CIFAR ResNet-20 training step.

Run:  python benchmarks/sifter_overhead.py   (about a minute)

Overhead is the sifter's bookkeeping: batch transforms, the model-mode switch, the
loss history, selection and refill. The scoring forward pass is left out by a Loss
that returns precomputed losses at once, so each row is the time to iterate the
SiftingDataloader minus the time to iterate the raw loader over the same candidate
batches, divided by the batches yielded. A training step is forward + backward +
SGD step of a ResNet-20 on a batch of 256 3x32x32 images, channels_last under bf16
autocast as in the harness, timed in the same process.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from machine_speed import step_seconds  # this folder is on sys.path when a benchmark runs as a script
from sift_bench.models.resnet import build_resnet

from sift_bench.sifting import (
    Loss,
    LossConfig,
    RandomSiftConfig,
    RelativeProbabilisticSiftConfig,
    SiftingBaseConfig,
    SiftingDataloader,
)


class ResidentLoader:
    """Like the harness's CIFAR pipeline: resident (images, labels) tensors, batch_size, drop_last."""

    def __init__(self, batches: list[tuple[torch.Tensor, torch.Tensor]], n_candidates: int) -> None:
        self.batches = batches
        self.n_candidates = n_candidates
        self.batch_size = len(batches[0][1])
        self.drop_last = False

    def __iter__(self):
        for i in range(self.n_candidates):
            yield self.batches[i % len(self.batches)]


class PrecomputedLoss(Loss):
    """Returns random losses computed in advance: scoring costs nothing, bookkeeping is all that is left."""

    def __init__(self, batch_size: int, n: int = 64) -> None:
        generator = torch.Generator().manual_seed(0)
        self.losses = [torch.rand(batch_size, generator=generator) for _ in range(n)]
        self.calls = 0

    def loss(self, model, transformed_batch, original_batch=None):
        self.calls += 1
        return self.losses[self.calls % len(self.losses)]


def make_batches(batch_size: int, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(n):
        images = torch.randint(0, 256, (batch_size, 3, 32, 32), dtype=torch.uint8, generator=generator)
        images = (images.float() / 255).contiguous(memory_format=torch.channels_last)
        batches.append((images, torch.randint(0, 10, (batch_size,), generator=generator)))
    return batches


def train_step_seconds(batches, steps: int, warmup: int) -> float:
    model = build_resnet("resnet20").to(memory_format=torch.channels_last).train()
    return step_seconds(model, batches[0], lambda m, b: F.cross_entropy(m(b[0]), b[1]), "bf16", steps, warmup)


def iterate(iterable) -> tuple[float, int]:
    started = time.perf_counter()
    n = 0
    for _ in iterable:
        n += 1
    return time.perf_counter() - started, n


def sift_config(name: str, value: float, sift_delay: int):
    base = LossConfig(sift_config=SiftingBaseConfig(sift_delay=sift_delay))
    if name == "random":
        return RandomSiftConfig(keep_fraction=value, loss_based_sift_config=base)
    return RelativeProbabilisticSiftConfig(
        beta_value=value, loss_history_length=500, loss_based_sift_config=base
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--candidates", type=int, default=400, help="candidate batches per timed pass")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes per row (median kept)")
    parser.add_argument("--train-steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, as in the harness)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    batches = make_batches(args.batch_size, 8)
    step_s = train_step_seconds(batches, args.train_steps, warmup=1)
    model = build_resnet("resnet20").to(memory_format=torch.channels_last).train()
    loader = ResidentLoader(batches, args.candidates)

    rows = [
        ("delay (pass-through)", "relative", 1.0, 10**9),
        ("random keep 0.5", "random", 0.5, 0),
        ("beta 0.5", "relative", 0.5, 0),
        ("beta 1", "relative", 1.0, 0),
        ("beta 2", "relative", 2.0, 0),
        ("beta 3", "relative", 3.0, 0),
    ]
    print(f"ResNet-20 training step, batch {args.batch_size}, channels_last + bf16 autocast, "
          f"{torch.get_num_threads()} CPU thread(s): {1000 * step_s:.1f} ms\n")
    header = (f"{'sifter':<22}{'accepted %':>11}{'cand/yield':>11}"
              f"{'overhead ms/batch':>19}{'% of step':>11}")
    print(header)
    print("-" * len(header))
    for label, name, value, sift_delay in rows:
        overheads, accepted, per_yield = [], 0.0, 0.0
        for repeat in range(args.repeats):
            raw_s, raw_batches = iterate(loader)
            sifter = SiftingDataloader(sift_config(name, value, sift_delay), loader,
                                       PrecomputedLoss(args.batch_size), model, seed=repeat)
            sift_s, yielded = iterate(sifter)
            overheads.append((sift_s - raw_s) / yielded)
            accepted = sifter.stats.pct_accepted
            per_yield = raw_batches / yielded
        overhead_s = statistics.median(overheads)
        print(f"{label:<22}{accepted:>11.1f}{per_yield:>11.2f}"
              f"{1000 * overhead_s:>19.3f}{100 * overhead_s / step_s:>10.3f}%")
    print("\ntarget: under 2 % of a training step")


if __name__ == "__main__":
    main()
