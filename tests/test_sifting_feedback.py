"""The training-loss policies end to end: real torch DataLoaders over IndexedDataset(TensorDataset(...)),
and a training loop in the test that reports synthetic per-sample losses through record_losses."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from sift_bench.sifting import (
    IndexedDataset,
    InfoBatchSiftConfig,
    Loss,
    RandomSiftConfig,
    RelativeProbabilisticSiftConfig,
    SiftingDataloader,
    StaleLossSiftConfig,
)

# ---- helpers ---------------------------------------------------------------

NO_DELAY = {"sift_config": {"sift_delay": 0}}


def stale_config(beta_value=1.0, max_loss_age_epochs=1, loss_history_length=500, sift_delay=0):
    return StaleLossSiftConfig(beta_value, loss_history_length, {"sift_config": {"sift_delay": sift_delay}},
                               max_loss_age_epochs=max_loss_age_epochs)


def infobatch_config(prune_ratio=0.5, anneal_fraction=0.0, sift_delay=0):
    return InfoBatchSiftConfig(prune_ratio, anneal_fraction, {"sift_config": {"sift_delay": sift_delay}})


def loader(n, batch_size=128, shuffle=True, drop_last=False, seed=0):
    """Sample i is (2 features, i), as IndexedDataset makes it."""
    features = torch.randn(n, 2, generator=torch.Generator().manual_seed(seed))
    return DataLoader(IndexedDataset(TensorDataset(features)), batch_size=batch_size, shuffle=shuffle,
                      drop_last=drop_last, generator=torch.Generator().manual_seed(seed))


def sifter_for(config, n, num_epochs=100, seed=0, **loader_args):
    return SiftingDataloader(config, loader(n, **loader_args), seed=seed, num_samples=n,
                             num_epochs=num_epochs)


def train_epoch(sifter, report, record=lambda ids: True):
    """A training loop: weights and reports each yielded batch's losses; returns (ids, weights) yielded.

    report(ids) -> per-sample training losses; record(ids) -> whether to report them.
    """
    sifter.stats.reset()
    all_ids, all_weights = [], []
    for _, ids in sifter:
        weights = sifter.batch_weights()
        assert weights.shape == ids.shape and weights.dtype == torch.float32
        if record(ids):
            sifter.record_losses(report(ids))
        all_ids.append(ids)
        all_weights.append(weights)
    return torch.cat(all_ids), torch.cat(all_weights)


def fresh_draws(seed=0):
    """i.i.d. stationary losses: each report is a new uniform draw, whatever the sample."""
    generator = torch.Generator().manual_seed(seed)
    return lambda ids: torch.rand(len(ids), generator=generator)


class RaisingLoss(Loss):
    def loss(self, model, transformed_batch, original_batch=None):
        raise RuntimeError("the training-loss policies must never score")


# ---- stale loss --------------------------------------------------------------

N_STATISTICS = 20_000


@pytest.mark.parametrize("beta_value", [1.0, 3.0])
@pytest.mark.parametrize("losses", ["fresh draws", "persistent"])
def test_stale_kept_fraction_is_one_over_one_plus_beta(beta_value, losses):
    table = torch.rand(N_STATISTICS, generator=torch.Generator().manual_seed(1))
    report = fresh_draws() if losses == "fresh draws" else (lambda ids: table[ids])
    # Ages never run out here, so every decision is a p ** beta draw.
    sifter = sifter_for(stale_config(beta_value, max_loss_age_epochs=10), N_STATISTICS)
    ids, _ = train_epoch(sifter, report)
    assert sifter.stats.pct_accepted == 100.0 and len(ids) == N_STATISTICS  # nothing remembered yet
    for _ in range(2):
        ids, _ = train_epoch(sifter, report)
        assert sifter.stats.samples_seen == N_STATISTICS
        assert abs(sifter.stats.pct_accepted - 100 / (1 + beta_value)) < 2.0
    if losses == "persistent":
        # Higher remembered losses are kept more often, as under scoring: E[kept loss] = (b + 1) / (b + 2).
        mean_kept = table[ids].mean().item()
        assert mean_kept > table.mean().item() + 0.1
        assert abs(mean_kept - (beta_value + 1) / (beta_value + 2)) < 0.02


@pytest.mark.parametrize("max_loss_age_epochs", [1, 2])
def test_stale_loss_older_than_max_age_is_kept(max_loss_age_epochs):
    n = 4000
    sifter = sifter_for(stale_config(3.0, max_loss_age_epochs), n)
    last_trained = torch.full((n,), -1)
    forced = 0
    for epoch in range(6):
        ids, _ = train_epoch(sifter, fresh_draws(epoch))
        yielded = torch.zeros(n, dtype=torch.bool)
        yielded[ids] = True
        too_old = (last_trained < 0) | (epoch - last_trained > max_loss_age_epochs)
        assert bool(yielded[too_old].all())
        forced += int(too_old.sum()) if epoch > 0 else 0
        if epoch == 0:
            assert sifter.stats.samples_sifted_out == 0
        else:
            assert sifter.stats.samples_sifted_out > n // 10
        last_trained[ids] = epoch
    assert forced > n // 2  # the rule was exercised, not vacuous


def test_stale_steady_state_with_max_age_one():
    # Sifted out at most one epoch in a row: the kept fraction settles at 1 / (2 - k), k = 1 / (1 + beta).
    sifter = sifter_for(stale_config(1.0, max_loss_age_epochs=1), 10_000)
    table = torch.rand(10_000, generator=torch.Generator().manual_seed(2))
    for _ in range(9):
        train_epoch(sifter, lambda ids: table[ids])
    assert abs(sifter.stats.pct_accepted - 100 / (2 - 0.5)) < 2.0


def test_stale_never_calls_the_loss():
    model = nn.Linear(2, 1)
    sifter = SiftingDataloader(stale_config(1.0), loader(1000), RaisingLoss(), model, seed=0, num_samples=1000)
    for _ in range(3):
        train_epoch(sifter, fresh_draws())
    assert sifter.stats.samples_sifted_out > 0 and sifter.stats.scoring_seconds == 0.0
    assert all(parameter.grad is None for parameter in model.parameters())


# ---- InfoBatch ---------------------------------------------------------------


def half_below(n):
    """Even ids clearly below the mean (0.1), odd ids above (1.0): the mean is 0.55."""
    return torch.where(torch.arange(n) % 2 == 0, 0.1, 1.0)


@pytest.mark.parametrize("prune_ratio", [0.3, 0.7])
def test_infobatch_prunes_prune_ratio_of_the_below_mean_samples(prune_ratio):
    n = N_STATISTICS
    table = half_below(n)
    sifter = sifter_for(infobatch_config(prune_ratio), n)
    ids, weights = train_epoch(sifter, lambda ids: table[ids])
    assert len(ids) == n and bool((weights == 1).all())  # nothing remembered in the first epoch
    ids, weights = train_epoch(sifter, lambda ids: table[ids])
    assert sifter.selector.threshold == pytest.approx(0.55)
    below = table[ids] < 0.55
    assert int((~below).sum()) == n // 2  # every above-mean sample is kept
    pruned_share = 1 - int(below.sum()) / (n // 2)
    assert abs(pruned_share - prune_ratio) < 0.02
    assert abs(sifter.stats.samples_sifted_out / n - prune_ratio / 2) < 0.01
    assert bool((weights[below] == torch.tensor(1 / (1 - prune_ratio), dtype=torch.float32)).all())
    assert bool((weights[~below] == 1).all())
    assert sifter.stats.scoring_seconds == 0.0


def test_infobatch_weighted_loss_is_unbiased():
    n, prune_ratio = 2000, 0.5
    generator = torch.Generator().manual_seed(3)
    # Below the mean: varied small losses; above: large ones. The mean is about 0.7.
    table = torch.where(torch.arange(n) % 2 == 0, torch.rand(n, generator=generator) * 0.4,
                        1.0 + torch.rand(n, generator=generator))
    below_ids = torch.arange(0, n, 2)
    full_sum = table[below_ids].sum().item()
    weighted_sums = []
    for seed in range(30):
        sifter = sifter_for(infobatch_config(prune_ratio), n, seed=seed)
        train_epoch(sifter, lambda ids: table[ids])
        ids, weights = train_epoch(sifter, lambda ids: table[ids])
        below = ids % 2 == 0
        weighted_sums.append((table[ids[below]] * weights[below]).sum().item())
        assert sifter.stats.samples_sifted_out > 0.2 * n
    mean = sum(weighted_sums) / len(weighted_sums)
    assert abs(mean / full_sum - 1) < 0.02
    # Unweighted, the same batches would lose about prune_ratio of that sum.
    assert min(weighted_sums) < full_sum < max(weighted_sums)


def test_infobatch_anneals_by_samples_when_asked():
    n, num_epochs = 4096, 4
    table = half_below(n)
    # Annealing starts at (1 - 0.125) * 4 * n = 3.5 n samples seen: halfway through the 4th epoch.
    config = InfoBatchSiftConfig(0.5, 0.125, NO_DELAY, anneal_by="samples")
    sifter = sifter_for(config, n, num_epochs=num_epochs, shuffle=False)
    assert sifter.selector.anneal_start_samples == 3.5 * n
    for epoch in range(3):
        ids, weights = train_epoch(sifter, lambda ids: table[ids])
        if epoch > 0:
            assert sifter.stats.samples_sifted_out > 0.2 * n
    ids, weights = train_epoch(sifter, lambda ids: table[ids])
    # In id order, the candidates with ids >= n / 2 were drawn after annealing began: all kept, weight 1.
    late = ids >= n // 2
    assert int(late.sum()) == n // 2 and bool((weights[late] == 1).all())
    assert 0.2 * n / 2 < sifter.stats.samples_sifted_out < 0.3 * n / 2
    # Planned training is over: annealing continues, nothing is pruned.
    ids, weights = train_epoch(sifter, lambda ids: table[ids])
    assert len(ids) == n and bool((weights == 1).all())


def official_infobatch_kept_per_epoch(table, num_epochs, prune_ratio, delta=0.875):
    """Samples each epoch trains on under the official InfoBatch (infobatch/infobatch.py of NUS-HPC-AI-Lab/InfoBatch),
    driven here on fixed per-sample losses: scores start at 3; its IBSampler resets once when built and again at
    every epoch's iter(), so epoch e is its (e + 1)-th reset, which prunes while iterations <= num_epochs * delta;
    prune() keeps int(keep_ratio * count) of the samples below the mean score, keep_ratio = max(0.1, 1 - ratio)."""
    keep_ratio = min(1.0, max(0.1, 1.0 - prune_ratio))
    scores = torch.full((len(table),), 3.0)
    kept = []
    for epoch in range(num_epochs):
        iterations = epoch + 1
        if iterations > num_epochs * delta:
            kept.append(len(table))
        else:
            below = int((scores < scores.mean()).sum())
            kept.append(len(table) - below + int(keep_ratio * below))
        scores = table.clone()  # every sample trained is scored; pruned ones keep their (identical) old score
    return kept


@pytest.mark.parametrize("num_epochs", [2, 12])
def test_infobatch_prunes_whole_epochs_as_the_official_code(num_epochs):
    n = 4096
    table = half_below(n)
    reference = official_infobatch_kept_per_epoch(table, num_epochs, 0.5)
    if num_epochs == 2:
        assert reference == [n, n]  # the 2-epoch SST-2 table: InfoBatch as written prunes nothing
    else:
        assert reference == [n] + [n - 1024] * 9 + [n, n]  # epochs 1 to 9 pruned, 10 and 11 in full
    sifter = sifter_for(InfoBatchSiftConfig(0.5, 0.125, NO_DELAY), n, num_epochs=num_epochs)
    kept = []
    for epoch in range(num_epochs):
        ids, weights = train_epoch(sifter, lambda ids: table[ids])
        kept.append(len(ids))
        if reference[epoch] == n:
            assert len(ids) == n and bool((weights == 1).all())  # the annealed epochs train in full, weight 1
    # Ours draws each below-mean sample's fate (binomial count): within 4 sigma of the official exact count.
    sigma = (n / 2 * 0.25) ** 0.5
    assert all(abs(ours - theirs) < 4 * sigma for ours, theirs in zip(kept, reference)), (kept, reference)
    overall = sum(kept) / (n * num_epochs)
    assert overall == pytest.approx(sum(reference) / (n * num_epochs), abs=0.01)


def test_infobatch_prune_ratio_above_0_9_prunes_0_9_as_the_official_code():
    n = N_STATISTICS
    table = half_below(n)
    sifter = sifter_for(infobatch_config(0.95), n)
    train_epoch(sifter, lambda ids: table[ids])
    ids, weights = train_epoch(sifter, lambda ids: table[ids])
    below = table[ids] < 0.55
    assert abs(1 - int(below.sum()) / (n // 2) - 0.9) < 0.02
    assert bool((weights[below] == torch.tensor(10.0)).all())  # weight 1 / keep_ratio, at most 10


def test_infobatch_keeps_samples_never_remembered():
    n = 4096
    table = half_below(n)
    table[torch.arange(n) % 8 == 0] = float("nan")  # not remembered either
    sifter = sifter_for(infobatch_config(0.9), n, shuffle=False)
    # Epoch 1 reports only the first half of the data set.
    train_epoch(sifter, lambda ids: table[ids], record=lambda ids: bool((ids < n // 2).all()))
    ids, weights = train_epoch(sifter, lambda ids: table[ids])
    remembered = table[: n // 2][torch.isfinite(table[: n // 2])]
    assert sifter.selector.threshold == pytest.approx(remembered.mean().item())  # finite, remembered only
    never = (ids >= n // 2) | (ids % 8 == 0)
    assert int(never.sum()) == n // 2 + n // 16  # all kept
    assert bool((weights[never] == 1).all())
    below = int((remembered < 0.5).sum())
    assert abs(sifter.stats.samples_sifted_out - 0.9 * below) < 0.05 * below


# ---- both policies: the interface and the shared semantics ---------------------

POLICIES = {"stale": lambda: stale_config(2.0, sift_delay=5), "infobatch": lambda: infobatch_config(0.5, sift_delay=5)}


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("policy", POLICIES)
def test_epochs_refill_full_batches_without_duplicates(policy, drop_last):
    n, batch_size = 1003, 32
    table = torch.rand(n, generator=torch.Generator().manual_seed(4))
    sifter = sifter_for(POLICIES[policy](), n, batch_size=batch_size, drop_last=drop_last)
    expected_seen = n - n % batch_size if drop_last else n
    for epoch in range(3):
        sizes = []
        sifter.stats.reset()
        ids = []
        for _, batch_ids in sifter:
            sizes.append(len(batch_ids))
            ids.extend(batch_ids.tolist())
            assert sifter.batch_weights().shape == (len(batch_ids),)
            sifter.record_losses(table[batch_ids])
        stats = sifter.stats
        assert all(size == batch_size for size in sizes[:-1])
        assert len(ids) == len(set(ids)) == stats.samples_kept
        assert stats.samples_seen == expected_seen
        assert stats.samples_kept + stats.samples_sifted_out == stats.samples_seen
        assert stats.batches_yielded == len(sizes)
        if epoch > 0:
            assert stats.samples_sifted_out > 0.15 * expected_seen


@pytest.mark.parametrize("policy", POLICIES)
def test_samples_seen_is_up_to_date_at_every_yield(policy):
    sifter = sifter_for(POLICIES[policy](), 640, batch_size=16, shuffle=False)
    table = torch.rand(640, generator=torch.Generator().manual_seed(5))
    for _ in range(2):
        drawn = 0
        for _, ids in sifter:
            sifter.record_losses(table[ids])
            drawn = max(drawn, int(ids.max()) + 1)  # in id order, the candidates drawn so far
            assert sifter.stats.samples_seen >= drawn
            assert sifter.stats.samples_seen - drawn < 16
            assert sifter.stats.samples_kept + sifter.stats.samples_sifted_out == sifter.stats.samples_seen
        sifter.stats.reset()


@pytest.mark.parametrize("policy", POLICIES)
def test_delay_passes_batches_through_and_their_losses_are_remembered(policy):
    config = stale_config(1.0, sift_delay=3) if policy == "stale" else infobatch_config(0.5, sift_delay=3)
    batches = [[torch.randn(8, 2), torch.arange(i, i + 8)] for i in range(0, 80, 8)]

    class ListLoader:
        batch_size, drop_last = 8, False

        def __iter__(self):
            return iter(batches)

    sifter = SiftingDataloader(config, ListLoader(), seed=0, num_samples=80, num_epochs=10)
    for position, batch in enumerate(sifter):
        if position < 3:
            assert batch is batches[position]
            assert sifter.batch_weights().tolist() == [1.0] * 8
        sifter.record_losses(torch.full((8,), float(position)))
    assert sifter.sample_memory.remembered.all()  # the first epoch keeps everything: nothing known
    assert sifter.sample_memory.losses[:24].tolist() == [float(i // 8) for i in range(24)]


@pytest.mark.parametrize("policy", POLICIES)
def test_per_sample_memory_does_not_grow(policy):
    n = 1000
    sifter = sifter_for(POLICIES[policy](), n, batch_size=50)
    memory = sifter.sample_memory
    tensors = [memory.losses, memory.epoch_stamps] + ([memory.weights] if memory.weights is not None else [])
    pointers = [tensor.data_ptr() for tensor in tensors]
    nbytes = memory.nbytes
    assert nbytes == n * (12 if policy == "infobatch" else 8)
    for epoch in range(12):
        train_epoch(sifter, fresh_draws(epoch))
    assert [tensor.data_ptr() for tensor in tensors] == pointers
    assert all(tensor.shape == (n,) for tensor in tensors) and memory.nbytes == nbytes
    assert int(memory.epoch_stamps.max()) == 11
    if sifter.loss_history is not None:
        assert len(sifter.loss_history.values()) == sifter.loss_history.loss_history_length == 500


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("same_seed", [True, False])
def test_seed_decides_the_selection(policy, same_seed):
    table = torch.rand(2000, generator=torch.Generator().manual_seed(6))

    def yielded(seed):
        sifter = sifter_for(POLICIES[policy](), 2000, seed=seed, batch_size=50)
        return [train_epoch(sifter, lambda ids: table[ids]) for _ in range(3)]

    first, second = yielded(11), yielded(11 if same_seed else 12)
    same = all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(first, second))
    assert same == same_seed


def test_uses_training_losses():
    data = loader(10)
    assert SiftingDataloader(stale_config(), data, num_samples=10).uses_training_losses
    assert SiftingDataloader(infobatch_config(), data, num_samples=10, num_epochs=1).uses_training_losses
    assert not SiftingDataloader(RandomSiftConfig(0.5, NO_DELAY), data).uses_training_losses
    relative = RelativeProbabilisticSiftConfig(1.0, 10, NO_DELAY)
    sifter = SiftingDataloader(relative, data, RaisingLoss(), nn.Linear(2, 1))
    assert not sifter.uses_training_losses
    with pytest.raises(RuntimeError, match=r"batch_weights\(\) is for the policies .*uses_training_losses is False"):
        sifter.batch_weights()


# CUDA joins where a GPU is present; on the CPU the same path runs with cpu tensors.
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("policy", POLICIES)
def test_batches_on_the_device_and_bf16_losses(policy, device):
    order = torch.randperm(256, generator=torch.Generator().manual_seed(7))
    batches = [(torch.randn(32, 2, device=device), order[i:i + 32].to(device)) for i in range(0, 256, 32)]

    class DeviceLoader:
        batch_size = 32

        def __iter__(self):
            return iter(batches)

    config = stale_config(1.0) if policy == "stale" else infobatch_config(0.5)
    sifter = SiftingDataloader(config, DeviceLoader(), seed=0, num_samples=256, num_epochs=10)
    for _ in range(3):
        for features, ids in sifter:
            assert features.device.type == ids.device.type == device
            weights = sifter.batch_weights()
            assert weights.device == ids.device and weights.dtype == torch.float32
            # As a bf16 autocast loop computes them: [n, 1], still attached to the graph.
            losses = (ids.float() / 256).to(torch.bfloat16)[:, None].requires_grad_()
            sifter.record_losses(losses)
    assert sifter.sample_memory.losses[order[0]].item() == pytest.approx(order[0].item() / 256, abs=0.01)
    assert sifter.sample_memory.losses.dtype == torch.float32
    assert sifter.stats.samples_sifted_out > 0


def test_custom_sample_ids_for_a_dict_batch():
    data = [{"x": torch.zeros(2), "key": 99 - i} for i in range(100)]
    dict_loader = DataLoader(data, batch_size=10)
    sifter = SiftingDataloader(infobatch_config(0.5), dict_loader, num_samples=100, num_epochs=5,
                               sample_ids=lambda batch: batch["key"])
    for batch in sifter:
        sifter.record_losses(batch["key"].float())
    assert sifter.sample_memory.losses.tolist() == [float(i) for i in range(100)]


# ---- errors --------------------------------------------------------------------


def test_missing_num_samples_and_num_epochs_are_named():
    data = loader(10)
    for config in (stale_config(), infobatch_config()):
        with pytest.raises(ValueError, match=rf"{type(config).__name__} needs num_samples="):
            SiftingDataloader(config, data, num_epochs=3)
    with pytest.raises(ValueError, match=r"InfoBatchSiftConfig needs num_epochs= .*anneal"):
        SiftingDataloader(infobatch_config(), data, num_samples=10)
    with pytest.raises(ValueError, match=r"num_samples must be an int >= 1 or None, got 0"):
        SiftingDataloader(stale_config(), data, num_samples=0)
    with pytest.raises(TypeError, match=r"num_epochs must be an int >= 1 or None, got 2.5"):
        SiftingDataloader(infobatch_config(), data, num_samples=10, num_epochs=2.5)
    with pytest.raises(TypeError, match=r"sample_ids must be a callable"):
        SiftingDataloader(stale_config(), data, num_samples=10, sample_ids="sample_id")


@pytest.mark.parametrize("sift_delay", [0, 2])
@pytest.mark.parametrize("num_samples", [50, 100])
def test_ids_out_of_range_fail_at_the_first_batch(sift_delay, num_samples):
    # The data set has 100 samples: ids 0..99, or shifted to -50..49.
    shift = 50 if num_samples == 100 else 0
    sifter = SiftingDataloader(stale_config(sift_delay=sift_delay), loader(100, batch_size=100), num_samples=num_samples,
                               sample_ids=lambda batch: batch[-1] - shift)
    with pytest.raises(ValueError, match=rf"sample ids must be in \[0, num_samples\) = \[0, {num_samples}\), "
                                         rf"got ids from {-shift} to {99 - shift}"):
        next(iter(sifter))


def test_labels_mistaken_for_ids_are_caught():
    # (features, labels) with no ids: the last element is the labels, integers in range.
    labels = torch.arange(100) % 10
    plain = DataLoader(TensorDataset(torch.randn(100, 2), labels), batch_size=20)
    sifter = SiftingDataloader(infobatch_config(), plain, num_samples=100, num_epochs=2)
    with pytest.raises(ValueError, match=r"distinct within a batch, got 10 repeats \(id 0 2 times\); "
                                         r"is sample_ids reading the labels\?"):
        next(iter(sifter))


def test_ids_of_the_wrong_type_or_shape_are_named():
    sifter = SiftingDataloader(stale_config(), loader(10), num_samples=10, sample_ids=lambda batch: batch[0])
    with pytest.raises(TypeError, match=r"integer torch.Tensor of sample ids, got a torch.float32 tensor"):
        next(iter(sifter))
    sifter = SiftingDataloader(stale_config(), loader(10), num_samples=10,
                               sample_ids=lambda batch: batch[-1][:, None])
    with pytest.raises(ValueError, match=r"shape \[n\] with n = 10, got shape \[10, 1\]"):
        next(iter(sifter))


def test_record_losses_misuse_is_named():
    sifter = sifter_for(stale_config(), 64, batch_size=32)
    with pytest.raises(RuntimeError, match=r"record_losses\(\) was called before any batch was yielded"):
        sifter.record_losses(torch.zeros(32))
    with pytest.raises(RuntimeError, match=r"batch_weights\(\) was called before any batch was yielded"):
        sifter.batch_weights()
    iterator = iter(sifter)
    next(iterator)
    with pytest.raises(ValueError, match=r"record_losses\(losses\) needs one loss per sample, of shape \[n\] "
                                         r"or \[n, 1\] with n = 32, got shape \[32, 2\]"):
        sifter.record_losses(torch.zeros(32, 2))
    with pytest.raises(ValueError, match=r"with n = 32, got shape \[31\]"):
        sifter.record_losses(torch.zeros(31))
    with pytest.raises(TypeError, match=r"record_losses\(losses\) needs a torch.Tensor .*got list"):
        sifter.record_losses([0.0] * 32)
    sifter.record_losses(torch.zeros(32))
    with pytest.raises(RuntimeError, match=r"already called for the batch just yielded"):
        sifter.record_losses(torch.zeros(32))
    next(iterator)
    sifter.record_losses(torch.zeros(32))  # a new batch takes its losses again


def test_training_loss_records_the_losses_and_weights_them_as_the_two_calls_do():
    sifter = sifter_for(infobatch_config(prune_ratio=0.5), 512, num_epochs=4, batch_size=64)
    train_epoch(sifter, fresh_draws())  # epoch 0 remembers every loss, so epoch 1 prunes and upweights
    for step, (_, ids) in enumerate(sifter):
        losses = torch.rand(len(ids), requires_grad=True)
        loss = sifter.training_loss(losses)
        weights = sifter.batch_weights()
        assert loss.item() == pytest.approx((losses.detach() * weights).mean().item())
        assert torch.equal(sifter.sample_memory.losses[ids], losses.detach())  # recorded, by sample id
        loss.backward()
        assert torch.allclose(losses.grad, weights / len(ids))
        if step == 2:
            break
    assert (sifter.batch_weights() == 2.0).any()  # some kept below-mean samples carry 1 / (1 - 0.5)
    with pytest.raises(RuntimeError, match="already called"):
        sifter.training_loss(torch.rand(len(ids)))  # once per batch, as record_losses
