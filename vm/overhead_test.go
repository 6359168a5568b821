package vm_test

import (
	"testing"

	"deepinfer/compiler"
	_ "deepinfer/targets/all"
	"deepinfer/vm"
)

// BenchmarkDecodeStepOverhead times the VM's own work per decode step at batch 256 on
// the full-size V4-Flash decode program, with every kernel a no-op. ns/op is one step.
func BenchmarkDecodeStepOverhead(b *testing.B) {
	out, err := compiler.Compile(compiler.Options{ModelDir: "../testdata/deepseek-v4-flash", Target: "sm100"})
	if err != nil {
		b.Fatal(err)
	}
	m, err := vm.LoadOverheadProbe(out.Plan)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	o, err := vm.MeasureStepOverhead(m, 256, b.N+1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(o.P50.Microseconds()), "p50-µs/step")
}

func TestStepOverheadProbe(t *testing.T) {
	out, err := compiler.Compile(compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.LoadOverheadProbe(out.Plan)
	if err != nil {
		t.Fatal(err)
	}
	o, err := vm.MeasureStepOverhead(m, 8, 10)
	if err != nil {
		t.Fatal(err)
	}
	if o.Steps != 10 || o.Batch != 8 || o.Calls != len(out.Plan.Program("decode").Instrs) {
		t.Fatalf("probe measured %+v", o)
	}
}
