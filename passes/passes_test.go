package passes_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/ir"
	"deepinfer/passes"
	"deepinfer/targets"
	"deepinfer/targets/cpu"
	"deepinfer/targets/sm100"
)

func lowered(t *testing.T) *ir.Module {
	m, err := compiler.Lower(compiler.EmbeddedConfig())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMemplanNoLiveOverlap replays every function after memory planning and checks that
// a slot is never handed to a new value while the value it held is still needed, and
// never shared between a result and an operand of one instruction.
func TestMemplanNoLiveOverlap(t *testing.T) {
	m := lowered(t)
	if _, err := passes.Run(m, &passes.Config{Target: cpu.Target{}, Verify: true}); err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Funcs {
		last := map[*ir.Value]int{}
		for i, in := range f.Body {
			for _, a := range in.Args {
				last[a] = i
			}
		}
		for _, r := range f.Returns {
			last[r] = len(f.Body)
		}
		holder := map[int64]*ir.Value{}
		slotOf := map[*ir.Value]int64{}
		var total, naive int64
		for i, in := range f.Body {
			slots, _ := in.Attrs.Ints("slots")
			for j, r := range in.Results {
				s := slots[j]
				if s < 0 {
					continue
				}
				if prev := holder[s]; prev != nil && last[prev] >= i {
					t.Fatalf("%s instr %d (%s): slot %d still holds %s (last used at %d)", f.Name, i, in.Op, s, prev.Ref(), last[prev])
				}
				for _, a := range in.Args {
					if as, ok := slotOf[a]; ok && as == s {
						t.Fatalf("%s instr %d (%s): result shares slot %d with an operand", f.Name, i, in.Op, s)
					}
				}
				holder[s] = r
				slotOf[r] = s
				c, _, _ := r.Type.Elems()
				naive += c
			}
		}
		for _, s := range f.Slots {
			c, _, _ := s.Elems()
			total += c
		}
		if total*4 > naive {
			t.Errorf("%s: arena of %d elements per token is not much smaller than one buffer per value (%d)", f.Name, total, naive)
		}
		t.Logf("%s: %d slots, %d elements per token (one buffer per value: %d)", f.Name, len(f.Slots), total, naive)
	}
}

func TestDeadCodeKeepsState(t *testing.T) {
	m := lowered(t)
	f := m.Funcs[0]
	before := len(f.Body)
	// drop the logits: everything but the stateful ops (and what they need) is dead
	f.Returns = []*ir.Value{f.Params[0]}
	res, err := passes.Run(m, &passes.Config{Target: cpu.Target{}, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	var dce passes.Result
	for _, r := range res {
		if r.Name == "dce" {
			dce = r
		}
	}
	if !dce.Changed || len(f.Body) >= before {
		t.Fatalf("dce removed nothing (%d → %d)", before, len(f.Body))
	}
	stateful := 0
	for _, in := range f.Body {
		if ir.Lookup(in.Op).Effect == ir.Stateful {
			stateful++
		}
		if in.Op == "lm_head" || in.Op == "hc_head" {
			t.Fatalf("dce kept %s", in.Op)
		}
	}
	if stateful == 0 {
		t.Fatal("dce removed the KV updates")
	}
}

func TestDumpAndErrors(t *testing.T) {
	dir := t.TempDir()
	m := lowered(t)
	var log strings.Builder
	if _, err := passes.Run(m, &passes.Config{Target: cpu.Target{}, DumpDir: dir, Log: &log}); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.ir"))
	if len(names) != len(passes.Table)+1 {
		t.Fatalf("dumps %v, want one per pass plus the input", names)
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil || !strings.Contains(string(page), "-lower") || !strings.Contains(string(page), "no change") {
		t.Fatalf("index.html missing or without its columns: %v", err)
	}
	last, _ := os.ReadFile(names[len(names)-1])
	back, err := ir.Parse(string(last))
	if err != nil || ir.Verify(back) != nil {
		t.Fatalf("the last dump does not parse and verify: %v", err)
	}
	if strings.Count(log.String(), "\n") != len(passes.Table) {
		t.Fatalf("want one log line per pass:\n%s", log.String())
	}
	// a target without a kernel for some op
	_, err = passes.Run(lowered(t), &passes.Config{Target: noKernels{}})
	if err == nil || !strings.Contains(err.Error(), "no kernel for op") {
		t.Fatalf("missing-kernel error: %v", err)
	}
}

type noKernels struct{ cpu.Target }

func (noKernels) Kernel(op, phase string) (string, bool) { return "", op != "rope" }

// TestFuseGroupsChains runs the pipeline for a target with fusion rules and checks every
// group: a chain of the rule's ops, each link's result used only by the next, all members
// lowered to the rule's kernel.
func TestFuseGroupsChains(t *testing.T) {
	m := lowered(t)
	if _, err := passes.Run(m, &passes.Config{Target: sm100.Target, Verify: true}); err != nil {
		t.Fatal(err)
	}
	checkFusionGroups(t, m)
	// the cpu target has no rules: nothing changes
	res, err := passes.Run(lowered(t), &passes.Config{Target: cpu.Target{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Name == "fuse" && r.Changed {
			t.Fatal("fuse changed a module for a target without rules")
		}
	}
}

// checkFusionGroups checks every fusion group of m: a chain of a rule's ops (with bf16
// fake_quants allowed between links), each link's result used only by the next member,
// all members lowered to the rule's kernel.
func checkFusionGroups(t *testing.T, m *ir.Module) {
	t.Helper()
	rules := map[string]targets.Fusion{}
	for _, r := range targets.DeepSeekFusions {
		rules[r.Kernel] = r
	}
	for _, f := range m.Funcs {
		uses := f.Uses()
		groups := map[int64][]*ir.Instr{}
		for _, in := range f.Body {
			if g, ok := in.Attrs.Int("fusion"); ok {
				groups[g] = append(groups[g], in)
			}
		}
		if len(groups) == 0 {
			t.Fatalf("%s: no fusion groups", f.Name)
		}
		for g, members := range groups {
			k, _ := members[0].Attrs.Str("kernel")
			rule, ok := rules[k]
			var ops []string
			for _, in := range members {
				if f, _ := in.Attrs.Str("format"); in.Op == "fake_quant" && f == "bf16" {
					continue
				}
				ops = append(ops, in.Op)
			}
			if !ok || !slices.Equal(ops, rule.Ops) {
				t.Fatalf("group %d: kernel %q, ops %v", g, k, ops)
			}
			if members[0].Op != rule.Ops[0] || members[len(members)-1].Op != rule.Ops[len(rule.Ops)-1] {
				t.Fatalf("group %d does not start and end with the rule's ops", g)
			}
			for i, in := range members {
				if kk, _ := in.Attrs.Str("kernel"); kk != k {
					t.Fatalf("group %d member %d lowered to %s, not %s", g, i, kk, k)
				}
				if i+1 < len(members) {
					r := in.Results[0]
					if uses[r] != 1 || !slices.Contains(members[i+1].Args, r) {
						t.Fatalf("group %d: link %d's result is not used once, by the next link", g, i)
					}
				}
			}
		}
	}
}

// loweredV41 is V4.1-Flash's config lowered (no pass run yet).
func loweredV41(t *testing.T) *ir.Module {
	t.Helper()
	c, err := compiler.LoadConfig("../testdata/deepseek-v4.1-flash")
	if err != nil {
		t.Fatal(err)
	}
	m, err := compiler.Lower(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFuseV41AcrossRounding: in V4.1 the reference rounds activations to bf16 between
// ops; the rules still fuse across those roundings.
func TestFuseV41AcrossRounding(t *testing.T) {
	m := loweredV41(t)
	if _, err := passes.Run(m, &passes.Config{Target: sm100.Target}); err != nil {
		t.Fatal(err)
	}
	checkFusionGroups(t, m)
	across := 0
	for _, f := range m.Funcs {
		for _, in := range f.Body {
			if _, ok := in.Attrs.Int("fusion"); ok && in.Op == "fake_quant" {
				across++
			}
		}
	}
	if across == 0 {
		t.Fatal("no fusion group spans a bf16 rounding")
	}
	t.Logf("%d bf16 roundings inside fusion groups", across)
}
