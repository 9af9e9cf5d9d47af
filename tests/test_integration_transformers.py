"""Sifting inside Hugging Face's Trainer (sift_bench.integrations.transformers) and the harness's `trainer.loop:
hf_trainer` (sift_bench.train_hf): a real transformers Trainer training a real tiny BERT on the CPU."""

import copy

import pytest
import torch
import torch.nn.functional as F
from mlflow.tracking import MlflowClient
from transformers import (
    BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments, default_data_collator,
    get_scheduler,
)

from conftest import compose_config, run_cli
from sift_bench import train_hf
from sift_bench.integrations.transformers import LogitsCrossEntropyLoss, SiftingTrainer, enable_sifting
from sift_bench.sifting import (
    IndexedDataset, InfoBatchSiftConfig, LossConfig, RandomSiftConfig, RelativeProbabilisticSiftConfig,
    SiftingBaseConfig, StaleLossSiftConfig,
)
from sift_bench.targets import build_sift_config
from sift_bench.tasks import build_task
from sift_bench.train import train as native_train

NUM_SAMPLES, SEQUENCE_LENGTH, BATCH_SIZE, EPOCHS = 256, 8, 16, 2
CANDIDATE_BATCHES = EPOCHS * NUM_SAMPLES // BATCH_SIZE  # the planned data, in batches


def no_delay():
    return LossConfig(sift_config=SiftingBaseConfig(sift_delay=0))


def tiny_bert(seed: int = 0) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=SEQUENCE_LENGTH, num_labels=2)
    return BertForSequenceClassification(config)


def sentences(seed: int = 0) -> list[dict]:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, 64, (NUM_SAMPLES, SEQUENCE_LENGTH), generator=generator)
    labels = torch.randint(0, 2, (NUM_SAMPLES,), generator=generator)
    return [{"input_ids": input_ids[i], "attention_mask": torch.ones(SEQUENCE_LENGTH, dtype=torch.long),
             "labels": int(labels[i])} for i in range(NUM_SAMPLES)]


def training_args(tmp_path, **settings) -> TrainingArguments:
    defaults = dict(output_dir=str(tmp_path / "out"), per_device_train_batch_size=BATCH_SIZE, num_train_epochs=EPOCHS,
                    learning_rate=1e-3, lr_scheduler_type="linear", use_cpu=True, seed=0, save_strategy="no",
                    logging_strategy="no", report_to="none", disable_tqdm=True)
    return TrainingArguments(**{**defaults, **settings})


class StepLog(TrainerCallback):
    """After every optimizer step: the samples the sifter has seen and the learning rate the next step will use."""

    def __init__(self, trainer):
        self.trainer, self.rows = trainer, []

    def on_step_end(self, args, state, control, optimizer=None, **kwargs):
        self.rows.append((self.trainer.sifting.dataloader.stats.samples_seen, optimizer.param_groups[0]["lr"]))


class ForwardRows:
    """Counts the samples of every forward pass of `model`, in train mode (training) and eval mode (scoring)."""

    def __init__(self, model):
        self.rows = {"train": 0, "eval": 0}
        model.register_forward_pre_hook(self.count, with_kwargs=True)

    def count(self, module, args, kwargs):
        self.rows["train" if module.training else "eval"] += kwargs["input_ids"].shape[0]


def test_enable_sifting_keeps_the_expected_fraction_and_trains_only_what_it_yields(tmp_path):
    model = tiny_bert()
    forwards = ForwardRows(model)
    # A tiny learning rate keeps the losses nearly stationary, where beta 1 keeps 1 / (1 + 1) = 50 %.
    trainer = Trainer(model=model, args=training_args(tmp_path, learning_rate=1e-7, include_num_input_tokens_seen="all"),
                      train_dataset=sentences())
    enable_sifting(trainer, RelativeProbabilisticSiftConfig(beta_value=1, loss_history_length=128,
                                                            loss_based_sift_config=no_delay()))
    trainer.train()

    stats = trainer.sifting.dataloader.stats
    assert stats.samples_seen == EPOCHS * NUM_SAMPLES
    assert 42 < stats.pct_accepted < 60
    # The Trainer took one step per yielded batch and its own token count is that of the kept samples only.
    assert trainer.state.global_step == stats.batches_yielded < CANDIDATE_BATCHES
    assert trainer.state.num_input_tokens_seen == stats.samples_kept * SEQUENCE_LENGTH
    # Every candidate was scored (in eval mode); only the kept ones went through a training forward pass.
    assert forwards.rows == {"train": stats.samples_kept, "eval": stats.samples_seen}


@pytest.mark.parametrize("schedule", [
    dict(lr_scheduler_type="linear"),
    dict(lr_scheduler_type="cosine", warmup_steps=8),
    dict(lr_scheduler_type="linear", max_steps=24),  # a plan that ends half-way through the second epoch
    # The kept samples that never fill a batch are dropped, so (with this seed) the last candidates are drawn after
    # the last step: the schedule catches up at the epoch's end.
    dict(lr_scheduler_type="linear", dataloader_drop_last=True, seed=3),
], ids=["linear", "cosine_warmup", "max_steps_mid_epoch", "drop_last"])
def test_the_schedule_ends_when_the_planned_data_is_seen(schedule, tmp_path):
    planned_batches = schedule.get("max_steps", CANDIDATE_BATCHES)
    args = training_args(tmp_path, **schedule)
    trainer = Trainer(model=tiny_bert(), args=args, train_dataset=sentences())
    enable_sifting(trainer, RandomSiftConfig(keep_fraction=0.5, loss_based_sift_config=no_delay()))
    log = StepLog(trainer)
    trainer.add_callback(log)
    trainer.train()

    # The Trainer's own schedule for the unsifted plan, read at the candidate batches seen rather than at the steps.
    reference_optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=args.learning_rate)
    reference = get_scheduler(args.lr_scheduler_type, reference_optimizer, num_training_steps=planned_batches,
                              num_warmup_steps=args.get_warmup_steps(planned_batches))
    reference_lrs = [reference.get_last_lr()[0]]
    for _ in range(planned_batches):
        reference_optimizer.step()
        reference.step()
        reference_lrs.append(reference.get_last_lr()[0])

    assert trainer.state.max_steps == planned_batches
    assert trainer.state.global_step == len(log.rows) < planned_batches  # sifting took fewer steps than planned
    for samples_seen, lr in log.rows:
        assert lr == pytest.approx(reference_lrs[min(samples_seen // BATCH_SIZE, planned_batches)], rel=1e-9, abs=1e-15)
    # It did not end early: the rate decayed to its end value only with the last of the planned data.
    seen_at_end = trainer.sifting.dataloader.stats.samples_seen
    if args.dataloader_drop_last:
        assert log.rows[-1][0] < seen_at_end  # the case it covers
    assert planned_batches * BATCH_SIZE <= seen_at_end < (planned_batches + 8) * BATCH_SIZE
    assert all(lr > 0 for samples_seen, lr in log.rows if samples_seen < planned_batches * BATCH_SIZE)
    assert trainer.optimizer.param_groups[0]["lr"] == reference_lrs[-1] == 0.0
    assert trainer.sifting.dataloader.epoch == EPOCHS - 1  # both epochs ran: the sifter was iterated twice


def test_the_default_loss_is_the_cross_entropy_of_each_sample():
    model = tiny_bert().eval()
    batch = default_data_collator([{**item, "sample_id": i} for i, item in enumerate(sentences()[:6])])
    losses = LogitsCrossEntropyLoss().loss(model, None, batch)
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        mean_loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                          labels=batch["labels"]).loss
    assert losses.shape == (6,)
    assert torch.allclose(losses, F.cross_entropy(logits, batch["labels"], reduction="none"))
    assert losses.mean().item() == pytest.approx(mean_loss.item(), rel=1e-6)  # the model's own (mean) loss
    with pytest.raises(ValueError, match="one label per sample"):
        LogitsCrossEntropyLoss().loss(model, None, {**batch, "labels": batch["input_ids"]})


class RecordingCrossEntropy(LogitsCrossEntropyLoss):
    """The default loss, keeping each training call's per-sample losses and the sifter's weights for that batch."""

    def __init__(self):
        self.trainer, self.training_calls = None, []

    def loss(self, model, transformed_batch, original_batch=None):
        losses = super().loss(model, transformed_batch, original_batch)
        if torch.is_grad_enabled():
            weights = self.trainer.sifting.dataloader.batch_weights()
            self.training_calls.append((losses.detach().clone(), weights.clone()))
        return losses


@pytest.mark.parametrize("sift_config", [
    StaleLossSiftConfig(beta_value=1, loss_history_length=64, loss_based_sift_config=no_delay()),
    # No annealing: the official schedule prunes epoch e while e + 1 <= epochs * (1 - anneal_fraction), and at 2
    # epochs with the default 0.125 it would prune nothing.
    InfoBatchSiftConfig(prune_ratio=0.5, anneal_fraction=0.0),
], ids=["stale_loss", "infobatch"])
def test_training_loss_policies_get_their_losses_back(sift_config, tmp_path):
    loss = RecordingCrossEntropy()
    # The Trainer would drop the sample_id column its model does not take.
    args = training_args(tmp_path, remove_unused_columns=False, logging_strategy="steps", logging_steps=1)
    trainer = Trainer(model=tiny_bert(), args=args, train_dataset=IndexedDataset(sentences()))
    enable_sifting(trainer, sift_config, loss)
    loss.trainer = trainer
    trainer.train()

    sifter = trainer.sifting.dataloader
    memory, stats = sifter.sample_memory, sifter.stats
    # Epoch 1 trained everything and recorded every loss; epoch 2 sifted on them.
    assert memory.remembered.all() and torch.isfinite(memory.losses).all()
    assert stats.samples_kept < stats.samples_seen == EPOCHS * NUM_SAMPLES
    # Exactly the samples trained in epoch 2 carry a loss recorded in epoch 2.
    assert int((memory.epoch_stamps == 1).sum()) == stats.samples_kept - NUM_SAMPLES
    # The Trainer's loss at each step is the weighted mean of that batch's per-sample losses.
    step_losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    assert len(step_losses) == len(loss.training_calls) == trainer.state.global_step
    for step_loss, (losses, weights) in zip(step_losses, loss.training_calls):
        assert step_loss == pytest.approx(float((losses * weights).mean()), rel=1e-5)
    if isinstance(sift_config, InfoBatchSiftConfig):
        assert any((weights == 2.0).any() for _, weights in loss.training_calls)  # 1 / (1 - prune_ratio)


def test_training_loss_policies_without_sample_ids_are_told_what_to_do(tmp_path):
    trainer = Trainer(model=tiny_bert(), args=training_args(tmp_path), train_dataset=IndexedDataset(sentences()))
    enable_sifting(trainer, StaleLossSiftConfig(beta_value=1, loss_history_length=64, loss_based_sift_config=no_delay()))
    with pytest.raises(ValueError, match="IndexedDataset.*remove_unused_columns=False"):
        trainer.train()


def test_gradient_accumulation_is_refused(tmp_path):
    trainer = Trainer(model=tiny_bert(), args=training_args(tmp_path, gradient_accumulation_steps=2),
                      train_dataset=sentences())
    enable_sifting(trainer, RandomSiftConfig(keep_fraction=0.5, loss_based_sift_config=no_delay()))
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2"):
        trainer.train()


@pytest.mark.parametrize("sift_config,indexed", [
    (RelativeProbabilisticSiftConfig(beta_value=1, loss_history_length=64,
                                     loss_based_sift_config=LossConfig(sift_config=SiftingBaseConfig(sift_delay=3))),
     False),
    (StaleLossSiftConfig(beta_value=1, loss_history_length=64, loss_based_sift_config=no_delay()), True),
], ids=["relative_probabilistic", "stale_loss"])
def test_sifting_trainer_trains_as_enable_sifting_does(sift_config, indexed, tmp_path):
    model = tiny_bert()
    data = IndexedDataset(sentences()) if indexed else sentences()
    args = training_args(tmp_path, remove_unused_columns=not indexed)

    def patched():
        trainer = Trainer(model=copy.deepcopy(model), args=args, train_dataset=data)
        enable_sifting(trainer, sift_config)
        return trainer

    def subclassed():
        return SiftingTrainer(model=copy.deepcopy(model), args=args, train_dataset=data, sift_config=sift_config)

    trainers, logs = [], []
    for build in (patched, subclassed):
        trainer = build()  # built (which seeds torch with args.seed) just before training: the same dropout draws
        logs.append(StepLog(trainer))
        trainer.add_callback(logs[-1])
        trainer.train()
        trainers.append(trainer)

    counts = [{key: value for key, value in trainer.sifting.dataloader.stats.snapshot().items()
               if not key.endswith("seconds")} for trainer in trainers]
    assert counts[0] == counts[1] and counts[0]["pct_accepted"] < 100
    assert logs[0].rows == logs[1].rows
    assert trainers[0].state.global_step == trainers[1].state.global_step
    for (name, left), (_, right) in zip(trainers[0].model.named_parameters(), trainers[1].model.named_parameters()):
        assert torch.equal(left, right), name


def smoke_task(tmp_path, sifter: str):
    cfg = compose_config(["task=sst2_bert", "scale=smoke", f"sifter={sifter}", f"paths.cache_dir={tmp_path / 'cache'}"])
    torch.manual_seed(cfg.seed)
    return cfg, build_task(cfg, torch.device("cpu"))


def test_train_hf_baseline_takes_the_native_loops_batches(tmp_path):
    results = {}
    for name, train in (("native", native_train), ("hf", train_hf.train)):
        cfg, parts = smoke_task(tmp_path, "none")
        results[name] = train(parts, cfg.trainer, torch.device("cpu"), "fp32", None, seed=cfg.seed)
    native, hf = results["native"], results["hf"]
    for field in ("samples_seen", "samples_trained", "work_trained", "steps", "pct_accepted"):
        assert getattr(hf, field) == getattr(native, field), field
    assert [point.epoch for point in hf.history] == [point.epoch for point in native.history]
    assert hf.history[-1].lr_multiplier == 0.0 and hf.train_time_s > 0 and hf.sift_time_s == 0.0


def test_train_hf_feeds_stale_losses_back(tmp_path):
    cfg, parts = smoke_task(tmp_path, "stale_loss")
    points = []
    result = train_hf.train(parts, cfg.trainer, torch.device("cpu"), "fp32", build_sift_config(cfg.sifter),
                           seed=cfg.seed, on_eval=points.append)
    assert result.samples_seen == cfg.trainer.epochs * parts.num_train_samples
    # Epoch 1 trains everything; epoch 2 decides from the losses epoch 1 reported back.
    assert points[0].pct_accepted == 100.0 > points[-1].pct_accepted
    assert result.samples_trained < result.samples_seen and result.sift_time_s == 0.0
    assert points[-1].lr_multiplier == 0.0 and points == result.history


@pytest.mark.slow
def test_cli_trains_with_the_hugging_face_trainer(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = run_cli(["+experiment=bert_hf", "scale=smoke", f"tracking.uri={store}", "trainer.epochs=1"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "accepted" in result.stdout and "mlflow run" in result.stdout
    client = MlflowClient(store)
    [run] = client.search_runs([e.experiment_id for e in client.search_experiments()])
    metrics, params = run.data.metrics, run.data.params
    assert run.info.status == "FINISHED" and params["trainer.loop"] == "hf_trainer"
    assert 0 < metrics["pct_accepted"] < 100 and metrics["samples_trained"] < metrics["samples_seen"]
    assert metrics["sift_time_s"] > 0 and metrics["train_time_s"] > 0
    # The linear schedule completed although sifting took fewer steps than an epoch has batches.
    assert client.get_metric_history(run.info.run_id, "lr_multiplier")[-1].value == 0.0
