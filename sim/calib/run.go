package calib

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/synth"
	"deepinfer/vm/stepbench"
)

// Measured is one divm bench report and the plan it timed: the synthetic checkpoint's
// config (a model directory's config.json, cut to Layers as dic synth cuts it) compiled
// for the h200 target, which needs the config only.
type Measured struct {
	File     string // the bench report (JSON)
	Config   string // model directory holding config.json
	Layers   string // the layers dic synth kept, e.g. 4-5
	Numerics string // fast or exact
	Run      string // the run that measured it, e.g. "run 9 (H200, 2026-12-02)": names a fit on it
}

// The runs whose reports are committed (testdata/run8, testdata/run9, testdata/run11; their
// READMEs name the device, date and commands).
const (
	RunName8   = "run 8 (H200, 2026-12-02)"
	RunName9   = "run 9 (H200, 2026-12-02)"
	RunName11  = "run 11c (H200, 2026-12-02)"
	RunName11d = "run 11d (H200, 2026-12-02)"
	RunName12  = "run 12 (H200, 2026-12-02)"
	RunName13  = "run 13 (H200, 2026-12-02)"
	RunName14  = "run 14 (H200, 2026-12-02)"
	RunName15  = "run 15 (H200, 2026-12-02)"
	RunName16  = "run 16 (H200, 2026-12-02/03)"
	RunName17  = "run 17 (H200, 2026-12-03)"
	RunName18  = "run 18 (H200, 2026-12-03)"
	RunName19  = "run 19 (H200, 2026-12-03)"
	RunName20  = "run 20 (H200, 2026-12-03)"
	RunName21  = "run 21 (H200, 2026-12-03)"
	RunName22  = "run 22 (H200, 2026-12-03)"
	RunName23  = "run 23 (H200, 2026-12-03)"
	RunName25  = "run 25 (H200, 2026-12-04)"
	RunName26  = "run 26 (H200, 2026-12-04)"
	RunName27  = "run 27 (H200, 2026-12-04)"
	RunName28  = "run 28 (H200, 2026-12-04)"
	RunName29  = "run 29 (H200, 2026-12-04)"
	RunName30  = "run 30 (H200, 2026-12-04)"
	RunName31  = "run 31 (H200, 2026-12-05)"
	RunName33  = "run 33 (H200, 2026-12-05)"
	RunName42  = "run 42 (H200, 2026-12-06)"
	RunName48  = "run 48 (H200, 2026-12-06)"
)

// Run8Fast are run 8's fast-mode reports (CUDA graphs on), relative to the repository
// root: the fast kernels before run 9's changes. cuda-fast was fitted on them until run 9;
// they are kept to compare with run 8's graphs-off report and to show how that fit does
// on run 9's kernels.
var Run8Fast = []Measured{
	{"sim/calib/testdata/run8/v4.fast.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName8},
	{"sim/calib/testdata/run8/v4.fast.long.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName8},
	{"sim/calib/testdata/run8/v41.fast.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName8},
	{"sim/calib/testdata/run8/v41.fast.long.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName8},
}

// Run8Exact are run 8's exact-mode reports: the shipped cuda-exact is fitted on them.
var Run8Exact = []Measured{
	{"sim/calib/testdata/run8/v4.exact.bench.json", "testdata/deepseek-v4-flash", "4-5", "exact", RunName8},
	{"sim/calib/testdata/run8/v41.exact.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "exact", RunName8},
}

// Run8 are all of run 8's graphs-on reports (testdata/run8, NVIDIA H200, 2026-12-02).
var Run8 = append(append([]Measured{}, Run8Fast...), Run8Exact...)

// Run8NoGraphs is run 8's graphs-off report (V4 fast, context 512, every kernel
// launched one by one): step times only, no class times; compared, not fitted.
var Run8NoGraphs = Measured{"sim/calib/testdata/run8/v4.fast.nographs.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName8}

// Run9 are run 9's reports (testdata/run9, NVIDIA H200, 2026-12-02, CUDA graphs on),
// fast mode only. cuda-fast was fitted on them until run 11; they are kept to show how
// that fit does on run 11c's kernels, compared, not fitted.
var Run9 = []Measured{
	{"sim/calib/testdata/run9/v4.fast.ctx512.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName9},
	{"sim/calib/testdata/run9/v4.fast.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName9},
	{"sim/calib/testdata/run9/v4.fast.long.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName9},
	{"sim/calib/testdata/run9/v41.fast.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName9},
	{"sim/calib/testdata/run9/v41.fast.long.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName9},
}

// Run11 are run 11c's fast reports (testdata/run11, NVIDIA H200, 2026-12-02, CUDA graphs
// on), the same set as run 9's (V4 at contexts 512, 4,096 and 32,768, V4.1 at 4,096 and
// 32,768): the shipped cuda-fast is fitted on them.
var Run11 = []Measured{
	{"sim/calib/testdata/run11/v4.fast.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName11},
	{"sim/calib/testdata/run11/v4.fast.long.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName11},
	{"sim/calib/testdata/run11/v41.fast.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName11},
	{"sim/calib/testdata/run11/v41.fast.long.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName11},
}

// Run11Later are run 11's other fast reports, compared with the fit on Run12Fit (TestRun11Later), not fitted:
// V4 at context 512 with the FP4 register tiles (the default kernels since run 11c), and
// V4.1 at 4,096 in run 11d (after run 11c's V4.1 changes were partly reverted).
var Run11Later = []Measured{
	{"sim/calib/testdata/run11/v4.fast.cmp.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName11},
	{"sim/calib/testdata/run11/v41.fast.11d.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName11d},
}

// Run12 are run 12's fast reports of the current kernels (testdata/run12: V4 at 512,
// 4,096 and 32,768 from run 12b; V4.1 at 4,096, batches 1 to 64, from run 12c). The shipped
// cuda-fast is fitted on them and on run 11c's V4.1 report at 32,768 (Run12Fit).
var Run12 = []Measured{
	{"sim/calib/testdata/run12/v4.fast.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName12},
	{"sim/calib/testdata/run12/v4.fast.long.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName12},
	{"sim/calib/testdata/run12/v41.fast.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName12},
}

// Run12Fit are the fast reports cuda-fast was fitted on until run 13: run 12's, and run
// 11c's V4.1 report at 32,768 (run 12 did not bring V4.1's long-context report back; the
// V4.1 kernels run 12 changed, the router's and the mixes', do not depend on the context).
// They are kept to show how that fit does on run 13's kernels.
var Run12Fit = append(append([]Measured{}, Run12...), Run11[3])

// Run13 are run 13's fast reports of the current kernels (testdata/run13: V4 at 512,
// 4,096 and 32,768 from run 13c; V4.1 at 4,096 from run 13b; V4.1 at 32,768 from run 13a,
// with V4.1's indexer selection on launch blocks but before 13b's products without the lo
// mma, which move batch 1 by under 0.3% and batch 64 by 2.5% at 4,096). The shipped
// cuda-fast is fitted on them.
var Run13 = []Measured{
	{"sim/calib/testdata/run13/v4.fast.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName13},
	{"sim/calib/testdata/run13/v4.fast.long.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName13},
	{"sim/calib/testdata/run13/v41.fast.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName13},
	{"sim/calib/testdata/run13/v41.fast.long.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName13},
}

// Run13Later are run 13's other V4.1 reports at 4,096, compared with the fit, not
// fitted: 13a's (before the products without the lo mma) and 13b's with
// DEEPINFER_CUDA_XEXACT=0 (the same kernels with the lo mma, in the same call).
var Run13Later = []Measured{
	{"sim/calib/testdata/run13/v41.fast.13a.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName13},
	{"sim/calib/testdata/run13/v41.fast.13b.xexact0.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName13},
}

// Run14 are run 14's fast reports (testdata/run14): V4 with the uncapped one-tile FP8
// products (14b; the capped ones, today's default, at 512 in v4.fast.14b.m1bounds), V4.1
// with the compressor's projection tiles off (14a, DEEPINFER_CUDA_TILES=0: run 13's
// kernels plus the narrow attention output and the key widening of run 14), and V4.1
// with every tile on (14a, the router's and mixes' gemv tiles included, which are off
// by default). Compared with run 13's fit, not fitted (docs/perf/simulator.md).
var Run14 = []Measured{
	{"sim/calib/testdata/run14/v4.fast.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName14},
	{"sim/calib/testdata/run14/v4.fast.14b.m1bounds.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName14},
	{"sim/calib/testdata/run14/v4.fast.long.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast", RunName14},
	{"sim/calib/testdata/run14/v41.fast.14a.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName14},
	{"sim/calib/testdata/run14/v41.fast.14a.tiles.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName14},
	{"sim/calib/testdata/run14/v41.fast.long.14a.tiles.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName14},
}

// Run15 are run 15's fast reports of today's V4.1 kernels (testdata/run15, run 15c: V4.1
// at 4,096 and 32,768 with the gemv and sequential-order tiles and fma_fast).
var Run15 = []Measured{
	{"sim/calib/testdata/run15/v41.fast.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName15},
	{"sim/calib/testdata/run15/v41.fast.long.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName15},
}

// Run15Later are run 15's other V4.1 reports, compared with the fit, not fitted: 15a
// (the tiles' raw loads; the gemv tiles off, then on, in one call; the long context with
// them off), 15b (fma_fast; the gemv tiles on, then off; the long context), 15c with
// DEEPINFER_CUDA_SEQ_TILES=0 (decode steps run the same kernels: a repeat in one call).
var Run15Later = []Measured{
	{"sim/calib/testdata/run15/v41.fast.15a.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName15},
	{"sim/calib/testdata/run15/v41.fast.15a.gemvtiles.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName15},
	{"sim/calib/testdata/run15/v41.fast.long.15a.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName15},
	{"sim/calib/testdata/run15/v41.fast.15b.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName15},
	{"sim/calib/testdata/run15/v41.fast.15b.gemvtiles0.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName15},
	{"sim/calib/testdata/run15/v41.fast.long.15b.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName15},
	{"sim/calib/testdata/run15/v41.fast.15c.seqtiles0.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName15},
}

// Run16Later are run 16's V4.1 reports (testdata/run16), compared with the fit, not
// fitted: 16a's fast_gemm_wide for every FP8 product of more than 32 rows, 16b's (the
// fragment-order widening, for more than 64 rows; today's default), and each call's
// DEEPINFER_CUDA_WIDE_GEMM=0 (run 15c's kernels: repeats).
var Run16Later = []Measured{
	{"sim/calib/testdata/run16/v41.fast.16a.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName16},
	{"sim/calib/testdata/run16/v41.fast.16a.wide0.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName16},
	{"sim/calib/testdata/run16/v41.fast.16b.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName16},
	{"sim/calib/testdata/run16/v41.fast.16b.wide0.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName16},
}

// Run17Later are run 17's V4.1 reports (testdata/run17), compared with the fit, not
// fitted: V4.1's attention products on the tensor cores (17a; 17b with the keys as bf16
// halves; 17c; 17d with the binary-search sequence lookup, today's default) and 17b's and
// 17c's DEEPINFER_CUDA_V41_ATT_TC=0 (the fused multiply-adds, with 17b's softmax).
var Run17Later = []Measured{
	{"sim/calib/testdata/run17/v41.fast.17a.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName17},
	{"sim/calib/testdata/run17/v41.fast.17b.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName17},
	{"sim/calib/testdata/run17/v41.fast.17b.tc0.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName17},
	{"sim/calib/testdata/run17/v41.fast.17c.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName17},
	{"sim/calib/testdata/run17/v41.fast.17c.tc0.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName17},
	{"sim/calib/testdata/run17/v41.fast.17d.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName17},
}

// Run18 are run 18b's fast reports (testdata/run18: V4.1 at 4,096 and 32,768, batch 1 /
// 64 / 256, with the index scores on a launch block a row; today's default, 18c, differs
// only in how those blocks widen the keys and was timed at 4,096 only).
var Run18 = []Measured{
	{"sim/calib/testdata/run18/v41.fast.18b.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName18},
	{"sim/calib/testdata/run18/v41.fast.long.18b.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName18},
}

// Run18Later are run 18's other V4.1 reports, compared with the fit, not fitted: 18a
// (run 17d's kernels, at 4,096 and 32,768), 18b with DEEPINFER_CUDA_INDEX_BLOCK=0 (the
// index scores a work item a (row, key), in the same call) and 18c (today's default: the
// index scores' keys widened from words and their products fused; 4,096 only).
var Run18Later = []Measured{
	{"sim/calib/testdata/run18/v41.fast.18c.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName18},
	{"sim/calib/testdata/run18/v41.fast.18a.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName18},
	{"sim/calib/testdata/run18/v41.fast.long.18a.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName18},
	{"sim/calib/testdata/run18/v41.fast.18b.index0.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast", RunName18},
}

// Run19Later are run 19's V4.1 reports (testdata/run19), compared with the run-18 fit,
// not fitted: 19a (the staged float32 head, four blocks an SM; at 4,096 and 32,768; and
// with DEEPINFER_CUDA_STAGE_F32=0, fast_gemm_blk_f32, in the same call), 19b (the key
// widening a warp a key; the staged head's second form; with fast_gemm_blk_f32 and with
// the one-tile-at-a-time form in the same call), 19c (today's default, a short call).
var Run19Later = v41Fast(RunName19,
	"run19/v41.fast.19a.bench.json",
	"run19/v41.fast.19a.stage0.bench.json",
	"run19/v41.fast.long.19a.bench.json",
	"run19/v41.fast.19b.bench.json",
	"run19/v41.fast.19b.stage0.bench.json",
	"run19/v41.fast.19b.stagep.bench.json",
	"run19/v41.fast.19c.bench.json",
)

// Run20Later are run 20's V4.1 reports (testdata/run20), compared with the run-18 fit,
// not fitted: 20a (fast_gemm_blk_f32 for the head, then the default, at 4,096 and
// 32,768; with the two-block staged head, DEEPINFER_CUDA_STAGE_F32=2, in the same call),
// 20b (the quantization and split in one launch, the key widening's lo halves only
// where nonzero, the staged head from 128 rows: today's default; with
// DEEPINFER_CUDA_QUANT_SPLIT=0 in the same call), 20c (today's default at 32,768).
var Run20Later = v41Fast(RunName20,
	"run20/v41.fast.20a.bench.json",
	"run20/v41.fast.20a.stage2.bench.json",
	"run20/v41.fast.long.20a.bench.json",
	"run20/v41.fast.20b.bench.json",
	"run20/v41.fast.20b.split0.bench.json",
	"run20/v41.fast.long.20c.bench.json",
)

// Run21 are run 21b's fast reports (testdata/run21: V4.1 at 4,096 and 32,768, batch 1 /
// 64 / 256; today's decode kernels: run 20b's, the key widening's scale index by a
// 32-bit division; the wide FP4 tiles, also new there, run only in prefills).
var Run21 = v41Fast(RunName21,
	"run21/v41.fast.21b.bench.json",
	"run21/v41.fast.long.21b.bench.json",
)

// Run21Later are run 21's other V4.1 reports, compared with the fit, not fitted: 21a
// (the same decode kernels, at 4,096; with the first form of the wide FP4 tiles,
// DEEPINFER_CUDA_FP4_WIDE=1 then, in the same call: decode steps do not run them), 21c
// (today's default again, at 4,096; with the FP4 register tiles two steps ahead, since removed,
// DEEPINFER_CUDA_FP4_DEPTH=2, and with DEEPINFER_CUDA_BLOCK_GEMM=0, in the same call).
var Run21Later = v41Fast(RunName21,
	"run21/v41.fast.21a.bench.json",
	"run21/v41.fast.21a.wide.bench.json",
	"run21/v41.fast.21c.bench.json",
	"run21/v41.fast.21c.depth2.bench.json",
	"run21/v41.fast.21c.block0.bench.json",
)

// Run22 are run 22c's fast reports (testdata/run22: V4.1 at 4,096 and 32,768, batch 1 /
// 64 / 256; today's decode kernels: the FP4 register tiles compiled for bf16
// activations, the one-row FP8 loop alone with the activations ahead, fast_gemm_wide
// from 33 rows; every kernel then also began with the two instructions of programmatic
// dependent launches, off there and removed after run 22).
var Run22 = v41Fast(RunName22,
	"run22/v41.fast.22c.bench.json",
	"run22/v41.fast.long.22c.bench.json",
)

// Run22Later are run 22's other V4.1 reports, compared with the fit, not fitted: 22a
// (run 21's default at 4,096, and in the same call with DEEPINFER_CUDA_FP4_WIDE=3 — the
// same decode kernels —, DEEPINFER_CUDA_FP4_XE=1 and DEEPINFER_CUDA_M1_ONLY=1), 22b (the
// register tiles for bf16 activations by default, programmatic dependent launches on;
// and in the same call with them off, with the one-row FP8 loop's activations ahead,
// with fast_gemm_wide from 33 rows), 22c (the default with programmatic dependent
// launches on). Programmatic dependent launches were removed after run 22.
var Run22Later = v41Fast(RunName22,
	"run22/v41.fast.22a.bench.json",
	"run22/v41.fast.22a.wide3.bench.json",
	"run22/v41.fast.22a.xe.bench.json",
	"run22/v41.fast.22a.m1only.bench.json",
	"run22/v41.fast.22b.pdl.bench.json",
	"run22/v41.fast.22b.bench.json",
	"run22/v41.fast.22b.m1only.bench.json",
	"run22/v41.fast.22b.widemin.bench.json",
	"run22/v41.fast.22c.pdl.bench.json",
)

// Run23 are run 23c's fast reports (testdata/run23: V4.1 at 4,096 and 32,768, batch 1 /
// 64 / 256; today's decode kernels: the LM head on wgmma (fast_gemm_wg_f32) with its
// input as bf16 values, the router's tiles staged by cp.async, rope's four-value copies,
// the one-warp routing scans and spread index check, mhc_expand4, the experts' output
// summing its w2 slices).
var Run23 = v41Fast(RunName23,
	"run23/v41.fast.23c.bench.json",
	"run23/v41.fast.long.23c.bench.json",
)

// Run23Later are run 23's other V4.1 reports, compared with the fit, not fitted: 23a
// (run 22's default with rope_copy4, at 4,096; in the same call with the router's and
// mixes' staged tiles, DEEPINFER_CUDA_GEMV_ASYNC=1 then, and with the two-value rope
// copies, DEEPINFER_CUDA_ROPE_COPY4=0), 23b (the staged router tiles, the head's bf16
// input, the serial loops spread; the head on mma.sync then, and in the same call on
// wgmma, DEEPINFER_CUDA_HEAD_WG=1; and at 32,768), 23c (today's default with
// DEEPINFER_CUDA_EXPAND4=0 and with DEEPINFER_CUDA_MOE_OUT_PARTS=0).
var Run23Later = v41Fast(RunName23,
	"run23/v41.fast.23a.bench.json",
	"run23/v41.fast.23a.gemvasync.bench.json",
	"run23/v41.fast.23a.ropecopy1.bench.json",
	"run23/v41.fast.23b.bench.json",
	"run23/v41.fast.23b.headwg.bench.json",
	"run23/v41.fast.long.23b.bench.json",
	"run23/v41.fast.23c.expand1.bench.json",
	"run23/v41.fast.23c.dsum.bench.json",
)

// Run25 are run 25's fast reports of today's default (testdata/run25): V4 (layers 4-5)
// at 512, 4,096 (25c) and 32,768 (25c), its block products on wgmma
// (fast_gemm_wg_bf16, fast_gemm_wg_fp8r) for the first time, and V4.1 at 4,096 and
// 32,768 (25a: run 24's kernels, the wgmma FP8 products and two-set head the default).
var Run25 = append(v4Fast(RunName25,
	"run25/v4.fast.25c.bench.json",
	"run25/v4.fast.long.25c.bench.json",
), v41Fast(RunName25,
	"run25/v41.fast.25a.bench.json",
	"run25/v41.fast.long.25a.bench.json",
)...)

// Run25Later are run 25's other reports, compared with the fit, not fitted: V4 in 25a
// (the default before the wgmma block products, at 512 / 4,096 and 32,768), in 25b (the
// new default; with both wgmma block products off, DEEPINFER_CUDA_WG_BF16=0
// DEEPINFER_CUDA_WG_FP8R=0; with the FP8 one off) and in 25c with the three-block FP4
// tiles (DEEPINFER_CUDA_FP4_REG3=1, removed since), in 25d (both wgmma register kernels
// on x in fragment order, and both on fast_split's order: today's default runs the FP8
// one on the first, the bf16 one on the second), V4.1 in 25c (the default, and with the
// three-block switch, which V4.1's tiles do not take).
var Run25Later = append(v4Fast(RunName25,
	"run25/v4.fast.25a.bench.json",
	"run25/v4.fast.long.25a.bench.json",
	"run25/v4.fast.25b.bench.json",
	"run25/v4.fast.25b.blk.bench.json",
	"run25/v4.fast.25b.wgbf16only.bench.json",
	"run25/v4.fast.25c.reg3.bench.json",
	"run25/v4.fast.25d.bench.json",
	"run25/v4.fast.25d.n.bench.json",
), v41Fast(RunName25,
	"run25/v41.fast.25c.bench.json",
	"run25/v41.fast.25c.reg3.bench.json",
)...)

// Run26Later are run 26's reports (testdata/run26), compared with the run-25 fit, not
// fitted: V4 at 512 in 26a (the halves-as-columns FP4 tiles, removed since, and the
// default of the time in the same call), 26b (V4's router and mixes in part tiles,
// unbounded, and a sum a work item in the same call; at 4,096 too), 26c (the tiles at
// most 128 registers, and a sum a work item), 26d (the router's tiles from 128 tokens:
// at 512 and 4,096) and 26e (the mixes' sums a warp an item); V4.1 at 4,096 in 26b (both
// switch settings: V4.1 runs neither kernel) and 26d.
var Run26Later = append(v4Fast(RunName26,
	"run26/v4.fast.26a.regh.bench.json",
	"run26/v4.fast.26a.reg.bench.json",
	"run26/v4.fast.26b.bench.json",
	"run26/v4.fast.26b.off.bench.json",
	"run26/v4.fast.26c.bench.json",
	"run26/v4.fast.26c.off.bench.json",
	"run26/v4.fast.26d.bench.json",
	"run26/v4.fast.26e.bench.json",
), v41Fast(RunName26,
	"run26/v41.fast.26b.bench.json",
	"run26/v41.fast.26b.off.bench.json",
	"run26/v41.fast.26d.bench.json",
)...)

// Run27Later are run 27's other reports (testdata/run27), compared with the fit, not
// fitted: V4 at 32,768, 4,096 and 512 in 27a (the default of run 26, and at 32,768 with
// the opt-in index scores a block per row and 128 entries and the selection at every
// step size), 27b (V4's index scores on att_index_score_t's first form, and at 32,768 the
// 128-entry blocks), 27c (the tiles' second form, and the 128-entry blocks), 27d (the
// tiles at most 128 registers with the rows' visible entries from att_index_qd; at
// 32,768 run 26's default in the same call), 27e (the tiles 16 key values a stage), 27f
// (mhc_fast_mix_part 32 terms' loads ahead, no change), V4.1 at 4,096 in 27d (V4's
// switches, which V4.1 does not read, both ways).
var Run27Later = append(v4Fast(RunName27,
	"run27/v4.fast.27a.bench.json",
	"run27/v4.fast.27a.cmp.bench.json",
	"run27/v4.fast.27b.bench.json",
	"run27/v4.fast.27b.cmp.bench.json",
	"run27/v4.fast.27c.bench.json",
	"run27/v4.fast.27c.cmp.bench.json",
	"run27/v4.fast.27d.bench.json",
	"run27/v4.fast.27d.cmp.bench.json",
	"run27/v4.fast.27e.bench.json",
	"run27/v4.fast.27f.bench.json",
), v41Fast(RunName27,
	"run27/v41.fast.27d.cmp.bench.json",
)...)

// Run28Later are run 28's other reports (testdata/run28), compared with the fit, not
// fitted: V4 and V4.1 at 4,096 in 28a (the part tiles' rows read without wval's switch;
// the one-to-four-row products on fast_gemv's first form, every format, and on the tiles
// in .cmp), 28c (fast_gemv's second form, every format, V4 at 32,768 too; .cmp the
// tiles), 28d's comparisons (the tiles at 4,096).
var Run28Later = append(v4Fast(RunName28,
	"run28/v4.fast.28a.bench.json",
	"run28/v4.fast.28a.cmp.bench.json",
	"run28/v4.fast.28c.bench.json",
	"run28/v4.fast.28c.cmp.bench.json",
	"run28/v4.fast.28d.cmp.bench.json",
), v41Fast(RunName28,
	"run28/v41.fast.28a.bench.json",
	"run28/v41.fast.28a.cmp.bench.json",
	"run28/v41.fast.28c.bench.json",
	"run28/v41.fast.28c.cmp.bench.json",
	"run28/v41.fast.28d.cmp.bench.json",
)...)

// Run29Later are run 29's reports (testdata/run29), compared with the shipped fit (run
// 28's), not fitted: 29a (V4 at 512 and 4,096, V4.1 at 4,096, every kernel a
// programmatic dependent launch; .cmp ordinary launches: both with the griddepcontrol
// instructions in every kernel, removed after the run), 29c (greedy
// sampling on warps, fast_gemv's FP8 weights loaded a trip ahead and V4.1's norms'
// cascade blocks in parallel; .cmp without the last two, which were reverted: the code
// shipped after run 29).
var Run29Later = append(v4Fast(RunName29,
	"run29/v4.fast.29a.bench.json",
	"run29/v4.fast.29a.cmp.bench.json",
	"run29/v4.fast.29c.bench.json",
	"run29/v4.fast.29c.cmp.bench.json",
), v41Fast(RunName29,
	"run29/v41.fast.29a.bench.json",
	"run29/v41.fast.29a.cmp.bench.json",
	"run29/v41.fast.29c.bench.json",
	"run29/v41.fast.29c.cmp.bench.json",
)...)

// Run30Later are run 30's greedy reports (testdata/run30), compared with the shipped
// fit (run 28's), not fitted: 30a and 30b (the bench feeding each row the token it
// sampled, as every run before; 30a the warp sampler of run 29, 30b the launch-block
// sampler's first form), 30c (each row fed a fresh random token every step: V4.1's
// rows no longer fall onto the same few experts; 4,096 and 32,768) and 30d (the
// sampler's histogram in 32-bit parts; random tokens; 4,096) and 30e (V4 only, the
// sampler a block of 1,024 threads a row). Of the sampled reports (.sample.) 30e's is
// fitted (Run30Sampled); 30a-30d's timed earlier forms of the sampler and are not compared.
var Run30Later = append(v4Fast(RunName30,
	"run30/v4.fast.30a.bench.json",
	"run30/v4.fast.30b.bench.json",
	"run30/v4.fast.30c.bench.json",
	"run30/v4.fast.30d.bench.json",
	"run30/v4.fast.30e.bench.json",
), v41Fast(RunName30,
	"run30/v41.fast.30a.bench.json",
	"run30/v41.fast.30b.bench.json",
	"run30/v41.fast.30c.bench.json",
	"run30/v41.fast.30d.bench.json",
)...)

// Run31Later are run 31's reports (testdata/run31, one call, 4,096 only), compared with
// the shipped fit (run 30c's), not fitted: the default of that call (31a: the launch
// cuts after run 30 all on, the staged one-row FP8 products, the wgmma products two steps
// ahead) and each switch against it (.cmp: the launch cuts off; .cmp2: the staged
// one-row products off; .cmp3: the two-steps-ahead wgmma forms off; .cmp4, V4.1 only:
// the LM heads on the staged CUDA-core kernels). The default shipped since is none of
// these (each change kept only where run 31 measured it faster), so no fit is made on
// them.
var Run31Later = append(v4Fast(RunName31,
	"run31/v4.fast.31a.bench.json",
	"run31/v4.fast.31a.cmp.bench.json",
	"run31/v4.fast.31a.cmp2.bench.json",
	"run31/v4.fast.31a.cmp3.bench.json",
), v41Fast(RunName31,
	"run31/v41.fast.31a.bench.json",
	"run31/v41.fast.31a.cmp.bench.json",
	"run31/v41.fast.31a.cmp2.bench.json",
	"run31/v41.fast.31a.cmp3.bench.json",
	"run31/v41.fast.31a.cmp4.bench.json",
)...)

// Run33Later are run 33's reports (testdata/run33, the H200) that the run-30 fit (shipped
// until run 33) is documented against: the default shipped since run 32 as one (33a:
// V4.1 at 4,096 and 32,768; 33b: V4 at both; the run-33 fit's reports, Run33Fit) and, at
// 4,096, batch 64 and 256, the block-scaled FP4 expert tiles (33a .cmp; slower, removed
// after the run).
var Run33Later = append(append([]Measured{}, Run33Fit...), Run33Unfitted[0])

// Run33Unfitted are run 33's reports the run-33 fit (Run33Fit) is not fitted on,
// compared with it: the block-scaled FP4 expert tiles (33a .cmp, V4.1 at 4,096, batch 64
// and 256; removed after the run, so not fitted) and 33c (V4.1 at 4,096, batch 256 only,
// three steps, not profiled: its step alone is compared).
var Run33Unfitted = v41Fast(RunName33,
	"run33/v41.fast.33a.cmp.bench.json",
	"run33/v41.fast.33c.bench.json",
)

// Run42Unfitted are run 42's reports the run-42 fit (Run42Fit) is not fitted on,
// compared with it: at 32,768, batch 64 and 256, V4.1's index scores on the tensor
// cores (42a .cmp, DEEPINFER_CUDA_INDEX_TC=1, opt-in) and on their old launch grid (42a
// .cmp2, DEEPINFER_CUDA_INDEX_BLOCKS=1000000000), alternate forms of one kernel timed in
// the same call as the default; and 42c (V4.1 at 4,096, batch 256 only, two steps, not
// profiled, in the call that ran Nsight Compute after the bench: its step alone is
// compared).
var Run42Unfitted = v41Fast(RunName42,
	"run42/v41.fast.42a.cmp.bench.json",
	"run42/v41.fast.42a.cmp2.bench.json",
	"run42/v41.fast.42c.bench.json",
)

// Run48 is run 48a's fast report (V4.1 at 4,096 on the H200, the default of commit
// 47a5519: runs 43 to 47 changed V4.1's kernels on H100s), which no fit has seen: the
// shipped cuda-fast (run 42's) is compared with it.
var Run48 = v41Fast(RunName48, "run48/v41.fast.48a.bench.json")

// v4Fast lists fast-mode reports of V4's layers 4-5 (testdata/deepseek-v4-flash) from
// one run, by their paths under sim/calib/testdata.
func v4Fast(run string, files ...string) []Measured {
	ms := make([]Measured, len(files))
	for i, f := range files {
		ms[i] = Measured{"sim/calib/testdata/" + f, "testdata/deepseek-v4-flash", "4-5", "fast", run}
	}
	return ms
}

// v41Fast lists fast-mode reports of V4.1's layers 20-23 (testdata/deepseek-v4.1-flash)
// from one run, by their paths under sim/calib/testdata.
func v41Fast(run string, files ...string) []Measured {
	ms := make([]Measured, len(files))
	for i, f := range files {
		ms[i] = Measured{"sim/calib/testdata/" + f, "testdata/deepseek-v4.1-flash", "20-23", "fast", run}
	}
	return ms
}

// Run15Fit are the fast reports cuda-fast was fitted on until run 18: V4's from run 14b
// at 512, 4,096 and 32,768 (today's V4 kernels but for the one-tile FP8 products, which
// ran uncapped there; the capped ones, today's default, moved only batch 1, by 4%, and
// are compared in TestRun14), V4.1's from run 15c.
var Run15Fit = append([]Measured{Run14[0], Run14[2]}, Run15...)

// Run18Fit are the fast reports cuda-fast was fitted on from run 18 until run 21: V4's
// from run 14b, as in Run15Fit (V4's kernels have not changed since but for the
// one-tile FP8 products' cap), V4.1's from run 18b. Runs 18 to 20's later reports are
// documented against that fit (with the heap term of run 19).
var Run18Fit = append([]Measured{Run14[0], Run14[2]}, Run18...)

// Run21Fit are the fast reports cuda-fast was fitted on from run 21 until run 22: V4's
// from run 14b, as before, V4.1's from run 21b. Run 21's later reports are documented
// against that fit.
var Run21Fit = append([]Measured{Run14[0], Run14[2]}, Run21...)

// Run22Fit are the fast reports cuda-fast was fitted on from run 22 until run 23: V4's
// from run 14b, as before, V4.1's from run 22c. Run 22's later reports are documented
// against that fit.
var Run22Fit = append([]Measured{Run14[0], Run14[2]}, Run22...)

// Run23Fit are the fast reports cuda-fast was fitted on from run 23 until run 25: V4's
// from run 14b, as before, V4.1's from run 23c.
var Run23Fit = append([]Measured{Run14[0], Run14[2]}, Run23...)

// Run25Fit are the fast reports cuda-fast was fitted on from run 25 until run 26: run
// 25's (V4's from 25c, the first V4 reports since run 14b; V4.1's from 25a). Run 26's
// reports are documented against that fit (TestRun25FitOnRun26).
var Run25Fit = Run25

// Run26Fit are the fast reports cuda-fast was fitted on from run 26 until run 27: V4 at 512 and 4,096
// from run 26d (the router's and mixes' part tiles; the mixes' sums still one thread an
// item, as before run 26e) and at 32,768 from run 25c (the router and mixes of before
// the tiles: without it V4's context terms come from 512 and 4,096 alone, and V4 at
// 32,768, batch 1, falls 18.6% under), V4.1 at 4,096 from 26d and at 32,768 from run 25a
// (V4.1's kernels have not changed since). docs/perf/simulator.md, "The run 26 refit".
var Run26Fit = append(v4Fast(RunName26,
	"run26/v4.fast.26d.bench.json",
), append([]Measured{Run25[1]}, append(v41Fast(RunName26,
	"run26/v41.fast.26d.bench.json",
), Run25[3])...)...)

// Run27Fit are the fast reports the shipped cuda-fast is fitted on: V4 at 512, 4,096 and
// 32,768 from run 27g (V4's index scores on att_index_score_t and the selection at
// every step size: 9.9 → 2.0 ms at batch 256 and 32,768; mhc_fast_mix_part without
// wval's switch around its loads), V4.1 at 4,096 from 27d and at
// 32,768 from run 25a (V4.1's kernels have not changed since). docs/perf/simulator.md,
// "The run 27 refit".
var Run27Fit = append(v4Fast(RunName27,
	"run27/v4.fast.27g.bench.json",
), append(v41Fast(RunName27,
	"run27/v41.fast.27d.bench.json",
), Run25[3])...)

// Run28Fit are the fast reports cuda-fast was fitted on from run 28 until run 30: V4 at 4,096 and
// 32,768 from run 28d (the router's and mixes' part tiles reading their rows without
// wval's switch: the router's 0.72 → 0.13 ms at batch 256; V4's FP8 products of one to
// four rows on fast_gemv_fp8), V4.1 at 4,096 from 28d (its FP8 one-row products on
// fast_gemv_fp8_q) and at 32,768 from run 25a (V4.1's other kernels have not changed
// since). No V4 report at 512 (run 28 timed none): V4's context terms come from 4,096
// and 32,768. docs/perf/simulator.md, "The run 28 refit".
var Run28Fit = append(v4Fast(RunName28,
	"run28/v4.fast.28d.bench.json",
), append(v41Fast(RunName28,
	"run28/v41.fast.28d.bench.json",
), Run25[3])...)

// Run30Fit are the fast reports cuda-fast was fitted on from run 30 until run 33: V4 and
// V4.1 at 4,096 and 32,768 from run 30c, one call, the bench feeding each row a fresh
// random token every step (before run 30c V4.1's rows fell onto the same few experts, so
// every V4.1 fit before this one learned expert and product classes cheaper than
// independent requests make them). Runs 30, 31 and 33's reports are documented against
// that fit (with Run30Sampled's sampler class). docs/perf/simulator.md, "The run 30 refit".
var Run30Fit = append(v4Fast(RunName30,
	"run30/v4.fast.30c.bench.json",
), v41Fast(RunName30,
	"run30/v41.fast.30c.bench.json",
)...)

// Run30Sampled are the sampled reports cuda-fast's sampled sampler class is fitted on
// (FitCalibrations): V4 at 4,096, batch 1, 64 and 256, from run 30e, the sampler a
// launch block of 1,024 threads a row (the kernel shipped since). Run 30's other sampled
// reports timed earlier forms of the kernel; no V4.1 report times this one (the class is
// put in V4.1's table from V4's: the same kernel and vocabulary).
var Run30Sampled = v4Fast(RunName30,
	"run30/v4.fast.30e.sample.bench.json",
)

// Run33Fit are the fast reports cuda-fast was fitted on from run 33 until run 42: V4 at
// 4,096 and 32,768 from run 33b and V4.1 at both from 33a, the default shipped since run
// 32 timed as one on the H200 (the one-row FP8 products on fast_gemv1p_fp8_q, the
// attention output's csa_tc_out_na, the launch cuts, the shared quantizations, rope_one),
// the bench's rows fed random tokens as in run 30c. Not 33a's .cmp (the block-scaled FP4
// tiles, removed) nor 33c (batch 256 alone, not profiled): Run33Unfitted. Run 33's
// other reports and run 42's are documented against that fit (with Run30Sampled's
// sampler class). docs/perf/simulator.md, "The run 33 refit".
var Run33Fit = append(v4Fast(RunName33,
	"run33/v4.fast.33b.bench.json",
), v41Fast(RunName33,
	"run33/v41.fast.33a.bench.json",
)...)

// Run42Fit are the fast reports the shipped cuda-fast is fitted on (since run 42): V4 at
// 512 and 4,096 from run 42b and V4.1 at 4,096 and 32,768 from 42a, the default of run
// 42 on the H200 (the first H200 reports since run 33; runs 34 to 41 ran on H100s), the
// bench's rows fed random tokens as in run 30c. V4 has no 32,768 point (run 42 timed
// none): V4's context terms come from 512 and 4,096. Not 42a's .cmp and .cmp2 (alternate
// forms of V4.1's index scores) nor 42c (batch 256 alone, not profiled): Run42Unfitted.
// docs/perf/simulator.md, "The run 42 refit".
var Run42Fit = append(v4Fast(RunName42,
	"run42/v4.fast.42b.bench.json",
), v41Fast(RunName42,
	"run42/v41.fast.42a.bench.json",
)...)

// Shipped are the reports the shipped calibrations (fitted.go) are fitted on: cuda-fast
// on Run42Fit and its sampled sampler on Run30Sampled (runs 33 and 42 timed no sampled
// rows), cuda-exact on run 8's exact reports (runs 9 to 42 took none; until run 30 the
// exact kernels had changed since only in how V4's routing is split into launches and in
// how the work of a few kernels is spread over lanes or launch blocks, with the same
// values).
var Shipped = append(append(append([]Measured{}, Run42Fit...), Run30Sampled...), Run8Exact...)

// SynthPlan compiles the plan of a synthetic checkpoint of the model in configDir cut
// to layers, for target, from the cut config alone (no weights).
func SynthPlan(configDir, layers, target string) (*plan.Plan, error) {
	ls, err := synth.ParseLayers(layers)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "calib-plan-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if _, err := synth.Write(configDir, dir, synth.Options{Layers: ls, ConfigOnly: true}); err != nil {
		return nil, err
	}
	out, err := compiler.Compile(compiler.Options{ModelDir: dir, Target: target})
	if err != nil {
		return nil, fmt.Errorf("%s layers %s: %w", configDir, layers, err)
	}
	return out.Plan, nil
}

// Loaded is a Measured report read, with its plan.
type Loaded struct {
	Measured
	Report *stepbench.Report
	Plan   *plan.Plan
}

// Load reads the reports and compiles their plans (for h200), relative to root; plans
// of the same config and layers are compiled once.
func Load(root string, ms []Measured) ([]Loaded, error) {
	plans := map[string]*plan.Plan{}
	var out []Loaded
	for _, m := range ms {
		r, err := ReadBench(under(root, m.File))
		if err != nil {
			return nil, err
		}
		if m.Numerics == "" {
			if m.Numerics = Numerics(r); m.Numerics == "" {
				return nil, fmt.Errorf("%s: the report does not say its numerics mode", m.File)
			}
		}
		if got := Numerics(r); got != "" && got != m.Numerics {
			return nil, fmt.Errorf("%s: measured in %s numerics, listed as %s", m.File, got, m.Numerics)
		}
		key := m.Config + "@" + m.Layers
		p := plans[key]
		if p == nil {
			if p, err = SynthPlan(under(root, m.Config), m.Layers, "h200"); err != nil {
				return nil, err
			}
			plans[key] = p
		}
		out = append(out, Loaded{Measured: m, Report: r, Plan: p})
	}
	return out, nil
}

func under(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

// FromDir lists the reports of a scripts/gpu-bench.sh output directory: v4.*.bench.json
// timed testdata/deepseek-v4-flash cut to layersV4, v41.*.bench.json
// testdata/deepseek-v4.1-flash cut to layersV41; the numerics mode is read from each
// report. The graphs-off comparison reports (*.nographs.bench.json, no class times) are
// left out: the calibrations describe steps run as captured graphs. The sampled rows'
// (*.sample.bench.json, SAMPLE_COMPARE) are listed: a fit takes only the sampler's
// sampled class from them (FitCalibrations).
func FromDir(dir, layersV4, layersV41 string) ([]Measured, error) {
	var out []Measured
	for _, c := range []struct{ glob, config, layers string }{
		{"v4.*.bench.json", "testdata/deepseek-v4-flash", layersV4},
		{"v41.*.bench.json", "testdata/deepseek-v4.1-flash", layersV41},
	} {
		files, err := filepath.Glob(filepath.Join(dir, c.glob))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if strings.HasSuffix(f, ".nographs.bench.json") {
				continue
			}
			if abs, err := filepath.Abs(f); err == nil {
				f = abs
			}
			out = append(out, Measured{File: f, Config: c.config, Layers: c.layers})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no v4.*.bench.json or v41.*.bench.json", dir)
	}
	return out, nil
}
