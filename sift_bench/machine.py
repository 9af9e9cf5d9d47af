"""The machine a run times on: which kind it is (`machine_kind`: runs compare in time only within a kind), how
much CPU the rest of the machine used while the run trained, whether it ran at the speed of the baseline its
time is compared with (a timing is only as clean as its machine), and which precision it runs natively
(`scale.precision: auto`).

The probes are portable: the CPU's name, family, model and flags come from py-cpuinfo, CPU times from psutil,
so no module reads /proc itself. Where a probe finds nothing (an unknown CPU, a platform without system CPU
times) it says so in what it returns ("unknown", NaN), never a guess."""

import functools
import logging
import os
import platform
import time
from collections.abc import Mapping

import cpuinfo
import psutil

log = logging.getLogger(__name__)

# psutil.cpu_times() fields in which a core is busy, as /proc/stat counts them on Linux (`guest` is inside `user`
# already; `idle` and `iowait` are a core waiting). macOS has the first three, Windows `user` and `system`
# (whose `interrupt` and `dpc` are inside `system` already).
BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")


def machine_busy_seconds() -> float | None:
    """CPU seconds spent busy by every core since boot (psutil), or None where the platform does not say."""
    try:
        times = psutil.cpu_times()
    except (OSError, psutil.Error, NotImplementedError):
        return None
    return sum(getattr(times, name) for name in BUSY_FIELDS if hasattr(times, name))


def _cpu_seconds(process: psutil.Process) -> float:
    """A process's own CPU seconds and those of the children it waited for (DataLoader workers that ended)."""
    times = process.cpu_times()
    return times.user + times.system + getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)


def own_tree_cpu_seconds() -> float:
    """CPU seconds used by this process, its live descendants and the descendants they waited for: the job's own
    work, whichever process did it. A descendant that ends moves into its parent's children_* times, so the sum
    only grows."""
    this = psutil.Process()
    total = _cpu_seconds(this)
    for child in this.children(recursive=True):
        try:
            total += _cpu_seconds(child)
        except psutil.Error:  # ended meanwhile (counted in its parent once waited for) or not ours to read
            pass
    return total


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
    """CPU seconds used by other processes between start() and stop(): machine busy time minus the job's own (this
    process and its descendants, see own_tree_cpu_seconds)."""

    def start(self) -> "OtherCpuMeter":
        self.machine_start = machine_busy_seconds()
        self.own_start = own_tree_cpu_seconds()
        self.wall_start = time.perf_counter()
        return self

    def own_cpu_s(self) -> float:
        """CPU seconds this process and its descendants used since start()."""
        return own_tree_cpu_seconds() - self.own_start

    def stop(self, sibling_cpu_s: float = 0.0) -> tuple[float, float]:
        """(other processes' CPU seconds, that per second of wall time); NaN where the platform gives no system-wide
        CPU times (said once in the log: the run is then tagged neither contended nor clean).

        sibling_cpu_s: CPU seconds of processes of the same job (the other DDP ranks on this machine), not counted.
        """
        machine_end = machine_busy_seconds()
        wall = time.perf_counter() - self.wall_start
        if self.machine_start is None or machine_end is None:
            _say_unmeasured()
            return float("nan"), float("nan")
        own = self.own_cpu_s() + sibling_cpu_s
        # The kernel counts in clock ticks, so tick jitter can make the difference slightly negative.
        other = max(machine_end - self.machine_start - own, 0.0)
        return other, other / max(wall, 1e-9)


@functools.cache
def _say_unmeasured() -> None:
    log.warning("other processes' CPU use is not measured on this platform (psutil.cpu_times() failed): runs get no "
                "other_cpu_fraction and no timing.contended tag, so a busy machine goes unnoticed")


@functools.lru_cache(maxsize=1)
def cpu_info() -> Mapping:
    """py-cpuinfo's description of this machine's CPU (`brand_raw`, `family`, `model`, `flags`), read once per process:
    it runs a Python subprocess (about a second), and the CPU does not change under a running job. Empty where
    py-cpuinfo finds nothing. On Linux its fields come from /proc/cpuinfo's first processor (the kernel's own flag
    names), with flags that CPUID or lscpu add under names of their own."""
    try:
        return cpuinfo.get_cpu_info()
    except Exception:  # it tries a dozen sources, any of which can fail on an unusual system
        return {}


def cpu_flags(info: Mapping | None = None) -> set[str]:
    """The CPU's flags in py-cpuinfo's description `info` (default: this machine's, see cpu_info); empty where it
    names none."""
    return set((cpu_info() if info is None else info).get("flags") or ())


def machine_tags() -> dict[str, str]:
    """What the run ran on, so a report can say it without being run on the same machine."""
    import torch  # the report imports this module (CONTENDED_FRACTION) and loads no torch; a job has it loaded

    cpu = cpu_info().get("brand_raw") or platform.processor() or platform.machine()
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


def cpu_identity(info: Mapping | None = None) -> str:
    """'family F model M' and the speed-relevant CPU flags (default: this machine's, see cpu_info); 'unknown' where
    nothing is known of the CPU. The format is the one the committed stores' `machine.kind` tags were written in
    from /proc/cpuinfo, so runs on one machine kind keep pairing with them."""
    info = cpu_info() if info is None else info
    if not any(info.get(key) not in (None, "", []) for key in ("family", "model", "flags")):
        return "unknown"
    flags = cpu_flags(info)
    return " ".join([f"family {_cpu_number(info.get('family'))} model {_cpu_number(info.get('model'))}",
                     *[flag for flag in SPEED_FLAGS if flag in flags]])


def _cpu_number(value) -> str:
    # py-cpuinfo says -1 for a field /proc/cpuinfo lacks (an ARM CPU has no `cpu family`): '?' as before.
    return "?" if value is None or value == "" or (isinstance(value, int) and value < 0) else str(value)


def machine_kind(cpu: str, cores: int | None, identity: str, gpu: str | None = None) -> str:
    """One string per kind of machine: runs compare in time only with runs of the same kind."""
    kind = f"{cpu}, {cores} cores, {identity}"
    return f"{kind}, GPU {gpu}" if gpu else kind


# ---------------------------------------------------------------- the precision a machine runs natively

# CPU flags with which oneDNN has bf16 kernels (AMX tiles: Xeon since Sapphire Rapids; AVX512-BF16: Cooper Lake,
# AMD Zen 4 and later). Without either, bf16 autocast converts every operand on the fly and is far slower than fp32.
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")
# What bf16 costs without them, measured with benchmarks/machine_speed.py on AVX2-only AMD EPYCs (Zen 2, Zen 3).
EMULATED_BF16_SLOWDOWN = ("12 to 27 times slower than fp32 (benchmarks/machine_speed.py on AVX2-only AMD EPYCs: "
                          "Zen 2, a ResNet-20 step 8356 ms against 679 ms in fp32, a MiniLM-L6 step 14772 ms "
                          "against 736 ms; Zen 3, 13170 ms against 1094 ms and 16812 ms against 632 ms)")


def has_native_bf16(device: str = "cpu", info: Mapping | None = None) -> bool:
    """Whether the device has bf16 kernels of its own: a CPU with one of NATIVE_BF16_FLAGS (`info`: py-cpuinfo's
    description, default this machine's), a CUDA device that torch says supports bf16 without emulation."""
    if str(device).startswith("cuda"):
        import torch  # as in machine_tags: the report loads no torch through this module

        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    flags = cpu_flags(info)
    return any(flag in flags for flag in NATIVE_BF16_FLAGS)


def resolve_precision(precision: str, device: str = "cpu", info: Mapping | None = None) -> str:
    """`auto`: bf16 where the device has native bf16 kernels, else fp32; any other value as it is."""
    if precision != "auto":
        return precision
    return "bf16" if has_native_bf16(device, info) else "fp32"


def cpu_description(info: Mapping | None = None) -> str:
    """The CPU as a person reads it: its name and identity ('AMD EPYC, family 23 model 49 avx2')."""
    info = cpu_info() if info is None else info
    return f"{info.get('brand_raw') or platform.processor() or platform.machine()}, {cpu_identity(info)}"


@functools.cache
def warn_emulated_bf16(cpu: str) -> None:
    """Says once per process that bf16 was asked for on a CPU (`cpu`, cpu_description) without native kernels."""
    log.warning("scale.precision=bf16 on a CPU without native bf16 kernels (%s: neither %s): training runs "
                "%s. scale.precision=auto (or fp32) trains in fp32 here", cpu, " nor ".join(NATIVE_BF16_FLAGS),
                EMULATED_BF16_SLOWDOWN)
