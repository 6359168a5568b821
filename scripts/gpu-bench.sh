#!/usr/bin/env bash
# Decode-step benchmark of full-width synthetic layers on a GPU, in two halves:
#
#   scripts/gpu-bench.sh build   on any machine with Go: dic, divm and the cuda test binary
#                                (cgo off) into build/bench/, packed as build/bench.tgz
#                                (and build/bench.txz, smaller, where xz is installed),
#                                and build/kernels.tgz: the kernel cache entries of earlier
#                                runs' archives (build/kernels*.tgz) this tree still uses
#   scripts/gpu-bench.sh run     on the GPU machine, from the repository root (unpack
#                                build/bench.tgz into build/ first): the instruction check
#                                of the three fixtures on the GPU (SKIP_CHECK=1 skips it),
#                                then for each model, `dic synth` writes the chosen
#                                full-width layers (random weights in the real formats),
#                                `dic compile --target h200` plans them, and `divm bench`
#                                times decode steps over the batch × context grid next to
#                                the device's copy bandwidth, once per numerics mode; the
#                                synthetic checkpoint is deleted after.
#
# Environment (run): MODELS (default "v4 v41"; none: only the check and the probe), NUMERICS (default "exact fast"), ROUTE
# (divm bench --route of this build's benches, default uniform: the random-weight routers
# send rows that share a context to a few experts; model keeps them), CHECK_RUN
# (the instruction check's -test.run pattern, default every exact and fast check),
# LAYERS_V4 (2-5), LAYERS_V41 (20-23),
# BATCH (1,64,256), CONTEXT (4096; CONTEXT_V4, CONTEXT_V41 per model), STEPS (10), BENCH_DIR (scratch for the checkpoints,
# default /tmp/deepinfer-bench), OUT (where reports go, default build/bench/out; an
# earlier run's files there are moved into OUT/previous-TIME first),
# PACK (a file: OUT packed into it as one .tgz at the end, for a call whose output folder
# brings back only a few files; run unpacks build/bench.txz or .tgz itself where
# build/bench/ is missing), BENCH_TIMEOUT (seconds per model, default 420), LONG_CONTEXT (a second, longer context
# timed in the fast mode only, for LONG_MODEL (default v4) at LONG_BATCH (default 1,64);
# LONG_TIMEOUT; LONG_MODEL may name both, "v4 v41"), PREFILL (a prompt length: one prompt prefilled in one chunk in the
# fast mode, its products' TFLOP/s, then the device's bf16/FP8 GEMM rate through torch,
# scripts/gemm-rate.py; PREFILL_TIMEOUT; PREFILL_FP8=1 prefills it again in the fp8 numerics
# mode), PEER=1 to time transformers' DeepSeek-V4
# (scripts/peer-transformers.py, one CSA and one HCA layer at PEER_CONTEXT, default 512;
# PEER_COMPILE=1 times it again under torch.compile, PEER_COMPILE_BATCH, PEER_COMPILE_TIMEOUT
# default 360 s: run 45d did not finish compiling batch 1 in 140 s; into OUT/peer.compile.txt;
# PEER_EXPERTS / PEER_COMPILE_EXPERTS, transformers' experts backend of each, default its own /
# grouped_mm; PEER_COMPILE_MODE regional (default: the modules without the cache compiled one
# by one, the rest eager) or model (the whole decode step: recompiles every step, run 46b)),
# CHECK_TIMEOUT (seconds a check test may take, default 900: the first compiles every
# unit without a kernel cache), CHECK_ENV='SET;SET' runs the check once with each set of assignments (an empty set: the
# environment as it is; e.g. CHECK_ENV=';DEEPINFER_CUDA_SUM4=0' as it is, then with
# fast_sum in place of fast_sum4),
# GRAPHS_COMPARE=1 times the fast mode again with --graphs=false (first context only),
# ENV_COMPARE='VAR=VALUE ...' times it again with those variables set (first context, or CMP_CONTEXT,
# the batch sizes CMP_BATCH if set; in the numerics mode CMP_NUMERICS, default fast, its
# reports still named $m.fast.cmp*; the summary sets each one's step medians against the
# main run's, point by point, scripts/cmp-steps.py;
# and the PREFILL prompt unless PREFILL_COMPARE=0; several sets separated by ';' each
# time it again, the prefill with the first set only),
# BASE_BIN=DIR times it again with another build's divm (DIR: that build's bench
# directory, e.g. build/base/bench from its bench.tgz unpacked into build/base; its dic
# plans where DIR has one, else this build's; first context, CMP_BATCH, in the numerics
# mode CMP_NUMERICS (default fast) with the flags BASE_FLAGS (default --route ROUTE;
# BASE_FLAGS= for a build older than --route); the report $m.fast.base.bench.json; and
# the PREFILL prompt unless PREFILL_COMPARE=0, $m.prefill.base.txt),
# SAMPLE_COMPARE='--temperature 1 [--top-p 0.9] [--top-k 50]' times the fast mode again
# with every decode row sampled with those flags (first context, profiled; the report
# $m.fast.sample.bench.json),
# TRACE=1 runs divm run --trace (TRACE_MODEL, default v4; TRACE_BATCH, default 256, may
# list several; TRACE_TOKENS, TRACE_NUMERICS, TRACE_FLAGS; TRACE_PACKED, default 1, the
# DEEPINFER_CUDA_PACKED values to trace, "1 0" times packed and per-parameter uploads
# one after the other, the latter's files named .packed0) and prints its summary,
# NCU=REGEX times the matching kernels' hardware counters with Nsight Compute (NCU_MODEL,
# NCU_BATCH, NCU_CONTEXT, NCU_SKIP, NCU_COUNT, NCU_FLAGS: extra divm bench flags,
# NCU_ENV: sets of assignments, ';' between them, each profiled again into ncu2.txt, ...,
# NCU_ARGS: ncu's sections instead of the default ones, e.g. "--section InstructionStats
# --section SourceCounters"; NCU_SOURCE=1 keeps each report and exports its
# per-instruction page as ncu*.source.csv; the bench prefills its context first, and
# ncu collects only from the first decode step on (DEEPINFER_CUDA_PROFILE_DECODE=1 and
# --profile-from-start off; NCU_RANGE=all from the start, where a kernel the prefill also
# launches is profiled there unless NCU_SKIP skips those launches, as run 42c found:
# it profiled the 32-row prefill chunks of fast_moe_up_fp4_rega, csa_attn_kdec and
# csa_index_score_words instead of the decode step's),
# TILES=1 runs BenchmarkFP4Tiles after the check (and the probe): the FP4 expert tiles
# alone on V4.1's and V4's shapes in both layouts, every form's sums checked against
# _rega's; then BenchmarkE4M3Gemm: the fp8 mode's e4m3 product forms alone on V4.1's
# FP8 products, their outputs checked against _e4m3n's, beside the fast mode's wgmma
# forms; then BenchmarkGemvOne: V4.1's one-row FP8 products alone, each one's rate
# (OUT/tiles.txt; TILES_TIMEOUT, default 260; TILES_BENCH, the -test.bench pattern,
# default 'FP4Tiles|E4M3Gemm|GemvOne'; the summary gives each step's fastest
# form and its ratio to the step's baseline),
# PROBE=1 runs BenchmarkFP4ReadProbe and BenchmarkFP4ReadProbeBulk after the check (the
# FP4 tiles' reads without their arithmetic in the row and a tiled layout, by bulk copies
# into shared memory, a stream's and the copy's rates; OUT/probe.txt; PROBE_TIMEOUT,
# default 150),
# SASS=REGEX lists the matching kernels' machine code (cuobjdump) into OUT/sass.txt,
# SAVE_KERNELS=1 packs the kernel cache entries this run compiled (the units changed
# since the LOAD_KERNELS archives, or every unit without them) into OUT/kernels.tgz (over
# 15 MiB, as its parts OUT/kernels.tgz.00, .01, ...: keep them as build/kernelsNAME.tgz.00,
# .01, ..., which `build` joins into build/kernelsNAME.tgz), and
# LOAD_KERNELS='FILE ...' unpacks such files (.tgz, or .txz from gather), in order, before the run (a fresh machine
# then compiles only the units changed since; an older full archive plus the later
# deltas rebuild the cache).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=build/bench

build() {
	mkdir -p "$bin"
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$bin/" ./cmd/dic ./cmd/divm
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$bin/cuda.test" ./targets/cuda
	tok=$(bash scripts/fetch-tokenizer.sh | tail -1) # the V4.1 fixtures' Engram token map needs it
	mkdir -p "$bin/tokenizer"
	cp "$tok"/tokenizer.json "$tok"/tokenizer_config.json "$bin/tokenizer/"
	# the kernel units' cache keys on the H200 (sm_90a, NVRTC 13.0): run checks them
	go run ./tools/kernelkeys -arch "${KEYS_ARCH:-sm_90a}" -compiler "${KEYS_COMPILER:-nvrtc 13.0}" > "$bin/kernel-keys.txt"
	tar czf build/bench.tgz -C build bench/dic bench/divm bench/cuda.test bench/tokenizer bench/kernel-keys.txt # one file to carry
	echo "built: $(ls "$bin" | tr '\n' ' ')(and build/bench.tgz, $(du -h build/bench.tgz | cut -f1))"
	# the same, smaller (xz), for a call whose carried files must stay under a limit:
	# unpack it there with python3 -c "import tarfile; tarfile.open('build/bench.txz','r:xz').extractall('build')"
	# (-9e: its 64 MiB window spans dic and divm, which share most of their code: about
	# 12 MiB against 20 at xz's default)
	if command -v xz >/dev/null; then
		tar cf - -C build bench/dic bench/divm bench/cuda.test bench/tokenizer bench/kernel-keys.txt |
			xz -9e -T2 >build/bench.txz
		echo "and build/bench.txz, $(du -h build/bench.txz | cut -f1)"
	fi
	gather
}

# gather: the entries of earlier runs' kernel archives (build/kernels*.tgz, from
# SAVE_KERNELS) whose keys this tree's units still have, packed as build/kernels.tgz:
# carry it and set LOAD_KERNELS=build/kernels.tgz, and the GPU compiles only the rest
# (build/kernels.txz where xz is installed: the same entries, smaller).
gather() {
	local tmp unit key found=0 total=0 missing=""
	tmp=$(mktemp -d)
	local part
	for part in build/kernels*.tgz.00; do
		# a split archive (SAVE_KERNELS' parts, kept as build/kernelsNAME.tgz.00, .01, ...)
		[ -f "$part" ] && cat "${part%.00}".[0-9][0-9] > "${part%.00}"
	done
	for kf in build/kernels*.tgz; do
		[ -f "$kf" ] && [ "$kf" != build/kernels.tgz ] && tar xzf "$kf" -C "$tmp" 2>/dev/null
	done
	mkdir -p "$tmp/keep"
	while read -r unit key; do
		total=$((total + 1))
		if [ -f "$tmp/$key.bin" ]; then
			found=$((found + 1))
			cp "$tmp/$key.bin" "$tmp/keep/"
			[ -f "$tmp/$key.log" ] && cp "$tmp/$key.log" "$tmp/keep/"
		else
			missing="$missing $unit"
		fi
	done < "$bin/kernel-keys.txt"
	rm -f build/kernels.tgz build/kernels.txz
	if [ "$found" -gt 0 ]; then
		(cd "$tmp/keep" && tar czf - .) > build/kernels.tgz
		echo "kernel cache: $found of $total units in earlier archives → build/kernels.tgz (to compile on the GPU:${missing:- none})"
		if command -v xz >/dev/null; then
			# the same, about half the size (run 60's 21 units: 18.5 MB gzip, 9.0 MB xz),
			# so that it fits a call's carry beside build/bench.txz and the tree:
			# LOAD_KERNELS=build/kernels.txz (unpacked there by python3's tarfile)
			(cd "$tmp/keep" && tar cf - .) | xz -9e -T2 >build/kernels.txz
			echo "and build/kernels.txz, $(du -h build/kernels.txz | cut -f1)"
		fi
	else
		echo "kernel cache: no unit of this tree in build/kernels*.tgz (all $total compile on the GPU)"
	fi
	rm -rf "$tmp"
}

# bench_models: the models MODELS names (none: not one)
bench_models() {
	local m=${MODELS:-v4 v41}
	[ "$m" = none ] || echo "$m"
}

run() {
	local work=${BENCH_DIR:-/tmp/deepinfer-bench} out=${OUT:-$bin/out}
	mkdir -p "$work" "$out"
	if [ -n "$(find "$out" -mindepth 1 -maxdepth 1 ! -name 'previous-*' -print -quit)" ]; then
		# an earlier run's reports would be read as this run's (its check.txt where this
		# run skips the check, reports of models this run does not time): kept, moved aside
		local prev
		prev="$out/previous-$(date +%Y%m%dT%H%M%S)"
		mkdir -p "$prev"
		find "$out" -mindepth 1 -maxdepth 1 ! -name 'previous-*' -exec mv {} "$prev/" \;
		echo "OUT held an earlier run's files: moved into $prev"
	fi
	export DEEPINFER_KERNEL_CACHE=${DEEPINFER_KERNEL_CACHE:-$work/kernels}
	mkdir -p "$DEEPINFER_KERNEL_CACHE"
	local kf
	for kf in ${LOAD_KERNELS:-}; do
		# compiled units of earlier runs (unchanged units load, changed ones compile)
		if [ -f "$kf" ]; then
			untar "$kf" "$DEEPINFER_KERNEL_CACHE"
		else
			echo "LOAD_KERNELS: no file $kf" >&2
		fi
	done
	# what this run compiles is newer than this mark (the archives keep their entries' times)
	touch "$work/.kernels-mark"
	if [ -f "$bin/kernel-keys.txt" ]; then
		# (the keys of the H200's compiler: another one compiles every unit)
		local unit key compile=""
		while read -r unit key; do
			[ -f "$DEEPINFER_KERNEL_CACHE/$key.bin" ] || compile="$compile $unit"
		done < "$bin/kernel-keys.txt"
		echo "kernel units to compile:${compile:- none}"
	fi
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$out/gpu.txt"
	if [ -z "${SKIP_CHECK:-}" ]; then
		# the kernels first: every instruction of the three fixtures against the cpu target
		echo "==== instruction check on the GPU"
		# (each top-level test in a process of its own: a kernel's fault — an illegal address
		# is sticky for the process's CUDA context — then fails its test alone; a pattern
		# naming subtests runs as one process)
		local pat=${CHECK_RUN:-TestInstructionsMatchCPU|TestFastInstructionsNearCPU} tests tn
		tests=$pat
		if [[ $pat != */* ]]; then
			tests=$(cd targets/cuda && "../../$bin/cuda.test" -test.list "$pat" 2>/dev/null | grep '^Test' | sed 's/.*/^&$/')
		fi
		[ -n "$tests" ] || echo "CHECK_RUN=$pat matches no test of cuda.test"
		# CHECK_ENV: sets of assignments separated by ';', the tests run once with each
		# (an empty set: as the environment is), e.g. ';DEEPINFER_CUDA_SUM4=0'
		local csets cset
		IFS=';' read -ra csets <<<"${CHECK_ENV:-}"
		[ ${#csets[@]} -gt 0 ] || csets=("")
		[[ ${CHECK_ENV:-} == *';' ]] && csets+=("")
		for cset in "${csets[@]}"; do
			echo "==== check with: ${cset:-the environment as it is}"
			for tn in $tests; do
				(cd targets/cuda && env $cset DEEPINFER_TOKENIZER_DIR=$PWD/../../$bin/tokenizer timeout "${CHECK_TIMEOUT:-900}" "../../$bin/cuda.test" -test.run "$tn" -device gpu -test.v 2>&1 ||
					echo "FAIL: $tn (exit status $?; 124: past CHECK_TIMEOUT)")
			done
		done | tee "$out/check.txt" | grep -E "^==== check with|every instruction|relative error|^(--- |ok|FAIL|PASS)"
	fi
	if [ -n "${PROBE:-}" ]; then
		# the FP4 tiles' reads without their arithmetic (bench.cu read_probe): the memory's
		# rate for their pattern beside a stream's and the copy's (BenchmarkFP4ReadProbe)
		echo "==== read probe (BenchmarkFP4ReadProbe)"
		(cd targets/cuda && timeout "${PROBE_TIMEOUT:-150}" "../../$bin/cuda.test" -test.run '^$' -test.bench FP4ReadProbe -test.benchtime 1x -test.v -device gpu 2>&1) |
			tee "$out/probe.txt" | grep -E "GB/s|^(ok|FAIL|PASS)"
	fi
	if [ -n "${TILES:-}" ]; then
		# the FP4 expert tiles alone on V4.1's and V4's shapes, the row layout's _rega
		# against the tiled layout's _regb, _regbd and _regt, their sums checked bit for bit
		# (BenchmarkFP4Tiles; no checkpoint)
		echo "==== FP4 tiles alone (BenchmarkFP4Tiles), the fp8 mode's e4m3 products (BenchmarkE4M3Gemm), the one-row FP8 products (BenchmarkGemvOne)"
		(cd targets/cuda && timeout "${TILES_TIMEOUT:-260}" "../../$bin/cuda.test" -test.run '^$' -test.bench "${TILES_BENCH:-FP4Tiles|E4M3Gemm|GemvOne}" -test.benchtime 1x -test.v -device gpu 2>&1) |
			tee "$out/tiles.txt" | grep -E "fp4 tiles:|e4m3 gemm:|gemv one:|^(ok|FAIL|PASS|---)|tilebench|gemmbench"
	fi
	local m cfg layers ctx
	for m in $(bench_models); do
		case $m in
		v4) cfg=testdata/deepseek-v4-flash layers=${LAYERS_V4:-2-5} ctx=${CONTEXT_V4:-${CONTEXT:-4096}} ;;
		v41) cfg=testdata/deepseek-v4.1-flash layers=${LAYERS_V41:-20-23} ctx=${CONTEXT_V41:-${CONTEXT:-4096}} ;;
		*) echo "unknown model $m" >&2; return 2 ;;
		esac
		local ck=$work/$m
		rm -rf "$ck"
		echo "==== $m: dic synth --layers $layers"
		"$bin/dic" synth --model "$cfg" --layers "$layers" --out "$ck" 2>&1 | tee "$out/$m.synth.txt" | grep -v "^\s" 
		"$bin/dic" compile --model "$ck" --target h200 -o "$ck.dip" | tee "$out/$m.compile.txt"
		local num
		for num in ${NUMERICS:-exact fast}; do
			echo "==== $m: divm bench --numerics $num"
			timeout "${BENCH_TIMEOUT:-420}" "$bin/divm" bench "$ck.dip" --model "$ck" --route "${ROUTE:-uniform}" --batch "${BATCH:-1,64,256}" \
				--context "$ctx" --steps "${STEPS:-10}" --warmup "${WARMUP:-3}" --profile-steps "${PROFILE_STEPS:-3}" \
				--numerics "$num" --out "$out/$m.$num.bench.json" 2>&1 | tee "$out/$m.$num.bench.txt"
			echo "exit status: ${PIPESTATUS[0]}" | tee -a "$out/$m.$num.bench.txt"
		done
		if [ -n "${GRAPHS_COMPARE:-}" ]; then
			# the fast mode once more without CUDA graphs, at the first context (the same run)
			echo "==== $m: divm bench --numerics fast --graphs=false"
			timeout "${BENCH_TIMEOUT:-420}" "$bin/divm" bench "$ck.dip" --model "$ck" --route "${ROUTE:-uniform}" --batch "${BATCH:-1,64,256}" \
				--context "${ctx%%,*}" --steps "${STEPS:-10}" --warmup "${WARMUP:-3}" --profile-steps 0 \
				--numerics fast --graphs=false --out "$out/$m.fast.nographs.bench.json" 2>&1 | tee "$out/$m.fast.nographs.bench.txt"
			echo "exit status: ${PIPESTATUS[0]}" | tee -a "$out/$m.fast.nographs.bench.txt"
		fi
		if [ -n "${ENV_COMPARE:-}" ]; then
			# the fast mode once more with each of ENV_COMPARE's sets of assignments (e.g.
			# DEEPINFER_CUDA_FP4_TILES=0; sets separated by ';'), at the first context,
			# profiled (the same run): reports $m.fast.cmp.bench.json, cmp2, cmp3, ...
			local sets set n=0 tag
			IFS=';' read -ra sets <<<"$ENV_COMPARE"
			for set in "${sets[@]}"; do
				n=$((n + 1))
				tag=cmp
				[ $n -gt 1 ] && tag=cmp$n
				echo "==== $m: $set divm bench --numerics ${CMP_NUMERICS:-fast}"
				echo "$set" >"$out/$m.fast.$tag.set" # (the summary's label: cmp-steps.py)
				env $set timeout "${BENCH_TIMEOUT:-420}" "$bin/divm" bench "$ck.dip" --model "$ck" --route "${ROUTE:-uniform}" --batch "${CMP_BATCH:-${BATCH:-1,64,256}}" \
					--context "${CMP_CONTEXT:-${ctx%%,*}}" --steps "${STEPS:-10}" --warmup "${WARMUP:-3}" --profile-steps "${PROFILE_STEPS:-3}" \
					--numerics "${CMP_NUMERICS:-fast}" --out "$out/$m.fast.$tag.bench.json" 2>&1 | tee "$out/$m.fast.$tag.bench.txt"
				echo "exit status: ${PIPESTATUS[0]}" | tee -a "$out/$m.fast.$tag.bench.txt"
			done
		fi
		if [ -n "${BASE_BIN:-}" ]; then
			# the fast mode once more with another build's dic and divm (BASE_BIN: its
			# bench directory, unpacked from that build's bench.tgz; e.g. the commit before
			# a change to code every kernel shares, which no env switch can turn off), at
			# the first context and CMP_BATCH, profiled (the same run, the same checkpoint)
			echo "==== $m: $BASE_BIN/divm bench --numerics ${CMP_NUMERICS:-fast} ${BASE_FLAGS---route ${ROUTE:-uniform}} (another build)"
			# (its own dic where it has one, else this build's: the same plan format)
			local bdic="$BASE_BIN/dic"
			[ -x "$bdic" ] || bdic="$bin/dic"
			"$bdic" compile --model "$ck" --target h200 -o "$ck.base.dip" >/dev/null || echo "BASE_BIN: $bdic compile failed"
			# shellcheck disable=SC2086 # BASE_FLAGS is a list of flags
			timeout "${BENCH_TIMEOUT:-420}" "$BASE_BIN/divm" bench "$ck.base.dip" --model "$ck" --batch "${CMP_BATCH:-${BATCH:-1,64,256}}" \
				--context "${ctx%%,*}" --steps "${STEPS:-10}" --warmup "${WARMUP:-3}" --profile-steps "${PROFILE_STEPS:-3}" \
				--numerics "${CMP_NUMERICS:-fast}" ${BASE_FLAGS---route ${ROUTE:-uniform}} --out "$out/$m.fast.base.bench.json" 2>&1 | tee "$out/$m.fast.base.bench.txt"
			echo "exit status: ${PIPESTATUS[0]}" | tee -a "$out/$m.fast.base.bench.txt"
		fi
		if [ -n "${SAMPLE_COMPARE:-}" ]; then
			# the fast mode once more with the decode rows sampled (the same run)
			echo "==== $m: divm bench --numerics fast $SAMPLE_COMPARE"
			# shellcheck disable=SC2086 # SAMPLE_COMPARE is a list of flags
			timeout "${BENCH_TIMEOUT:-420}" "$bin/divm" bench "$ck.dip" --model "$ck" --route "${ROUTE:-uniform}" --batch "${BATCH:-1,64,256}" \
				--context "${ctx%%,*}" --steps "${STEPS:-10}" --warmup "${WARMUP:-3}" --profile-steps "${PROFILE_STEPS:-3}" \
				--numerics fast $SAMPLE_COMPARE --out "$out/$m.fast.sample.bench.json" 2>&1 | tee "$out/$m.fast.sample.bench.txt"
			echo "exit status: ${PIPESTATUS[0]}" | tee -a "$out/$m.fast.sample.bench.txt"
		fi
		if [ -n "${LONG_CONTEXT:-}" ] && [[ " ${LONG_MODEL:-v4} " == *" $m "* ]]; then
			# the long context, in the fast mode only (LONG_BATCH, default 1,64)
			echo "==== $m: divm bench --numerics fast --context $LONG_CONTEXT"
			timeout "${LONG_TIMEOUT:-150}" "$bin/divm" bench "$ck.dip" --model "$ck" --route "${ROUTE:-uniform}" --batch "${LONG_BATCH:-1,64}" \
				--context "$LONG_CONTEXT" --steps "${STEPS:-10}" --warmup "${WARMUP:-3}" --profile-steps "${PROFILE_STEPS:-3}" \
				--numerics fast --out "$out/$m.fast.long.bench.json" 2>&1 | tee "$out/$m.fast.long.bench.txt"
			echo "exit status: ${PIPESTATUS[0]}" | tee -a "$out/$m.fast.long.bench.txt"
		fi
		if [ -n "${PREFILL:-}" ]; then
			# prefill of one PREFILL-token prompt in one chunk, fast mode (its TFLOP/s of products)
			echo "==== $m: prefill of $PREFILL tokens"
			timeout "${PREFILL_TIMEOUT:-150}" "$bin/divm" bench "$ck.dip" --model "$ck" --route "${ROUTE:-uniform}" --batch 1 --context "$PREFILL" \
				--chunk "$PREFILL" --steps 1 --warmup 0 --profile-steps 0 --profile-prefill --numerics fast 2>&1 | tee "$out/$m.prefill.txt" | grep -E "prefill of|built|^  "
			if [ -n "${PREFILL_FP8:-}" ]; then
				# the same prompt in the fp8 numerics mode (V4.1's MXFP8 products on e4m3 wgmma)
				echo "==== $m: prefill of $PREFILL tokens, fp8 numerics"
				timeout "${PREFILL_TIMEOUT:-150}" "$bin/divm" bench "$ck.dip" --model "$ck" --route "${ROUTE:-uniform}" --batch 1 --context "$PREFILL" \
					--chunk "$PREFILL" --steps 1 --warmup 0 --profile-steps 0 --profile-prefill --numerics fp8 2>&1 | tee "$out/$m.prefill.fp8.txt" | grep -E "prefill of|built|^  "
			fi
			if [ -n "${ENV_COMPARE:-}" ] && [ "${PREFILL_COMPARE:-1}" != 0 ]; then
				# the first set of ENV_COMPARE only (PREFILL_COMPARE=0: none)
				local first=${ENV_COMPARE%%;*}
				echo "==== $m: $first prefill of $PREFILL tokens"
				env $first timeout "${PREFILL_TIMEOUT:-150}" "$bin/divm" bench "$ck.dip" --model "$ck" --route "${ROUTE:-uniform}" --batch 1 --context "$PREFILL" \
					--chunk "$PREFILL" --steps 1 --warmup 0 --profile-steps 0 --profile-prefill --numerics fast 2>&1 | tee "$out/$m.prefill.cmp.txt" | grep -E "prefill of|built|^  "
			fi
			if [ -n "${BASE_BIN:-}" ] && [ "${PREFILL_COMPARE:-1}" != 0 ]; then
				# the same prefill with BASE_BIN's divm (its plan from the bench section)
				echo "==== $m: $BASE_BIN/divm prefill of $PREFILL tokens (another build)"
				timeout "${PREFILL_TIMEOUT:-150}" "$BASE_BIN/divm" bench "$ck.base.dip" --model "$ck" --batch 1 --context "$PREFILL" \
					--chunk "$PREFILL" --steps 1 --warmup 0 --profile-steps 0 --profile-prefill --numerics fast 2>&1 | tee "$out/$m.prefill.base.txt" | grep -E "prefill of|built|^  "
			fi
		fi
		if [ -n "${TRACE:-}" ] && [[ " ${TRACE_MODEL:-v4} " == *" $m "* ]]; then
			# divm run with the engine's async scheduler and CUDA graphs, TRACE_BATCH
			# identical requests (default 256) of a short prompt decoding TRACE_TOKENS tokens,
			# the trace's summary: the device's idle gaps between steps and the host time
			local tb pk f
			for tb in ${TRACE_BATCH:-256}; do
				for pk in ${TRACE_PACKED:-1}; do
					f="$out/$m.trace.b$tb"
					[ "$pk" = 0 ] && f="$f.packed0"
					echo "==== $m: divm run --repeat $tb --trace (numerics ${TRACE_NUMERICS:-fast}, DEEPINFER_CUDA_PACKED=$pk)"
					DEEPINFER_CUDA_PACKED=$pk DEEPINFER_NUMERICS=${TRACE_NUMERICS:-fast} timeout "${TRACE_TIMEOUT:-120}" "$bin/divm" run "$ck.dip" --model "$ck" \
						--prompt-ids 1,2,3,4,5,6,7,8 --repeat "$tb" --max-tokens "${TRACE_TOKENS:-64}" --ignore-eos \
						--trace "$f.json" ${TRACE_FLAGS:-} > "$f.log" 2>&1
					echo "exit status: $?"
					grep -iE "^trace|scheduler|idle|divm|cuda:" "$f.log" | cut -c1-400 | tee "$f.txt"
				done
			done
		fi
		if [ -n "${NCU:-}" ] && [ "$m" = "${NCU_MODEL:-v4}" ]; then
			# hardware counters of the kernels matching NCU (a regular expression), at
			# NCU_BATCH (default 256), fast mode, one step without graphs; once more with
			# each of NCU_ENV's sets of assignments (';' between sets) into ncu2.txt, ...
			local nsets nset nn=0 nf
			IFS=';' read -ra nsets <<<";${NCU_ENV:-}"
			[ -z "${NCU_ENV:-}" ] && nsets=("")
			for nset in "${nsets[@]}"; do
				nn=$((nn + 1))
				nf=ncu.txt
				[ $nn -gt 1 ] && nf=ncu$nn.txt
				echo "==== $m: ${nset:+$nset }ncu -k regex:$NCU (batch ${NCU_BATCH:-256}) into $nf"
				# (NCU_SOURCE=1: the report kept as ${nf%.txt}.ncu-rep, its pages printed into
				# $nf, and its per-instruction page — each SASS instruction's executions and
				# stall samples, where the sections collected them — as ${nf%.txt}.source.csv)
				local rep=() rng=(--profile-from-start off) renv=DEEPINFER_CUDA_PROFILE_DECODE=1
				[ -n "${NCU_SOURCE:-}" ] && rep=(-o "$out/${nf%.txt}" -f)
				# (NCU_RANGE=all: from the process's start, the prefill's launches included)
				[ "${NCU_RANGE:-decode}" = all ] && rng=() renv=DEEPINFER_CUDA_PROFILE_DECODE=0
				env $renv $nset timeout "${NCU_TIMEOUT:-240}" ncu --clock-control none -k "regex:$NCU" ${rng[@]+"${rng[@]}"} --launch-skip "${NCU_SKIP:-0}" \
					--launch-count "${NCU_COUNT:-4}" ${rep[@]+"${rep[@]}"} ${NCU_ARGS:---section SpeedOfLight --section Occupancy --section LaunchStats \
					--section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats} \
					"$bin/divm" bench "$ck.dip" --model "$ck" --route "${ROUTE:-uniform}" --batch "${NCU_BATCH:-256}" --context "${NCU_CONTEXT:-4096}" \
					--steps 1 --warmup 0 --profile-steps 0 --numerics fast ${NCU_FLAGS:-} > "$out/$nf" 2>&1
				echo "ncu exit status: $?"
				if [ -n "${NCU_SOURCE:-}" ] && [ -f "$out/${nf%.txt}.ncu-rep" ]; then
					ncu -i "$out/${nf%.txt}.ncu-rep" --page details >> "$out/$nf" 2>&1
					ncu -i "$out/${nf%.txt}.ncu-rep" --page source --csv --print-source sass > "$out/${nf%.txt}.source.csv" 2>&1 ||
						echo "ncu: no source page (see ${nf%.txt}.source.csv)"
				fi
				grep -E "^  [a-z_0-9]+|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Compute \(SM\) Throughput|L2 Cache Throughput|L1/TEX Hit|Warp Cycles Per Issued|Block Limit Registers" "$out/$nf" | head -120
			done
		fi
		rm -rf "$ck"
	done
	if [ -n "${PREFILL:-}" ]; then
		# the yardstick: the device's dense GEMM rate through torch (cuBLAS), same run
		python3 scripts/gemm-rate.py --n 8192 2>&1 | tee "$out/gemm-rate.txt"
	fi
	if [ -n "${PTXAS:-}" ]; then
		# every kernel's registers, stack frame and spills, from a fresh compile
		echo "==== ptxas resource usage"
		"$bin/dic" compile --target h200 -o "$work/default.dip" >/dev/null
		DEEPINFER_NVRTC_OPTIONS=--ptxas-options=-v DEEPINFER_KERNEL_CACHE=$work/kernels-v "$bin/divm" run "$work/default.dip" --prompt-ids 1,2 --max-tokens 1 >/dev/null 2>&1
		cat "$work"/kernels-v/*.log > "$out/ptxas.txt" 2>/dev/null
		python3 - "$out/ptxas.txt" <<'PY'
import re, sys
txt = open(sys.argv[1]).read()
rows = []
for m in re.finditer(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", txt, re.S):
    name = m.group(1)
    seg = txt[m.start():m.end()]
    st = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", seg)
    rows.append((name, int(m.group(2)), st.groups() if st else ("?", "?", "?")))
print(f"{len(rows)} kernels; those with a stack frame or spills:")
for name, regs, (stack, ss, sl) in rows:
    if stack not in ("0", "?") or ss not in ("0", "?"):
        print(f"  {name}: {regs} registers, stack {stack} B, spill stores {ss} B, loads {sl} B")
PY
	fi
	if [ -n "${PEER:-}" ]; then
		echo "==== peer: transformers"
		timeout "${PEER_TIMEOUT:-150}" python3 scripts/peer-transformers.py --batch "${BATCH:-1,64,256}" --context "${PEER_CONTEXT:-512}" --steps "${STEPS:-10}" \
			${PEER_EXPERTS:+--experts "$PEER_EXPERTS"} 2>&1 | tee "$out/peer.txt" | grep -v Warning
		if [ -n "${PEER_COMPILE:-}" ]; then
			echo "==== peer: transformers under torch.compile"
			timeout "${PEER_COMPILE_TIMEOUT:-360}" python3 scripts/peer-transformers.py --compile "${PEER_COMPILE_MODE:-regional}" --batch "${PEER_COMPILE_BATCH:-${BATCH:-1,64,256}}" \
				--context "${PEER_CONTEXT:-512}" --steps "${STEPS:-10}" --experts "${PEER_COMPILE_EXPERTS:-grouped_mm}" 2>&1 | tee "$out/peer.compile.txt" | grep -v Warning
			echo "peer under torch.compile: exit status ${PIPESTATUS[0]} (124: its ${PEER_COMPILE_TIMEOUT:-360} s ran out)" | tee -a "$out/peer.compile.txt"
		fi
	fi
	if [ -n "${SASS:-}" ]; then
		# the machine code of the kernels whose names match SASS (a regular expression),
		# from the kernel cache's cubins: instructions a kernel, and the listing in OUT/sass.txt
		echo "==== SASS of /$SASS/"
		: > "$out/sass.txt"
		local f
		for f in "$DEEPINFER_KERNEL_CACHE"/*.bin; do
			cp "$f" "$work/unit.cubin" && cuobjdump -sass "$work/unit.cubin" 2>/dev/null |
				awk -v re="$SASS" '/Function : /{keep = ($3 ~ re)} keep' >> "$out/sass.txt"
		done
		awk '/Function : /{if (n) print name, n; name = $3; n = 0; next} /\/\*[0-9a-f]+\*\//{n++} END{if (n) print name, n}' "$out/sass.txt"
	fi
	if [ -n "${SAVE_KERNELS:-}" ]; then
		# only the entries this run compiled: small enough to come back, and the earlier
		# archives hold the rest
		(cd "$DEEPINFER_KERNEL_CACHE" && find . -type f -newer "$work/.kernels-mark" -print0 |
			tar czf "$out/kernels.tgz" --null -T -) 2>/dev/null
		echo "SAVE_KERNELS: $(tar tzf "$out/kernels.tgz" 2>/dev/null | wc -l) cache files, $(du -h "$out/kernels.tgz" | cut -f1)"
		if [ "$(stat -c %s "$out/kernels.tgz")" -gt $((15 << 20)) ]; then
			# (a lent machine returns files of at most 16 MB: every unit's entries are more,
			# run 49) in parts of 15 MiB, kernels.tgz.00, .01, ...; build joins them
			split -b 15m -d -a 2 "$out/kernels.tgz" "$out/kernels.tgz." && rm -f "$out/kernels.tgz"
			echo "SAVE_KERNELS: split into $(cd "$out" && echo kernels.tgz.[0-9][0-9])"
		fi
	fi
	echo "==== summary"
	for m in $(bench_models); do
		for num in ${NUMERICS:-exact fast}; do
			echo "--- $m, $num numerics"
			sed -n '/^copy bandwidth/,$p' "$out/$m.$num.bench.txt" 2>/dev/null | grep -v "^stepbench" | head -60
		done
		[ -f "$out/$m.fast.nographs.bench.txt" ] && echo "--- $m, fast numerics, no graphs" &&
			sed -n '/^copy bandwidth/,/^batch 1, context/p' "$out/$m.fast.nographs.bench.txt"
		local cf
		for cf in "$out/$m".fast.cmp*.bench.txt; do
			[ -f "$cf" ] && echo "--- $m, fast numerics, ENV_COMPARE: $(basename "$cf")" &&
				sed -n '/^copy bandwidth/,/^batch 1, context/p' "$cf"
		done
		# each ENV_COMPARE set's step medians against the main run's in the same numerics
		# mode, point by point (with DEEPINFER_CUDA_TWICE: the doubled kernel's cost)
		local main="$out/$m.${CMP_NUMERICS:-fast}.bench.json" pairs=()
		for cf in "$out/$m".fast.cmp*.bench.json; do
			[ -f "$cf" ] && pairs+=("$(cat "${cf%.bench.json}.set" 2>/dev/null || basename "$cf")" "$cf")
		done
		if [ -f "$main" ] && [ ${#pairs[@]} -gt 0 ]; then
			python3 scripts/cmp-steps.py "$main" "${pairs[@]}" || true
		fi
		[ -f "$out/$m.fast.sample.bench.txt" ] && echo "--- $m, fast numerics, sampled rows" &&
			sed -n '/^copy bandwidth/,/^batch 1, context/p' "$out/$m.fast.sample.bench.txt"
		[ -f "$out/$m.fast.long.bench.txt" ] && echo "--- $m, fast numerics, long context" &&
			sed -n '/^copy bandwidth/,/^batch 1, context/p' "$out/$m.fast.long.bench.txt"
	done
	# (what a run did not do has no file: the summary's lines are optional, not a failure)
	grep -h "prefill of one" "$out"/*.prefill.txt 2>/dev/null || true
	grep -h "gemm rate" "$out/gemm-rate.txt" 2>/dev/null || true
	grep -h ": .* bytes in .* ms" "$out/probe.txt" 2>/dev/null || true
	grep -h "peer summary" "$out/peer.txt" "$out/peer.compile.txt" 2>/dev/null || true
	grep -h "^trace\|scheduler\|idle" "$out"/*.trace.*.txt 2>/dev/null || true
	grep -h "every instruction\|^--- FAIL\|relative error" "$out/check.txt" 2>/dev/null || true
	# TILES: each bench step's fastest form against its baseline (the full lines: tiles.txt)
	[ -f "$out/tiles.txt" ] && tiles_best "$out/tiles.txt"
	true
}

# tiles_best FILE: for each step of the tiles.txt benches (lines "... KERNEL: MS ms (×R of
# BASE), ..."), the form with the least ratio to the step's baseline, one line a step
tiles_best() {
	awk '
	/ \(×[0-9.]+ of [a-z0-9_]+\)/ {
		split($0, lr, " \\(×")
		left = lr[1]; split(lr[2], rb, " of "); r = rb[1] + 0; base = rb[2]; sub(/\).*/, "", base)
		n = split(left, f, " "); ms = f[n - 1]; kern = f[n - 2]; sub(/:$/, "", kern)
		key = ""; for (i = 1; i <= n - 3; i++) key = key f[i] " "
		key = key base
		if (!(key in best) || r < best[key]) { best[key] = r; who[key] = kern; t[key] = ms }
		if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
	}
	END { for (i = 1; i <= nk; i++) { k = keys[i]; printf "%s: fastest %s ×%.3f (%s ms)\n", k, who[k], best[k], t[k] } }' "$1"
}

# untar FILE DIR: a .txz or .tgz archive unpacked into DIR (the GPU machine may lack xz:
# python3's tarfile reads the .txz)
untar() {
	case $1 in
	*.txz) python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$1" "$2" ;;
	*) tar xzf "$1" -C "$2" ;;
	esac
}

# unpack_bench: on a machine given build/bench.txz or build/bench.tgz (not build/bench/),
# unpack it first
unpack_bench() {
	[ -x "$bin/cuda.test" ] && return
	if [ -f build/bench.txz ]; then
		untar build/bench.txz build
	elif [ -f build/bench.tgz ]; then
		untar build/bench.tgz build
	fi
	[ -x "$bin/cuda.test" ] || { echo "no $bin/cuda.test: run scripts/gpu-bench.sh build first (and carry build/bench.txz)" >&2; exit 1; }
}

case ${1:-} in
build) build ;;
gather) bin=build/bench gather ;;
run)
	unpack_bench
	run
	# PACK=FILE: the whole of OUT as one archive (a call's output folder may bring back
	# only a few files: run 60b lost its V4.1 reports that way)
	# (written aside, then moved: PACK may lie inside OUT)
	if [ -n "${PACK:-}" ]; then
		mkdir -p "$(dirname "$PACK")"
		packed=$(mktemp)
		tar czf "$packed" -C "${OUT:-$bin/out}" . && mv "$packed" "$PACK" &&
			echo "packed ${OUT:-$bin/out} into $PACK ($(du -h "$PACK" | cut -f1))"
	fi
	;;
*) echo "usage: scripts/gpu-bench.sh build|gather|run" >&2; exit 2 ;;
esac
