"""Every experiment and every group option composes through Hydra, with the settings it promises."""

import itertools

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
    assert (cpu.scale.precision, cpu.scale.channels_last) == ("bf16", True)
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
