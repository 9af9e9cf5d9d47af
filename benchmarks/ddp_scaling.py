"""Training throughput at world size 1 and N under torchrun, sifted and baseline, and the sifter's communication cost.

Run:  python benchmarks/ddp_scaling.py [--ranks 2] [--task cifar10_resnet|sst2_bert|all]   (minutes on 2 CPU cores)

Each configuration is a real job of the CLI (`python -m sift_bench`, or `torchrun --nproc_per_node=N -m sift_bench`)
at scale=cpu on a training subset, into a throwaway sqlite store, from which it reads:
  samples/s   samples seen per second of train time (the run's train_time_s: evaluation apart),
  vs 1 rank   that throughput over the same sifter's at world size 1 (same machine, same minute),
  sync %      the sifter's collectives (the all-gathers of losses and counts) as a % of train time, which is
              also their share of an average step,
  other cpu   CPU of processes outside the job, in cores (above 0.05 the timing is suspect).
On a CPU machine the ranks share its cores (torchrun gives each rank one thread), so world size N measures what
splitting the cores into ranks costs or gains, not what N machines would give; on a GPU machine run it with
scale=gpu and --ranks = the GPUs.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[1]
SIZES = {  # one epoch of a training subset: a minute or so per job on 2 CPU cores
    "cifar10_resnet": ["task.data.train_subset=8192", "trainer.batch_size=256"],
    "sst2_bert": ["task.data.train_subset=2048", "trainer.batch_size=32"],
}
SIFTERS = {"baseline": ["sifter=none"], "sifted beta=1": ["sifter=relative_probabilistic", "sifter.beta_value=1"]}


def run_job(task: str, sifter: list[str], ranks: int, store: str, scale: str, folder: Path) -> dict:
    launcher = [sys.executable, "-m", "sift_bench"]
    if ranks > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
                    "-m", "sift_bench"]
    args = [*launcher, f"task={task}", f"scale={scale}", *SIZES[task], *sifter, "trainer.epochs=1",
            "trainer.progress=false", f"tracking.uri={store}", f"hydra.run.dir={folder}/outputs"]
    result = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=1800,
                            env={**os.environ, "SIFT_BENCH_CACHE_DIR": str(ROOT / ".cache" / "sift_bench"),
                                 # The jobs run in a temporary folder: the data folder must not be relative.
                                 "SIFT_BENCH_DATA_DIR": str(Path(os.environ.get("SIFT_BENCH_DATA_DIR",
                                                                                 ROOT.parent / "shared" / "data")).resolve())})
    if result.returncode != 0:
        sys.exit(f"ddp_scaling: {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    client = MlflowClient(store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0].data.metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="all", choices=["all", *SIZES])
    parser.add_argument("--ranks", type=int, default=2, help="the world size compared with 1")
    parser.add_argument("--scale", default="cpu")
    args = parser.parse_args()
    tasks = list(SIZES) if args.task == "all" else [args.task]
    print(f"{'task':<16}{'sifter':<15}{'ranks':>6}{'samples/s':>11}{'vs 1 rank':>11}{'accepted %':>12}"
          f"{'sync %':>8}{'other cpu':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        store = f"sqlite:///{folder / 'mlflow.db'}"
        for task in tasks:
            for name, sifter in SIFTERS.items():
                single = None
                for ranks in (1, args.ranks):
                    metrics = run_job(task, sifter, ranks, store, args.scale, folder)
                    throughput = metrics["samples_seen"] / metrics["train_time_s"]
                    single = single or throughput
                    sync = 100 * metrics.get("sift_sync_time_s", 0.0) / metrics["train_time_s"]
                    print(f"{task:<16}{name:<15}{ranks:>6}{throughput:>11.1f}{throughput / single:>10.3f}x"
                          f"{metrics['pct_accepted']:>12.1f}{sync:>8.2f}{metrics['other_cpu_fraction']:>11.3f}",
                          flush=True)


if __name__ == "__main__":
    main()
