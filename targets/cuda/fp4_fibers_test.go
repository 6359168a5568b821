package cuda

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"deepinfer/ir"
)

// TestFP4DeviceCodeOnHostFibers runs the device branch of tensorcore_fp4.cu (the code
// NVRTC compiles, which the emulated device never runs) on the host: the sources built
// with DI_LANES, which calls testdata/fp4_fibers.h's stand-ins instead of inline PTX (a
// launch block's threads as fibers, one warp resumed as far ahead of the others as the
// barriers allow; the warp's mma and __any_sync and the block's __syncthreads as
// barriers; cp.async copies that clobber their destination when issued and land only
// when a wait_group requires them, each copy's alignment and source range checked), and
// testdata/fp4_fibers_main.cc's cases (tails of N and K, unaligned scale rows, one to
// four slices, more than 16 slots an expert). The pipelined tiles, the _reg tiles and
// the emulated loop (fp4_tiles, here fp4_ref) must write the same values bit for bit,
// the stand-in mma summing in the emulated loop's order. What only the GPU can check:
// that NVRTC accepts the PTX, the real mma's order, registers, speed.
func TestFP4DeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	src, err := fp4FiberSource()
	if err != nil {
		t.Fatal(err)
	}
	runOnFibers(t, "fp4_fibers", src, "-O1")
}

// runOnFibers compiles a fiber harness's translation unit with the host compiler (the
// device branch, DI_LANES) and runs it; its output must end in PASS.
func runOnFibers(t *testing.T, name, src, opt string) string {
	t.Helper()
	h, err := newHostCompiler()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cc, bin := filepath.Join(dir, name+".cc"), filepath.Join(dir, name)
	if err := os.WriteFile(cc, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := exec.Command(h.cxx, "-std=c++17", opt, "-w", "-ffp-contract=off", "-fno-fast-math", "-U_FORTIFY_SOURCE", "-DDI_LANES", cc, "-o", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("compiling the device branch with the fiber stand-ins: %v\n%s", err, firstLines(string(out), 30))
	}
	built := time.Now()
	out, err = exec.Command(bin).CombinedOutput()
	t.Logf("(compiled in %.1f s, ran in %.1f s)\n%s", built.Sub(start).Seconds(), time.Since(built).Seconds(), out)
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "PASS") {
		t.Fatalf("the device branch on host fibers: %v", err)
	}
	return string(out)
}

// fp4FiberSource is the harness's translation unit: lanes/lanes.h (NVRTC's types, as
// the simulated lanes of lanes_test.go have them), fp4_fibers.h, the headers,
// tensorcore.cu, tensorcore_fp4.cu, the emulated branch's fp4_tiles as fp4_ref, then
// fp4_fibers_main.cc.
func fp4FiberSource() (string, error) {
	types, err := os.ReadFile("testdata/lanes/lanes.h")
	if err != nil {
		return "", err
	}
	pre, err := os.ReadFile("testdata/fp4_fibers.h")
	if err != nil {
		return "", err
	}
	pre = append(types, pre...)
	main, err := os.ReadFile("testdata/fp4_fibers_main.cc")
	if err != nil {
		return "", err
	}
	head, _ := kernelFiles()
	fp4 := cuFile("tensorcore_fp4.cu")
	ref := regexp.MustCompile(`(?s)#ifdef DI_EMULATE\n(template <int NW, bool TL = false>\nDEVM void fp4_tiles\(const FastMoEArgs& a, i64 blocks\) \{.*?\n\})\n#else`).FindStringSubmatch(fp4)
	if ref == nil {
		return "", errors.New("fp4 fiber harness: the emulated fp4_tiles not found in tensorcore_fp4.cu")
	}
	e4 := regexp.MustCompile(`(?s)#ifdef DI_EMULATE\n// fp4_e4_ref:[^\n]*\n(template <int NW>\nDEVM void fp4_e4_ref\(const FastMoEArgs& a, i64 blocks\) \{.*?\n\})\n#else`).FindStringSubmatch(fp4)
	if e4 == nil {
		return "", errors.New("fp4 fiber harness: the emulated fp4_e4_ref not found in tensorcore_fp4.cu")
	}
	return string(pre) + head + cuFile("tensorcore.cu") + fp4 + "\n" + strings.Replace(ref[1], "fp4_tiles(", "fp4_ref(", 1) + "\n" + e4[1] + "\n" + string(main), nil
}

// TestTopKDeviceCodeOnHostFibers runs the device branch of V4.1's top-k (csa41.cu's
// csa_topk_blk and csa_kept_list_blk through csa_topk_probe: a launch block a row, the
// partitions in parallel, the warps' ballots and shuffles as barriers between fibers)
// against the serial csa_topk and csa_kept_list on arrays full of ties, NaNs and -inf
// (testdata/topk_fibers_main.cc): the whole array and the kept list, element for
// element. TestTorchTopKBlock checks the same kernel against the cpu's torchTopK.
func TestTopKDeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	// -O0: an optimizer may copy a __syncthreads call into both arms of a branch, which
	// the harness's barriers (each generation from one call site) would report
	runOnFibers(t, "topk_fibers", fiberUnit(t, "", "testdata/topk_fibers_main.cc", "csa41.cu"), "-O0")
}

// fiberUnit is a fiber harness's translation unit: pre, lanes/lanes.h (NVRTC's types),
// fp4_fibers.h (the fibers and stand-ins), the headers, the .cu files named, then the
// harness's main file.
func fiberUnit(t *testing.T, pre, main string, cus ...string) string {
	t.Helper()
	src := []byte(pre)
	for _, f := range []string{"testdata/lanes/lanes.h", "testdata/fp4_fibers.h"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	head, _ := kernelFiles()
	src = append(src, head...)
	for _, f := range cus {
		src = append(src, cuFile(f)...)
	}
	m, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	return string(append(src, m...))
}

// TestRopeDeviceCodeOnHostFibers runs rope.cu's kernels (rope_one with the copies four
// channels a work item and one, rope_copy4 and rope_copy each followed by rope_apply,
// rope_apply in place) on host fibers against a serial reference (testdata/
// rope_fibers_main.cc), every value bit for bit, with and without the bf16 rounding a
// fused fake_quant asks for: the whole programs' checks never see that rounding of the
// kept channels (their rope inputs are bf16 values already where it is fused).
func TestRopeDeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	runOnFibers(t, "rope_fibers", fiberUnit(t, "", "testdata/rope_fibers_main.cc", "attention.cu", "rope.cu"), "-O1")
}

// TestSeqLookupOnHost checks prelude.h's seq_find, seq_view_at and seq_view (the row →
// sequence lookups every kernel shares: the first look at sequence t, then a binary
// search over the first rows) against the scan of every sequence they replaced, on the
// device branch's code compiled for the host (testdata/seq_fibers_main.cc: decode
// steps, prefill chunks, mixed steps with sequences of no rows, the SEQ_ROWS flag, keep
// 0 to 5, rows outside the step, up to 300 sequences).
func TestSeqLookupOnHost(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	runOnFibers(t, "seq_fibers", fiberUnit(t, "", "testdata/seq_fibers_main.cc"), "-O1")
}

// TestIndexScoreTileOnHostFibers runs the device branch of attention.cu's
// att_index_score_t (V4's index scores, a launch block per row and 64 entries, keys and
// queries staged in shared memory 16 values at a time; testdata/index_fibers_main.cc) on
// host fibers against att_index_score_item, every score bit for bit: heads below 64 and
// not a multiple of 8, key values past a stage, partial blocks of entries, rows that see
// no entry, a row in no sequence, a three-row sequence. TestIndexScoreTileSameValues
// checks whole steps.
func TestIndexScoreTileOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	runOnFibers(t, "index_fibers", fiberUnit(t, "", "testdata/index_fibers_main.cc", "attention.cu"), "-O1")
}

// TestTilesDeviceCodeOnHostFibers runs the device branch of V4.1's exact-order tile
// kernels (moe_fast_gate41_tile, mhc_fast_mix41_tile: numerics.h gemv_tile, MKL's GEMV
// lanes on tiles staged in shared memory; csa_fast_proj_tile: gonum's 64-value blocks)
// on host fibers against the per-lane functions the other kernels run (mkl_lane,
// mhc_mix41_part_item, csa_gonum_nt), bit for bit (testdata/tiles_fibers_main.cc: chain
// tails, rows and tokens past a tile, float32/bf16/FP8 weights, signed zeros, tokens in
// another order, rows in no sequence). TestFastTilesMatchLanes checks the launches'
// choice and the whole steps. It also runs csa_index_score_tc's device code against the
// item loop with the bf16 roundings, every score bit for bit and each path counted, with
// a tensor core that aligns and truncates (fp4_fibers.h g_mma_trunc) and with one launch
// block a chunk and two a row.
func TestTilesDeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	// the projections compared before their bf16 rounding, which hides most orders
	// (and the index scores and the compressor's norms before theirs, where a sum's last
	// bit would not show)
	// (the index scores on the tensor cores with their roundings: g_ix_round; their
	// paths counted in g_itc)
	pre := "#define CSA_PROJ_ROUND(v) (v)\n#define CSA_IX_ROUND(v) (g_ix_round ? q_bf16(v) : (v))\n#define CSA_NORM_ROUND(v) (v)\n" +
		"static int g_ix_round;\nstatic long g_itc[4];\n#define CSA_ITC_COUNT(kind) (g_itc[kind]++)\n" +
		"static void itc_audit(long, long, long, int, int);\n#define CSA_ITC_AUDIT(t, e, h, ex, eb) itc_audit(t, e, h, ex, eb)\n"
	src := fiberUnit(t, pre, "testdata/tiles_fibers_main.cc", "dense41.cu", "moe.cu", "mhc.cu", "csa41.cu")
	runOnFibers(t, "tiles_fibers", src, "-O1")
}

// TestQuantSplitDeviceCodeOnHostFibers runs the device branch of fast_quant_split
// (V4.1's activation quantization and the split into bf16 halves in one launch: a warp a
// piece, and a warp QS_PIECES pieces, their maxima and the pairs formed by warp shuffles)
// on host fibers against the
// device branches of the two launches it replaces (dense_quant, then fast_split or
// fast_split_fp4), every half and the error word bit for bit (testdata/quant_fibers_main.cc:
// partial pieces, padding, both pair orders, NaN, ±inf, signed zeros, bf16 ties,
// subnormals, values past E4M3's range, a row's last warp short of QS_PIECES pieces, a grid-stride loop over more pieces than
// threads). TestQuantSplitSameValues checks the launches' choice and whole steps.
func TestQuantSplitDeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	out := runOnFibers(t, "quant_fibers", fiberUnit(t, "", "testdata/quant_fibers_main.cc", "dense41.cu", "tensorcore.cu", "tensorcore_fp4.cu"), "-O1")
	if n := strings.Count(out, " words differ from the two launches"); n != 16 {
		t.Errorf("%d cases reported, want 16", n)
	}
	// the launch Go sizes is the one the kernel decodes
	if m := regexp.MustCompile(`(?m)^#define QS_PIECES (\d+)$`).FindStringSubmatch(cuFile("tensorcore.cu")); m == nil || m[1] != fmt.Sprint(quantSplitPieces) {
		t.Errorf("tensorcore.cu's QS_PIECES: %v, Go's %d", m, quantSplitPieces)
	}
	// and Go picks a piece a warp below quantSplitWideRows rows (or with the setting
	// off), QS_PIECES from there: the threads and the kernel's qs word agree
	for _, c := range []struct {
		M      int64
		wide   bool
		qs     int64
		groups int64
	}{{1, true, 1, 160}, {quantSplitWideRows - 1, true, 1, 160}, {quantSplitWideRows, true, quantSplitPieces, 40}, {256, false, 1, 160}} {
		var a ArgBuf
		n := quantSplitArgs(&Step{}, &a, 0, c.M, 5120, 5120, 0, 2, false, c.wide, 0)
		if got := int64(a.w[len(a.w)-3]); got != c.qs || n != c.M*c.groups*32 {
			t.Errorf("M %d wide %v: qs %d, %d threads; want %d, %d", c.M, c.wide, got, n, c.qs, c.M*c.groups*32)
		}
	}
}

// TestRoutingDeviceCodeOnHostFibers runs the device branch of the routed experts'
// grouping (moe_count, moe_count_sum: one warp scanning the counts into the experts'
// offsets; moe_group; fast_moe_active: one warp placing the active experts by ballots)
// on host fibers against a count, a stable grouping and an active list done in the
// harness (testdata/route_fibers_main.cc: expert counts below, at and past a warp's 32,
// 384 experts at batch-256 slot counts, idle experts in runs, a few busy ones).
// TestMoEGroupChunks checks the emulated device's loops.
func TestRoutingDeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	runOnFibers(t, "route_fibers", fiberUnit(t, "", "testdata/route_fibers_main.cc", "dense41.cu", "moe.cu", "tensorcore.cu"), "-O1")
}

// TestGemvDeviceCodeOnHostFibers runs the device branch of tensorcore.cu's fast_gemv_f32,
// _bf16 and _fp8 (a warp two weight rows, the lanes' sums folded by shuffles) on host
// fibers against the emulated branch's order, bit for bit, and against a float64 dot
// (testdata/gemv_fibers_main.cc: every weight format, one to four rows, reductions that
// leave lanes short, groups, bf16 outputs, an odd N, grid-stride loops, several trips a
// lane). TestGemvSteps
// checks whole steps and the launches' choice.
func TestGemvDeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	// (-O0: an optimizer may copy a __syncthreads call into both arms of a branch, which
	// the harness's barriers, each generation from one call site, would report)
	out := runOnFibers(t, "gemv_fibers", fiberUnit(t, "", "testdata/gemv_fibers_main.cc", "tensorcore.cu"), "-O0")
	// the launch Go sizes is the one the kernel decodes
	for name, want := range map[string]int64{"FAST_GEMV_M": fastGemvRows, "FAST_GEMV_R": fastGemvR} {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)$`).FindStringSubmatch(cuFile("tensorcore.cu"))
		if m == nil || m[1] != fmt.Sprint(want) {
			t.Errorf("tensorcore.cu's %s: %v, Go's %d", name, m, want)
		}
	}
	cases := regexp.MustCompile(`N (\d+) .*\(KS (\d+)\)`).FindAllStringSubmatch(out, -1)
	for _, c := range cases {
		n, _ := strconv.ParseInt(c[1], 10, 64)
		if ks, _ := strconv.ParseInt(c[2], 10, 64); ks != gemvSlices(n) {
			t.Errorf("N %d: fast_gemv_ks %d, Go's gemvSlices %d", n, ks, gemvSlices(n))
		}
	}
	if len(cases) != 15 {
		t.Errorf("%d cases reported their slices, want 15", len(cases))
	}
}

// TestDraftPickDeviceCodeOnHostFibers runs the device branch of dspark41.cu's
// dspark_head_pick_part (a warp a DSpark block's chunk of logits) and dspark_head_pick (a
// warp a block folding the chunks' bests; the lanes' argmaxes folded by shuffles) on
// host fibers against the serial scan the emulated device runs
// (testdata/pick_fibers_main.cc: ties, NaNs, signed zeros, infinities, the largest logit
// last in the row or in a chunk; vocabularies below, across and above a warp's 32, of one,
// two and 33 chunks): every drafted id and confidence the same. The exact instruction
// check covers the emulated branch.
func TestDraftPickDeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	runOnFibers(t, "pick_fibers", fiberUnit(t, "", "testdata/pick_fibers_main.cc", "dspark41.cu"), "-O1")
	// the parts' scratch Go sizes is the one the kernels index
	if m := regexp.MustCompile(`(?m)^#define DSPARK_PICK_CHUNK (\d+)$`).FindStringSubmatch(cuFile("dspark41.cu")); m == nil || m[1] != fmt.Sprint(dsparkPickChunk) {
		t.Errorf("dspark41.cu's DSPARK_PICK_CHUNK: %v, Go's %d", m, dsparkPickChunk)
	}
}

// TestSampleDeviceCodeOnHostFibers runs the device branch of basic.cu's sampling on host
// fibers (testdata/sample_fibers_main.cc): greedy rows (sample_argmax_part a warp a (row,
// chunk), sample's first warp folding the parts by shuffles) against the serial greedy
// scan — ties, NaNs, signed zeros, infinities, masks (a row allowing nothing),
// vocabularies of one to 36 chunks; rows at a temperature (sample_blk: a launch block's
// sums, the cut's boundary found digit by digit in shared-memory histograms, the tie and
// the draw by chunks; rows with a NaN or +Inf) against sample_row, the serial form the
// emulated device runs, with plain draws, top-k, top-p and both, over ties at the cut
// (among them rows whose whole kept mass lies in one thread's chunk of the draw, kept
// ties, cut ties and ids above the cut interleaved) and ids of no mass; and the
// histogram's masses put together from their 32-bit parts.
func TestSampleDeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	runOnFibers(t, "sample_fibers", fiberUnit(t, "", "testdata/sample_fibers_main.cc", "basic.cu"), "-O1")
}

// TestDraftAttentionDeviceCodeOnHostFibers runs the device branch of dspark41.cu's
// dspark_attention (a warp a (row, head): the ring's tags, the keys' scores and the
// values' accumulators split over the lanes; the chunks' maxima and sums in every lane)
// on host fibers against dspark_attn_item, the serial form the emulated device runs, every
// output bit for bit and the same error word (testdata/attn_fibers_main.cc: rings full,
// wrapped and not yet full, heads of 20, 40, 64 and 512 values and past DSPARK_ATT_DMAX,
// more keys than the scratch's bound, chunks of -inf keys, NaN keys, rows in no sequence,
// errors 501 and 502); Go's bound on the head against the C one. The exact instruction
// check (TestInstructionsMatchCPU) covers the serial form against the cpu target.
func TestDraftAttentionDeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	runOnFibers(t, "attn_fibers", fiberUnit(t, "", "testdata/attn_fibers_main.cc", "dspark41.cu"), "-O1")
	if m := regexp.MustCompile(`(?m)^#define DSPARK_ATT_DMAX (\d+)$`).FindStringSubmatch(cuFile("dspark41.cu")); m == nil || m[1] != "1024" {
		t.Errorf("dspark41.cu's DSPARK_ATT_DMAX: %v, the stride's comment and the harness assume 1024", m)
	}
}

// TestDraftBiasDeviceCodeOnHostFibers runs the device branch of dspark41.cu's
// dspark_head_bias (a launch block 32 vocabulary entries, head rows staged in shared
// memory, a warp a DSpark block) on host fibers against the serial form the emulated
// device runs, every logit bit for bit (testdata/bias_fibers_main.cc: ranks within and
// above the staged rows, vocabularies not a multiple of 32, blocks not a multiple of four,
// bf16 and float32 embeddings, a token past the vocabulary); Go's tile constants against
// the C ones.
func TestDraftBiasDeviceCodeOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	runOnFibers(t, "bias_fibers", fiberUnit(t, "", "testdata/bias_fibers_main.cc", "dspark41.cu"), "-O0")
	for name, want := range map[string]int64{"DSPARK_BIAS_ROWS": dsparkBiasRows, "DSPARK_BIAS_RMAX": dsparkBiasRMax} {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)$`).FindStringSubmatch(cuFile("dspark41.cu"))
		if m == nil || m[1] != fmt.Sprint(want) {
			t.Errorf("dspark41.cu's %s: %v, Go's %d", name, m, want)
		}
	}
}

// TestSampleBindRefusesLargeVocab: the sampler's histogram parts sum below 2^32 only for
// vocabularies below 2^21, so the binder refuses larger ones with an error (not wrong
// tokens), and binds one just below.
func TestSampleBindRefusesLargeVocab(t *testing.T) {
	for _, c := range []struct {
		v  int64
		ok bool
	}{{sampleMaxVocab - 1, true}, {sampleMaxVocab, false}, {sampleMaxVocab + 5, false}} {
		b := &Bind{Args: []ir.Type{ir.T(ir.F32, "R", int(c.v)), ir.T(ir.F32, "R", 4)}}
		err := bindSample(b)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "vocabulary")) {
			t.Errorf("vocabulary %d: %v", c.v, err)
		}
	}
}

// TestLaunchCutsOnHostFibers runs the device code of the kernels that cut launches
// after run 30 on host fibers, each against what it replaces, bit for bit, in one
// harness (testdata/*_fibers_main.cc's case functions): V4.1's and V4's one-launch
// RMSNorm against part then apply, and cascade_lane_fold against cascade_lane on sizes
// with two and three levels of promotion (norm_fibers_main.cc; Go's cascadeBlocks
// against the C one); moe_plan against a serial reference of the four kernels it
// replaces (moe_plan_fibers_main.cc); the window and drafter ring pushes a warp a group
// against one thread a group (push_fibers_main.cc); the route's and the split's folds
// against their own launches (route_fold_fibers_main.cc, mix_fibers_main.cc, whose cases
// have even token counts: the fibers play a half warp's width-16 shuffles as the whole
// warp's).
func TestLaunchCutsOnHostFibers(t *testing.T) {
	var main strings.Builder
	for _, f := range []string{"norm", "moe_plan", "push", "route_fold", "mix"} {
		b, err := os.ReadFile("testdata/" + f + "_fibers_main.cc")
		if err != nil {
			t.Fatal(err)
		}
		main.Write(b)
	}
	main.WriteString(`
int main() {
  int bad = norm_cases() + moe_plan_cases() + push_cases() + route_cases() + mix_cases();
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
`)
	path := filepath.Join(t.TempDir(), "cuts_fibers_main.cc")
	if err := os.WriteFile(path, []byte(main.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runOnFibers(t, "cuts_fibers", fiberUnit(t, "", path, "csa41.cu", "dense41.cu", "dspark41.cu", "mhc.cu", "moe.cu"), "-O1")
	cases := regexp.MustCompile(`(?:g|n) (\d+) \((\d+) blocks a lane\)`).FindAllStringSubmatch(out, -1)
	for _, c := range cases {
		n, _ := strconv.ParseInt(c[1], 10, 64)
		if nb, _ := strconv.ParseInt(c[2], 10, 64); nb != cascadeBlocks(n) {
			t.Errorf("%d values: cascade_blocks %d, Go's cascadeBlocks %d", n, nb, cascadeBlocks(n))
		}
	}
	for what, want := range map[string]int{"blocks a lane)": 25, "v4 norm ": 5, "plan slots ": 12, " push rows ": 11, "route T ": 4, "mix T ": 3} {
		if n := strings.Count(out, what); n != want {
			t.Errorf("%d cases printed %q, want %d", n, what, want)
		}
	}
}

// TestKeyWideningIntegerPath checks csa_attn_kdec's integer widening of FP8 and FP4 key
// values (csa_kdec_halves: the code's bf16 bits with the scale's exponent added, where
// the scale byte makes every product a normal float) against the float widening and bf16
// roundings (csa_kdec_halves_any) for every code of both formats and every scale byte,
// bit for bit (testdata/kdec_fibers_main.cc), and that the integer path is taken; then
// csa_attn_kdec's device branch on host fibers against a serial widening of every key:
// every half and flag.
func TestKeyWideningIntegerPath(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	out := runOnFibers(t, "kdec_fibers", fiberUnit(t, "", "testdata/kdec_fibers_main.cc", "csa41.cu"), "-O1")
	// every scale byte in csa_kdec_fast's range takes the integer path for all 64 pieces
	// of the 256-value row: FP8 bytes 10-246 (237), FP4 bytes 2-252 (251)
	for _, want := range []string{
		"format 1: 16384 pieces of every code and scale byte, 15168 by the integer path, 0 differ",
		"format 2: 16384 pieces of every code and scale byte, 16064 by the integer path, 0 differ",
		// (format 3, FP4 codes of E4M3 scales: every scale byte but the two NaNs, 254 · 64 pieces, by one product a value)
		"format 3: 16384 pieces of every code and scale byte, 16256 by the integer path, 0 differ",
		"key widening launch, dim 512 (tc 1): 20 keys",
		"key widening launch, dim 70 (tc 1): 20 keys",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the harness did not print %q", want)
		}
	}
}

// TestFusedAttentionOnHostFibers runs csa_tc_fused's device branch on host fibers
// against the split kernels' device branches (testdata/fused_fibers_main.cc: every
// output bit for bit), and checks that the binder's shape constants and shared bytes a
// launch block are the kernel's (CTF_*, ctf_smem).
func TestFusedAttentionOnHostFibers(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	// the kernel's shape constants are the binder's (the grid, the bounds it checks)
	for name, want := range map[string]int64{"CTF_HC": csaFusedHeads, "CTF_NT": csaFusedThreads, "CTF_NT3": csaFused3Threads, "CTF_KB": csaFusedKeys, "CTF_DMAX": csaFusedDimMax} {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)$`).FindStringSubmatch(cuFile("tensorcore_attn.cu"))
		if m == nil || m[1] != fmt.Sprint(want) {
			t.Errorf("tensorcore_attn.cu's %s: %v, Go's %d", name, m, want)
		}
	}
	out := runOnFibers(t, "fused_fibers", fiberUnit(t, "", "testdata/fused_fibers_main.cc", "tensorcore.cu", "tensorcore_attn.cu", "csa41.cu"), "-O1")
	n := 0
	for _, line := range strings.Split(out, "\n") {
		var d, nw, bytes int64
		if _, err := fmt.Sscanf(line, "smem %d %d %d", &d, &nw, &bytes); err == nil {
			n++
			if want := csaFusedShared(d, nw); bytes != want {
				t.Errorf("dim %d, %d warps: ctf_smem %d bytes, the binder's csaFusedShared %d", d, nw, bytes, want)
			}
		}
	}
	if n != 8 {
		t.Errorf("the harness printed %d ctf_smem lines, want 8 (four dims, 8 and 16 warps)", n)
	}
}
