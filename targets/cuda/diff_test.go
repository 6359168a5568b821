package cuda_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/synth"
	"deepinfer/targets"
	_ "deepinfer/targets/all"
	"deepinfer/targets/cpu"
	"deepinfer/targets/cuda"
	"deepinfer/vm"
)

// The instruction-by-instruction check: the same plan, the same steps, on the cpu
// target's kernels and on this target's (the emulated device in CI, the GPU with
// -device gpu), every instruction's results compared as they are produced.

var device = flag.String("device", "emulated", "run the cuda runtime on the emulated device or the gpu")

var fixtures = []string{"tiny-v4-dev", "tiny-v41-dev", "tiny-v41-dev2"}

type recorder struct {
	get    func(phase string, index, j int) ([]float32, []int32, error)
	getArg func(phase string, index, j int) ([]float32, []int32, error)
	setArg func(phase string, index, j int, f []float32, i []int32) error
	vals   map[string][][]float32
	ints   map[string][][]int32
	// the reference's inputs, recorded (ref) or fed to each instruction (device, -force)
	args  map[string][][]float32
	iargs map[string][][]int32
	ref   *recorder
	step  int
	force bool // feed every instruction the reference's inputs
}

func (r *recorder) hook(phase string, index int, in *plan.Instr, run func() error) error {
	k := fmt.Sprintf("%d/%s/%d", r.step, phase, index)
	n := 0
	for j := range in.Args {
		if in.Args[j].Kind == plan.OpNone {
			continue
		}
		if in.Args[j].Kind == plan.OpSlot {
			switch {
			case r.getArg != nil:
				f, i, err := r.getArg(phase, index, n)
				if err != nil {
					return err
				}
				r.args[k] = append(r.args[k], f)
				r.iargs[k] = append(r.iargs[k], i)
			case r.ref != nil && r.force:
				m := 0
				for jj := 0; jj < j; jj++ {
					if in.Args[jj].Kind == plan.OpSlot {
						m++
					}
				}
				if err := r.setArg(phase, index, n, r.ref.args[k][m], r.ref.iargs[k][m]); err != nil {
					return err
				}
			}
		}
		n++
	}
	if err := run(); err != nil {
		return err
	}
	for j := range in.Results {
		if in.Results[j].Kind == plan.OpNone {
			continue
		}
		f, i, err := r.get(phase, index, j)
		if err != nil {
			return err
		}
		r.vals[k] = append(r.vals[k], f)
		r.ints[k] = append(r.ints[k], i)
	}
	return nil
}

// checkConfig is one instruction check: the device runtime's numerics, the largest
// relative error an instruction may show, and whether each instruction is fed the
// cpu target's inputs.
type checkConfig struct {
	numerics string
	tol      float64
	force    bool
	// gate, when set, names the ops whose errors must stay within tol; the others'
	// errors are reported (their worst in the log), not failed
	gate []string
	// prompt, when set, is the first prompt's length instead of 13 tokens (steps of
	// more rows, for the products' wide kernels)
	prompt int
	// bf16Step: a result whose values are all bf16 values on both sides (an op that
	// rounds its outputs to bf16) may also differ by one bf16 step in one of its values,
	// or one in 2,000 (another summation order moves a sum across a rounding boundary;
	// the emulated device's worst at 100 tokens: 1 of 6,784); its other values must
	// stay within tol (bf16Err)
	bf16Step bool
	// devTies, when set, is targets.EnvIndexTies for the device alone (set after the cpu
	// target has opened, for the rest of the test)
	devTies string
}

// TestFastInstructionsNearCPULongPrompt: TestFastInstructionsNearCPU's fed check with a
// first prompt of 100 tokens, so that the prefill's products take the wide kernels
// (more than 32 rows: fast_gemm_wg_fp8a, fast_gemm_wg_bf16w, the fused attention from
// its step size) that the 13-token prompt never reaches, every instruction gated at the
// same bounds but tiny-v4-dev's, and a result rounded to bf16 allowed one bf16 step in one value or one in
// 2,000 (bf16Err: at 100 tokens tiny-v41-dev has two results with one value a step from
// the cpu target's, 1 of 6,784 and 1 of 27,136 — its wkv product 0.0898 against 0.0903
// —; a step is 2^-8 of the value, not a bound on the sums; an H100 in run 40: 3 of
// 169,600 and 1 of 20,352 on the V4.1 fixtures). tiny-v4-dev's bound is 2.5e-5 instead of
// 2e-5: on an H100 (run 40) its third decode step's routed experts (the FP4 register
// tiles' order) were 2.06e-5 from the cpu target's (the emulated device 1.33e-5; the
// 13-token check's worst 1.32e-5 on the GPU).
func TestFastInstructionsNearCPULongPrompt(t *testing.T) {
	models := append([]string{}, fixtures...)
	models = append(models, quantizedV4(t))
	for _, model := range models {
		cfg := checkConfig{numerics: targets.NumericsFast, tol: 2.5e-5, force: true, prompt: 100, bf16Step: true}
		switch {
		case strings.HasPrefix(model, "tiny-v41"):
			cfg.tol = 6e-6
		case !strings.HasPrefix(model, "tiny-"):
			cfg.tol = 1.2e-5
		}
		t.Run(filepath.Base(model), func(t *testing.T) {
			if worst := checkInstructions(t, model, cfg); worst == 0 {
				t.Fatal("every instruction equal to the cpu target's: the fast products did not run")
			}
		})
	}
}

// TestBF16Err: bf16Err's step count and error on hand-made results.
func TestBF16Err(t *testing.T) {
	bf := func(u uint16) float32 { return math.Float32frombits(uint32(u) << 16) }
	one, next, two := bf(0x3f80), bf(0x3f81), bf(0x3f82) // 1, 1 + 2^-7, 1 + 2^-6
	for _, c := range []struct {
		a, b  []float32
		e     float64
		steps int
		ok    bool
	}{
		{[]float32{one, one}, []float32{one, one}, 0, 0, true},
		{[]float32{next, one}, []float32{one, one}, 0, 1, true},
		{[]float32{two, one}, []float32{one, one}, 1.0 / 64, 0, true},
		{[]float32{bf(0x0001), one}, []float32{bf(0x8001), one}, float64(bf(0x0001)) * 2, 0, true}, // two steps across zero
		{[]float32{bf(0x0000), one}, []float32{bf(0x8001), one}, 0, 1, true},                       // one step across zero
		{[]float32{one + 1e-6, one}, []float32{one, one}, 0, 0, false},                             // not a bf16 value
	} {
		e, steps, ok := bf16Err(c.a, c.b)
		if ok != c.ok || (ok && (steps != c.steps || math.Abs(e-c.e) > 1e-12*max(1, c.e))) {
			t.Errorf("bf16Err(%v, %v) = %g, %d, %v; want %g, %d, %v", c.a, c.b, e, steps, ok, c.e, c.steps, c.ok)
		}
	}
}

// flagConfig is the check the flags ask for.
func flagConfig() checkConfig {
	c := checkConfig{numerics: *numerics, tol: *tol, force: *force}
	if c.tol < 0 {
		c.tol = 0
		if *device == "gpu" {
			c.tol = 2e-6
		}
	}
	return c
}

func openPair(t *testing.T, model string, cfg checkConfig) (*plan.Plan, targets.Runtime, targets.Runtime, *recorder, *recorder) {
	t.Helper()
	dir := model
	if !strings.Contains(model, "/") {
		dir = "../../testdata/" + model
	}
	out, err := compiler.Compile(compiler.Options{ModelDir: dir, Target: "h200"})
	if err != nil {
		t.Fatal(err)
	}
	p := out.Plan
	ws, err := vm.LoadWeights(p, dir)
	if err != nil {
		t.Fatal(err)
	}
	ref := &recorder{vals: map[string][][]float32{}, ints: map[string][][]int32{}, args: map[string][][]float32{}, iargs: map[string][][]int32{}}
	dev := &recorder{vals: map[string][][]float32{}, ints: map[string][][]int32{}, ref: ref, force: cfg.force}
	c, err := cpu.OpenAny(p, ws, targets.Options{Hook: ref.hook})
	if err != nil {
		t.Fatal(err)
	}
	acc := c.(interface {
		Result(string, int, int) ([]float32, []int32, error)
		Arg(string, int, int) ([]float32, []int32, error)
	})
	ref.get, ref.getArg = acc.Result, acc.Arg
	var g *cuda.Runtime
	if cfg.devTies != "" {
		t.Setenv(targets.EnvIndexTies, cfg.devTies)
	}
	switch *device {
	case "gpu":
		r, err := cuda.Open(p, ws, targets.Options{Hook: dev.hook, MaxTokens: max(64, cfg.prompt+32), Numerics: cfg.numerics})
		if err != nil {
			t.Fatal(err)
		}
		g = r.(*cuda.Runtime)
	default:
		g, err = cuda.OpenEmulated(p, ws, targets.Options{Hook: dev.hook, MaxTokens: 64, Numerics: cfg.numerics}, 4<<30)
		if err != nil {
			t.Fatal(err)
		}
	}
	dev.get, dev.setArg = g.Result, g.SetArg
	t.Logf("%s on %s: %+v", model, *device, g.Info())
	return p, c, g, ref, dev
}

// relErr is max|a-b| / max|b|.
// bf16Err: for two results whose every value is a bf16 value (the low 16 bits of each
// float32 zero), the relative error (relErr's: over the largest reference magnitude) of
// the values more than one bf16 step apart, and how many are exactly one step apart
// (adjacent bf16 values, across zero too); ok false where a value is not a bf16 value.
func bf16Err(a, b []float32) (e float64, steps int, ok bool) {
	// ord maps a bf16 value's bits to an integer that grows by one a step
	ord := func(f float32) int64 {
		u := int64(math.Float32bits(f) >> 16)
		if u&0x8000 != 0 {
			return -(u & 0x7fff)
		}
		return u
	}
	var d, m float64
	for i := range b {
		if math.Float32bits(a[i])&0xffff != 0 || math.Float32bits(b[i])&0xffff != 0 {
			return 0, 0, false
		}
		if math.IsNaN(float64(a[i])) != math.IsNaN(float64(b[i])) {
			return math.Inf(1), 0, true
		}
		m = max(m, math.Abs(float64(b[i])))
		if a[i] == b[i] {
			continue
		}
		if o := ord(a[i]) - ord(b[i]); o == 1 || o == -1 {
			steps++
			continue
		}
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	if m == 0 {
		return d, steps, true
	}
	return d / m, steps, true
}

func relErr(a, b []float32) float64 {
	var d, m float64
	for i := range b {
		if math.IsNaN(float64(a[i])) != math.IsNaN(float64(b[i])) {
			return math.Inf(1)
		}
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = max(m, math.Abs(float64(b[i])))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// steps drives both runtimes through the same batch: two prompts prefilled together,
// decode steps fed with the reference's tokens, and a DSpark draft step when the plan
// has one.
func TestInstructionsMatchCPU(t *testing.T) {
	for _, model := range fixtures {
		t.Run(model, func(t *testing.T) { checkInstructions(t, model, flagConfig()) })
	}
}

// TestFastInstructionsNearCPU: the fast numerics mode against the cpu target, every
// instruction fed the cpu's inputs (so each product is checked alone) and free-running,
// on the fixtures and on a V4 model in V4-Flash's storage formats (FP8 128-blocks, FP4
// experts, bf16 head). Each bound is about 1.5 to 2 times the worst error the emulated
// device and the H200 showed (2026-12-02): fed, tiny-v4-dev within 2e-5 (worst 1.32e-5),
// the V4.1 fixtures within 6e-6 (3.1e-6), the V4-Flash-format model within 1.2e-5
// (6.9e-6). Free-running, tiny-v4-dev's instructions within 8e-5 (worst 3.8e-5 emulated,
// 3.0e-5 on the H200), the V4-Flash-format model's within 5e-5 (2.5e-5, 1.9e-5); V4.1's
// logits (lm_head) within 6e-6 (worst 3.1e-6 on both devices): upstream of V4.1's
// activation quantizations (fake_quant, MXFP8) a
// last-bit difference can move a value to the neighbouring FP8 code — the H200 showed a
// fake_quant at 2.6e-3 while the logits stayed at 3.1e-6 (docs/cuda.md) — so V4.1's other
// instructions are reported, not bounded.
func TestFastInstructionsNearCPU(t *testing.T) {
	models := append([]string{}, fixtures...)
	models = append(models, quantizedV4(t))
	for _, model := range models {
		for _, fed := range []bool{true, false} {
			v41, quantized := strings.HasPrefix(model, "tiny-v41"), !strings.HasPrefix(model, "tiny-")
			cfg := checkConfig{numerics: targets.NumericsFast, tol: 8e-5, force: fed}
			name := "free-running"
			switch {
			case fed && v41:
				cfg.tol, name = 6e-6, "fed"
			case fed && quantized:
				cfg.tol, name = 1.2e-5, "fed"
			case fed:
				cfg.tol, name = 2e-5, "fed"
			case v41:
				cfg.tol, cfg.gate = 6e-6, []string{"lm_head"}
			case quantized:
				cfg.tol = 5e-5
			}
			t.Run(filepath.Base(model)+"/"+name, func(t *testing.T) {
				// the fast products round differently: an error of exactly 0 would mean
				// they did not run
				if worst := checkInstructions(t, model, cfg); worst == 0 {
					t.Fatal("every instruction equal to the cpu target's: the fast products did not run")
				}
			})
		}
	}
}

// TestInstructionsMatchCPUQuantizedV4: the same check on a V4 model in V4-Flash's
// storage formats (FP8 128×128 blocks, FP4 experts, bf16 embeddings, head and norms):
// tiny-v4-dev's config with V4-Flash's quantization_config, random weights (dic synth).
func TestInstructionsMatchCPUQuantizedV4(t *testing.T) {
	checkInstructions(t, quantizedV4(t), flagConfig())
}

// quantizedV4 writes tiny-v4-dev's config with V4-Flash's quantization_config and
// random weights (dic synth) to a temporary directory.
func quantizedV4(t *testing.T) string {
	cfg, err := os.ReadFile("../../testdata/tiny-v4-dev/config.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(cfg, &m); err != nil {
		t.Fatal(err)
	}
	m["quantization_config"] = map[string]any{"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
		"activation_scheme": "dynamic", "weight_block_size": []int{128, 128}}
	m["expert_dtype"] = "fp4"
	src, dir := t.TempDir(), t.TempDir()
	cfg, _ = json.Marshal(m)
	if err := os.WriteFile(filepath.Join(src, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Write(src, dir, synth.Options{Seed: 9}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkInstructions runs one model (a fixture name, or a model directory) on the cpu
// target and the device, instruction by instruction.
func checkInstructions(t *testing.T, model string, cfg checkConfig) (worst float64) {
	{
		{
			p, ref, dev, rr, dr := openPair(t, model, cfg)
			defer ref.Close()
			defer dev.Close()
			V := p.Model.Vocab
			prompts := [][]int32{make([]int32, 13), make([]int32, 6)}
			if cfg.prompt > 0 {
				prompts[0] = make([]int32, cfg.prompt)
			}
			for i := range prompts {
				for j := range prompts[i] {
					prompts[i][j] = int32((j*131 + i*17 + 7) % V)
				}
			}
			type pair struct{ r, d targets.State }
			var seqs []pair
			for range prompts {
				a, err := ref.NewState()
				if err != nil {
					t.Fatal(err)
				}
				b, err := dev.NewState()
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, pair{a, b})
			}
			pos := make([]int, len(prompts))
			next := make([][]int32, len(prompts))
			copy(next, prompts)
			var refTokens []int32
			ungated := 0.0
			stepped, steppedOf := 0, 0 // values one bf16 step apart (bf16Step), of the results that had them
			failed := map[string]bool{}
			run := func(step int, phase string) []int32 {
				for _, side := range []int{0, 1} {
					in := &targets.StepIn{Phase: phase}
					for i := range prompts {
						st := seqs[i].r
						if side == 1 {
							st = seqs[i].d
						}
						in.Seqs = append(in.Seqs, targets.SeqIn{State: st, N: len(next[i]), Pos: pos[i]})
						in.Tokens = append(in.Tokens, next[i]...)
					}
					rows := 0
					for i := range prompts {
						rows += len(next[i])
						if phase == plan.PhaseDraft {
							for j := rows - len(next[i]); j < rows; j++ {
								in.Rows = append(in.Rows, int32(j))
								in.Sample = append(in.Sample, 0, 0, 0, 0)
							}
						} else {
							in.Rows = append(in.Rows, int32(rows-1))
							in.Sample = append(in.Sample, 0, 0, 0, 0)
						}
					}
					rr.step, dr.step = step, step
					var out targets.StepOut
					var err error
					if side == 0 {
						err = ref.Step(in, &out)
					} else {
						err = dev.Step(in, &out)
					}
					if err != nil {
						t.Fatalf("step %d (%s) on side %d: %v", step, phase, side, err)
					}
					if side == 0 {
						refTokens = out.Tokens
					}
				}
				if phase != plan.PhaseDraft {
					for i := range prompts {
						pos[i] += len(next[i])
						next[i] = []int32{refTokens[i]}
					}
				}
				// compare every instruction of the step, in program order
				pr := p.Program(phase)
				for idx := range pr.Instrs {
					k := fmt.Sprintf("%d/%s/%d", step, phase, idx)
					for j := range rr.vals[k] {
						a, b := dr.vals[k][j], rr.vals[k][j]
						ai, bi := dr.ints[k][j], rr.ints[k][j]
						if len(a) != len(b) || len(ai) != len(bi) {
							t.Fatalf("step %d %s instr %d (%s) result %d: %d/%d values on the device, %d/%d on the cpu", step, phase, idx, pr.Instrs[idx].Op, j, len(a), len(ai), len(b), len(bi))
						}
						e := relErr(a, b)
						if e > cfg.tol && cfg.bf16Step {
							if e2, n, ok := bf16Err(a, b); ok && n <= max(1, len(b)/2000) {
								e = e2
								stepped += n
								steppedOf += len(b)
							}
						}
						for x := range bi {
							if ai[x] != bi[x] {
								e = math.Inf(1)
							}
						}
						if *only != "" && !strings.Contains(","+*only+",", ","+pr.Instrs[idx].Op+",") {
							continue
						}
						if cfg.gate != nil && !slices.Contains(cfg.gate, pr.Instrs[idx].Op) {
							ungated = max(ungated, e)
							continue
						}
						worst = max(worst, e)
						if e > cfg.tol && *keepGoing {
							if !failed[pr.Instrs[idx].Op] {
								t.Errorf("step %d %s instr %d (%s, %s) result %d: relative error %.3g", step, phase, idx, pr.Instrs[idx].Op, pr.Instrs[idx].Kernel, j, e)
							}
							failed[pr.Instrs[idx].Op] = true
						} else if e > cfg.tol {
							t.Fatalf("step %d %s instr %d (%s, %s) result %d: relative error %.3g", step, phase, idx, pr.Instrs[idx].Op, pr.Instrs[idx].Kernel, j, e)
						}
					}
				}
				return nil
			}
			run(0, plan.PhasePrefill)
			for s := 1; s <= 3; s++ {
				run(s, plan.PhaseDecode)
			}
			if p.Program(plan.PhaseDraft) != nil {
				B := p.Model.DSpark.Block
				for i := range next {
					anchor := next[i][0]
					next[i] = make([]int32, B)
					for j := range next[i] {
						next[i][j] = int32(p.Model.DSpark.Noise)
					}
					next[i][0] = anchor
				}
				run(4, plan.PhaseDraft)
			}
			if cfg.bf16Step {
				t.Logf("%s: %d values one bf16 step from the cpu target's (allowed in the bf16 results over the bound: %d values in all)", model, stepped, steppedOf)
			}
			if cfg.gate != nil {
				t.Logf("%s (%s numerics): %v within %.3g of the cpu target (worst %.3g); the other instructions' worst %.3g", model, cfg.numerics, cfg.gate, cfg.tol, worst, ungated)
			} else {
				t.Logf("%s (%s numerics): every instruction within %.3g of the cpu target (worst %.3g)", model, cfg.numerics, cfg.tol, worst)
			}
		}
	}
	return worst
}

var (
	tol       = flag.Float64("tol", -1, "largest relative error an instruction may show (default: 0 on the emulated device, whose kernels compute the cpu target's values bit for bit; 2e-6 on a GPU, whose exp and log may round differently)")
	keepGoing = flag.Bool("keepgoing", false, "report the first failure of every op instead of stopping at the first")
	only      = flag.String("ops", "", "check only these ops (comma-separated)")
	force     = flag.Bool("force", false, "feed every device instruction the cpu target's inputs, so that each is checked alone")
	numerics  = flag.String("numerics", "exact", "the device runtime's numerics: exact or fast")
)

func TestMain(m *testing.M) {
	flag.Parse()
	cuda.SetPartial()
	os.Exit(m.Run())
}

// TestCompressorPoolLayouts: V4's compressor pools a step's windows a (row, channel) a
// work item (att_cmp_pool, steps of many rows a sequence) or a (sequence, channel) a
// work item (att_cmp_pool_seq, decode steps); the fixtures' short prefills take the
// second alone, so each layout is forced on every step here: the exact mode stays equal
// to the cpu target (worst error 0) either way.
func TestCompressorPoolLayouts(t *testing.T) {
	for _, rows := range []int64{1, 1 << 40} {
		t.Run(fmt.Sprintf("rows a sequence from %d", rows), func(t *testing.T) {
			defer cuda.SetPoolRowsPerSeq(rows)()
			cfg := flagConfig()
			cfg.numerics = targets.NumericsExact
			if worst := checkInstructions(t, "tiny-v4-dev", cfg); worst != 0 {
				t.Errorf("worst error %g, want 0", worst)
			}
		})
	}
}

// TestIndexTiesLow: under DEEPINFER_INDEX_TIES=low (targets.EnvIndexTies) both targets
// keep the lower position first among the indexer's equal scores at its top-k cut: on
// both V4.1 fixtures the device's exact mode (csa41.cu csa_lowtie_kept: the radix select
// on a GPU's launch blocks, its serial passes on the emulated device) must equal the
// cpu target's lowTieTopK instruction for instruction, fed and free-running, and the
// fast mode stay within TestFastInstructionsNearCPU's fed bound. The rule matters on
// these fixtures: with the device alone under it, fed the cpu rule's inputs, its
// selections differ from the cpu target's (a tie at the cut somewhere in the steps).
func TestIndexTiesLow(t *testing.T) {
	for _, model := range []string{"tiny-v41-dev", "tiny-v41-dev2"} {
		t.Run(model+"/exact", func(t *testing.T) {
			t.Setenv(targets.EnvIndexTies, "low")
			for _, fed := range []bool{true, false} {
				if worst := checkInstructions(t, model, checkConfig{numerics: targets.NumericsExact, force: fed}); worst != 0 {
					t.Errorf("fed %v: worst error %g, want 0", fed, worst)
				}
			}
		})
		t.Run(model+"/fast", func(t *testing.T) {
			t.Setenv(targets.EnvIndexTies, "low")
			if worst := checkInstructions(t, model, checkConfig{numerics: targets.NumericsFast, tol: 6e-6, force: true}); worst == 0 {
				t.Fatal("every instruction equal to the cpu target's: the fast products did not run")
			}
		})
		t.Run(model+"/device alone", func(t *testing.T) {
			cfg := checkConfig{numerics: targets.NumericsExact, tol: math.Inf(1), force: true, gate: []string{"csa_index"}, devTies: "low"}
			if worst := checkInstructions(t, model, cfg); worst == 0 {
				t.Error("the low rule chose what the cpu rule chose in every step: no tie at the cut was exercised")
			}
		})
	}
	t.Run("bad value", func(t *testing.T) {
		// both targets refuse to open V4.1's plan with an unknown rule, saying why
		out, err := compiler.Compile(compiler.Options{ModelDir: "../../testdata/tiny-v41-dev", Target: "h200"})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := vm.LoadWeights(out.Plan, "../../testdata/tiny-v41-dev")
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(targets.EnvIndexTies, "lowest")
		if _, err := cpu.OpenAny(out.Plan, ws, targets.Options{}); err == nil || !strings.Contains(err.Error(), "want cpu") {
			t.Errorf("cpu target: err %v", err)
		}
		if _, err := cuda.OpenEmulated(out.Plan, ws, targets.Options{MaxTokens: 64}, 4<<30); err == nil || !strings.Contains(err.Error(), "want cpu") {
			t.Errorf("cuda target: err %v", err)
		}
	})
}

// TestFastV41ExactOps: the instructions V4.1's fast mode computes with the cpu target's
// own summation orders (MKL's lanes as separate work items, then folded: the router's
// logits and selection, the mHC mixes and Sinkhorn split, the compressor) must equal the
// cpu target's exactly when fed its inputs, in every step; the other fast-mode
// instructions are only bounded (TestFastInstructionsNearCPU).
func TestFastV41ExactOps(t *testing.T) {
	for _, model := range []string{"tiny-v41-dev", "tiny-v41-dev2"} {
		t.Run(model, func(t *testing.T) {
			cfg := checkConfig{numerics: targets.NumericsFast, tol: 0, force: true, gate: []string{"moe_route", "hc_mix", "csa_compress"}}
			if worst := checkInstructions(t, model, cfg); worst != 0 {
				t.Errorf("worst error %g, want 0", worst)
			}
		})
	}
}
