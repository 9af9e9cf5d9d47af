"""Work in training-sample equivalents (sift_bench.report.work) and the anchors' claims (sift_bench.report.claims):
hand-made frames, values by hand, and the committed claims checked against the tables they read."""

import math
from pathlib import Path

import pandas as pd
import pytest

from sift_bench import report
from sift_bench.report import frontier, work
from sift_bench.report.__main__ import main
from sift_bench.sifting.config import BUILT_IN_POLICIES
from test_report import KEEP25, KEEP50, NONE, RP1, SST2, frame_row, row_of, runs_frame

RESULTS = Path(__file__).resolve().parent.parent / "results"


def seeded(sifter, time_s, tests, *, trained, seen=1000, scored=None, sift_time=0.0, accepted=100.0,
           world_size=None) -> list[dict]:
    """One run per seed with these test accuracies, `trained` of `seen` samples trained in time_s, scoring taking
    sift_time; `scored` logged as samples_scored when given (runs before the metric lack it); batch size 1."""
    rows = []
    for seed, test in enumerate(tests):
        row = frame_row(SST2, sifter, seed, time_s, time_s / 1000, test, accepted)
        row.update({"metrics.samples_trained": trained, "metrics.samples_seen": seen, "metrics.sift_time_s": sift_time,
                    "params.trainer.batch_size": "1"})
        if scored is not None:
            row["metrics.samples_scored"] = scored
        if world_size is not None:
            row["tags.world_size"] = str(world_size)
        rows.append(row)
    return rows


def scoring_frame(rp_tests=(82.0, 82.1, 82.5), rp_scored=None) -> pd.DataFrame:
    """The baseline trains 1000 samples in 100 s (0.1 s each); the controls half and a quarter of them. Smart
    sifting trains 500 and scores the 990 candidates after its 10-step delay (batch 1) in 30 s of its 80: a
    scoring forward costs (30 / 990) / (50 / 500) = 0.303 of a training step per sample."""
    return runs_frame(seeded(NONE, 100.0, [85.0, 85.2, 85.4], trained=1000)
                      + seeded(KEEP50, 50.0, [80.0, 80.2, 80.4], trained=500, accepted=50.0)
                      + seeded(KEEP25, 25.0, [75.0, 75.2, 75.4], trained=250, accepted=25.0)
                      + seeded(RP1, 80.0, list(rp_tests), trained=500, scored=rp_scored, sift_time=30.0,
                               accepted=50.0))


def test_work_counts_scoring_at_its_measured_cost_and_the_break_even_puts_the_row_on_the_frontier():
    table = report.build_table(scoring_frame())
    sifted = row_of(table, "sst2_bert", RP1)
    # No samples_scored logged: smart sifting scored samples_seen - sift_delay * batch_size = 1000 - 10.
    assert sifted["samples_scored"] == pytest.approx(990.0)
    ratio = (30.0 / 990.0) / (50.0 / 500.0)
    assert sifted["scoring_cost_ratio"] == pytest.approx(ratio)
    # Work: 500 + 0.303 * 990 = 800 sample-equivalents of the baseline's 1000: 20 % saved, as its time says.
    assert sifted["work_savings"] == pytest.approx(20.0)
    # The controls score nothing: their work is what they trained.
    controls = table[table["sifter"] == "random"].sort_values("work_savings")
    assert list(controls["work_savings"]) == pytest.approx([50.0, 75.0])
    assert table.loc[table["sifter"] == "none", "work_savings"].iloc[0] == 0.0
    # At 20 % work saved the frontier runs from (0, 85.2) to (50, 80.2): 83.2; the row's 82.2 is 1 below.
    assert sifted["work_frontier_accuracy"] == pytest.approx(83.2)
    assert sifted["work_accuracy_vs_frontier"] == pytest.approx(-1.0)
    assert sifted["work_verdict_vs_frontier"] == "below"
    # The frontier reaches 82.2 at 30 % work saved: (1000 * 0.7 - 500) / 990 = 0.202, below the measured 0.303.
    break_even = sifted["break_even_scoring_cost"]
    assert break_even == pytest.approx(200.0 / 990.0)
    assert break_even < sifted["scoring_cost_ratio"]
    # At exactly that ratio the row's work savings sit where the frontier equals its accuracy.
    savings_there = 100 * (1 - (500 + break_even * 990) / 1000)
    curve = frontier.curve([0.0, 50.0, 75.0], [85.2, 80.2, 75.2])
    assert frontier.value_at(curve, savings_there) == pytest.approx(sifted["test_accuracy"])
    # Rules that score nothing have no break-even.
    assert table.loc[table["sifter"] != "relative_probabilistic", "break_even_scoring_cost"].isna().all()


def test_a_rule_above_every_frontier_point_breaks_even_at_any_cost_and_one_below_with_free_scoring_never():
    above = row_of(report.build_table(scoring_frame(rp_tests=(86.0, 86.1, 86.2))), "sst2_bert", RP1)
    assert above["break_even_scoring_cost"] == math.inf
    assert above["work_verdict_vs_frontier"] == "above"
    # 80.1 is reached by uniform subsampling at 51 % work saved, more than the 50 % its training alone saves.
    below = row_of(report.build_table(scoring_frame(rp_tests=(80.0, 80.1, 80.2))), "sst2_bert", RP1)
    assert below["break_even_scoring_cost"] < 0


def test_a_logged_samples_scored_wins_over_the_derived_count_and_counts_every_rank():
    frame = scoring_frame(rp_scored=495)
    frame.loc[frame["tags.sifter"] == "relative_probabilistic", "tags.world_size"] = "2"
    rows = work.add_work(report.run_rows(frame).assign(task="sst2_bert"))
    smart = rows[rows["sifter"] == "relative_probabilistic"]
    assert list(smart["samples_scored"]) == [990.0] * 3
    # Per rank: 30 s over 495 scored, 50 s over 250 trained.
    assert smart["run_scoring_cost"].iloc[0] == pytest.approx((30.0 / 495) / (50.0 / 250))


def test_a_policy_of_unknown_scoring_that_logged_nothing_has_unknown_work():
    frame = scoring_frame()
    other = seeded({"sifter": "my_policy", "sift_delay": "10"}, 70.0, [81.0, 81.0, 81.0], trained=600)
    table = report.build_table(pd.concat([frame, runs_frame(other)], ignore_index=True))
    mine = table[table["sifter"] == "my_policy"].iloc[0]
    assert math.isnan(mine["samples_scored"]) and math.isnan(mine["work_savings"])
    assert mine["work_verdict_vs_frontier"] == "outside range"


# ---------------------------------------------------------------- claims

def folder_of(tmp_path, name: str, epochs: int, frame: pd.DataFrame) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    frame = frame.copy()
    frame["params.trainer.epochs"] = str(epochs)
    frame.to_csv(folder / "runs.csv", index=False)
    assert main(["--from-csv", str(folder), "--out", str(folder)]) == 0
    return folder


def test_claims_set_each_anchor_beside_its_closest_configuration(tmp_path, capsys):
    short = folder_of(tmp_path, "short", 2, scoring_frame())
    long = folder_of(tmp_path, "long", 4, scoring_frame(rp_tests=(85.0, 85.1, 85.3)))
    claims_md = tmp_path / "claims" / "claims.md"
    assert main(["--budget-from", str(short), str(long), "--out", str(tmp_path / "b"), "--claims",
                 str(claims_md)]) == 0
    claims = pd.read_csv(claims_md.with_suffix(".csv"))
    sagemaker = claims[claims["source"].str.startswith("Amazon SageMaker")]
    assert list(sagemaker["budget_epochs"]) == [2, 4]
    for (_, row), folder in zip(sagemaker.iterrows(), (short, long)):
        table = pd.read_csv(folder / "table.csv")
        mine = table[table["sifter"] == "relative_probabilistic"].iloc[0]
        assert row["config"] == mine["config"] and row["table"] == str(folder)
        for name in ("pct_time_savings", "test_accuracy", "accuracy_vs_frontier", "work_savings"):
            assert row[name] == pytest.approx(mine[name])
        assert row["verdict_vs_frontier"] == mine["verdict_vs_frontier"]
    # Nothing of InfoBatch or a proxy scorer was run here: those claims stand alone, with no borrowed figure.
    for source in ("InfoBatch", "airbench96"):
        alone = claims[claims["source"].str.startswith(source)]
        assert len(alone) == 1 and alone["task"].isna().all()
    text = claims_md.read_text()
    assert "--claims" in text and "Nothing measured by sift_bench comes close" in text
    assert "claim rows" in capsys.readouterr().out


def test_claims_need_the_budget_folders(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--claims", str(tmp_path / "claims.md")])
    assert stop.value.code == 2 and "--budget-from" in capsys.readouterr().err


def test_the_committed_claims_quote_the_tables_they_read():
    claims = pd.read_csv(RESULTS / "claims.csv")
    measured = claims[claims["task"].notna()]
    assert len(measured) >= 4
    assert {"Amazon SageMaker", "InfoBatch", "Selective Backprop"} <= {
        source.split(" (")[0].replace(" smart sifting", "") for source in measured["source"]}
    for _, row in measured.iterrows():
        table = pd.read_csv(RESULTS.parent / row["table"] / "table.csv")
        mine = table[(table["task"] == row["task"]) & (table["config"] == row["config"])]
        assert len(mine) == 1, (row["table"], row["task"], row["config"])
        for name in ("pct_time_savings", "test_accuracy", "accuracy_delta", "accuracy_vs_frontier"):
            assert row[name] == pytest.approx(mine.iloc[0][name], nan_ok=True), name
        assert str(row["verdict_vs_frontier"]) == str(mine.iloc[0]["verdict_vs_frontier"])
    assert "claims.md" in (RESULTS.parent / "README.md").read_text()


def test_infobatch_runs_from_before_its_official_schedule_are_left_out_as_superseded():
    old = {"sifter": "infobatch", "prune_ratio": "0.5", "sift_delay": "10"}
    official = {**old, "anneal_by": "epochs"}
    runs = runs_frame([frame_row(SST2, NONE, 0, 100.0, 0.1, 85.0, 100.0),
                       frame_row(SST2, old, 0, 80.0, 0.08, 84.0, 80.0),
                       frame_row(SST2, official, 0, 99.0, 0.099, 85.0, 100.0, run_id="official")])
    used, excluded = report.split_runs(runs, "cpu")
    assert list(used["run_id"]) == [runs.loc[0, "run_id"], "official"]
    assert list(excluded["kind"]) == ["superseded"] and excluded["reason"].iloc[0].startswith("superseded: InfoBatch")
    assert report.exclusion_of_reason(excluded["reason"].iloc[0]) == "superseded"


def test_the_sifters_that_never_score_are_those_whose_policy_declares_no_scoring_pass():
    declared = {policy.name for policy in BUILT_IN_POLICIES if not (policy.scores or policy.scores_on_demand)}
    assert set(work.NEVER_SCORE) == declared
