#!/usr/bin/env bash
# Regenerates results/<SCALE>/: both table sweeps, then the report.
#   bash experiments/savings_table.sh cpu
# The store is results/<SCALE>/mlflow.db (override with SIFT_BENCH_STORE; the report folder with SIFT_BENCH_OUT). Sweeps skip jobs that
# already FINISHED there, so an interrupted table resumes where it stopped. A sweep whose task already has
# runs from another machine kind in the store is refused before it trains (tracking.require_same_machine);
# the other sweep still runs, so a sitting on either kind of machine adds to the task that kind holds.
set -uo pipefail
cd "$(dirname "$0")/.."
scale="${1:?usage: experiments/savings_table.sh SCALE   (smoke | cpu | gpu)}"
out="${SIFT_BENCH_OUT:-results/$scale}"
mkdir -p "$out"
store="${SIFT_BENCH_STORE:-sqlite:///$out/mlflow.db}"
status=0
for sweep in resnet_table bert_table; do
    python -m sift_bench +experiment="$sweep" "scale=$scale" "tracking.uri=$store" "${@:2}" || {
        status=$?
        echo "savings_table: sweep $sweep stopped with exit status $status" >&2
    }
done
python -m sift_bench.report --tracking-uri "$store" --scale "$scale" --out "$out" || status=$?
exit "$status"
