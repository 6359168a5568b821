// Package all registers every target; commands import it for its side effect.
package all

import (
	_ "deepinfer/targets/ascend950" // planning description
	_ "deepinfer/targets/cpu"       // executing target
	_ "deepinfer/targets/h200"      // calibration target (measured cost model)
	_ "deepinfer/targets/sm100"     // planning description
)
