"""A plain PyTorch training script written the way AWS documents SageMaker smart sifting: a custom ListBatch
transform, a sifting Loss and SiftingDataloader(..., log_batch_data=False) around the training DataLoader.

It imports only `smart_sifting`, so it runs on a SageMaker container as it is, and off SageMaker through
`python -m sift_bench.sagemaker examples/sagemaker/pytorch_listbatch.py --epochs 3`. Data: scikit-learn's bundled
8x8 digits (offline). It prints its validation accuracy and, when an MLflow run is active (as under the runner),
logs it as `val_acc`.
"""

import argparse
from typing import Any

import torch
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

from smart_sifting.data_model.data_model_interface import SiftingBatch, SiftingBatchTransform
from smart_sifting.data_model.list_batch import ListBatch
from smart_sifting.dataloader.sift_dataloader import SiftingDataloader
from smart_sifting.loss.abstract_sift_loss_module import Loss
from smart_sifting.sift_config.sift_configs import LossConfig, RelativeProbabilisticSiftConfig, SiftingBaseConfig


class ListBatchTransform(SiftingBatchTransform):
    def transform(self, batch: Any):
        inputs = batch[0].tolist()
        labels = batch[-1].tolist()  # the last element holds the labels
        return ListBatch(inputs, labels)

    def reverse_transform(self, list_batch: ListBatch):
        return [torch.tensor(list_batch.inputs), torch.tensor(list_batch.labels)]


class SiftingImplementedLoss(Loss):
    def __init__(self):
        self.loss_no_reduction = torch.nn.CrossEntropyLoss(reduction="none")

    def loss(self, model: torch.nn.Module, transformed_batch: SiftingBatch, original_batch: Any = None) -> torch.Tensor:
        device = next(model.parameters()).device
        inputs = torch.tensor(transformed_batch.inputs, device=device)
        labels = torch.tensor(transformed_batch.labels, device=device)
        return self.loss_no_reduction(model(inputs), labels)


def digits(val_size: int):
    data = load_digits()
    images = torch.tensor(data.data, dtype=torch.float32) / 16.0
    labels = torch.tensor(data.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(1234))  # one split for every run
    val, train = order[:val_size], order[val_size:]
    return TensorDataset(images[train], labels[train]), TensorDataset(images[val], labels[val])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--history-size", type=int, default=500)
    parser.add_argument("--sift-delay", type=int, default=10)
    args = parser.parse_args()

    train_set, val_set = digits(val_size=300)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    sift_config = RelativeProbabilisticSiftConfig(
        beta_value=args.beta,
        loss_history_length=args.history_size,
        loss_based_sift_config=LossConfig(sift_config=SiftingBaseConfig(sift_delay=args.sift_delay)),
    )
    train_dataloader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    train_dataloader = SiftingDataloader(
        sift_config=sift_config,
        orig_dataloader=train_dataloader,
        batch_transforms=ListBatchTransform(),
        loss_impl=SiftingImplementedLoss(),
        model=model,
        log_batch_data=False,
    )

    for epoch in range(args.epochs):
        model.train()
        for inputs, labels in train_dataloader:
            loss = torch.nn.functional.cross_entropy(model(inputs), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            inputs, labels = val_set.tensors
            val_acc = (model(inputs).argmax(dim=1) == labels).float().mean().item()
        print(f"epoch {epoch}: val_acc {val_acc:.4f}")

    import mlflow  # SageMaker's managed MLflow, or sift_bench.sagemaker's run

    if mlflow.active_run() is not None:
        mlflow.log_metric("val_acc", val_acc)


if __name__ == "__main__":
    main()
