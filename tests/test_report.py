"""`python -m sift_bench.report`: the table math by hand, and the CLI on small sqlite stores built here."""

import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from conftest import ROOT
from sift_bench import report
from sift_bench.report import markdown
from sift_bench.report.__main__ import main

SST2 = {"task": "sst2_bert", "model": "all-MiniLM-L6-v2", "dataset": "sst2"}
CIFAR = {"task": "cifar10_resnet", "model": "resnet20", "dataset": "cifar10"}
RP3 = {"sifter": "relative_probabilistic", "beta_value": "3", "loss_history_length": "500", "sift_delay": "10"}
RP1 = {**RP3, "beta_value": "1"}
KEEP25 = {"sifter": "random", "keep_fraction": "0.25", "sift_delay": "10"}
KEEP50 = {**KEEP25, "keep_fraction": "0.5"}
NONE = {"sifter": "none"}
SIFTER_KEYS = ("beta_value", "loss_history_length", "sift_delay", "keep_fraction", "prune_ratio")

# sst2 by hand: (sifter, seed, train_time_s, cost_usd, test_accuracy, pct_accepted); validation = test unless given.
SST2_RUNS = [
    (NONE, 0, 100.0, 0.100, 80.0, 100.0), (NONE, 1, 110.0, 0.110, 82.0, 100.0),
    (RP3, 0, 70.0, 0.070, 81.0, 26.0), (RP3, 1, 77.0, 0.077, 81.4, 28.0),
    (RP1, 0, 90.0, 0.090, 79.5, 50.0), (RP1, 1, 99.0, 0.099, 80.5, 52.0),
    (KEEP25, 0, 60.0, 0.060, 78.0, 25.0), (KEEP25, 1, 66.0, 0.066, 79.0, 25.0),
    (KEEP50, 0, 80.0, 0.080, 80.0, 50.0), (KEEP50, 1, 88.0, 0.088, 80.5, 50.0),
]


def frame_row(task: dict, sifter: dict, seed, time_s, cost, accuracy, accepted, *, scale="cpu", status="FINISHED",
              run_id=None, val=None) -> dict:
    """One run as `mlflow.search_runs` gives it: tags.*, params.* (strings), metrics.* (last values). Each seed
    starts at its own second, so a run's nearest baseline in time is the baseline of its seed."""
    row = {"run_id": run_id or f"{task['task']}-{sifter['sifter']}-{'-'.join(sifter.values())}-{seed}",
           "status": status, "start_time": f"2026-01-01 00:00:{seed:02d}+00:00",
           "tags.task": task["task"], "tags.model": task["model"], "tags.dataset": task["dataset"],
           "tags.sifter": sifter["sifter"], "tags.scale": scale, "tags.seed": str(seed),
           "params.sifter.name": sifter["sifter"], "params.seed": str(seed),
           "metrics.train_time_s": time_s, "metrics.cost_usd": cost, "metrics.test_accuracy": accuracy,
           "metrics.val_accuracy": accuracy if val is None else val, "metrics.pct_accepted": accepted}
    row.update({f"params.sifter.{key}": value for key, value in sifter.items() if key != "sifter"})
    return row


def runs_frame(rows: list[dict]) -> pd.DataFrame:
    return report.normalise(pd.DataFrame(rows))


def sst2_frame(extra: list[dict] = ()) -> pd.DataFrame:
    return runs_frame([frame_row(SST2, *run) for run in SST2_RUNS] + list(extra))


def row_of(table: pd.DataFrame, task: str, sifter: dict) -> pd.Series:
    match = (table["task"] == task) & (table["sifter"] == sifter["sifter"])
    for key in SIFTER_KEYS:
        if key in table.columns:
            wanted = sifter.get(key)
            match &= table[key].isna() if wanted is None else table[key] == wanted
    assert match.sum() == 1, (task, sifter)
    return table[match].iloc[0]


# ---------------------------------------------------------------- pure functions, values by hand

def test_savings_and_spread_over_seeds_by_hand():
    table = report.build_table(sst2_frame())
    assert len(table) == 5
    assert list(table["sifter"]) == ["none", "relative_probabilistic", "relative_probabilistic", "random", "random"]
    base = row_of(table, "sst2_bert", NONE)
    assert base["n_seeds"] == 2 and base["seeds"] == "0 1"
    assert base["train_time_s"] == pytest.approx(105.0) and base["test_accuracy"] == pytest.approx(81.0)
    assert base["test_accuracy_std"] == pytest.approx(math.sqrt(2))
    assert base["pct_time_savings"] == pytest.approx(0.0) and base["accuracy_delta"] == pytest.approx(0.0)
    assert pd.isna(base["beta_value"]) and pd.isna(base["keep_fraction"])

    sifted = row_of(table, "sst2_bert", RP3)
    assert sifted["model"] == "all-MiniLM-L6-v2" and sifted["dataset"] == "sst2" and sifted["beta_value"] == "3"
    assert sifted["train_time_s"] == pytest.approx(73.5) and sifted["train_time_std"] == pytest.approx(math.sqrt(24.5))
    # Each seed against the baseline of its own time (100 s, 110 s): 30 % both.
    assert sifted["pct_time_savings"] == pytest.approx(100 * (1 - 70 / 100)) and sifted["pct_time_savings_std"] < 1e-9
    assert sifted["pct_cost_savings"] == pytest.approx(30.0)
    assert sifted["pct_accepted"] == pytest.approx(27.0) and sifted["pct_accepted_std"] == pytest.approx(math.sqrt(2))
    assert sifted["test_accuracy"] == pytest.approx(81.2) and sifted["test_accuracy_std"] == pytest.approx(math.sqrt(0.08))
    assert sifted["val_accuracy"] == pytest.approx(81.2) and sifted["val_accuracy_delta"] == pytest.approx(0.2)
    assert sifted["accuracy_baseline"] == pytest.approx(81.0) and sifted["accuracy_delta"] == pytest.approx(0.2)
    assert sifted["config"] == "relative_probabilistic beta_value=3"  # only the param that differs is named

    assert row_of(table, "sst2_bert", KEEP25)["pct_time_savings"] == pytest.approx(40.0)
    assert row_of(table, "sst2_bert", KEEP50)["config"] == "random keep_fraction=0.5"
    for name in ("task", "model", "dataset", "sifter", "beta_value", "loss_history_length", "sift_delay",
                 "keep_fraction", "n_seeds", "pct_accepted", "pct_time_savings", "pct_cost_savings", "test_accuracy",
                 "test_accuracy_std", "val_accuracy", "val_accuracy_std", "accuracy_baseline", "accuracy_delta",
                 "val_accuracy_delta", "time_to_target_s", "train_time_s", "train_time_std", "pct_accepted_std",
                 "seeds", "frontier_accuracy", "accuracy_vs_frontier", "accuracy_vs_frontier_std",
                 "verdict_vs_frontier", "frontier_savings", "extra_savings", "val_frontier_accuracy",
                 "val_accuracy_vs_frontier", "val_verdict_vs_frontier", "val_extra_savings", "accuracy_vs_frontier_lo",
                 "accuracy_vs_frontier_hi", "val_accuracy_vs_frontier_lo", "val_accuracy_vs_frontier_hi",
                 "extra_savings_lo", "extra_savings_hi", "val_extra_savings_lo", "val_extra_savings_hi",
                 "bootstrap_seeds", "val_bootstrap_seeds"):
        assert name in table.columns, name
    assert "accuracy" not in table.columns and "eval_accuracy" not in table.columns
    assert not [name for name in table.columns if name.endswith("_by_seed")]  # per-seed values stay in memory


def test_a_new_sifter_with_new_params_needs_no_report_change():
    prune3 = {"sifter": "infobatch", "prune_ratio": "0.3"}
    prune5 = {"sifter": "infobatch", "prune_ratio": "0.5"}
    table = report.build_table(sst2_frame([frame_row(SST2, prune3, 0, 84.0, 0.084, 80.0, 70.0),
                                           frame_row(SST2, prune5, 0, 63.0, 0.063, 79.0, 50.0)]))
    assert "prune_ratio" in table.columns and len(table) == 7
    assert row_of(table, "sst2_bert", prune5)["pct_time_savings"] == pytest.approx(37.0)  # seed 0: 63 s of 100
    assert row_of(table, "sst2_bert", prune3)["config"] == "infobatch prune_ratio=0.3"
    assert report.is_sifted(table).sum() == 4  # infobatch counts as sifting, not as a control


def test_time_to_target_is_averaged_over_the_seeds_that_reached_it():
    rows = [frame_row(SST2, NONE, seed, 100.0, 0.1, 80.0, 100.0) for seed in (0, 1, 2)]
    for row, reached in zip(rows, (30.0, 50.0, math.nan)):
        row["metrics.time_to_target_s"] = reached
    base = report.build_table(runs_frame(rows)).iloc[0]
    assert base["time_to_target_s"] == pytest.approx(40.0) and base["n_reached_target"] == 2
    assert base["seeds"] == "0 1 2"


def test_each_sifted_config_is_set_against_the_control_interpolated_at_its_pct_accepted():
    pairs = report.pair_controls(report.build_table(sst2_frame())).set_index("config")
    # beta=3 at 27 % accepted lies between the controls at 25 % (78.5, std sqrt 0.5) and 50 % (80.25, sqrt 0.125).
    beta3 = pairs.loc["relative_probabilistic beta_value=3"]
    weight = (27 - 25) / (50 - 25)
    control = 78.5 + weight * (80.25 - 78.5)
    control_std = math.sqrt(0.5) + weight * (math.sqrt(0.125) - math.sqrt(0.5))
    assert beta3["control"] == "random keep_fraction=0.25 to random keep_fraction=0.5"
    assert beta3["nearest_control"] == "random keep_fraction=0.25"
    assert beta3["control_accuracy"] == pytest.approx(control)
    assert beta3["control_accuracy_std"] == pytest.approx(control_std)
    assert beta3["accuracy_difference"] == pytest.approx(81.2 - control)
    assert beta3["spread"] == pytest.approx(control_std)  # larger than beta=3's own sqrt 0.08
    assert beta3["verdict"] == "beat the control"
    # beta=1 at 51 %: between the control at 50 % (80.25) and the baseline at 100 % (81.0).
    beta1 = pairs.loc["relative_probabilistic beta_value=1"]
    assert beta1["control"] == "random keep_fraction=0.5 to baseline"
    assert beta1["control_accuracy"] == pytest.approx(80.25 + (51 - 50) / 50 * (81.0 - 80.25))
    assert beta1["verdict"] == "no clear difference (within the spread)"


def test_a_control_far_off_in_pct_accepted_gives_no_verdict():
    # 10 % accepted is below the lowest control (25 %): no curve there, so no win however large the gap.
    frame = sst2_frame([frame_row(SST2, {**RP3, "beta_value": "9"}, seed, 30.0, 0.03, 79.0, 10.0) for seed in (0, 1)])
    pair = report.pair_controls(report.build_table(frame)).set_index("config").loc["relative_probabilistic beta_value=9"]
    assert pair["verdict"] == "outside range" and pd.isna(pair["control_accuracy"])


def test_a_control_between_two_points_and_one_seed_cannot_tell():
    keep29 = {**KEEP25, "keep_fraction": "0.29"}
    frame = runs_frame([frame_row(SST2, NONE, 0, 100.0, 0.1, 80.0, 100.0),
                        frame_row(SST2, RP3, 0, 70.0, 0.07, 81.0, 27.0),
                        frame_row(SST2, keep29, 0, 70.0, 0.07, 70.0, 29.0),
                        frame_row(SST2, KEEP25, 0, 70.0, 0.07, 75.0, 25.0)])
    pair = report.pair_controls(report.build_table(frame)).iloc[0]
    assert pair["control_accuracy"] == pytest.approx((75.0 + 70.0) / 2)
    assert pair["verdict"] == "cannot tell: needs at least 2 seeds on each side"


@pytest.mark.parametrize("accuracy,std,control,control_std,expected", [
    (82.0, 0.5, 80.0, 1.0, "beat the control"),
    (80.9, 0.5, 80.0, 1.0, "no clear difference (within the spread)"),
    (78.0, 1.5, 80.0, 0.2, "lost to the control"),
    (math.nan, 0.5, 80.0, 1.0, "cannot tell: accuracy missing"),
])
def test_beat_the_control_rule(accuracy, std, control, control_std, expected):
    assert report.verdict(accuracy, std, control, control_std) == expected


def test_headline_is_the_most_time_saved_within_half_a_point():
    lines = report.headline(report.build_table(sst2_frame())).set_index("task")
    # random 0.25 saves 40 % but is 2.5 points down; beta=3 saves 30 % at +0.2.
    assert lines.loc["sst2_bert", "config"] == "relative_probabilistic beta_value=3"
    assert lines.loc["sst2_bert", "pct_time_savings"] == pytest.approx(30.0)
    assert lines.loc["sst2_bert", "statement"].startswith("30.0 % time savings with relative_probabilistic")
    assert lines.loc["sst2_bert", "test_accuracy"] == pytest.approx(81.2)


def test_headline_edges_exactly_half_a_point_counts_and_none_qualifies():
    base = [frame_row(SST2, NONE, 0, 100.0, 0.1, 80.0, 100.0)]
    half = runs_frame(base + [frame_row(SST2, RP3, 0, 50.0, 0.05, 79.5, 25.0),
                              frame_row(SST2, RP1, 0, 30.0, 0.03, 79.4, 50.0)])
    assert report.headline(report.build_table(half)).iloc[0]["pct_time_savings"] == pytest.approx(50.0)
    worse = runs_frame(base + [frame_row(SST2, RP3, 0, 50.0, 0.05, 79.0, 25.0)])
    line = report.headline(report.build_table(worse)).iloc[0]
    assert pd.isna(line["config"]) and line["statement"].startswith("none")


def test_headline_per_selection_rule_gives_each_sifter_its_own_best():
    lines = report.headline(report.build_table(sst2_frame()), per_sifter=True).set_index(["task", "sifter"])
    assert sorted(lines.index) == [("sst2_bert", "random"), ("sst2_bert", "relative_probabilistic")]
    assert lines.loc[("sst2_bert", "relative_probabilistic"), "pct_time_savings"] == pytest.approx(30.0)
    # random 0.25 is 2.5 points down, random 0.5 saves 20 % at -0.75: neither is within half a point.
    random_line = lines.loc[("sst2_bert", "random")]
    assert pd.isna(random_line["config"]) and random_line["statement"].startswith("none")


def test_a_task_without_baseline_has_empty_savings_and_says_so():
    table = report.build_table(sst2_frame([frame_row(CIFAR, RP3, 0, 50.0, 0.05, 88.0, 25.0)]))
    cifar = row_of(table, "cifar10_resnet", RP3)
    assert pd.isna(cifar["pct_time_savings"]) and pd.isna(cifar["pct_cost_savings"])
    assert pd.isna(cifar["accuracy_baseline"]) and pd.isna(cifar["accuracy_delta"])
    assert row_of(table, "sst2_bert", RP3)["pct_time_savings"] == pytest.approx(30.0)  # the other task is unharmed
    assert report.tasks_without_baseline(table) == ["cifar10_resnet"]
    lines = report.headline(table).set_index("task")
    assert lines.loc["cifar10_resnet", "statement"].startswith("no baseline")
    pairs = report.pair_controls(table).set_index("task")
    assert pairs.loc["cifar10_resnet", "verdict"] == "no random control for this task"


def test_a_missing_metric_is_nan_not_a_crash():
    rows = [frame_row(SST2, *run) for run in SST2_RUNS]
    del rows[0]["metrics.cost_usd"]
    frame = runs_frame(rows).drop(columns=["metrics.pct_accepted"])  # no run logged it at all
    table = report.build_table(frame)
    base = row_of(table, "sst2_bert", NONE)
    assert base["cost_usd"] == pytest.approx(0.110)  # the mean of the runs that have it
    assert table["pct_accepted"].isna().all()
    assert report.missing_metrics(frame)["sst2_bert-none-none-0"] == ["cost_usd", "pct_accepted"]
    assert report.pair_controls(table)["verdict"].eq("cannot tell: % accepted missing").all()


def test_split_keeps_finished_runs_of_the_scale_once():
    extra = [frame_row(SST2, RP3, 2, 1.0, 0.0, 1.0, 1.0, status="FAILED", run_id="failed"),
             frame_row(SST2, RP3, 3, 1.0, 0.0, 1.0, 1.0, status="RUNNING", run_id="running"),
             frame_row(SST2, RP3, 0, 1.0, 0.0, 1.0, 1.0, scale="gpu", run_id="gpu"),
             {"run_id": "parent", "status": "FINISHED", "start_time": "2026-01-01 00:00:00+00:00",
              "tags.run_kind": "sweep", "tags.scale": "cpu"}]
    rows = [frame_row(SST2, *run) for run in SST2_RUNS] + extra
    rows[2]["tags.config_hash"] = "same"  # beta=3, seed 0
    rows.append({**rows[2], "run_id": "rerun", "start_time": "2026-01-02 00:00:00+00:00",
                 "metrics.train_time_s": 120.0})
    used, excluded = report.split_runs(runs_frame(rows), "cpu")
    assert len(used) == 10 and "rerun" in set(used["run_id"])
    reasons = excluded.set_index("run_id")["reason"]
    assert reasons["failed"] == "status FAILED" and reasons["running"] == "status RUNNING"
    assert reasons["gpu"] == "scale gpu" and reasons["parent"] == "sweep parent"
    assert reasons[rows[2]["run_id"]] == "rerun: same config_hash as rerun"
    assert row_of(report.build_table(used), "sst2_bert", RP3)["train_time_s"] == pytest.approx((120.0 + 77.0) / 2)


AMX = "Intel(R) Xeon(R) Processor, 2 cores, family 6 model 207 amx_bf16 amx_tile avx512_bf16 avx512f"
NO_AMX = "Intel(R) Xeon(R) Processor, 2 cores, family 6 model 207 avx512_bf16 avx512f"


ZEN5 = "AMD EPYC, 2 cores, family 26 model 2 avx512_bf16 avx512_vnni avx512f avx2"


def test_savings_pair_each_run_with_the_baseline_of_its_own_machine_kind():
    rows = [frame_row(SST2, *run) for run in SST2_RUNS]
    for row in rows:
        row.update({"tags.machine.kind": AMX, "tags.config_hash": row["run_id"]})
    # A later sitting on a machine three times slower times the seed-0 baseline again (same config hash) and adds
    # beta=3 for seed 2: 150 s against its own 300 s baseline is 50 % saved, though 150 s is more than AMX's 105 s.
    slow = [{**frame_row(SST2, NONE, 0, 300.0, 0.3, 81.0, 100.0), "run_id": "slow-base-0",
             "tags.config_hash": rows[0]["run_id"], "tags.machine.kind": NO_AMX},
            {**frame_row(SST2, RP3, 2, 150.0, 0.15, 82.0, 27.0), "run_id": "slow-rp3-2", "tags.machine.kind": NO_AMX}]
    used, excluded = report.split_runs(runs_frame(rows + slow), "cpu")
    assert len(used) == 12 and excluded.empty  # the same config and seed on two kinds: both count
    table = report.build_table(used)
    beta3 = row_of(table, "sst2_bert", RP3)
    savings = [100 * (1 - 70 / 100), 100 * (1 - 77 / 110), 50.0]  # each against the AMX baseline of its time
    assert beta3["pct_time_savings"] == pytest.approx(sum(savings) / 3)
    assert beta3["pct_time_savings_std"] == pytest.approx(pd.Series(savings).std())
    assert beta3["pct_cost_savings"] == pytest.approx(sum(savings) / 3)
    assert beta3["n_seeds"] == 3 and beta3["n_runs"] == 3 and beta3["n_machine_kinds"] == 2
    assert beta3["test_accuracy"] == pytest.approx((81.0 + 81.4 + 82.0) / 3)
    base = row_of(table, "sst2_bert", NONE)
    # Seed 0 was timed on both kinds: one seed (the mean of its two accuracies), two runs.
    assert base["n_seeds"] == 2 and base["n_runs"] == 3 and base["seeds"] == "0 1"
    assert base["test_accuracy"] == pytest.approx(((80.0 + 81.0) / 2 + 82.0) / 2)
    assert base["pct_time_savings"] == pytest.approx(0.0)  # each baseline run is its own nearest
    assert row_of(table, "sst2_bert", KEEP25)["pct_time_savings"] == pytest.approx(40.0)  # AMX alone: unchanged
    assert report.runs_without_baseline(report.timed_runs(used)) == {}

    # A third kind with no baseline of its own: no savings for its run, but its accuracy still counts.
    lone = {**frame_row(SST2, RP3, 3, 10.0, 0.01, 83.0, 27.0), "run_id": "zen5-rp3-3", "tags.machine.kind": ZEN5}
    used, _ = report.split_runs(runs_frame(rows + slow + [lone]), "cpu")
    beta3 = row_of(report.build_table(used), "sst2_bert", RP3)
    assert beta3["pct_time_savings"] == pytest.approx(sum(savings) / 3) and beta3["n_seeds"] == 4
    assert beta3["test_accuracy"] == pytest.approx((81.0 + 81.4 + 82.0 + 83.0) / 4)
    assert report.runs_without_baseline(report.timed_runs(used)) == {"zen5-rp3-3": ZEN5}


def test_a_contended_baseline_replaced_by_a_clean_rerun_is_in_no_figure_and_the_baseline_row_saves_zero():
    rows = [{**frame_row(SST2, *run), "tags.machine.kind": AMX, "metrics.other_cpu_fraction": 0.0} for run in SST2_RUNS]
    for row in rows:
        row["tags.config_hash"] = row["run_id"]
    # Seed 0's baseline timed again while another process ran (rerun_contended then trained it clean: rows[0]),
    # and a seed-2 baseline timed only under contention: no clean twin, so it stays (flagged, not a reference).
    busy = {**frame_row(SST2, NONE, 0, 160.0, 0.16, 80.0, 100.0), "run_id": "busy-base-0", "tags.machine.kind": AMX,
            "tags.config_hash": rows[0]["run_id"], "metrics.other_cpu_fraction": 0.3}
    lone = {**frame_row(SST2, NONE, 2, 190.0, 0.19, 81.0, 100.0), "run_id": "busy-base-2", "tags.machine.kind": AMX,
            "tags.config_hash": "seed-2", "metrics.other_cpu_fraction": 0.3}
    used, excluded = report.split_runs(runs_frame(rows + [busy, lone]), "cpu")
    assert "busy-base-0" not in set(used["run_id"]) and "busy-base-2" in set(used["run_id"])
    reason = excluded.set_index("run_id").at["busy-base-0", "reason"]
    assert reason == f"rerun: timed under contention (other processes 0.30 of a core), replaced by the clean run {rows[0]['run_id']}"
    table = report.build_table(used)
    base = row_of(table, "sst2_bert", NONE)
    assert base["n_runs"] == 3 and base["train_time_s"] == pytest.approx((100 + 110 + 190) / 3)
    # 0 by definition; the spread is the clean references' own: 100 s and 110 s against their mean 105 s.
    assert base["pct_time_savings"] == 0.0 and base["pct_cost_savings"] == 0.0
    assert base["pct_time_savings_std"] == pytest.approx(pd.Series([100 * (1 - 100 / 105), 100 * (1 - 110 / 105)]).std())
    # Every other row unchanged: the contended baselines are no run's reference.
    assert row_of(table, "sst2_bert", RP3)["pct_time_savings"] == pytest.approx(30.0)


def test_a_rerun_on_the_same_machine_kind_counts_once_but_every_baseline_timing_stays():
    rows = [{**frame_row(SST2, RP3, 0, 70.0, 0.1, 80.0, 27.0), "tags.config_hash": "h0", "tags.machine.kind": AMX},
            {**frame_row(SST2, RP3, 0, 74.0, 0.1, 80.5, 27.0), "run_id": "again", "tags.config_hash": "h0",
             "start_time": "2026-01-02 00:00:00+00:00", "tags.machine.kind": AMX}]
    used, excluded = report.split_runs(runs_frame(rows), "cpu")
    assert list(used["run_id"]) == ["again"] and excluded["reason"].tolist() == ["rerun: same config_hash as again"]
    # A baseline timed again in a later sitting (tracking.baseline_per_sitting): a second pace measurement, and
    # for accuracy the same seed, so both stay.
    rows = [{**frame_row(SST2, NONE, 0, 100.0, 0.1, 80.0, 100.0), "tags.config_hash": "b0", "tags.machine.kind": AMX},
            {**frame_row(SST2, NONE, 0, 104.0, 0.1, 80.5, 100.0), "run_id": "retimed", "tags.config_hash": "b0",
             "start_time": "2026-01-02 00:00:00+00:00", "tags.machine.kind": AMX}]
    used, excluded = report.split_runs(runs_frame(rows), "cpu")
    assert len(used) == 2 and excluded.empty
    base = report.build_table(used).iloc[0]
    assert base["n_seeds"] == 1 and base["n_runs"] == 2 and base["test_accuracy"] == pytest.approx(80.25)


def test_task_keeps_only_the_tasks_asked_for():
    rows = [frame_row(SST2, *run) for run in SST2_RUNS] + [frame_row(CIFAR, NONE, 0, 500.0, 0.5, 86.0, 100.0),
                                                           frame_row(CIFAR, RP3, 0, 1.0, 0.0, 1.0, 1.0, status="KILLED")]
    used, excluded = report.split_runs(runs_frame(rows), "cpu", tasks_wanted=["sst2_bert"])
    assert set(used["tags.task"]) == {"sst2_bert"} and len(used) == 10
    # The other task's runs are left out as such, its unfinished ones too (they are not this report's business).
    assert excluded["reason"].tolist() == ["task cifar10_resnet", "task cifar10_resnet"]
    assert len(report.split_runs(runs_frame(rows), "cpu")[0]) == 11


def test_machine_picks_one_kind_per_task():
    rows = [{**frame_row(SST2, *run), "tags.machine.kind": AMX} for run in SST2_RUNS]
    slow = [{**frame_row(SST2, NONE, seed, 300.0, 0.3, 80.0, 100.0), "run_id": f"slow-{seed}",
             "tags.machine.kind": NO_AMX} for seed in (0, 1)]
    used, excluded = report.split_runs(runs_frame(rows + slow), "cpu", machine="amx_bf16")
    assert len(used) == 10 and set(report.machine_kinds(used)) == {AMX}
    assert set(excluded.set_index("run_id").loc[["slow-0", "slow-1"], "reason"]) == {f"machine {NO_AMX}"}
    assert row_of(report.build_table(used), "sst2_bert", RP3)["pct_time_savings"] == pytest.approx(30.0)
    used, excluded = report.split_runs(runs_frame(rows + slow), "cpu", machine="model 207 avx512_bf16")
    assert sorted(used["run_id"]) == ["slow-0", "slow-1"] and len(excluded) == 10
    with pytest.raises(ValueError, match="must match one machine kind per task, matched 2"):
        report.split_runs(runs_frame(rows + slow), "cpu", machine="Xeon")
    with pytest.raises(ValueError, match="matches no machine kind"):
        report.split_runs(runs_frame(rows + slow), "cpu", machine="no such machine")


def test_two_tasks_may_come_from_two_machine_kinds():
    sst2 = [{**frame_row(SST2, *run), "tags.machine.kind": AMX} for run in SST2_RUNS]
    cifar = [{**frame_row(CIFAR, sifter, seed, 3 * time_s, cost, accuracy, accepted), "tags.machine.kind": NO_AMX}
             for sifter, seed, time_s, cost, accuracy, accepted in SST2_RUNS]
    used, excluded = report.split_runs(runs_frame(sst2 + cifar), "cpu")
    assert len(used) == 20 and excluded.empty
    table = report.build_table(used)
    assert row_of(table, "cifar10_resnet", RP3)["pct_time_savings"] == pytest.approx(30.0)  # within its own kind
    used, excluded = report.split_runs(runs_frame(sst2 + cifar), "cpu", machine="amx")
    assert set(used["tags.task"]) == {"sst2_bert"} and set(excluded["task"]) == {"cifar10_resnet"}


def test_runs_without_a_machine_kind_tag_are_one_kind_by_cpu_and_cores():
    rows = [frame_row(SST2, *run) for run in SST2_RUNS[:4]]
    for row in rows[:2]:
        row.update({"tags.machine.cpu": "Old CPU", "tags.machine.cores": "2"})
    kinds = report.machine_kinds(runs_frame(rows))
    assert list(kinds[:2]) == ["Old CPU, 2 cores (no machine.kind tag)"] * 2
    assert list(kinds[2:]) == ["unknown CPU, ? cores (no machine.kind tag)"] * 2


# ---------------------------------------------------------------- the CLI on real sqlite stores

@pytest.fixture(scope="session")
def empty_store_file(tmp_path_factory):
    """An initialised sqlite store, made once: creating one costs seconds of migrations."""
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture(autouse=True)
def keep_tracking_uri(monkeypatch):
    # The report sets MLflow's tracking URI for its process; keep that from leaking into other tests.
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def new_store(empty_store_file, folder):
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(empty_store_file, folder / "mlflow.db")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(uri)
    return uri, client, client.create_experiment("sift_bench", artifact_location=(folder / "mlartifacts").as_uri())


class Logger:
    """Logs runs the way the harness does: tags, flattened params, per-evaluation history, final metrics. Each
    run starts 1000 ms after the last and ends 500 ms after its start, so the runs follow each other in time."""

    def __init__(self, client, experiment_id):
        self.client, self.experiment_id, self.clock = client, experiment_id, 1_700_000_000_000

    def run(self, task, sifter, seed, final=None, *, scale="cpu", status="FINISHED", history=(), tags=None) -> str:
        self.clock += 1000
        sifter_params = {f"sifter.{key}": value for key, value in sifter.items() if key != "sifter"}
        run_tags = {**task, "sifter": sifter["sifter"], "scale": scale, "seed": str(seed),
                    "machine.cpu": "Test CPU 9000", "machine.cores": "2", "torch_version": "2.14.1",
                    "git_commit": "abc123", "command": f"python -m sift_bench task={task['task']} scale={scale}",
                    # Where the harness ran: absolute paths that no written report file may carry.
                    "mlflow.source.name": "/work/elsewhere/sift_bench/__main__.py", **(tags or {})}
        run = self.client.create_run(self.experiment_id, start_time=self.clock, tags=run_tags,
                                     run_name=f"{task['task']} {sifter['sifter']} seed={seed}")
        params = {"sifter.name": sifter["sifter"], **sifter_params, "seed": str(seed), "scale.name": scale,
                  "task.name": task["task"], "trainer.epochs": "2", "cost.usd_per_hour": "0.23",
                  "paths.data_dir": "/work/elsewhere/data"}
        metrics = [Metric(name, value, self.clock + step, step)
                   for step, point in enumerate(history) for name, value in point.items()]
        last = max(len(history) - 1, 0)
        metrics += [Metric(name, value, self.clock + 100, last) for name, value in (final or {}).items()]
        self.client.log_batch(run.info.run_id, metrics=metrics, params=[Param(k, v) for k, v in params.items()])
        if status != "RUNNING":
            self.client.set_terminated(run.info.run_id, status, end_time=self.clock + 500)
        return run.info.run_id


def final_metrics(time_s, cost, accuracy, accepted, val=None) -> dict:
    return {"train_time_s": time_s, "cost_usd": cost, "test_accuracy": accuracy,
            "val_accuracy": accuracy if val is None else val, "pct_accepted": accepted, "sift_time_s": 1.0,
            "eval_time_s": 2.0, "samples_seen": 1000.0, "samples_trained": 10 * accepted,
            "work_trained": 10 * accepted, "time_to_target_s": math.nan}


def history_of(time_s, accuracy, accepted) -> list[dict]:
    # At the last step the evaluation logs 2 points under the final figure, so the test can tell which one won.
    return [{"train_loss": 1.0 / (step + 1), "test_accuracy": accuracy - 10 + 4 * step,
             "val_accuracy": accuracy - 9 + 4 * step, "pct_accepted": accepted,
             "epoch": step / 2, "train_time_s": time_s * step / 2, "samples_seen": 500.0 * step,
             "samples_trained": 5 * accepted * step, "lr_multiplier": 1.0} for step in range(3)]


@pytest.fixture(scope="module")
def full_store(empty_store_file, tmp_path_factory):
    """sst2 by hand (SST2_RUNS) plus what the report must leave out or flag: failed, running, killed,
    another scale, a sweep parent, and a task with no baseline whose run lacks cost_usd."""
    folder = tmp_path_factory.mktemp("full")
    uri, client, experiment_id = new_store(empty_store_file, folder)
    log = Logger(client, experiment_id)
    parent = client.create_run(experiment_id, tags={"run_kind": "sweep", "scale": "cpu", "sweep": "table"})
    client.set_terminated(parent.info.run_id, "FINISHED")
    # Seed 0's baseline first, seed 1's last: each seed's runs are nearest in time to the baseline of their seed.
    in_time = sorted(SST2_RUNS, key=lambda run: (run[1], (run[0] is NONE) == (run[1] == 1)))
    for sifter, seed, time_s, cost, accuracy, accepted in in_time:
        log.run(SST2, sifter, seed, final_metrics(time_s, cost, accuracy, accepted),
                history=history_of(time_s, accuracy, accepted),
                tags={"mlflow.parentRunId": parent.info.run_id,
                      "command": "python -m sift_bench -m +experiment=bert_table"})
    failed = log.run(SST2, RP3, 2, final_metrics(1.0, 0.0, 10.0, 10.0), status="FAILED")
    running = log.run(SST2, KEEP25, 2, status="RUNNING")
    killed = log.run(SST2, NONE, 2, status="KILLED")
    for seed in (0, 1):
        log.run(SST2, NONE, seed, final_metrics(10.0, 0.1, 90.0, 100.0), scale="gpu")
    cifar = final_metrics(50.0, 0.05, 88.0, 25.0)
    del cifar["cost_usd"]
    log.run(CIFAR, RP3, 0, cifar, history=history_of(50.0, 88.0, 25.0))
    return {"uri": uri, "folder": folder, "failed": failed, "running": running, "killed": killed}


@pytest.fixture(scope="module")
def full_report(full_store):
    out = full_store["folder"] / "results" / "cpu"
    code = main(["--tracking-uri", full_store["uri"], "--out", str(out)])
    return code, out


def short_of_seed_2() -> list[dict]:
    """A baseline over seeds 0, 1, 2 (80, 82, 90 %) and beta 1 over seeds 0 and 1 only, each 0.5 points below."""
    rows = [frame_row(SST2, NONE, seed, 100.0, 0.1, accuracy, 100.0)
            for seed, accuracy in ((0, 80.0), (1, 82.0), (2, 90.0))]
    return rows + [frame_row(SST2, RP1, 0, 80.0, 0.08, 79.5, 50.0), frame_row(SST2, RP1, 1, 80.0, 0.08, 81.5, 50.0)]


def test_accuracy_delta_is_paired_over_the_seeds_a_configuration_has():
    # Seed 2 of the baseline is an easy one (90 %): against the baseline's mean over all three seeds (84.0) a
    # configuration that has run only seeds 0 and 1 would look 3.5 points worse; paired it is 0.5 points below.
    rows = short_of_seed_2() + [frame_row(SST2, RP3, 7, 70.0, 0.07, 83.0, 25.0)]
    table = report.build_table(runs_frame(rows))
    base, short, unpaired = (row_of(table, "sst2_bert", sifter) for sifter in (NONE, RP1, RP3))
    assert base["test_accuracy"] == pytest.approx(84.0) and base["delta_seeds"] == "0 1 2"
    assert short["test_accuracy"] == pytest.approx(80.5) and short["delta_seeds"] == "0 1"
    assert short["accuracy_baseline"] == pytest.approx(81.0) and short["accuracy_delta"] == pytest.approx(-0.5)
    # No seed in common: against the baseline's own mean, and said to be unpaired.
    assert pd.isna(unpaired["delta_seeds"]) and unpaired["accuracy_delta"] == pytest.approx(-1.0)

    assert report.fewer_seeds(table) == {"sst2_bert": [(short["config"], "0 1"), (unpaired["config"], "7")]}
    # Unpaired, beta 1 would be 3.5 points below and out of the headline; beta 3 (1.0 below) stays out.
    (best,) = report.headline(table)["config"]
    assert best == short["config"]
    assert "81.00 (seeds 0 1 of 0 1 2)" in markdown.sagemaker_table(table)


def test_headline_names_the_pairing_of_a_short_configuration():
    rows = short_of_seed_2()
    (line,) = report.headline(report.build_table(runs_frame(rows)))["statement"]
    assert line == ("20.0 % time savings with relative_probabilistic (test accuracy 80.50 vs baseline 81.00, "
                    "-0.50 points; chosen on validation, -0.50 points; n=2; delta over seeds 0 1 only, the baseline "
                    "has 0 1 2)")
    rows.append(frame_row(SST2, RP1, 2, 80.0, 0.08, 89.5, 50.0))  # now complete: no caveat, means over 0 1 2
    (line,) = report.headline(report.build_table(runs_frame(rows)))["statement"]
    assert line.endswith("(test accuracy 83.50 vs baseline 84.00, -0.50 points; chosen on validation, -0.50 points; "
                         "n=3)")


def test_report_from_a_store_writes_every_file(full_report):
    code, out = full_report
    assert code == 0
    for name in ("table.csv", "report.md", "runs.csv", "history.csv", "excluded.csv", "accuracy_vs_savings.png",
                 "accuracy_vs_time.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert (out / "accuracy_vs_savings.png").read_bytes()[:4] == b"\x89PNG"


def test_report_table_matches_the_hand_computed_one(full_report):
    table = pd.read_csv(full_report[1] / "table.csv", dtype={"beta_value": str, "keep_fraction": str})
    assert len(table) == 6  # five sst2 configurations and cifar's lone sifted one
    sst2 = table[table["task"] == "sst2_bert"]
    beta3 = sst2[sst2["beta_value"] == "3"].iloc[0]
    assert beta3["pct_time_savings"] == pytest.approx(30.0) and beta3["n_seeds"] == 2
    assert beta3["accuracy_baseline"] == pytest.approx(81.0) and beta3["test_accuracy"] == pytest.approx(81.2)
    assert (sst2["n_seeds"] == 2).all()  # the failed, running and killed seed-2 runs stayed out
    cifar = table[table["task"] == "cifar10_resnet"].iloc[0]
    assert pd.isna(cifar["pct_time_savings"]) and pd.isna(cifar["cost_usd"])


def test_report_md_has_every_section(full_store, full_report):
    text = (full_report[1] / "report.md").read_text()
    assert "| model | dataset | sifter | % accepted | % savings | accuracy baseline | accuracy sifted |" in text
    assert ("| all-MiniLM-L6-v2 | sst2 | relative_probabilistic beta_value=3 | 27.00 | 30.00 | 81.00 ± 1.41 (n=2) "
            "| 81.20 ± 0.28 (n=2) |") in text
    assert "30.0 % time savings with relative_probabilistic beta_value=3" in text
    assert "At equal time (the verdict that decides)" in text and "No Train No Gain" in text
    assert "no baseline (sifter=none) at this scale" in text and "Task cifar10_resnet has no baseline" in text
    assert "beat the control" in text and "larger of the two std" in text
    assert "nearest its own" in text  # the timing rule is stated
    assert "## Full table" in text and "lacks cost_usd" in text
    for status in ("failed", "running", "killed"):
        assert full_store[status] in text
    assert "FAILED" in text and "RUNNING" in text and "KILLED" in text
    assert "other scales 2 (gpu: 2)" in text and "sweep parents 1" in text
    assert "CPU Test CPU 9000, 2 cores, torch 2.14.1" in text and "abc123" in text
    assert "python -m sift_bench -m +experiment=bert_table" in text
    assert "python -m sift_bench task=cifar10_resnet scale=cpu" in text
    relative_uri = "sqlite:///" + os.path.relpath(full_store["folder"] / "mlflow.db")
    assert f"python -m sift_bench.report --tracking-uri {relative_uri} --out" in text
    assert "![" in text and "accuracy_vs_time.png" in text


def test_history_csv_has_one_row_per_evaluation(full_report):
    history = pd.read_csv(full_report[1] / "history.csv")
    assert list(history.columns) == ["run_id", "step", *report.HISTORY_METRICS]
    assert len(history) == 11 * 3 and history["run_id"].nunique() == 11
    runs = pd.read_csv(full_report[1] / "runs.csv", dtype=str)
    assert len(runs) == 11 and set(runs["status"]) == {"FINISHED"}
    # At the last step the final figure wins over the evaluation logged at the same step.
    for name in ("test_accuracy", "val_accuracy"):
        last = history[history["step"] == 2].set_index("run_id")[name]
        final = runs.set_index("run_id")[f"metrics.{name}"].astype(float)
        assert (last.sort_index() == final.sort_index()).all()


def test_rebuilding_from_csv_gives_the_same_table(full_report, tmp_path):
    code, out = full_report
    assert main(["--from-csv", str(out), "--out", str(tmp_path / "dir")]) == 0
    assert main(["--from-csv", str(out / "runs.csv"), "--out", str(tmp_path / "file")]) == 0
    for rebuilt in (tmp_path / "dir", tmp_path / "file"):
        assert (rebuilt / "table.csv").read_bytes() == (out / "table.csv").read_bytes()
        assert (rebuilt / "runs.csv").read_bytes() == (out / "runs.csv").read_bytes()
        text = (rebuilt / "report.md").read_text()
        assert "rebuilt from the CSV files" in text and "other scales 2 (gpu: 2)" in text
        assert (rebuilt / "accuracy_vs_time.png").is_file()
    assert_no_absolute_path(tmp_path / "file")


# An absolute path where a path can start, or in a sqlite or file URI.
ABSOLUTE_PATH = re.compile(r"""(?:^|[\s=`'"(\[,])/\w|sqlite\\?:////|file:///\w""")


def assert_no_absolute_path(folder):
    for name in ("report.md", "runs.csv", "excluded.csv", "table.csv"):
        text = (folder / name).read_text()
        found = ABSOLUTE_PATH.search(text)
        assert found is None, (name, text[max(found.start() - 80, 0):found.end() + 80])


def test_no_written_file_holds_an_absolute_path(full_store, full_report):
    code, out = full_report
    assert_no_absolute_path(out)
    runs = pd.read_csv(out / "runs.csv", dtype=str)
    # The harness's absolute paths come out relative to the folder the report ran in.
    assert set(runs["params.paths.data_dir"]) == {os.path.relpath("/work/elsewhere/data")}
    assert set(runs["tags.mlflow.source.name"]) == {os.path.relpath("/work/elsewhere/sift_bench/__main__.py")}
    assert runs["artifact_uri"].str.startswith(os.path.relpath(full_store["folder"] / "mlartifacts")).all()


def test_only_the_chosen_scale_goes_in(full_store, tmp_path, capsys):
    assert main(["--tracking-uri", full_store["uri"], "--scale", "gpu", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "table.csv")
    assert len(table) == 1 and table.iloc[0]["test_accuracy"] == pytest.approx(90.0)
    assert "ignored 14 runs of other scales" in capsys.readouterr().err  # 11 used at cpu + 3 not FINISHED


def test_runs_of_two_machine_kinds_share_a_table_and_machine_picks_one(empty_store_file, tmp_path, capsys):
    uri, client, experiment_id = new_store(empty_store_file, tmp_path / "store")
    log = Logger(client, experiment_id)
    for seed, time_s in ((0, 100.0), (1, 110.0)):
        log.run(SST2, NONE, seed, final_metrics(time_s, 0.1, 80.0, 100.0), tags={"machine.kind": AMX},
                history=history_of(time_s, 80.0, 100.0))
        log.run(SST2, RP3, seed, final_metrics(70.0, 0.07, 80.0, 25.0), tags={"machine.kind": AMX},
                history=history_of(70.0, 80.0, 25.0))
    log.run(SST2, NONE, 2, final_metrics(300.0, 0.3, 80.0, 100.0), tags={"machine.kind": NO_AMX},
            history=history_of(300.0, 80.0, 100.0))
    log.run(SST2, RP3, 2, final_metrics(240.0, 0.24, 80.0, 25.0), tags={"machine.kind": NO_AMX},
            history=history_of(240.0, 80.0, 25.0))
    out = tmp_path / "out"
    assert main(["--tracking-uri", uri, "--out", str(out)]) == 0
    table = pd.read_csv(out / "table.csv")
    base, beta3 = table.iloc[0], table.iloc[1]
    assert base["n_seeds"] == 3 and beta3["n_machine_kinds"] == 2
    # Seed 0's run follows the seed-0 baseline (100 s), seed 1's the seed-1 one (110 s), each the nearest in time.
    assert beta3["pct_time_savings"] == pytest.approx((100 * (1 - 70.0 / 100.0) + 100 * (1 - 70.0 / 110.0) + 20.0) / 3)
    text = (out / "report.md").read_text()
    assert f"sst2_bert: 4 runs on `{AMX}`" in text and f"sst2_bert: 2 runs on `{NO_AMX}`" in text
    assert f"sst2_bert on `{AMX}`" in text  # the time plot draws one kind's seconds, and says which
    assert main(["--tracking-uri", uri, "--out", str(tmp_path / "slow"), "--machine", "model 207 avx512"]) == 0
    assert "4 FINISHED runs on machine kinds other than --machine 'model 207 avx512'" in capsys.readouterr().err
    assert pd.read_csv(tmp_path / "slow" / "table.csv")["train_time_s"].tolist() == [300.0, 240.0]
    log.run(CIFAR, NONE, 0, final_metrics(500.0, 0.5, 86.0, 100.0), tags={"machine.kind": AMX})
    assert main(["--tracking-uri", uri, "--out", str(tmp_path / "sst2"), "--task", "sst2_bert"]) == 0
    assert set(pd.read_csv(tmp_path / "sst2" / "table.csv")["task"]) == {"sst2_bert"}
    text = (tmp_path / "sst2" / "report.md").read_text()
    assert "runs of tasks not asked for with `--task` 1 (cifar10_resnet: 1)" in text
    assert "--task sst2_bert" in text  # the command that made it
    with pytest.raises(SystemExit) as exit_info:
        main(["--tracking-uri", uri, "--out", str(tmp_path / "none"), "--machine", "no such machine"])
    assert exit_info.value.code == 2 and "--machine 'no such machine'" in capsys.readouterr().err


def test_a_missing_store_writes_nothing_and_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([]) == 1
    assert "no MLflow store at mlflow.db" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no results/, and no empty store created


def test_a_scale_with_no_runs_names_the_scales_there_are(full_store, tmp_path, capsys):
    assert main(["--tracking-uri", full_store["uri"], "--scale", "smoke", "--out", str(tmp_path / "out")]) == 1
    assert "FINISHED runs exist at: cpu, gpu; pick one with --scale" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_from_csv_without_runs_csv_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--from-csv", str(tmp_path)])
    assert exit_info.value.code == 2 and "no runs.csv" in capsys.readouterr().err


def test_a_store_with_no_finished_run_writes_nothing_and_lists_the_others(empty_store_file, tmp_path, capsys):
    uri, client, experiment_id = new_store(empty_store_file, tmp_path / "store")
    running = Logger(client, experiment_id).run(SST2, RP3, 0, status="RUNNING")
    out = tmp_path / "out"
    assert main(["--tracking-uri", uri, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert running in err and "RUNNING" in err and "no FINISHED run of scale 'cpu'; nothing written" in err
    assert not out.exists()
    assert main(["--tracking-uri", uri, "--experiment-name", "other", "--out", str(out)]) == 1
    assert "no experiment named 'other'" in capsys.readouterr().err


def test_an_empty_experiment_exits_1(empty_store_file, tmp_path, capsys):
    uri, _, _ = new_store(empty_store_file, tmp_path / "store")
    assert main(["--tracking-uri", uri, "--out", str(tmp_path / "out")]) == 1
    assert "the store has no runs; nothing written" in capsys.readouterr().err


def test_runs_without_history_or_metrics_still_report(empty_store_file, tmp_path):
    uri, client, experiment_id = new_store(empty_store_file, tmp_path / "store")
    log = Logger(client, experiment_id)
    log.run(SST2, NONE, 0, {"train_time_s": 100.0})
    log.run(SST2, RP3, 0, {"test_accuracy": 80.0, "val_accuracy": 80.0})
    out = tmp_path / "out"
    assert main(["--tracking-uri", uri, "--out", str(out)]) == 0
    table = pd.read_csv(out / "table.csv")
    sifted = table[table["sifter"] == "relative_probabilistic"].iloc[0]
    assert pd.isna(sifted["accuracy_delta"]) and pd.isna(sifted["pct_time_savings"]) and pd.isna(sifted["pct_accepted"])
    assert not (out / "accuracy_vs_time.png").exists()
    text = (out / "report.md").read_text()
    assert "accuracy_vs_time.png not drawn" in text and "the baseline has no validation accuracy" in text


def test_a_bare_report_never_replaces_the_report_of_another_store(full_store, tmp_path, monkeypatch, capsys):
    # As in a checkout: results/cpu holds the published report, and the user's own store is elsewhere.
    monkeypatch.chdir(tmp_path)
    published = tmp_path / "results" / "cpu"
    published.mkdir(parents=True)
    (published / "report.md").write_text("the published report\n")
    with pytest.raises(SystemExit) as refused:
        main(["--tracking-uri", full_store["uri"]])
    error = capsys.readouterr().err
    assert refused.value.code == 2
    assert "results/cpu holds a report (report.md)" in error and "--out DIR" in error and "--force" in error
    assert [path.name for path in published.iterdir()] == ["report.md"]
    assert (published / "report.md").read_text() == "the published report\n"
    # The folder's own store rebuilds it, --force replaces it and so does --out naming it: each says so.
    shutil.copy(full_store["folder"] / "mlflow.db", published / "mlflow.db")
    for argv in (["--tracking-uri", "sqlite:///results/cpu/mlflow.db"], ["--tracking-uri", full_store["uri"], "--force"],
                 ["--tracking-uri", full_store["uri"], "--out", "results/cpu"]):
        (published / "report.md").write_text("the published report\n")
        assert main(argv) == 0
        assert "(replacing the report that was there)" in capsys.readouterr().out
        assert (published / "report.md").read_text() != "the published report\n"
    # Into a folder that holds no report, it writes without a word of replacing.
    assert main(["--tracking-uri", full_store["uri"], "--scale", "gpu"]) == 0
    assert "replacing" not in capsys.readouterr().out and (tmp_path / "results" / "gpu" / "table.csv").is_file()


def test_the_time_plot_caption_names_the_lines_drawn_and_no_others(empty_store_file, tmp_path):
    # sst2: no random control at all, so its plot has two lines; cifar: a control brackets beta=3's 26 % accepted.
    uri, client, experiment_id = new_store(empty_store_file, tmp_path / "store")
    log = Logger(client, experiment_id)
    for task, sifters in ((SST2, (NONE, RP3)), (CIFAR, (NONE, RP3, KEEP25))):
        for sifter, time_s, accuracy, accepted in ((NONE, 100.0, 80.0, 100.0), (RP3, 70.0, 80.2, 26.0),
                                                   (KEEP25, 60.0, 78.0, 25.0)):
            if sifter in sifters:
                log.run(task, sifter, 0, final_metrics(time_s, 0.01, accuracy, accepted),
                        history=history_of(time_s, accuracy, accepted))
    out = tmp_path / "out"
    assert main(["--tracking-uri", uri, "--out", str(out)]) == 0
    caption = next(line for line in (out / "report.md").read_text().splitlines()
                   if line.startswith("Accuracy against cumulative training time"))
    sst2 = re.search(r"sst2_bert on `[^`]+`: ([^;.]*)", caption).group(1)
    cifar = re.search(r"cifar10_resnet on `[^`]+`: ([^;.]*)", caption).group(1)
    assert sst2 == "the baseline and the best sifted configuration"
    assert cifar == "the baseline, the best sifted configuration and the random control nearest it in % accepted"


def test_help_names_every_option(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--tracking-uri", "--experiment-name", "--scale", "--machine", "--out", "--force", "--from-csv",
                   "Exit status"):
        assert option in text


def test_the_module_runs_as_a_command(tmp_path):
    result = subprocess.run([sys.executable, "-m", "sift_bench.report", "--tracking-uri",
                             f"sqlite:///{tmp_path / 'none.db'}"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 1, result.stderr
    assert "nothing written" in result.stderr and "Traceback" not in result.stderr


def test_runs_on_a_busy_machine_are_flagged():
    used = pd.DataFrame({"run_id": ["quiet", "busy", "unmeasured"],
                         "metrics.other_cpu_fraction": [0.01, 0.4, float("nan")]})
    assert report.contended_runs(used) == {"busy": 0.4}
    assert report.contended_runs(used.drop(columns="metrics.other_cpu_fraction")) == {}


def paced_frame(baseline_times: list[float]) -> pd.DataFrame:
    """Baselines training 1000 samples in the given times, and sifted runs that train 500 samples at 0.1 s each
    after a 20 s scoring pass (smart sifting) or none (the control)."""
    rows = [frame_row(CIFAR, NONE, seed, time_s, 0.0, 86.0, 100.0) for seed, time_s in enumerate(baseline_times)]
    rows += [frame_row(CIFAR, RP1, seed, 70.0, 0.0, 85.0, 50.0) for seed in range(3)]
    rows += [frame_row(CIFAR, KEEP50, seed, 50.0, 0.0, 84.0, 50.0) for seed in range(3)]
    frame = pd.DataFrame(rows)
    frame["metrics.work_trained"] = [1000.0] * len(baseline_times) + [500.0] * 6
    frame["metrics.sift_time_s"] = [0.0] * len(baseline_times) + [20.0] * 3 + [0.0] * 3
    return runs_frame(frame.to_dict("records"))


def test_a_baseline_timed_at_an_odd_pace_is_named_with_its_effect_on_the_savings():
    # Paces: every run 0.1 s per sample (the scoring pass left out) but baseline seed 2 at 0.13: 30 % slow.
    [pace] = report.baseline_pace(report.timed_runs(paced_frame([100.0, 100.0, 130.0])))
    assert pace["task"] == "cifar10_resnet" and pace["n_runs"] == 9
    assert pace["median_pace"] == pytest.approx(0.1)
    [(run_id, seed, ratio)] = pace["odd"]
    assert seed == "2" and run_id.endswith("-2") and ratio == pytest.approx(1.3)
    # Seed 2's three runs (the baseline itself, smart sifting, the control) start at its second: their reference.
    assert pace["referenced_by"] == {run_id: 3}
    assert pace["baseline_time_s"] == pytest.approx(110.0)
    assert pace["baseline_time_at_median_s"] == pytest.approx(100.0)
    # 8 % off is within the tolerance; a frame without work_trained has no pace at all.
    assert report.baseline_pace(report.timed_runs(paced_frame([100.0, 100.0, 108.0]))) == []
    unworked = paced_frame([100.0, 100.0, 130.0]).drop(columns="metrics.work_trained")
    assert report.baseline_pace(report.timed_runs(unworked)) == []


def test_a_run_timed_at_another_machine_speed_than_its_reference_counts_for_accuracy_not_for_savings():
    from sift_bench.report.notes import report_notes

    def frame(slowed_eval_s: float, eval_s: float = 10.0) -> pd.DataFrame:
        rows = [{**frame_row(SST2, *run), "metrics.eval_time_s": eval_s} for run in SST2_RUNS]
        # Smart sifting's seed 1 trained while the host ran slow: 99 s against its baseline's 110 s, and its
        # evaluations, the same work in every run, slowed alike.
        slowed = next(row for row in rows if row["run_id"].endswith("-3-500-10-1"))
        slowed.update({"metrics.train_time_s": 99.0, "metrics.eval_time_s": slowed_eval_s})
        return runs_frame(rows)

    used = frame(15.0)
    table = report.build_table(used)
    beta3 = row_of(table, "sst2_bert", RP3)
    # Seed 0's 30 % alone (70 s against 100 s), not the mean with seed 1's 10 %; both seeds' accuracy count.
    assert beta3["pct_time_savings"] == pytest.approx(30.0) and math.isnan(beta3["pct_time_savings_std"])
    assert beta3["pct_cost_savings"] == pytest.approx(30.0)
    assert beta3["n_seeds"] == 2 and beta3["test_accuracy"] == pytest.approx((81.0 + 81.4) / 2)
    slowed_id = "sst2_bert-relative_probabilistic-relative_probabilistic-3-500-10-1"
    timed = report.timed_runs(used)
    assert report.pace_mismatched_runs(timed) == {slowed_id: (pytest.approx(1.5), "sst2_bert-none-none-1")}
    assert report.runs_without_baseline(timed) == {}  # it has a reference: its pace, not its kind, is the matter
    [note] = [note for note in report_notes(table, used, True) if slowed_id in note]
    assert "took 1.50 times as long as those of its time reference, baseline run sst2_bert-none-none-1" in note
    # Within 1/1.2 to 1.2 of the reference it counts; 0.8 times is a faster machine than the reference's, as odd.
    assert report.pace_mismatched_runs(report.timed_runs(frame(11.5))) == {}
    assert row_of(report.build_table(frame(11.5)), "sst2_bert", RP3)["pct_time_savings"] == pytest.approx(20.0)
    faster = report.timed_runs(frame(8.0))
    assert report.pace_mismatched_runs(faster) == {slowed_id: (pytest.approx(0.8), "sst2_bert-none-none-1")}
    # Evaluations of a second or so (the smoke scale's) are timer noise: no verdict, whatever their ratio.
    assert report.pace_mismatched_runs(report.timed_runs(frame(3.0, eval_s=1.0))) == {}
    # Runs that logged no evaluation time (older stores) are not judged.
    assert report.pace_mismatched_runs(report.timed_runs(used.drop(columns="metrics.eval_time_s"))) == {}


def test_the_note_of_a_run_timed_at_another_speed_names_its_retime_on_another_machine_kind():
    from sift_bench.report.notes import report_notes

    slowed_id = "sst2_bert-relative_probabilistic-relative_probabilistic-3-500-10-1"
    rows = [{**frame_row(SST2, *run), "metrics.eval_time_s": 10.0} for run in SST2_RUNS]
    next(row for row in rows if row["run_id"] == slowed_id).update(
        {"metrics.train_time_s": 99.0, "metrics.eval_time_s": 15.0, "tags.config_hash": "rp3-seed-1"})
    zen4 = {"tags.machine.kind": "Zen 4, 2 cores", "start_time": "2026-01-01 00:01:00+00:00", "metrics.eval_time_s": 12.0}
    baseline = {**frame_row(SST2, NONE, 1, 120.0, 0.12, 80.0, 100.0), **zen4, "run_id": "zen4-baseline"}
    retime = {**frame_row(SST2, RP3, 1, 96.0, 0.096, 81.4, 26.0), **zen4, "run_id": "zen4-retime",
              "tags.config_hash": "rp3-seed-1"}

    def slowed_note(extra: list[dict]) -> str:
        used = runs_frame(rows + extra)
        [note] = [note for note in report_notes(report.build_table(used), used, True)
                  if note.startswith(f"Run {slowed_id}:")]
        return note

    assert slowed_note([]).endswith("The table sweeps (tracking.rerun_contended) train it again.")
    # The same config and seed timed again on another kind: both stay in the row (one run per config and seed per
    # kind), the slowed run for its accuracy, the retime for the seed's savings too; the note names the retime.
    assert slowed_note([baseline, retime]).endswith(
        "Run zen4-retime timed the same config and seed again on `Zen 4, 2 cores`: its savings stand for that seed.")
    beta3 = row_of(report.build_table(runs_frame(rows + [baseline, retime])), "sst2_bert", RP3)
    assert beta3["n_seeds"] == 2 and beta3["n_runs"] == 3
    assert beta3["pct_time_savings"] == pytest.approx((30.0 + 20.0) / 2)
    # A twin without a baseline on its kind has no savings: it times nothing again.
    assert slowed_note([retime]).endswith("train it again.")


def test_a_baseline_timed_on_a_slowed_host_is_no_time_reference_while_one_in_pace_exists():
    from sift_bench.report.notes import report_notes

    def frame(baseline_eval_s: list[float], sifted_eval_s: float = 10.0) -> pd.DataFrame:
        # A baseline and a smart-sifting run per seed (each seed starts at its own second); the baseline of the
        # last seed trained 130 s against the others' 100 s: the host ran slow for it, and its evaluations too.
        times = [100.0] * (len(baseline_eval_s) - 1) + [130.0]
        rows = [{**frame_row(SST2, NONE, seed, time_s, time_s / 1000, 80.0 + seed, 100.0),
                 "metrics.eval_time_s": eval_s} for seed, (time_s, eval_s) in enumerate(zip(times, baseline_eval_s))]
        rows += [{**frame_row(SST2, RP3, seed, 70.0, 0.070, 81.0, 26.0), "metrics.eval_time_s": sifted_eval_s}
                 for seed in range(len(baseline_eval_s))]
        return runs_frame(rows)

    slowed_id, last_rp3 = "sst2_bert-none-none-2", "sst2_bert-relative_probabilistic-relative_probabilistic-3-500-10-2"
    used = frame([10.0, 10.5, 13.0])
    assert report.off_pace_baselines(report.timed_runs(used)) == {slowed_id: pytest.approx(13.0 / 10.5)}
    references = report.timed_runs(used).set_index("run_id")["reference_run"]
    # The last seed's run takes the in-pace baseline nearest it in time, not its slowed neighbour: no mismatch.
    assert references[last_rp3] == "sst2_bert-none-none-1" and slowed_id not in set(references)
    assert report.pace_mismatched_runs(report.timed_runs(used)) == {}
    table = report.build_table(used)
    beta3 = row_of(table, "sst2_bert", RP3)
    assert beta3["pct_time_savings"] == pytest.approx(30.0) and beta3["pct_time_savings_std"] == pytest.approx(0.0)
    baseline = row_of(table, "sst2_bert", NONE)
    # Its accuracy counts; the baseline row's timing spread is that of the references alone (100 s and 100 s).
    assert baseline["n_seeds"] == 3 and baseline["test_accuracy"] == pytest.approx(81.0)
    assert baseline["pct_time_savings_std"] == pytest.approx(0.0)
    [note] = [note for note in report_notes(table, used, True) if note.startswith(f"Baseline run {slowed_id}")]
    assert "1.24 times the median of its kind's baselines'" in note

    # Within 1.2 of the median it stays the reference of the runs nearest it, whose savings are then 46 %.
    in_pace = frame([10.0, 10.5, 12.0], sifted_eval_s=11.0)
    assert report.off_pace_baselines(report.timed_runs(in_pace)) == {}
    beta3 = row_of(report.build_table(in_pace), "sst2_bert", RP3)
    assert beta3["pct_time_savings"] == pytest.approx((30.0 * 2 + 100 * (1 - 70.0 / 130.0)) / 3)
    # Two baselines both off their median (10 s and 16 s): neither is in pace, so both stay references.
    both_off = frame([10.0, 16.0])
    assert report.off_pace_baselines(report.timed_runs(both_off)) == {}
    assert set(report.timed_runs(both_off)["reference_run"]) == {
        "sst2_bert-none-none-0", "sst2_bert-none-none-1"}


def test_a_store_with_timing_slots_and_the_frontier_rebuilds_the_same_table_from_csv(empty_store_file, tmp_path):
    """A sitting per seed as the table sweeps run it: the baseline timed first, the controls and sifted runs,
    the baseline timed last (same config_hash, tagged timing_slot)."""
    uri, client, experiment_id = new_store(empty_store_file, tmp_path / "store")
    log = Logger(client, experiment_id)
    keep67 = {**KEEP25, "keep_fraction": "0.6667"}
    block = ((RP3, 75.0, 82.0, 82.4, 27.0), (RP1, 90.0, 84.3, 84.6, 52.0), (KEEP25, 30.0, 78.0, 78.1, 25.0),
             (KEEP50, 52.0, 82.0, 82.0, 50.0), (keep67, 68.0, 83.5, 83.6, 66.7))
    for seed in (0, 1, 2):
        baseline = final_metrics(100.0 + seed, 0.1, 85.0 + 0.3 * seed, 100.0, val=85.2 + 0.3 * seed)
        log.run(SST2, NONE, seed, baseline, tags={"timing_slot": "first", "config_hash": f"base{seed}"})
        for sifter, time_s, test, val, accepted in block:
            log.run(SST2, sifter, seed, final_metrics(time_s + seed, 0.07, test + 0.2 * seed, accepted,
                                                      val=val + 0.2 * seed), history=history_of(time_s, test, accepted))
        log.run(SST2, NONE, seed, {**baseline, "train_time_s": 104.0 + seed},
                tags={"timing_slot": "last", "config_hash": f"base{seed}"})
    out = tmp_path / "out"
    assert main(["--tracking-uri", uri, "--out", str(out)]) == 0
    assert main(["--from-csv", str(out / "runs.csv"), "--out", str(tmp_path / "rebuilt")]) == 0
    assert (tmp_path / "rebuilt" / "table.csv").read_bytes() == (out / "table.csv").read_bytes()
    assert_no_absolute_path(out)

    table = pd.read_csv(out / "table.csv", dtype={key: str for key in SIFTER_KEYS})
    base = row_of(table, "sst2_bert", NONE)
    assert base["n_seeds"] == 3 and base["n_runs"] == 6 and base["test_accuracy"] == pytest.approx(85.3)
    beta3 = row_of(table, "sst2_bert", RP3)
    # The first job after each seed's first baseline: 75 + s seconds against 100 + s.
    assert beta3["pct_time_savings"] == pytest.approx(sum(100 * (1 - (75 + s) / (100 + s)) for s in range(3)) / 3)
    # The frontier by hand from the table's own rows: baseline at 0, controls at their % time saved.
    points = table[table["sifter"].isin(["none", "random"])].copy()
    points.loc[points["sifter"] == "none", "pct_time_savings"] = 0.0
    points = points.sort_values("pct_time_savings")
    for name, prefix in (("test_accuracy", ""), ("val_accuracy", "val_")):
        at = np.interp(beta3["pct_time_savings"], points["pct_time_savings"], points[name])
        assert beta3[f"{prefix}frontier_accuracy"] == pytest.approx(at, abs=1e-5)
        assert beta3[f"{prefix}accuracy_vs_frontier"] == pytest.approx(beta3[name] - at, abs=1e-5)
    # beta=3 beats the control at its 27 % accepted, yet is below uniform subsampling at its % time saved.
    assert beta3["verdict_vs_frontier"] == "below" and beta3["extra_savings"] < 0
    # Its 95 % interval, over the 3 seeds it shares with the frontier, lies below 0 too (the verdict reads it).
    assert beta3["bootstrap_seeds"] == 3 and beta3["accuracy_vs_frontier_hi"] < 0
    text = (out / "report.md").read_text()
    assert "none: no configuration is above the uniform-subsampling frontier on validation" in text
    assert "beat the control" in text and "6 baselines tagged `timing_slot`" in text


def test_runs_of_the_hugging_face_trainer_loop_are_their_own_task_rows():
    # trainer.loop=hf_trainer runs sit beside the native ones, each measured against its own loop's baseline.
    native = [frame_row(SST2, *run) for run in SST2_RUNS]
    trainer = [frame_row(SST2, sifter, seed, 2 * time_s, 2 * cost, accuracy - 1, accepted,
                         run_id=f"hf-{sifter['sifter']}-{'-'.join(sifter.values())}-{seed}")
               for sifter, seed, time_s, cost, accuracy, accepted in SST2_RUNS]
    for row in trainer:
        row["params.trainer.loop"] = "hf_trainer"
    native[0]["params.trainer.loop"] = "native"  # runs logged before the setting existed are native too
    table = report.build_table(runs_frame(native + trainer))
    assert sorted(table["task"].unique()) == ["sst2_bert", "sst2_bert (hf_trainer)"]
    hf = row_of(table, "sst2_bert (hf_trainer)", RP3)
    assert hf["accuracy_baseline"] == pytest.approx(80.0)  # the Trainer loop's baseline: 79 and 81, not 80 and 82
    assert row_of(table, "sst2_bert", RP3)["accuracy_baseline"] == pytest.approx(81.0)
    # Both loops' times double together, so each loop's savings against its own baseline are the same.
    assert hf["pct_time_savings"] == pytest.approx(row_of(table, "sst2_bert", RP3)["pct_time_savings"])
    assert report.varying_settings(runs_frame(native + trainer)) == {}
