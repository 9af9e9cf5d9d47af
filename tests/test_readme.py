"""README.md's MLflow search examples are ones MLflow accepts, and each selects the runs it says."""

import re

from mlflow.tracking import MlflowClient

from conftest import ROOT

SEARCH_START = re.compile(r"^(tags|params|metrics|attributes)\.")


def readme_searches() -> list[str]:
    blocks = re.findall(r"^```text\n(.*?)^```", (ROOT / "README.md").read_text(), flags=re.M | re.S)
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
