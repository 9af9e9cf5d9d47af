"""Learning-rate schedules defined over training progress in samples seen, not optimizer steps.

Sifting makes an epoch take fewer optimizer steps; a schedule counted in steps would then
stop part-way (the learning rate never decays). Counted in samples seen it always completes.
"""

import math

SCHEDULES = ("constant", "linear", "onecycle", "cosine")


def lr_multiplier(progress: float, name: str, warmup_fraction: float, final_lr_fraction: float) -> float:
    """The learning rate as a fraction of its peak at `progress` in [0, 1] of planned samples.

    - constant: 1 throughout (after warmup);
    - linear / onecycle: linear warmup from 0 (linear) or from final_lr_fraction (onecycle) to the peak,
      then linear decay to final_lr_fraction at progress 1;
    - cosine: linear warmup, then half-cosine decay to final_lr_fraction.
    """
    if name not in SCHEDULES:
        raise ValueError(f"trainer.schedule.name must be one of {SCHEDULES}, got {name!r}")
    progress = min(max(progress, 0.0), 1.0)
    if warmup_fraction > 0 and progress < warmup_fraction:
        start = final_lr_fraction if name == "onecycle" else 0.0
        return start + (1.0 - start) * progress / warmup_fraction
    if name == "constant":
        return 1.0
    decay_progress = (progress - warmup_fraction) / max(1.0 - warmup_fraction, 1e-12)
    if name == "cosine":
        return final_lr_fraction + (1.0 - final_lr_fraction) * 0.5 * (1.0 + math.cos(math.pi * decay_progress))
    return 1.0 + (final_lr_fraction - 1.0) * decay_progress


class SampleSchedule:
    """Sets each param group's lr from the number of samples seen so far."""

    def __init__(self, optimizer, total_samples: int, name: str, warmup_fraction: float, final_lr_fraction: float):
        self.optimizer = optimizer
        self.total_samples = total_samples
        self.name = name
        self.warmup_fraction = warmup_fraction
        self.final_lr_fraction = final_lr_fraction
        self.peak_lrs = [group["lr"] for group in optimizer.param_groups]

    def step(self, samples_seen: int) -> float:
        multiplier = lr_multiplier(samples_seen / self.total_samples, self.name, self.warmup_fraction, self.final_lr_fraction)
        for group, peak in zip(self.optimizer.param_groups, self.peak_lrs):
            group["lr"] = peak * multiplier
        return multiplier
