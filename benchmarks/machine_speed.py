"""Which kind of machine is this, and how fast does it train the cpu scale's two models? (about a minute)

Run:  python benchmarks/machine_speed.py

Prints the `machine.kind` tag a run on this machine gets, then the median time of a training step
(forward, backward, optimizer step) of the cpu scale's models in each precision, and the bf16 / fp32 ratio:
- ResNet-20, batch 256 of 3x32x32 images, channels_last or not;
- the offline MiniLM-L6 BERT, batch 32 of 32 tokens.
Training times of two runs compare only on one machine kind (see README.md, "Machine kinds"):
run this at the start of a sitting to know which kind it is on before adding to a table.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from sift_bench.models.resnet import build_resnet
from sift_bench.machine import machine_tags, resolve_precision


def step_seconds(model, batch, loss_of, precision: str, steps: int, warmup: int = 2) -> float:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    times = []
    for step in range(warmup + steps):
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_of(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step >= warmup:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def resnet_rows(steps: int) -> list[tuple[str, float]]:
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(256, 3, 32, 32, generator=generator)
    labels = torch.randint(0, 10, (256,), generator=generator)
    rows = []
    for precision, channels_last in (("bf16", True), ("fp32", True), ("fp32", False)):
        layout = torch.channels_last if channels_last else torch.contiguous_format
        model = build_resnet("resnet20").to(memory_format=layout).train()
        batch = (images.contiguous(memory_format=layout), labels)
        seconds = step_seconds(model, batch, lambda m, b: F.cross_entropy(m(b[0]).float(), b[1]), precision, steps)
        rows.append((f"ResNet-20 b256 {precision}{' channels_last' if channels_last else ''}", seconds))
    return rows


def bert_rows(steps: int) -> list[tuple[str, float]]:
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as transformers_logging

    from sift_bench.tasks.sst2_bert import offline_minilm_dir

    generator = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(1000, 20000, (32, 32), generator=generator),
             "attention_mask": torch.ones(32, 32, dtype=torch.long), "labels": torch.randint(0, 2, (32,), generator=generator)}
    rows = []
    transformers_logging.set_verbosity_error()  # the new classifier head's load report is expected noise here
    transformers_logging.disable_progress_bar()
    for precision in ("bf16", "fp32"):
        model = AutoModelForSequenceClassification.from_pretrained(offline_minilm_dir(), num_labels=2).train()
        seconds = step_seconds(model, batch, lambda m, b: m(**b).loss, precision, steps)
        rows.append((f"MiniLM-L6 b32x32 {precision}", seconds))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="timed steps per row (median kept)")
    args = parser.parse_args()
    tags = machine_tags()
    print(f"machine.kind: {tags['machine.kind']}")
    print(f"scale.precision=auto trains in {resolve_precision('auto', 'cpu')} here (bf16 only with amx_bf16 or "
          "avx512_bf16 among the flags above)")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}\n")
    rows = resnet_rows(args.steps) + bert_rows(args.steps)
    width = max(len(label) for label, _ in rows) + 2
    print(f"{'training step':<{width}}{'ms':>9}")
    print("-" * (width + 9))
    for label, seconds in rows:
        print(f"{label:<{width}}{1000 * seconds:>9.1f}")
    times = dict(rows)
    resnet_ratio = times["ResNet-20 b256 bf16 channels_last"] / times["ResNet-20 b256 fp32 channels_last"]
    bert_ratio = times["MiniLM-L6 b32x32 bf16"] / times["MiniLM-L6 b32x32 fp32"]
    print(f"\nbf16 / fp32 step time: ResNet-20 {resnet_ratio:.2f}, MiniLM-L6 {bert_ratio:.2f} (below 1: bf16 pays off)")
    epoch_s = times["ResNet-20 b256 bf16 channels_last"] * -(-50_000 // 256)
    print(f"one cpu-scale ResNet-20 epoch (196 steps, bf16 channels_last): about {epoch_s:.0f} s of steps")


if __name__ == "__main__":
    main()
