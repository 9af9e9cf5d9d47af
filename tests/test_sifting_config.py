"""Sifting configs: validation at construction, with messages naming field, value and what is allowed."""

import dataclasses
import math

import pytest
import torch
from conftest import compose_config

from sift_bench.sifting import (
    LossConfig,
    RandomSiftConfig,
    RelativeProbabilisticSiftConfig,
    SiftingBaseConfig,
    SiftingDataloader,
)
from sift_bench.targets import build_sift_config


def loss_config(sift_delay=0):
    return LossConfig(sift_config=SiftingBaseConfig(sift_delay=sift_delay))


def test_defaults_match_sagemaker():
    config = SiftingBaseConfig()
    assert config.sift_delay == 1000
    assert config.repeat_delay_per_epoch is False


def test_nested_dicts_are_converted():
    config = RelativeProbabilisticSiftConfig(
        beta_value=3,
        loss_history_length=500,
        loss_based_sift_config={"sift_config": {"sift_delay": 5, "repeat_delay_per_epoch": True}},
    )
    assert isinstance(config.loss_based_sift_config, LossConfig)
    assert config.loss_based_sift_config.sift_config == SiftingBaseConfig(5, True)
    assert isinstance(config.beta_value, float)
    assert LossConfig(sift_config={"sift_delay": 5}).sift_config.sift_delay == 5
    random_config = RandomSiftConfig(keep_fraction=1, loss_based_sift_config={"sift_config": {}})
    assert random_config.loss_based_sift_config.sift_config.sift_delay == 1000


def test_configs_are_frozen():
    config = SiftingBaseConfig(sift_delay=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.sift_delay = -1


@pytest.mark.parametrize(
    "beta_value, error",
    [(-1, ValueError), (0, ValueError), (math.inf, ValueError), (math.nan, ValueError),
     ("2", TypeError), (True, TypeError), (None, TypeError)],
)
def test_bad_beta_value(beta_value, error):
    with pytest.raises(error, match=rf"beta_value must be a finite number > 0, got {beta_value!r}"):
        RelativeProbabilisticSiftConfig(beta_value, 500, loss_config())


def test_beta_value_message_reads_as_documented():
    with pytest.raises(ValueError) as raised:
        RelativeProbabilisticSiftConfig(-1, 500, loss_config())
    assert str(raised.value) == "beta_value must be a finite number > 0, got -1"


@pytest.mark.parametrize(
    "length, error",
    [(0, ValueError), (-5, ValueError), (2.5, TypeError), (500.0, TypeError), (True, TypeError),
     ("500", TypeError)],
)
def test_bad_loss_history_length(length, error):
    with pytest.raises(error, match=rf"loss_history_length must be an int >= 1, got {length!r}"):
        RelativeProbabilisticSiftConfig(1.0, length, loss_config())


@pytest.mark.parametrize(
    "sift_delay, error", [(-1, ValueError), (1.5, TypeError), (False, TypeError), ("10", TypeError)]
)
def test_bad_sift_delay(sift_delay, error):
    with pytest.raises(error, match=rf"sift_delay must be an int >= 0, got {sift_delay!r}"):
        SiftingBaseConfig(sift_delay=sift_delay)
    # A dict from a YAML file is validated just the same.
    with pytest.raises(error, match=r"sift_delay must be an int >= 0"):
        LossConfig(sift_config={"sift_delay": sift_delay})


def test_bad_repeat_delay_per_epoch():
    with pytest.raises(TypeError, match=r"repeat_delay_per_epoch must be a bool, got 'yes'"):
        SiftingBaseConfig(repeat_delay_per_epoch="yes")


def test_sync_is_a_policy_setting_beside_the_delay():
    assert SiftingBaseConfig().sync == "global"
    with pytest.raises(ValueError, match=r"sync must be one of \('global', 'local'\), got 'all'"):
        SiftingBaseConfig(sync="all")
    policy = RandomSiftConfig(keep_fraction=0.5, loss_based_sift_config={"sift_config": {"sift_delay": 0, "sync": "local"}})
    loader = torch.utils.data.DataLoader(torch.zeros(8, 1), batch_size=4)
    # The loader reads the policy's setting; an argument, where a caller gives one, overrides it.
    assert SiftingDataloader(policy, loader).sync == "local"
    assert SiftingDataloader(policy, loader, sync="global").sync == "global"
    assert SiftingDataloader(RandomSiftConfig(keep_fraction=0.5, loss_based_sift_config=loss_config()), loader).sync == "global"


def test_the_harness_puts_sifter_sync_into_the_policy():
    cfg = compose_config(["sifter=random", "sifter.sync=local"])
    assert build_sift_config(cfg.sifter).loss_based_sift_config.sift_config.sync == "local"
    assert build_sift_config(compose_config(["sifter=infobatch"]).sifter).loss_based_sift_config.sift_config.sync == "global"


@pytest.mark.parametrize(
    "keep_fraction, error",
    [(0, ValueError), (-0.1, ValueError), (1.01, ValueError), (math.nan, ValueError),
     (True, TypeError), ("0.5", TypeError)],
)
def test_bad_keep_fraction(keep_fraction, error):
    with pytest.raises(error, match=rf"keep_fraction must be a number in \(0, 1\], got {keep_fraction!r}"):
        RandomSiftConfig(keep_fraction, loss_config())


def test_keep_fraction_edges():
    assert RandomSiftConfig(1, loss_config()).keep_fraction == 1.0
    assert RandomSiftConfig(1e-6, loss_config()).keep_fraction == 1e-6


def test_bad_nested_configs():
    with pytest.raises(TypeError, match=r"sift_config got unknown keys \['sift_dealy'\]"):
        LossConfig(sift_config={"sift_dealy": 5})
    with pytest.raises(TypeError, match=r"loss_based_sift_config must be a LossConfig or a dict"):
        RelativeProbabilisticSiftConfig(1.0, 500, SiftingBaseConfig())
    with pytest.raises(TypeError, match=r"sift_config must be a SiftingBaseConfig or a dict"):
        LossConfig(sift_config=5)
