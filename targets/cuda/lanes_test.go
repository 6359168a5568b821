package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFastProductsOnSimulatedLanes runs the device branch of tensorcore.cu's dense
// products on the host (testdata/lanes/harness.cc with DI_LANES: each launch block's
// threads as coroutines; mma.sync from the lanes' fragments in PTX's layout, summed in
// the emulated device's order; the asynchronous copies and __syncthreads played out):
// fast_gemm_m4's, fast_gemm_m1's (and _fp8's) and fast_gemm_blk's device code must give the emulated device's
// fast_gemm_m4 values bit for bit, on every weight format (the wgmma kernels,
// fast_gemm_wg_f32 and fast_gemm_wg_fp8, their emulated kernels' values: the harness
// plays the warpgroup's operations, their products read through the descriptors), with partial blocks of rows
// and weight rows, sliced reductions, a reduction not a multiple of 16, groups and bf16
// outputs. The emulated device runs fast_tile for both kernels, so this is the check of
// the block kernel's own indexing, staging and synchronization that runs without a
// GPU. The block kernel runs twice: the warps in step with each copy landing as late as
// its wait allows, and the warps skewed with each copy landing when issued, so a missing
// wait or barrier changes values.
func TestFastProductsOnSimulatedLanes(t *testing.T) {
	t.Parallel() // (host compiles and a harness process, beside the other such tests)
	h, err := newHostCompiler()
	if err != nil {
		t.Fatal(err)
	}
	head, _ := kernelFiles()
	harness, err := os.ReadFile("testdata/lanes/harness.cc")
	if err != nil {
		t.Fatal(err)
	}
	stubs, err := os.ReadFile("testdata/lanes/lanes.h")
	if err != nil {
		t.Fatal(err)
	}
	// the launch grid Go computes decodes as the kernel does
	for name, want := range map[string]int64{"FAST_BLK_ROWS": fastBlockRows, "FAST_BLK_N": fastBlockN,
		"FAST_WIDE_ROWS": fastWideRows, "FAST_WIDE_N": fastWideN, "WGB_MROWS": fastBlockRows, "WG_BN": fastBlockN} {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)$`).FindStringSubmatch(cuFile("tensorcore.cu"))
		if m == nil || m[1] != fmt.Sprint(want) {
			t.Errorf("tensorcore.cu's %s: %v, Go's %d", name, m, want)
		}
	}
	dir := t.TempDir()
	build := func(name, prefix, flag string) string {
		src, bin := filepath.Join(dir, name+".cc"), filepath.Join(dir, name)
		if err := os.WriteFile(src, []byte(prefix+head+cuFile("tensorcore.cu")+cuFile("tensorcore_attn.cu")+string(harness)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(h.cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-fno-fast-math", "-U_FORTIFY_SOURCE", flag, "-o", bin, src).CombinedOutput()
		if err != nil {
			t.Fatalf("building the %s harness: %v\n%s", name, err, firstLines(string(out), 20))
		}
		return bin
	}
	emu := build("emulated", "", "-DDI_EMULATE")
	// (no kernel run here shuffles, votes or syncs a warp: the warp shuffles, ballots and
	// __syncwarp the sources use stop the harness; csa_tc_fused's run on host fibers,
	// TestFusedAttentionOnHostFibers)
	shuffles := "#include <cstdlib>\ntemplate <class T> T __shfl_xor_sync(unsigned, T, int, int = 32) { abort(); }\n" +
		"template <class T> T __shfl_down_sync(unsigned, T, unsigned, int = 32) { abort(); }\n" +
		"template <class T> T __shfl_sync(unsigned, T, int, int = 32) { abort(); }\n" +
		"inline void __syncwarp(unsigned = 0xffffffffu) { abort(); }\n" +
		"inline unsigned __ballot_sync(unsigned, int) { abort(); } inline int __popc(unsigned) { abort(); }\n"
	lanes := build("lanes", string(stubs)+shuffles, "-DDI_LANES")
	// V4.1's attention tiles (tensorcore_attn.cu, csa_tc_*): the device code's logits and
	// outputs equal the emulated device's bit for bit, wide and narrow, the warps in step
	// and skewed (the narrow output also with its key steps loaded four at a time,
	// csa_tc_out_na). Shapes: 20 heads (a partial group of 16), a dim not a multiple of 64 (or
	// of 4: the scalar loads), key lists not multiples of the tiles, a softmax block that
	// is not a multiple of the tensor-core step (16) and one that is.
	for _, c := range []struct{ rows, heads, dim, lmax, block int }{{5, 20, 72, 37, 8}, {4, 16, 70, 80, 64}, {3, 18, 64, 21, 16}} {
		t.Run(fmt.Sprintf("csa_tc_%d_rows_%d_heads_of_%d_lmax%d_block%d", c.rows, c.heads, c.dim, c.lmax, c.block), func(t *testing.T) {
			run := func(bin, kernel string, extra ...string) []float32 {
				out := filepath.Join(dir, "csa.bin")
				args := append([]string{kernel, fmt.Sprint(c.rows), fmt.Sprint(c.heads), fmt.Sprint(c.dim), fmt.Sprint(c.lmax),
					fmt.Sprint(c.block), "5", out}, extra...)
				if msg, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
					t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, msg)
				}
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				return f32s(t, b)
			}
			for _, k := range []string{"csa_tc_logits", "csa_tc_out"} {
				want := run(emu, k)
				// the reference itself: a fifth of the values finite at least (row 1, in no
				// view, and slots past a row's keys are not written; empty slots' logits are
				// −inf), and none 0 but the outputs of row 2 (no keys)
				finite, zeros, keyless := 0, 0, 0
				if k == "csa_tc_out" {
					keyless = c.heads * c.dim
				}
				for _, v := range want {
					if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
						finite++
						if v == 0 {
							zeros++
						}
					}
				}
				if finite < len(want)/5 || zeros > keyless {
					t.Fatalf("emulated %s: %d of %d values finite, %d of them 0", k, finite, len(want), zeros)
				}
				type form struct {
					what string
					got  []float32
				}
				forms := []form{
					{"emulated narrow", run(emu, k+"_n")},
					{"device code", run(lanes, k)},
					{"device code, narrow", run(lanes, k+"_n")},
					{"device code, warps skewed", run(lanes, k, "eager")},
				}
				if k == "csa_tc_out" {
					// (csa_tc_out_na: the narrow output's key steps loaded four at a time)
					forms = append(forms, form{"emulated narrow, steps ahead", run(emu, k+"_na")},
						form{"device code, narrow, steps ahead", run(lanes, k+"_na")},
						form{"device code, narrow, steps ahead, warps skewed", run(lanes, k+"_na", "eager")})
				}
				for _, g := range forms {
					for i := range want {
						if math.Float32bits(g.got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s's %s: value %d is %g, the emulated kernel's %g", k, g.what, i, g.got[i], want[i])
						}
					}
				}
			}
		})
	}
	for _, c := range []struct {
		fmt             int
		N, K, M, G, bf  int64
		name            string
		wantSlices      bool
		wantPartialRows bool
	}{
		{fmt: 1, N: 160, K: 576, M: 100, G: 1, name: "bf16, two slices, a partial weight block and row block", wantSlices: true, wantPartialRows: true},
		{fmt: 5, N: 256, K: 570, M: 70, G: 1, name: "FP8 128-blocks, K not a multiple of 16", wantSlices: true, wantPartialRows: true},
		{fmt: 0, N: 144, K: 320, M: 40, G: 1, bf: 1, name: "float32 (the _f32 kernels), bf16 outputs", wantPartialRows: true},
		{fmt: 0, N: 272, K: 580, M: 70, G: 1, name: "float32, two slices, a partial weight block, K past a step's end", wantSlices: true, wantPartialRows: true},
		{fmt: 1, N: 256, K: 192, M: 72, G: 2, name: "two groups of 128 weight rows", wantPartialRows: true},
		{fmt: 5, N: 256, K: 512, M: 9, G: 1, name: "FP8 128-blocks, whole reduction steps, two slices", wantSlices: true, wantPartialRows: true},
		{fmt: 2, N: 128, K: 256, M: 128, G: 1, name: "FP8 32×32 blocks, whole blocks of rows"},
		{fmt: 3, N: 136, K: 256, M: 65, G: 1, name: "FP8 row groups of 32, one row in the last block", wantPartialRows: true},
		{fmt: 4, N: 128, K: 512, M: 96, G: 1, name: "FP4, two slices", wantSlices: true, wantPartialRows: true},
		{fmt: 3, N: 96, K: 320, M: 200, G: 1, name: "FP8 row groups, two blocks of 128 rows (wide), the second partial", wantPartialRows: true},
		{fmt: 5, N: 256, K: 256, M: 40, G: 2, name: "FP8 128-blocks, two groups of 128 weight rows (V4.1's wo_a with xbf16)", wantPartialRows: true},
		{fmt: 1, N: 272, K: 512, M: 130, G: 1, name: "bf16, two slices, three blocks of 64 rows (wgmma), the last partial", wantSlices: true, wantPartialRows: true},
		{fmt: 1, N: 200, K: 192, M: 70, G: 1, bf: 1, name: "bf16, one slice, bf16 outputs, a partial block of 128 weight rows", wantPartialRows: true},
	} {
		t.Run(fmt.Sprintf("fmt%d_N%d_K%d_M%d_G%d", c.fmt, c.N, c.K, c.M, c.G), func(t *testing.T) {
			S, ks := fastSplits(c.N, c.K)
			if S > 1 != c.wantSlices || (c.M%fastBlockRows != 0) != c.wantPartialRows {
				t.Fatalf("%s: %d slices, %d rows: not the case it is meant to be", c.name, S, c.M)
			}
			if c.G > 1 && !fastBlockOK(c.N, c.G) {
				t.Fatalf("%s: fastBlockOK(%d, %d) false", c.name, c.N, c.G)
			}
			sArg, ksArg := S, ks // (the slices the runs take: the binder's, unless a check says otherwise)
			run := func(bin, kernel string, extra ...string) []byte {
				out := filepath.Join(dir, "out.bin")
				args := append([]string{kernel, fmt.Sprint(c.fmt), fmt.Sprint(c.N), fmt.Sprint(c.K), fmt.Sprint(c.M), fmt.Sprint(c.G),
					fmt.Sprint(sArg), fmt.Sprint(ksArg), fmt.Sprint(c.bf), "7", out}, extra...)
				if msg, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
					t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, msg)
				}
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			want := run(emu, "m4")
			// the reference itself: every output written, finite, and mostly nonzero
			vals := f32s(t, want)
			written := vals[:c.M*c.N]
			if S > 1 {
				written = vals[c.M*c.N:]
			}
			zeros := 0
			for i, v := range written {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s: emulated fast_gemm_m4 output %d is %g", c.name, i, v)
				}
				if v == 0 {
					zeros++
				}
			}
			if zeros > len(written)/10 {
				t.Fatalf("%s: %d of %d emulated outputs are 0", c.name, zeros, len(written))
			}
			type check struct {
				what string
				got  []byte
				ref  []byte // nil: want
			}
			// onLanes: kernel k's device code with the warps in step, skewed, and with each
			// wgmma product read at its issue and the copies landing late, and its emulated
			// branch, each against ref (name: the kernel's name in the messages)
			onLanes := func(name, k string, ref []byte) []check {
				return []check{{name + "'s device code, warps in step", run(lanes, k), ref},
					{name + "'s device code, warps skewed", run(lanes, k, "eager"), ref},
					{name + "'s device code, products at their issue, copies late", run(lanes, k, "wgeager"), ref},
					{"emulated " + name, run(emu, k), ref}}
			}
			checks := []check{
				{"emulated fast_gemm_blk", run(emu, "blk"), nil},
				{"emulated fast_gemm_m1", run(emu, "m1"), nil},
				{"fast_gemm_m4's device code", run(lanes, "m4"), nil},
				{"fast_gemm_m1's device code", run(lanes, "m1"), nil},
				{"fast_gemm_blk's device code, warps in step", run(lanes, "blk"), nil},
				{"fast_gemm_blk's device code, warps skewed", run(lanes, "blk", "eager"), nil},
			}
			if c.fmt == 0 {
				// float32 weights: the staged kernel (fast_gemm_stage_f32), and with x in
				// bf16 and xexact, against the whole chain on the same x
				checks = append(checks, check{"emulated fast_gemm_stage_f32", run(emu, "stg"), nil})
				bf := run(emu, "m4b")
				if bytes.Equal(bf, want) {
					t.Fatalf("%s: x rounded to bf16 gives the same outputs", c.name)
				}
				for _, k := range []struct{ arg, name string }{{"stg", "fast_gemm_stage_f32"}} {
					checks = append(checks, check{k.name + "'s device code, warps in step", run(lanes, k.arg), nil},
						check{k.name + "'s device code, warps skewed", run(lanes, k.arg, "eager"), nil},
						check{k.name + "'s device code with xexact", run(lanes, k.arg+"x"), bf},
						check{k.name + "'s device code with xexact, warps skewed", run(lanes, k.arg+"x", "eager"), bf})
				}
			}
			fp8 := c.fmt == 2 || c.fmt == 3 || c.fmt == 5
			if fp8 {
				checks = append(checks, check{"emulated fast_gemm_m1_fp8", run(emu, "m1fp8"), nil},
					check{"fast_gemm_m1_fp8's device code (the weight's bytes steps ahead where whole)", run(lanes, "m1fp8"), nil})
			}
			// every tile whole: fast_gemm_m1_fp8_only (its loop alone)
			only := fp8 && c.N%16 == 0 && c.K%64 == 0
			if only {
				checks = append(checks, check{"emulated fast_gemm_m1_fp8_only", run(emu, "m1fp8o"), nil},
					check{"fast_gemm_m1_fp8_only's device code", run(lanes, "m1fp8o"), nil})
			}
			// bf16 activations (lo halves zero): with xexact the tiles leave the lo mma
			// out, and every kernel must give the whole chain's values on the same x
			if c.fmt != 0 {
				bf := run(emu, "m4b")
				if bytes.Equal(bf, want) {
					t.Fatalf("%s: x rounded to bf16 gives the same outputs", c.name)
				}
				kernels := []string{"m4", "m1", "blk"}
				if c.G <= 1 || fastWideOK(c.N, c.G) {
					kernels = append(kernels, "wide")
				}
				if fp8 {
					kernels = append(kernels, "m1fp8")
				}
				if only {
					kernels = append(kernels, "m1fp8o")
				}
				for _, k := range kernels {
					checks = append(checks, check{"emulated " + k + " with xexact, against the whole chain on bf16 x", run(emu, k+"x"), bf},
						check{k + "'s device code with xexact, against the whole chain on bf16 x", run(lanes, k+"x"), bf})
					if k == "wide" || k == "blk" {
						checks = append(checks, check{k + "'s device code with xexact, warps skewed", run(lanes, k+"x", "eager"), bf})
					}
				}
			}
			// the wgmma kernels (bf16 x with xexact, one group, K a multiple of 64:
			// fast_gemm_wg_f32 for float32 weights, fast_gemm_wg_fp8 for FP8): their
			// device code, the warps in step and skewed, gives the emulated kernel's values
			// bit for bit (the harness plays wgmma in the emulated kernel's order), every
			// output written
			if c.G == 1 && c.K%64 == 0 && (c.fmt == 0 || fp8) {
				k, name := "wgf32x", "fast_gemm_wg_f32"
				if fp8 {
					k, name = "wgfp8x", "fast_gemm_wg_fp8"
				}
				ref := run(emu, k)
				v := f32s(t, ref)
				out := v[:c.M*c.N]
				if S > 1 {
					out = v[c.M*c.N:]
				}
				for i, x := range out {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("%s: emulated %s output %d is %g", c.name, name, i, x)
					}
				}
				checks = append(checks, check{name + "'s device code, warps in step", run(lanes, k), ref},
					check{name + "'s device code, warps skewed", run(lanes, k, "eager"), ref})
				if fp8 {
					// the weight bytes two steps ahead; blocks of 64 x rows (wgmma
					// m64n64k16); two warpgroups a launch block sharing the x rows (each its
					// own 64 weight rows, a partial second one where N is not a multiple of
					// 128); a producer warpgroup widening into a ring the two consumer
					// warpgroups read, on named barriers: each output's products in the
					// same order
					checks = append(checks, onLanes("fast_gemm_wg_fp8a", "wgfp8ax", ref)...)
					checks = append(checks, onLanes("fast_gemm_wg_fp8n", "wgfp8nx", ref)...)
					checks = append(checks, onLanes("fast_gemm_wg_fp8a2", "wgfp8a2x", ref)...)
					checks = append(checks, onLanes("fast_gemm_wg_fp8p", "wgfp8px", ref)...)
					// the whole reduction in one slice, so that the ring of four stages wraps
					// (the binder's slices here are four or five steps)
					sArg, ksArg = 1, (c.K+63)/64*64
					checks = append(checks, onLanes("fast_gemm_wg_fp8p (one slice)", "wgfp8px", run(emu, "wgfp8x"))...)
					sArg, ksArg = S, ks
				}
				if !fp8 {
					// the two-fragment-set form; with a ring of three x buffers, two
					// warpgroups a launch block: the same products in the same order
					checks = append(checks, onLanes("fast_gemm_wg_f32p", "wgf32px", ref)...)
					checks = append(checks, onLanes("fast_gemm_wg_f32p3w", "wgf32p3wx", ref)...)
				}
			}
			// fast_gemm_wg_bf16w (bf16 weights and bf16 x with xexact, in groups too, K a
			// multiple of 64): its device code, warps in step and skewed, gives the
			// emulated kernel's values bit for bit (the emulated kernel against a float64
			// reference: TestWGBF16WNearRef)
			if c.fmt == 1 && c.K%64 == 0 && (c.G == 1 || (c.N/c.G)%64 == 0) {
				ref := run(emu, "wgbf16wx")
				checks = append(checks, onLanes("fast_gemm_wg_bf16w", "wgbf16wx", ref)...)
				// (the same code under four blocks' register bound)
				checks = append(checks, check{"fast_gemm_wg_bf16w4's device code, warps in step", run(lanes, "wgbf16w4x"), ref})
				// the producer and consumers' form (each group's weight rows a multiple of
				// 128), in the binder's slices and in one, so that the ring wraps
				if c.G == 1 || (c.N/c.G)%128 == 0 {
					checks = append(checks, onLanes("fast_gemm_wg_bf16wp", "wgbf16wpx", ref)...)
					sArg, ksArg = 1, (c.K+63)/64*64
					checks = append(checks, onLanes("fast_gemm_wg_bf16wp (one slice)", "wgbf16wpx", run(emu, "wgbf16wx"))...)
					sArg, ksArg = S, ks
				}
			}
			// fast_gemm_wg_bf16 and fast_gemm_wg_fp8r (bf16 or FP8 weights, x in two halves
			// or bf16 with xexact, one group, K a multiple of 64): their device code, warps in step and skewed, gives
			// the emulated kernel's values bit for bit; the emulated kernel's values are
			// within a float32 sum's rounding of fast_gemm_m4's (another order of the same
			// products)
			if (c.fmt == 1 || fp8) && c.G == 1 && c.K%64 == 0 {
				ks := []string{"wgbf16", "wgbf16x"}
				if fp8 {
					ks = []string{"wgfp8r", "wgfp8rx"}
				}
				for _, k := range ks {
					ref := run(emu, k)
					got, base := f32s(t, ref), f32s(t, want)
					if strings.HasSuffix(k, "x") {
						base = f32s(t, run(emu, "m4x"))
					}
					// (the outputs written: y, or with slices part's)
					if S > 1 {
						got, base = got[c.M*c.N:], base[c.M*c.N:]
					}
					// (a float32 sum of the same products in another order: within 1e-4 of
					// the value and 1e-6 of the largest output, whose FP8 products run
					// to 10^4 and cancel; with bf16 outputs a bf16 rounding too)
					tol, big := 1e-4, 0.0
					if c.bf == 1 {
						tol = 1.0 / 128
					}
					for _, v := range base {
						big = math.Max(big, math.Abs(float64(v)))
					}
					for i := range got {
						d := math.Abs(float64(got[i]) - float64(base[i]))
						if math.IsNaN(float64(got[i])) || d > tol*(1+math.Abs(float64(base[i])))+1e-6*big {
							t.Fatalf("%s: emulated %s output %d is %g, fast_gemm_m4's %g", c.name, k, i, got[i], base[i])
						}
					}
					name := "fast_gemm_wg_" + strings.TrimSuffix(k[2:], "x")
					checks = append(checks, check{name + "'s device code (" + k + "), warps in step", run(lanes, k), ref},
						check{name + "'s device code (" + k + "), warps skewed", run(lanes, k, "eager"), ref})
					// the weight rows two steps ahead (fast_gemm_wg_bf16a, _fp8ra): the same
					// products in the same order
					ka := strings.Replace(strings.Replace(k, "wgbf16", "wgbf16a", 1), "wgfp8r", "wgfp8ra", 1)
					na := name + "a"
					checks = append(checks, check{na + "'s device code (" + ka + "), warps in step", run(lanes, ka), ref},
						check{na + "'s device code (" + ka + "), warps skewed", run(lanes, ka, "eager"), ref})
				}
			}
			for _, r := range checks {
				ref, of := r.ref, "the emulated fast_gemm_m4"
				switch {
				case ref == nil:
					ref = want
				case strings.Contains(r.what, "fast_gemm_wg_"):
					of = "the emulated wgmma kernel"
				default:
					of = "the emulated fast_gemm_m4 on bf16 x"
				}
				if !bytes.Equal(r.got, ref) {
					i := 0
					for i < len(ref) && r.got[i] == ref[i] {
						i++
					}
					t.Errorf("%s: %s differs from %s from output %d on", c.name, r.what, of, i/4)
				}
			}
		})
	}
}

// f32s decodes a harness's output file (little-endian float32s).
func f32s(t *testing.T, b []byte) []float32 {
	t.Helper()
	v := make([]float32, len(b)/4)
	if err := binary.Read(bytes.NewReader(b), binary.LittleEndian, v); err != nil {
		t.Fatal(err)
	}
	return v
}
