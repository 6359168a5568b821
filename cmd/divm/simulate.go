package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"deepinfer/plan"
	"deepinfer/sim"
	"deepinfer/targets/cost"
)

func simulateCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	workload := fs.String("workload", "", "workload file (YAML/JSON) or inline key=value,... (see docs/simulate.md)")
	trace := fs.String("trace", "", "write a Chrome/Perfetto trace here")
	plots := fs.String("plots", "", "write time-per-layer and roofline plots (PNG and SVG) into this directory")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *workload == "" {
		return usageError{Err: fmt.Errorf("usage: divm simulate plan.dip --workload W [--trace FILE] [--plots DIR]")}
	}
	start := time.Now()
	p, err := plan.ReadFile(pos[0])
	if err != nil {
		return err
	}
	wl, err := sim.ReadWorkload(*workload)
	if err != nil {
		return err
	}
	m, err := cost.For(p.Target)
	if err != nil {
		return err
	}
	res, err := sim.Run(sim.Options{Plan: p, Workload: wl, Model: m.WithLaunch(cost.Device)})
	if err != nil {
		return err
	}
	sim.WriteReport(w, res)
	if *trace != "" {
		if err := sim.WriteTrace(*trace, res); err != nil {
			return err
		}
		fmt.Fprintf(w, "\ntrace: %s\n", *trace)
	}
	if *plots != "" {
		if err := os.MkdirAll(*plots, 0o755); err != nil {
			return err
		}
		files, err := sim.WritePlots(*plots, res)
		if err != nil {
			return err
		}
		for _, f := range files {
			fmt.Fprintf(w, "plot: %s\n", filepath.Join(*plots, f))
		}
	}
	fmt.Fprintf(w, "(simulation took %s of wall time)\n", time.Since(start).Round(time.Millisecond))
	return nil
}
