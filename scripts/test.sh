#!/usr/bin/env bash
# The project's test command: formatting, vet, and every test with the race detector.
# Go modules come through the Go module proxy; the tests need nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l $(find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== go vet"
go vet ./...
echo "== go test -race (fuzz targets run their seed corpora)"
# (the cuda package, the kernels on the emulated device under the race detector, and the
# vm package take about 5-6 minutes each on a 2-core machine, beside each other (the whole
# command 8.5-10 minutes): go test's default 10-minute limit a package is too close on a
# shared machine, so the limit is raised)
go test -race -count=1 -timeout 30m ./...
