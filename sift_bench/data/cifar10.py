"""CIFAR-10 as resident uint8 tensors, with augmentation done on whole batches.

Three sources, chosen by `task.data.source`:
- `zip`: the JPEG zip in the offline data dir, decoded once and cached as a uint8 array;
- `torchvision`: torchvision's CIFAR10 with download=True, for machines with a network;
- `synthetic`: a generated, learnable stand-in for unit tests.
"""

import hashlib
import io
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from sift_bench.data import DataNotFoundError
from sift_bench.data.sharding import shard_order

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
# Channel statistics of the CIFAR-10 training split (canonical values).
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
ZIP_NAME = "cifar10-jpeg.zip"


@dataclass
class CifarArrays:
    """uint8 images [N, 3, 32, 32] and int64 labels [N] for both splits."""

    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor


def _decode_zip(zip_path: Path) -> dict[str, np.ndarray]:
    out: dict[str, list] = {"train_images": [], "train_labels": [], "test_images": [], "test_labels": []}
    class_index = {name: i for i, name in enumerate(CLASSES)}
    with zipfile.ZipFile(zip_path) as archive:
        for name in sorted(archive.namelist()):
            parts = name.split("/")
            if len(parts) != 3 or not parts[2].endswith(".jpg"):
                continue
            split, class_name, _ = parts
            image = Image.open(io.BytesIO(archive.read(name))).convert("RGB")
            out[f"{split}_images"].append(np.asarray(image, dtype=np.uint8))
            out[f"{split}_labels"].append(class_index[class_name])
    return {
        key: np.stack(values).transpose(0, 3, 1, 2).copy() if key.endswith("images") else np.asarray(values, np.int64)
        for key, values in out.items()
    }


def _zip_fingerprint(zip_path: Path) -> str:
    stat = zip_path.stat()
    return hashlib.sha1(f"{zip_path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]


def load_zip(data_dir: str | Path, cache_dir: str | Path) -> CifarArrays:
    zip_path = Path(data_dir) / ZIP_NAME
    if not zip_path.is_file():
        raise DataNotFoundError(
            f"CIFAR-10 not found: looked for {zip_path} (paths.data_dir={data_dir}). "
            f"Set SIFT_BENCH_DATA_DIR (or paths.data_dir=...) to the folder that holds {ZIP_NAME}, "
            "or use task.data.source=torchvision on a machine with a network."
        )
    cache_path = Path(cache_dir) / f"cifar10-{_zip_fingerprint(zip_path)}.npz"
    if cache_path.is_file():
        arrays = dict(np.load(cache_path))
    else:
        arrays = _decode_zip(zip_path)
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        tmp_path = cache_path.with_suffix(f".{os.getpid()}.tmp.npz")  # one per process: DDP ranks decode at once
        np.savez(tmp_path, **arrays)
        tmp_path.replace(cache_path)  # atomic, so an interrupted decode never leaves a half cache
    return CifarArrays(**{key: torch.from_numpy(value) for key, value in arrays.items()})


def load_torchvision(root: str | Path) -> CifarArrays:
    from torchvision.datasets import CIFAR10  # the online path only (task.data.source=torchvision): a second of import

    splits = {}
    for split, train in (("train", True), ("test", False)):
        try:
            dataset = CIFAR10(root=str(root), train=train, download=True)
        except (OSError, RuntimeError) as error:  # URLError is an OSError
            raise DataNotFoundError(
                f"torchvision could not download CIFAR-10 into {root} ({error}). Offline, use task.data.source=zip "
                f"with SIFT_BENCH_DATA_DIR pointing at the folder that holds {ZIP_NAME}."
            ) from error
        splits[f"{split}_images"] = torch.from_numpy(dataset.data).permute(0, 3, 1, 2).contiguous()
        splits[f"{split}_labels"] = torch.tensor(dataset.targets, dtype=torch.int64)
    return CifarArrays(**splits)


def make_synthetic(n_train: int, n_test: int, seed: int = 0) -> CifarArrays:
    """Noise images whose class sets a per-channel colour offset and a stripe: learnable in a few steps."""
    generator = torch.Generator().manual_seed(seed)
    palette = torch.randint(40, 216, (len(CLASSES), 3, 1, 1), generator=generator)

    def split(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.randint(0, len(CLASSES), (n,), generator=generator)
        noise = torch.randint(-40, 41, (n, 3, 32, 32), generator=generator)
        images = palette[labels] + noise
        rows = torch.arange(32)
        stripe = (rows[None, :] % len(CLASSES)) == labels[:, None]  # [n, 32]: one row in ten is bright
        images = images + 60 * stripe[:, None, :, None]
        return images.clamp(0, 255).to(torch.uint8), labels

    train_images, train_labels = split(n_train)
    test_images, test_labels = split(n_test)
    return CifarArrays(train_images, train_labels, test_images, test_labels)


def load_cifar10(source: str, data_dir: str, cache_dir: str, synthetic_size: tuple[int, int] = (512, 256), seed: int = 0) -> CifarArrays:
    if source == "zip":
        return load_zip(data_dir, cache_dir)
    if source == "torchvision":
        return load_torchvision(Path(cache_dir) / "torchvision")
    if source == "synthetic":
        return make_synthetic(*synthetic_size, seed=seed)
    raise ValueError(f"task.data.source must be one of 'zip', 'torchvision', 'synthetic', got {source!r}")


def random_crop_flip(images: torch.Tensor, padding: int, generator: torch.Generator) -> torch.Tensor:
    """Random translation by up to `padding` pixels (reflect-padded) and a horizontal flip, for a whole batch.

    One gather for the whole batch: per-image crops through PIL would cost more than the training step.
    """
    n, _, height, width = images.shape
    padded = torch.nn.functional.pad(images, (padding,) * 4, mode="reflect")
    device = images.device
    dy = torch.randint(0, 2 * padding + 1, (n,), generator=generator).to(device)
    dx = torch.randint(0, 2 * padding + 1, (n,), generator=generator).to(device)
    flip = (torch.rand(n, generator=generator) < 0.5).to(device)
    rows = dy[:, None] + torch.arange(height, device=device)[None, :]
    cols = torch.arange(width, device=device)[None, :]
    cols = torch.where(flip[:, None], width - 1 - cols, cols) + dx[:, None]
    batch_index = torch.arange(n, device=device)[:, None, None]
    # padded[b, c, rows[b, i], cols[b, j]] with channels kept as the second dim.
    return padded.permute(0, 2, 3, 1)[batch_index, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


class CifarLoader:
    """A re-iterable loader over resident tensors that yields (images, labels, sample_ids) batches.

    Images are normalised floats (channels_last when asked); it exposes `batch_size` and
    `drop_last` like a torch DataLoader, which is all `SiftingDataloader` needs. Under DDP (`world_size` > 1)
    every rank draws the same permutation each epoch and takes its shard (sift_bench.data.sharding); the
    sample ids stay indices of the whole set.
    """

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        batch_size: int,
        train: bool,
        device: torch.device | str = "cpu",
        channels_last: bool = False,
        crop_padding: int = 4,
        seed: int = 0,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ):
        self.device = torch.device(device)
        self.images = images.to(self.device)
        self.labels = labels.to(self.device)
        self.batch_size = batch_size
        self.train = train
        self.drop_last = drop_last
        self.channels_last = channels_last
        self.crop_padding = crop_padding
        self.rank = rank
        self.world_size = world_size
        # The permutation's generator must draw alike on every rank. In one process it draws the crops too, as it
        # always has; under DDP the crops come from a generator of each rank's own.
        self.generator = torch.Generator().manual_seed(seed)
        self.augment_generator = (self.generator if world_size == 1
                                  else torch.Generator().manual_seed(seed + 1_000_003 * (rank + 1)))
        self.mean = torch.tensor(MEAN, device=self.device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(STD, device=self.device).view(1, 3, 1, 1) * 255

    def __len__(self) -> int:
        n = -(-len(self.labels) // self.world_size)  # this rank's share
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.labels)
        if self.train:
            order = shard_order(torch.randperm(n, generator=self.generator), self.rank, self.world_size).to(self.device)
        else:
            order = torch.arange(n, device=self.device)
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            index = order[start : start + self.batch_size]
            images = self.images[index]
            if self.train and self.crop_padding > 0:
                images = random_crop_flip(images, self.crop_padding, self.augment_generator)
            images = (images.float() - self.mean) / self.std
            if self.channels_last:
                images = images.contiguous(memory_format=torch.channels_last)
            yield images, self.labels[index], index
