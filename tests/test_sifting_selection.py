"""The pure selection functions and the loss history ring buffer, on plain tensors."""

import pytest
import torch

from sift_bench.sifting import (
    LossHistory,
    keep_mask,
    loss_percentiles,
    random_keep_mask,
    relative_probabilistic_keep_mask,
)


def simulate(beta_value, n_samples=40_000, batch=128, loss_history_length=500, seed=0):
    """Sift i.i.d. uniform losses batch by batch, as the data loader does; return (losses, kept)."""
    generator = torch.Generator().manual_seed(seed)
    history = LossHistory(loss_history_length)
    all_losses, all_kept = [], []
    for _ in range(n_samples // batch):
        losses = torch.rand(batch, generator=generator)
        kept = relative_probabilistic_keep_mask(losses, history.values(), beta_value, generator)
        history.append(losses)
        all_losses.append(losses)
        all_kept.append(kept)
    return torch.cat(all_losses), torch.cat(all_kept)


def test_percentile_is_the_mid_rank():
    history = torch.tensor([3.0, 1.0, 4.0, 2.0])
    p = loss_percentiles(torch.tensor([0.5, 1.0, 2.5, 4.0, 9.0]), history)
    # Strictly below, plus half of the values equal: 1.0 has none below and one equal -> 0.5 / 4.
    assert p.tolist() == [0.0, 0.125, 0.5, 0.875, 1.0]


def test_percentile_with_ties_counts_them_half():
    history = torch.tensor([2.0, 2.0, 2.0, 5.0])
    assert loss_percentiles(torch.tensor([2.0, 1.9, 5.0]), history).tolist() == [0.375, 0.0, 0.875]


def test_percentile_of_empty_history_keeps_everything():
    p = loss_percentiles(torch.tensor([0.1, 5.0]), torch.empty(0))
    assert p.tolist() == [1.0, 1.0]
    kept = relative_probabilistic_keep_mask(torch.rand(1000), torch.empty(0), 3.0)
    assert bool(kept.all())


def test_percentile_matches_brute_force():
    generator = torch.Generator().manual_seed(1)
    losses, history = torch.randn(300, generator=generator), torch.randn(777, generator=generator)
    # Rounded to a tenth, so that a third of the values tie.
    losses, history = (losses * 10).round() / 10, (history * 10).round() / 10
    below = (history[None, :] < losses[:, None]).float().mean(dim=1)
    equal = (history[None, :] == losses[:, None]).float().mean(dim=1)
    assert torch.allclose(loss_percentiles(losses, history), below + equal / 2)


def test_keep_mask_extremes():
    generator = torch.Generator().manual_seed(0)
    assert not bool(keep_mask(torch.zeros(10_000), 0.5, generator).any())
    assert bool(keep_mask(torch.ones(10_000), 3.0, generator).all())


@pytest.mark.parametrize("beta_value", [0.5, 1.0, 2.0, 3.0])
def test_kept_fraction_is_one_over_one_plus_beta(beta_value):
    losses, kept = simulate(beta_value)
    assert losses.numel() >= 20_000
    pct_kept = 100 * kept.float().mean().item()
    assert abs(pct_kept - 100 / (1 + beta_value)) < 2.0


@pytest.mark.parametrize("beta_value", [0.5, 1.0, 3.0])
def test_higher_losses_are_kept_more_often(beta_value):
    losses, kept = simulate(beta_value)
    mean_kept = losses[kept].mean().item()
    assert mean_kept > losses.mean().item() + 0.05
    # For uniform losses, E[l * l^beta] / E[l^beta] = (beta + 1) / (beta + 2).
    assert abs(mean_kept - (beta_value + 1) / (beta_value + 2)) < 0.02


def test_random_keep_mask_keeps_keep_fraction():
    generator = torch.Generator().manual_seed(0)
    for keep_fraction in (0.25, 0.5, 0.9):
        kept = random_keep_mask(40_000, keep_fraction, generator)
        assert abs(kept.float().mean().item() - keep_fraction) < 0.02
    assert bool(random_keep_mask(1000, 1.0, generator).all())


def test_same_generator_seed_gives_same_mask():
    losses, history = torch.rand(256), torch.rand(500)
    first = relative_probabilistic_keep_mask(losses, history, 1.0, torch.Generator().manual_seed(7))
    again = relative_probabilistic_keep_mask(losses, history, 1.0, torch.Generator().manual_seed(7))
    other = relative_probabilistic_keep_mask(losses, history, 1.0, torch.Generator().manual_seed(8))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_non_finite_losses_are_kept():
    history = torch.arange(100.0)
    losses = torch.tensor([float("nan"), float("inf"), -float("inf"), -1.0])
    kept = relative_probabilistic_keep_mask(losses, history, 3.0, torch.Generator().manual_seed(0))
    # -1 is below the whole history (p = 0): dropped for sure; the non-finite ones are kept.
    assert kept.tolist() == [True, True, True, False]


def test_history_keeps_exactly_the_last_values():
    history = LossHistory(5)
    assert len(history) == 0 and history.values().numel() == 0
    history.append(torch.tensor([1.0, 2.0, 3.0]))
    assert history.values().tolist() == [1.0, 2.0, 3.0]
    history.append(torch.tensor([4.0, 5.0, 6.0, 7.0]))  # wraps around
    assert history.values().tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    history.append(torch.tensor([[8.0], [9.0]]))  # [n, 1] is flattened
    assert history.values().tolist() == [5.0, 6.0, 7.0, 8.0, 9.0]
    history.append(torch.arange(10.0, 22.0))  # more than the capacity at once
    assert history.values().tolist() == [17.0, 18.0, 19.0, 20.0, 21.0]
    assert len(history) == 5


def test_history_matches_a_list_over_many_appends():
    generator = torch.Generator().manual_seed(0)
    history, reference = LossHistory(37), []
    buffer_before = history._buffer.data_ptr()
    for _ in range(200):
        values = torch.rand(int(torch.randint(0, 20, (1,), generator=generator)), generator=generator)
        history.append(values)
        reference = (reference + values.tolist())[-37:]
        assert history.values().tolist() == pytest.approx(reference)
    assert history._buffer.data_ptr() == buffer_before  # preallocated, never regrown


def test_history_rejects_bad_length():
    with pytest.raises(ValueError, match="loss_history_length must be an int >= 1, got 0"):
        LossHistory(0)
    with pytest.raises(TypeError, match="loss_history_length must be an int >= 1, got 2.0"):
        LossHistory(2.0)
