"""Every experiment and every group option composes through Hydra, with the settings it promises."""

import itertools
import re

import pytest
from omegaconf import OmegaConf

from conftest import CONF_DIR, compose_config
from sift_bench.validation import validate

TASKS = sorted(p.stem for p in (CONF_DIR / "task").glob("*.yaml"))
SIFTERS = sorted(p.stem for p in (CONF_DIR / "sifter").glob("*.yaml"))
SCALES = sorted(p.stem for p in (CONF_DIR / "scale").glob("*.yaml"))
EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


def test_the_groups_have_the_documented_options():
    assert TASKS == ["cifar10_resnet", "sst2_bert"]
    assert {"none", "relative_probabilistic", "random"} <= set(SIFTERS)
    assert SCALES == ["cpu", "gpu", "smoke"]
    assert {"bert", "resnet"} <= set(EXPERIMENTS)


@pytest.mark.parametrize("task,sifter,scale", list(itertools.product(TASKS, SIFTERS, SCALES)))
def test_every_group_option_composes_and_validates(task, sifter, scale, data_dir):
    cfg = compose_config([f"task={task}", f"sifter={sifter}", f"scale={scale}", f"paths.data_dir={data_dir}"])
    OmegaConf.resolve(cfg)  # every interpolation resolves
    assert cfg.task.name == task and cfg.sifter.name == sifter and cfg.scale.name == scale
    sift_config = validate(cfg)
    assert (sift_config is None) == (sifter == "none")


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes(experiment, data_dir):
    cfg = compose_config([f"+experiment={experiment}", f"paths.data_dir={data_dir}"])
    OmegaConf.resolve(cfg)
    validate(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("experiment,sifter", list(itertools.product(EXPERIMENTS, SIFTERS)))
def test_every_experiment_composes_with_every_sifter(experiment, sifter, data_dir):
    # An experiment sets only what differs from the groups it picks, so `+experiment=bert sifter=none` is its
    # baseline and `sifter=none,random` a sweep, each sifter with its own group's settings.
    cfg = compose_config([f"+experiment={experiment}", f"sifter={sifter}", f"paths.data_dir={data_dir}"])
    assert OmegaConf.to_container(cfg.sifter) == OmegaConf.to_container(compose_config([f"sifter={sifter}"]).sifter)
    assert (validate(cfg) is None) == (sifter == "none")


def test_experiments_use_the_seed_examples_sifter_settings():
    for experiment, task in (("bert", "sst2_bert"), ("resnet", "cifar10_resnet")):
        cfg = compose_config([f"+experiment={experiment}"])
        assert cfg.task.name == task
        assert cfg.sifter.name == "relative_probabilistic"
        assert (cfg.sifter.beta_value, cfg.sifter.loss_history_length, cfg.sifter.sift_delay) == (3, 500, 10)


def test_scale_selects_model_and_data_per_task():
    expected = {
        ("cifar10_resnet", "smoke"): ("resnet8", "synthetic"),
        ("cifar10_resnet", "cpu"): ("resnet20", "zip"),
        ("cifar10_resnet", "gpu"): ("resnet18", "zip"),
    }
    for (task, scale), (arch, source) in expected.items():
        cfg = compose_config([f"task={task}", f"scale={scale}"])
        assert (cfg.task.model.arch, cfg.task.data.source) == (arch, source)
    sources = {scale: compose_config(["task=sst2_bert", f"scale={scale}"]).task.model.source for scale in SCALES}
    assert sources == {"smoke": "tiny", "cpu": "package", "gpu": "hub"}
    cpu = compose_config(["task=cifar10_resnet", "scale=cpu"])
    # auto: bf16 where the CPU has native bf16 kernels, else fp32, settled when a job starts (validation.py).
    assert (cpu.scale.precision, cpu.scale.channels_last) == ("auto", True)
    assert compose_config(["scale=cpu", "scale.precision=fp32"]).scale.precision == "fp32"


def test_command_line_keys_reach_the_config(monkeypatch):
    monkeypatch.setenv("SIFT_BENCH_DATA_DIR", "/somewhere/data")
    cfg = compose_config([
        "+experiment=bert", "sifter.beta_value=0.5", "sifter.loss_history_length=100", "sifter.sift_delay=0",
        "sifter.repeat_delay_per_epoch=true", "seed=7", "scale=smoke", "tracking.uri=sqlite:///x.db",
        "tracking.experiment_name=exp", "cost.usd_per_hour=2.5",
    ])
    assert cfg.sifter.beta_value == 0.5 and cfg.sifter.loss_history_length == 100 and cfg.sifter.sift_delay == 0
    assert cfg.sifter.repeat_delay_per_epoch is True and cfg.seed == 7 and cfg.scale.name == "smoke"
    assert cfg.tracking.uri == "sqlite:///x.db" and cfg.tracking.experiment_name == "exp"
    assert cfg.cost.usd_per_hour == 2.5
    assert cfg.paths.data_dir == "/somewhere/data"
    assert compose_config(["sifter=random", "sifter.keep_fraction=0.5"]).sifter.keep_fraction == 0.5


@pytest.mark.parametrize("override,message", [
    ("trainer.epoch=3", "Key 'epoch' not in 'TrainerConfig'"),
    ("sifter.beta_vlaue=1", "Key 'beta_vlaue' not in 'RelativeProbabilisticSifter'"),
    ("trainer.epochs=three", "Value 'three' of type 'str' could not be converted to Integer"),
    ("trainer.progress=maybe", "Value 'maybe' is not a valid bool"),
    ("tracking.skip_finished=sometimes", "Value 'sometimes' is not a valid bool"),
    ("trainer.optimizer.lr=fast", "Value 'fast' of type 'str' could not be converted to Float"),
])
def test_a_typo_or_a_wrong_type_is_refused_by_composition(override, message):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException) as refused:
        compose_config(["+experiment=bert", override])
    assert message in f"{refused.value} {refused.value.__cause__}"


@pytest.mark.parametrize("override,meant", [
    ("trainer.epoch=3", "trainer.epochs"),
    ("sifter.beta_vlaue=1", "sifter.beta_value"),
    ("trainer.optimzer.lr=0.1", "trainer.optimizer"),
])
def test_a_key_refused_by_composition_is_answered_with_the_field_meant(override, meant):
    from hydra.errors import ConfigCompositionException

    from sift_bench.schema import refused_key

    with pytest.raises(ConfigCompositionException) as refused:
        compose_config(["+experiment=bert", override])
    assert f"did you mean {meant}?" in refused_key(refused.value.__cause__)
    assert refused_key(ValueError("not a refused key")) is None


@pytest.mark.parametrize("append,key,schema,meant", [
    ("+sifter.beta_vlaue=1", "beta_vlaue", "RelativeProbabilisticSifter", "sifter.beta_value"),
    ("+trainer.epoch=3", "epoch", "TrainerConfig", "trainer.epochs"),
    ("+task.data.max_lenght=32", "max_lenght", "Sst2Data", "task.data.max_length"),
])
def test_an_appended_typo_is_refused_before_anything_runs(append, key, schema, meant):
    # Hydra appends `+key=value` even to a typed node; validation holds the composed config to the same schema.
    from sift_bench.validation import ConfigError

    cfg = compose_config(["+experiment=bert", append])
    with pytest.raises(ConfigError, match=rf"Key '{key}' not in '{schema}'; did you mean {re.escape(meant)}\?"):
        validate(cfg)


def test_typed_configs_keep_the_yaml_values_as_written():
    # An int given where a float is typed would become 1.0 and change the run's config_hash.
    cfg = compose_config(["+experiment=bert_table", "+table_row=beta_1"])
    assert type(cfg.sifter.beta_value) is int and cfg.sifter.beta_value == 1
    assert type(cfg.trainer.optimizer.lr) is float and type(cfg.trainer.epochs) is int


def test_a_model_name_the_source_does_not_read_is_not_logged_as_the_model():
    from sift_bench.tracking import shown_params

    package = OmegaConf.to_container(compose_config(["task=sst2_bert", "scale=cpu"]), resolve=True)
    assert shown_params(package)["task.model.name"] == "unused (task.model.source=package)"
    hub = OmegaConf.to_container(compose_config(["task=sst2_bert", "scale=gpu"]), resolve=True)
    assert shown_params(hub)["task.model.name"] == "bert-base-uncased"
