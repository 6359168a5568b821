#!/usr/bin/env bash
# Runs every fuzz target for a while (default 60s each): scripts/fuzz.sh [seconds]
# Minimization is capped, because shrinking a large seed (a plan, a checkpoint header)
# otherwise stalls the fuzzer for minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
for spec in \
  safetensors:FuzzParseHeader safetensors:FuzzOpen \
  tokenizer:FuzzEncode tokenizer:FuzzDecode \
  placement:FuzzReadLoads deploy:FuzzParse vm/batch:FuzzParseLine \
  api/openai:FuzzParseBody serve:FuzzHandler \
  compiler:FuzzParseConfig \
  plan:FuzzDecode plan:FuzzDecodeBody \
  ir:FuzzParse \
  quant:FuzzE4M3 quant:FuzzE2M1 quant:FuzzDequantFP4 quant:FuzzPackUnpack \
  engram:FuzzHash \
  grammars:FuzzRegex grammars:FuzzEBNF grammars:FuzzJSONSchema grammars:FuzzKeyScan \
  sim:FuzzWorkload targets/cost:FuzzReadTable; do
  pkg=${spec%%:*}; fn=${spec##*:}
  echo "== $pkg $fn (${secs}s)"
  go test "./$pkg/" -run='^$' -fuzz="^$fn\$" -fuzztime="${secs}s" -fuzzminimizetime=50x 2>&1 | tail -n 3
done
