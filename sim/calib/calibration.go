package calib

import (
	"fmt"
	"sort"
	"strings"

	"deepinfer/targets/cost"
	"deepinfer/vm/stepbench"
)

// Calibration is a named set of class calibrations of the h200 cost model, one table
// per model type (a class name such as flashmla.sparse_decode labels different kernels
// in V4 and V4.1 plans).
type Calibration struct {
	Name     string
	Numerics string // the numerics mode its kernels ran in
	Fit      string // what it was fitted on
	Models   map[string]map[string]cost.ClassCal
}

// Target is the plan target the calibrations describe: this project's cuda kernels on
// an H200.
const Target = "h200"

// Names lists the calibrations Apply knows, and "auto".
func Names() []string { return append(fittedNames(), "auto") }

// fittedNames lists the calibrations, sorted.
func fittedNames() []string {
	var ns []string
	for n := range Fitted {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// ForReport picks a calibration: name, or for "auto" the one fitted to the numerics
// mode the report was measured in.
func ForReport(name string, r *stepbench.Report) (*Calibration, error) {
	if name == "auto" {
		num := Numerics(r)
		if num == "" {
			return nil, fmt.Errorf("--calibration auto: the bench report does not say its numerics mode; name one of %s", strings.Join(Names(), ", "))
		}
		name = "cuda-" + num
	}
	return Lookup(name)
}

// Lookup is the calibration named name (not "auto", which needs a bench report).
func Lookup(name string) (*Calibration, error) {
	c, ok := Fitted[name]
	if !ok {
		return nil, fmt.Errorf("no calibration %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return c, nil
}

// ForPlan is the calibration named name for a plan of target: this project's cuda
// kernels on an H200, so an h200 plan only. "auto" chooses by a bench report's numerics
// mode and is refused here.
func ForPlan(name, target string) (*Calibration, error) {
	if name == "auto" {
		return nil, fmt.Errorf("--calibration auto chooses by a bench report's numerics mode (--compare); name one of %s", strings.Join(fittedNames(), ", "))
	}
	c, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if target != Target {
		return nil, fmt.Errorf("calibration %s prices this project's cuda kernels on an H200 (target %s); the plan targets %s", c.Name, Target, target)
	}
	return c, nil
}

// Apply returns m with c's table for the model type: its classes priced by their
// calibration, every other class by m.
func (c *Calibration) Apply(m *cost.Model, modelType string) (*cost.Model, error) {
	t, ok := c.Models[modelType]
	if !ok {
		var ks []string
		for k := range c.Models {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return nil, fmt.Errorf("calibration %s has no table for model type %s (it has: %s)", c.Name, modelType, strings.Join(ks, ", "))
	}
	return m.WithClasses(c.Name+" ("+c.Fit+")", t), nil
}

// ShippedTrain selects the points the shipped calibrations are fitted on: every point.
// Their predictions are checked on held-out points by refitting on part of them
// (BatchHoldout, ContextHoldout).
func ShippedTrain(Loaded, stepbench.Point) bool { return true }

// A Holdout splits the points into a training set and the held-out rest.
type Holdout struct {
	Name  string
	Train func(Loaded, stepbench.Point) bool
}

// Check is the held-out complement of Train.
func (h Holdout) Check(d Loaded, p stepbench.Point) bool { return !h.Train(d, p) }

// LongContext is the long context of the measured runs (scripts/gpu-bench.sh
// LONG_CONTEXT), the one ContextHoldout holds out.
const LongContext = 32768

// The hold-out experiments: fit on batch 1 and 256 and check batch 64 (at every
// context); fit on the contexts below LongContext and check LongContext.
var (
	BatchHoldout   = Holdout{"fit on batch 1 and 256, check batch 64", func(_ Loaded, p stepbench.Point) bool { return p.Batch != 64 }}
	ContextHoldout = Holdout{"fit on the shorter contexts, check 32,768", func(_ Loaded, p stepbench.Point) bool { return p.Context < LongContext }}
)

// FitCalibrations fits one Calibration per numerics mode over data (grouped by model
// type), on the points train selects. A calibration's Fit names the runs its reports
// were measured in (Measured.Run, in the order they first appear); a report that names
// no run is an error.
//
// Sampled reports (Sampled: decode rows sampled at a temperature) fit only their
// sampler's sampled class (sim.SampledClass), pooled over every model type of a
// numerics mode and put in each of its tables: the sampler is one kernel over the
// same 129,280-entry vocabulary in V4 and V4.1, and its counts carry the vocabulary. The
// other kernels of a sampled step are the greedy steps' and are fitted on the greedy
// reports.
func FitCalibrations(base *cost.Model, data []Loaded, train func(Loaded, stepbench.Point) bool) (map[string]*Calibration, error) {
	return FitCalibrationsTerms(base, data, train, AllTerms)
}

// FitCalibrationsTerms is FitCalibrations with only the optional terms terms allows
// (Terms{}: as the fits shipped before run 19 were made).
func FitCalibrationsTerms(base *cost.Model, data []Loaded, train func(Loaded, stepbench.Point) bool, terms Terms) (map[string]*Calibration, error) {
	groups := map[[2]string][]Loaded{}
	sampled := map[string][]Loaded{}
	runs := map[string][]string{}
	for _, d := range data {
		if d.Run == "" {
			return nil, fmt.Errorf("%s: the report names no run to name the fit by", d.File)
		}
		if Sampled(d.Report) {
			sampled[d.Numerics] = append(sampled[d.Numerics], d)
		} else {
			k := [2]string{d.Numerics, d.Plan.ModelType}
			groups[k] = append(groups[k], d)
		}
		seen := false
		for _, r := range runs[d.Numerics] {
			seen = seen || r == d.Run
		}
		if !seen {
			runs[d.Numerics] = append(runs[d.Numerics], d.Run)
		}
	}
	out := map[string]*Calibration{}
	for k, g := range groups {
		t, err := FitClassesTerms(base, g, train, terms)
		if err != nil {
			return nil, fmt.Errorf("%s numerics, %s: %w", k[0], k[1], err)
		}
		name := "cuda-" + k[0]
		c := out[name]
		if c == nil {
			c = &Calibration{Name: name, Numerics: k[0], Fit: strings.Join(runs[k[0]], " + "), Models: map[string]map[string]cost.ClassCal{}}
			out[name] = c
		}
		c.Models[k[1]] = t
	}
	for num, g := range sampled {
		c := out["cuda-"+num]
		if c == nil {
			return nil, fmt.Errorf("%s numerics: sampled reports but no greedy report to fit the other kernels on", num)
		}
		t, err := FitClassesTerms(base, g, train, terms)
		if err != nil {
			return nil, fmt.Errorf("%s numerics, sampled rows: %w", num, err)
		}
		for _, tab := range c.Models {
			for k, v := range t {
				tab[k] = v
			}
		}
	}
	return out, nil
}

// GoSource prints calibrations as the Go source of Fitted.
func GoSource(cs map[string]*Calibration, header string) string {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("\npackage calib\n\nimport \"deepinfer/targets/cost\"\n\n")
	b.WriteString("// Fitted are the class calibrations fitted to this project's cuda kernels as measured\n")
	b.WriteString("// (docs/perf/simulator.md).\n")
	b.WriteString("var Fitted = map[string]*Calibration{\n")
	names := make([]string, 0, len(cs))
	for n := range cs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := cs[n]
		fmt.Fprintf(&b, "\t%q: {\n\t\tName:     %q,\n\t\tNumerics: %q,\n\t\tFit:      %q,\n\t\tModels: map[string]map[string]cost.ClassCal{\n", n, c.Name, c.Numerics, c.Fit)
		mts := make([]string, 0, len(c.Models))
		for mt := range c.Models {
			mts = append(mts, mt)
		}
		sort.Strings(mts)
		for _, mt := range mts {
			fmt.Fprintf(&b, "\t\t\t%q: {\n", mt)
			for _, k := range sortedClasses(c.Models[mt]) {
				v := c.Models[mt][k]
				fmt.Fprintf(&b, "\t\t\t\t%q: {FloorUS: %.6g, GBps: %.6g, TFLOPS: %.6g, ScanNS: %.6g, HeapNS: %.6g},\n", k, v.FloorUS, v.GBps, v.TFLOPS, v.ScanNS, v.HeapNS)
			}
			b.WriteString("\t\t\t},\n")
		}
		b.WriteString("\t\t},\n\t},\n")
	}
	b.WriteString("}\n")
	return b.String()
}
