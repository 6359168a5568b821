package targets_test

import (
	"testing"

	"deepinfer/ir"
	"deepinfer/targets"
	_ "deepinfer/targets/all"
)

// Every registered target must lower every op in both phases; the cpu target executes
// here, h200 and sm100 on a CUDA device, ascend950 nowhere.
func TestCatalogsCoverOps(t *testing.T) {
	for _, name := range targets.Names() {
		tgt, err := targets.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range ir.Ops() {
			for _, ph := range []string{"prefill", "decode"} {
				if k, ok := tgt.Kernel(op, ph); !ok || k == "" {
					t.Errorf("%s has no %s kernel for %s", name, ph, op)
				}
			}
		}
		_, exec := tgt.(targets.Executor)
		want := map[string]targets.Mode{"cpu": targets.Executed, "h200": targets.Device, "sm100": targets.Device}[name]
		if want == "" {
			want = targets.Simulated
		}
		if tgt.Mode() != want || exec != (want != targets.Simulated) {
			t.Errorf("%s: mode %s, executor %v; want mode %s", name, tgt.Mode(), exec, want)
		}
		if hw := tgt.Hardware(); hw.Source == "" {
			t.Errorf("%s: hardware numbers carry no source", name)
		}
	}
}
