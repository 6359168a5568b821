package cuda

import (
	"unsafe"

	"deepinfer/plan"
	"deepinfer/targets"
)

// census is the expert census (targets.ExpertCensus): while on, each decode step's
// moe_experts instructions have their slots' expert ids read back after they run (a
// synchronization each) and tallied.
type census struct {
	targets.Census
	ids []int32
}

var _ targets.ExpertCensus = (*Runtime)(nil)

// SetExpertCensus implements targets.ExpertCensus. Steps run with it on launch their
// kernels one by one (no graphs).
func (rt *Runtime) SetExpertCensus(on bool) { rt.w.do(func() { rt.census.On = on }) }

// TakeExpertCensus implements targets.ExpertCensus.
func (rt *Runtime) TakeExpertCensus() (d map[int]targets.ExpertTally, n int) {
	rt.w.do(func() { d, n = rt.census.Take() })
	return d, n
}

// censusOn reports whether this step of pr counts its experts.
func (rt *Runtime) censusOn(pr *prog) bool { return rt.census.On && pr.p.Phase == plan.PhaseDecode }

// countExperts reads back call i's expert ids when it routes slots to experts (its third
// operand) and adds them to the census.
func (rt *Runtime) countExperts(i int, c *call) error {
	if c.in.Op != "moe_experts" || len(c.step.args) < 3 {
		return nil
	}
	E, _ := c.in.Attrs.Int("experts")
	ids := &c.step.args[2]
	n := ids.Elems()
	if E <= 0 || n <= 0 {
		return nil
	}
	cs := &rt.census
	if int64(cap(cs.ids)) < n {
		cs.ids = make([]int32, n)
	}
	cs.ids = cs.ids[:n]
	if err := rt.drv.DtoH(unsafe.Pointer(&cs.ids[0]), ids.Ptr, uint64(4*n), rt.stream); err != nil {
		return err
	}
	if err := rt.drv.Sync(rt.stream); err != nil {
		return err
	}
	cs.Add(i, cs.ids, int(E))
	return nil
}
