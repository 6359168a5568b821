package cuda_test

import (
	"fmt"
	"strings"
	"testing"

	"deepinfer/targets/cuda"
)

// fp4TileForms are the FP4 tile kernels BenchmarkFP4Tiles times, the row layout's
// default first: the others' partial sums must equal its bit for bit.
var fp4TileForms = []string{"_rega", "_regb", "_regbd", "_regt"}

func fp4TileKernels(up bool) []string {
	k := "fast_moe_down_fp4"
	if up {
		k = "fast_moe_up_fp4"
	}
	var ks []string
	for _, f := range fp4TileForms {
		ks = append(ks, k+f)
	}
	return ks
}

// fp4WideKernels are the wide (prefill) tiles in rows and over the tiled layout.
func fp4WideKernels(up bool) []string {
	if up {
		return []string{"fast_moe_up_fp4_wide", "fast_moe_up_fp4_widet"}
	}
	return []string{"fast_moe_down_fp4_wide", "fast_moe_down_fp4_widet"}
}

// TestFP4TilesBenchSameValues: FP4TilesBench runs the row layout's _rega tiles and the
// tiled layout's _regb, _regbd and _regt on the same random experts, routing and
// activations, and requires every form's partial sums bit for bit equal to _rega's (and
// _widet's to _wide's at a prefill's slots), for the w1/w3 and the w2 products (on the emulated device, each kernel's emulated branch
// reading the layout its name says); a bad shape is refused.
func TestFP4TilesBenchSameValues(t *testing.T) {
	rt := openProbe(t)
	defer rt.Close()
	for _, up := range []bool{true, false} {
		sh := cuda.FP4TileShape{E: 6, N: 64, K: 640, TopK: 2, Up: up}
		steps := []cuda.FP4TileStep{{T: 5, S: 2, Ks: 384}, {T: 1, S: 1, Ks: 640}}
		if !up {
			sh.N, sh.K = 160, 384
			steps = []cuda.FP4TileStep{{T: 5, S: 2, Ks: 256}, {T: 2, S: 3, Ks: 128}}
		}
		res, err := rt.FP4TilesBench(fp4TileKernels(up), sh, steps, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		// (the wide tiles, both layouts, at ~13 slots an expert: one 64-slot pass)
		if _, err := rt.FP4TilesBench(fp4WideKernels(up), sh, []cuda.FP4TileStep{{T: 40, S: steps[0].S, Ks: steps[0].Ks}}, 4, 1); err != nil {
			t.Fatal(err)
		}
		if len(res) != len(fp4TileForms)*len(steps) {
			t.Fatalf("%d results for %d kernels × %d steps", len(res), len(fp4TileForms), len(steps))
		}
		for _, r := range res {
			if r.Bytes <= 0 || r.Ms < 0 {
				t.Errorf("%s: %+v", r.Kernel, r)
			}
		}
	}
	if _, err := rt.FP4TilesBench(fp4TileKernels(true), cuda.FP4TileShape{E: 2, N: 40, K: 256, TopK: 1, Up: true}, []cuda.FP4TileStep{{T: 1, S: 1, Ks: 256}}, 1, 1); err == nil || !strings.Contains(err.Error(), "multiple of 16") {
		t.Errorf("N 40 accepted or an unclear error: %v", err)
	}
}

// fp4TileModels are BenchmarkFP4Tiles' expert products: V4.1-Flash's (384 experts, w1/w3
// 2,304 × 5,120, w2 5,120 × 2,304) and V4-Flash's (256, 2,048 × 4,096 and 4,096 × 2,048),
// six experts a token, with the slices the binder picks at decode (w1/w3 four; w2 two
// where ~nact × D/128 × 2 blocks reach 2,112, four at one token), largest step first.
var fp4TileModels = []struct {
	name               string
	up, down           cuda.FP4TileShape
	upSteps, downSteps []cuda.FP4TileStep
}{
	{"v41", cuda.FP4TileShape{E: 384, N: 2304, K: 5120, TopK: 6, Up: true}, cuda.FP4TileShape{E: 384, N: 5120, K: 2304, TopK: 6},
		[]cuda.FP4TileStep{{T: 256, S: 4, Ks: 1280}, {T: 64, S: 4, Ks: 1280}, {T: 1, S: 4, Ks: 1280}},
		[]cuda.FP4TileStep{{T: 256, S: 2, Ks: 1152}, {T: 64, S: 2, Ks: 1152}, {T: 1, S: 4, Ks: 640}}},
	{"v4", cuda.FP4TileShape{E: 256, N: 2048, K: 4096, TopK: 6, Up: true}, cuda.FP4TileShape{E: 256, N: 4096, K: 2048, TopK: 6},
		[]cuda.FP4TileStep{{T: 256, S: 4, Ks: 1024}, {T: 64, S: 4, Ks: 1024}, {T: 1, S: 4, Ks: 1024}},
		[]cuda.FP4TileStep{{T: 256, S: 2, Ks: 1024}, {T: 64, S: 2, Ks: 1024}, {T: 1, S: 4, Ks: 512}}},
}

// BenchmarkFP4Tiles times the FP4 expert tiles alone on V4.1-Flash's and V4-Flash's
// expert shapes (fp4TileModels; uniform routing, bf16 activations) at 256, 64 and 1
// tokens, and the wide (prefill) tiles at 2,048 (printed as each product's steps
// finish): the row layout's _rega
// (the default) against the tiled layout's _regb, _regbd and _regt in one process, each
// the median of 10 launches, their partial sums checked bit for bit against _rega's,
// with the copy rate beside them. On the GPU:
// `cuda.test -test.run '^$' -test.bench FP4Tiles -test.benchtime 1x -device gpu`.
// On the emulated device a small shape (its times mean nothing there).
func BenchmarkFP4Tiles(b *testing.B) {
	runDeviceBench(b, "fp4 tiles", func(rt *cuda.Runtime, bw float64) {
		for _, m := range fp4TileModels {
			for _, up := range []bool{true, false} {
				sh, steps := m.up, m.upSteps
				if !up {
					sh, steps = m.down, m.downSteps
				}
				if *device != "gpu" {
					sh.E, sh.N, sh.K = 8, 64, 512
					steps = []cuda.FP4TileStep{{T: 1, S: 2, Ks: 256}, {T: 4, S: 2, Ks: 256}}
				}
				res, err := rt.FP4TilesBench(fp4TileKernels(up), sh, steps, 7, 10)
				if err != nil {
					b.Fatal(err)
				}
				// a prefill chunk of 2,048 tokens (~32 slots an expert of V4.1's): the wide
				// tiles (64 slots a pass) in rows and over the tiled layout, at the slices
				// the binder gives them (four)
				pre := []cuda.FP4TileStep{{T: 2048, S: 4, Ks: steps[0].Ks}}
				if !up {
					pre[0].Ks = (sh.K/4 + 127) / 128 * 128
				}
				if *device != "gpu" {
					pre = []cuda.FP4TileStep{{T: 40, S: 2, Ks: 256}}
				}
				wide, err := rt.FP4TilesBench(fp4WideKernels(up), sh, pre, 9, 5)
				if err != nil {
					b.Fatal(err)
				}
				// (each form's time over the first form's at the same step: _rega's, _wide's)
				for _, set := range [][]cuda.FP4TileResult{res, wide} {
					base := map[int64]float64{}
					for _, r := range set {
						if r.Kernel == set[0].Kernel {
							base[r.T] = r.Ms
						}
						fmt.Printf("fp4 tiles: %s T %d %s: %.3f ms (×%.3f of %s), %.1f MB of weights touched, %.0f GB/s (%.1f%% of copy)\n", m.name, r.T, r.Kernel, r.Ms,
							r.Ms/base[r.T], set[0].Kernel, float64(r.Bytes)/1e6, float64(r.Bytes)/(r.Ms/1e3)/1e9, 100*float64(r.Bytes)/(r.Ms/1e3)/bw)
					}
				}
			}
		}
	})
}

// runDeviceBench opens the probe runtime and runs body b.N times, each after measuring
// the device-to-device copy rate (1 GiB, the median of 10) and printing it as the
// bench's first line, "LABEL: copy N GB/s": the benches print their lines as they come,
// not with b.Logf at the end, so that a run cut short keeps them.
func runDeviceBench(b *testing.B, label string, body func(rt *cuda.Runtime, bw float64)) {
	rt := openProbe(b)
	defer rt.Close()
	for range b.N {
		bw, err := rt.CopyBandwidth(1<<30, 10)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("%s: copy %.0f GB/s (read + write)\n", label, bw/1e9)
		body(rt, bw)
	}
}
