"""The budget view: two report folders of one task at different training budgets, matched by configuration."""

import pandas as pd
import pytest

from sift_bench import report
from sift_bench.report import status
from sift_bench.report.__main__ import main
from test_report import KEEP25, KEEP50, NONE, RP1, RP3, SST2, frame_row, runs_frame

KEEP67 = {**KEEP25, "keep_fraction": "0.6667"}


def report_folder(folder, epochs: int, runs: list[tuple]) -> pd.DataFrame:
    """A report written by the CLI from runs.csv, as results/<scale> holds it; returns its table."""
    rows = [frame_row(SST2, *run) for run in runs]
    for row in rows:
        row["params.trainer.epochs"] = str(epochs)
    folder.mkdir()
    runs_frame(rows).to_csv(folder / "runs.csv", index=False)
    assert main(["--from-csv", str(folder), "--out", str(folder)]) == 0
    return pd.read_csv(folder / "table.csv")


# (sifter, seed, train_time_s, cost_usd, test_accuracy, pct_accepted): at 2 epochs smart sifting sits below the
# frontier; at 4 epochs the baseline has saturated and the same setting sits above it. Three seeds, the fewest a
# verdict's interval resamples.
SHORT = [(NONE, 0, 100.0, 0.1, 80.0, 100.0), (NONE, 1, 100.0, 0.1, 81.0, 100.0), (NONE, 2, 100.0, 0.1, 80.5, 100.0),
         (KEEP25, 0, 40.0, 0.04, 70.0, 25.0), (KEEP25, 1, 40.0, 0.04, 71.0, 25.0), (KEEP25, 2, 40.0, 0.04, 70.5, 25.0),
         (KEEP50, 0, 60.0, 0.06, 75.0, 50.0), (KEEP50, 1, 60.0, 0.06, 76.0, 50.0), (KEEP50, 2, 60.0, 0.06, 75.5, 50.0),
         (KEEP67, 0, 75.0, 0.075, 78.0, 66.7), (KEEP67, 1, 75.0, 0.075, 79.0, 66.7),
         (KEEP67, 2, 75.0, 0.075, 78.5, 66.7),
         (RP1, 0, 62.0, 0.062, 74.0, 50.0), (RP1, 1, 62.0, 0.062, 75.5, 50.0), (RP1, 2, 62.0, 0.062, 74.5, 50.0),
         (RP3, 0, 45.0, 0.045, 70.0, 25.0), (RP3, 1, 45.0, 0.045, 71.0, 25.0), (RP3, 2, 45.0, 0.045, 70.5, 25.0)]
LONG = [(NONE, 0, 200.0, 0.2, 90.0, 100.0), (NONE, 1, 200.0, 0.2, 90.4, 100.0), (NONE, 2, 200.0, 0.2, 90.2, 100.0),
        (KEEP25, 0, 80.0, 0.08, 85.0, 25.0), (KEEP25, 1, 80.0, 0.08, 85.4, 25.0), (KEEP25, 2, 80.0, 0.08, 85.2, 25.0),
        (KEEP50, 0, 120.0, 0.12, 87.0, 50.0), (KEEP50, 1, 120.0, 0.12, 87.2, 50.0),
        (KEEP50, 2, 120.0, 0.12, 87.2, 50.0),
        (KEEP67, 0, 150.0, 0.15, 88.5, 66.7), (KEEP67, 1, 150.0, 0.15, 88.9, 66.7),
        (KEEP67, 2, 150.0, 0.15, 88.7, 66.7),
        (RP1, 0, 124.0, 0.124, 89.6, 50.0), (RP1, 1, 124.0, 0.124, 89.8, 50.0), (RP1, 2, 124.0, 0.124, 89.7, 50.0)]


def test_each_configuration_is_followed_across_budgets(tmp_path):
    short = report_folder(tmp_path / "short", 2, SHORT)
    long = report_folder(tmp_path / "long", 4, LONG)
    assert main(["--budget-from", str(tmp_path / "short"), str(tmp_path / "long"), "--out", str(tmp_path / "b")]) == 0
    budget = pd.read_csv(tmp_path / "b" / "budget.csv")
    rp1 = budget[(budget["sifter"] == "relative_probabilistic")]
    # beta_value=3 ran at one budget only: no curve, no row.
    assert rp1["settings"].nunique() == 1 and "beta_value=1" in rp1["settings"].iloc[0]
    assert list(rp1["budget_epochs"]) == [2, 4]
    for epochs, table in ((2, short), (4, long)):
        mine = table[(table["sifter"] == "relative_probabilistic") & (table["beta_value"] == 1)].iloc[0]
        row = rp1[rp1["budget_epochs"] == epochs].iloc[0]
        for name in ("accuracy_vs_frontier", "extra_savings", "pct_time_savings", "test_accuracy"):
            assert row[name] == pytest.approx(mine[name], nan_ok=True)
    # The story the numbers were made to tell: below the frontier at 2 epochs, above it at 4.
    assert rp1.iloc[0]["accuracy_vs_frontier"] < 0 < rp1.iloc[1]["accuracy_vs_frontier"]
    assert set(budget["sifter"]) == {"none", "random", "relative_probabilistic"}
    text = (tmp_path / "b" / "budget.md").read_text()
    assert "--budget-from" in text and "| relative_probabilistic" in text
    assert (tmp_path / "b" / "budget.png").stat().st_size > 0


def test_a_folder_with_two_budgets_of_one_task_is_refused(tmp_path, capsys):
    report_folder(tmp_path / "short", 2, SHORT)
    mixed = tmp_path / "mixed"
    rows = [frame_row(SST2, *run) for run in LONG]
    for index, row in enumerate(rows):
        row["params.trainer.epochs"] = "4" if index % 2 else "3"
    mixed.mkdir()
    runs_frame(rows).to_csv(mixed / "runs.csv", index=False)
    assert main(["--from-csv", str(mixed), "--out", str(mixed)]) == 0
    with pytest.raises(SystemExit) as refused:
        main(["--budget-from", str(tmp_path / "short"), str(mixed), "--out", str(tmp_path / "b")])
    assert refused.value.code == 2
    assert "trained for ['3', '4'] epochs" in capsys.readouterr().err


def test_the_status_table_has_a_row_per_task_and_budget_from_each_table(tmp_path, capsys):
    short = report_folder(tmp_path / "short", 2, SHORT)
    report_folder(tmp_path / "long", 4, LONG)
    one_seed = tmp_path / "one_seed"
    # One seed, whose uniform half has no time (as when its savings are left out): its accuracy counts.
    report_folder(one_seed, 8, [(*run[:2], None, *run[3:]) if run[0] is KEEP50 else run
                                for run in LONG if run[1] == 0])
    capsys.readouterr()
    assert main(["--budget-from", str(tmp_path / "short"), str(tmp_path / "long"), str(one_seed),
                 "--out", str(tmp_path / "b")]) == 0
    lines = status.status_lines([tmp_path / "short", tmp_path / "long", one_seed])
    printed = capsys.readouterr().out
    assert "\n".join(lines) in printed and "\n".join(lines) in (tmp_path / "b" / "budget.md").read_text()
    header, rule, *rows = lines
    assert len(rows) == 3 and rule.count("---") == header.count(" | ") + 1
    cells = {row.split(" | ")[1]: row.strip("| ").split(" | ") for row in rows}
    assert list(cells) == ["2 epochs", "4 epochs", "8 epochs"]  # by budget within the task

    baseline = short[short["sifter"] == "none"].iloc[0]
    example = short[(short["sifter"] == "relative_probabilistic") & (short["beta_value"] == 3)].iloc[0]
    half = short[(short["sifter"] == "random") & (short["keep_fraction"] == 0.5)].iloc[0]
    task, budget, seeds, baseline_cell, best, example_cell, half_cell = cells["2 epochs"]
    assert (task, seeds) == ("sst2_bert", "3")
    assert baseline_cell == f"{baseline['test_accuracy']:.2f} ± {baseline['test_accuracy_std']:.2f} %"
    # Against the frontier: the difference and its 95 % interval, not a ± (every seed sits alike here: a point).
    assert example["verdict_vs_frontier"] == "below" and example["bootstrap_seeds"] == 3
    assert example_cell == (f"{example['pct_time_savings']:.1f} % saved at {example['test_accuracy']:.2f} %, "
                            f"{example['accuracy_vs_frontier']:+.2f} [{example['accuracy_vs_frontier_lo']:+.2f}, "
                            f"{example['accuracy_vs_frontier_hi']:+.2f}] points (below)")
    assert half_cell == f"{half['pct_time_savings']:.1f} % saved at {half['test_accuracy']:.2f} %"
    chosen = report.headline_at_equal_time(short).iloc[0]
    assert best.startswith(f"{chosen['config']}: " if isinstance(chosen["config"], str) else "none above it")
    # The long table has no beta_value=3 row; one seed gives no verdict and says so.
    assert cells["4 epochs"][5] == "not run"
    assert cells["8 epochs"][2] == "1" and cells["8 epochs"][4] == "no verdict yet: no configuration has 3 seeds"
    assert cells["8 epochs"][6] == "no savings counted (report.md's notes say why) at 87.00 %"


def test_a_status_without_a_frontier_verdict_says_so(tmp_path):
    # Seed 1 of smart sifting ran, seed 1 of one random control did not: the frontier has two seeds in common with
    # the rule, too few to resample, so no configuration has a verdict, though some have 3 seeds.
    runs = [run for run in LONG if not (run[0] is KEEP25 and run[1] == 1)]
    table = report_folder(tmp_path / "long", 4, runs)
    sifted = table[table["sifter"] == "relative_probabilistic"].iloc[0]
    assert sifted["n_seeds"] == 3 and sifted["val_bootstrap_seeds"] == 2
    assert sifted["val_verdict_vs_frontier"] == "cannot tell: needs at least 3 seeds"
    cells = status.status_lines([tmp_path / "long"])[2].strip("| ").split(" | ")
    assert cells[4] == "no verdict yet: no configuration has 3 seeds in common with every point of the frontier"
    # With that seed back, the verdict is there and the cell names the rule or says none is above.
    report_folder(tmp_path / "whole", 4, LONG)
    cells = status.status_lines([tmp_path / "whole"])[2].strip("| ").split(" | ")
    assert not cells[4].startswith("no verdict yet")
