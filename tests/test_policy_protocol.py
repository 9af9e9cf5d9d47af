"""A policy of one's own: defined here, in the test, and run through the data loader, the CLI, MLflow and the report
with no edit of sift_bench."""

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient

from conftest import compose_config, run_cli, run_report
from sift_bench.sifting import Candidates, Selector, SiftingDataloader, SiftPolicy
from sift_bench.validation import ConfigError, validate


class TopLossSelector(Selector):
    """Keep the ceil(top_fraction * n) highest scored losses of each candidate batch."""

    def __init__(self, config, context):
        self.top_fraction = config.top_fraction

    def keep(self, candidates: Candidates) -> torch.Tensor:
        keep = torch.zeros(candidates.n, dtype=torch.bool)
        keep[candidates.losses.argsort(descending=True)[: math.ceil(self.top_fraction * candidates.n)]] = True
        return keep


@dataclass(frozen=True)
class TopLossSiftConfig(SiftPolicy):
    """Deterministic top-k by loss: train on the hardest share of each candidate batch."""

    scores = True
    run_name_fields = {"top": "top_fraction"}

    top_fraction: float
    loss_based_sift_config: object

    def __post_init__(self):
        if not 0 < self.top_fraction <= 1:
            raise ValueError(f"top_fraction must be a number in (0, 1], got {self.top_fraction!r}")

    def selector(self, context):
        return TopLossSelector(self, context)


YAML = """\
_target_: test_policy_protocol.TopLossSiftConfig
name: top_loss
top_fraction: 0.5
sift_delay: 2
repeat_delay_per_epoch: false
sync: global
"""


class IndexLoss:
    """The loss of a sample is its value: the policy's choice can be checked exactly."""

    def loss(self, model, transformed_batch, original_batch=None):
        return original_batch.float()


def test_the_data_loader_runs_a_policy_it_has_never_heard_of():
    from sift_bench.sifting import LossConfig, SiftingBaseConfig

    config = TopLossSiftConfig(0.25, LossConfig(SiftingBaseConfig(sift_delay=0)))
    data = torch.utils.data.DataLoader(torch.arange(64), batch_size=8)  # loss of a sample = its value
    sifter = SiftingDataloader(config, data, IndexLoss(), torch.nn.Linear(1, 1), seed=0)
    kept = torch.cat(list(sifter))
    # Each candidate batch of 8 keeps its 2 highest: 6-7, 14-15, ... refilled into batches of 8.
    assert kept.tolist() == [v for start in range(0, 64, 8) for v in (start + 6, start + 7)]
    assert sifter.stats.samples_seen == 64 and sifter.stats.samples_kept == 16


@pytest.fixture
def policy_conf(tmp_path) -> Path:
    folder = tmp_path / "conf"
    (folder / "sifter").mkdir(parents=True)
    (folder / "sifter" / "top_loss.yaml").write_text(YAML)
    return folder


def test_a_policy_by_import_path_is_checked_like_the_built_in_ones(monkeypatch):
    from omegaconf import OmegaConf, open_dict

    from sift_bench.tracking import run_name

    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    cfg = compose_config(["task=sst2_bert", "scale=smoke"])
    with open_dict(cfg):
        cfg.sifter = OmegaConf.create(YAML)
    config = validate(cfg)
    assert isinstance(config, TopLossSiftConfig) and config.top_fraction == 0.5
    assert config.loss_based_sift_config.sift_config.sift_delay == 2
    assert run_name(cfg) == "sst2_bert smoke top_loss top=0.5 delay=2 seed=0"
    for key, value, message in (("top_fraktion", 0.3, "sifter.top_fraktion is not a setting of TopLossSiftConfig"),
                                ("top_fraction", 2.0, "top_fraction must be a number in \\(0, 1\\], got 2.0"),
                                ("_target_", "collections.OrderedDict", "OrderedDict is not a subclass of"),
                                ("_target_", "no_such_module.Policy", "sifter._target_='no_such_module.Policy'")):
        with open_dict(cfg):
            cfg.sifter = OmegaConf.create(YAML)
            cfg.sifter[key] = value
        with pytest.raises(ConfigError, match=message):
            validate(cfg)


@pytest.mark.slow
def test_a_policy_of_ones_own_runs_end_to_end_into_mlflow_and_the_report(policy_conf, store, tmp_path):
    here = Path(__file__).parent
    result = run_cli(["-m", f"--config-dir={policy_conf}", "task=sst2_bert", "scale=smoke", "trainer.epochs=1",
                      "sifter=none,top_loss,random", f"tracking.uri={store}"],
                     tmp_path, pythonpath=here)
    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(store)
    runs = {run.data.tags["sifter"]: run for run in client.search_runs(
        [client.get_experiment_by_name("sift_bench").experiment_id], filter_string="tags.task = 'sst2_bert'")}
    top = runs["top_loss"]
    assert top.info.status == "FINISHED" and top.info.run_name == "sst2_bert smoke top_loss top=0.5 delay=2 seed=0"
    assert top.data.params["sifter._target_"] == "test_policy_protocol.TopLossSiftConfig"
    # Half of every scored batch after the 2-batch delay: a little over 50 % in all.
    assert 50 < top.data.metrics["pct_accepted"] < 60 and top.data.metrics["sift_time_s"] > 0
    out = tmp_path / "report"
    report = run_report(store, out)
    assert report.returncode == 0, report.stderr[-3000:]
    table = pd.read_csv(out / "table.csv")
    row = table[table["sifter"] == "top_loss"].iloc[0]
    assert row["top_fraction"] == 0.5 and 50 < row["pct_accepted"] < 60
