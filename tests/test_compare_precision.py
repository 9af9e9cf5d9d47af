"""experiments/compare_precision.py: two report folders' runs side by side, paired by run name and seed."""

import subprocess
import sys

import pandas as pd

from conftest import ROOT

COLUMNS = ["run_id", "status", "params.task.name", "tags.mlflow.runName", "params.seed", "tags.machine.kind",
           "metrics.test_accuracy"]
AMX = "Intel(R) Xeon(R) Processor, 2 cores, family 6 model 167 amx_bf16"
ZEN5 = "AMD EPYC, 2 cores, family 26 model 2 avx512_bf16"
ZEN3 = "AMD EPYC, 2 cores, family 25 model 1 avx2"


def report_folder(folder, runs, excluded=()):
    folder.mkdir()
    pd.DataFrame(runs, columns=COLUMNS).to_csv(folder / "runs.csv", index=False)
    pd.DataFrame({"run_id": list(excluded)}).to_csv(folder / "excluded.csv", index=False)
    return folder


def compare(first, second, task="sst2_bert"):
    return subprocess.run([sys.executable, str(ROOT / "experiments" / "compare_precision.py"), str(first), str(second),
                           "--task", task], capture_output=True, text=True, timeout=120)


def test_runs_pair_by_name_a_seed_on_two_kinds_counts_once_and_excluded_runs_count_in_nothing(tmp_path):
    name = "sst2_bert cpu random keep=0.5 delay=10 seed={}"
    bf16 = report_folder(tmp_path / "bf16", [
        ("a", "FINISHED", "sst2_bert", name.format(0), 0, AMX, 85.0),
        ("b", "FINISHED", "sst2_bert", name.format(0), 0, ZEN5, 86.0),   # the same seed on another kind
        ("c", "FINISHED", "sst2_bert", name.format(1), 1, ZEN5, 84.0),
        ("d", "FINISHED", "sst2_bert", name.format(1), 1, ZEN5, 10.0),   # excluded by the report
        ("e", "FAILED", "sst2_bert", name.format(1), 1, ZEN5, 20.0),
        ("f", "FINISHED", "cifar10_resnet", name.format(0), 0, ZEN5, 50.0),
    ], excluded=["d"])
    fp32 = report_folder(tmp_path / "fp32", [
        ("g", "FINISHED", "sst2_bert", name.format(0), 0, ZEN3, 85.0),
        ("h", "FINISHED", "sst2_bert", name.format(1), 1, ZEN3, 85.0),
        ("i", "FINISHED", "sst2_bert", name.format(2), 2, ZEN3, 99.0),   # no partner: left out
    ])
    result = compare(bf16, fp32)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    seed0 = next(line for line in lines if line.startswith(name.format(0)))
    seed1 = next(line for line in lines if line.startswith(name.format(1)))
    assert seed0.split()[-1] == "-0.50"  # 85.0 against the mean of 85.0 and 86.0
    assert seed1.split()[-1] == "+1.00"  # 85.0 against 84.0: the excluded and the failed run count in nothing
    assert not any(line.startswith(name.format(2)) for line in lines)
    row = next(line for line in lines
               if line.startswith("sst2_bert cpu random keep=0.5 delay=10 ") and "seed=" not in line)
    assert row.split()[-4:] == ["2", "+0.25", "-0.50", "+1.00"]  # seeds, mean, lowest, highest
    assert "differs by 1.00 points on average" in result.stdout


def test_folders_without_a_common_run_say_so(tmp_path):
    first = report_folder(tmp_path / "one", [("a", "FINISHED", "sst2_bert", "x seed=0", 0, AMX, 85.0)])
    second = report_folder(tmp_path / "two", [("b", "FINISHED", "sst2_bert", "y seed=0", 0, ZEN3, 85.0)])
    result = compare(first, second)
    assert result.returncode != 0 and "no run of sst2_bert is in both" in result.stderr
