package calib

import (
	"fmt"
	"math"
	"sort"

	"deepinfer/plan"
	"deepinfer/sim"
	"deepinfer/targets/cost"
	"deepinfer/vm/stepbench"
)

// nTerms are a class calibration's terms: floor, bytes, FLOPs, scan, heap.
const nTerms = 5

// A sample is one kernel class's measured time at one point, with the model's counts
// behind that class's calls there.
type sample struct {
	calls                    float64
	bytes, flops, scan, heap float64
	us                       float64 // measured
}

// FitClasses fits a ClassCal per kernel class to the measured class times of the
// points keep selects (every point when keep is nil), over reports of one model and
// one numerics mode. The class times fitted to are each point's profiled ones scaled
// to its measured step where they add up to more (StepScaledClasses), so that a
// fitted step, the sum of its classes, is priced as the graph-replayed step. base is the model whose byte and FLOP counts the calibration
// scales (its efficiencies do not matter; its counts do).
//
// The fit: a class's time at a point is n·FloorUS + B/GBps + F/TFLOPS + S·ScanNS +
// H·HeapNS, linear in (FloorUS, 1/GBps, 1/TFLOPS, ScanNS, HeapNS), with n, B, F, S and H
// the class's calls, bytes, FLOPs, entries in view and heap-select replacements in the
// step as the simulator prices it. Least squares on the relative error
// (prediction/measured − 1) over the selected points, every coefficient ≥ 0 (active
// sets tried exhaustively), with a vanishing ridge on the column-scaled coefficients
// that picks the smallest solution where the points do not determine every term. The
// scan and heap terms are fitted only where the points differ in the entries a row has
// in view or the replacements it makes (more than one context); otherwise the floor
// carries them.
func FitClasses(base *cost.Model, data []Loaded, keep func(Loaded, stepbench.Point) bool) (map[string]cost.ClassCal, error) {
	return FitClassesTerms(base, data, keep, AllTerms)
}

// Terms says which of a class calibration's optional terms a fit may use.
type Terms struct {
	Heap bool // the heap-select term (HeapNS; since run 19)
}

// AllTerms lets a fit use every term (the shipped fits since run 19). The fits shipped
// before run 19 had no heap term: Terms{} reproduces them.
var AllTerms = Terms{Heap: true}

// FitClassesTerms is FitClasses with only the optional terms terms allows.
func FitClassesTerms(base *cost.Model, data []Loaded, keep func(Loaded, stepbench.Point) bool, terms Terms) (map[string]cost.ClassCal, error) {
	samples := map[string][]sample{}
	base = base.WithLaunch(cost.Device)
	for _, d := range data {
		for i, pt := range d.Report.Points {
			if keep != nil && !keep(d, pt) {
				continue
			}
			sc, err := PriceStep(d.Plan, base, d.Report, pt)
			if err != nil {
				return nil, fmt.Errorf("%s: point %d (batch %d, context %d): %w", d.File, i, pt.Batch, pt.Context, err)
			}
			classMs, _ := StepScaledClasses(pt)
			classMs = sampledNames(classMs, sc)
			for k, ms := range classMs {
				if Sampled(d.Report) && !sim.IsSampledClass(k) {
					continue // a sampled report fits its sampler alone (FitCalibrations)
				}
				n := sc.ClassCalls[k]
				if ms <= 0 || n == 0 {
					continue // measured only: nothing in the plan's pricing to scale
				}
				s := sample{calls: float64(n), bytes: sc.ClassBytes[k], flops: sc.ClassFLOPs[k], scan: sc.ClassScan[k], us: ms * 1e3}
				if terms.Heap {
					s.heap = sc.ClassHeap[k]
				}
				samples[k] = append(samples[k], s)
			}
		}
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("calib: no measured class time to fit")
	}
	out := map[string]cost.ClassCal{}
	for k, ss := range samples {
		x := fitOne(ss)
		c := cost.ClassCal{FloorUS: x[0]}
		if x[1] > 0 {
			c.GBps = 1 / (x[1] * 1e3)
		}
		if x[2] > 0 {
			c.TFLOPS = 1 / (x[2] * 1e6)
		}
		c.ScanNS = x[3] * 1e3
		c.HeapNS = x[4] * 1e3
		out[k] = c
	}
	return out, nil
}

// fitOne solves the non-negative least squares of one class: coefficients (µs per
// call, µs per byte, µs per FLOP, µs per entry scanned, µs per heap replacement).
func fitOne(ss []sample) [nTerms]float64 {
	const ridge = 1e-9
	rows := make([][nTerms]float64, len(ss))
	var scale [nTerms]float64
	for i, s := range ss {
		rows[i] = [nTerms]float64{s.calls / s.us, s.bytes / s.us, s.flops / s.us, s.scan / s.us, s.heap / s.us}
		for j := range scale {
			scale[j] = math.Max(scale[j], rows[i][j])
		}
	}
	// a scan (or heap walk) of the same length at every point is a fixed cost per call:
	// the floor carries it (its term needs points at more than one context)
	for j, per := range map[int]func(sample) float64{3: func(s sample) float64 { return s.scan }, 4: func(s sample) float64 { return s.heap }} {
		if scale[j] == 0 {
			continue
		}
		lo, hi := math.Inf(1), 0.0
		for _, s := range ss {
			r := per(s) / s.calls
			lo, hi = math.Min(lo, r), math.Max(hi, r)
		}
		if hi-lo <= 1e-9*hi {
			scale[j] = 0
		}
	}
	best, bestLoss := [nTerms]float64{}, math.Inf(1)
	for set := 1; set < 1<<nTerms; set++ {
		var cols []int
		ok := true
		for j := 0; j < nTerms; j++ {
			if set&(1<<j) != 0 {
				if scale[j] == 0 {
					ok = false
				}
				cols = append(cols, j)
			}
		}
		if !ok {
			continue
		}
		// normal equations in the scaled columns: (AᵀA + ridge·I) y = Aᵀ1
		n := len(cols)
		a := make([][]float64, n)
		b := make([]float64, n)
		for p := range cols {
			a[p] = make([]float64, n)
			for _, r := range rows {
				rp := r[cols[p]] / scale[cols[p]]
				b[p] += rp
				for q := range cols {
					a[p][q] += rp * r[cols[q]] / scale[cols[q]]
				}
			}
			a[p][p] += ridge
		}
		y, ok := solve(a, b)
		if !ok {
			continue
		}
		var x [nTerms]float64
		for p, j := range cols {
			if y[p] < 0 {
				ok = false
			}
			x[j] = y[p] / scale[j]
		}
		if !ok {
			continue
		}
		loss := 0.0
		for _, r := range rows {
			e := -1.0
			for j := range x {
				e += r[j] * x[j]
			}
			loss += e * e
		}
		for p := range cols {
			loss += ridge * y[p] * y[p]
		}
		if loss < bestLoss {
			best, bestLoss = x, loss
		}
	}
	return best
}

// solve solves a small linear system by Gaussian elimination with partial pivoting.
func solve(a [][]float64, b []float64) ([]float64, bool) {
	n := len(b)
	for c := 0; c < n; c++ {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if math.Abs(a[p][c]) < 1e-300 {
			return nil, false
		}
		a[c], a[p] = a[p], a[c]
		b[c], b[p] = b[p], b[c]
		for r := c + 1; r < n; r++ {
			f := a[r][c] / a[c][c]
			for q := c; q < n; q++ {
				a[r][q] -= f * a[c][q]
			}
			b[r] -= f * b[c]
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := b[r]
		for q := r + 1; q < n; q++ {
			s -= a[r][q] * x[q]
		}
		x[r] = s / a[r][r]
	}
	return x, true
}

// Summary condenses a comparison: the worst step error, and the class times outside a
// class bound.
type Summary struct {
	Points, Steps, StepMisses int
	WorstStep                 float64 // largest |simulated/measured − 1| of a step
	Classes, ClassMisses      int
	WorstClass                float64 // largest |error| of a class time
	WorstClassName            string
	// ProfiledClassMisses counts the class times outside the class bound when set
	// against the profiled times as the reports have them, unscaled.
	ProfiledClassMisses int
}

// Summarize condenses results (from Compare) against bounds b.
func Summarize(res []PointResult, b Bounds) Summary {
	var s Summary
	for _, p := range res {
		s.Points++
		s.Steps++
		e := math.Abs(p.Err())
		if e > b.Step {
			s.StepMisses++
		}
		s.WorstStep = math.Max(s.WorstStep, e)
		for _, c := range p.Classes {
			s.Classes++
			ce := math.Abs(c.Err())
			if !(ce <= b.Class) {
				s.ClassMisses++
			}
			if !(math.Abs(relErr(c.SimulatedMs, c.ProfiledMs)) <= b.Class) {
				s.ProfiledClassMisses++
			}
			if ce > s.WorstClass || s.WorstClassName == "" {
				s.WorstClass, s.WorstClassName = ce, fmt.Sprintf("%s at batch %d, context %d", c.Class, p.Batch, p.Context)
			}
		}
	}
	return s
}

// sortedClasses lists a calibration's classes in order.
func sortedClasses(m map[string]cost.ClassCal) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Evaluate compares the points keep selects (every point when nil) of each report with
// the simulation under m, in report order.
func Evaluate(m *cost.Model, data []Loaded, keep func(Loaded, stepbench.Point) bool, b Bounds) ([]PointResult, error) {
	var out []PointResult
	for _, d := range data {
		sub := *d.Report
		sub.Points = nil
		for _, pt := range d.Report.Points {
			if keep == nil || keep(d, pt) {
				sub.Points = append(sub.Points, pt)
			}
		}
		if len(sub.Points) == 0 {
			continue
		}
		res, err := Compare(d.Plan, m, &sub, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.File, err)
		}
		out = append(out, res...)
	}
	return out, nil
}

// Sampled reports whether a report's decode rows were sampled at a temperature
// (divm bench --temperature), not greedy.
func Sampled(r *stepbench.Report) bool { return r.Sampling != nil && r.Sampling.Temperature > 0 }

// PriceStep prices a report's point as one decode step of p with m, its rows sampled
// or greedy as the report's were.
func PriceStep(p *plan.Plan, m *cost.Model, r *stepbench.Report, pt stepbench.Point) (*sim.StepCost, error) {
	return sim.DecodeStepSampled(p, m, pt.Batch, pt.Context, Sampled(r))
}

// sampledNames names a sampled step's measured sampler class as the simulator prices
// it: a class the priced step lacks whose sim.SampledClass it has is renamed.
func sampledNames(classMs map[stepbench.Class]float64, sc *sim.StepCost) map[stepbench.Class]float64 {
	out := make(map[stepbench.Class]float64, len(classMs))
	for k, v := range classMs {
		if _, ok := sc.ByClass[k]; !ok {
			if _, ok := sc.ByClass[sim.SampledClass(k)]; ok {
				k = sim.SampledClass(k)
			}
		}
		out[k] += v
	}
	return out
}
