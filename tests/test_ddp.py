"""DDP under torchrun: real 2-process gloo groups, the sifter alone and the whole harness into a real store."""

import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient

from conftest import ROOT, compose_config, job_env
from sift_bench import identity
from sift_bench.data.cifar10 import CifarLoader
from sift_bench.data.sharding import ShardedRandomSampler, shard_order
from sift_bench.report import machine_kinds
from sift_bench.validation import ConfigError, validate

WORKER = ROOT / "tests" / "ddp_sifter_worker.py"
POLICIES = ("relative_probabilistic", "random", "stale_loss", "stale_sb", "infobatch")
# The harness's sifters under torchrun: the worker's policies and the proxy scorer, whose proxy the task builds.
HARNESS_POLICIES = (*POLICIES, "proxy")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def run_group(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """Run a command in its own process group; on a hang kill the whole group (torchrun and its ranks) and fail."""
    env = job_env()
    process = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{' '.join(args[:6])} ... hung for {timeout} s (a rank waiting for another?)\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def run_worker(policy: str, sync: str, tmp_path: Path, ranks: int) -> dict:
    out = tmp_path / f"{policy}-{sync}-{ranks}.json"
    launcher = TORCHRUN if ranks == 2 else [sys.executable]
    result = run_group([*launcher, str(WORKER), policy, sync, str(out)], tmp_path, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("sync", ["global", "local"])
@pytest.mark.parametrize("policy", POLICIES)
def test_every_rank_yields_the_same_batches_and_counts_every_sample(policy, sync, tmp_path):
    result = run_worker(policy, sync, tmp_path, ranks=2)
    ranks = result["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    per_epoch = [[epoch["batches"] for epoch in r["epochs"]] for r in ranks]
    assert per_epoch[0] == per_epoch[1], "a rank that yields a batch more waits forever in DDP's all-reduce"
    # The stats are sums over the ranks, so every rank holds the same figures.
    clocks = {"sync_seconds": 0, "scoring_seconds": 0}  # times are per rank
    assert ranks[0]["stats"] | clocks == ranks[1]["stats"] | clocks
    stats = ranks[0]["stats"]
    assert stats["samples_seen"] == result["num_samples"] * result["epochs"]
    assert stats["samples_seen"] == stats["samples_kept"] + stats["samples_sifted_out"]
    yielded = sum(len(epoch["ids"]) for r in ranks for epoch in r["epochs"])
    assert stats["samples_kept"] == yielded, "kept must be what was trained on; left-overs are sifted out"
    assert stats["samples_left_over"] > 0 and stats["sync_seconds"] > 0
    for epoch in range(result["epochs"]):
        ids = ranks[0]["epochs"][epoch]["ids"] + ranks[1]["epochs"][epoch]["ids"]
        assert len(ids) == len(set(ids)), "a sample was trained on twice in one epoch (the shards overlap)"
        # Only full batches under DDP: a smaller last batch on one rank would change DDP's gradient weighting.
        assert len(ranks[0]["epochs"][epoch]["ids"]) == result["batch_size"] * per_epoch[0][epoch]
    if policy in ("relative_probabilistic", "stale_loss", "stale_sb"):
        same_history = ranks[0]["history"] == ranks[1]["history"]
        assert same_history == (sync == "global"), "global sync shares one loss history; local keeps one per rank"
        assert len(ranks[0]["history"]) == 200
    if policy in ("stale_loss", "stale_sb", "infobatch"):
        same_memory = ranks[0]["memory"] == ranks[1]["memory"]
        assert same_memory == (sync == "global"), "global sync remembers every rank's losses"


@pytest.mark.slow
def test_global_kept_fraction_matches_one_process():
    """Sifting against one shared history selects what one process selects, within sampling error."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        two = run_worker("relative_probabilistic", "global", Path(folder), ranks=2)["ranks"][0]["stats"]
        one = run_worker("relative_probabilistic", "global", Path(folder), ranks=1)["ranks"][0]["stats"]
    assert one["samples_left_over"] == 0
    # Selected before the ranks agree on full batches: kept + what no full batch of every rank took.
    selected_two = (two["samples_kept"] + two["samples_left_over"]) / two["samples_seen"]
    selected_one = one["samples_kept"] / one["samples_seen"]
    sigma = math.sqrt(0.25 * (1 / two["samples_seen"] + 1 / one["samples_seen"]))
    assert abs(selected_two - selected_one) < 4 * sigma, (selected_two, selected_one)
    assert abs(selected_one - 0.5) < 0.05  # beta 1 keeps about half


def test_shards_cover_an_epoch_once_with_one_permutation_per_epoch():
    order = torch.randperm(11, generator=torch.Generator().manual_seed(0))
    shards = [shard_order(order, rank, 3) for rank in range(3)]
    assert [len(s) for s in shards] == [4, 4, 4]  # padded from the start to a multiple of the world size
    assert set(torch.cat(shards).tolist()) == set(range(11))
    samplers = [ShardedRandomSampler(10, rank, 2, seed=5) for rank in range(2)]
    epoch_1 = [list(s) for s in samplers]
    epoch_2 = [list(s) for s in samplers]
    assert sorted(epoch_1[0] + epoch_1[1]) == list(range(10)) == sorted(epoch_2[0] + epoch_2[1])
    assert epoch_1 != epoch_2  # a new permutation each epoch, with no set_epoch() call


def test_resident_cifar_loader_shards_by_rank():
    images = torch.randint(0, 255, (20, 3, 32, 32), dtype=torch.uint8)
    labels = torch.arange(20) % 10
    loaders = [CifarLoader(images, labels, 4, train=True, seed=3, rank=rank, world_size=2) for rank in range(2)]
    for _ in range(2):
        ids = [torch.cat([batch[2] for batch in loader]) for loader in loaders]
        assert len(loaders[0]) == len(loaders[1]) == 3
        assert set(ids[0].tolist()).isdisjoint(ids[1].tolist())
        assert sorted(torch.cat(ids).tolist()) == list(range(20))
    single = CifarLoader(images, labels, 4, train=True, seed=3)
    assert sorted(torch.cat([b[2] for b in single]).tolist()) == list(range(20))


def test_world_size_is_part_of_a_runs_identity_only_under_ddp():
    cfg = compose_config(["+experiment=bert", "scale=smoke"])
    local = compose_config(["+experiment=bert", "scale=smoke", "sifter.sync=local"])
    # In one process sync does nothing, so it leaves the identity (and every stored run's hash) as it was.
    assert identity.config_hash(cfg) == identity.config_hash(local) == identity.config_hash(cfg, 1)
    assert identity.config_hash(cfg, 2) != identity.config_hash(cfg)
    assert identity.config_hash(cfg, 2) != identity.config_hash(local, 2)


def test_report_pairs_runs_within_one_world_size():
    runs = pd.DataFrame({"tags.machine.kind": ["xeon", "xeon", "xeon"], "tags.world_size": [None, "1", "2"]})
    assert list(machine_kinds(runs)) == ["xeon", "xeon", "xeon, 2 ranks"]


def test_bad_ddp_settings_are_refused_before_training(monkeypatch, data_dir):
    monkeypatch.setenv("WORLD_SIZE", "3")
    cfg = compose_config(["+experiment=bert", "scale=smoke", f"paths.data_dir={data_dir}"])
    with pytest.raises(ConfigError, match=r"trainer.batch_size=32 is not allowed: a multiple of the 3 DDP ranks"):
        validate(cfg)
    monkeypatch.setenv("WORLD_SIZE", "2")
    validate(cfg)
    cfg = compose_config(["+experiment=bert", "scale=smoke", f"paths.data_dir={data_dir}", "sifter.sync=all"])
    with pytest.raises(ConfigError, match=r"sifter.sync='all' is not allowed: one of \('global', 'local'\)"):
        validate(cfg)


@pytest.mark.slow
def test_a_sibling_ranks_work_is_never_counted_as_another_process(tmp_path):
    """Rank 1 works 2 CPU s before its meter starts and both ranks 1 s inside: rank 0 counts none of it as contention
    (2 s with windows that do not start together, 1 s without the siblings' count)."""
    out = tmp_path / "meter.json"
    result = run_group([*TORCHRUN, str(ROOT / "tests" / "ddp_meter_worker.py"), str(out)], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    meter = json.loads(out.read_text())
    assert meter["other_cpu_s"] < 0.5, meter


BATCHES = re.compile(r"rank (\d) of 2: (\d+) batches")


@pytest.mark.slow
@pytest.mark.parametrize("task", ["sst2_bert", "cifar10_resnet"])
def test_torchrun_trains_every_policy_into_one_run_per_job(task, tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sifters = ",".join(("none", *HARNESS_POLICIES))
    result = run_group([*TORCHRUN, "-m", "sift_bench", "-m", f"task={task}", "scale=smoke", "trainer.epochs=3",
                        f"sifter={sifters}", f"tracking.uri={store}",
                        f"hydra.sweep.dir={tmp_path}/multirun"], tmp_path, timeout=420)
    assert result.returncode == 0, result.stderr[-4000:]
    counts = BATCHES.findall(result.stdout)
    assert len(counts) == 2 * (1 + len(HARNESS_POLICIES))  # two ranks' lines per job: the baseline and every policy
    jobs = [dict(counts[i:i + 2]) for i in range(0, len(counts), 2)]
    assert all(set(job) == {"0", "1"} and job["0"] == job["1"] for job in jobs), jobs
    client = MlflowClient(store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string="tags.sifter != ''")
    jobs_runs = [run for run in runs if run.data.tags.get("run_kind") != "sweep"]
    # Rank 0 alone talks to MLflow: one run per job, not one per rank.
    assert sorted(run.data.tags["sifter"] for run in jobs_runs) == sorted(("none", *HARNESS_POLICIES))
    for run in jobs_runs:
        assert run.info.status == "FINISHED"
        assert run.data.tags["world_size"] == "2" and run.data.params["world_size"] == "2"
        metrics = run.data.metrics
        assert metrics["steps"] > 0
        # Samples seen are summed over the ranks, so the schedule reaches its end (linear to 0 at smoke size);
        # counted per rank against the global total it would stop near 0.5. A sifted run's last step comes a few
        # candidate batches before the end (the rest is left over: at 25 % kept a batch takes 4 candidate batches).
        final_lr = client.get_metric_history(run.info.run_id, "lr_multiplier")[-1].value
        assert final_lr == 0.0 if run.data.tags["sifter"] == "none" else final_lr < 0.25
        if run.data.tags["sifter"] == "none":
            assert metrics["samples_seen"] == metrics["samples_trained"] and metrics["samples_left_over"] == 0
        else:
            assert metrics["samples_trained"] < metrics["samples_seen"]
            # Each step trains at most a per-rank batch (the global 32 or 64 over 2 ranks) on each rank.
            assert metrics["samples_trained"] <= 2 * metrics["steps"] * (32 if task == "cifar10_resnet" else 16)
        # A sibling rank is part of the job, not contention (2 ranks on 2 cores would read about 1 core).
        assert metrics["other_cpu_fraction"] < 0.5
