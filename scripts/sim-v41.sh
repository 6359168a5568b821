#!/usr/bin/env bash
# Reproduces the DeepSeek-V4.1-Flash simulations of docs/simulate.md: decode on 64 sm100
# GPUs (EP64, 256 requests per rank at 131,072 context), the same with DSpark speculation,
# and prefill on 4 GPUs with SWA bounded replay (compact, keep 140) on and off.
# Every figure printed is a prediction of the sm100 cost model, not a measurement.
#
#   scripts/sim-v41.sh [OUTDIR]     # plans, reports, traces and plots go to OUTDIR (default out/sim-v41)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out/sim-v41}"
mkdir -p "$out"
go build -o "$out/bin/" ./cmd/dic ./cmd/divm
dic="$out/bin/dic" divm="$out/bin/divm" model=testdata/deepseek-v4.1-flash

start=$(date +%s%N)
"$dic" compile --model "$model" --spec examples/deploy/v41-flash-decode-ep64.yaml -o "$out/decode.dip"
"$divm" simulate "$out/decode.dip" --workload examples/workloads/v41-decode-131k.yaml \
  --trace "$out/decode-trace.json" --plots "$out/decode" | tee "$out/decode.txt"
end=$(date +%s%N)
echo "decode: compile + simulate took $(( (end - start) / 1000000 )) ms of wall time"

"$divm" simulate "$out/decode.dip" --workload examples/workloads/v41-decode-131k-dspark.yaml | tee "$out/decode-dspark.txt"

for mode in compact off; do
  DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=$mode "$dic" compile --model "$model" \
    --spec examples/deploy/v41-flash-prefill-ep4.yaml -o "$out/prefill-$mode.dip"
  "$divm" simulate "$out/prefill-$mode.dip" --workload examples/workloads/v41-prefill-16k.yaml \
    --trace "$out/prefill-$mode-trace.json" --plots "$out/prefill-$mode" | tee "$out/prefill-$mode.txt"
done
