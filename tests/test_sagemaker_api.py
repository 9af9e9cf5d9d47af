"""SageMaker smart sifting's documented API on sift_bench.sifting (#22): ListBatch and TensorBatch through a user's
transform, a dict sift_config, log_batch_data, batch_format_index, the loader a Hugging Face Trainer builds,
enable_sifting's set_epochs, the pass-through baseline, the watcher hook and the `smart_sifting` aliases."""

import importlib
import importlib.util
import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from sift_bench.integrations.transformers import enable_sifting
from sift_bench.sagemaker import aliases
from sift_bench.sifting import (
    ListBatch, Loss, LossConfig, PassThroughSiftConfig, RandomSiftConfig, RelativeProbabilisticSiftConfig,
    SiftingBaseConfig, SiftingBatchTransform, SiftingDataloader, TensorBatch, hooks,
)

N, BATCH = 96, 16


def relative(beta_value=1.0, sift_delay=0):
    return RelativeProbabilisticSiftConfig(beta_value=beta_value, loss_history_length=64,
                                           loss_based_sift_config=LossConfig(SiftingBaseConfig(sift_delay=sift_delay)))


def id_loader(drop_last=False):
    """Sample i is (features [4], id i), shuffled (in id order the id loss only grows, and every batch would be
    kept): every yielded id can be traced back."""
    features = torch.randn(N, 4, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(features, torch.arange(N)), batch_size=BATCH, shuffle=True, drop_last=drop_last,
                      generator=torch.Generator().manual_seed(0))


class IdLoss(Loss):
    """Loss of sample i is i (high ids are kept more often); records what it was given."""

    def __init__(self):
        self.transformed = []

    def loss(self, model, transformed_batch, original_batch=None):
        self.transformed.append(transformed_batch)
        ids = transformed_batch.labels if hasattr(transformed_batch, "labels") else original_batch[1]
        return torch.as_tensor(ids, dtype=torch.float32)


class ListBatchTransform(SiftingBatchTransform):  # as AWS documents it
    def transform(self, batch):
        return ListBatch(batch[0].tolist(), batch[-1].tolist())

    def reverse_transform(self, list_batch):
        return [torch.tensor(list_batch.inputs), torch.tensor(list_batch.labels)]


class TensorBatchTransform(SiftingBatchTransform):  # as AWS documents it
    def transform(self, batch):
        return TensorBatch(batch[0], batch[-1])

    def reverse_transform(self, tensor_batch):
        return [tensor_batch.inputs, tensor_batch.labels]


@pytest.mark.parametrize("transform, batch_type", [(ListBatchTransform(), ListBatch),
                                                   (TensorBatchTransform(), TensorBatch)])
def test_list_and_tensor_batches_round_trip_through_a_users_transform(transform, batch_type):
    loader = id_loader()
    loss = IdLoss()
    sifter = SiftingDataloader(sift_config=relative(), orig_dataloader=loader, batch_transforms=transform,
                               loss_impl=loss, model=torch.nn.Linear(4, 1), log_batch_data=False)
    features = loader.dataset.tensors[0]
    yielded = []
    for inputs, ids in sifter:
        assert isinstance(inputs, torch.Tensor) and inputs.shape[1:] == (4,)
        assert torch.allclose(inputs, features[ids])  # each sample's inputs travelled with its label
        yielded.append(ids)
    ids = torch.cat(yielded)
    assert len(set(ids.tolist())) == len(ids) == sifter.stats.samples_kept < N
    assert all(len(batch) == BATCH for batch in yielded[:-1])
    assert all(type(batch) is batch_type for batch in loss.transformed)  # the loss gets the user's batch type


def test_list_and_tensor_batches_keep_their_type_when_selected_split_and_joined():
    batch = ListBatch([[1.0], [2.0], [3.0]], [0, 1, 2])
    picked = batch.select(torch.tensor([2, 0]))
    assert type(picked) is ListBatch and picked.inputs == [[3.0], [1.0]] and picked.labels == [2, 0]
    head, tail = TensorBatch(torch.arange(5), torch.arange(5) * 10).split(2)
    joined = TensorBatch.concat([tail, head])
    assert type(joined) is TensorBatch and joined.labels.tolist() == [20, 30, 40, 0, 10]
    assert ListBatch([[1], [2]]).labels is None
    with pytest.raises(TypeError, match=r"ListBatch inputs must be a list or tuple .*got Tensor"):
        ListBatch(torch.zeros(3))
    with pytest.raises(TypeError, match=r"TensorBatch labels must be a torch.Tensor .*got list"):
        TensorBatch(torch.zeros(3), [0, 1, 2])


def test_sift_config_may_be_a_dict_of_relative_probabilistic_fields():
    sifter = SiftingDataloader({"beta_value": 3, "loss_history_length": 10,
                                "loss_based_sift_config": {"sift_config": {"sift_delay": 2}}},
                               id_loader(), IdLoss(), torch.nn.Linear(4, 1))
    assert sifter.sift_config == RelativeProbabilisticSiftConfig(3, 10, LossConfig(SiftingBaseConfig(sift_delay=2)))
    with pytest.raises(TypeError, match=r"sift_config got unknown keys \['beta'\]"):
        SiftingDataloader({"beta": 3}, id_loader(), IdLoss(), torch.nn.Linear(4, 1))


def test_log_batch_data_records_each_sifted_batch():
    sifter = SiftingDataloader(relative(sift_delay=2), id_loader(), IdLoss(), torch.nn.Linear(4, 1),
                               log_batch_data=True)
    list(sifter)
    assert len(sifter.batch_log) == N // BATCH - 2  # the delay's batches are not sifted, so not logged
    for record in sifter.batch_log:
        assert record["samples"] == BATCH == len(record["losses"]) == len(record["kept_mask"])
        assert record["kept"] == sum(record["kept_mask"])
    assert sum(record["kept"] for record in sifter.batch_log) + 2 * BATCH == sifter.stats.samples_kept
    assert SiftingDataloader(relative(), id_loader(), IdLoss(), torch.nn.Linear(4, 1)).batch_log == []
    with pytest.raises(TypeError, match=r"log_batch_data must be a bool, got 'yes'"):
        SiftingDataloader(relative(), id_loader(), IdLoss(), torch.nn.Linear(4, 1), log_batch_data="yes")


class FirstFeatureLoss(Loss):
    def loss(self, model, transformed_batch, original_batch=None):
        return torch.stack([sample[0][0] for sample in transformed_batch.columns[0]])


def test_batch_format_index_0_reads_a_list_of_samples():
    dataset = [(torch.tensor([float(i)]), i) for i in range(N)]
    loader = DataLoader(dataset, batch_size=BATCH, collate_fn=list, shuffle=True,  # a list of (features, id) samples
                        generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"does not match dimension 1 .*matches dimension 0: pass batch_format_index=0"):
        next(iter(SiftingDataloader(relative(), loader, FirstFeatureLoss(), torch.nn.Linear(1, 1))))
    sifter = SiftingDataloader(relative(), loader, FirstFeatureLoss(), torch.nn.Linear(1, 1), batch_format_index=0)
    batches = list(sifter)
    assert all(isinstance(batch, list) and isinstance(batch[0], tuple) for batch in batches)
    ids = [sample[1] for batch in batches for sample in batch]
    assert len(ids) == len(set(ids)) == sifter.stats.samples_kept < N


def test_batch_format_index_1_takes_a_tensors_samples_along_dimension_1():
    series = torch.arange(N).float().reshape(1, N, 1).repeat(3, 1, 2)  # [time 3, sample, features 2]
    loader = DataLoader(TensorDataset(series.transpose(0, 1)), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(0),
                        collate_fn=lambda items: torch.stack([item[0] for item in items], dim=1))

    class LastStepLoss(Loss):
        def loss(self, model, transformed_batch, original_batch=None):
            return original_batch[-1, :, 0]

    with pytest.raises(ValueError, match=r"pass batch_format_index=1"):
        next(iter(SiftingDataloader(relative(), loader, LastStepLoss(), torch.nn.Linear(1, 1))))
    sifter = SiftingDataloader(relative(), loader, LastStepLoss(), torch.nn.Linear(1, 1), batch_format_index=1)
    batches = list(sifter)
    assert all(batch.shape[0] == 3 and batch.shape[2] == 2 for batch in batches)
    ids = torch.cat([batch[0, :, 0] for batch in batches])
    assert all(torch.equal(batch[0], batch[2]) for batch in batches)  # every sample kept whole, across time
    assert len(set(ids.tolist())) == len(ids) == sifter.stats.samples_kept < N
    with pytest.raises(ValueError, match=r"batch_format_index must be None, 0 or 1 .*got 2"):
        SiftingDataloader(relative(), loader, LastStepLoss(), torch.nn.Linear(1, 1), batch_format_index=2)


def test_the_loader_a_hugging_face_trainer_builds_is_accepted():
    from accelerate.data_loader import prepare_data_loader

    # What Trainer.get_train_dataloader returns: accelerate's DataLoaderShard (built here without an Accelerator,
    # whose state is process-wide).
    shard = prepare_data_loader(id_loader(drop_last=True), num_processes=1, process_index=0)
    assert shard.batch_size is None  # accelerate batches through a batch sampler
    sifter = SiftingDataloader(relative(), shard, IdLoss(), torch.nn.Linear(4, 1))
    assert (sifter.batch_size, sifter.drop_last) == (BATCH, True)
    assert all(len(ids) == BATCH for _, ids in sifter)


def test_enable_sifting_takes_set_epochs():
    with pytest.raises(TypeError, match=r"set_epochs must be a bool, got 'yes'"):
        enable_sifting(object(), relative(), set_epochs="yes")


def test_pass_through_yields_the_very_same_batches_and_counts_them():
    loader = [(torch.zeros(BATCH, 4), torch.arange(BATCH)) for _ in range(3)]

    class Sized(list):
        batch_size = BATCH

    sifter = SiftingDataloader(PassThroughSiftConfig(), Sized(loader), IdLoss(), torch.nn.Linear(4, 1))
    assert all(out is batch for out, batch in zip(sifter, loader))
    assert (sifter.stats.samples_seen, sifter.stats.samples_kept, sifter.stats.batches_yielded) == (3 * BATCH,) * 2 + (3,)


def test_a_watcher_replaces_the_policy_and_sees_every_sifter():
    class Control(hooks.SifterWatcher):
        def __init__(self):
            self.asked, self.built = [], []

        def policy(self, sift_config):
            self.asked.append(sift_config)
            return RandomSiftConfig(keep_fraction=0.5, loss_based_sift_config=sift_config.loss_based_sift_config)

        def created(self, sifter):
            self.built.append(sifter)

    watcher = Control()
    with hooks.watching(watcher):
        sifter = SiftingDataloader(relative(beta_value=3), id_loader(), IdLoss(), torch.nn.Linear(4, 1))
    assert watcher.asked == [relative(beta_value=3)] and watcher.built == [sifter]
    assert isinstance(sifter.sift_config, RandomSiftConfig) and hooks.current() is None
    assert isinstance(SiftingDataloader(relative(), id_loader(), IdLoss(), torch.nn.Linear(4, 1)).sift_config,
                      RelativeProbabilisticSiftConfig)  # no watcher, no change


def test_smart_sifting_resolves_inside_the_aliases_only():
    with aliases.aliased():
        for module_name, (target, names) in aliases.MODULES.items():
            module = importlib.import_module(module_name)
            source = importlib.import_module(target)
            assert all(getattr(module, name) is getattr(source, name) for name in names)
        from smart_sifting.data_model.list_batch import ListBatch as aws_list_batch

        assert aws_list_batch is ListBatch
        with pytest.raises(ModuleNotFoundError, match=r"smart_sifting.utils.*documented modules only"):
            importlib.import_module("smart_sifting.utils")
    assert importlib.util.find_spec("smart_sifting") is None
    assert not any(name.startswith("smart_sifting") for name in sys.modules)
    # A fresh interpreter, as a user's own `python script.py` would be: nothing shadows AWS's package.
    fresh = subprocess.run([sys.executable, "-c", "import smart_sifting"], capture_output=True, text=True)
    assert fresh.returncode == 1 and "No module named 'smart_sifting'" in fresh.stderr
