"""The documentation holds: its MLflow search examples are ones MLflow accepts, each selecting the runs it says,
every relative link in README.md and docs/ leads to a file (and a heading) that exists, and README's results table
is the one the committed reports print."""

import re

from mlflow.tracking import MlflowClient

from conftest import ROOT
from sift_bench.report import status

SEARCH_START = re.compile(r"^(tags|params|metrics|attributes)\.")


def readme_searches() -> list[str]:
    blocks = re.findall(r"^```text\n(.*?)^```", (ROOT / "docs" / "configuration.md").read_text(), flags=re.M | re.S)
    return [line for block in blocks for line in block.splitlines() if SEARCH_START.match(line)]


def test_every_search_string_in_the_readme_runs_against_a_real_store(store, tmp_path):
    searches = readme_searches()
    assert len(searches) >= 3
    client = MlflowClient(store)
    experiment_id = client.create_experiment("sift_bench", artifact_location=(tmp_path / "mlartifacts").as_uri())
    kind = "Intel(R) Xeon(R) Processor, 2 cores, family 6 model 143 amx_bf16 avx512f"
    for task in ("cifar10_resnet", "sst2_bert"):
        for sifter, beta, slot in (("relative_probabilistic", "1", None), ("random", None, None),
                                   ("none", None, "last"), ("stale_loss", "1", None), ("infobatch", None, None)):
            tags = {"task": task, "sifter": sifter, "machine.kind": kind, **({"timing_slot": slot} if slot else {})}
            run = client.create_run(experiment_id, tags=tags)
            if beta:
                client.log_param(run.info.run_id, "sifter.beta_value", beta)
            client.set_terminated(run.info.run_id, "FINISHED")
    found = {search: client.search_runs([experiment_id], filter_string=search) for search in searches}
    selected = {search: sorted((r.data.tags["task"], r.data.tags["sifter"]) for r in runs) for search, runs in found.items()}
    assert selected[searches[0]] == [("cifar10_resnet", "relative_probabilistic"), ("sst2_bert", "relative_probabilistic")]
    assert selected[searches[1]] == [("cifar10_resnet", "none"), ("cifar10_resnet", "random"),
                                     ("cifar10_resnet", "relative_probabilistic")]
    assert selected[searches[2]] == [("cifar10_resnet", "none"), ("sst2_bert", "none")]


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def heading_anchors(path) -> set[str]:
    """The anchors GitHub gives a markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_in_the_readme_and_docs_resolves():
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len(documents) >= 5
    broken = []
    for document in documents:
        for target in LINK.findall(document.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path_part, _, anchor = target.partition("#")
            path = (document.parent / path_part).resolve() if path_part else document
            if not path.exists():
                broken.append(f"{document.name}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in heading_anchors(path):
                broken.append(f"{document.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: the detail belongs in docs/"
    commands = [line for line in lines[:8] if line.startswith(("python", "SIFT_BENCH_DATA_DIR", "pip"))]
    assert "pip install" in commands[0] and "python -m sift_bench +experiment=bert" in commands[1]


def test_the_readme_status_is_the_table_the_committed_reports_print():
    """README's results table is `status.status_lines` of the committed reports, and budget.md (rebuilt with them)
    holds the same: a report rebuilt without its README line updated, or a figure typed by hand, fails here."""
    folders = [ROOT / "results" / "cpu", ROOT / "results" / "cpu_long"]
    table = "\n".join(status.status_lines(folders))
    assert table.count("\n") >= 4  # header, rule and a row per task and budget
    assert table in (ROOT / "README.md").read_text(), "README.md's results table differs from:\n" + table
    assert table in (ROOT / "results" / "budget" / "budget.md").read_text(), (
        "results/budget/budget.md is older than the tables: rebuild it with --budget-from")


def test_every_committed_verdict_agrees_with_its_interval():
    """A verdict against the frontier is its 95 % interval read aloud: `above` exactly when the interval lies above
    0, `below` exactly when it lies below, on test and on validation, at equal time and at equal work, in every
    committed table."""
    import pandas as pd

    checked = 0
    for folder in ("cpu", "cpu_long"):
        table = pd.read_csv(ROOT / "results" / folder / "table.csv")
        # At equal time, and at equal work (`work_*`, scoring counted at its measured cost).
        for prefix in ("", "val_", "work_", "val_work_"):
            lo, hi = table[f"{prefix}accuracy_vs_frontier_lo"], table[f"{prefix}accuracy_vs_frontier_hi"]
            verdicts = table[f"{prefix}verdict_vs_frontier"]
            assert ((verdicts == "above") == (lo > 0)).all(), folder
            assert ((verdicts == "below") == (hi < 0)).all(), folder
            checked += int(lo.notna().sum())
    assert checked >= 20
