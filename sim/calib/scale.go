package calib

import (
	"math"
	"sort"

	"deepinfer/vm/stepbench"
)

// StepScaledClasses returns a point's class times scaled to its measured step, and the
// factor applied. The class times come from separately profiled steps whose kernels are
// launched and timed one by one; the step is the median of graph-replayed steps. Where
// the profiled class times add up to more than the step (at batch 1 by 8-24% in run 9,
// by 13-39% in run 11c: the event timing's own cost between launches), each is
// multiplied by MedianMs / (their sum), so that they add up to the step and keep their
// shares of it.
// Where they add up to the step or less, where there are none, or where the sum or the
// step is not a positive finite time, they are returned as they are, with factor 1.
// The point's own map is never modified: a scaled map is a new one.
func StepScaledClasses(pt stepbench.Point) (map[stepbench.Class]float64, float64) {
	ks := make([]string, 0, len(pt.ClassMs))
	for k := range pt.ClassMs {
		ks = append(ks, k)
	}
	sort.Strings(ks) // one order of summation: the same factor every time
	sum := 0.0
	for _, k := range ks {
		if v := pt.ClassMs[k]; v > 0 {
			sum += v
		}
	}
	if !(sum > pt.MedianMs) || !(pt.MedianMs > 0) || math.IsInf(sum, 0) || math.IsInf(pt.MedianMs, 0) {
		return pt.ClassMs, 1
	}
	f := pt.MedianMs / sum
	out := make(map[stepbench.Class]float64, len(pt.ClassMs))
	for k, v := range pt.ClassMs {
		out[k] = v * f
	}
	return out, f
}
