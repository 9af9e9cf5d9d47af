"""The offline loaders against ../shared/data, the generated stand-ins, and the batch pipeline."""

import pytest
import torch
from transformers import AutoTokenizer

from conftest import compose_config
from sift_bench.data import DataNotFoundError, class_balanced_holdout
from sift_bench.data.cifar10 import CifarLoader, load_cifar10, make_synthetic, random_crop_flip
from sift_bench.data.sst2 import PadCollator, TokenizedDataset, load_sst2, make_synthetic as make_sentences, trim_padding
from sift_bench.tasks import build_task
from sift_bench.tasks.sst2_bert import offline_minilm_dir
from sift_bench.validation import ConfigError


@pytest.fixture(scope="module")
def cifar(data_dir, tmp_path_factory):
    return load_cifar10("zip", str(data_dir), str(tmp_path_factory.mktemp("cache")))


@pytest.mark.slow
def test_cifar10_zip_loads_all_images_with_balanced_labels(cifar):
    assert cifar.train_images.shape == (50000, 3, 32, 32) and cifar.train_images.dtype == torch.uint8
    assert cifar.test_images.shape == (10000, 3, 32, 32)
    assert cifar.train_labels.bincount().tolist() == [5000] * 10
    assert cifar.test_labels.bincount().tolist() == [1000] * 10
    # The data README gives the train pixel means of the JPEG re-encoding: 0.4913 / 0.4821 / 0.4465.
    means = (cifar.train_images.float() / 255).mean(dim=(0, 2, 3))
    assert torch.allclose(means, torch.tensor([0.4913, 0.4821, 0.4465]), atol=2e-3)


@pytest.mark.slow
def test_cifar10_cache_gives_the_same_arrays(cifar, data_dir, tmp_path):
    first = load_cifar10("zip", str(data_dir), str(tmp_path))
    assert len(list(tmp_path.glob("cifar10-*.npz"))) == 1
    second = load_cifar10("zip", str(data_dir), str(tmp_path))  # from the cache this time
    assert torch.equal(first.train_images, second.train_images) and torch.equal(first.test_labels, second.test_labels)
    assert torch.equal(first.train_images[:100], cifar.train_images[:100])


def test_missing_cifar_zip_says_where_it_looked_and_how_to_fix(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"cifar10-jpeg.zip.*SIFT_BENCH_DATA_DIR.*torchvision"):
        load_cifar10("zip", str(tmp_path / "nowhere"), str(tmp_path))


def test_sst2_tsv_has_glue_counts(data_dir):
    train, dev = load_sst2("tsv", str(data_dir), "unused")
    assert len(train.texts) == 67349 and sum(train.labels) == 37569
    assert len(dev.texts) == 872 and sum(dev.labels) == 444
    assert all(isinstance(text, str) and text for text in dev.texts)


def test_missing_sst2_says_where_it_looked_and_how_to_fix(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"sst2.*train.tsv.*SIFT_BENCH_DATA_DIR.*hub"):
        load_sst2("tsv", str(tmp_path), str(tmp_path))


def test_unknown_source_is_named():
    with pytest.raises(ValueError, match="task.data.source.*'zip'.*got 'ftp'"):
        load_cifar10("ftp", "", "")


def test_synthetic_cifar_is_learnable_by_colour():
    arrays = make_synthetic(400, 100)
    means = arrays.train_images.float().mean(dim=(2, 3))
    per_class = torch.stack([means[arrays.train_labels == c].mean(0) for c in range(10)])
    predicted = torch.cdist(arrays.test_images.float().mean(dim=(2, 3)), per_class).argmin(1)
    assert (predicted == arrays.test_labels).float().mean() > 0.9


def test_crop_flip_is_a_translation_and_mirror():
    images = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).reshape(2, 3, 8, 8)
    generator = torch.Generator().manual_seed(0)
    out = random_crop_flip(images, padding=0, generator=generator)
    for original, augmented in zip(images, out):  # with no padding only flips are possible
        assert torch.equal(augmented, original) or torch.equal(augmented, original.flip(-1))
    out = random_crop_flip(images, padding=2, generator=torch.Generator().manual_seed(1))
    assert out.shape == images.shape
    # Each output is some shift of the reflect-padded input (or its mirror).
    padded = torch.nn.functional.pad(images, (2,) * 4, mode="reflect")
    for b in range(2):
        candidates = [padded[b, :, dy:dy + 8, dx:dx + 8] for dy in range(5) for dx in range(5)]
        candidates += [c.flip(-1) for c in candidates]
        assert any(torch.equal(out[b], c) for c in candidates)


def test_cifar_loader_batches_cover_the_data_once_per_epoch():
    arrays = make_synthetic(300, 10)
    loader = CifarLoader(arrays.train_images, arrays.train_labels, 64, train=True, channels_last=True, crop_padding=4)
    batches = list(loader)
    assert [len(labels) for _, labels, _ in batches] == [64, 64, 64, 64, 44] and len(loader) == 5
    assert batches[0][0].is_contiguous(memory_format=torch.channels_last) and batches[0][0].dtype == torch.float32
    sample_ids = torch.cat([ids for _, _, ids in batches])
    assert torch.equal(sample_ids.sort().values, torch.arange(300))  # every sample once, with its index
    assert not torch.equal(sample_ids, torch.arange(300))  # shuffled
    labels = torch.cat([labels for _, labels, _ in batches])
    assert torch.equal(labels, arrays.train_labels[sample_ids])
    dropping = CifarLoader(arrays.train_images, arrays.train_labels, 64, train=False, drop_last=True)
    assert [len(labels) for _, labels, _ in dropping] == [64] * 4


def test_tokenised_sst2_pads_to_a_fixed_width_and_trims_per_batch(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(offline_minilm_dir())
    train, _ = make_sentences(40, 10)
    dataset = TokenizedDataset(train, tokenizer, max_length=32, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("tokens-*.pt"))) == 1
    cached = TokenizedDataset(train, tokenizer, max_length=32, cache_dir=tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(dataset.input_ids, cached.input_ids))
    batch = PadCollator(tokenizer.pad_token_id, pad_to=32)([dataset[i] for i in range(8)])
    assert batch["input_ids"].shape == (8, 32) and batch["labels"].shape == (8,)
    longest = max(len(dataset[i][0]) for i in range(8))
    trimmed = trim_padding(batch)
    assert trimmed["input_ids"].shape == (8, longest) and torch.equal(trimmed["labels"], batch["labels"])
    assert torch.equal(trimmed["input_ids"][0, : len(dataset[0][0])], dataset[0][0].long())


def test_cifar10_validation_is_a_seeded_class_balanced_holdout_of_train(cifar):
    held, rest = class_balanced_holdout(cifar.train_labels, 5000)
    assert len(held) == 5000 and len(rest) == 45000
    assert set(held.tolist()).isdisjoint(rest.tolist()) and len(set(held.tolist()) | set(rest.tolist())) == 50000
    assert cifar.train_labels[held].bincount().tolist() == [500] * 10
    again, _ = class_balanced_holdout(cifar.train_labels, 5000)
    assert torch.equal(held, again)  # the same split for every run of a table
    with pytest.raises(ConfigError, match="task.data.val_size=5005"):
        class_balanced_holdout(cifar.train_labels, 5005)


@pytest.mark.parametrize("task,val_size,train_size,test_size", [
    ("cifar10_resnet", 5000, 45000, 10000), ("sst2_bert", 1000, 10000, 872)])
@pytest.mark.slow
def test_cpu_tasks_train_on_one_split_choose_on_validation_and_report_on_test(task, val_size, train_size, test_size,
                                                                              data_dir, tmp_path):
    cfg = compose_config([f"task={task}", "scale=cpu", f"paths.data_dir={data_dir}", f"paths.cache_dir={tmp_path}"])
    parts = build_task(cfg, torch.device("cpu"))
    assert parts.num_train_samples == train_size and set(parts.eval_loaders) == {"val", "test"}

    def ids_of(loader):
        ids = []
        for batch in loader:
            ids += (batch[2] if task == "cifar10_resnet" else batch["sample_id"]).tolist()
        return ids

    def count(loader):
        return sum(parts.batch_size_of(batch) for batch in loader)

    assert count(parts.eval_loaders["val"]) == val_size and count(parts.eval_loaders["test"]) == test_size
    if task == "sst2_bert":
        # Validation sentences are GLUE train sentences outside the training subset.
        train_ids = ids_of(parts.train_loader)
        assert len(train_ids) == train_size == len(set(train_ids))
        train_texts = {tuple(parts.train_loader.dataset.dataset.input_ids[i].tolist()) for i in range(train_size)}
        val_texts = [tuple(ids.tolist()) for ids in parts.eval_loaders["val"].dataset.input_ids]
        assert sum(text in train_texts for text in val_texts) < 0.05 * val_size  # only SST-2's duplicate phrases
