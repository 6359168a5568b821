package cost

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/optimize"
)

// FitData is one measured table and the launch mode its times were taken in.
type FitData struct {
	T      *Table
	Launch Launch
}

// FitOptions control Fit.
type FitOptions struct {
	Free     []string // parameter names to fit; nil means all of Params.Free
	Prior    float64  // weight pulling each log-parameter toward its start (keeps unidentified ones put); default 0.01
	Huber    float64  // log-residual beyond which a row's loss grows linearly, not quadratically; default 0.15
	MaxEvals int      // per Nelder–Mead restart; default 20000
	Restarts int      // Nelder–Mead restarts from the last optimum; default 4
}

// FitReport says how a fit went.
type FitReport struct {
	Loss  float64
	Evals int
	Free  []Param // fitted values
}

// Fit adjusts the free parameters of m to minimize the Huber loss of the log ratio
// ln(pred/meas) over every measured row, plus a weak prior toward the starting values.
// Parameters are searched in log space (all are positive); fractions are kept ≤ 1.
// Nelder–Mead, because the tile choice makes the loss piecewise smooth.
func Fit(m *Model, data []FitData, opt FitOptions) (*Model, FitReport, error) {
	if opt.Prior == 0 {
		opt.Prior = 0.01
	}
	if opt.Huber == 0 {
		opt.Huber = 0.15
	}
	if opt.MaxEvals == 0 {
		opt.MaxEvals = 20000
	}
	if opt.Restarts == 0 {
		opt.Restarts = 4
	}
	names := opt.Free
	start := m.P.clone()
	if names == nil {
		for _, p := range start.Free() {
			names = append(names, p.Name)
		}
	}
	values := map[string]float64{}
	for _, p := range start.Free() {
		values[p.Name] = p.Value
	}
	x0 := make([]float64, len(names))
	for i, n := range names {
		v, ok := values[n]
		if !ok {
			return nil, FitReport{}, fmt.Errorf("cost: fit: no free parameter %q", n)
		}
		if v <= 0 {
			return nil, FitReport{}, fmt.Errorf("cost: fit: %s starts at %g; must be > 0", n, v)
		}
		x0[i] = math.Log(v)
	}
	models := map[Launch]*Model{}
	for _, d := range data {
		models[d.Launch] = nil
	}
	apply := func(x []float64) (Params, error) {
		p := start.clone()
		for i, n := range names {
			if err := p.Set(n, math.Exp(x[i])); err != nil {
				return p, err
			}
		}
		return p, p.valid()
	}
	evals := 0
	loss := func(x []float64) float64 {
		evals++
		p, err := apply(x)
		if err != nil {
			return 1e9
		}
		for l := range models {
			models[l] = m.WithParams(p).WithLaunch(l)
		}
		var s float64
		for _, d := range data {
			mm := models[d.Launch]
			for i, k := range d.T.Kernels {
				meas := d.T.Meas[i]
				if math.IsNaN(meas) {
					continue
				}
				us, _, err := mm.Predict(k)
				if err != nil || !(us > 0) {
					return 1e9
				}
				s += huber(math.Log(us/meas), opt.Huber)
			}
		}
		for i := range x {
			s += opt.Prior * (x[i] - x0[i]) * (x[i] - x0[i])
		}
		return s
	}
	x := append([]float64(nil), x0...)
	var best float64
	for r := 0; r < opt.Restarts; r++ {
		res, err := optimize.Minimize(optimize.Problem{Func: loss}, x,
			&optimize.Settings{FuncEvaluations: opt.MaxEvals, Converger: &optimize.FunctionConverge{Absolute: 1e-9, Iterations: 200}},
			&optimize.NelderMead{})
		if err != nil && res == nil {
			return nil, FitReport{}, fmt.Errorf("cost: fit: %w", err)
		}
		x, best = res.X, res.F
	}
	p, err := apply(x)
	if err != nil {
		return nil, FitReport{}, fmt.Errorf("cost: fit left the valid range: %w", err)
	}
	rep := FitReport{Loss: best, Evals: evals}
	got := map[string]bool{}
	for _, n := range names {
		got[n] = true
	}
	for _, q := range p.Free() {
		if got[q.Name] {
			rep.Free = append(rep.Free, q)
		}
	}
	return m.WithParams(p), rep, nil
}

func huber(r, d float64) float64 {
	a := math.Abs(r)
	if a <= d {
		return r * r
	}
	return d * (2*a - d)
}
