package targets_test

import (
	"testing"

	"deepinfer/ir"
	"deepinfer/targets"
	_ "deepinfer/targets/all"
)

// Every registered target must lower every op in both phases, and only the cpu target
// claims to execute.
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
		if exec != (tgt.Mode() == targets.Executed) || exec != (name == "cpu") {
			t.Errorf("%s: mode %s, executor %v", name, tgt.Mode(), exec)
		}
		if hw := tgt.Hardware(); hw.Source == "" {
			t.Errorf("%s: hardware numbers carry no source", name)
		}
	}
}
