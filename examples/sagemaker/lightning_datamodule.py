"""A Lightning training script written the way AWS documents SageMaker smart sifting: a LightningDataModule whose
`train_dataloader` returns a SiftingDataloader scored by the LightningModule, and the `TrainingMetricsRecorder`
callback. Data: scikit-learn's bundled 8x8 digits (offline). The module logs `val_acc`; under
`python -m sift_bench.sagemaker` it lands in the runner's run with the recorder's sifting counts and latencies.
"""

import argparse
from typing import Any

import lightning.pytorch as pl
import torch
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

from smart_sifting.data_model.data_model_interface import SiftingBatch
from smart_sifting.dataloader.sift_dataloader import SiftingDataloader
from smart_sifting.loss.abstract_sift_loss_module import Loss
from smart_sifting.metrics.lightning import TrainingMetricsRecorder
from smart_sifting.sift_config.sift_configs import LossConfig, RelativeProbabilisticSiftConfig, SiftingBaseConfig


class DigitsLoss(Loss):
    def __init__(self):
        self.celoss = torch.nn.CrossEntropyLoss(reduction="none")

    def loss(self, model: torch.nn.Module, transformed_batch: SiftingBatch, original_batch: Any = None) -> torch.Tensor:
        device = next(model.parameters()).device
        batch = [t.to(device) for t in original_batch]
        return self.celoss(model(batch[0]), batch[1])


class DigitsDataModule(pl.LightningDataModule):
    def __init__(self, batch_size: int, model: torch.nn.Module, beta: float, history_size: int, sift_delay: int):
        super().__init__()
        self.batch_size, self.model = batch_size, model
        self.beta, self.history_size, self.sift_delay = beta, history_size, sift_delay

    def setup(self, stage: str) -> None:
        data = load_digits()
        images = torch.tensor(data.data, dtype=torch.float32) / 16.0
        labels = torch.tensor(data.target, dtype=torch.int64)
        order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(1234))  # one split for every run
        self.val = TensorDataset(images[order[:300]], labels[order[:300]])
        self.train = TensorDataset(images[order[300:]], labels[order[300:]])

    def train_dataloader(self):
        sift_config = RelativeProbabilisticSiftConfig(
            beta_value=self.beta,
            loss_history_length=self.history_size,
            loss_based_sift_config=LossConfig(sift_config=SiftingBaseConfig(sift_delay=self.sift_delay)),
        )
        return SiftingDataloader(
            sift_config=sift_config,
            orig_dataloader=DataLoader(self.train, self.batch_size, shuffle=True),
            loss_impl=DigitsLoss(),
            model=self.model,
        )

    def val_dataloader(self):
        return DataLoader(self.val, 256)


class DigitsModule(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

    def forward(self, inputs):
        return self.net(inputs)

    def training_step(self, batch, batch_idx):
        loss = torch.nn.functional.cross_entropy(self(batch[0]), batch[1])
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_acc", (self(batch[0]).argmax(dim=1) == batch[1]).float().mean(), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=3e-3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--history-size", type=int, default=500)
    parser.add_argument("--sift-delay", type=int, default=10)
    args = parser.parse_args()

    model = DigitsModule()
    data = DigitsDataModule(args.batch_size, model, args.beta, args.history_size, args.sift_delay)
    trainer = pl.Trainer(max_epochs=args.epochs, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[TrainingMetricsRecorder()])
    trainer.fit(model, data)


if __name__ == "__main__":
    main()
