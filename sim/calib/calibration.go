package calib

import (
	"fmt"
	"strings"

	"deepinfer/targets/cost"
	"deepinfer/vm/stepbench"
)

// Names lists the calibrations Apply knows.
func Names() []string { return nil }

// Apply returns m under the named calibration ("auto": the one for the report's
// numerics mode).
func Apply(m *cost.Model, name string, r *stepbench.Report) (*cost.Model, error) {
	return nil, fmt.Errorf("no calibration %q (known: %s)", name, strings.Join(Names(), ", "))
}
