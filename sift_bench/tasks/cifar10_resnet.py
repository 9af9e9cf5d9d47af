"""CIFAR-10 image classification with a CIFAR ResNet, on resident uint8 tensors."""

import torch
import torch.nn.functional as F

from sift_bench import distributed
from sift_bench.data import class_balanced_holdout, fixed_subset, require_source
from sift_bench.data.cifar10 import CifarLoader, load_cifar10
from sift_bench.models.resnet import build_resnet
from sift_bench.tasks import TaskParts


def splits(cfg) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{"train", "val", "test"} -> (uint8 images, labels). Validation chooses settings, test reports them: a
    class-balanced share of the training images is held out."""
    data = cfg.task.data
    arrays = load_cifar10(
        data.source,
        cfg.paths.data_dir,
        cfg.paths.cache_dir,
        synthetic_size=(data.synthetic_train_size, data.synthetic_test_size),
    )
    val_index, train_index = class_balanced_holdout(arrays.train_labels, data.val_size)
    if data.train_subset:
        train_index = train_index[fixed_subset(len(train_index), data.train_subset)]
    return {
        "train": (arrays.train_images[train_index], arrays.train_labels[train_index]),
        "val": (arrays.train_images[val_index], arrays.train_labels[val_index]),
        "test": (arrays.test_images, arrays.test_labels),
    }


def resnet(cfg, device: torch.device, size: float = 1) -> torch.nn.Module:
    """The task's ResNet on `device`; `size` < 1: the same ResNet at that fraction of its width (the proxy of
    sifter=proxy: size 0.25 has a sixteenth of its multiply-adds)."""
    model = build_resnet(cfg.task.model.arch, num_classes=10, width_multiplier=cfg.task.model.width_multiplier * size)
    memory_format = torch.channels_last if cfg.scale.channels_last else torch.contiguous_format
    return model.to(device, memory_format=memory_format)


def build(cfg, device: torch.device) -> TaskParts:
    task, data = cfg.task, cfg.task.data
    require_source(cfg, ("zip", "torchvision", "synthetic"), offline=("zip",))
    split = splits(cfg)
    (train_images, train_labels), channels_last = split["train"], bool(cfg.scale.channels_last)
    model = resnet(cfg, device)
    world = distributed.current()
    # trainer.batch_size is the global batch: under DDP each rank takes its share of it and of every epoch.
    train_loader = CifarLoader(
        train_images, train_labels, cfg.trainer.batch_size // world.world_size, train=True, device=device,
        channels_last=channels_last, crop_padding=data.crop_padding, seed=cfg.seed,
        rank=world.rank, world_size=world.world_size,
    )
    eval_loaders = {
        name: CifarLoader(images, labels, cfg.trainer.eval_batch_size, train=False, device=device,
                          channels_last=channels_last)
        for name, (images, labels) in split.items() if name != "train"
    }
    label_smoothing = float(task.label_smoothing)

    # Batches are (images, labels, sample_ids); the ids serve the sifters that remember losses per sample.
    def per_sample_loss(model, batch):
        images, labels = batch[0], batch[1]
        logits = model(images.to(device, non_blocking=True))
        return F.cross_entropy(logits.float(), labels.to(device), reduction="none", label_smoothing=label_smoothing)

    def count_correct(model, batch):
        images, labels = batch[0], batch[1]
        images = images.to(device, non_blocking=True)
        logits = model(images).float()
        if task.eval_flip_tta:
            # Horizontal-flip test-time augmentation: the same flips the model was trained on.
            logits = logits + model(images.flip(-1)).float()
        return int((logits.argmax(dim=1) == labels.to(device)).sum())

    return TaskParts(
        model=model,
        train_loader=train_loader,
        eval_loaders=eval_loaders,
        per_sample_loss=per_sample_loss,
        count_correct=count_correct,
        batch_size_of=lambda batch: len(batch[1]),
        work_of=lambda batch: len(batch[1]),
        num_train_samples=len(train_labels),
        model_name=task.model.arch,
        dataset_name=task.dataset,
        proxy_model=lambda size: resnet(cfg, device, size),
    )
