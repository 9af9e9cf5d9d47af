"""Run identity: the config hash covers what changes training, and nothing else."""

import pytest
import yaml

from conftest import CONF_DIR, compose_config
from sift_bench.tracking import config_hash

TABLES = {"sst2_bert": "bert_table", "cifar10_resnet": "resnet_table"}


def hash_of(overrides: list[str]) -> str:
    return config_hash(compose_config(overrides))


def table_rows(table: str) -> list[str]:
    sweep = yaml.safe_load((CONF_DIR / "experiment" / f"{table}.yaml").read_text())["hydra"]["sweeper"]["params"]
    return sweep["+table_row"].split(",")


@pytest.mark.parametrize("task", sorted(TABLES))
@pytest.mark.parametrize("scale", ["cpu", "smoke"])
def test_the_readme_baseline_and_the_tables_baselines_share_a_hash(task, scale):
    readme = hash_of([f"task={task}", "sifter=none", f"scale={scale}", "seed=1"])
    for row in ("baseline", "baseline_last"):
        assert hash_of([f"+experiment={TABLES[task]}", f"+table_row={row}", f"scale={scale}", "seed=1"]) == readme
    assert hash_of([f"task={task}", "sifter=none", f"scale={scale}", "seed=2"]) != readme


def test_where_how_and_at_what_price_do_not_change_the_hash():
    plain = hash_of(["task=sst2_bert", "sifter=none"])
    assert hash_of(["task=sst2_bert", "sifter=none", "cost.usd_per_hour=9", "trainer.progress=false",
                    "tracking.uri=sqlite:///elsewhere.db", "paths.data_dir=/data", "trainer.num_threads=1"]) == plain
    assert hash_of(["task=sst2_bert", "sifter=none", "trainer.optimizer.lr=1e-4"]) != plain
    assert hash_of(["task=sst2_bert", "sifter=none", "trainer.optimizer.implementation=for-loop"]) != plain


@pytest.mark.parametrize("table", sorted(TABLES.values()))
def test_a_table_only_setting_rehashes_only_the_rows_that_use_it(table):
    def hashes(extra):
        return {row: hash_of([f"+experiment={table}", f"+table_row={row}", *extra]) for row in table_rows(table)}

    before, after = hashes([]), hashes(["table.long_delay=7"])
    assert [row for row in before if before[row] != after[row]] == ["delay_long"]
    assert len(set(before.values())) == len(before) - 1  # every row its own hash, but the two baseline timings


@pytest.mark.parametrize("experiment,table", [("bert", "bert_table"), ("resnet", "resnet_table")])
def test_the_readme_command_is_the_tables_beta_3_row(experiment, table):
    # README quotes the table's beta_value=3 seed-0 run as what `+experiment=bert` prints: the same training.
    assert hash_of([f"+experiment={experiment}"]) == hash_of([f"+experiment={table}", "+table_row=beta_3", "seed=0"])
