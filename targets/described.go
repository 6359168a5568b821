package targets

// Described is a target known by its published description only: hardware numbers and a
// kernel catalog (which library kernel each IR op lowers to, per phase). Its plans can
// be compiled and inspected here; they are not executed, because the device does not
// exist on this machine.
type Described struct {
	TargetName string
	HW         Hardware
	// Catalog maps an op to its kernel; an op may name a decode-specific kernel in
	// DecodeCatalog.
	Catalog       map[string]string
	DecodeCatalog map[string]string
	// FusionRules are the chains the target runs as one kernel.
	FusionRules []Fusion
}

// Name implements Target.
func (d *Described) Name() string { return d.TargetName }

// Mode implements Target.
func (d *Described) Mode() Mode { return Simulated }

// Hardware implements Target.
func (d *Described) Hardware() Hardware { return d.HW }

// Kernel implements Target.
func (d *Described) Kernel(op, phase string) (string, bool) {
	if phase == "decode" {
		if k, ok := d.DecodeCatalog[op]; ok {
			return k, true
		}
	}
	k, ok := d.Catalog[op]
	return k, ok
}
