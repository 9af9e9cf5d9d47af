"""A tiny Lightning classifier on scikit-learn's digits, trained through SiftingDataModule; for
tests/test_integration_lightning.py, which imports the module and data module from here.

    torchrun --standalone --nproc_per_node=2 tests/lightning_ddp_worker.py OUT_DIR   # Lightning DDP, two gloo ranks

Each rank writes OUT_DIR/rank{r}.json: the sample ids of every batch its training_step received, per epoch, the
sifter's stats, the global step, the planned steps, the schedule's length (trainer.estimated_stepping_batches in
configure_optimizers), its last step and learning rate, and a checksum of the weights.
"""

import json
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

from sift_bench.integrations.lightning import SiftingDataModule
from sift_bench.sifting import LossConfig, RelativeProbabilisticSiftConfig, SiftingBaseConfig

PEAK_LR = 0.1
FINAL_FACTOR = 0.01  # the linear schedule ends at PEAK_LR * FINAL_FACTOR


class DigitsClassifier(pl.LightningModule):
    """A small MLP written as a user would: it knows nothing of sifting. It records what it is given."""

    def __init__(self, schedule: str = "linear") -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
        self.schedule = schedule
        self.epochs: list[list[list[int]]] = []  # per epoch, the sample ids of each training batch
        self.step_lrs: list[float] = []  # the learning rate each optimizer step used
        self.no_grad_samples = 0  # samples forwarded in eval mode without gradients: the sifter's scoring
        self.validation_epochs = 0

    def forward(self, inputs):
        if not self.training and not torch.is_grad_enabled():
            self.no_grad_samples += len(inputs)
        return self.net(inputs)

    def on_train_epoch_start(self) -> None:
        self.epochs.append([])

    def training_step(self, batch, batch_idx):
        inputs, targets, ids = batch
        self.epochs[-1].append(ids.tolist())
        self.step_lrs.append(self.trainer.optimizers[0].param_groups[0]["lr"])
        return F.cross_entropy(self(inputs), targets)

    def on_validation_epoch_end(self) -> None:
        self.validation_epochs += 1

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=PEAK_LR, momentum=0.9)
        total_steps = self.total_steps = self.trainer.estimated_stepping_batches
        if self.schedule == "onecycle":
            scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=PEAK_LR, total_steps=total_steps)
        else:
            scheduler = torch.optim.lr_scheduler.LinearLR(
                optimizer, start_factor=1.0, end_factor=FINAL_FACTOR, total_iters=total_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class ValidatedDigitsClassifier(DigitsClassifier):
    def validation_step(self, batch, batch_idx):
        inputs, targets, _ = batch
        return F.cross_entropy(self(inputs), targets)


class DigitsData(pl.LightningDataModule):
    """The 1,797 digits (8x8 pixels scaled to [0, 1]), each with its index; shuffled training batches."""

    def __init__(self, batch_size: int = 32) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage: str) -> None:
        digits = load_digits()
        inputs = torch.tensor(digits.data, dtype=torch.float32) / 16
        targets = torch.tensor(digits.target, dtype=torch.int64)
        self.train_set = TensorDataset(inputs, targets, torch.arange(len(targets)))

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)


class ValidatedDigitsData(DigitsData):
    def val_dataloader(self):
        return DataLoader(self.train_set, batch_size=256)


def beta_one(sift_delay: int) -> RelativeProbabilisticSiftConfig:
    """Keeps about half of the samples (1 / (1 + beta_value)), after sift_delay batches."""
    return RelativeProbabilisticSiftConfig(
        beta_value=1, loss_history_length=128,
        loss_based_sift_config=LossConfig(sift_config=SiftingBaseConfig(sift_delay=sift_delay)))


def main(out_dir: str) -> None:
    pl.seed_everything(0, verbose=False)
    model = DigitsClassifier(schedule="linear")
    data = SiftingDataModule(DigitsData(batch_size=16), beta_one(sift_delay=4))
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=3, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, datamodule=data)
    scheduler = trainer.lr_scheduler_configs[0].scheduler
    result = {
        "rank": trainer.global_rank,
        "world_size": trainer.world_size,
        "epochs": model.epochs,
        "stats": data.sifter.stats.snapshot() | {"samples_sifted_out": data.sifter.stats.samples_sifted_out},
        "global_step": trainer.global_step,
        "planned_steps": data.planned_steps,
        "total_steps": model.total_steps,
        "scheduler_steps": scheduler.last_epoch,
        "final_lr": trainer.optimizers[0].param_groups[0]["lr"],
        "final_weight_sum": float(sum(p.detach().sum() for p in model.parameters())),
    }
    Path(out_dir, f"rank{trainer.global_rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
