// Package calib sets the simulator against measured decode steps: it reads divm bench
// reports (vm/stepbench's JSON), prices the same steps with a cost model
// (sim.DecodeStep), compares step and per-class times, and fits per-class calibrations
// of the cost model to the measurements.
package calib

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"deepinfer/vm/stepbench"
)

// ReadBench reads and checks a divm bench report.
func ReadBench(path string) (*stepbench.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := ParseBench(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// ParseBench decodes a divm bench report and checks what a comparison relies on: at
// least one point, each with a batch ≥ 1, a context ≥ 0, a positive finite median step
// time, and class times that are finite and not negative.
func ParseBench(data []byte) (*stepbench.Report, error) {
	var r stepbench.Report
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("not a divm bench report: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("not a divm bench report: data after the JSON object")
	}
	if len(r.Points) == 0 {
		return nil, fmt.Errorf("the bench report has no points")
	}
	for i, p := range r.Points {
		where := fmt.Sprintf("point %d (batch %d, context %d)", i, p.Batch, p.Context)
		if p.Batch < 1 || p.Context < 0 {
			return nil, fmt.Errorf("%s: needs batch ≥ 1 and context ≥ 0", where)
		}
		if !(p.MedianMs > 0) || math.IsInf(p.MedianMs, 0) {
			return nil, fmt.Errorf("%s: median step time %g ms is not a positive time", where, p.MedianMs)
		}
		for k, v := range p.ClassMs {
			if !(v >= 0) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s: class %q: time %g ms is not a time", where, k, v)
			}
		}
	}
	return &r, nil
}

// Numerics is the numerics mode a report was measured in ("fast", "fp8" or "exact"), from its
// device line; "" when the line does not say.
func Numerics(r *stepbench.Report) string {
	switch {
	case strings.Contains(r.Device, "fast numerics"):
		return "fast"
	case strings.Contains(r.Device, "fp8 numerics"):
		return "fp8"
	case strings.Contains(r.Device, "exact numerics"):
		return "exact"
	}
	return ""
}
