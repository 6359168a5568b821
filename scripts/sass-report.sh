#!/usr/bin/env bash
# sass-report.sh: registers, stack, spills and SASS instruction counts of this tree's CUDA
# kernels, compiled here without a GPU (for sm_90a, the H200's target), so that a kernel
# change can be checked for spills and sized before device time is spent on it.
#
#   scripts/sass-report.sh [REGEX] [UNIT ...]
#
# REGEX picks the kernels reported (default: all); UNITs the translation units compiled
# (tensorcore, dense41, attention, ...; a unit compiled in parts names them all, or
# tensorcore.2 one part; default: every unit, under a minute each). The
# compiler is Debian's nvidia-cuda-toolkit (CUDA 12.4, non-free), fetched once with apt
# from the suite and component named below through this machine's own Debian mirror
# (nothing installed: the packages are unpacked under CUDA_LOCAL, default
# ~/.cache/deepinfer/cuda-12.4). The GPU machine compiles with NVRTC 13.0, whose register
# allocation can differ by a few registers: a spill or a count here is a prediction, not a
# measurement. The units' sources come from `go run ./tools/kernelkeys -src`, with
# the options NVRTC gets (targets/cuda/nvrtc.go: --fmad=false, C++17). SASS=1 also
# writes each reported kernel's listing to OUTDIR/KERNEL.sass (OUTDIR, default
# build/sass).
set -euo pipefail
cd "$(dirname "$0")/.."
re=${1:-.}
shift || true
units=("$@")
local_dir=${CUDA_LOCAL:-$HOME/.cache/deepinfer/cuda-12.4}
suite=trixie component=non-free
tk=nvidia-cuda-toolkit=12.4.131~12.4.1-2 dev=nvidia-cuda-dev=12.4.127~12.4.1-2
if [ ! -x "$local_dir/usr/bin/ptxas" ]; then
	echo "sass-report: fetching $tk and $dev (about 1 GB) into $local_dir" >&2
	mirror=$(grep -hoE '^(URIs:|deb) +[a-z]+://[^ ]+/debian/?' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -1 || true)
	if [ -z "$mirror" ]; then
		echo "sass-report: no Debian mirror in this machine's apt sources" >&2
		exit 1
	fi
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/lists/partial" "$tmp/archives/partial"
	printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: %s\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$mirror" "$suite" "$component" > "$tmp/cuda.sources"
	opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$tmp" -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache::Archives=$tmp/archives" -o "APT::Sandbox::User=root")
	apt-get "${opts[@]}" update >"$tmp/update.log" 2>&1 || { cat "$tmp/update.log" >&2; exit 1; }
	(cd "$tmp" && apt-get "${opts[@]}" download "$tk" "$dev" >"$tmp/download.log" 2>&1) || { cat "$tmp/download.log" >&2; exit 1; }
	mkdir -p "$local_dir"
	for f in "$tmp"/*.deb; do dpkg -x "$f" "$local_dir"; done
fi
export PATH=$local_dir/usr/lib/nvidia-cuda-toolkit/bin:$local_dir/usr/bin:$PATH
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
go run ./tools/kernelkeys -src "$src"
if [ ${#units[@]} -eq 0 ]; then
	for f in "$src"/*.cu; do units+=("$(basename "$f" .cu)"); done
fi
out=${OUTDIR:-build/sass}
[ -n "${SASS:-}" ] && mkdir -p "$out"
failed=0
printf '%-34s %5s %6s %7s %7s %6s\n' kernel regs stack spill-st spill-ld sass
# (a unit compiled in parts, source.go's parts: its name stands for every part)
expanded=()
for u in "${units[@]}"; do
	if [ ! -f "$src/$u.cu" ] && compgen -G "$src/$u.[0-9]*.cu" >/dev/null; then
		for f in "$src/$u".[0-9]*.cu; do expanded+=("$(basename "$f" .cu)"); done
	else
		expanded+=("$u")
	fi
done
units=("${expanded[@]}")
for u in "${units[@]}"; do
	if [ ! -f "$src/$u.cu" ]; then
		echo "sass-report: no unit $u (units: $(cd "$src" && ls | sed 's/\.cu$//' | tr '\n' ' '))" >&2
		exit 2
	fi
	# (--expt-relaxed-constexpr: NVRTC's -default-device makes the headers' unqualified
	# constexpr helpers device functions; nvcc needs this to call them)
	if ! nvcc -cubin -arch=sm_90a -std=c++17 --fmad=false --expt-relaxed-constexpr -I"$local_dir/usr/include" -diag-suppress 177,550 \
		-Xptxas -v -o "$src/$u.cubin" "$src/$u.cu" >"$src/$u.log" 2>&1; then
		echo "sass-report: unit $u did not compile:" >&2
		grep -iE "error" "$src/$u.log" | head -20 >&2
		failed=1
		continue
	fi
	python3 - "$src/$u.log" "$src/$u.cubin" "$re" "${SASS:+$out}" <<'PY'
import re, subprocess, sys
log, cubin, pick, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
txt = open(log).read()
# the listing of each kernel: cuobjdump's whole dump cut at its "Function : NAME" lines
dump = subprocess.run(["cuobjdump", "-sass", cubin], capture_output=True, text=True).stdout
listing, name = {}, None
for line in dump.splitlines(keepends=True):
    f = re.match(r"\s*Function : (\w+)", line)
    if f:
        name = f.group(1)
        listing[name] = []
    if name:
        listing[name].append(line)
for m in re.finditer(r"Compiling entry function '(\w+)'.*?Used (\d+) registers[^\n]*", txt, re.S):
    name = m.group(1)
    if not re.search(pick, name):
        continue
    seg = txt[m.start():m.end()]
    st = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", seg)
    stack, ss, sl = st.groups() if st else ("?", "?", "?")
    sass = "".join(listing.get(name, []))
    n = len(re.findall(r"/\*[0-9a-f]{4,}\*/", sass))
    if out:
        open(f"{out}/{name}.sass", "w").write(sass)
    print(f"{name:<34} {m.group(2):>5} {stack:>6} {ss:>7} {sl:>7} {n:>6}")
PY
done
exit $failed
