"""The machine kind a run is tagged with: what decides whether two runs' times may be compared."""

from sift_bench.machine import cpu_identity, machine_kind, machine_tags

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 207
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse avx2 avx512f avx512_vnni avx512_bf16 {extra}

processor\t: 1
cpu family\t: 6
model\t\t: 999
"""


def test_cpu_identity_reads_the_first_processor_and_the_flags_that_pick_kernels(tmp_path):
    plain, amx = tmp_path / "plain", tmp_path / "amx"
    plain.write_text(CPUINFO.format(extra=""))
    amx.write_text(CPUINFO.format(extra="amx_tile amx_bf16 amx_int8"))
    assert cpu_identity(str(plain)) == "family 6 model 207 avx512_bf16 avx512_vnni avx512f avx2"
    assert cpu_identity(str(amx)) == "family 6 model 207 amx_bf16 amx_int8 amx_tile avx512_bf16 avx512_vnni avx512f avx2"
    # Same model name, same cores: only the flags tell these two machines apart, so the kinds must differ.
    assert machine_kind("Intel(R) Xeon(R) Processor", 2, cpu_identity(str(plain))) != machine_kind(
        "Intel(R) Xeon(R) Processor", 2, cpu_identity(str(amx)))
    assert cpu_identity(str(tmp_path / "missing")) == "unknown"


def test_machine_kind_names_cpu_cores_and_gpu():
    assert machine_kind("CPU X", 16, "family 6 model 1", "NVIDIA H200") == "CPU X, 16 cores, family 6 model 1, GPU NVIDIA H200"
    tags = machine_tags()
    assert tags["machine.kind"].startswith(f"{tags['machine.cpu']}, {tags['machine.cores']} cores, ")
