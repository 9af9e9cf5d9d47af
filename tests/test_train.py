"""The shared training loop: a schedule over samples seen, run status on failure, repeatability."""

import logging
import math
import re

import pytest
import torch
from mlflow.tracking import MlflowClient
from omegaconf import open_dict

import sift_bench.__main__ as entry
from conftest import compose_config
from sift_bench.schedule import lr_multiplier
from sift_bench.tasks import build_task
from sift_bench.train import train
from sift_bench.validation import validate


def smoke_config(overrides, tmp_path):
    cfg = compose_config(["scale=smoke", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", *overrides])
    with open_dict(cfg):
        cfg.paths.cache_dir = str(tmp_path / "cache")
        cfg.trainer.progress = False
    return cfg


def run_training(cfg):
    torch.manual_seed(cfg.seed)
    parts = build_task(cfg, torch.device("cpu"))
    return parts, train(parts, cfg.trainer, torch.device("cpu"), cfg.scale.precision, validate(cfg), seed=cfg.seed,
                        target_accuracy=cfg.task.target_accuracy)


@pytest.mark.parametrize("name", ["linear", "onecycle", "cosine"])
def test_schedules_warm_up_to_the_peak_and_end_at_the_final_fraction(name):
    assert lr_multiplier(0.2, name, warmup_fraction=0.2, final_lr_fraction=0.05) == pytest.approx(1.0)
    assert lr_multiplier(1.0, name, 0.2, 0.05) == pytest.approx(0.05)
    assert lr_multiplier(0.1, name, 0.2, 0.05) < 1.0
    values = [lr_multiplier(p / 100, name, 0.2, 0.05) for p in range(20, 101)]
    assert all(a >= b for a, b in zip(values, values[1:]))  # decays monotonically after warmup


def test_sifted_run_completes_its_schedule_in_fewer_steps(tmp_path):
    cfg = smoke_config(["task=cifar10_resnet", "sifter=random", "sifter.keep_fraction=0.25", "sifter.sift_delay=0"], tmp_path)
    parts, result = run_training(cfg)
    planned_samples = cfg.trainer.epochs * parts.num_train_samples
    assert result.samples_seen == planned_samples
    assert result.samples_trained < 0.4 * planned_samples
    # A schedule counted in optimizer steps would be stuck near 25 % here; counted in samples it ends at 0.
    assert result.history[-1].lr_multiplier == pytest.approx(cfg.trainer.schedule.final_lr_fraction, abs=0.02)
    assert [point.epoch for point in result.history] == [1.0, 2.0]


def test_evaluations_per_epoch(tmp_path):
    cfg = smoke_config(["task=sst2_bert", "sifter=none", "trainer.evals_per_epoch=4", "trainer.epochs=1"], tmp_path)
    _, result = run_training(cfg)
    assert [point.epoch for point in result.history] == pytest.approx([0.25, 0.5, 0.75, 1.0], abs=0.07)
    times = [point.train_time_s for point in result.history]
    assert times == sorted(times) and result.train_time_s == times[-1]


def test_evaluations_every_few_epochs_and_always_at_the_end(tmp_path):
    cfg = smoke_config(["task=cifar10_resnet", "sifter=none", "trainer.epochs=5", "trainer.eval_every_epochs=2"], tmp_path)
    _, result = run_training(cfg)
    assert [point.epoch for point in result.history] == [2.0, 4.0, 5.0]
    assert result.train_time_s == result.history[-1].train_time_s


def test_same_seed_same_run(tmp_path):
    overrides = ["task=cifar10_resnet", "sifter=relative_probabilistic", "sifter.sift_delay=2", "seed=5"]
    _, first = run_training(smoke_config(overrides, tmp_path))
    _, second = run_training(smoke_config(overrides, tmp_path))
    assert [p.train_loss for p in first.history] == [p.train_loss for p in second.history]
    assert first.samples_trained == second.samples_trained and first.test_accuracy == second.test_accuracy
    _, other = run_training(smoke_config([*overrides[:-1], "seed=6"], tmp_path))
    assert [p.train_loss for p in other.history] != [p.train_loss for p in first.history]


def test_time_to_target_is_the_train_time_of_the_first_validation_at_target(tmp_path):
    cfg = smoke_config(["task=sst2_bert", "sifter=none", "trainer.epochs=3", "task.target_accuracy=60"], tmp_path)
    _, result = run_training(cfg)
    reached = [p for p in result.history if p.val_accuracy >= 60]
    if reached:
        assert result.time_to_target_s == reached[0].train_time_s
    else:
        assert math.isnan(result.time_to_target_s)
    cfg = smoke_config(["task=sst2_bert", "sifter=none", "trainer.epochs=1", "task.target_accuracy=101"], tmp_path)
    assert math.isnan(run_training(cfg)[1].time_to_target_s)


def test_a_run_that_raises_is_marked_failed(tmp_path, monkeypatch):
    cfg = smoke_config(["+experiment=bert"], tmp_path)

    def build_failing_task(cfg, device):
        parts = build_task(cfg, device)
        calls = {"n": 0}
        per_sample_loss = parts.per_sample_loss

        def failing_loss(model, batch):
            calls["n"] += 1
            if calls["n"] == 15:  # part-way through training, after the delay
                raise RuntimeError("loss exploded")
            return per_sample_loss(model, batch)

        parts.per_sample_loss = failing_loss
        return parts

    monkeypatch.setattr(entry, "build_task", build_failing_task)
    with pytest.raises(RuntimeError, match="loss exploded"):
        entry.run_job(cfg)
    client = MlflowClient(cfg.tracking.uri)
    runs = client.search_runs([client.get_experiment_by_name(cfg.tracking.experiment_name).experiment_id])
    assert [run.info.status for run in runs] == ["FAILED"]


@pytest.mark.parametrize("sifter", ["stale_loss", "infobatch"])
def test_loss_memory_sifters_start_pruning_once_losses_are_remembered(sifter, tmp_path):
    # InfoBatch without annealing, so that it prunes every epoch after the first.
    no_anneal = ["sifter.anneal_fraction=0"] if sifter == "infobatch" else []
    cfg = smoke_config(["task=cifar10_resnet", f"sifter={sifter}", "sifter.sift_delay=0", "trainer.epochs=3",
                        *no_anneal], tmp_path)
    parts, result = run_training(cfg)
    first, *later = result.history
    assert first.pct_accepted == 100.0  # nothing is remembered during the first epoch
    assert all(point.pct_accepted < 95.0 for point in later)
    assert result.sift_time_s == 0.0  # no scoring forward pass
    assert result.samples_seen == 3 * parts.num_train_samples
    assert result.history[-1].lr_multiplier == pytest.approx(0.0, abs=0.02)


def test_infobatch_as_written_prunes_nothing_in_two_epochs(tmp_path):
    # The official schedule prunes epoch e while e + 1 <= 2 * 0.875: never at 2 epochs (the SST-2 short table).
    cfg = smoke_config(["+experiment=bert", "sifter=infobatch", "trainer.epochs=2"], tmp_path)
    parts, result = run_training(cfg)
    assert result.pct_accepted == 100.0 and result.samples_seen == 2 * parts.num_train_samples


def test_stale_sb_pays_for_its_scoring_passes(tmp_path):
    cfg = smoke_config(["+experiment=bert", "sifter=stale_sb", "trainer.epochs=4"], tmp_path)
    parts, result = run_training(cfg)
    assert result.sift_time_s > 0.0  # epoch 0's pass (after the delay) and epoch 3's re-scoring
    assert 35.0 < result.pct_accepted < 70.0  # beta 1 keeps about half, after the delay's full batches
    assert result.samples_seen == 4 * parts.num_train_samples
    assert result.history[-1].lr_multiplier == pytest.approx(0.0, abs=0.02)


def test_the_metric_names_are_the_fields_the_loops_fill():
    from dataclasses import fields

    from sift_bench.metrics import EVAL_METRICS, FINAL_METRICS
    from sift_bench.recorder import EvalPoint, TrainResult

    assert {field.name for field in fields(EvalPoint)} == set(EVAL_METRICS)
    result_fields = {field.name for field in fields(TrainResult)}
    assert set(FINAL_METRICS) - result_fields == {"cost_usd"}  # the harness prices the train time itself


PROGRESS_LINE = re.compile(r"progress \d+ of (\d+) samples \(\d+\.\d %\), \d+ samples/s, \d+:\d\d elapsed, "
                           r"about (\d+:)?\d+:\d\d left")


def test_without_a_terminal_progress_is_logged_as_a_line_with_rate_and_time_left(tmp_path, monkeypatch, caplog):
    import sift_bench.train as native

    monkeypatch.setattr(native, "PROGRESS_LOG_INTERVAL_S", 0.0)  # a line at every step, so a smoke run has some
    cfg = smoke_config(["task=sst2_bert", "sifter=none", "trainer.epochs=1"], tmp_path)  # trainer.progress=false
    with caplog.at_level(logging.INFO, logger="sift_bench.train"):
        parts, _ = run_training(cfg)
    lines = [record.getMessage() for record in caplog.records
             if record.name == "sift_bench.train" and record.getMessage().startswith("progress ")]
    assert lines, [record.getMessage() for record in caplog.records]
    for line in lines:
        assert PROGRESS_LINE.fullmatch(line) and PROGRESS_LINE.fullmatch(line)[1] == str(parts.num_train_samples), line


def test_the_progress_line_comes_at_a_steady_interval_and_a_terminal_gets_the_bar(caplog, capsys):
    from sift_bench.train import ProgressLog, _progress_bar

    progress = ProgressLog(1000, interval_s=30.0)
    with caplog.at_level(logging.INFO, logger="sift_bench.train"):
        progress.update(100)  # within the first 30 s: nothing
        assert not caplog.records
        progress.start -= 60.0  # as if a minute had passed
        progress.next_line -= 60.0
        progress.update(100)
        progress.update(100)  # the next line is 30 s away again
    assert [record.getMessage() for record in caplog.records] == [
        "progress 200 of 1000 samples (20.0 %), 3 samples/s, 1:00 elapsed, about 4:00 left"]
    assert progress.n == 300 and progress.disable  # the bar's interface, for the loop
    # stderr captured here is not a terminal: tqdm switches itself off and the log takes its place, even with
    # trainer.progress=true; with it false there is no bar anywhere.
    for enabled in (True, False):
        assert isinstance(_progress_bar(10, enabled), ProgressLog)


@pytest.mark.parametrize("task", ["cifar10_resnet", "sst2_bert"])
def test_the_proxy_scorer_scores_with_a_smaller_model_that_learns_alongside(task, tmp_path):
    cfg = smoke_config([f"task={task}", "sifter=proxy", "trainer.epochs=3"], tmp_path)
    torch.manual_seed(cfg.seed)
    parts = build_task(cfg, torch.device("cpu"))
    proxy = parts.proxy_model(0.25)
    # A quarter of the model's size: a narrower ResNet, a BERT with fewer layers; same inputs, same classes.
    assert sum(p.numel() for p in proxy.parameters()) < sum(p.numel() for p in parts.model.parameters())
    result = train(parts, cfg.trainer, torch.device("cpu"), cfg.scale.precision, validate(cfg), seed=cfg.seed)
    assert result.sift_time_s > 0.0 and result.samples_scored > 0
    assert 30.0 < result.pct_accepted < 75.0  # beta 1 keeps about half, after the delay's full batches
    assert result.samples_seen == 3 * parts.num_train_samples


def test_the_proxy_loss_trains_its_proxy_under_the_loaders_no_grad_and_returns_detached_losses():
    from sift_bench.sifting import ProxyLoss

    torch.manual_seed(0)
    proxy = torch.nn.Linear(4, 3)
    before = proxy.weight.detach().clone()
    inputs, labels = torch.randn(16, 4), torch.randint(0, 3, (16,))
    proxy_loss = ProxyLoss(proxy, lambda model, batch: torch.nn.functional.cross_entropy(
        model(batch[0]), batch[1], reduction="none"), torch.optim.SGD(proxy.parameters(), lr=0.5))
    with torch.no_grad():  # as the loader scores
        first = proxy_loss.loss(torch.nn.Identity(), None, (inputs, labels))
        for _ in range(20):
            last = proxy_loss.loss(torch.nn.Identity(), None, (inputs, labels))
    assert first.shape == (16,) and not first.requires_grad
    assert not torch.equal(proxy.weight, before) and proxy_loss.steps == 21
    assert last.mean() < first.mean()  # it learns from what it scores


def test_the_proxy_policy_refuses_a_loss_that_is_not_a_proxy_loss():
    from sift_bench.sifting import LossConfig, ProxySiftConfig, SiftingBaseConfig, SiftingDataloader
    from sift_bench.loop_parts import TaskLoss

    policy = ProxySiftConfig(beta_value=1, loss_history_length=50,
                             loss_based_sift_config=LossConfig(sift_config=SiftingBaseConfig(sift_delay=0)))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)), batch_size=4)
    with pytest.raises(TypeError, match="ProxySiftConfig scores with a proxy model: loss_impl must be a "
                                        "sift_bench.sifting.ProxyLoss"):
        SiftingDataloader(policy, loader, TaskLoss(lambda model, batch: batch[0].sum(1), None),
                          torch.nn.Identity())
    with pytest.raises(ValueError, match=r"proxy_size must be a number in \(0, 1\]"):
        ProxySiftConfig(beta_value=1, loss_history_length=50, proxy_size=1.5,
                        loss_based_sift_config=LossConfig(sift_config=SiftingBaseConfig(sift_delay=0)))
