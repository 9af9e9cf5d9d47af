"""A task of your own, outside sift_bench: a small CNN on scikit-learn's bundled 8x8 digits (offline, 1,797 images).

sift_bench calls `build(cfg, device)` because conf/task/digits.yaml names it in `_target_`; nothing in sift_bench
lists this task. It returns the model, the loaders and the per-sample loss; the training loop, the sifters, MLflow
and the report are sift_bench's.
"""

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

from sift_bench import distributed
from sift_bench.data.sharding import ShardedRandomSampler
from sift_bench.errors import ConfigError
from sift_bench.tasks import TaskParts

SPLIT_SEED = 1234  # one split for every run and seed, so every configuration is chosen and tested on the same images


class DigitsCNN(torch.nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, channels, 3, padding=1), torch.nn.BatchNorm2d(channels), torch.nn.ReLU(),
            torch.nn.Conv2d(channels, 2 * channels, 3, padding=1), torch.nn.BatchNorm2d(2 * channels), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
        )
        self.classifier = torch.nn.Linear(2 * channels * 16, 10)

    def forward(self, images):
        return self.classifier(self.features(images).flatten(1))


def build(cfg, device: torch.device) -> TaskParts:
    data = cfg.task.data
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.int64)
    if data.val_size + data.test_size >= len(labels):
        raise ConfigError(f"task.data.val_size + task.data.test_size = {data.val_size + data.test_size} is not "
                          f"allowed: fewer than the {len(labels)} images, the rest of which are trained on")
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(SPLIT_SEED))
    test, val, train = order[: data.test_size], order[data.test_size: data.test_size + data.val_size], \
        order[data.test_size + data.val_size:]
    if data.train_subset:
        train = train[: data.train_subset]
    # (image, label, sample id): the id serves the sifters that remember each sample's training loss.
    train_set = torch.utils.data.TensorDataset(images[train], labels[train], torch.arange(len(train)))
    world = distributed.current()
    batch_size = cfg.trainer.batch_size // world.world_size  # the global batch, shared by the DDP ranks
    if world.distributed:
        sampler = ShardedRandomSampler(len(train_set), world.rank, world.world_size, cfg.seed)
        train_loader = torch.utils.data.DataLoader(train_set, batch_size=batch_size, sampler=sampler)
    else:
        train_loader = torch.utils.data.DataLoader(train_set, batch_size=batch_size, shuffle=True,
                                                   generator=torch.Generator().manual_seed(cfg.seed))
    eval_loaders = {
        split: torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images[index], labels[index]),
                                           batch_size=cfg.trainer.eval_batch_size)
        for split, index in (("val", val), ("test", test))
    }
    model = DigitsCNN(cfg.task.model.channels).to(device)

    def per_sample_loss(model, batch):
        return F.cross_entropy(model(batch[0].to(device)).float(), batch[1].to(device), reduction="none")

    def count_correct(model, batch):
        return int((model(batch[0].to(device)).argmax(dim=1) == batch[1].to(device)).sum())

    return TaskParts(
        model=model, train_loader=train_loader, eval_loaders=eval_loaders, per_sample_loss=per_sample_loss,
        count_correct=count_correct, batch_size_of=lambda batch: len(batch[1]), work_of=lambda batch: len(batch[1]),
        num_train_samples=len(train), model_name=f"digits-cnn-{cfg.task.model.channels}", dataset_name="sklearn-digits",
    )
