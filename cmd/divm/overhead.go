package main

import (
	"flag"
	"fmt"
	"io"

	"deepinfer/plan"
	"deepinfer/vm"
)

// overheadCmd measures the VM's own time per decode step with kernels that do nothing.
func overheadCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("overhead", flag.ContinueOnError)
	batch := fs.Int("batch", 256, "sequences per decode step")
	steps := fs.Int("steps", 300, "decode steps to time")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *batch < 1 || *steps < 2 {
		return usageError{Err: fmt.Errorf("usage: divm overhead plan.dip [--batch 256] [--steps 300]")}
	}
	p, err := plan.ReadFile(pos[0])
	if err != nil {
		return err
	}
	m, err := vm.LoadOverheadProbe(p)
	if err != nil {
		return err
	}
	o, err := vm.MeasureStepOverhead(m, *batch, *steps)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "VM step overhead (measured on this machine, kernels replaced by no-ops): decode batch %d, %d kernel calls per step, %d steps: median %s, p90 %s, max %s per step\n",
		o.Batch, o.Calls, o.Steps, o.P50, o.P90, o.Max)
	return nil
}
