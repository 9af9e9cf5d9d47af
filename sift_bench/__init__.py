"""sift_bench: a benchmark harness for online loss-based data selection (smart sifting)."""

import os
from pathlib import Path


def _avoid_the_avx2_onednn_hang() -> None:
    """On a CPU without AVX-512 (an AVX2-only AMD EPYC, Zen 3, family 25 model 1), oneDNN's AVX2 1x1-convolution
    backward-weights kernel spun forever, in a process that had trained other jobs first, on the proxy scorer's
    quarter-width ResNet (`+experiment=resnet_table scale=smoke`, its 18th job: tests/test_cli.py); with oneDNN's
    primitive cache off the same sweep finished. So on such a CPU the cache is off unless the user set it. Set before
    torch runs its first oneDNN primitive; the kinds with AVX-512 that time the tables keep their cache."""
    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        return
    if flags and "avx512f" not in flags.split():
        os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "0")


_avoid_the_avx2_onednn_hang()
