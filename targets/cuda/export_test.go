package cuda

import "flag"

var partial = flag.Bool("partial", false, "let ops without a cuda kernel run as no-ops (the diff then stops at the first)")

// SetPartial applies -partial; diff_test.go calls it after flag.Parse.
func SetPartial() { allowUnbound = *partial }

// KernelRuns is how many times each kernel ran on an emulated runtime's device.
func KernelRuns(rt *Runtime) map[string]int { return rt.fake.kernelRuns() }

// SetTCWideWarps sets the wide output warps from which V4's tensor-core attention runs
// its wide kernels (attTCWideWarps) and returns a function that restores it.
func SetTCWideWarps(n int64) (restore func()) {
	old := attTCWideWarps
	attTCWideWarps = n
	return func() { attTCWideWarps = old }
}

// SetPoolRowsPerSeq sets the rows a sequence from which V4's compressor pools a (row,
// channel) a work item (attPoolRowsPerSeq) and returns a function that restores it.
func SetPoolRowsPerSeq(n int64) (restore func()) {
	old := attPoolRowsPerSeq
	attPoolRowsPerSeq = n
	return func() { attPoolRowsPerSeq = old }
}

// SetCSAWideLogits sets the wide logit items from which V4.1's fast attention runs the
// tiled csa_fast_logits (csaFastWideLogits) and returns a function that restores it.
func SetCSAWideLogits(n int64) (restore func()) {
	old := csaFastWideLogits
	csaFastWideLogits = n
	return func() { csaFastWideLogits = old }
}

// SetCSAWideOut sets the wide output items from which V4.1's fast attention runs the
// tiled csa_fast_out (csaFastWideItems) and returns a function that restores it.
func SetCSAWideOut(n int64) (restore func()) {
	old := csaFastWideItems
	csaFastWideItems = n
	return func() { csaFastWideItems = old }
}

// SetLongRows sets the rows a sequence above which V4.1's fast mode runs the router's
// and the mHC mixes' exact kernels (mklSplitRows) and returns a function that restores it.
func SetLongRows(n int64) (restore func()) {
	old := mklSplitRows
	mklSplitRows = n
	return func() { mklSplitRows = old }
}

// DriverStats is what the runtime asked of the emulated device's driver so far.
func DriverStats(rt *Runtime) FakeStats { return rt.fake.stats }

// SetEpilogueWithHook fuses bf16 roundings into their producers while a Hook is set
// too (epilogueWithHook) and returns a function that restores it.
func SetEpilogueWithHook(on bool) (restore func()) {
	old := epilogueWithHook
	epilogueWithHook = on
	return func() { epilogueWithHook = old }
}

// EpilogueProducers maps each instruction of the phase's program that stores a bf16
// rounding's values to that rounding's index.
func EpilogueProducers(rt *Runtime, phase string) map[int]int {
	m := map[int]int{}
	for i, c := range rt.progs[phase].calls {
		if c.step.Round {
			m[i] = c.roundFor
		}
	}
	return m
}

// SetFusedMinBlocks moves the step size from which V4.1's attention runs as
// its fused kernel by default (programs bound after the call).
func SetFusedMinBlocks(n int64) (restore func()) {
	old := csaFusedMinBlocks
	csaFusedMinBlocks = n
	return func() { csaFusedMinBlocks = old }
}

// SetReg8aRows moves the step sizes (lo, hi] whose V4 FP4 register tiles run as _reg8a
// by default (programs bound after the call).
func SetReg8aRows(lo, hi int64) (restore func()) {
	old := reg8aRows
	reg8aRows = [2]int64{lo, hi}
	return func() { reg8aRows = old }
}

// BenchColdBytes and ColdCopies expose the product benches' copies of the weights
// (gemmbench.go) to TestColdCopies.
const BenchColdBytes = benchColdBytes

func ColdCopies(bytes int64) (copies, launches int) { return coldCopies(bytes) }

// SetBenchCopies makes the product benches rotate through n copies of the weights
// (0: coldCopies' own count).
func SetBenchCopies(n int) (restore func()) {
	old := benchCopies
	benchCopies = n
	return func() { benchCopies = old }
}
