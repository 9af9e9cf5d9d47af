"""SiftingDataModule under a real lightning.Trainer: on the CPU in this process, and under Lightning's DDP with two
gloo ranks started by torchrun. The LightningModule (tests/lightning_ddp_worker.py) knows nothing of sifting."""

import json
import math
import os
import signal
import subprocess
import sys

import lightning.pytorch as pl
import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from conftest import ROOT
from lightning_ddp_worker import (
    FINAL_FACTOR, PEAK_LR, DigitsClassifier, DigitsData, ValidatedDigitsClassifier, ValidatedDigitsData, beta_one,
)
from sift_bench.integrations.lightning import SiftingDataModule
from sift_bench.sifting import (
    InfoBatchSiftConfig, LossConfig, RandomSiftConfig, SiftingBaseConfig, StaleLossSiftConfig,
)

NUM_SAMPLES, EPOCHS = 1797, 3  # scikit-learn's digits
WORKER = ROOT / "tests" / "lightning_ddp_worker.py"


def fit(model, data, ckpt_path=None, **trainer_args) -> pl.Trainer:
    pl.seed_everything(0, verbose=False)
    trainer = pl.Trainer(**{"accelerator": "cpu", "devices": 1, "max_epochs": EPOCHS, "logger": False,
                            "enable_checkpointing": False, "enable_progress_bar": False, "enable_model_summary": False,
                            "num_sanity_val_steps": 0, **trainer_args})
    trainer.fit(model, datamodule=data, ckpt_path=ckpt_path)
    return trainer


def test_training_step_gets_the_sifted_batches_scored_by_the_module():
    delay = 4
    model = DigitsClassifier()
    data = SiftingDataModule(DigitsData(batch_size=32), beta_one(sift_delay=delay))
    trainer = fit(model, data)
    stats = data.sifter.stats
    assert trainer.current_epoch == EPOCHS and len(model.epochs) == EPOCHS
    assert data.batch_size == 32  # the wrapped module's attributes, as a LightningModule may read them
    assert stats.samples_seen == EPOCHS * NUM_SAMPLES
    # beta 1 keeps 1 / (1 + 1) of stationary losses; training losses drift, so a band wider than sampling error.
    assert 45 < stats.pct_accepted < 55, stats
    # What training_step received is what the sifter yielded: its batches, its samples, none twice in an epoch.
    batches = [batch for epoch in model.epochs for batch in epoch]
    assert len(batches) == stats.batches_yielded == trainer.global_step
    assert sum(len(batch) for batch in batches) == stats.samples_kept
    for epoch in model.epochs:
        ids = [i for batch in epoch for i in batch]
        assert len(ids) == len(set(ids)) < NUM_SAMPLES
        assert all(len(batch) == 32 for batch in epoch[:-1])  # refilled to full batches
    # Every candidate past the delay was scored once, by the LightningModule itself (eval mode, no gradients).
    assert model.no_grad_samples == stats.samples_seen - delay * 32
    assert stats.scoring_seconds > 0


@pytest.mark.parametrize("schedule", ["linear", "onecycle"])
def test_the_schedule_runs_over_the_planned_epochs_however_few_steps_sifting_leaves(schedule):
    keep_quarter = RandomSiftConfig(keep_fraction=0.25,
                                    loss_based_sift_config=LossConfig(sift_config=SiftingBaseConfig(sift_delay=0)))
    model = ValidatedDigitsClassifier(schedule=schedule)
    data = SiftingDataModule(ValidatedDigitsData(batch_size=32), keep_quarter)
    trainer = fit(model, data)
    planned_steps = EPOCHS * math.ceil(NUM_SAMPLES / 32)
    assert data.planned_steps == model.total_steps == planned_steps  # estimated_stepping_batches, read by the module
    # Epochs end when the sifter is exhausted; validation still runs at each epoch's end.
    assert trainer.current_epoch == EPOCHS and len(model.epochs) == EPOCHS
    assert model.validation_epochs == EPOCHS
    stats = data.sifter.stats
    sigma = math.sqrt(0.25 * 0.75 / stats.samples_seen)
    assert abs(stats.samples_kept / stats.samples_seen - 0.25) < 4 * sigma
    # A quarter of the steps: stepped once per optimizer step, the schedule would stop near a quarter of the way.
    assert trainer.global_step < planned_steps / 2
    scheduler = trainer.lr_scheduler_configs[0].scheduler
    assert scheduler.last_epoch == planned_steps  # completed, and not beyond (OneCycleLR raises past its total)
    final_lr = trainer.optimizers[0].param_groups[0]["lr"]
    if schedule == "linear":
        assert final_lr == pytest.approx(PEAK_LR * FINAL_FACTOR, rel=1e-9)
        assert all(later <= earlier for earlier, later in zip(model.step_lrs, model.step_lrs[1:]))
        assert model.step_lrs[-1] < 0.05 * PEAK_LR  # the last steps trained at the end of the schedule
    else:
        assert max(model.step_lrs) > 0.9 * PEAK_LR  # warmed up to the peak
        assert final_lr < 0.01 * PEAK_LR


def test_a_run_resumed_from_an_epoch_checkpoint_trains_the_remaining_epochs_and_completes_the_schedule(tmp_path):
    every_epoch = ModelCheckpoint(dirpath=tmp_path, filename="{epoch}", save_top_k=-1)
    fit(DigitsClassifier(), SiftingDataModule(DigitsData(), beta_one(sift_delay=4)), enable_checkpointing=True,
        callbacks=[every_epoch])
    model = DigitsClassifier()
    trainer = fit(model, SiftingDataModule(DigitsData(), beta_one(sift_delay=4)),
                  ckpt_path=tmp_path / "epoch=0.ckpt")
    # Epoch-based, as for any loader without len(): the second and third epochs run in full, the schedule ends.
    assert trainer.current_epoch == EPOCHS and len(model.epochs) == EPOCHS - 1
    assert all(len(epoch) > 10 for epoch in model.epochs)
    planned_steps = EPOCHS * math.ceil(NUM_SAMPLES / 32)
    assert trainer.lr_scheduler_configs[0].scheduler.last_epoch == model.total_steps == planned_steps
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(PEAK_LR * FINAL_FACTOR, rel=1e-9)


@pytest.mark.parametrize("config", [
    StaleLossSiftConfig(beta_value=1, loss_history_length=128, loss_based_sift_config={"sift_config": {}}),
    InfoBatchSiftConfig(prune_ratio=0.5),
])
def test_policies_that_need_the_training_loss_are_refused_by_name(config):
    with pytest.raises(ValueError, match=f"does not support {type(config).__name__}"):
        SiftingDataModule(DigitsData(), config)


def test_a_step_budget_is_refused_since_training_is_planned_in_epochs():
    data = SiftingDataModule(DigitsData(), beta_one(sift_delay=4))
    with pytest.raises(ValueError, match=r"max_steps=50"):
        fit(DigitsClassifier(), data, max_steps=50)


@pytest.mark.slow
def test_ddp_ranks_take_the_same_steps_on_disjoint_shards_and_finish(tmp_path):
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(WORKER),
            str(tmp_path)]
    process = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        _, stderr = process.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        pytest.fail(f"Lightning DDP hung for 150 s (a rank waiting for another?)\n{stderr[-3000:]}")
    assert process.returncode == 0, stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    assert [r["rank"] for r in ranks] == [0, 1] and ranks[0]["world_size"] == 2
    per_epoch = [[len(epoch) for epoch in r["epochs"]] for r in ranks]
    assert len(per_epoch[0]) == EPOCHS
    assert per_epoch[0] == per_epoch[1], "a rank with a batch more waits forever in DDP's gradient all-reduce"
    clocks = {"sync_seconds": 0, "scoring_seconds": 0}  # wall times are per rank
    assert ranks[0]["stats"] | clocks == ranks[1]["stats"] | clocks
    stats = ranks[0]["stats"]
    # Each rank drew its own shard, not the whole data set: Lightning's sampler replacement left the sifter alone.
    per_rank_batches = math.ceil(math.ceil(NUM_SAMPLES / 2) / 16)
    assert stats["samples_seen"] == EPOCHS * 2 * math.ceil(NUM_SAMPLES / 2)
    for epoch in range(EPOCHS):
        ids = [[i for batch in r["epochs"][epoch] for i in batch] for r in ranks]
        assert set(ids[0]).isdisjoint(ids[1])
        assert all(len(batch) == 16 for r in ranks for batch in r["epochs"][epoch])  # only full batches
    # About half (beta 1), less the kept samples left over at each epoch's end because no rank could fill a batch.
    assert 40 < stats["pct_accepted"] < 55 and stats["samples_left_over"] > 0, stats
    for r in ranks:
        assert r["planned_steps"] == r["total_steps"] == EPOCHS * per_rank_batches
        assert r["global_step"] == sum(per_epoch[0]) < r["planned_steps"]
        assert r["scheduler_steps"] == r["planned_steps"]
        assert r["final_lr"] == pytest.approx(PEAK_LR * FINAL_FACTOR, rel=1e-9)
    # Same steps, same gradients (all-reduced): the ranks end with the same weights.
    assert ranks[0]["final_weight_sum"] == pytest.approx(ranks[1]["final_weight_sum"], rel=1e-6)
