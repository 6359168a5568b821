// Package targets is the boundary between the compiler core and the hardware targets.
//
// A Target tells the compiler how to lower each IR op (which kernel, per phase); the
// core never switches on a target's name. A target that can also execute plans here
// implements Executor (runtime.go): it opens a plan with its weights and owns the
// device memory from then on, and the VM drives steps through the Runtime it returns.
// The cpu target executes everywhere; h200 and sm100 execute on a CUDA device where one
// is present (the cuda runtime) and are simulated everywhere; ascend950 is a description
// used for planning and simulation only.
package targets

import (
	"fmt"
	"sort"
	"sync"
)

// Mode says how divm runs a target's plans on this machine.
type Mode string

// Modes.
const (
	Executed  Mode = "executed"  // real kernels on this machine
	Simulated Mode = "simulated" // no numerics: predicted times only
	// Device: executed on a CUDA device when this machine has one (targets/cuda),
	// simulated everywhere.
	Device Mode = "device"
)

// Target is what the compiler needs from a hardware target.
type Target interface {
	Name() string
	// Mode says how plans for this target run here.
	Mode() Mode
	// Kernel names the kernel that implements op in phase, or false if the target has none.
	Kernel(op, phase string) (string, bool)
	// Hardware is the target's published hardware description.
	Hardware() Hardware
}

// Hardware holds the published numbers a cost model starts from (MODEL.md §3).
type Hardware struct {
	Device          string
	DenseTFLOPS     map[string]float64 // by dtype: bf16, fp8, fp4
	HBMGiB          float64
	HBMTBps         float64
	ScaleUpTBps     float64 // per device
	ScaleUpDomain   int     // devices in one scale-up domain
	ComputeUnits    int     // SMs or cores
	Source          string  // where the numbers come from
	MeasuredOnHand  bool    // true only if this team can run on the device
	NumericsEmulate string  // how numerics would be reproduced here, if at all
	// ActivationBytes is the element size the target keeps activations in (bf16 on
	// accelerators, f32 on the cpu target).
	ActivationBytes int
}

var (
	mu       sync.Mutex
	registry = map[string]Target{}
)

// Register adds a target; targets call it from init.
func Register(t Target) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[t.Name()]; dup {
		panic("targets: registered twice: " + t.Name())
	}
	registry[t.Name()] = t
}

// Lookup finds a registered target.
func Lookup(name string) (Target, error) {
	mu.Lock()
	defer mu.Unlock()
	t, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown target %q (known: %v)", name, namesLocked())
	}
	return t, nil
}

// Names lists the registered targets.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	return namesLocked()
}

func namesLocked() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
