#!/usr/bin/env bash
# GPU tests of the cuda target, in two halves:
#
#   scripts/gpu-test.sh build    on any machine with Go (no GPU, no CUDA needed): builds
#                                the test binaries and divm into build/gpu/ (cgo off: the
#                                CUDA libraries are loaded at run time), copies DeepSeek's
#                                tokenizer there for the V4.1 fixtures, and packs it all
#                                into build/gpu.tgz
#   scripts/gpu-test.sh run      on the GPU machine, from the repository root (reads
#                                build/gpu/ or build/gpu.tgz, and the repository's testdata/):
#                                needs an NVIDIA driver and the CUDA 13 NVRTC library
#                                (pip's nvidia-cuda-nvrtc wheel, or the toolkit)
#
# `run` prints each check's output and ends with a summary table; it exits non-zero if
# any check failed. The two `divm run`s time start-up with an empty and a warm cache. KERNEL_CACHE (default: a fresh directory under build/gpu) is the
# kernel cache it times start-up with.
set -uo pipefail
cd "$(dirname "$0")/.."
out=build/gpu

build() {
	mkdir -p "$out"
	export CGO_ENABLED=0
	go test -c -tags gpu -ldflags="-s -w" -o "$out/cuda.test" ./targets/cuda
	go test -c -ldflags="-s -w" -o "$out/vm.test" ./vm
	go build -ldflags="-s -w" -o "$out/" ./cmd/divm
	go run ./cmd/dic compile --target h200 -o "$out/default.h200.dip" # the embedded default model
	tok=$(bash scripts/fetch-tokenizer.sh | tail -1)
	mkdir -p "$out/tokenizer"
	cp "$tok"/tokenizer.json "$tok"/tokenizer_config.json "$out/tokenizer/"
	tar czf build/gpu.tgz -C build gpu # one file to copy to the GPU machine
	echo "built: $(ls "$out" | tr '\n' ' ')(and build/gpu.tgz, $(du -h build/gpu.tgz | cut -f1))"
}

declare -a names results
check() { # name dir command...: runs command in dir
	local name=$1 dir=$2
	shift 2
	echo "==== $name: (in $dir) $*"
	local t0=$SECONDS
	(cd "$dir" && "$@")
	local rc=$?
	names+=("$name")
	results+=("$([ $rc = 0 ] && echo PASS || echo "FAIL (exit $rc)") $((SECONDS - t0))s")
}

run() {
	[ -x "$out/cuda.test" ] || [ ! -f build/gpu.tgz ] || tar xzf build/gpu.tgz -C build
	[ -x "$out/cuda.test" ] || { echo "no $out/cuda.test: run scripts/gpu-test.sh build first" >&2; exit 2; }
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
	export DEEPINFER_TOKENIZER_DIR=$PWD/$out/tokenizer DEEPINFER_TOKENIZER_CACHE=$PWD/$out/tokenizer
	export DEEPINFER_KERNEL_CACHE=${KERNEL_CACHE:-$PWD/$out/kernel-cache}
	rm -rf "$DEEPINFER_KERNEL_CACHE"
	root=$PWD
	# kernel cache: the first start-up compiles, the second loads
	check "divm run, empty kernel cache" . "$out/divm" run "$out/default.h200.dip" --prompt "Hello, DeepInfer" --max-tokens 16
	check "divm run, warm kernel cache" . "$out/divm" run "$out/default.h200.dip" --prompt "Hello, DeepInfer" --max-tokens 16
	check "divm eval tiny-v41-dev2" . "$out/divm" eval --target h200 --model testdata/tiny-v41-dev2 \
		--cases testdata/tiny-v41-dev2/cases.json --out "$out/v41-dev2.safetensors"
	# every kernel builds for Blackwell too (NVRTC only: it cannot run here)
	check "kernels compile for sm_90a and sm_100a" targets/cuda "$root/$out/cuda.test" -test.run 'TestGPUCompileArchs' -test.v
	# instruction by instruction against the cpu target on the same plan
	check "every instruction vs cpu (fed the cpu's inputs)" targets/cuda "$root/$out/cuda.test" -test.run 'TestInstructionsMatchCPU' -device gpu -force -keepgoing -test.v
	check "every instruction vs cpu (free-running)" targets/cuda "$root/$out/cuda.test" -test.run 'TestInstructionsMatchCPU' -device gpu -keepgoing -test.v
	check "weights on the device vs the planner" targets/cuda "$root/$out/cuda.test" -test.run 'TestGPUWeightBytes' -test.v
	# the fixtures against DeepSeek's reference logits, and batching, on the GPU
	check "fixtures vs reference, continuous batching (V4, V4.1)" vm "$root/$out/vm.test" \
		-test.run 'TestFixtureLogits|TestContinuousBatch|TestFixtureV41|TestV41BatchedEqualsSolo' -target h200 -test.v
	# DSpark speculation (forced drafts, rollback) and batch-invariant mode on the device
	check "speculation and batch invariance (cuda runtime)" targets/cuda "$root/$out/cuda.test" -test.run 'TestDevice' -device gpu -test.v
	check "speculative == plain, batch invariance over 22 schedules" vm "$root/$out/vm.test" \
		-test.run 'TestSpeculativeGreedyEqualsPlain|TestBatchInvariance' -target h200 -test.v -test.timeout 20m
	check "cost of batch-invariant mode (medians of 3)" vm "$root/$out/vm.test" \
		-test.run '^$' -test.bench 'BatchInvariant' -test.count 3 -target h200
	echo
	echo "==== summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
	local fail=0
	for i in "${!names[@]}"; do
		printf '%-60s %s\n' "${names[$i]}" "${results[$i]}"
		[[ ${results[$i]} == PASS* ]] || fail=1
	done
	return $fail
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
	echo "usage: scripts/gpu-test.sh build|run" >&2
	exit 2
	;;
esac
