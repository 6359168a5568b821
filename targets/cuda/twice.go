package cuda

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// EnvTwice names kernels, comma-separated, whose every launch in a step is issued twice,
// back to back with the same arguments. It is a timing tool. The step time with a kernel
// doubled, less the step time without, is that kernel's cost inside the step's graph. By
// contrast, the profiled steps' event times, taken launch by launch, add up to more than
// the step: run 60's V4.1 batch-1 step summed 4.85 ms of them against a 3.22 ms graph
// step (the GPU waiting for each launch's submission, on our reading).
//
// A doubled kernel that updates its operands in place computes the second time on its own
// output, so those values are not the model's. A pure kernel's values are unchanged.
// Read when the runtime opens; a name that is no kernel of this build fails the open.
const EnvTwice = "DEEPINFER_CUDA_TWICE"

// twiceEnv reads EnvTwice: the kernels to launch twice (nil when unset or empty).
func twiceEnv() (map[string]bool, error) {
	v := strings.TrimSpace(os.Getenv(EnvTwice))
	if v == "" {
		return nil, nil
	}
	m := map[string]bool{}
	for _, k := range strings.Split(v, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			return nil, fmt.Errorf("%s=%q: an empty kernel name (want names separated by commas)", EnvTwice, v)
		}
		m[k] = true
	}
	return m, nil
}

// checkTwice requires every kernel EnvTwice names to be a kernel of this build's units.
func (rt *Runtime) checkTwice() error {
	for _, k := range rt.twiceNames() {
		if _, err := rt.function(k); err != nil {
			return fmt.Errorf("%s names %s: %w", EnvTwice, k, err)
		}
	}
	return nil
}

// twiceNames lists the kernels launched twice, sorted.
func (rt *Runtime) twiceNames() []string {
	var ks []string
	for k := range rt.twice {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
