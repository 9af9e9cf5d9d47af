"""Run identity: the config hash covers what changes training, and nothing else."""

import pytest
import yaml

from conftest import CONF_DIR, compose_config
from sift_bench import machine
from sift_bench.identity import config_hash

TABLES = {"sst2_bert": "bert_table", "cifar10_resnet": "resnet_table"}
# py-cpuinfo's description of the tables' 2-core Xeon with AMX, and of an AVX2-only EPYC (no bf16 kernels).
AMX_CPU = {"brand_raw": "Intel(R) Xeon(R) Processor", "family": 6, "model": 167,
           "flags": ["amx_bf16", "amx_int8", "amx_tile", "avx2", "avx512_bf16", "avx512_vnni", "avx512f"]}
AVX2_CPU = {"brand_raw": "AMD EPYC 7B12", "family": 23, "model": 49, "flags": ["avx", "avx2", "fma"]}


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_every_committed_table_run_keeps_its_identity(tmp_path, monkeypatch):
    # "Resuming the table finds nothing left to run": each FINISHED run of results/cpu, composed again from the
    # overrides it recorded, hashes to the config_hash it was logged with, whatever keys were added since.
    import shutil

    # On the table's machine kind (AMX), where scale.precision=auto resolves to the bf16 its runs trained in.
    monkeypatch.setattr(machine, "cpu_info", lambda: AMX_CPU)

    from mlflow.tracking import MlflowClient

    from conftest import ROOT

    shutil.copy(ROOT / "results" / "cpu" / "mlflow.db", tmp_path / "mlflow.db")
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("sift_bench").experiment_id],
                              filter_string="attributes.status = 'FINISHED'", max_results=10_000)
    runs = [run for run in runs if "config_hash" in run.data.tags]  # jobs, not sweep parents
    assert len(runs) >= 30
    changed, superseded = [], []
    for run in runs:
        overrides = run.data.tags["overrides"].split(" ")
        cfg = compose_config([override for override in overrides if not override.startswith("tracking.")])
        same = config_hash(cfg, int(run.data.tags.get("world_size", "1"))) == run.data.tags["config_hash"]
        # InfoBatch before its schedule became the official one (whole epochs): a run of the older schedule
        # (no `sifter.anneal_by` param) must hash differently, so the table trains the method as written again.
        if run.data.tags["sifter"] == "infobatch" and "sifter.anneal_by" not in run.data.params:
            superseded.append(same)
        elif not same:
            changed.append((run.info.run_name, run.data.tags["overrides"]))
    assert changed == []
    assert superseded and not any(superseded)


@pytest.mark.slow
@pytest.mark.parametrize("table,epochs", [("bert_table", 4), ("resnet_table", 30)])
def test_a_long_budget_row_is_the_tables_row_trained_longer(table, epochs):
    from omegaconf import open_dict

    rows = table_rows(f"{table}_long")
    assert {"baseline", "random_0.25", "random_0.5", "random_0.6667", "beta_0.5", "beta_1", "stale_1",
            "infobatch_0.5"} <= set(rows)
    for row in rows:
        short = compose_config([f"+experiment={table}", f"+table_row={row}", "scale=cpu", "seed=1"])
        long = compose_config([f"+experiment={table}_long", f"+table_row={row}", "scale=cpu", "seed=1"])
        assert long.trainer.epochs == epochs and short.trainer.epochs < epochs
        assert config_hash(long) != config_hash(short)
        with open_dict(long):
            long.trainer.epochs = short.trainer.epochs
        assert config_hash(long) == config_hash(short)  # same data, model, policy and seed: only the budget differs


@pytest.mark.parametrize("experiment", ["bert", "resnet"])
def test_an_auto_run_on_a_machine_with_bf16_is_the_explicit_bf16_run(experiment, monkeypatch):
    # scale=cpu says `precision: auto`; on the tables' AMX Xeon it resolves to bf16, so README's command keeps the
    # identity of the committed bf16 rows. Hashed either way: the job resolves it first (resolve_precision), a
    # config composed again resolves it in config_hash.
    from sift_bench.validation import resolve_precision

    bf16 = hash_of([f"+experiment={experiment}", "scale=cpu", "scale.precision=bf16"])
    fp32 = hash_of([f"+experiment={experiment}", "scale=cpu", "scale.precision=fp32"])
    assert bf16 != fp32
    monkeypatch.setattr(machine, "cpu_info", lambda: AMX_CPU)
    auto = compose_config([f"+experiment={experiment}", "scale=cpu"])
    assert auto.scale.precision == "auto" and config_hash(auto) == bf16
    resolve_precision(auto)
    assert auto.scale.precision == "bf16" and config_hash(auto) == bf16
    # Without bf16 kernels `auto` trains in fp32: another training, another identity.
    monkeypatch.setattr(machine, "cpu_info", lambda: AVX2_CPU)
    assert hash_of([f"+experiment={experiment}", "scale=cpu"]) == fp32
