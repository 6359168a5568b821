package synth

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/safetensors"
	_ "deepinfer/targets/all"
	"deepinfer/vm"
)

// header lists a checkpoint's tensors as "name dtype shape".
func header(t *testing.T, dir string) map[string]string {
	t.Helper()
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := map[string]string{}
	for _, n := range ck.Names() {
		info, _ := ck.Info(n)
		out[n] = fmt.Sprintf("%s %v", info.DType, info.Shape)
	}
	return out
}

// renumber maps a synthetic checkpoint's names back to the original's layer ids.
func renumber(name string, keep []int) string {
	l := plan.LayerOf(name)
	if l < 0 || strings.HasPrefix(name, "mtp.") {
		return name
	}
	return strings.Replace(name, fmt.Sprintf("layers.%d.", l), fmt.Sprintf("layers.%d.", keep[l]), 1)
}

// TestHeadersMatchTheFixtures: a synthetic checkpoint of a fixture's config holds
// exactly the tensors (names, dtypes, shapes) of the fixture's real checkpoint —
// written by transformers (tiny-v4-dev) and by DeepSeek's reference (tiny-v41-dev*) —
// for the layers it keeps, and every global and MTP tensor.
func TestHeadersMatchTheFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		keep    []int // nil: every layer
	}{
		{"tiny-v4-dev", nil},
		{"tiny-v4-dev", []int{1, 2}},
		{"tiny-v41-dev", []int{3, 4, 5}},  // Engram layers 0 and 1 dropped; 3 is a KV and index source
		{"tiny-v41-dev2", []int{4, 5, 6}}, // Engram layers 1 and 3 dropped
	} {
		t.Run(fmt.Sprintf("%s%v", tc.fixture, tc.keep), func(t *testing.T) {
			src := filepath.Join("..", "testdata", tc.fixture)
			out := t.TempDir()
			if _, err := Write(src, out, Options{Layers: tc.keep, Seed: 7}); err != nil {
				t.Fatal(err)
			}
			want := header(t, src)
			got := map[string]string{}
			for n, v := range header(t, out) {
				if tc.keep != nil {
					n = renumber(n, tc.keep)
				}
				got[n] = v
			}
			for n, v := range want {
				l := plan.LayerOf(n)
				dropped := tc.keep != nil && l >= 0 && !strings.HasPrefix(n, "mtp.") && !slices.Contains(tc.keep, l)
				if dropped || strings.Contains(n, "engram") && tc.keep != nil {
					continue
				}
				if got[n] != v {
					t.Errorf("%s: synthetic %q, fixture %q", n, got[n], v)
				}
				delete(got, n)
			}
			for n, v := range got {
				t.Errorf("%s (%s): not in the fixture's checkpoint", n, v)
			}
		})
	}
}

// TestWeightsLoadAndRun: the synthetic checkpoint loads through the checkpoint reader
// (every tensor checked against the manifest), its decoded weights have the std the
// generator aims at (within its power-of-two scale: a factor of √2), and the model
// runs to finite logits.
func TestWeightsLoadAndRun(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		keep    []int
	}{{"tiny-v4-dev", nil}, {"tiny-v41-dev2", []int{4, 5, 6}}} {
		t.Run(tc.fixture, func(t *testing.T) {
			out := t.TempDir()
			if _, err := Write(filepath.Join("..", "testdata", tc.fixture), out, Options{Layers: tc.keep, Seed: 3}); err != nil {
				t.Fatal(err)
			}
			res, err := compiler.Compile(compiler.Options{ModelDir: out})
			if err != nil {
				t.Fatal(err)
			}
			ws, err := vm.LoadWeights(res.Plan, out)
			if err != nil {
				t.Fatal(err)
			}
			checked := map[string]int{}
			for i := range ws {
				w := &res.Plan.Weights[i]
				init := compiler.DefaultInit(w.Name, w.Shape)
				if init.Kind != "normal" || w.Elems() < 2048 || ws[i].I32 != nil {
					continue
				}
				v, err := ws[i].Float32()
				if err != nil {
					t.Fatal(err)
				}
				var s, ss float64
				for _, x := range v {
					s += float64(x)
					ss += float64(x) * float64(x)
				}
				n := float64(len(v))
				mean, std := s/n, math.Sqrt(ss/n-(s/n)*(s/n))
				if r := std / init.Std; r < 0.69 || r > 1.45 || math.Abs(mean) > 0.1*init.Std {
					t.Errorf("%s (%s): mean %.3g std %.3g, want mean ≈ 0, std %.3g (ratio %.2f)", w.Name, w.Storage, mean, std, init.Std, r)
				}
				checked[w.Storage]++
			}
			t.Logf("weights checked by storage: %v", checked)
			if tc.fixture != "tiny-v4-dev" && (checked["fp4_g32_ue8m0"] == 0 || checked["fp8_b32_ue8m0"] == 0) {
				t.Errorf("no FP4 or FP8 weight checked: %v", checked)
			}
			m, err := vm.Load(res.Plan, ws)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			logits := runLogits(t, m, []int32{1, 2, 3, 4, 5})
			for i, x := range logits {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("logit %d is %v", i, x)
				}
			}
		})
	}
}

// TestTrimFullConfigs cuts the real configs as a benchmark would and checks the
// compiled model has the layer roles the cut promises.
func TestTrimFullConfigs(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "testdata", name, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	compile := func(raw []byte) *plan.Plan {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := compiler.Compile(compiler.Options{ModelDir: dir, Target: "h200"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Plan
	}
	v4, _, err := TrimConfig(read("deepseek-v4-flash"), []int{2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	p := compile(v4)
	var kinds []string
	for _, l := range p.Model.Layers {
		kinds = append(kinds, fmt.Sprintf("%s/%d/%s", l.Attn, l.Ratio, l.MLP))
	}
	if want := []string{"compressed_sparse_attention/4/hash_moe", "heavily_compressed_attention/128/moe",
		"compressed_sparse_attention/4/moe", "heavily_compressed_attention/128/moe"}; !slices.Equal(kinds, want) {
		t.Errorf("V4 layers 2-5: %v, want %v", kinds, want)
	}

	raw := read("deepseek-v4.1-flash")
	v41, notes, err := TrimConfig(raw, []int{20, 21, 22, 23, 24, 25})
	if err != nil {
		t.Fatal(err)
	}
	p = compile(v41)
	if len(p.Model.Layers) != 6+3 {
		t.Errorf("V4.1 layers 20-25: %d layers, want 6 and 3 DSpark stages", len(p.Model.Layers))
	}
	t.Logf("notes for 20-25: %q", notes)
	if !slices.ContainsFunc(notes, func(s string) bool { return strings.Contains(s, "DSpark") }) {
		t.Errorf("notes do not say the DSpark targets moved: %q", notes)
	}
	// layers whose sources were dropped own them instead, and compile
	v41, notes, err = TrimConfig(raw, []int{21, 22, 23})
	if err != nil {
		t.Fatal(err)
	}
	compile(v41)
	if !slices.ContainsFunc(notes, func(s string) bool { return strings.Contains(s, "layer 21 (now 0) owns its kv_source") }) {
		t.Errorf("notes do not say layer 21 became a KV source: %q", notes)
	}
	if _, _, err := TrimConfig(raw, []int{13, 14, 15}); err == nil || !strings.Contains(err.Error(), "Engram") {
		t.Errorf("keeping an Engram layer: err %v, want one naming Engram", err)
	}
	if _, _, err := TrimConfig(raw, []int{38, 39, 40}); err == nil || !strings.Contains(err.Error(), "layers 0–39") {
		t.Errorf("a layer past the model: err %v", err)
	}
	if _, _, err := TrimConfig(raw, []int{39}); err == nil || !strings.Contains(err.Error(), "DSpark") {
		t.Errorf("fewer layers than the drafter reads: err %v", err)
	}
}

func TestParseLayers(t *testing.T) {
	for in, want := range map[string][]int{"2-5": {2, 3, 4, 5}, "20-21,30": {20, 21, 30}, "7": {7}} {
		got, err := ParseLayers(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseLayers(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "5-2", "3,3", "4,2", "-1", "1-"} {
		if got, err := ParseLayers(bad); err == nil {
			t.Errorf("ParseLayers(%q) = %v, want an error", bad, got)
		}
	}
}

func TestSameSeedSameBytes(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if _, err := Write(filepath.Join("..", "testdata", "tiny-v4-dev"), d, Options{Seed: 11, Workers: 3}); err != nil {
			t.Fatal(err)
		}
	}
	names, _ := filepath.Glob(filepath.Join(a, "*"))
	for _, n := range names {
		x, _ := os.ReadFile(n)
		y, err := os.ReadFile(filepath.Join(b, filepath.Base(n)))
		if err != nil || string(x) != string(y) {
			t.Errorf("%s differs between two writes with the same seed", filepath.Base(n))
		}
	}
	if _, err := Write(filepath.Join("..", "testdata", "tiny-v4-dev"), a, Options{Seed: 11}); err == nil {
		t.Errorf("writing over a checkpoint: no error")
	}
}

// runLogits prefills tokens, decodes one more, and returns both steps' logits.
func runLogits(t *testing.T, m *vm.Machine, tokens []int32) []float32 {
	t.Helper()
	s, err := m.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	out, err := m.Forward([]vm.Chunk{{Seq: s, Tokens: tokens, AllLogits: true}})
	if err != nil {
		t.Fatal(err)
	}
	var all []float32
	for _, r := range out[0].Logits {
		all = append(all, r...)
	}
	out, err = m.Forward([]vm.Chunk{{Seq: s, Tokens: []int32{out[0].Token}, WantLogits: true}})
	if err != nil {
		t.Fatal(err)
	}
	return append(all, out[0].Logits[0]...)
}

// TestConfigOnly: the full-width V4 config cut to two layers, with no weights, compiles
// to the plan a full synthetic checkpoint would give.
func TestConfigOnly(t *testing.T) {
	d := t.TempDir()
	sum, err := Write(filepath.Join("..", "testdata", "deepseek-v4-flash"), d, Options{Layers: []int{4, 5}, ConfigOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Layers != 2 || sum.Tensors != 0 || sum.Shards != 0 {
		t.Errorf("summary %+v, want 2 layers and nothing written", sum)
	}
	names, _ := filepath.Glob(filepath.Join(d, "*"))
	if len(names) != 1 || filepath.Base(names[0]) != "config.json" {
		t.Errorf("wrote %v, want config.json only", names)
	}
	out, err := compiler.Compile(compiler.Options{ModelDir: d, Target: "h200"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Plan.Model.Layers); n != 2 {
		t.Errorf("the plan has %d layers, want 2", n)
	}
}
