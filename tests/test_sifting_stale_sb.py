"""Stale-SB (StaleSBSiftConfig) end to end: a real DataLoader over IndexedDataset, a Loss that returns given
per-sample losses, and reference figures computed here from Selective Backprop's own algorithm
(angelajiang/SelectiveBackprop: lib/fp_selectors.py StaleSelector, lib/forwardproppers.py, lib/hist.py)."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from sift_bench.sifting import (
    IndexedDataset,
    Loss,
    SiftingDataloader,
    StaleSBSiftConfig,
    StaleLossSiftConfig,
    rescore_due_mask,
)

NO_DELAY = {"sift_config": {"sift_delay": 0}}


class TableLoss(Loss):
    """The loss of sample i is table[i] (the batch's last element is its ids); counts the samples it scores."""

    def __init__(self, table):
        self.table = table
        self.scored = 0

    def loss(self, model, transformed_batch, original_batch=None):
        ids = original_batch[-1]
        self.scored += len(ids)
        return self.table[ids]


def loader(n, batch_size=128, seed=0):
    features = torch.randn(n, 2, generator=torch.Generator().manual_seed(seed))
    return DataLoader(IndexedDataset(TensorDataset(features)), batch_size=batch_size, shuffle=True,
                      generator=torch.Generator().manual_seed(seed))


def stale_sb(beta_value=1.0, every=3, sift_delay=0, history=500):
    return StaleSBSiftConfig(beta_value, history, {"sift_config": {"sift_delay": sift_delay}},
                             rescore_every_epochs=every)


def selective_backprop_scoring_epochs(num_epochs: int, staleness: int) -> list[int]:
    """The epochs in which Selective Backprop's StaleSelector forward-passes a sample seen once per epoch: its
    `epochs_since_update` grows by one at every sighting, a forward pass sets it to 0 and stores the loss, and a
    sample is forward-passed when it has no loss or the count reaches the staleness."""
    metadata, epochs = {"epochs_since_update": 0}, []
    for epoch in range(num_epochs):
        metadata["epochs_since_update"] += 1
        if "loss" not in metadata or metadata["epochs_since_update"] >= staleness:
            metadata.update(loss=1.0, epochs_since_update=0)
            epochs.append(epoch)
    return epochs


def test_rescore_due_mask_follows_the_staleness():
    stamps = torch.tensor([-1, 0, 1, 2, 3])
    assert rescore_due_mask(stamps, 3, 3).tolist() == [True, True, False, False, False]
    assert rescore_due_mask(stamps, 5, 2).tolist() == [True, True, True, True, True]


@pytest.mark.parametrize("every", [2, 3])
def test_scores_every_sample_in_the_epochs_selective_backprop_does(every):
    n, num_epochs = 2048, 12
    table = torch.rand(n, generator=torch.Generator().manual_seed(0))
    loss = TableLoss(table)
    sifter = SiftingDataloader(stale_sb(1.0, every), loader(n), loss, nn.Identity(), seed=0, num_samples=n)
    scored_per_epoch = []
    for _ in range(num_epochs):
        before = loss.scored
        for _batch in sifter:
            pass
        scored_per_epoch.append(loss.scored - before)
    reference = selective_backprop_scoring_epochs(num_epochs, every)
    assert reference == list(range(0, num_epochs, every))  # 0, 3, 6, 9 at staleness 3
    assert sifter.selector.scoring_epochs == reference
    # A scoring epoch scores every sample once; the others none: the pass is paid for, and counted.
    assert scored_per_epoch == [n if epoch in reference else 0 for epoch in range(num_epochs)]
    assert sifter.stats.scoring_seconds > 0
    assert bool((sifter.sample_memory.epoch_stamps == reference[-1]).all())


@pytest.mark.parametrize("beta_value,kept", [(1.0, 0.497), (3.0, 0.247)])
def test_keeps_one_over_one_plus_beta_in_every_epoch(beta_value, kept):
    # The reference figures, from Selective Backprop's algorithm over epochs 1 to 11 at staleness 3:
    # 0.497 at beta 1 and 0.247 at beta 3. Losses drift between scoring passes, so stored ones go stale.
    n, num_epochs = 8192, 12
    generator = torch.Generator().manual_seed(1)
    base = torch.rand(n, generator=generator)
    loss = TableLoss(base.clone())
    sifter = SiftingDataloader(stale_sb(beta_value), loader(n), loss, nn.Identity(), seed=0, num_samples=n)
    fractions, kept_loss, all_loss = [], 0.0, 0.0
    for epoch in range(num_epochs):
        loss.table = (base + 0.3 * torch.rand(n, generator=generator)) * (1 - epoch / 20)
        sifter.stats.reset()
        for _features, ids in sifter:
            kept_loss += float(sifter.sample_memory.losses[ids].sum())
        fractions.append(sifter.stats.samples_kept / sifter.stats.samples_seen)
    over_1_to_11 = sum(fractions[1:]) / len(fractions[1:])
    assert over_1_to_11 == pytest.approx(kept, abs=0.02)
    assert all(abs(f - 1 / (1 + beta_value)) < 0.04 for f in fractions[1:])
    # Higher stored losses are kept more often.
    assert kept_loss / (sum(fractions) * n) > float(sifter.sample_memory.losses.mean())


def test_differs_from_stale_loss_which_never_scores():
    # sift_bench's stale loss decides from training losses and never scores; Stale-SB scores, needing no
    # training losses from the loop.
    assert StaleSBSiftConfig.scores_on_demand and not StaleSBSiftConfig.uses_training_losses
    assert not StaleLossSiftConfig.scores_on_demand and StaleLossSiftConfig.uses_training_losses
    sifter = SiftingDataloader(stale_sb(), loader(256), TableLoss(torch.rand(256)), nn.Identity(), seed=0,
                               num_samples=256)
    assert not sifter.uses_training_losses
    with pytest.raises(RuntimeError, match=r"record_losses\(\) is for the policies"):
        for _batch in sifter:
            sifter.record_losses(torch.zeros(len(_batch[-1])))


def test_a_delay_passes_batches_unscored_and_their_samples_are_scored_next_epoch():
    n = 1024
    loss = TableLoss(torch.rand(n, generator=torch.Generator().manual_seed(2)))
    sifter = SiftingDataloader(stale_sb(1.0, sift_delay=4), loader(n), loss, nn.Identity(), seed=0, num_samples=n)
    for _batch in sifter:
        pass
    assert loss.scored == n - 4 * 128
    for _batch in sifter:
        pass
    # The delay's samples had no stored loss: scored in epoch 1 (in batches with the others, whose stored
    # losses stay those of epoch 0, as Selective Backprop records only the samples it marked).
    stamps = sifter.sample_memory.epoch_stamps
    assert int((stamps == 1).sum()) == 4 * 128 and int((stamps == 0).sum()) == n - 4 * 128
    assert sifter.selector.scoring_epochs == [0, 1]


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match=r"rescore_every_epochs must be an int >= 1, got 0"):
        stale_sb(every=0)
    with pytest.raises(TypeError, match=r"rescore_every_epochs must be an int >= 1, got 1.5"):
        stale_sb(every=1.5)
    with pytest.raises(ValueError, match=r"StaleSBSiftConfig needs num_samples="):
        SiftingDataloader(stale_sb(), loader(64), TableLoss(torch.rand(64)), nn.Identity())
    with pytest.raises(TypeError, match=r"loss_impl must be a sift_bench.sifting.Loss"):
        SiftingDataloader(stale_sb(), loader(64), None, nn.Identity(), num_samples=64)
