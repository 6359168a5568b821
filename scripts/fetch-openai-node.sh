#!/usr/bin/env bash
# Installs OpenAI's official Node client (the npm package openai, pinned below) into a
# cache directory and prints the node_modules directory on stdout (the only thing it
# prints there; progress goes to stderr). The server's end-to-end test (e2e/serve_test.go)
# drives `divm serve` with it.
#
#   scripts/fetch-openai-node.sh                 # -> $HOME/.cache/deepinfer/openai-node-7.59.0/node_modules
#   DEEPINFER_OPENAI_NODE_CACHE=DIR scripts/fetch-openai-node.sh
#
# Idempotent: when the pinned version is installed it touches no network. npm checks the
# package against the registry's integrity hash.
set -euo pipefail

version="7.59.0"
dir="${DEEPINFER_OPENAI_NODE_CACHE:-${HOME:?HOME is not set}/.cache/deepinfer/openai-node-${version}}"

installed() {
  [ -f "$dir/node_modules/openai/package.json" ] &&
    grep -q "\"version\": \"${version}\"" "$dir/node_modules/openai/package.json"
}

if installed; then
  echo "$dir/node_modules"
  exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "fetch-openai-node: npm not found (install Node.js)" >&2; exit 1; }
mkdir -p "$dir"
# install next to the cache and rename into place, so a concurrent reader never sees half
work=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "fetch-openai-node: installing openai@${version}" >&2
if ! npm install --prefix "$work" "openai@${version}" --no-audit --no-fund --loglevel=error >&2; then
  echo "fetch-openai-node: npm install openai@${version} failed (is the npm registry reachable?)" >&2
  exit 1
fi
rm -rf "$dir/node_modules"
mv "$work/node_modules" "$dir/node_modules"
installed || { echo "fetch-openai-node: openai@${version} did not install" >&2; exit 1; }
echo "fetch-openai-node: ready in $dir" >&2
echo "$dir/node_modules"
