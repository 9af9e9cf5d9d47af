"""A Hugging Face Trainer script written the way AWS documents SageMaker smart sifting, in both of its forms:

- `--setup simple`: `enable_sifting(trainer, sift_config, loss=..., set_epochs=True)` on a plain Trainer;
- `--setup custom`: a Trainer subclass whose `get_train_dataloader` returns
  `SiftingDataloader(orig_dataloader=super().get_train_dataloader(), ...)`, with `max_steps` set, as AWS asks for
  a loader without a length.

The model is a tiny BERT built from a config (nothing downloaded), on synthetic sentences whose label is whether
their first token is in the upper half of the vocabulary. The Trainer reports to MLflow (`report_to="mlflow"`), so
under `python -m sift_bench.sagemaker` its `eval_accuracy` lands in the runner's run.
"""

import argparse
from typing import Any

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from smart_sifting.dataloader.sift_dataloader import SiftingDataloader
from smart_sifting.integrations.trainer import enable_sifting
from smart_sifting.loss.abstract_sift_loss_module import Loss
from smart_sifting.sift_config.sift_configs import LossConfig, RelativeProbabilisticSiftConfig, SiftingBaseConfig

VOCAB, LENGTH = 64, 8


class SiftingImplementedLoss(Loss):
    def __init__(self):
        self.celoss = torch.nn.CrossEntropyLoss(reduction="none")

    def loss(self, model: torch.nn.Module, transformed_batch: Any, original_batch: Any = None) -> torch.Tensor:
        device = next(model.parameters()).device
        inputs = {key: value.to(device) for key, value in original_batch.items() if key != "labels"}
        return self.celoss(model(**inputs).logits, original_batch["labels"].to(device))


def sift_config_from(args) -> RelativeProbabilisticSiftConfig:
    return RelativeProbabilisticSiftConfig(
        beta_value=args.beta,
        loss_history_length=500,
        loss_based_sift_config=LossConfig(sift_config=SiftingBaseConfig(sift_delay=args.sift_delay)),
    )


class SiftingImplementedTrainer(Trainer):
    def __init__(self, *trainer_args, sift_config=None, **kwargs):
        super().__init__(*trainer_args, **kwargs)
        self.sift_config = sift_config

    def get_train_dataloader(self):
        dl = super().get_train_dataloader()
        return SiftingDataloader(
            sift_config=self.sift_config,
            orig_dataloader=dl,
            loss_impl=SiftingImplementedLoss(),
            model=self.model,
        )


def sentences(count: int, seed: int) -> list[dict]:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, VOCAB, (count, LENGTH), generator=generator)
    labels = (input_ids[:, 0] >= VOCAB // 2).long()
    return [{"input_ids": input_ids[i], "attention_mask": torch.ones(LENGTH, dtype=torch.long),
             "labels": labels[i]} for i in range(count)]


def accuracy(prediction):
    return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--setup", choices=["simple", "custom"], default="simple")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train-size", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--sift-delay", type=int, default=4)
    parser.add_argument("--output-dir", default="hf_trainer_out")
    args = parser.parse_args()

    model = BertForSequenceClassification(BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=LENGTH, num_labels=2))
    steps_per_epoch = args.train_size // args.batch_size
    training_args = TrainingArguments(
        output_dir=args.output_dir, per_device_train_batch_size=args.batch_size, num_train_epochs=args.epochs,
        # The custom setup's SiftingDataloader has no length, so the Trainer needs max_steps (AWS's note).
        max_steps=steps_per_epoch * args.epochs if args.setup == "custom" else -1,
        learning_rate=1e-3, use_cpu=True, save_strategy="no", logging_strategy="epoch", report_to="mlflow",
        disable_tqdm=True, seed=0)
    train_set, eval_set = sentences(args.train_size, seed=1), sentences(256, seed=2)
    if args.setup == "simple":
        trainer = Trainer(model=model, args=training_args, train_dataset=train_set, eval_dataset=eval_set,
                          compute_metrics=accuracy)
        enable_sifting(trainer, sift_config_from(args), loss=SiftingImplementedLoss(), set_epochs=True)
    else:
        trainer = SiftingImplementedTrainer(model=model, args=training_args, train_dataset=train_set,
                                            eval_dataset=eval_set, compute_metrics=accuracy,
                                            sift_config=sift_config_from(args))
    trainer.train()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
