#!/usr/bin/env bash
# sass-lines.sh: one CUDA kernel's machine code attributed to its source lines, compiled
# here without a GPU in a few seconds (for sm_90a; Debian's CUDA 12.4, fetched once by
# scripts/sass-report.sh), to see where a kernel's instructions go before device time is
# spent on it.
#
#   scripts/sass-lines.sh KERNEL [TOP]
#
# The kernel's unit (from `go run ./tools/kernelkeys -src`) is compiled with every other
# kernel turned into an unused device function, so only KERNEL's code is generated (with
# the launch bounds in force where it is defined), with -lineinfo and the options NVRTC
# gets. It prints the registers and spills, the instruction count, the TOP (default 40)
# source lines by instruction count with their commonest opcodes, and the same by
# function; OUTDIR/KERNEL.lines.sass (OUTDIR default build/sass) keeps the listing with
# its line marks. A count is static: instructions in the code, not instructions
# executed (loops and branches are not weighed).
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=${1:?usage: scripts/sass-lines.sh KERNEL [TOP]}
top=${2:-40}
local_dir=${CUDA_LOCAL:-$HOME/.cache/deepinfer/cuda-12.4}
if [ ! -x "$local_dir/usr/bin/ptxas" ]; then
	# (sass-report.sh fetches the toolkit; a pattern that matches nothing compiles nothing)
	scripts/sass-report.sh '^$' basic >/dev/null
fi
export PATH=$local_dir/usr/lib/nvidia-cuda-toolkit/bin:$local_dir/usr/bin:$PATH
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
go run ./tools/kernelkeys -src "$src" >/dev/null
unit=$(grep -l "^KERNEL($kernel, " "$src"/*.cu | head -1 || true)
if [ -z "$unit" ]; then
	echo "sass-lines: no kernel $kernel in the units" >&2
	exit 2
fi
python3 - "$unit" "$kernel" "$src/one.cu" <<'PY'
import re, sys
unit, name, out = sys.argv[1:]
s = open(unit).read()
m = re.search(r"^KERNEL\(" + re.escape(name) + r", (\w+)\)", s, re.M)
args = m.group(1)
# the launch bounds in force at the kernel: the last KERNEL_BOUNDS definition before it
b = re.findall(r"^#define KERNEL_BOUNDS(.*)$", s[: m.start()], re.M)
bounds = b[-1].strip() if b else ""
# after the prelude's kernel macro (its last line ends without a continuation), every
# KERNEL becomes a device function that nothing calls
k = s.index("#define KERNEL(name, Args)", s.index("#define KERNEL_BOUNDS\n"))
e = s.index("\n\n", k)
red = (
    "\n#undef KERNEL\n#define KERNEL(name, Args) static __device__ void name##_body(const Args& a, long long GIDX, long long GSTRIDE); \\\n"
    "  static __device__ __forceinline__ void name##_body(const Args& a, long long GIDX, long long GSTRIDE)\n"
)
s = s[:e] + "\n" + red + s[e:]
s += '\nextern "C" __global__ void %s %s(const %s a) {\n  %s_body(a, (long long)blockIdx.x * blockDim.x + threadIdx.x, (long long)gridDim.x * blockDim.x);\n}\n' % (
    bounds, name, args, name)
open(out, "w").write(s)
PY
nvcc -cubin -arch=sm_90a -std=c++17 --fmad=false --expt-relaxed-constexpr -lineinfo -I"$local_dir/usr/include" -diag-suppress 177,550 \
	-Xptxas -v -o "$src/one.cubin" "$src/one.cu" >"$src/one.log" 2>&1 || { grep -iE "error" "$src/one.log" | head -20 >&2; exit 1; }
grep -A4 "entry function '$kernel'" "$src/one.log" | grep -E "Used|spill" | sed 's/^ptxas info *: //'
out=${OUTDIR:-build/sass}
mkdir -p "$out"
nvdisasm -g -c "$src/one.cubin" >"$out/$kernel.lines.sass"
python3 - "$out/$kernel.lines.sass" "$src/one.cu" "$top" <<'PY'
import collections, re, sys
listing, unit, top = sys.argv[1], sys.argv[2], int(sys.argv[3])
src = open(unit).read().split("\n")
cur, n = None, 0
lines, ops = collections.Counter(), collections.defaultdict(collections.Counter)
for l in open(listing):
    m = re.search(r'//## File "([^"]*)", line (\d+)', l)
    if m:
        cur = int(m.group(2)) if m.group(1).endswith("one.cu") else None
        continue
    m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?);", l)
    if m:
        op = re.sub(r"^@!?U?P\w+\s+", "", m.group(1)).split()[0]
        lines[cur] += 1
        ops[cur][op] += 1
        n += 1
def func(ln):
    for i in range(ln - 1, max(0, ln - 600), -1):
        if re.match(r"(DEVM|DEV|KERNEL|template|static|extern)\b", src[i]) and "(" in src[i]:
            return src[i].strip()[:72]
    return "?"
print(f"{n} instructions")
byf = collections.Counter()
for ln, c in lines.items():
    byf[func(ln) if ln else "(headers outside the unit)"] += c
print("\nby function:")
for f, c in byf.most_common(15):
    print(f"{c:7d}  {f}")
spills = collections.Counter()
for ln, o in ops.items():
    k = sum(c for op, c in o.items() if op.startswith(("STL", "LDL")))
    if k:
        spills[ln] += k
if spills:
    print("\nlocal-memory loads and stores (spills) by source line:")
    for ln, c in sorted(spills.items(), key=lambda x: -x[1])[:12]:
        text = src[ln - 1].strip()[:64] if ln else "(outside the unit)"
        print(f"{c:7d}  {ln or '-':>5}  {text}")
print(f"\nby source line (the unit's lines; the top {top}):")
for ln, c in lines.most_common(top):
    text = src[ln - 1].strip()[:64] if ln else "(outside the unit)"
    print(f"{c:7d}  {ln or '-':>5}  {text:<64}  " + " ".join(f"{o}:{k}" for o, k in ops[ln].most_common(4)))
PY
