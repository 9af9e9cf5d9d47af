"""Two gloo ranks' other-CPU meters, for tests/test_ddp.py.

    torchrun --nproc_per_node=2 tests/ddp_meter_worker.py OUT.json

Rank 1 comes to its meter late, after BURN_BEFORE_S of CPU work of its own (as a rank building its sifter does);
inside the window both ranks work BURN_INSIDE_S. Every second of it is the job's: rank 0 writes what its meter
counted as other processes' CPU.
"""

import json
import sys
import time

from sift_bench import distributed

BURN_BEFORE_S, BURN_INSIDE_S = 2.0, 1.0


def burn(cpu_seconds: float) -> None:
    start = time.process_time()
    while time.process_time() - start < cpu_seconds:
        pass


world, _ = distributed.start("cpu")
if world.rank == 1:
    burn(BURN_BEFORE_S)
meter = distributed.start_cpu_meter(world)
burn(BURN_INSIDE_S)
other_cpu_s, other_cpu_fraction = distributed.stop_cpu_meter(meter, world)
if world.is_main:
    with open(sys.argv[1], "w") as out:
        json.dump({"other_cpu_s": other_cpu_s, "other_cpu_fraction": other_cpu_fraction,
                   "burn_before_s": BURN_BEFORE_S, "burn_inside_s": BURN_INSIDE_S}, out)
