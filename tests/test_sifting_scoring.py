"""The scoring pass (sift_bench.sifting.scoring): eval mode while it scores, each module's own mode after."""

import pytest
import torch

from sift_bench.sifting import Loss, SiftingBatch, SiftingStats
from sift_bench.sifting.scoring import score


class SquaredOutput(Loss):
    def loss(self, model, transformed_batch, original_batch=None):
        assert not model.training  # scored in eval mode
        return model(transformed_batch.columns[0]).squeeze(1) ** 2


def net() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 1))


def test_scores_in_eval_mode_and_restores_each_modules_own_mode():
    model = net().train()
    model[1].eval()  # a submodule the user froze in eval stays in eval
    stats = SiftingStats()
    losses = score(SquaredOutput(), model, SiftingBatch([torch.randn(5, 3)]), None, stats)
    assert losses.shape == (5,) and losses.dtype == torch.float32
    assert [module.training for module in model] == [True, False, True] and model.training
    assert stats.scoring_seconds > 0


def test_an_empty_shards_batch_leaves_the_model_training():
    # Under DDP a rank whose shard ran dry scores an empty batch while the others score theirs.
    model = net().train()
    losses = score(SquaredOutput(), model, SiftingBatch([torch.empty(0, 3)]), None, SiftingStats())
    assert losses.numel() == 0 and all(module.training for module in model.modules())


def test_a_loss_of_the_wrong_shape_is_refused_and_the_mode_restored():
    class Wrong(Loss):
        def loss(self, model, transformed_batch, original_batch=None):
            return torch.zeros(2)

    model = net().train()
    with pytest.raises(ValueError, match="Wrong.loss must return one loss per sample"):
        score(Wrong(), model, SiftingBatch([torch.randn(5, 3)]), None, SiftingStats())
    assert all(module.training for module in model.modules())
