package calib

import (
	"fmt"
	"io"
	"math"
	"sort"

	"deepinfer/plan"
	"deepinfer/targets/cost"
	"deepinfer/vm/stepbench"
)

// Bounds are the relative errors a prediction may have and still count as a hit:
// |simulated/measured − 1| ≤ Step for the step, ≤ Class for each kernel class.
type Bounds struct{ Step, Class float64 }

// Acceptance are issue 12's bounds: the step within 15%, each kernel class within 25%.
var Acceptance = Bounds{Step: 0.15, Class: 0.25}

// ClassResult is one kernel class of one point, measured against simulated.
type ClassResult struct {
	Class string
	// MeasuredMs is the class's time per step scaled to the measured step
	// (StepScaledClasses: the profiled time × the point's Scale), ProfiledMs the profiled
	// time as the report has it; SimulatedMs the simulation's. Each is 0 where that side
	// has no such class.
	MeasuredMs, ProfiledMs, SimulatedMs float64
	Miss                                bool // outside the class bound (or on one side only)
}

// Err is simulated/measured − 1 (+Inf where only the simulation has the class, −1
// where only the measurement has it).
func (c ClassResult) Err() float64 { return relErr(c.SimulatedMs, c.MeasuredMs) }

// PointResult is one measured point against its simulation.
type PointResult struct {
	Batch, Context          int
	MeasuredMs, SimulatedMs float64 // the measured median step; the simulated step
	Miss                    bool    // the step is outside the step bound
	// Scale is the factor the profiled class times were scaled by to add up to the
	// measured step (StepScaledClasses): below 1 where they added up to more, else 1.
	Scale   float64
	Classes []ClassResult
	// Mismatch, when set, says the report's point read other weights than this plan's
	// step would: the report was probably not measured on this plan.
	Mismatch string
	// Routing, when set, says the point's expert census found its rows on fewer experts
	// than the simulator prices (the expectation for independent tokens): a
	// random-weight model's routing, which a serving step would not have.
	Routing string
}

// routingShort is how far below the expectation a census's mean experts a layer may be
// before Compare flags the point (Routing).
const routingShort = 0.95

// Err is simulated/measured − 1 for the step.
func (p PointResult) Err() float64 { return relErr(p.SimulatedMs, p.MeasuredMs) }

// ClassMisses counts the point's classes outside the class bound.
func (p PointResult) ClassMisses() int {
	n := 0
	for _, c := range p.Classes {
		if c.Miss {
			n++
		}
	}
	return n
}

func relErr(sim, meas float64) float64 {
	if meas == 0 {
		if sim == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return sim/meas - 1
}

// Compare prices every point of a bench report as one decode step of the plan (the
// plan the report timed, or one compiled from the same config and layers) with model m
// in device-launch mode, and sets step and class times against the measured ones.
// Measured step times are the medians of the timed steps; class times come from the
// profiled steps, scaled to the measured step where they add up to more
// (StepScaledClasses), the target the calibrations are fitted to.
func Compare(p *plan.Plan, m *cost.Model, r *stepbench.Report, b Bounds) ([]PointResult, error) {
	m = m.WithLaunch(cost.Device)
	var out []PointResult
	for i, pt := range r.Points {
		sc, err := PriceStep(p, m, r, pt)
		if err != nil {
			return nil, fmt.Errorf("point %d (batch %d, context %d): the plan cannot be simulated there: %w", i, pt.Batch, pt.Context, err)
		}
		pr := PointResult{Batch: pt.Batch, Context: pt.Context, MeasuredMs: pt.MedianMs, SimulatedMs: sc.US / 1e3}
		pr.Miss = math.Abs(pr.Err()) > b.Step
		if got := sumOf(pt.Bytes.Weights); got > 0 {
			want := sumOf(stepbench.DecodeBytes(p, pt.Batch, pt.Context).Weights)
			if math.Abs(got-want) > 0.01*math.Max(got, want) {
				pr.Mismatch = fmt.Sprintf("the measured step read %.4g GB of weights, this plan's step reads %.4g GB: was the report measured on this plan?", got/1e9, want/1e9)
			}
		}
		if t, e := pt.ExpertsPerLayer(); t > 0 && t < routingShort*e {
			pr.Routing = fmt.Sprintf("the measured step's rows went to %.1f experts a MoE layer, %.1f expected for independent tokens, which the simulator prices: a random-weight model's routing (divm bench --route uniform spreads it as a trained model's)", t, e)
		}
		classMs, scale := StepScaledClasses(pt)
		classMs = sampledNames(classMs, sc)
		profiled := sampledNames(pt.ClassMs, sc)
		pr.Scale = scale
		seen := map[string]bool{}
		for k := range profiled {
			seen[k] = true
		}
		for k := range sc.ByClass {
			seen[k] = true
		}
		for k := range seen {
			c := ClassResult{Class: k, MeasuredMs: classMs[k], ProfiledMs: profiled[k], SimulatedMs: sc.ByClass[k] / 1e3}
			c.Miss = !(math.Abs(c.Err()) <= b.Class)
			pr.Classes = append(pr.Classes, c)
		}
		sort.Slice(pr.Classes, func(i, j int) bool {
			a, b := pr.Classes[i], pr.Classes[j]
			if a.MeasuredMs != b.MeasuredMs {
				return a.MeasuredMs > b.MeasuredMs
			}
			return a.Class < b.Class
		})
		out = append(out, pr)
	}
	return out, nil
}

// WriteComparison prints a comparison: per point the step measured against simulated,
// then each kernel class, misses flagged.
func WriteComparison(w io.Writer, model, bench string, res []PointResult, b Bounds) {
	fmt.Fprintf(w, "SIMULATED with %s against MEASURED %s\n", model, bench)
	fmt.Fprintf(w, "bounds: step within %.0f%%, each kernel class within %.0f%% (error = simulated/measured − 1)\n", 100*b.Step, 100*b.Class)
	fmt.Fprintf(w, "measured class times: the profiled ones, scaled to the measured step where they add up to more\n")
	steps, classes, nclasses := 0, 0, 0
	for _, p := range res {
		flag := "ok"
		if p.Miss {
			flag = "MISS"
			steps++
		}
		fmt.Fprintf(w, "\nbatch %d, context %d: step measured %.3f ms, simulated %.3f ms, error %+.1f%% %s\n",
			p.Batch, p.Context, p.MeasuredMs, p.SimulatedMs, 100*p.Err(), flag)
		if p.Routing != "" {
			fmt.Fprintf(w, "  WARNING: %s\n", p.Routing)
		}
		if p.Mismatch != "" {
			fmt.Fprintf(w, "  WARNING: %s\n", p.Mismatch)
		}
		if p.Scale != 1 && p.Scale > 0 {
			prof := 0.0
			for _, c := range p.Classes {
				prof += c.ProfiledMs
			}
			fmt.Fprintf(w, "  class times scaled ×%.3f: the profiled ones add up to %.3f ms, %+.1f%% over the step\n", p.Scale, prof, 100*(prof/p.MeasuredMs-1))
		}
		fmt.Fprintf(w, "  %-42s %11s %11s %9s\n", "kernel class", "measured ms", "simulated", "error")
		for _, c := range p.Classes {
			flag := ""
			if c.Miss {
				flag = " MISS"
				classes++
			}
			nclasses++
			e := fmt.Sprintf("%+.1f%%", 100*c.Err())
			switch {
			case c.MeasuredMs == 0 && c.SimulatedMs > 0:
				e = "sim only"
			case c.SimulatedMs == 0 && c.MeasuredMs > 0:
				e = "meas only"
			}
			fmt.Fprintf(w, "  %-42s %11.4f %11.4f %9s%s\n", c.Class, c.MeasuredMs, c.SimulatedMs, e, flag)
		}
	}
	fmt.Fprintf(w, "\n%d of %d steps and %d of %d class times outside the bounds\n", steps, len(res), classes, nclasses)
}

func sumOf(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}
