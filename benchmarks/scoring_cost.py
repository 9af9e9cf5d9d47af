"""What a scoring pass costs against a training step, per sample: the model's own no-grad forward (smart sifting,
Stale-SB) and the proxy scorer's pass (sifter=proxy: a smaller model's forward, backward and step), per task.

Run:  python benchmarks/scoring_cost.py [--task cifar10_resnet|sst2_bert|all] [--sizes 0.25 0.5] [overrides...]
      (about a minute per task on 2 CPU cores; on a GPU add scale.device=cuda scale.precision=bf16)

On the same batches of the cpu scale's training data, in one process, rounds interleaved (a machine drifts over
minutes): the median seconds per sample of a training step of the model, of its scoring forward (eval mode, no
grad, as `SiftingDataloader` scores) and of a `ProxyLoss` pass at each proxy size. Each is printed as a ratio to the
training step: the scoring cost ratio the report measures from runs (report.md, *At equal work*), which a row's
break-even scoring cost must beat for selection to pay at equal time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

import sift_bench.schema  # noqa: F401  (registers the typed configs the yaml files extend)
from sift_bench.machine import machine_tags
from sift_bench.sifting import ProxyLoss
from sift_bench.tasks import build_task
from sift_bench.loop_parts import autocast_factory, build_optimizer, proxy_backends
from sift_bench.validation import resolve_precision

CONF = Path(__file__).resolve().parents[1] / "conf"


def compose(task: str, extra: list[str]):
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = hydra_compose("config", overrides=[f"task={task}", "scale=cpu", "trainer.progress=false", *extra])
    resolve_precision(cfg)  # scale.precision=auto: bf16 where the CPU has native kernels, else fp32
    return cfg


def passes(cfg, sizes: list[float]) -> tuple[object, dict]:
    """The task's parts and {name: one pass over a batch}: the training step, the scoring forward, each proxy's."""
    device = torch.device(cfg.scale.device)
    torch.manual_seed(cfg.seed)
    parts = build_task(cfg, device)
    autocast = autocast_factory(device, cfg.scale.precision)
    optimizer = build_optimizer(parts.model, cfg.trainer.optimizer)
    proxies = {size: parts.proxy_model(size) for size in sizes}  # before training, as the harness builds them
    model = parts.model

    def train_step(batch):
        model.train()
        with autocast():
            losses = parts.per_sample_loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        losses.mean().backward()
        optimizer.step()

    def score(batch):
        model.eval()
        with torch.no_grad(), autocast():
            parts.per_sample_loss(model, batch).cpu()
        model.train()

    named = {"training step": train_step, "scoring forward": score}
    for size, proxy in proxies.items():
        proxy_loss = ProxyLoss(proxy, parts.per_sample_loss, build_optimizer(proxy, cfg.trainer.optimizer), autocast,
                               backends=proxy_backends(device))

        def proxy_pass(batch, proxy_loss=proxy_loss):
            with torch.no_grad():  # as the loader scores; the proxy turns gradients back on for itself
                proxy_loss.loss(model, None, batch).cpu()

        parameters = sum(p.numel() for p in proxy.parameters()) / sum(p.numel() for p in model.parameters())
        named[f"proxy {size:g} ({100 * parameters:.1f} % of the parameters)"] = proxy_pass
    return parts, named


def per_sample_seconds(parts, named: dict, n_batches: int, rounds: int) -> dict:
    batches = []
    for batch in parts.train_loader:
        batches.append(batch)
        if len(batches) == n_batches:
            break
    for fn in named.values():
        fn(batches[0])  # warm-up: first-call kernel and allocator costs
    times = {name: [] for name in named}
    for _ in range(rounds):
        for name, fn in named.items():
            for batch in batches:
                started = time.perf_counter()
                fn(batch)
                times[name].append((time.perf_counter() - started) / parts.batch_size_of(batch))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=["cifar10_resnet", "sst2_bert", "all"], default="all")
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.25, 0.5], help="proxy sizes (default 0.25 0.5)")
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. paths.data_dir=...")
    args = parser.parse_args()
    print(f"machine.kind: {machine_tags()['machine.kind']}")
    for task in (["cifar10_resnet", "sst2_bert"] if args.task == "all" else [args.task]):
        cfg = compose(task, args.overrides)
        parts, named = passes(cfg, args.sizes)
        seconds = per_sample_seconds(parts, named, args.batches, args.rounds)
        step = seconds["training step"]
        print(f"\n{task} ({parts.model_name}, batch {cfg.trainer.batch_size}, {cfg.scale.precision} on "
              f"{cfg.scale.device}): per sample, and as a ratio to the training step")
        for name, value in seconds.items():
            print(f"  {name:<45}{value * 1e3:>9.3f} ms {value / step:>7.3f}")


if __name__ == "__main__":
    main()
