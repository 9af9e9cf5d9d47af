"""SiftingDataloader end to end, with real torch DataLoaders and small real models."""

import pytest
import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, Dataset, SequentialSampler, TensorDataset

from sift_bench.sifting import (
    Loss,
    LossConfig,
    RandomSiftConfig,
    RelativeProbabilisticSiftConfig,
    SiftingBaseConfig,
    SiftingBatch,
    SiftingBatchTransform,
    SiftingDataloader,
)

# ---- helpers ---------------------------------------------------------------


def relative_config(beta_value=1.0, loss_history_length=500, sift_delay=0, repeat=False):
    return RelativeProbabilisticSiftConfig(
        beta_value=beta_value,
        loss_history_length=loss_history_length,
        loss_based_sift_config=LossConfig(
            sift_config=SiftingBaseConfig(sift_delay=sift_delay, repeat_delay_per_epoch=repeat)
        ),
    )


def random_config(keep_fraction=0.5, sift_delay=0, repeat=False):
    return RandomSiftConfig(
        keep_fraction=keep_fraction,
        loss_based_sift_config={"sift_config": {"sift_delay": sift_delay, "repeat_delay_per_epoch": repeat}},
    )


class IdDataset(Dataset):
    """Sample i is (4 features, id i); fetched a whole batch at a time, so big epochs stay fast."""

    def __init__(self, n):
        self.features = torch.randn(n, 4, generator=torch.Generator().manual_seed(0))
        self.ids = torch.arange(n)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return self.features[i], self.ids[i]

    def __getitems__(self, indices):
        indices = torch.as_tensor(indices)
        return self.features[indices], self.ids[indices]


def as_is(batch):
    return batch


def id_loader(n, batch_size, shuffle=False, drop_last=False, seed=0):
    return DataLoader(
        IdDataset(n),
        batch_size=batch_size,
        shuffle=shuffle,
        drop_last=drop_last,
        collate_fn=as_is,
        generator=torch.Generator().manual_seed(seed),
    )


class ListLoader:
    """A custom re-iterable loader, like the harness's CIFAR pipeline: batch_size, drop_last, no len."""

    def __init__(self, batches, batch_size, drop_last=False):
        self.batches = batches
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.samples_drawn = 0

    def __iter__(self):
        for batch in self.batches:
            if isinstance(batch, tuple):
                self.samples_drawn += len(batch[1])
            yield batch


def id_batches(n_batches, batch_size):
    ids = torch.arange(n_batches * batch_size)
    return [(ids[i : i + batch_size].float()[:, None].repeat(1, 4), ids[i : i + batch_size])
            for i in range(0, len(ids), batch_size)]


class TableLoss(Loss):
    """Loss of sample i is table[i]: i.i.d. when the table is random. Counts its calls."""

    def __init__(self, table):
        self.table = table
        self.calls = 0

    def loss(self, model, transformed_batch, original_batch=None):
        self.calls += 1
        return self.table[original_batch[1]]


class RaisingLoss(Loss):
    def loss(self, model, transformed_batch, original_batch=None):
        raise RuntimeError("scoring was not supposed to happen")


def tiny_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 1))


class ModelLoss(Loss):
    """Squared error of a real model; records what the model looked like while scoring."""

    def __init__(self):
        self.seen_modes, self.grad_enabled, self.scored = [], [], {}

    def loss(self, model, transformed_batch, original_batch=None):
        features, ids = original_batch
        self.seen_modes.append([module.training for module in model.modules()])
        self.grad_enabled.append(torch.is_grad_enabled())
        losses = (model(features).squeeze(1) - ids.float() / 100) ** 2
        self.scored.update(zip(ids.tolist(), losses.tolist()))
        return losses


def run_epoch(sifter):
    """Yielded batch sizes and ids of one epoch."""
    sizes, ids = [], []
    for _, batch_ids in sifter:
        sizes.append(len(batch_ids))
        ids.extend(batch_ids.tolist())
    return sizes, ids


# ---- selection statistics --------------------------------------------------

N_STATISTICS = 40_000


@pytest.mark.parametrize("beta_value", [0.5, 1.0, 2.0, 3.0])
def test_kept_fraction_is_one_over_one_plus_beta(beta_value):
    loss = TableLoss(torch.rand(N_STATISTICS, generator=torch.Generator().manual_seed(1)))
    sifter = SiftingDataloader(
        relative_config(beta_value), id_loader(N_STATISTICS, 128), loss, tiny_net(), seed=0
    )
    run_epoch(sifter)
    assert loss.calls * 128 >= 20_000
    assert abs(sifter.stats.pct_accepted - 100 / (1 + beta_value)) < 2.0


def tied_losses(n, tied_share, seed):
    """Losses of which `tied_share` are exactly equal (at the median of the rest), the others uniform."""
    generator = torch.Generator().manual_seed(seed)
    table = torch.rand(n, generator=generator)
    table[torch.rand(n, generator=generator) < tied_share] = 0.5
    return table


def test_ties_rank_mid_rank_and_keep_one_over_one_plus_beta():
    # 40 % of the losses tied (at their median). Reference figures of the three rules on these losses, each computed
    # here as its source ranks a loss among a history (p = share of the history below, at or below, or the
    # mid-rank; at beta 1 the kept fraction is E[p]): counting ties as below (an inclusive percentile) keeps about
    # 0.59; Selective Backprop's lib/hist.py (UnboundedHistogram.percentile_of_score counts strictly lower scores)
    # about 0.45; the mid-rank keeps the documented 1 / (1 + beta) = 0.5.
    n = 20_000
    table = tied_losses(n, 0.4, seed=3)
    generator = torch.Generator().manual_seed(0)
    history = table[torch.randint(0, n, (500,), generator=generator)]
    below = (history[None, :] < table[:, None]).float().mean(dim=1)
    at_or_below = (history[None, :] <= table[:, None]).float().mean(dim=1)
    assert 0.56 < float(at_or_below.mean()) < 0.62   # E[p] at beta 1: the inclusive rule's kept fraction
    assert 0.42 < float(below.mean()) < 0.47         # the strict rule's
    loss = TableLoss(table)
    sifter = SiftingDataloader(relative_config(1.0), id_loader(n, 128, shuffle=True), loss, tiny_net(), seed=0)
    run_epoch(sifter)
    assert sifter.stats.samples_seen == n
    assert 46.0 <= sifter.stats.pct_accepted <= 54.0


@pytest.mark.parametrize("beta_value", [0.5, 1.0, 3.0])
def test_higher_losses_are_kept_more_often(beta_value):
    table = torch.rand(N_STATISTICS, generator=torch.Generator().manual_seed(2))
    sifter = SiftingDataloader(
        relative_config(beta_value), id_loader(N_STATISTICS, 128, shuffle=True),
        TableLoss(table), tiny_net(), seed=0,
    )
    _, ids = run_epoch(sifter)
    mean_kept = table[ids].mean().item()
    assert mean_kept > table.mean().item() + 0.05
    assert abs(mean_kept - (beta_value + 1) / (beta_value + 2)) < 0.02


@pytest.mark.parametrize("keep_fraction", [0.3, 0.75])
def test_random_sift_keeps_keep_fraction_and_never_scores(keep_fraction):
    table = torch.rand(N_STATISTICS, generator=torch.Generator().manual_seed(3))
    sifter = SiftingDataloader(
        random_config(keep_fraction), id_loader(N_STATISTICS, 128), RaisingLoss(), None, seed=0
    )
    _, ids = run_epoch(sifter)
    assert abs(sifter.stats.pct_accepted - 100 * keep_fraction) < 2.0
    # Whatever the loss would have been, the kept samples are a plain subsample.
    assert abs(table[ids].mean().item() - table.mean().item()) < 0.02
    assert sifter.stats.scoring_seconds == 0.0


def test_each_batch_is_compared_with_the_history_before_it():
    ids = torch.arange(12)
    batches = [(ids[i : i + 4].float()[:, None], ids[i : i + 4]) for i in (0, 4, 8)]
    table = torch.tensor([10.0, 11, 12, 13, 0, 0, 0, 0, 20, 21, 22, 23])
    # A tiny beta keeps anything with p > 0 almost surely, so only p == 0 drops a sample.
    sifter = SiftingDataloader(
        relative_config(beta_value=1e-3), ListLoader(batches, 4), TableLoss(table), tiny_net(), seed=0
    )
    # Batch 0 meets an empty history (all kept); batch 1 is below all of batch 0 (p = 0,
    # all dropped: had it been compared with itself, p would be 0.5); batch 2 is above all.
    assert run_epoch(sifter)[1] == [0, 1, 2, 3, 8, 9, 10, 11]
    assert sifter.loss_history.values().tolist() == table.tolist()


def test_history_holds_the_last_scored_losses():
    table = torch.rand(1000, generator=torch.Generator().manual_seed(4))
    sifter = SiftingDataloader(relative_config(loss_history_length=50), id_loader(1000, 32),
                               TableLoss(table), tiny_net(), seed=0)
    run_epoch(sifter)
    assert sifter.loss_history.values().tolist() == table[-50:].tolist()


def test_non_finite_losses_are_kept_and_left_out_of_the_history():
    n = 2000
    ids = torch.arange(n)
    table = torch.rand(n, generator=torch.Generator().manual_seed(5))
    table[ids % 5 == 0] = float("nan")
    table[ids % 7 == 0] = float("inf")
    table[ids % 11 == 0] = -float("inf")
    sifter = SiftingDataloader(relative_config(beta_value=3.0, loss_history_length=300),
                               id_loader(n, 64, shuffle=True), TableLoss(table), tiny_net(), seed=0)
    _, kept_ids = run_epoch(sifter)
    non_finite = set(ids[~torch.isfinite(table)].tolist())
    assert non_finite <= set(kept_ids)
    history = sifter.loss_history.values()
    assert len(history) == 300 and bool(torch.isfinite(history).all())
    # The finite samples are still sifted: about 1/(1+beta) of them are kept.
    finite_kept = len(kept_ids) - len(non_finite)
    assert 0.15 < finite_kept / (n - len(non_finite)) < 0.35


# ---- delay -----------------------------------------------------------------


def test_delay_passes_batches_through_untouched():
    batches = id_batches(10, 8)
    loss = TableLoss(torch.rand(80))
    sifter = SiftingDataloader(relative_config(sift_delay=3), ListLoader(batches, 8), loss, tiny_net())
    yielded = list(sifter)
    assert all(yielded[i] is batches[i] for i in range(3))
    assert yielded[3] is not batches[3]
    assert loss.calls == 7
    assert sifter.stats.batches_yielded == len(yielded)


def test_no_delay_scores_every_batch():
    loss = TableLoss(torch.rand(80))
    sifter = SiftingDataloader(relative_config(sift_delay=0), ListLoader(id_batches(10, 8), 8),
                               loss, tiny_net())
    list(sifter)
    assert loss.calls == 10


def test_delay_counts_yielded_batches_across_epochs():
    batches = id_batches(10, 8)
    loss = TableLoss(torch.rand(80))
    sifter = SiftingDataloader(relative_config(sift_delay=15), ListLoader(batches, 8), loss, tiny_net())
    first_epoch = list(sifter)
    assert [b is raw for b, raw in zip(first_epoch, batches)] == [True] * 10
    assert loss.calls == 0
    sifter.stats.reset()  # a report's reset does not restart the delay
    second_epoch = list(sifter)
    assert all(second_epoch[i] is batches[i] for i in range(5))
    assert loss.calls == 5


def test_repeat_delay_per_epoch_restarts_the_delay():
    batches = id_batches(10, 8)
    loss = TableLoss(torch.rand(80))
    sifter = SiftingDataloader(relative_config(sift_delay=3, repeat=True), ListLoader(batches, 8),
                               loss, tiny_net())
    for epoch in range(3):
        yielded = list(sifter)
        assert all(yielded[i] is batches[i] for i in range(3))
        assert loss.calls == 7 * (epoch + 1)


def test_random_sift_has_the_same_delay():
    batches = id_batches(10, 8)
    sifter = SiftingDataloader(random_config(0.5, sift_delay=4), ListLoader(batches, 8),
                               RaisingLoss(), None, seed=0)
    yielded = list(sifter)
    assert all(yielded[i] is batches[i] for i in range(4))
    assert sifter.stats.samples_sifted_out > 0


# ---- refill, epochs, stats -------------------------------------------------


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("make_config", [lambda: relative_config(1.0, sift_delay=5),
                                         lambda: random_config(0.4, sift_delay=5)],
                         ids=["relative", "random"])
def test_epochs_refill_full_batches_without_duplicates(drop_last, make_config):
    n, batch_size = 1003, 32  # not a multiple of the batch size
    dataset = TensorDataset(torch.randn(n, 4), torch.arange(n))
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=drop_last,
                        generator=torch.Generator().manual_seed(0))
    table = torch.rand(n, generator=torch.Generator().manual_seed(6))
    sifter = SiftingDataloader(make_config(), loader, TableLoss(table), tiny_net(), seed=0)
    expected_seen = n - n % batch_size if drop_last else n
    for epoch in range(3):
        sifter.stats.reset()
        sizes, ids = run_epoch(sifter)
        stats = sifter.stats
        assert all(size == batch_size for size in sizes[:-1])
        if drop_last:
            assert sizes[-1] == batch_size
        else:
            assert 0 < sizes[-1] <= batch_size
        assert len(ids) == len(set(ids))
        assert stats.samples_seen == expected_seen
        assert stats.samples_kept == len(ids)
        assert stats.samples_kept + stats.samples_sifted_out == stats.samples_seen
        assert stats.batches_yielded == len(sizes)
        if epoch > 0:
            assert stats.samples_sifted_out > 0.4 * expected_seen


def test_samples_seen_is_up_to_date_at_every_yield():
    loader = ListLoader(id_batches(40, 16), 16)
    sifter = SiftingDataloader(relative_config(2.0, sift_delay=3), loader,
                               TableLoss(torch.rand(640)), tiny_net(), seed=0)
    yielded = 0
    for _, ids in sifter:
        yielded += len(ids)
        stats = sifter.stats
        assert stats.samples_seen == loader.samples_drawn
        assert stats.samples_kept + stats.samples_sifted_out == stats.samples_seen
        assert stats.samples_kept >= yielded
    assert stats.samples_kept == yielded


def test_stats_snapshot_and_reset():
    sifter = SiftingDataloader(relative_config(), ListLoader(id_batches(5, 8), 8),
                               TableLoss(torch.rand(40)), tiny_net(), seed=0)
    assert sifter.stats.pct_accepted == 100.0
    list(sifter)
    snapshot = sifter.stats.snapshot()
    assert set(snapshot) == {"samples_seen", "samples_kept", "samples_left_over", "batches_yielded",
                             "scoring_seconds", "sync_seconds", "pct_accepted"}
    assert all(type(value) in (int, float) for value in snapshot.values())
    assert snapshot["samples_seen"] == 40
    assert snapshot["pct_accepted"] == pytest.approx(100 * snapshot["samples_kept"] / 40)
    assert snapshot["scoring_seconds"] > 0
    # One process: no ranks to wait for, nothing left over.
    assert snapshot["sync_seconds"] == 0.0 and snapshot["samples_left_over"] == 0
    sifter.stats.reset()
    assert sifter.stats.snapshot() == {"samples_seen": 0, "samples_kept": 0, "samples_left_over": 0,
                                       "batches_yielded": 0, "scoring_seconds": 0.0, "sync_seconds": 0.0,
                                       "pct_accepted": 100.0}
    assert sifter.stats.samples_sifted_out == 0


def test_len_is_not_defined():
    sifter = SiftingDataloader(relative_config(), id_loader(100, 10), TableLoss(torch.rand(100)),
                               tiny_net())
    with pytest.raises(TypeError):
        len(sifter)


@pytest.mark.parametrize("same_seed", [True, False])
def test_seed_decides_the_selection(same_seed):
    table = torch.rand(2000, generator=torch.Generator().manual_seed(7))

    def yielded_ids(seed):
        sifter = SiftingDataloader(relative_config(1.0), id_loader(2000, 50), TableLoss(table),
                                   tiny_net(), seed=seed)
        return run_epoch(sifter)[1] + run_epoch(sifter)[1]

    if same_seed:
        assert yielded_ids(11) == yielded_ids(11)
    else:
        assert yielded_ids(11) != yielded_ids(12)


# ---- scoring does not disturb the model --------------------------------------

def test_seed_none_follows_torch_manual_seed():
    def yielded_ids(global_seed):
        torch.manual_seed(global_seed)
        sifter = SiftingDataloader(random_config(0.5), id_loader(2000, 50), RaisingLoss(), None, seed=None)
        return run_epoch(sifter)[1]

    assert yielded_ids(5) == yielded_ids(5)
    assert yielded_ids(5) != yielded_ids(6)



def test_scoring_runs_in_eval_without_grad_and_restores_modes():
    model = tiny_net()
    model.train()
    model[2].eval()  # a submodule the user froze must stay frozen
    running_mean, tracked = model[1].running_mean.clone(), model[1].num_batches_tracked.clone()
    loss = ModelLoss()
    sifter = SiftingDataloader(relative_config(1.0), id_loader(256, 32, shuffle=True), loss, model)
    for features, ids in sifter:
        assert not features.requires_grad and features.grad_fn is None
    assert loss.seen_modes and all(not any(modes) for modes in loss.seen_modes)
    assert loss.grad_enabled == [False] * len(loss.grad_enabled)
    assert [module.training for module in model.modules()] == [True, True, True, False, True]
    assert torch.equal(model[1].running_mean, running_mean)
    assert torch.equal(model[1].num_batches_tracked, tracked)
    assert all(parameter.grad is None for parameter in model.parameters())


def test_mode_is_restored_when_the_loss_raises():
    model = tiny_net().train()
    sifter = SiftingDataloader(relative_config(), id_loader(64, 32), RaisingLoss(), model)
    with pytest.raises(RuntimeError, match="scoring was not supposed to happen"):
        next(iter(sifter))
    assert all(module.training for module in model.modules())


def test_dropout_does_not_randomise_the_score():
    model = tiny_net().train()
    loss = ModelLoss()
    dataset = IdDataset(256)
    sifter = SiftingDataloader(relative_config(1.0), id_loader(256, 32), loss, model, seed=0)
    run_epoch(sifter)
    with torch.no_grad():
        model.eval()
        expected = (model(dataset.features).squeeze(1) - dataset.ids.float() / 100) ** 2
    scored = torch.tensor([loss.scored[i] for i in range(256)])
    assert torch.allclose(scored, expected)


def test_loss_gets_the_sifting_batch_and_the_original_batch():
    batches = id_batches(3, 8)
    received = []

    class Recording(Loss):
        def loss(self, model, transformed_batch, original_batch=None):
            received.append((transformed_batch, original_batch))
            return torch.rand(len(transformed_batch), 1)  # [n, 1] is accepted too

    list(SiftingDataloader(relative_config(), ListLoader(batches, 8), Recording(), tiny_net()))
    assert [original is raw for (_, original), raw in zip(received, batches)] == [True] * 3
    assert all(isinstance(t, SiftingBatch) and len(t) == 8 for t, _ in received)


# ---- errors ----------------------------------------------------------------


class ShapedLoss(Loss):
    def __init__(self, make):
        self.make = make

    def loss(self, model, transformed_batch, original_batch=None):
        return self.make(len(transformed_batch))


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda n: torch.rand(n, 2), ValueError, r"shape \[n\] or \[n, 1\] with n = 32, got shape \[32, 2\]"),
        (lambda n: torch.rand(n - 1), ValueError, r"with n = 32, got shape \[31\]"),
        (lambda n: torch.rand(()), ValueError, r"with n = 32, got shape \[\]"),
        (lambda n: [0.0] * n, TypeError, r"ShapedLoss.loss must return a torch.Tensor.*got list"),
    ],
)
def test_loss_of_the_wrong_shape_is_named(make, error, message):
    model = tiny_net().train()
    sifter = SiftingDataloader(relative_config(), id_loader(64, 32), ShapedLoss(make), model)
    with pytest.raises(error, match=message):
        next(iter(sifter))
    assert model.training


def test_loader_without_batch_size_is_rejected():
    class SizelessBatches:  # a batch sampler that does not say its size (e.g. one batching by length)
        def __iter__(self):
            return iter([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]])

        def __len__(self):
            return 3

    loader = DataLoader(TensorDataset(torch.arange(10)), batch_sampler=SizelessBatches())
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1 .*got None.*batch_sampler"):
        SiftingDataloader(relative_config(), loader, TableLoss(torch.rand(10)), tiny_net())


def test_loader_with_a_batch_sampler_takes_its_size_and_drop_last():
    batch_sampler = BatchSampler(SequentialSampler(range(10)), batch_size=4, drop_last=True)
    loader = DataLoader(TensorDataset(torch.arange(10)), batch_sampler=batch_sampler)
    sifter = SiftingDataloader(relative_config(), loader, TableLoss(torch.rand(10)), tiny_net())
    assert (sifter.batch_size, sifter.drop_last) == (4, True)


def test_bad_arguments_are_rejected():
    loader = id_loader(10, 5)
    with pytest.raises(TypeError, match=r"re-iterable .*not an iterator"):
        SiftingDataloader(relative_config(), iter(loader), TableLoss(torch.rand(10)), tiny_net())
    with pytest.raises(TypeError, match=r"sift_config must be a policy \(a subclass of sift_bench.sifting.SiftPolicy"):
        SiftingDataloader("beta_value=1", loader, TableLoss(torch.rand(10)), tiny_net())
    # A dict is a RelativeProbabilisticSiftConfig's fields, as SageMaker's SiftingDataloader takes it.
    with pytest.raises(TypeError, match=r"sift_config is missing keys \['loss_history_length', 'loss_based_sift_config'\]"):
        SiftingDataloader({"beta_value": 1}, loader, TableLoss(torch.rand(10)), tiny_net())
    with pytest.raises(TypeError, match=r"loss_impl must be a sift_bench.sifting.Loss"):
        SiftingDataloader(relative_config(), loader, None, tiny_net())
    with pytest.raises(TypeError, match=r"model must be a torch.nn.Module, got NoneType"):
        SiftingDataloader(relative_config(), loader, TableLoss(torch.rand(10)), None)
    with pytest.raises(TypeError, match=r"seed must be an int or None, got 1.5"):
        SiftingDataloader(relative_config(), loader, TableLoss(torch.rand(10)), tiny_net(), seed=1.5)


class Sample:
    """A batch type the default transforms do not know."""

    def __init__(self, ids):
        self.ids = ids


def test_unsupported_batch_fails_at_the_first_batch_even_during_the_delay():
    loader = ListLoader([Sample(torch.arange(4))], 4)
    sifter = SiftingDataloader(relative_config(sift_delay=10), loader, RaisingLoss(), tiny_net())
    with pytest.raises(TypeError, match=r"batch of type \S*Sample.*batch_transforms="):
        next(iter(sifter))
    # A supported type with a field the default transform cannot select fails just as early.
    loader = ListLoader([{"ids": torch.arange(4), "meta": 7}], 4)
    sifter = SiftingDataloader(relative_config(sift_delay=10), loader, RaisingLoss(), tiny_net())
    with pytest.raises(TypeError, match=r"field 'meta' of a dict batch is a int"):
        next(iter(sifter))


def test_custom_batch_transform():
    class SampleTransform(SiftingBatchTransform):
        def transform(self, batch):
            return SiftingBatch([batch.ids])

        def reverse_transform(self, sifting_batch):
            return Sample(sifting_batch.columns[0])

    class SampleLoss(Loss):
        def loss(self, model, transformed_batch, original_batch=None):
            return (original_batch.ids * 7919 % 101).float()  # scrambled, so sifting drops some

    class Loader:
        batch_size = 10

        def __iter__(self):
            return (Sample(torch.arange(i, i + 10)) for i in range(0, 100, 10))

    sifter = SiftingDataloader(relative_config(2.0), Loader(), SampleLoss(), tiny_net(),
                               batch_transforms=SampleTransform(), seed=0)
    out = list(sifter)
    assert all(type(batch) is Sample for batch in out)
    assert all(len(batch.ids) == 10 for batch in out[:-1])
    assert sifter.stats.samples_kept == sum(len(batch.ids) for batch in out) < 100


# ---- devices ---------------------------------------------------------------


# CUDA joins where a GPU is present; on the CPU the same device path runs with cpu tensors.
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_batches_and_model_on_the_models_device(device):
    model = tiny_net().to(device).train()
    # Shuffled ids: in id order this loss only grows, so every batch would top the history and be kept.
    order = torch.randperm(320, generator=torch.Generator().manual_seed(0))
    features, ids = torch.cat([f for f, _ in id_batches(20, 16)])[order], order
    batches = [(features[i:i + 16].to(device), ids[i:i + 16].to(device)) for i in range(0, 320, 16)]
    sifter = SiftingDataloader(relative_config(1.0), ListLoader(batches, 16), ModelLoss(), model, seed=0)
    ids = []
    for features, batch_ids in sifter:
        assert features.device.type == device and batch_ids.device.type == device
        ids.extend(batch_ids.tolist())
    assert len(ids) == len(set(ids)) == sifter.stats.samples_kept < 320
    assert model.training
