package compiler

import (
	"deepinfer/deploy"
	"fmt"
	"strings"
	"testing"
	"time"

	"deepinfer/ir"
	"deepinfer/passes"
	_ "deepinfer/targets/all"
)

const fullV41 = "../testdata/deepseek-v4.1-flash"

func TestCompileV41Fixture(t *testing.T) {
	out, err := Compile(Options{ModelDir: "../testdata/tiny-v41-dev", Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !out.WeightsChecked {
		t.Fatal("weights not checked")
	}
	want := []string{"window", "full", "reuse", "full", "reuse", "reindex", "dspark"}
	for i, l := range out.Plan.Model.Layers {
		if l.Role != want[i] {
			t.Errorf("layer %d: role %s, want %s", i, l.Role, want[i])
		}
	}
}

// roleV41 is MODEL.md §2's structure of DeepSeek-V4.1-Flash: layers 0–1 window only;
// KV sources 2, 8, 14 (ratio 2) and 20 (ratio 1, the candidate source); index sources
// 24, 28, 32, 36 rescoring inside layer 20's candidate pool; every other compressed
// layer reusing the latest top-k; DSpark stages 40–42.
func roleV41(i int) (role string, kv, idx int, cand string) {
	switch {
	case i < 2:
		return "window", -1, -1, ""
	case i >= 40:
		return "dspark", -1, -1, ""
	case i == 2 || i == 8 || i == 14:
		return "full", i, i, ""
	case i == 20:
		return "full", 20, 20, "source"
	case i < 20:
		src := 2 + (i-2)/6*6
		return "reuse", src, src, ""
	case i >= 24 && i%4 == 0:
		return "reindex", 20, i, "restricted"
	case i > 24:
		return "reuse", 20, i - i%4, ""
	}
	return "reuse", 20, 20, ""
}

// TestCompileV41Full compiles the full-size config (no weights) for the cpu target and
// for sm100 and checks the per-layer structure against MODEL.md §2, the weight manifest
// against the real checkpoint, and the bounded-replay plan.
func TestCompileV41Full(t *testing.T) {
	for _, tgt := range []string{"cpu", "sm100"} {
		start := time.Now()
		out, err := Compile(Options{ModelDir: fullV41, Target: tgt, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: compiled in %v, %d weights", tgt, time.Since(start).Round(time.Millisecond), len(out.Plan.Weights))
		md := out.Plan.Model
		if len(md.Layers) != 43 {
			t.Fatalf("%d layers, want 40 + 3 DSpark stages", len(md.Layers))
		}
		for i, l := range md.Layers {
			role, kv, idx, cand := roleV41(i)
			if l.Role != role || l.KVSource != kv || l.IndexSource != idx || l.Candidate != cand {
				t.Errorf("layer %d: %s kv %d index %d cand %q, want %s kv %d index %d cand %q",
					i, l.Role, l.KVSource, l.IndexSource, l.Candidate, role, kv, idx, cand)
			}
			if l.Engram != (i == 1 || i == 14) {
				t.Errorf("layer %d: engram %v", i, l.Engram)
			}
			if l.DSparkTarget != (i >= 37 && i <= 39) {
				t.Errorf("layer %d: DSpark target %v", i, l.DSparkTarget)
			}
		}
		if md.DSpark == nil || md.DSpark.Stages != 3 || md.DSpark.Block != 5 {
			t.Errorf("DSpark %+v, want 3 stages of block 5", md.DSpark)
		}
		if md.Vision == nil || md.Vision.Layers != 32 {
			t.Errorf("vision tower %+v, want its 32-layer shapes", md.Vision)
		}
		if tgt != "cpu" {
			continue
		}
		// The real checkpoint: 475.3 GiB in 96,085 tensors, of which ~350 are the vision
		// tower's (not in the manifest: image inputs are not served).
		h := out.Plan.Account()
		gib := float64(h.Bytes) / (1 << 30)
		t.Logf("manifest at storage formats: %d tensors, %.2f GiB (checkpoint: 96,085 tensors, 475.3 GiB with the vision tower)", h.Tensors, gib)
		if h.Tensors < 96085-400 || h.Tensors > 96085-300 {
			t.Errorf("%d text tensors: the checkpoint's 96,085 less the vision tower's ~350 expected", h.Tensors)
		}
		if gib < 474 || gib > 477 {
			t.Errorf("%.2f GiB: expected within ~0.5%% of the checkpoint's 475.3", gib)
		}
	}
}

// TestV41ReplayFullPlan: with swa_replay compact/140 the full-size prefill runs layers
// 21–39 on K = Σ min(n, 140) rows and everything before on T.
func TestV41ReplayFullPlan(t *testing.T) {
	out, err := Compile(Options{ModelDir: fullV41, Verify: true, Replay: &passes.Replay{Mode: passes.ReplayCompact, Keep: 140}})
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := out.Module.Attrs.Int(passes.AttrReplayKeep); k != 140 {
		t.Fatalf("replay_keep %d", k)
	}
	f := out.Module.Func("prefill")
	rows := map[int]map[string]bool{}
	for _, in := range f.Body {
		layer := -1
		for _, a := range in.Args {
			if a.Weight && strings.HasPrefix(a.Name, "layers.") {
				fmt.Sscanf(a.Name, "layers.%d.", &layer)
			}
		}
		if layer < 0 || len(in.Results) == 0 || in.Results[0].Type.Rank() == 0 {
			continue
		}
		if rows[layer] == nil {
			rows[layer] = map[string]bool{}
		}
		rows[layer][in.Results[0].Type.Shape[0].Sym] = true
	}
	for l := 0; l < 40; l++ {
		want := ir.SymTokens
		if l >= 21 {
			want = ir.SymKept
		}
		if len(rows[l]) != 1 || !rows[l][want] {
			t.Errorf("layer %d runs on %v rows, want %s", l, rows[l], want)
		}
	}
	for _, in := range out.Module.Func("decode").Body {
		for _, r := range in.Results {
			if r.Type.Rank() > 0 && r.Type.Shape[0].Sym == ir.SymKept {
				t.Fatalf("decode has a kept-rows value (%s)", in.Op)
			}
		}
	}
}

// TestV41FullKVLayout: the full-size state layout stores what MODEL.md §2 counts — 890 B
// of global KV per token (FP4 entries 288 B + FP4 index keys 68 B, three half-rate
// sources and one full-rate) and 528 B per MXFP8 window-ring slot.
func TestV41FullKVLayout(t *testing.T) {
	c, err := LoadConfig(fullV41)
	if err != nil {
		t.Fatal(err)
	}
	l := KVLayoutFor(nil, c)
	if got := l.EntryBytesPerToken(); got != 890 {
		t.Errorf("global KV %v B per token, want 890", got)
	}
	for i, ll := range l.Layers {
		if ll.RingRowBytes() != 528 {
			t.Errorf("layer %d: ring slot %d B, want 528", i, ll.RingRowBytes())
		}
	}
}

// TestV41ReplayArena: the prefill arena counts the replay's kept rows as Σ min(n, keep)
// rows at the largest step (16 sequences × 140 of a 16,384-token step), so compact replay
// needs less arena than off, which holds every row through every layer.
func TestV41ReplayArena(t *testing.T) {
	arena := func(mode string) int64 {
		src := "target: sm100\ntopology: {nodes: 1, devices_per_node: 4}\nroles:\n" +
			"  prefill: {dp: 4, ep: 4, max_num_seqs: 16, max_model_len: 131072, max_num_batched_tokens: 16384}\n" +
			"swa_replay: {mode: " + mode + ", keep_tokens: 140}\n"
		s, err := deploy.Parse([]byte(src), "spec.yaml", func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		out, err := Compile(Options{ModelDir: fullV41, Spec: s})
		if err != nil {
			t.Fatal(err)
		}
		// the slots at the largest step: T = 16,384 tokens, R = 16 logit rows,
		// K = min(T, 16 × 140) kept rows; activations are bf16 on sm100
		var want int64
		for _, sl := range out.Plan.Program("prefill").Slots {
			c, sym, _ := sl.Elems()
			switch sym {
			case ir.SymTokens:
				c *= 16384
			case ir.SymRows:
				c *= 16
			case ir.SymKept:
				c *= 16 * 140
			}
			want += c * 2
		}
		if got := out.Plan.Deployment.Roles[0].Mem("arena"); got != want {
			t.Errorf("%s: arena %d bytes, the slots at the largest step hold %d", mode, got, want)
		}
		return want
	}
	off, compact := arena("off"), arena("compact")
	t.Logf("prefill arena: off %.2f GiB, compact %.2f GiB", float64(off)/(1<<30), float64(compact)/(1<<30))
}
