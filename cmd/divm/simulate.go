package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"deepinfer/plan"
	"deepinfer/sim"
	"deepinfer/sim/calib"
	"deepinfer/targets/cost"
)

func simulateCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	workload := fs.String("workload", "", "workload file (YAML/JSON) or inline key=value,... (see docs/simulate.md)")
	trace := fs.String("trace", "", "write a Chrome/Perfetto trace here")
	plots := fs.String("plots", "", "write time-per-layer and roofline plots (PNG and SVG) into this directory")
	acceptance := fs.String("acceptance", "", "speculation counters written by divm run --spec-stats: their measured accepted-length distribution replaces the workload's acceptance")
	compare := fs.String("compare", "", "a divm bench report (JSON): price each of its points as one decode step of the plan and set step and kernel-class times against the measured ones (no workload)")
	calibration := fs.String("calibration", "", "cost-model calibration: the target's default, or one of "+calibNames()+" (auto, with --compare: the one for the bench report's numerics mode); with --workload, an h200 plan's kernels priced as this project's cuda kernels were measured")
	target := fs.String("target", "", "the target the plan must be compiled for (h200, sm100, ascend950): a check, since the plan's target picks the cost model")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *target != "" {
		if _, err := cost.For(*target); err != nil {
			return usageError{Err: fmt.Errorf("--target %s: %w", *target, err)}
		}
	}
	if *compare != "" {
		if len(pos) != 1 || *workload != "" {
			return usageError{Err: fmt.Errorf("usage: divm simulate plan.dip --compare BENCH.json [--calibration NAME] [--target T]")}
		}
		return compareCmd(w, pos[0], *compare, *calibration, *target)
	}
	if len(pos) != 1 || *workload == "" {
		return usageError{Err: fmt.Errorf("usage: divm simulate plan.dip --workload W [--calibration NAME] [--acceptance STATS] [--trace FILE] [--plots DIR] [--target T]")}
	}
	start := time.Now()
	p, err := readPlanFor(pos[0], *target)
	if err != nil {
		return err
	}
	wl, err := sim.ReadWorkload(*workload)
	if err != nil {
		return err
	}
	if *acceptance != "" {
		if wl.Acceptance, err = readAcceptance(*acceptance); err != nil {
			return err
		}
		if err := wl.Check(); err != nil {
			return fmt.Errorf("%s: %w", *acceptance, err)
		}
	}
	m, err := cost.For(p.Target)
	if err != nil {
		return err
	}
	if *calibration != "" {
		c, err := calib.ForPlan(*calibration, p.Target)
		if err != nil {
			return err
		}
		if m, err = c.Apply(m, p.ModelType); err != nil {
			return err
		}
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

// readAcceptance reads the accepted-length distribution from a divm run --spec-stats
// file.
func readAcceptance(path string) ([]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var st struct {
		Acceptance []float64 `json:"acceptance"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(st.Acceptance) == 0 {
		return nil, fmt.Errorf("%s: no accepted-length distribution (no verify group ran)", path)
	}
	return st.Acceptance, nil
}

// readPlanFor reads a plan and, with target set (--target), checks that it was
// compiled for that target: the plan's target picks the cost model.
func readPlanFor(path, target string) (*plan.Plan, error) {
	p, err := plan.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if target != "" && p.Target != target {
		return nil, fmt.Errorf("%s was compiled for %s, not %s: the plan's target picks the cost model (dic compile --target %s)", path, p.Target, target, target)
	}
	return p, nil
}

// compareCmd prices each point of a bench report with the plan's cost model (or a
// calibration of it) and prints measured against simulated; target as readPlanFor's.
func compareCmd(w io.Writer, planPath, benchPath, calibration, target string) error {
	p, err := readPlanFor(planPath, target)
	if err != nil {
		return err
	}
	r, err := calib.ReadBench(benchPath)
	if err != nil {
		return err
	}
	m, err := cost.For(p.Target)
	if err != nil {
		return err
	}
	if calibration != "" {
		c, err := calib.ForReport(calibration, r)
		if err != nil {
			return err
		}
		if m, err = c.Apply(m, p.ModelType); err != nil {
			return err
		}
	}
	res, err := calib.Compare(p, m, r, calib.Acceptance)
	if err != nil {
		return err
	}
	calib.WriteComparison(w, m.ID(), benchPath+" ("+r.Device+")", res, calib.Acceptance)
	return nil
}

func calibNames() string { return strings.Join(calib.Names(), ", ") }
