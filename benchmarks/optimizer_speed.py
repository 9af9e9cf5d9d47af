"""Does a foreach or fused optimizer make the cpu scale's training step faster? (about two minutes)

Run:  python benchmarks/optimizer_speed.py

For each cpu-scale model with its own optimizer (ResNet-20 with Nesterov SGD, batch 256, bf16 autocast and
channels_last; MiniLM-L6 with AdamW, batch 32 of 64 tokens, bf16 autocast) it times a whole training step
(forward, backward, optimizer step) and the optimizer step alone, for each implementation torch offers:
`for-loop` (torch's default on the CPU: foreach=False, fused=False), `foreach` and `fused`. Implementations are
timed in rounds, interleaved, so a machine that drifts over minutes slows them alike. It prints the median
times and each one's ratio against the for-loop, the implementation sift_bench used before
`trainer.optimizer.implementation` existed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from sift_bench.models.resnet import build_resnet
from sift_bench.machine import machine_tags
from sift_bench.loop_parts import build_optimizer

IMPLEMENTATIONS = ("for-loop", "foreach", "fused")


def resnet_case():
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(256, 3, 32, 32, generator=generator).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 10, (256,), generator=generator)

    def make_model():
        torch.manual_seed(0)
        return build_resnet("resnet20").to(memory_format=torch.channels_last).train()

    optimizer = {"name": "sgd", "lr": 0.4, "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4}
    return "ResNet-20 b256 SGD", make_model, lambda model: F.cross_entropy(model(images).float(), labels), optimizer


def bert_case():
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as transformers_logging

    from sift_bench.tasks.sst2_bert import offline_minilm_dir

    transformers_logging.set_verbosity_error()  # the new classifier head's load report is expected noise here
    transformers_logging.disable_progress_bar()
    generator = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(1000, 20000, (32, 64), generator=generator),
             "attention_mask": torch.ones(32, 64, dtype=torch.long), "labels": torch.randint(0, 2, (32,), generator=generator)}

    def make_model():
        torch.manual_seed(0)
        return AutoModelForSequenceClassification.from_pretrained(offline_minilm_dir(), num_labels=2).train()

    optimizer = {"name": "adamw", "lr": 5e-5, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}
    return "MiniLM-L6 b32x64 AdamW", make_model, lambda model: model(**batch).loss, optimizer


class Stepper:
    """One model and optimizer of one implementation; `step()` times a training step and its optimizer part."""

    def __init__(self, make_model, loss_of, optimizer_cfg: dict, implementation: str):
        self.model = make_model()
        self.loss_of = loss_of
        self.optimizer = build_optimizer(self.model, _Config({**optimizer_cfg, "implementation": implementation}))

    def step(self) -> tuple[float, float]:
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = self.loss_of(self.model)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        before_update = time.perf_counter()
        self.optimizer.step()
        ended = time.perf_counter()
        return ended - started, ended - before_update


class _Config(dict):
    __getattr__ = dict.__getitem__


def time_case(case, rounds: int, steps: int) -> dict[str, tuple[float, float]]:
    label, make_model, loss_of, optimizer_cfg = case
    steppers = {name: Stepper(make_model, loss_of, optimizer_cfg, name) for name in IMPLEMENTATIONS}
    for stepper in steppers.values():
        stepper.step()  # warm-up: first-call allocations and kernel choices
    samples = {name: ([], []) for name in IMPLEMENTATIONS}
    for _ in range(rounds):
        for name, stepper in steppers.items():
            for _ in range(steps):
                whole, update = stepper.step()
                samples[name][0].append(whole)
                samples[name][1].append(update)
    return {name: (statistics.median(whole), statistics.median(update)) for name, (whole, update) in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds over the implementations")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per implementation per round")
    args = parser.parse_args()
    print(f"machine.kind: {machine_tags()['machine.kind']}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    header = f"{'model and optimizer':<26}{'implementation':<16}{'step ms':>9}{'update ms':>11}{'step ratio':>12}"
    print(header)
    print("-" * len(header))
    for case in (resnet_case(), bert_case()):
        times = time_case(case, args.rounds, args.steps)
        reference = times["for-loop"][0]
        for name, (whole, update) in times.items():
            print(f"{case[0]:<26}{name:<16}{1000 * whole:>9.1f}{1000 * update:>11.1f}{whole / reference:>12.3f}")
    print("\nstep ratio: median training step time / the for-loop's (below 1: faster than the for-loop)")


if __name__ == "__main__":
    main()
