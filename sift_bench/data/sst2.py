"""SST-2 (GLUE) sentences, tokenised once and padded per batch.

Sources, chosen by `task.data.source`:
- `tsv`: GLUE's own train.tsv / dev.tsv in `<data_dir>/sst2`;
- `hub`: the `glue`/`sst2` data set by name through the `datasets` package, for machines with a network;
- `synthetic`: generated sentences from two small sentiment vocabularies, for unit tests.
"""

import csv
import hashlib
import os
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from sift_bench.data import DataNotFoundError


@dataclass
class Sentences:
    texts: list[str]
    labels: list[int]


def read_glue_tsv(path: Path) -> Sentences:
    texts, labels = [], []
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader)
        if header[:2] != ["sentence", "label"]:
            raise ValueError(f"{path}: expected GLUE's header 'sentence<TAB>label', got {header!r}")
        for row in reader:
            texts.append(row[0])
            labels.append(int(row[1]))
    return Sentences(texts, labels)


def load_tsv(data_dir: str | Path) -> tuple[Sentences, Sentences]:
    folder = Path(data_dir) / "sst2"
    missing = [str(folder / name) for name in ("train.tsv", "dev.tsv") if not (folder / name).is_file()]
    if missing:
        raise DataNotFoundError(
            f"SST-2 not found: looked for {', '.join(missing)} (paths.data_dir={data_dir}). "
            "Set SIFT_BENCH_DATA_DIR (or paths.data_dir=...) to the folder that holds sst2/train.tsv and sst2/dev.tsv "
            "(GLUE format), or use task.data.source=hub on a machine with a network."
        )
    return read_glue_tsv(folder / "train.tsv"), read_glue_tsv(folder / "dev.tsv")


def load_hub(cache_dir: str | Path) -> tuple[Sentences, Sentences]:
    try:  # not a dependency: only task.data.source=hub (online) reads it, and says to install it when missing
        import datasets
    except ImportError as error:
        raise DataNotFoundError("task.data.source=hub needs the `datasets` package: pip install datasets") from error
    try:
        glue = datasets.load_dataset("glue", "sst2", cache_dir=str(Path(cache_dir) / "hf_datasets"))
    except (OSError, ConnectionError) as error:
        raise DataNotFoundError(
            f"could not load glue/sst2 from the Hugging Face hub ({error}). Offline, use task.data.source=tsv with "
            "SIFT_BENCH_DATA_DIR pointing at the folder that holds sst2/train.tsv and sst2/dev.tsv."
        ) from error
    # GLUE's test split has no labels, so dev ("validation") is the evaluation split.
    return (
        Sentences(list(glue["train"]["sentence"]), list(glue["train"]["label"])),
        Sentences(list(glue["validation"]["sentence"]), list(glue["validation"]["label"])),
    )


POSITIVE = ["good", "great", "wonderful", "moving", "funny", "brilliant", "warm", "sharp"]
NEGATIVE = ["bad", "dull", "awful", "boring", "flat", "weak", "tedious", "clumsy"]
FILLER = ["the", "film", "is", "a", "movie", "story", "and", "with", "its", "cast", "plot", "very"]


def make_synthetic(n_train: int, n_test: int, seed: int = 0) -> tuple[Sentences, Sentences]:
    rng = random.Random(seed)

    def sentence(label: int) -> str:
        words = rng.choices(FILLER, k=rng.randint(3, 12)) + rng.choices(POSITIVE if label else NEGATIVE, k=rng.randint(1, 3))
        rng.shuffle(words)
        return " ".join(words)

    def split(n: int) -> Sentences:
        labels = [rng.randint(0, 1) for _ in range(n)]
        return Sentences([sentence(label) for label in labels], labels)

    return split(n_train), split(n_test)


def load_sst2(source: str, data_dir: str, cache_dir: str, synthetic_size: tuple[int, int] = (512, 128), seed: int = 0):
    if source == "tsv":
        return load_tsv(data_dir)
    if source == "hub":
        return load_hub(cache_dir)
    if source == "synthetic":
        return make_synthetic(*synthetic_size, seed=seed)
    raise ValueError(f"task.data.source must be one of 'tsv', 'hub', 'synthetic', got {source!r}")


class TokenizedDataset(torch.utils.data.Dataset):
    """Token ids per sentence (no padding) and labels; tokenised once, cached on disk by content hash."""

    def __init__(self, sentences: Sentences, tokenizer, max_length: int, cache_dir: str | Path | None = None):
        self.labels = sentences.labels
        key = hashlib.sha1(
            "\n".join([tokenizer.name_or_path, str(len(tokenizer)), str(max_length), *sentences.texts]).encode()
        ).hexdigest()[:16]
        cache_path = Path(cache_dir) / f"tokens-{key}.pt" if cache_dir else None
        if cache_path and cache_path.is_file():
            self.input_ids = torch.load(cache_path)
        else:
            encoded = tokenizer(sentences.texts, truncation=True, max_length=max_length)
            self.input_ids = [torch.tensor(ids, dtype=torch.int32) for ids in encoded["input_ids"]]
            if cache_path:
                cache_path.parent.mkdir(parents=True, exist_ok=True)
                # Written aside, then renamed: DDP ranks and parallel jobs tokenise at once, and none may read a
                # half-written cache.
                tmp_path = cache_path.with_suffix(f".{os.getpid()}.tmp")
                torch.save(self.input_ids, tmp_path)
                tmp_path.replace(cache_path)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        return self.input_ids[index], self.labels[index]


class PadCollator:
    """Pads a list of (token ids, label[, sample id]) to a fixed `pad_to` length.

    A fixed width lets the sifter concatenate kept samples from different batches; the task
    trims all-padding columns before each forward pass, so compute still follows the longest
    sentence of the batch (dynamic padding).
    """

    def __init__(self, pad_token_id: int, pad_to: int):
        self.pad_token_id = pad_token_id
        self.pad_to = pad_to

    def __call__(self, items):
        input_ids = torch.full((len(items), self.pad_to), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(items), self.pad_to), dtype=torch.long)
        for row, (ids, *_) in enumerate(items):
            input_ids[row, : len(ids)] = ids
            attention_mask[row, : len(ids)] = 1
        batch = {"input_ids": input_ids, "attention_mask": attention_mask,
                 "labels": torch.tensor([item[1] for item in items], dtype=torch.long)}
        if len(items[0]) == 3:  # items from an IndexedDataset carry their index for per-sample memory
            batch["sample_id"] = torch.tensor([item[2] for item in items], dtype=torch.long)
        return batch


def trim_padding(batch: dict) -> dict:
    """Drop the columns that are padding in every row of the batch."""
    length = int(batch["attention_mask"].sum(dim=1).max())
    return {key: value[:, :length] if value.dim() == 2 else value for key, value in batch.items()}
