"""The machine a run is tagged with and times on: its kind (what decides whether two runs' times may be compared), the
precision it runs natively (`scale.precision: auto`), and what else used its CPU meanwhile."""

import logging
import math
import subprocess
import sys
import time
import warnings

import pytest

from conftest import compose_config
from sift_bench import machine
from sift_bench.errors import ConfigError
from sift_bench.machine import cpu_identity, machine_kind, machine_tags
from sift_bench.validation import resolve_precision

# py-cpuinfo's description of three CPUs, as get_cpu_info() gives it: a Xeon with AMX, the same Xeon model without
# it (a virtual machine that hides the tiles), and an AVX2-only EPYC (Zen 2).
AMX_XEON = {"brand_raw": "Intel(R) Xeon(R) Processor", "family": 6, "model": 207,
            "flags": sorted("fpu sse avx2 avx512f avx512_vnni avx512_bf16 amx_tile amx_bf16 amx_int8 avx512vnni".split())}
PLAIN_XEON = {**AMX_XEON, "flags": sorted("fpu sse avx2 avx512f avx512_vnni avx512_bf16".split())}
ZEN2 = {"brand_raw": "AMD EPYC 7B12", "family": 23, "model": 49, "flags": sorted("fpu sse avx avx2 fma sha_ni".split())}


@pytest.fixture
def this_cpu(monkeypatch):
    """Makes this machine's CPU the one given (py-cpuinfo's description), for everything that asks sift_bench.machine."""
    def use(info: dict) -> None:
        monkeypatch.setattr(machine, "cpu_info", lambda: info)
        machine.warn_emulated_bf16.cache_clear()  # warned once per process: once per test here
    yield use
    machine.warn_emulated_bf16.cache_clear()


def test_cpu_identity_has_family_model_and_the_flags_that_pick_kernels_in_the_committed_format():
    # The committed stores' `machine.kind` tags were written from /proc/cpuinfo in this format; py-cpuinfo's extra
    # names for the same flags (avx512vnni from CPUID) stay out.
    assert cpu_identity(PLAIN_XEON) == "family 6 model 207 avx512_bf16 avx512_vnni avx512f avx2"
    assert cpu_identity(AMX_XEON) == "family 6 model 207 amx_bf16 amx_int8 amx_tile avx512_bf16 avx512_vnni avx512f avx2"
    # Same model name, same cores: only the flags tell these two machines apart, so the kinds must differ.
    assert machine_kind("Intel(R) Xeon(R) Processor", 2, cpu_identity(PLAIN_XEON)) != machine_kind(
        "Intel(R) Xeon(R) Processor", 2, cpu_identity(AMX_XEON))
    assert cpu_identity({}) == "unknown"  # py-cpuinfo found nothing
    # An ARM CPU has no `cpu family` in /proc/cpuinfo: py-cpuinfo says -1, the tag says '?' as it did.
    assert cpu_identity({"brand_raw": "Neoverse", "family": -1, "model": -1, "flags": ["asimd"]}) == "family ? model ?"


def test_the_kind_of_the_table_machines_keeps_its_tag():
    # The exact strings the committed stores pair times by (results/*/mlflow.db, README's AMX Xeon, the EPYCs).
    amx = {**AMX_XEON, "model": 167, "flags": ["amx_bf16", "amx_int8", "amx_tile", "avx2", "avx512_bf16",
                                               "avx512_vnni", "avx512f"]}
    assert machine_kind(amx["brand_raw"], 2, cpu_identity(amx)) == (
        "Intel(R) Xeon(R) Processor, 2 cores, family 6 model 167 amx_bf16 amx_int8 amx_tile avx512_bf16 avx512_vnni "
        "avx512f avx2")
    epyc = {"brand_raw": "AMD EPYC", "family": 26, "model": 2, "flags": ["avx2", "avx512_bf16", "avx512_vnni", "avx512f"]}
    assert machine_kind(epyc["brand_raw"], 2, cpu_identity(epyc)) == (
        "AMD EPYC, 2 cores, family 26 model 2 avx512_bf16 avx512_vnni avx512f avx2")
    zen3 = {"brand_raw": "AMD EPYC", "family": 25, "model": 1, "flags": ["avx", "avx2", "fma", "sse4_2"]}  # cpu_fp32
    assert machine_kind(zen3["brand_raw"], 2, cpu_identity(zen3)) == "AMD EPYC, 2 cores, family 25 model 1 avx2"
    zen4 = {**epyc, "family": 25, "model": 17}  # cpu_long, twentieth sitting: Zen 4, the same flags as Zen 5's
    assert machine_kind(zen4["brand_raw"], 2, cpu_identity(zen4)) == (
        "AMD EPYC, 2 cores, family 25 model 17 avx512_bf16 avx512_vnni avx512f avx2")


def test_machine_kind_names_cpu_cores_and_gpu():
    assert machine_kind("CPU X", 16, "family 6 model 1", "NVIDIA H200") == "CPU X, 16 cores, family 6 model 1, GPU NVIDIA H200"
    tags = machine_tags()
    assert tags["machine.kind"].startswith(f"{tags['machine.cpu']}, {tags['machine.cores']} cores, ")
    assert tags["machine.kind"] == machine_tags()["machine.kind"]  # py-cpuinfo asked once, the answer kept


def test_auto_precision_is_bf16_only_where_the_cpu_has_native_bf16_kernels():
    assert machine.resolve_precision("auto", "cpu", AMX_XEON) == "bf16"
    assert machine.resolve_precision("auto", "cpu", PLAIN_XEON) == "bf16"  # avx512_bf16 alone is enough
    assert machine.resolve_precision("auto", "cpu", ZEN2) == "fp32"
    assert machine.resolve_precision("auto", "cpu", {}) == "fp32"  # nothing known: the safe choice
    for explicit in ("fp32", "bf16", "fp16"):
        assert machine.resolve_precision(explicit, "cpu", ZEN2) == explicit


def test_the_job_logs_the_resolved_precision_and_never_auto(this_cpu):
    cfg = compose_config(["+experiment=bert", "scale=cpu"])
    assert cfg.scale.precision == "auto"  # conf/scale/cpu.yaml's default
    this_cpu(AMX_XEON)
    assert resolve_precision(cfg) == "bf16" and cfg.scale.precision == "bf16"
    cfg = compose_config(["+experiment=bert", "scale=cpu"])
    this_cpu(ZEN2)
    assert resolve_precision(cfg) == "fp32" and cfg.scale.precision == "fp32"
    smoke = compose_config(["+experiment=bert", "scale=smoke"])
    assert resolve_precision(smoke) == "fp32"


def test_on_this_machine_auto_is_bf16_exactly_where_the_kernel_lists_native_bf16():
    # The real probe (py-cpuinfo), checked against what the Linux kernel itself lists; the test may read /proc,
    # sift_bench may not.
    from pathlib import Path

    # CI and the tables run on Linux: a machine without the kernel's flag list fails here rather than skip the check.
    cpuinfo = Path("/proc/cpuinfo")
    assert cpuinfo.exists(), f"no /proc/cpuinfo on {sys.platform}: the probe cannot be checked against the kernel"
    flags = next(line.split(":", 1)[1].split() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("flags"))
    native = "amx_bf16" in flags or "avx512_bf16" in flags
    cfg = compose_config(["+experiment=bert", "scale=cpu"])
    assert resolve_precision(cfg) == ("bf16" if native else "fp32")


def test_bf16_forced_on_a_cpu_without_native_kernels_warns_once_with_the_slowdown(this_cpu, caplog):
    this_cpu(ZEN2)
    with caplog.at_level(logging.WARNING, logger="sift_bench.machine"):
        for _ in range(2):
            assert resolve_precision(compose_config(["+experiment=bert", "scale=cpu", "scale.precision=bf16"])) == "bf16"
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "AMD EPYC 7B12" in warnings[0] and "12 to 27 times slower than fp32" in warnings[0]
    assert "8356 ms" in warnings[0] and "14772 ms" in warnings[0]
    caplog.clear()
    this_cpu(AMX_XEON)
    with caplog.at_level(logging.WARNING, logger="sift_bench.machine"):
        resolve_precision(compose_config(["+experiment=bert", "scale=cpu", "scale.precision=bf16"]))
    assert not caplog.records  # native kernels: nothing to say


@pytest.mark.parametrize("table", ["bert_table", "resnet_table", "bert_table_long", "resnet_table_long"])
def test_a_table_sweep_refuses_auto_on_a_cpu_without_native_bf16(table, this_cpu):
    this_cpu(ZEN2)
    with pytest.raises(ConfigError) as refused:
        resolve_precision(compose_config([f"+experiment={table}", "+table_row=baseline", "scale=cpu"]))
    message = str(refused.value)
    assert "\n" not in message
    assert "scale.precision=auto" in message and "AMD EPYC 7B12" in message and "scale.precision=fp32" in message
    # What it says to do is allowed: fp32 explicitly (a store of its own), or the smoke scale's fp32.
    assert resolve_precision(compose_config([f"+experiment={table}", "+table_row=baseline", "scale=cpu",
                                             "scale.precision=fp32"])) == "fp32"
    assert resolve_precision(compose_config([f"+experiment={table}", "+table_row=baseline", "scale=smoke"])) == "fp32"
    this_cpu(AMX_XEON)
    assert resolve_precision(compose_config([f"+experiment={table}", "+table_row=baseline", "scale=cpu"])) == "bf16"


@pytest.mark.parametrize("cpu, onednn", [(ZEN2, False), (PLAIN_XEON, True), (AMX_XEON, True),
                                         ({"brand_raw": "Neoverse", "family": -1, "model": -1, "flags": ["asimd"]}, True),
                                         ({}, True)],
                         ids=["avx2_only", "avx512", "amx", "arm", "no_flags_found"])
def test_the_proxy_step_leaves_onednn_out_exactly_on_a_cpu_without_avx512(cpu, onednn, this_cpu):
    # oneDNN's AVX2 convolution backward hung on the proxy's step on a Zen 3 (sift_bench.loop_parts.proxy_backends);
    # the kinds that time the tables (AVX-512) must keep oneDNN, or their proxy timings would change.
    import torch

    from sift_bench.loop_parts import scoring_loss
    from sift_bench.sifting import LossConfig, ProxySiftConfig, SiftingBaseConfig
    from sift_bench.tasks import TaskParts

    this_cpu(cpu)
    onednn_in_step = []

    def per_sample_loss(model, batch):
        onednn_in_step.append(torch.backends.mkldnn.enabled)
        return torch.nn.functional.cross_entropy(model(batch[0]), batch[1], reduction="none")

    parts = TaskParts(model=torch.nn.Linear(4, 3), train_loader=[], eval_loaders={}, per_sample_loss=per_sample_loss,
                      count_correct=lambda model, batch: 0, batch_size_of=len, work_of=len, num_train_samples=16,
                      model_name="linear", dataset_name="synthetic", proxy_model=lambda size: torch.nn.Linear(4, 3))
    policy = ProxySiftConfig(beta_value=1, loss_history_length=50,
                             loss_based_sift_config=LossConfig(sift_config=SiftingBaseConfig(sift_delay=0)))
    optimizer = compose_config(["+experiment=resnet", "scale=smoke"]).trainer.optimizer
    proxy_loss = scoring_loss(parts, policy, autocast=lambda: torch.autocast("cpu", enabled=False),
                              optimizer_cfg=optimizer)
    with torch.no_grad(), warnings.catch_warnings():  # as the loader scores; silently: it runs every step
        warnings.simplefilter("error")
        losses = proxy_loss.loss(parts.model, None, (torch.randn(16, 4), torch.randint(0, 3, (16,))))
    assert losses.shape == (16,) and proxy_loss.steps == 1
    assert onednn_in_step == [onednn]
    assert torch.backends.mkldnn.enabled  # the rest of the run keeps oneDNN


def test_other_cpu_meter_counts_busy_seconds_outside_this_process_tree():
    busy = machine.machine_busy_seconds()
    assert busy is not None and busy > 0
    meter = machine.OtherCpuMeter().start()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # this process's own work: not "other"
        pass
    assert meter.own_cpu_s() >= 0.25
    other_s, fraction = meter.stop()
    assert not math.isnan(other_s) and other_s >= 0 and fraction >= 0
    # The tree includes the children this process waited for: a child's CPU is the job's own.
    start = machine.own_tree_cpu_seconds()
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.3\n"
                    "while time.process_time() < end:\n    pass"], check=True)
    assert machine.own_tree_cpu_seconds() - start >= 0.25
