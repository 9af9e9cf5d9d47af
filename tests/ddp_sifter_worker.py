"""One SiftingDataloader per rank over a sharded toy data set, for tests/test_ddp.py.

    torchrun --nproc_per_node=2 tests/ddp_sifter_worker.py POLICY SYNC OUT.json   # two gloo ranks
    python tests/ddp_sifter_worker.py POLICY SYNC OUT.json                        # one process, for comparison

A sample's loss is its first feature (plus a little noise for the training losses the loop reports back), so
sifting has something to rank. Rank 0 writes what every rank saw: batches and sample ids yielded per epoch, the
stats, the loss history and the loss memory.
"""

import json
import os
import sys

import torch
import torch.distributed as dist

from sift_bench.data.sharding import ShardedRandomSampler
from sift_bench.sifting import (
    IndexedDataset, InfoBatchSiftConfig, LossConfig, RandomSiftConfig, RelativeProbabilisticSiftConfig,
    SiftingBaseConfig, SiftingDataloader, StaleLossSiftConfig, StaleSBSiftConfig,
)

NUM_SAMPLES, GLOBAL_BATCH, EPOCHS, DELAY = 2000, 32, 3, 4


class FirstFeatureLoss:
    def loss(self, model, sifting_batch, batch):
        return batch[0][:, 0]


def config(policy: str):
    base = LossConfig(sift_config=SiftingBaseConfig(sift_delay=DELAY))
    return {
        "relative_probabilistic": lambda: RelativeProbabilisticSiftConfig(
            beta_value=1, loss_history_length=200, loss_based_sift_config=base),
        "random": lambda: RandomSiftConfig(keep_fraction=0.5, loss_based_sift_config=base),
        "stale_loss": lambda: StaleLossSiftConfig(beta_value=1, loss_history_length=200, loss_based_sift_config=base),
        "stale_sb": lambda: StaleSBSiftConfig(beta_value=1, loss_history_length=200, loss_based_sift_config=base,
                                              rescore_every_epochs=2),
        "infobatch": lambda: InfoBatchSiftConfig(prune_ratio=0.5, anneal_fraction=0.2, loss_based_sift_config=base),
    }[policy]()


def main(policy: str, sync: str, out_path: str) -> None:
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    world_size = dist.get_world_size() if dist.is_initialized() else 1
    features = torch.rand(NUM_SAMPLES, 4, generator=torch.Generator().manual_seed(0))
    dataset = IndexedDataset(torch.utils.data.TensorDataset(features))
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=GLOBAL_BATCH // world_size,
        sampler=ShardedRandomSampler(NUM_SAMPLES, rank, world_size, seed=0))
    sifter = SiftingDataloader(config(policy), loader, FirstFeatureLoss(), torch.nn.Identity(), seed=7,
                               num_samples=NUM_SAMPLES, num_epochs=EPOCHS, sync=sync)
    noise = torch.Generator().manual_seed(100 + rank)
    epochs = []
    for _ in range(EPOCHS):
        ids_yielded, batches = [], 0
        for x, ids in sifter:
            batches += 1
            ids_yielded += ids.tolist()
            if sifter.uses_training_losses:
                sifter.batch_weights()
                sifter.record_losses(x[:, 0] + 0.01 * torch.rand(len(x), generator=noise))
        epochs.append({"batches": batches, "ids": ids_yielded})
    mine = {
        "rank": rank,
        "epochs": epochs,
        "stats": sifter.stats.snapshot() | {"samples_sifted_out": sifter.stats.samples_sifted_out},
        "history": sifter.loss_history.values().tolist() if sifter.loss_history is not None else None,
        "memory": (torch.nan_to_num(sifter.sample_memory.losses, nan=-1.0).tolist()
                   if sifter.sample_memory is not None else None),
    }
    everyone = [mine]
    if world_size > 1:
        everyone = [None] * world_size
        dist.all_gather_object(everyone, mine)
    if rank == 0:
        with open(out_path, "w") as handle:
            json.dump({"world_size": world_size, "num_samples": NUM_SAMPLES, "epochs": EPOCHS,
                       "batch_size": GLOBAL_BATCH // world_size, "ranks": everyone}, handle)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:4])
