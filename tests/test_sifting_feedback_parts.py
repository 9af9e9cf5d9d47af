"""The parts of the training-loss policies on plain tensors: configs, pure selection functions,
the per-sample memory, IndexedDataset and default_sample_ids."""

import math
from collections import namedtuple

import pytest
import torch
import transformers
from torch.utils.data import DataLoader, TensorDataset

from sift_bench.sifting import (
    IndexedDataset,
    InfoBatchSiftConfig,
    LossConfig,
    LossHistory,
    SampleLossMemory,
    SiftingBaseConfig,
    StaleLossSiftConfig,
    default_sample_ids,
    fresh_loss_mask,
    infobatch_keep_mask,
    infobatch_threshold,
    relative_probabilistic_keep_mask,
    stale_loss_keep_mask,
)

# ---- configs ---------------------------------------------------------------


def test_stale_loss_config_converts_and_defaults():
    config = StaleLossSiftConfig(beta_value=2, loss_history_length=100,
                                 loss_based_sift_config={"sift_config": {"sift_delay": 3}})
    assert config.max_loss_age_epochs == 1
    assert isinstance(config.beta_value, float)
    assert config.loss_based_sift_config == LossConfig(sift_config=SiftingBaseConfig(sift_delay=3))


def test_infobatch_config_defaults_follow_the_paper_and_need_no_delay():
    config = InfoBatchSiftConfig()
    assert config.prune_ratio == 0.5
    assert config.anneal_fraction == 0.125  # the official code's delta = 0.875
    assert config.loss_based_sift_config.sift_config.sift_delay == 0
    nested = InfoBatchSiftConfig(0.3, 0, {"sift_config": {"sift_delay": 7}})
    assert nested.loss_based_sift_config.sift_config.sift_delay == 7
    assert isinstance(nested.anneal_fraction, float)


@pytest.mark.parametrize("value, error", [(0, ValueError), (1, ValueError), (-0.1, ValueError),
                                          (math.nan, ValueError), ("0.5", TypeError), (True, TypeError)])
def test_bad_prune_ratio(value, error):
    with pytest.raises(error, match=rf"^prune_ratio must be a number in \(0, 1\), got {value!r}$"):
        InfoBatchSiftConfig(prune_ratio=value)


@pytest.mark.parametrize("value, error", [(1, ValueError), (-0.1, ValueError), (math.nan, ValueError),
                                          (None, TypeError)])
def test_bad_anneal_fraction(value, error):
    with pytest.raises(error, match=rf"^anneal_fraction must be a number in \[0, 1\), got {value!r}$"):
        InfoBatchSiftConfig(anneal_fraction=value)


@pytest.mark.parametrize("value, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError),
                                          (True, TypeError), ("2", TypeError)])
def test_bad_max_loss_age_epochs(value, error):
    with pytest.raises(error, match=rf"^max_loss_age_epochs must be an int >= 1, got {value!r}$"):
        StaleLossSiftConfig(1.0, 100, {"sift_config": {}}, max_loss_age_epochs=value)


def test_stale_loss_config_checks_the_shared_fields_like_relative_sifting():
    with pytest.raises(ValueError, match=r"^beta_value must be a finite number > 0, got -1$"):
        StaleLossSiftConfig(-1, 100, {"sift_config": {}})
    with pytest.raises(ValueError, match=r"^loss_history_length must be an int >= 1, got 0$"):
        StaleLossSiftConfig(1, 0, {"sift_config": {}})
    with pytest.raises(TypeError, match=r"loss_based_sift_config got unknown keys \['delay'\]"):
        StaleLossSiftConfig(1, 10, {"delay": 1})


# ---- pure functions --------------------------------------------------------


def test_fresh_loss_mask_ages_in_epochs():
    stamps = torch.tensor([-1, 0, 1, 2, 3], dtype=torch.int32)
    assert fresh_loss_mask(stamps, 3, 1).tolist() == [False, False, False, True, True]
    assert fresh_loss_mask(stamps, 3, 2).tolist() == [False, False, True, True, True]


def test_stale_loss_keep_mask_keeps_what_is_not_fresh():
    history = torch.linspace(0, 1, 101)
    losses = torch.full((1000,), -5.0)  # below the whole history: p = 0, dropped if fresh
    fresh = torch.arange(1000) % 2 == 0
    keep = stale_loss_keep_mask(losses, fresh, history, 1.0, torch.Generator().manual_seed(0))
    assert keep.tolist() == (~fresh).tolist()


@pytest.mark.parametrize("beta_value, kept_only_bound", [(1.0, 0.2), (3.0, 0.06)])
def test_a_history_of_the_kept_losses_alone_would_collapse_the_kept_fraction(beta_value, kept_only_bound):
    """Why the stale-loss history takes every decided candidate's loss, not only the reported ones.

    Only kept samples are trained and report a loss. With losses that persist, a history
    of those alone holds the high ones, and the kept fraction falls far below 1 / (1 + beta).
    """
    generator = torch.Generator().manual_seed(0)
    losses = torch.rand(20_000, generator=generator)
    kept_fraction = {}
    for history_of in ("kept", "candidates"):
        history, kept = LossHistory(500), 0
        for start in range(0, len(losses), 128):
            batch = losses[start:start + 128]
            keep = relative_probabilistic_keep_mask(batch, history.values(), beta_value, generator)
            history.append(batch[keep] if history_of == "kept" else batch)
            kept += int(keep.sum())
        kept_fraction[history_of] = kept / len(losses)
    assert kept_fraction["kept"] < kept_only_bound
    assert abs(kept_fraction["candidates"] - 1 / (1 + beta_value)) < 0.02


def test_infobatch_threshold_is_the_mean_of_the_remembered():
    losses = torch.tensor([1.0, 2.0, 6.0, float("nan")])
    remembered = torch.tensor([True, True, True, False])
    assert infobatch_threshold(losses, remembered) == 3.0
    assert math.isnan(infobatch_threshold(losses, torch.zeros(4, dtype=torch.bool)))


def test_infobatch_keep_mask_prunes_below_and_rescales():
    n = 40_000
    losses = torch.where(torch.arange(n) % 2 == 0, 0.1, 1.0)
    remembered = torch.ones(n, dtype=torch.bool)
    keep, weights = infobatch_keep_mask(losses, remembered, 0.55, 0.3, torch.Generator().manual_seed(0))
    below = losses < 0.55
    assert bool(keep[~below].all())
    assert abs((~keep[below]).float().mean().item() - 0.3) < 0.01
    assert bool((weights[below & keep] == torch.tensor(1 / 0.7, dtype=torch.float32)).all())
    assert bool((weights[~(below & keep)] == 1).all()) and weights.dtype == torch.float32
    # A NaN threshold (nothing remembered) prunes nothing; unremembered samples are never pruned.
    keep, weights = infobatch_keep_mask(losses, remembered, math.nan, 0.3)
    assert bool(keep.all()) and bool((weights == 1).all())
    keep, weights = infobatch_keep_mask(losses, torch.zeros(n, dtype=torch.bool), 0.55, 0.3)
    assert bool(keep.all()) and bool((weights == 1).all())


def test_sample_memory_is_preallocated_and_skips_non_finite():
    memory = SampleLossMemory(10, with_weights=True)
    assert memory.losses.shape == memory.epoch_stamps.shape == memory.weights.shape == (10,)
    assert memory.epoch_stamps.dtype == torch.int32 and memory.nbytes == 10 * 12
    assert SampleLossMemory(10).weights is None and SampleLossMemory(10).nbytes == 10 * 8
    finite = memory.remember(torch.tensor([1, 2, 3]), torch.tensor([0.5, float("nan"), float("inf")]), 4)
    assert finite.tolist() == [True, False, False]
    assert memory.remembered.nonzero().reshape(-1).tolist() == [1]
    assert memory.losses[1].item() == 0.5 and memory.epoch_stamps[1].item() == 4


# ---- IndexedDataset and default_sample_ids ----------------------------------


Pair = namedtuple("Pair", "x y")


def test_indexed_dataset_attaches_the_index():
    assert IndexedDataset([(1, 2), (3, 4)])[1] == (3, 4, 1)
    assert IndexedDataset([[1, 2]])[0] == [1, 2, 0]
    assert IndexedDataset([{"x": 5}, {"x": 6}])[1] == {"x": 6, "sample_id": 1}
    assert IndexedDataset(["a", "b"])[1] == ("b", 1)
    item = IndexedDataset([Pair(1, 2)])[0]
    assert item == (1, 2, 0) and type(item) is tuple
    assert len(IndexedDataset(TensorDataset(torch.zeros(7)))) == 7
    with pytest.raises(ValueError, match=r"already has a key 'sample_id'"):
        IndexedDataset([{"sample_id": 3}])[0]
    with pytest.raises(TypeError, match=r"map-style dataset .*got int"):
        IndexedDataset(5)


def test_default_sample_ids_reads_collated_batches():
    tuples = DataLoader(IndexedDataset(TensorDataset(torch.randn(10, 3), torch.zeros(10))), batch_size=4)
    batch = next(iter(tuples))
    assert default_sample_ids(batch).tolist() == [0, 1, 2, 3] and batch[-1].dtype == torch.int64
    dicts = DataLoader(IndexedDataset([{"x": torch.zeros(2)}] * 10), batch_size=4)
    assert default_sample_ids(list(dicts)[-1]).tolist() == [8, 9]
    encoding = transformers.BatchEncoding({"input_ids": torch.zeros(2, 3), "sample_id": torch.tensor([5, 6])})
    assert default_sample_ids(encoding).tolist() == [5, 6]


@pytest.mark.parametrize("batch", [torch.zeros(3), {"x": torch.zeros(3)}, ()])
def test_default_sample_ids_names_what_it_cannot_read(batch):
    with pytest.raises(TypeError, match=rf"type \S*{type(batch).__name__}; pass sample_ids="):
        default_sample_ids(batch)
