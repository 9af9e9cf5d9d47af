"""Data-parallel training under torchrun: the process group, this process's rank, and the few collectives the
harness needs (the sifter has its own, in sift_bench.sifting.ranks).

`torchrun --nproc_per_node=N -m sift_bench ...` sets WORLD_SIZE, RANK and LOCAL_RANK; without them, or with
WORLD_SIZE=1, everything here is a no-op and sift_bench runs as one process.
"""

import atexit
import gc
import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist

from sift_bench import machine


def world_size_from_env() -> int:
    """The world size torchrun announces, 1 without torchrun; readable before any process group exists."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank_from_env() -> int:
    return int(os.environ.get("RANK", "0"))


@dataclass(frozen=True)
class World:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0 alone talks to MLflow and prints the summary."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def collect_models_before_leaving() -> None:
    """Free every unreachable object, DistributedDataParallel models included, before the group is destroyed.

    torch 2.14's gloo can abort a rank at exit (`terminate called without an active exception`, SIGABRT, torchrun
    exits 1) when the process group is destroyed while a DistributedDataParallel still lives, and a finished job's
    DDP model often sits in a reference cycle until the collector runs. Measured on a 2-core machine, two gloo ranks
    destroying the group after one DDP step: 7 of 12 exits aborted with the model alive, 0 of 24 with it freed.
    """
    gc.collect()


def leave() -> None:
    """Destroy the process group at exit, once its DDP models are freed."""
    collect_models_before_leaving()
    if dist.is_initialized():
        dist.destroy_process_group()


def current() -> World:
    """This process's place in the initialised process group (a world of one when there is none)."""
    if not (dist.is_available() and dist.is_initialized()):
        return World()
    return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def start(device: str) -> tuple[World, torch.device]:
    """Join torchrun's process group (once per process: a sweep's jobs share it) and pick this rank's device.

    gloo on the CPU, nccl on CUDA with one GPU per rank, by LOCAL_RANK.
    """
    if world_size_from_env() > 1 and not dist.is_initialized():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=backend)
        atexit.register(leave)
    world = current()
    if device.startswith("cuda") and world.distributed:
        return world, torch.device("cuda", world.local_rank)
    return world, torch.device(device)


def broadcast(value, world: World):
    """Rank 0's `value` (any picklable object) on every rank."""
    if not world.distributed:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def sum_over_ranks(values: list[float], world: World, device: torch.device) -> list[float]:
    """The sum of each value over all ranks (the values themselves in one process)."""
    if not world.distributed:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def start_cpu_meter(world: World) -> machine.OtherCpuMeter:
    """An OtherCpuMeter started by every rank at once: under DDP the ranks meet at a barrier first, so each rank's
    window spans the same wall time as its siblings' and a sibling's CPU falls inside the sibling's own count.

    Unaligned, rank 0 started its window while rank 1 was still building its sifter, and counted that work as
    another process's (a smoke sst2 proxy job read other_cpu_fraction 0.55: rank 1's first py-cpuinfo probe, 1.1 s,
    ran before rank 1's own window opened and inside rank 0's)."""
    if world.distributed:
        dist.barrier()
    return machine.OtherCpuMeter().start()


def stop_cpu_meter(meter: machine.OtherCpuMeter, world: World) -> tuple[float, float]:
    """(other processes' CPU seconds, per second of wall time) since start_cpu_meter, the sibling ranks' not counted.
    A collective: every rank calls it."""
    return meter.stop(sibling_cpu_seconds(meter.own_cpu_s(), world))


def sibling_cpu_seconds(own_cpu_s: float, world: World) -> float:
    """CPU seconds the other ranks on this machine used: a sibling rank is not contention."""
    if not world.distributed:
        return 0.0
    everyone = [None] * world.world_size
    dist.all_gather_object(everyone, (socket.gethostname(), own_cpu_s))
    host = socket.gethostname()
    return sum(seconds for rank, (name, seconds) in enumerate(everyone) if name == host and rank != world.rank)
