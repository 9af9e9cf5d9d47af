#!/usr/bin/env bash
# Regenerates results/<SCALE>/: both table sweeps, then the report.
#   bash experiments/savings_table.sh cpu
#   bash experiments/savings_table.sh cpu tracking.start_before=2026-12-03T09:30   # a sitting that must end
# The store is results/<SCALE>/mlflow.db (override with SIFT_BENCH_STORE; the report folder with SIFT_BENCH_OUT).
# Sweeps skip jobs that already FINISHED there, so an interrupted table resumes where it stopped, on this machine
# or another kind: there the baseline is timed again first (tracking.baseline_per_machine), since the report
# measures each run's savings against the baseline of its own machine kind. Extra arguments go to both sweeps;
# with tracking.start_before no job starts after that time, so a sitting ends between jobs.
# A sweep that fails does not stop the other one or the report; the exit status says it failed.
# SIFT_BENCH_BUDGET=long runs the long-budget tables instead (+experiment=resnet_table_long, bert_table_long) into
# results/<SCALE>_long/.
set -uo pipefail
cd "$(dirname "$0")/.."
scale="${1:?usage: experiments/savings_table.sh SCALE   (smoke | cpu | gpu)}"
budget="${SIFT_BENCH_BUDGET:-}"
case "$budget" in
    "") suffix="" ;;
    long) suffix="_long" ;;
    *) echo "savings_table: SIFT_BENCH_BUDGET=$budget is not allowed: unset (the table) or long" >&2; exit 2 ;;
esac
out="${SIFT_BENCH_OUT:-results/$scale$suffix}"
mkdir -p "$out"
store="${SIFT_BENCH_STORE:-sqlite:///$out/mlflow.db}"
status=0
for sweep in "resnet_table$suffix" "bert_table$suffix"; do
    python -m sift_bench +experiment="$sweep" "scale=$scale" "tracking.uri=$store" "${@:2}" || {
        status=$?
        echo "savings_table: sweep $sweep stopped with exit status $status" >&2
    }
done
python -m sift_bench.report --tracking-uri "$store" --scale "$scale" --out "$out" || status=$?
exit "$status"
