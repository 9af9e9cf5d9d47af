#!/usr/bin/env bash
# Regenerates results/<SCALE>/: both table sweeps, then the report.
#   bash experiments/savings_table.sh cpu
# The store is results/<SCALE>/mlflow.db (override with SIFT_BENCH_STORE). Sweeps skip jobs that
# already FINISHED there, so an interrupted table resumes where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
scale="${1:?usage: experiments/savings_table.sh SCALE   (smoke | cpu | gpu)}"
out="results/$scale"
mkdir -p "$out"
store="${SIFT_BENCH_STORE:-sqlite:///$out/mlflow.db}"
python -m sift_bench +experiment=resnet_table "scale=$scale" "tracking.uri=$store" "${@:2}"
python -m sift_bench +experiment=bert_table "scale=$scale" "tracking.uri=$store" "${@:2}"
python -m sift_bench.report --tracking-uri "$store" --scale "$scale" --out "$out"
