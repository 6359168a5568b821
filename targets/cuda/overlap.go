package cuda

import (
	"fmt"
	"os"
)

// Programmatic dependent launches (PDL, Hopper and later). A decode step is a few
// hundred kernels, each waiting for the one before it; between two of them the GPU
// drains the first (its last wave's tail) and only then starts placing the second's
// blocks. With EnvOverlap=1 every launch is made with cuLaunchKernelEx and
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, also inside captured graphs
// (the capture records programmatic edges), and every kernel starts (prelude.h's
// KERNEL) with
//
//	griddepcontrol.wait              wait until the grids it depends on have finished
//	                                 and their writes are visible
//	griddepcontrol.launch_dependents let the next grid be scheduled once every block
//	                                 of this one has got here
//
// so the next kernel's blocks are placed while this one's last blocks run, and none
// of them reads or writes memory before this one has finished: the values are the
// same as with plain launches (the wait is first; two grids at most are in flight,
// because a grid's blocks trigger the next only after their own wait). Without the
// launch attribute both instructions do nothing, so the kernels are the same either
// way and the setting is the runtime's alone. The emulated device runs launches one
// after another either way.

// EnvOverlap set to 1 makes every launch a programmatic dependent launch; 0 or unset
// launches plainly. Read when a runtime is opened.
const EnvOverlap = "DEEPINFER_CUDA_PDL"

// overlapOn reads EnvOverlap; an error names a bad value.
func overlapOn() (bool, error) {
	switch v := os.Getenv(EnvOverlap); v {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want 1 (programmatic dependent launches) or 0", EnvOverlap, v)
	}
}
