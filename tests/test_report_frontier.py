"""The report's equal-time verdict: the uniform-subsampling frontier, the headlines chosen on validation, savings
against the baseline nearest in time, and the two timing-slot baselines of a seed. Hand-made frames, values by hand."""

import math
import statistics

import numpy as np
import pandas as pd
import pytest

from sift_bench import report
from sift_bench.report import bootstrap, frontier
from sift_bench.report.bootstrap import SeedValues
from test_report import KEEP25, KEEP50, NONE, RP1, RP3, SST2, frame_row, row_of, runs_frame

SCORED = {**RP1, "beta_value": "2"}  # a third sifted configuration, for the headline tests


def seeded(sifter, time_s, tests, vals=None, accepted=100.0) -> list[dict]:
    """One run per seed (0, 1, ...) with these test (and validation) accuracies; every seed takes time_s."""
    vals = tests if vals is None else vals
    return [frame_row(SST2, sifter, seed, time_s, time_s / 1000, test, accepted, val=val)
            for seed, (test, val) in enumerate(zip(tests, vals))]


# ---------------------------------------------------------------- the curve itself

def test_frontier_interpolates_inside_its_range_only():
    points = frontier.curve([30.0, 0.0, 60.0], [83.0, 85.0, 80.0])  # unsorted on purpose
    assert list(points[0]) == [0.0, 30.0, 60.0]
    assert frontier.value_at(points, 15.0) == pytest.approx(84.0)  # halfway between 85 and 83
    assert frontier.value_at(points, 45.0) == pytest.approx(81.5)  # halfway between 83 and 80
    assert frontier.value_at(points, 60.0) == pytest.approx(80.0)
    assert math.isnan(frontier.value_at(points, -0.1)) and math.isnan(frontier.value_at(points, 60.1))
    assert math.isnan(frontier.value_at(frontier.curve([], []), 0.0))
    # Two controls at the same % time saved are one point, their mean; a point missing y is dropped.
    merged = frontier.curve([0.0, 10.0, 10.0, 20.0], [80.0, 78.0, 76.0, math.nan])
    assert list(merged[0]) == [0.0, 10.0] and list(merged[1]) == [80.0, 77.0]


def test_frontier_inversion_and_the_largest_saving_on_a_curve_that_is_not_monotone():
    decreasing = frontier.curve([0.0, 30.0, 60.0], [85.0, 83.0, 80.0])
    assert frontier.largest_x_at(decreasing, 84.0) == pytest.approx(15.0)
    assert frontier.largest_x_at(decreasing, 81.5) == pytest.approx(45.0)
    assert frontier.largest_x_at(decreasing, 85.0) == pytest.approx(0.0)
    assert math.isnan(frontier.largest_x_at(decreasing, 85.5))  # above every point
    assert math.isnan(frontier.largest_x_at(decreasing, 79.0))  # below all of them
    # Down to 75 at 20 % and back up to 78 at 40 %: 77 is reached at 8 % and at 33.3 %; the larger counts.
    dip = frontier.curve([0.0, 20.0, 40.0], [80.0, 75.0, 78.0])
    assert frontier.largest_x_at(dip, 77.0) == pytest.approx(20.0 + 20.0 * 2.0 / 3.0)
    assert frontier.largest_x_at(dip, 78.0) == pytest.approx(40.0)
    assert frontier.largest_x_at(dip, 79.0) == pytest.approx(4.0)  # only on the first segment


@pytest.mark.parametrize("frontier_accuracy,difference,interval,n_seeds,expected", [
    (math.nan, 1.0, (0.5, 1.5), 3, "outside range"),
    (80.0, math.nan, (0.5, 1.5), 3, "cannot tell: accuracy missing"),
    (80.0, 1.0, (math.nan, math.nan), 2, "cannot tell: needs at least 3 seeds"),
    (80.0, 1.0, (math.nan, math.nan), 3, "cannot tell: at the edge of the frontier's range"),
    (80.0, 1.0, (0.01, 1.5), 3, "above"),
    (80.0, -1.0, (-1.5, -0.01), 3, "below"),
    # The interval decides, not the size of the difference: 0 inside it, or on its edge, is no verdict.
    (80.0, 1.0, (-0.2, 2.0), 5, "within interval"),
    (80.0, 1.0, (0.0, 2.0), 5, "within interval"),
    (80.0, -1.0, (-2.0, 0.0), 5, "within interval"),
])
def test_verdict_vs_frontier_rule(frontier_accuracy, difference, interval, n_seeds, expected):
    assert frontier.verdict_vs_frontier(frontier_accuracy, difference, interval, n_seeds) == expected


# ---------------------------------------------------------------- the bootstrap over seeds, both axes

def by_seed(values) -> dict:
    return dict(enumerate(values))


# The baseline at 80 (0 % saved by definition) and a uniform half at 70, 50 % saved: the frontier is 80 - x / 5.
BASELINE_SEEDS = SeedValues(by_seed([80.0, 80.1, 79.9, 80.05, 79.95, 80.0]), by_seed([0.0] * 6))
HALF_SEEDS = SeedValues(by_seed([70.0, 70.1, 69.9, 70.05, 69.95, 70.0]), by_seed([50.0, 49.5, 50.5, 50.0, 49.8, 50.2]))
POINTS = [BASELINE_SEEDS, HALF_SEEDS]


def point_estimates(row: SeedValues, points: list[SeedValues]) -> tuple[float, float, float]:
    """(frontier at the row's mean savings, accuracy - it, extra savings), as the table computes them from means."""
    curve = frontier.curve([statistics.mean(p.savings.values()) for p in points],
                           [statistics.mean(p.accuracy.values()) for p in points])
    savings, accuracy = statistics.mean(row.savings.values()), statistics.mean(row.accuracy.values())
    at = frontier.value_at(curve, savings)
    return at, accuracy - at, savings - frontier.largest_x_at(curve, accuracy)


def verdict_of(row: SeedValues, points: list[SeedValues]) -> str:
    at, difference, _ = point_estimates(row, points)
    intervals = bootstrap.frontier_intervals(row, points)
    return frontier.verdict_vs_frontier(at, difference, intervals.accuracy_vs_frontier, intervals.n_seeds)


# Every seed 4 points above the frontier at about 25 % saved.
CLEARLY_ABOVE = SeedValues(by_seed([79.0, 79.2, 78.9, 79.1, 79.0, 79.05]),
                           by_seed([25.0, 26.0, 24.0, 25.5, 24.5, 25.0]))
# Savings of 10 % in half the seeds and 40 % in the other half (a scoring pass whose cost swings with the machine),
# at an accuracy that hardly moves: at its mean 25 % saved it is 1 point above the frontier's 75.
SWINGING_SAVINGS = SeedValues(by_seed([76.0, 76.05, 75.95, 76.0, 76.02, 75.98]),
                              by_seed([10.0, 40.0, 10.0, 40.0, 10.0, 40.0]))


def test_a_configuration_above_the_frontier_in_every_seed_is_above():
    intervals = bootstrap.frontier_intervals(CLEARLY_ABOVE, POINTS)
    assert intervals.n_seeds == 6
    assert 3.5 < intervals.accuracy_vs_frontier.lo <= intervals.accuracy_vs_frontier.hi < 4.5
    assert verdict_of(CLEARLY_ABOVE, POINTS) == "above"
    # Uniform subsampling reaches 79.04 at about 5 % saved: some 20 % more than that, in every resample.
    assert 15.0 < intervals.extra_savings.lo <= intervals.extra_savings.hi < 25.0


def test_savings_that_swing_over_seeds_widen_the_interval_where_a_spread_at_fixed_savings_says_above():
    """The point of resampling both axes: seed by seed at the mean savings the difference is +1 ± 0.05, a clear
    `above` by the std rule; resampled, the savings (and with them the frontier it is read at) range from 10 % to
    40 %, so the difference ranges from -2 to +4 points and the interval holds 0."""
    at, difference, _ = point_estimates(SWINGING_SAVINGS, POINTS)
    spread = frontier.spread_over_seeds(25.0, SWINGING_SAVINGS.accuracy, [0.0, 50.0],
                                        [BASELINE_SEEDS.accuracy, HALF_SEEDS.accuracy])
    assert difference == pytest.approx(1.0, abs=0.05) and difference > spread  # the old rule: above
    intervals = bootstrap.frontier_intervals(SWINGING_SAVINGS, POINTS)
    assert intervals.accuracy_vs_frontier.lo < 0 < intervals.accuracy_vs_frontier.hi
    assert verdict_of(SWINGING_SAVINGS, POINTS) == "within interval"


def test_the_bootstrap_is_deterministic_and_does_not_depend_on_the_order_of_the_seeds():
    first = bootstrap.frontier_intervals(SWINGING_SAVINGS, POINTS)
    assert bootstrap.frontier_intervals(SWINGING_SAVINGS, POINTS) == first
    reversed_order = [SeedValues(dict(reversed(list(p.accuracy.items()))), dict(reversed(list(p.savings.items()))))
                      for p in [SWINGING_SAVINGS, *POINTS]]
    assert bootstrap.frontier_intervals(reversed_order[0], reversed_order[1:]) == first


@pytest.mark.parametrize("row", [CLEARLY_ABOVE, SWINGING_SAVINGS])
def test_the_interval_holds_the_point_estimate(row):
    _, difference, extra = point_estimates(row, POINTS)
    intervals = bootstrap.frontier_intervals(row, POINTS)
    assert intervals.accuracy_vs_frontier.lo <= difference <= intervals.accuracy_vs_frontier.hi
    assert intervals.extra_savings.lo <= extra <= intervals.extra_savings.hi


def test_a_row_with_fewer_seeds_than_its_frontier_reads_its_point_inside_its_interval():
    # The frontier's last three seeds sit far lower than its first three, so its means over six seeds differ from
    # those over the three the row shares: the resamples of the shared seeds centre elsewhere, and the table's
    # interval (verdicts.frontier_columns) is moved onto the point estimate over each point's own seeds.
    low_late = SeedValues(by_seed([70.0, 70.1, 69.9, 66.0, 66.1, 65.9]), by_seed([50.0] * 6))
    points = [BASELINE_SEEDS, low_late]
    row = SeedValues({seed: CLEARLY_ABOVE.accuracy[seed] for seed in (0, 1, 2)},
                     {seed: CLEARLY_ABOVE.savings[seed] for seed in (0, 1, 2)})
    _, difference, _ = point_estimates(row, points)
    intervals = bootstrap.frontier_intervals(row, points)
    raw = intervals.accuracy_vs_frontier
    assert not raw.lo <= difference <= raw.hi  # the shared seeds alone miss the point estimate
    moved = bootstrap.recentred(raw, intervals.observed[0], difference)
    assert moved.lo <= difference <= moved.hi
    assert moved.hi - moved.lo == pytest.approx(raw.hi - raw.lo)
    # Where every seed is shared, nothing moves.
    full = bootstrap.frontier_intervals(CLEARLY_ABOVE, POINTS)
    _, full_difference, _ = point_estimates(CLEARLY_ABOVE, POINTS)
    assert bootstrap.recentred(full.accuracy_vs_frontier, full.observed[0], full_difference) == pytest.approx(
        full.accuracy_vs_frontier)


def test_fewer_than_three_common_seeds_give_no_interval_and_no_verdict():
    # The uniform half ran seeds 0 and 1 only; the configuration's seed 2 lost its savings (a slowed host), so
    # against the whole frontier only seeds 0 and 1 have both axes.
    half = SeedValues({0: 70.0, 1: 70.1}, {0: 50.0, 1: 49.5})
    intervals = bootstrap.frontier_intervals(CLEARLY_ABOVE, [BASELINE_SEEDS, half])
    assert intervals.n_seeds == 2 and intervals.accuracy_vs_frontier == bootstrap.NO_INTERVAL
    assert verdict_of(CLEARLY_ABOVE, [BASELINE_SEEDS, half]) == "cannot tell: needs at least 3 seeds"
    lost = SeedValues(CLEARLY_ABOVE.accuracy, {seed: CLEARLY_ABOVE.savings[seed] for seed in (0, 1, 2)})
    assert bootstrap.common_seeds(lost, POINTS) == [0, 1, 2]
    assert bootstrap.frontier_intervals(lost, POINTS).n_seeds == 3


def test_the_vectorised_curves_read_as_the_frontier_does():
    # Two points at 10 % become one at their mean (77); a dip reached twice gives the larger % time saved.
    for xs, ys in (([0.0, 10.0, 10.0, 20.0], [80.0, 78.0, 76.0, 70.0]), ([0.0, 20.0, 40.0], [80.0, 75.0, 78.0])):
        positions, values = bootstrap.curves(np.array([xs] * 5), np.array([ys] * 5))
        curve = frontier.curve(xs, ys)
        queries = np.array([-1.0, 0.0, 10.0, 15.0, 20.0])
        assert bootstrap.values_at(positions, values, queries).tolist() == pytest.approx(
            [frontier.value_at(curve, x) for x in queries], nan_ok=True)
        targets = np.array([81.0, 77.0, 76.0, 78.0, 69.0])
        assert bootstrap.largest_xs_at(positions, values, targets).tolist() == pytest.approx(
            [frontier.largest_x_at(curve, y) for y in targets], nan_ok=True)


# ---------------------------------------------------------------- the frontier in the table

def scored_policy_frame() -> pd.DataFrame:
    """Smart sifting trains on half the samples, as the keep-0.5 control does, but its scoring pass costs 30 s:
    it saves 20 % of the baseline's 100 s where the control saves 50 %. Seed offsets: the baseline and the
    controls +0.0/+0.2/+0.4, smart sifting +0.0/+0.1/+0.5."""
    return runs_frame(seeded(NONE, 100.0, [85.0, 85.2, 85.4])
                      + seeded(KEEP50, 50.0, [80.0, 80.2, 80.4], accepted=50.0)
                      + seeded(KEEP25, 25.0, [75.0, 75.2, 75.4], accepted=25.0)
                      + seeded(RP1, 80.0, [82.0, 82.1, 82.5], accepted=50.0))


def test_a_policy_that_beats_the_control_at_equal_data_can_lose_at_equal_time():
    table = report.build_table(scored_policy_frame())
    sifted = row_of(table, "sst2_bert", RP1)
    # At equal % accepted (50 %) it is 82.2 against the control's 80.2, more than either std (0.26, 0.2): a win.
    pair = report.pair_controls(table).iloc[0]
    assert pair["control_accuracy"] == pytest.approx(80.2) and pair["verdict"] == "beat the control"
    # At equal time it is not: the frontier at 20 % saved runs from (0, 85.2) to (50, 80.2), 85.2 - 5 * 20 / 50.
    assert sifted["pct_time_savings"] == pytest.approx(20.0)
    assert sifted["frontier_accuracy"] == pytest.approx(83.2)
    assert sifted["accuracy_vs_frontier"] == pytest.approx(82.2 - 83.2)
    # Seed by seed: 82.0 - 83.0, 82.1 - 83.2, 82.5 - 83.4.
    assert sifted["accuracy_vs_frontier_std"] == pytest.approx(statistics.stdev([-1.0, -1.1, -0.9]))
    # Every run of a configuration takes the same time, so the bootstrap resamples accuracy only: each resample's
    # difference is a mean of those per-seed differences, and the interval lies among them, below 0.
    assert sifted["bootstrap_seeds"] == 3
    assert -1.1 - 1e-6 <= sifted["accuracy_vs_frontier_lo"] <= sifted["accuracy_vs_frontier_hi"] <= -0.9 + 1e-6
    assert sifted["verdict_vs_frontier"] == "below"
    # Uniform subsampling reaches 82.2 at 30 % saved: 10 points more than smart sifting saves.
    assert sifted["frontier_savings"] == pytest.approx(30.0)
    assert sifted["extra_savings"] == pytest.approx(-10.0)
    assert sifted["val_verdict_vs_frontier"] == "below" and sifted["val_extra_savings"] == pytest.approx(-10.0)
    # The frontier's own points get none of these columns.
    assert table.loc[table["sifter"] != "relative_probabilistic", list(report.FRONTIER_COLUMNS)].isna().all().all()
    line = report.headline_at_equal_time(table).iloc[0]
    assert pd.isna(line["config"])
    assert line["statement"] == "none: no configuration is above the uniform-subsampling frontier on validation"


def test_the_table_s_verdict_resamples_each_seed_s_savings():
    # Six seeds at the same accuracies; smart sifting takes 90 s in even seeds and 60 s in odd ones (10 % and 40 %
    # saved). At its mean 25 % it is 1 point above the frontier's 75, and seed by seed at that fixed 25 % the
    # difference never moves (std 0), but the resampled savings read the frontier anywhere from 78 to 72.
    rows = (seeded(NONE, 100.0, [80.0] * 6) + seeded(KEEP50, 50.0, [70.0] * 6, accepted=50.0)
            + [frame_row(SST2, RP1, seed, time_s, time_s / 1000, 76.0, 50.0)
               for seed, time_s in enumerate([90.0, 60.0] * 3)])
    sifted = row_of(report.build_table(runs_frame(rows)), "sst2_bert", RP1)
    assert sifted["pct_time_savings"] == pytest.approx(25.0) and sifted["accuracy_vs_frontier"] == pytest.approx(1.0)
    assert sifted["accuracy_vs_frontier_std"] == pytest.approx(0.0, abs=1e-9)
    assert sifted["bootstrap_seeds"] == 6
    assert sifted["accuracy_vs_frontier_lo"] < 0 < sifted["accuracy_vs_frontier_hi"]
    assert sifted["verdict_vs_frontier"] == sifted["val_verdict_vs_frontier"] == "within interval"
    assert sifted["extra_savings_lo"] < sifted["extra_savings"] < sifted["extra_savings_hi"]


def test_the_frontier_is_recomputed_by_hand_from_table_csv(tmp_path):
    table = report.build_table(scored_policy_frame())
    table.round(6).to_csv(tmp_path / "table.csv", index=False)
    rows = pd.read_csv(tmp_path / "table.csv")
    points = rows[rows["sifter"].isin(["none", "random"])]
    xs = [0.0 if sifter == "none" else savings for sifter, savings in zip(points["sifter"], points["pct_time_savings"])]
    sifted = rows[rows["sifter"] == "relative_probabilistic"].iloc[0]
    by_hand = frontier.value_at(frontier.curve(xs, points["test_accuracy"]), sifted["pct_time_savings"])
    assert sifted["frontier_accuracy"] == pytest.approx(by_hand, abs=1e-5)
    assert sifted["accuracy_vs_frontier"] == pytest.approx(sifted["test_accuracy"] - by_hand, abs=1e-5)


def test_outside_the_frontier_s_range_there_is_no_verdict_and_a_dip_gives_the_largest_saving():
    # Controls at 40 % (77) and 60 % (79): the frontier dips and rises. A configuration saving 70 % is beyond it.
    keep40 = {**KEEP25, "keep_fraction": "0.4"}
    frame = runs_frame(seeded(NONE, 100.0, [80.0, 80.0]) + seeded(KEEP50, 60.0, [77.0, 77.0], accepted=50.0)
                       + seeded(keep40, 40.0, [79.0, 79.0], accepted=40.0)
                       + seeded(RP3, 30.0, [78.0, 78.4], accepted=27.0)
                       + seeded(RP1, 70.0, [78.0, 78.4], accepted=52.0))
    table = report.build_table(frame)
    beyond = row_of(table, "sst2_bert", RP3)
    assert beyond["pct_time_savings"] == pytest.approx(70.0)
    assert pd.isna(beyond["frontier_accuracy"]) and beyond["verdict_vs_frontier"] == "outside range"
    inside = row_of(table, "sst2_bert", RP1)  # 30 % saved at 78.2
    # The frontier: (0, 80), (40, 77), (60, 79). At 30 %: 80 - 3 * 30 / 40 = 77.75.
    assert inside["frontier_accuracy"] == pytest.approx(77.75)
    # 78.2 is reached at 24 % on the way down and at 52 % on the way up: the larger counts.
    assert inside["frontier_savings"] == pytest.approx(40.0 + 20.0 * (78.2 - 77.0) / 2.0)
    assert inside["extra_savings"] == pytest.approx(30.0 - 52.0)
    assert inside["accuracy_vs_frontier_std"] == pytest.approx(statistics.stdev([78.0 - 77.75, 78.4 - 77.75]))


# ---------------------------------------------------------------- headlines: chosen on validation

def chosen_on_validation_frame(extra: list[dict] = ()) -> pd.DataFrame:
    """Baseline 85 at 100 s, the keep-0.5 control 80 at 50 s (seeds 1 and 2 are seed 0 + 0.1 and + 0.2 everywhere,
    so every seed's difference from the frontier is the same, its interval a point and its verdict clear; the
    means are seed 0 + 0.1). beta=3 saves 30 % at test 84.5, val 83.5; beta=2 saves 20 % at test 83.5, val 84.7."""
    def both(value):
        return [value, value + 0.1, value + 0.2]

    return runs_frame(seeded(NONE, 100.0, both(85.0)) + seeded(KEEP50, 50.0, both(80.0), accepted=50.0)
                      + seeded(RP3, 70.0, both(84.5), both(83.5), accepted=40.0)
                      + seeded(SCORED, 80.0, both(83.5), both(84.7), accepted=45.0) + list(extra))


def test_the_equal_time_headline_chooses_on_validation_and_reports_test():
    table = report.build_table(chosen_on_validation_frame())
    beta3, beta2 = row_of(table, "sst2_bert", RP3), row_of(table, "sst2_bert", SCORED)
    # On test, beta=3 buys more over uniform subsampling: the frontier 85.1 - x / 10 reaches 84.6 at 5 % (extra
    # 25) and 83.6 at 15 % (extra 5). On validation beta=2 does: 83.6 at 15 % (extra 15), 84.8 at 3 % (17).
    assert beta3["extra_savings"] == pytest.approx(25.0) and beta2["extra_savings"] == pytest.approx(5.0)
    assert beta3["val_extra_savings"] == pytest.approx(15.0) and beta2["val_extra_savings"] == pytest.approx(17.0)
    assert beta3["val_verdict_vs_frontier"] == beta2["val_verdict_vs_frontier"] == "above"
    line = report.headline_at_equal_time(table).iloc[0]
    assert line["config"] == beta2["config"]
    assert line["test_accuracy"] == pytest.approx(83.6) and line["extra_savings"] == pytest.approx(5.0)
    assert line["accuracy_vs_frontier"] == pytest.approx(83.6 - (85.1 - 2.0))
    assert line["accuracy_vs_frontier_lo"] == pytest.approx(0.5)
    assert line["accuracy_vs_frontier_hi"] == pytest.approx(0.5)
    assert line["verdict_vs_frontier"] == "above" and not line["ranked_by_full_savings"]
    assert line["statement"].startswith(f"{beta2['config']}: 20.0 % time saved at test accuracy 83.60, "
                                        "+0.50 [+0.50, +0.50] points against the frontier's 83.10 (above)")
    assert "+5.0 [+5.0, +5.0] % time saved beyond uniform subsampling" in line["statement"]
    assert "+17.0 [+17.0, +17.0] % extra savings; n=3, interval over 3 seeds)" in line["statement"]


def test_the_within_half_a_point_headline_tests_on_validation_and_reports_test():
    table = report.build_table(chosen_on_validation_frame())
    # beta=3 is 0.5 below the baseline on test but 1.5 on validation: out. beta=2 is 0.3 below on validation
    # (within) and 1.5 below on test, which is what the headline reports.
    line = report.headline(table).iloc[0]
    assert line["config"] == row_of(table, "sst2_bert", SCORED)["config"]
    assert line["val_accuracy_delta"] == pytest.approx(-0.3)
    assert line["accuracy_delta"] == pytest.approx(-1.5) and line["test_accuracy"] == pytest.approx(83.6)


def test_a_validation_accuracy_above_the_whole_frontier_ranks_by_its_full_savings():
    # beta=1 saves 40 % at val 86 (above the baseline itself): no frontier_savings, so it ranks by 40 > 17.
    best = seeded(RP1, 60.0, [84.0, 84.1, 84.2], [86.0, 86.1, 86.2], accepted=35.0)
    table = report.build_table(chosen_on_validation_frame(best))
    beta1 = row_of(table, "sst2_bert", RP1)
    assert pd.isna(beta1["val_frontier_savings"]) and pd.isna(beta1["val_extra_savings"])
    line = report.headline_at_equal_time(table).iloc[0]
    assert line["config"] == beta1["config"] and line["ranked_by_full_savings"]
    assert "ranks by its whole 40.0 % time saved" in line["statement"]
    # Per selection rule each sifter gets its own line; the random control, being the frontier, gets none.
    per_sifter = report.headline_at_equal_time(table, per_sifter=True)
    assert list(per_sifter["sifter"]) == ["relative_probabilistic"]


# ---------------------------------------------------------------- time references and timing slots

def timed(row: dict, start: str, end: str, work: float) -> dict:
    return {**row, "start_time": f"2026-01-01 {start}+00:00", "end_time": f"2026-01-01 {end}+00:00",
            "metrics.work_trained": work}


def test_each_run_is_timed_against_the_baseline_nearest_in_time():
    # Baseline A at 10:00 trains 1000 samples in 100 s (0.1 s each); B at 12:00, 1200 in 150 s (0.125 s): the
    # machine slowed. Mean baseline work 1100, so the references are 110 s and 137.5 s.
    rows = [timed(frame_row(SST2, NONE, 0, 100.0, 0.1, 85.0, 100.0, run_id="base-A"), "10:00:00", "10:01:40", 1000),
            timed(frame_row(SST2, NONE, 1, 150.0, 0.15, 85.0, 100.0, run_id="base-B"), "12:00:00", "12:02:30", 1200),
            timed(frame_row(SST2, RP1, 0, 88.0, 0.088, 84.0, 50.0, run_id="near-A"), "10:20:00", "10:21:28", 550),
            timed(frame_row(SST2, RP1, 1, 110.0, 0.11, 84.0, 50.0, run_id="near-B"), "11:50:00", "11:51:50", 600)]
    used = runs_frame(rows)
    savings = report.paired_savings(report.run_rows(used)).set_index("run_id")
    assert savings.loc["near-A", "reference_run"] == "base-A" and savings.loc["near-B", "reference_run"] == "base-B"
    assert savings.loc["near-A", "reference_time_s"] == pytest.approx(110.0)
    assert savings.loc["near-B", "reference_time_s"] == pytest.approx(137.5)
    assert savings.loc["near-A", "run_time_savings"] == pytest.approx(20.0)
    assert savings.loc["near-B", "run_time_savings"] == pytest.approx(20.0)
    # Each baseline against itself: 1 - 100 / 110 and 1 - 150 / 137.5, whose mean is 0.
    assert savings.loc["base-A", "run_time_savings"] == pytest.approx(100 * (1 - 100 / 110))
    table = report.build_table(used)
    assert row_of(table, "sst2_bert", NONE)["pct_time_savings"] == pytest.approx(0.0, abs=1e-9)
    sifted = row_of(table, "sst2_bert", RP1)
    assert sifted["pct_time_savings"] == pytest.approx(20.0) and sifted["pct_time_savings_std"] == pytest.approx(0.0)
    # Against the mean baseline time (125 s) they would have read 29.6 % and 12 %.


def test_a_contended_baseline_is_a_time_reference_only_when_no_clean_one_exists():
    # base-A shared the machine (0.3 of a core to other processes) and ran slow; base-B, later, is clean.
    rows = [{**timed(frame_row(SST2, NONE, 0, 150.0, 0.15, 85.0, 100.0, run_id="base-A"), "10:00:00", "10:02:30", 1000),
             "metrics.other_cpu_fraction": 0.3},
            {**timed(frame_row(SST2, NONE, 1, 100.0, 0.1, 85.0, 100.0, run_id="base-B"), "12:00:00", "12:01:40", 1000),
             "metrics.other_cpu_fraction": 0.01},
            {**timed(frame_row(SST2, RP1, 0, 80.0, 0.08, 84.0, 50.0, run_id="near-A"), "10:10:00", "10:11:20", 500),
             "metrics.other_cpu_fraction": 0.01}]
    savings = report.paired_savings(report.run_rows(runs_frame(rows))).set_index("run_id")
    assert savings.loc["near-A", "reference_run"] == "base-B"  # not the nearer, contended one
    assert savings.loc["near-A", "run_time_savings"] == pytest.approx(20.0)
    assert savings.loc["base-A", "run_time_savings"] == pytest.approx(-50.0)  # its slowness shows
    # With no clean baseline on the kind, the contended one is all there is.
    only_contended = [rows[0], rows[2]]
    savings = report.paired_savings(report.run_rows(runs_frame(only_contended))).set_index("run_id")
    assert savings.loc["near-A", "reference_run"] == "base-A"


def slot_rows() -> list[dict]:
    """Seeds 0 and 1, each with a baseline timed first and last in its block (same config_hash) and one sifted
    run between them; seed 0's sifted run also has an earlier FINISHED run of the same config, superseded."""
    rows = []
    for seed, (first_acc, last_acc) in enumerate(((80.0, 81.0), (82.0, 82.0))):
        hour = 10 + 2 * seed
        first = frame_row(SST2, NONE, seed, 100.0, 0.1, first_acc, 100.0, run_id=f"first-{seed}")
        sifted = frame_row(SST2, RP1, seed, 80.0, 0.08, 81.0, 50.0, run_id=f"sifted-{seed}")
        last = frame_row(SST2, NONE, seed, 120.0, 0.12, last_acc, 100.0, run_id=f"last-{seed}")
        rows += [{**timed(first, f"{hour}:00:00", f"{hour}:01:40", 1000), "tags.config_hash": f"h{seed}",
                  "tags.timing_slot": "first"},
                 {**timed(sifted, f"{hour}:05:00", f"{hour}:06:20", 500), "tags.config_hash": f"s{seed}"},
                 {**timed(last, f"{hour}:30:00", f"{hour}:32:00", 1000), "tags.config_hash": f"h{seed}",
                  "tags.timing_slot": "last"}]
    superseded = {**rows[1], "run_id": "sifted-0-before", "start_time": "2026-01-01 09:00:00+00:00",
                  "end_time": "2026-01-01 09:02:00+00:00"}
    return rows + [superseded]


def test_the_two_timing_slot_baselines_are_two_timings_and_one_seed():
    used, excluded = report.split_runs(runs_frame(slot_rows()), "cpu")
    assert sorted(used["run_id"]) == ["first-0", "first-1", "last-0", "last-1", "sifted-0", "sifted-1"]
    assert excluded.set_index("run_id").loc["sifted-0-before", "reason"] == "rerun: same config_hash as sifted-0"
    table = report.build_table(used)
    base = row_of(table, "sst2_bert", NONE)
    assert base["n_seeds"] == 2 and base["n_runs"] == 4 and base["seeds"] == "0 1"
    # Seed 0 is the mean of its two timings' accuracies (80.5), seed 1 82: one seed each.
    assert base["test_accuracy"] == pytest.approx((80.5 + 82.0) / 2)
    assert base["test_accuracy_std"] == pytest.approx(statistics.stdev([80.5, 82.0]))
    sifted = row_of(table, "sst2_bert", RP1)
    assert sifted["accuracy_delta"] == pytest.approx(((81.0 - 80.5) + (81.0 - 82.0)) / 2)
    # Both are pace measurements: each sifted run is nearest the first-slot baseline of its block (100 s, at the
    # mean work of 1000 samples), not the slower last one (120 s) or the mean of the two.
    assert sifted["pct_time_savings"] == pytest.approx(20.0)
