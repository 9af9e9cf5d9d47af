"""Batch transforms: the round trip keeps structure and types, and selects every field alike."""

from collections import OrderedDict, namedtuple

import pytest
import tokenizers
import torch
import transformers

from sift_bench.sifting import (
    MappingBatchTransform,
    SequenceBatchTransform,
    SiftingBatch,
    TensorBatchTransform,
    default_batch_transform,
)

KEEP = torch.tensor([0, 2, 3])
Pair = namedtuple("Pair", ["images", "labels"])


def sift_round_trip(batch, indices=KEEP):
    """transform -> select -> reverse_transform, as the data loader does."""
    transform = default_batch_transform(batch)
    return transform.reverse_transform(transform.transform(batch).select(indices))


def test_tensor_batch():
    batch = torch.arange(20).reshape(5, 4)
    assert isinstance(default_batch_transform(batch), TensorBatchTransform)
    out = sift_round_trip(batch)
    assert type(out) is torch.Tensor
    assert torch.equal(out, batch[KEEP])


def test_tuple_batch_with_a_string_field():
    images, labels, names = torch.rand(5, 3, 2, 2), torch.arange(5), ["a", "b", "c", "d", "e"]
    batch = (images, labels, names)
    assert isinstance(default_batch_transform(batch), SequenceBatchTransform)
    out = sift_round_trip(batch)
    assert type(out) is tuple and len(out) == 3
    assert torch.equal(out[0], images[KEEP]) and torch.equal(out[1], labels[KEEP])
    assert out[2] == ["a", "c", "d"] and type(out[2]) is list


def test_list_batch_with_a_tuple_field():
    batch = [torch.arange(5), ("a", "b", "c", "d", "e")]
    out = sift_round_trip(batch)
    assert type(out) is list
    assert out[0].tolist() == [0, 2, 3]
    assert out[1] == ("a", "c", "d")


def test_named_tuple_batch():
    out = sift_round_trip(Pair(torch.rand(5, 2), torch.arange(5)))
    assert type(out) is Pair and out.labels.tolist() == [0, 2, 3]


@pytest.mark.parametrize("mapping_type", [dict, OrderedDict])
def test_dict_batch_with_a_string_field(mapping_type):
    batch = mapping_type(
        input_ids=torch.arange(10).reshape(5, 2), labels=torch.arange(5), text=list("vwxyz")
    )
    assert isinstance(default_batch_transform(batch), MappingBatchTransform)
    out = sift_round_trip(batch)
    assert type(out) is mapping_type and list(out) == ["input_ids", "labels", "text"]
    assert out["input_ids"].tolist() == [[0, 1], [4, 5], [6, 7]]
    assert out["text"] == ["v", "x", "y"]


def tiny_tokenizer():
    vocab = {"[PAD]": 0, "[UNK]": 1, "a": 2, "b": 3, "c": 4}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]"
    )


def test_batch_encoding_stays_a_batch_encoding():
    texts = ["a b", "c", "a a b c", "b", "c c"]
    batch = tiny_tokenizer()(texts, padding=True, return_tensors="pt")
    batch["text"] = list(texts)
    assert isinstance(batch, transformers.BatchEncoding)
    out = sift_round_trip(batch)
    assert type(out) is transformers.BatchEncoding
    assert torch.equal(out["input_ids"], batch["input_ids"][KEEP])
    assert torch.equal(out["attention_mask"], batch["attention_mask"][KEEP])
    assert out["text"] == ["a b", "a a b c", "b"]
    # The per-sample encodings travel with their samples.
    assert out.word_ids(1) == batch.word_ids(2)
    assert [e.ids for e in out.encodings] == [batch.encodings[i].ids for i in KEEP.tolist()]
    assert out.to("cpu") is out  # still has BatchEncoding's methods


def test_batch_encoding_without_encodings():
    batch = transformers.BatchEncoding({"input_ids": torch.arange(10).reshape(5, 2)})
    out = sift_round_trip(batch)
    assert type(out) is transformers.BatchEncoding and out.encodings is None
    assert out["input_ids"][:, 0].tolist() == [0, 4, 6]


def test_channels_last_survives_selection():
    images = torch.rand(5, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    out = sift_round_trip((images, torch.arange(5)))
    assert out[0].is_contiguous(memory_format=torch.channels_last)


def test_concat_and_split_keep_order_and_types():
    transform = default_batch_transform((torch.arange(3), ["a", "b", "c"]))
    first = transform.transform((torch.arange(3), ["a", "b", "c"]))
    second = transform.transform((torch.arange(3, 7), ["d", "e", "f", "g"]))
    merged = SiftingBatch.concat([first, second.select(torch.tensor([1, 3]))])
    assert len(merged) == 5
    head, tail = merged.split(4)
    assert transform.reverse_transform(head)[0].tolist() == [0, 1, 2, 4]
    assert transform.reverse_transform(head)[1] == ["a", "b", "c", "e"]
    assert transform.reverse_transform(tail)[1] == ["g"] and len(tail) == 1


class Custom:
    def __init__(self, x):
        self.x = x


@pytest.mark.parametrize("batch", [Custom(torch.rand(4)), 3.0, (), {}])
def test_unsupported_batch_type_names_it(batch):
    with pytest.raises(TypeError, match=rf"batch of type \S*{type(batch).__qualname__}.*batch_transforms="):
        default_batch_transform(batch)


def test_fields_of_different_lengths_are_rejected():
    with pytest.raises(ValueError, match=r"same number of samples, got .*'labels'.*: 4"):
        MappingBatchTransform().transform({"images": torch.rand(5, 2), "labels": torch.arange(4)})


def test_unsupported_field_type_is_named():
    with pytest.raises(TypeError, match=r"field 'meta' of a dict batch is a int.*batch_transforms="):
        MappingBatchTransform().transform({"images": torch.rand(5, 2), "meta": 7})
    with pytest.raises(ValueError, match=r"0-dim tensor"):
        SequenceBatchTransform().transform((torch.rand(5, 2), torch.tensor(1.0)))
