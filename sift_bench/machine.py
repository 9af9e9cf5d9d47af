"""The machine a run times on: which kind it is (`machine_kind`: runs compare in time only within a kind), how
much CPU the rest of the machine used while the run trained, and whether it ran at the speed of the baseline its
time is compared with (a timing is only as clean as its machine)."""

import os
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_busy_seconds() -> float | None:
    """CPU seconds spent busy by every core since boot (Linux /proc/stat), or None where unavailable."""
    try:
        with open("/proc/stat") as handle:
            fields = [int(value) for value in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


# Other processes' CPU per second of a run's wall time, in cores, above which the run's time is suspect: the
# report flags such runs, uses them as a time reference only when no other baseline is clean, and the table
# sweeps (tracking.rerun_contended) train them again; the job's summary and its `timing.contended` tag say so too.
CONTENDED_FRACTION = 0.05


def is_contended(other_cpu_fraction: float) -> bool:
    """Whether other processes used more than CONTENDED_FRACTION of a core while the run trained (False unmeasured)."""
    return other_cpu_fraction > CONTENDED_FRACTION


# A run's evaluations are the same work in every run of a table (the same held-out sets, evaluated at the same
# fractions of the candidates seen, whatever the sifter or seed), so the time they took says how fast the machine
# ran for that run. A host can slow a virtual machine with no process in it busy (a noisy neighbour, a throttled
# CPU), which other_cpu_fraction cannot see. In the stores before 2026-12-05 07:00 every run evaluated within 0.90 to
# 1.16 times the time of the baseline its savings divide by, except nine runs of two sittings at 1.26 to 1.57, with other
# processes at or under 0.03 of a core. A run outside [1 / PACE_MISMATCH, PACE_MISMATCH] of its reference baseline
# was timed at another machine speed than the time it is divided by: its savings are not a measurement of the
# sifter, and the table sweeps (tracking.rerun_contended) train it again. A baseline outside that range of the median
# of its kind's baselines is, by the same measure, timed on a slowed host: no run's time reference while one in pace
# exists (report.timing.baselines_off_pace).
PACE_MISMATCH = 1.2
# Evaluations that took less than this in all are timer noise, not a measure of the machine (the smoke scale's).
PACE_PROBE_MIN_S = 5.0


def pace_mismatch(eval_time_s: float, reference_eval_time_s: float) -> float | None:
    """The run's evaluation time over its reference baseline's when that ratio lies outside [1 / PACE_MISMATCH,
    PACE_MISMATCH]: the machine ran at another speed for the run than for its reference. None when it lies
    within, or when either evaluation was unmeasured or shorter than PACE_PROBE_MIN_S."""
    if not (eval_time_s >= PACE_PROBE_MIN_S and reference_eval_time_s >= PACE_PROBE_MIN_S):  # NaN fails too
        return None
    ratio = eval_time_s / reference_eval_time_s
    return ratio if not 1 / PACE_MISMATCH <= ratio <= PACE_MISMATCH else None


class OtherCpuMeter:
    """CPU seconds used by other processes between start() and stop(): machine busy time minus our own."""

    def start(self) -> "OtherCpuMeter":
        self.machine_start = machine_busy_seconds()
        self.own_start = time.process_time()
        self.wall_start = time.perf_counter()
        return self

    def own_cpu_s(self) -> float:
        """CPU seconds this process used since start()."""
        return time.process_time() - self.own_start

    def stop(self, sibling_cpu_s: float = 0.0) -> tuple[float, float]:
        """(other processes' CPU seconds, that per second of wall time); NaN where /proc/stat is missing.

        sibling_cpu_s: CPU seconds of processes of the same job (the other DDP ranks on this machine), not counted.
        """
        machine_end = machine_busy_seconds()
        wall = time.perf_counter() - self.wall_start
        if self.machine_start is None or machine_end is None:
            return float("nan"), float("nan")
        own = self.own_cpu_s() + sibling_cpu_s
        # /proc/stat counts in clock ticks, so tick jitter can make the difference slightly negative.
        other = max(machine_end - self.machine_start - own, 0.0)
        return other, other / max(wall, 1e-9)


def machine_tags() -> dict[str, str]:
    """What the run ran on, so a report can say it without being run on the same machine."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    tags = {"machine.cpu": cpu, "machine.cores": str(os.cpu_count()), "torch_version": torch.__version__}
    if torch.cuda.is_available():
        tags["machine.gpu"] = torch.cuda.get_device_name()
    tags["machine.kind"] = machine_kind(cpu, os.cpu_count(), cpu_identity(), tags.get("machine.gpu"))
    return tags


# CPU features that change which kernels oneDNN runs, and so the speed of a bf16 step: two virtual machines
# both named "Intel(R) Xeon(R) Processor" trained the same ResNet-20 at 41.6 s and 128 s per epoch, with and
# without AMX.
SPEED_FLAGS = ("amx_bf16", "amx_fp16", "amx_int8", "amx_tile", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx512f",
               "avx2")


def cpu_identity(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """'family F model M' and the speed-relevant CPU flags, from the first processor of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo_path) as handle:
            for line in handle:
                if not line.strip():
                    break  # the first processor's block is enough: the cores of one machine are alike
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        return "unknown"
    flags = set(fields.get("flags", "").split())
    return " ".join([f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}",
                     *[flag for flag in SPEED_FLAGS if flag in flags]])


def machine_kind(cpu: str, cores: int | None, identity: str, gpu: str | None = None) -> str:
    """One string per kind of machine: runs compare in time only with runs of the same kind."""
    kind = f"{cpu}, {cores} cores, {identity}"
    return f"{kind}, GPU {gpu}" if gpu else kind
