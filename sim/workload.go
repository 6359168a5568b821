// Package sim predicts how a plan serves a workload on hardware this machine does not
// have. It replays the plan's role programs step by step for every rank — continuous
// batching under the role's limits and KV capacity, expert-parallel dispatch and
// combine with the placement's imbalance, two-batch overlap — and prices every kernel
// call with the target's cost model (targets/cost). Nothing it prints is a
// measurement: every figure is labelled with the cost model that produced it.
package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Dist is a length distribution: fixed:N, uniform:A:B, normal:MEAN:STD (clamped to ≥ 1).
type Dist struct {
	Kind string
	A, B float64
}

// ParseDist reads a distribution.
func ParseDist(s string) (Dist, error) {
	parts := strings.Split(s, ":")
	num := func(i int) (float64, error) {
		if i >= len(parts) {
			return 0, fmt.Errorf("distribution %q: missing parameter", s)
		}
		v, err := strconv.ParseFloat(parts[i], 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || v > 1<<24 {
			return 0, fmt.Errorf("distribution %q: %q is not a number of tokens in [0, 2^24]", s, parts[i])
		}
		return v, nil
	}
	d := Dist{Kind: parts[0]}
	var err error
	switch d.Kind {
	case "fixed":
		if len(parts) != 2 {
			return d, fmt.Errorf("distribution %q: want fixed:N", s)
		}
		d.A, err = num(1)
	case "uniform", "normal":
		if len(parts) != 3 {
			return d, fmt.Errorf("distribution %q: want %s:A:B", s, d.Kind)
		}
		if d.A, err = num(1); err == nil {
			d.B, err = num(2)
		}
		if err == nil && d.Kind == "uniform" && d.B < d.A {
			err = fmt.Errorf("distribution %q: the upper bound is below the lower", s)
		}
	default:
		return d, fmt.Errorf("distribution %q: want fixed:N, uniform:A:B or normal:MEAN:STD", s)
	}
	return d, err
}

// Sample draws one length (≥ 1).
func (d Dist) Sample(r *rand.Rand) int {
	var v float64
	switch d.Kind {
	case "fixed":
		v = d.A
	case "uniform":
		v = d.A + r.Float64()*(d.B-d.A)
	case "normal":
		v = min(d.A+d.B*r.NormFloat64(), d.upper())
	}
	return max(1, int(math.Round(v)))
}

// upper is the largest length the distribution draws (a normal one: mean + 4σ).
func (d Dist) upper() float64 {
	switch d.Kind {
	case "uniform":
		return d.B
	case "normal":
		return d.A + 4*d.B
	}
	return d.A
}

// Mean is the distribution's mean (before clamping).
func (d Dist) Mean() float64 {
	if d.Kind == "uniform" {
		return (d.A + d.B) / 2
	}
	return d.A
}

func (d Dist) String() string {
	switch d.Kind {
	case "fixed":
		return fmt.Sprintf("fixed:%g", d.A)
	}
	return fmt.Sprintf("%s:%g:%g", d.Kind, d.A, d.B)
}

// Workload is the offered load: a fixed number of requests in flight per rank
// (closed loop) or a Poisson arrival rate over the whole role (open loop).
type Workload struct {
	ConcurrencyPerRank int     `json:"concurrency_per_rank"`
	Rate               float64 `json:"rate"` // requests/s for the whole role
	Requests           int     `json:"requests"`
	InputLen           string  `json:"input_len"`
	OutputLen          string  `json:"output_len"`
	Seed               uint64  `json:"seed"`
	// Acceptance[k] is the probability that exactly k drafted tokens are accepted in a
	// speculative decoding step (k = 0..γ); empty: no speculation.
	Acceptance []float64 `json:"acceptance"`
	// TwoBatchOverlap splits each step into two micro-batches so that one's all-to-all
	// runs under the other's compute (default on).
	TwoBatchOverlap *bool `json:"two_batch_overlap"`
	// Temperature above 0: every request samples at a temperature (top-p, top-k), so
	// every logit row of a step is priced as a sampled row (sim.SampledClass); 0, the
	// default: greedy. Only whether it is above 0 changes a price.
	Temperature float64 `json:"temperature"`

	in, out Dist
}

// ReadWorkload reads a workload file (YAML or JSON), or an inline spec such as
// "concurrency_per_rank=256,requests=4096,input_len=fixed:130560,output_len=fixed:512".
func ReadWorkload(arg string) (*Workload, error) {
	var w Workload
	if strings.Contains(arg, "=") && !strings.ContainsAny(arg, "/{") {
		for _, kv := range strings.Split(arg, ",") {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "concurrency_per_rank":
				w.ConcurrencyPerRank, err = strconv.Atoi(v)
			case "rate":
				w.Rate, err = strconv.ParseFloat(v, 64)
			case "requests":
				w.Requests, err = strconv.Atoi(v)
			case "input_len":
				w.InputLen = v
			case "output_len":
				w.OutputLen = v
			case "seed":
				w.Seed, err = strconv.ParseUint(v, 10, 64)
			case "temperature":
				w.Temperature, err = strconv.ParseFloat(v, 64)
			default:
				return nil, fmt.Errorf("workload: unknown key %q", k)
			}
			if err != nil {
				return nil, fmt.Errorf("workload: %s: %v", k, err)
			}
		}
	} else {
		data, err := os.ReadFile(arg)
		if err != nil {
			return nil, err
		}
		return ParseWorkload(data, arg)
	}
	return &w, w.check()
}

// ParseWorkload reads a workload file's contents (YAML or JSON); name labels errors.
func ParseWorkload(data []byte, name string) (*Workload, error) {
	var w Workload
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return &w, w.check()
}

func (w *Workload) check() error {
	var err error
	if (w.ConcurrencyPerRank > 0) == (w.Rate > 0) {
		return fmt.Errorf("workload: give exactly one of concurrency_per_rank and rate")
	}
	if w.ConcurrencyPerRank < 0 || w.ConcurrencyPerRank > 1<<20 {
		return fmt.Errorf("workload: concurrency_per_rank %d is outside [1, 2^20]", w.ConcurrencyPerRank)
	}
	if w.Rate < 0 || math.IsInf(w.Rate, 0) || math.IsNaN(w.Rate) {
		return fmt.Errorf("workload: rate %g must be a positive number of requests per second", w.Rate)
	}
	if !(w.Temperature >= 0) || math.IsInf(w.Temperature, 0) {
		return fmt.Errorf("workload: temperature %g is not a number ≥ 0 (0: greedy)", w.Temperature)
	}
	if len(w.Acceptance) > 33 {
		return fmt.Errorf("workload: acceptance has %d entries: at most 33 (γ ≤ 32 drafts)", len(w.Acceptance))
	}
	if w.Requests < 1 || w.Requests > 1<<24 {
		return fmt.Errorf("workload: requests %d is outside [1, 2^24]", w.Requests)
	}
	if w.in, err = ParseDist(w.InputLen); err != nil {
		return fmt.Errorf("workload: input_len: %v", err)
	}
	if w.out, err = ParseDist(w.OutputLen); err != nil {
		return fmt.Errorf("workload: output_len: %v", err)
	}
	sum := 0.0
	for _, p := range w.Acceptance {
		if p < 0 || math.IsNaN(p) {
			return fmt.Errorf("workload: acceptance probability %g is not in [0, 1]", p)
		}
		sum += p
	}
	if len(w.Acceptance) > 0 && math.Abs(sum-1) > 1e-6 {
		return fmt.Errorf("workload: acceptance probabilities sum to %g, not 1", sum)
	}
	return nil
}

// rows marks a step's logit rows sampled when the workload samples at a temperature.
func (w *Workload) rows(s stepShape) stepShape {
	if w.Temperature > 0 {
		s.S = s.R
	}
	return s
}

// overlap reports whether two-batch overlap is on.
func (w *Workload) overlap() bool { return w.TwoBatchOverlap == nil || *w.TwoBatchOverlap }

// MeanAccepted is the expected number of accepted drafts per speculative step.
func (w *Workload) MeanAccepted() float64 {
	m := 0.0
	for k, p := range w.Acceptance {
		m += float64(k) * p
	}
	return m
}

// Check validates a workload changed after it was read (a measured acceptance put in).
func (w *Workload) Check() error { return w.check() }
