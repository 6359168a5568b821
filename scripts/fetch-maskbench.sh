#!/usr/bin/env bash
# Fetches the full MaskBench data set (JSONSchemaBench, guidance-ai/jsonschemabench,
# maskbench/data: 11,306 schema files with test instances) at a pinned commit into
# DIR/maskbench/data, for `dic grammar bench --maskbench DIR/maskbench/data`. The data
# is not committed to this repository.
#
#   scripts/fetch-maskbench.sh DIR
#   MASKBENCH_GIT=<url or path of a git repository> scripts/fetch-maskbench.sh DIR
#
# MASKBENCH_GIT replaces the GitHub URL (a mirror, or a local clone or bare repository
# where GitHub is not reachable); it must hold the pinned commit. A local repository is
# read directly; files whose blobs it lacks (a partial mirror) are named and skipped.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: scripts/fetch-maskbench.sh DIR" >&2
  exit 2
fi
dir=$1
commit=ba103c73756198dd9b149ddc7db7867da7a077f6
src=${MASKBENCH_GIT:-https://github.com/guidance-ai/jsonschemabench.git}
if [ -d "$dir/maskbench/data" ] && [ "$(cat "$dir/.maskbench-commit" 2>/dev/null)" = "$commit" ]; then
  echo "fetch-maskbench: $dir/maskbench/data is there (commit $commit)" >&2
  echo "$dir/maskbench/data"
  exit 0
fi
mkdir -p "$dir"
rm -rf "$dir/maskbench"
if [ -d "$src" ] && gd=$(git -C "$src" rev-parse --git-dir 2>/dev/null); then
  # a local repository: read its object store directly
  case $gd in /*) ;; *) gd=$src/$gd ;; esac
  git --git-dir="$gd" cat-file -e "$commit^{commit}" || { echo "fetch-maskbench: $src has no commit $commit" >&2; exit 1; }
  if ! git --git-dir="$gd" archive "$commit" maskbench/data 2>/dev/null | tar -x -C "$dir" 2>/dev/null; then
    # a partial mirror lacks some blobs: take file by file and name the missing ones
    rm -rf "$dir/maskbench"
    missing=0
    while read -r _ _ sha path; do
      mkdir -p "$dir/$(dirname "$path")"
      if ! git --git-dir="$gd" cat-file blob "$sha" > "$dir/$path" 2>/dev/null; then
        rm -f "$dir/$path"
        echo "fetch-maskbench: $src lacks $path (blob $sha); skipped" >&2
        missing=$((missing + 1))
      fi
    done < <(git --git-dir="$gd" ls-tree -r "$commit" maskbench/data)
    echo "fetch-maskbench: $missing file(s) missing from $src" >&2
  fi
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  git init -q "$tmp/repo"
  if ! git -C "$tmp/repo" fetch -q --depth 1 "$src" "$commit" 2>/dev/null; then
    # servers that do not serve a commit by hash: fetch the branches and pick it
    git -C "$tmp/repo" fetch -q "$src" '+refs/heads/*:refs/remotes/src/*'
  fi
  git -C "$tmp/repo" cat-file -e "$commit^{commit}" || { echo "fetch-maskbench: $src has no commit $commit" >&2; exit 1; }
  git -C "$tmp/repo" archive "$commit" maskbench/data | tar -x -C "$dir"
fi
echo "$commit" > "$dir/.maskbench-commit"
n=$(find "$dir/maskbench/data" -name '*.json' | wc -l)
echo "fetch-maskbench: $n files in $dir/maskbench/data (commit $commit)" >&2
echo "$dir/maskbench/data"
