package cuda

import (
	"fmt"
	"slices"
	"time"

	"deepinfer/targets"
)

// profile holds per-instruction device events while profiling is on (SetProfile).
type profile struct {
	on     bool
	events map[*prog][]event // len(calls)+1 per program, made on first use
	total  map[string]time.Duration
	steps  int
	// per launch: an event before and after each launch of the step, and its key
	lev    []event
	lkeys  []string
	nl     int
	launch map[string]time.Duration
	count  map[string]int // launches by key, over the same steps as launch
}

var (
	_ targets.Profiler       = (*Runtime)(nil)
	_ targets.LaunchProfiler = (*Runtime)(nil)
	_ targets.DeviceBench    = (*Runtime)(nil)
)

// SetProfile implements targets.Profiler.
func (rt *Runtime) SetProfile(on bool) { rt.w.do(func() { rt.prof.on = on }) }

// TakeProfile implements targets.Profiler.
func (rt *Runtime) TakeProfile() (map[string]time.Duration, int) {
	var out map[string]time.Duration
	var n int
	rt.w.do(func() {
		out, n = rt.prof.total, rt.prof.steps
		rt.prof.total, rt.prof.steps = nil, 0
	})
	return out, n
}

// TakeLaunchProfile implements targets.LaunchProfiler.
func (rt *Runtime) TakeLaunchProfile() map[string]time.Duration {
	var out map[string]time.Duration
	rt.w.do(func() { out, rt.prof.launch = rt.prof.launch, nil })
	return out
}

// TakeLaunchCounts implements targets.LaunchProfiler.
func (rt *Runtime) TakeLaunchCounts() map[string]int {
	var out map[string]int
	rt.w.do(func() { out, rt.prof.count = rt.prof.count, nil })
	return out
}

// launchEvent records the event before (end false) or after a launch of kernel
// while profiling.
func (rt *Runtime) launchEvent(c *call, kernel string, end bool) error {
	p := &rt.prof
	i := 2 * p.nl
	if end {
		i++
	}
	for len(p.lev) <= i {
		e, err := rt.drv.NewEvent()
		if err != nil {
			return err
		}
		p.lev = append(p.lev, e)
	}
	if !end {
		k := c.in.Kernel
		if k == "" {
			k = c.in.Op
		}
		k += ": " + kernel
		if p.nl < len(p.lkeys) {
			p.lkeys[p.nl] = k
		} else {
			p.lkeys = append(p.lkeys, k)
		}
	} else {
		p.nl++
	}
	return rt.drv.Record(p.lev[i], rt.stream)
}

// profEvents returns the program's events, creating them once.
func (rt *Runtime) profEvents(pr *prog) ([]event, error) {
	if rt.prof.events == nil {
		rt.prof.events = map[*prog][]event{}
	}
	evs := rt.prof.events[pr]
	for len(evs) < len(pr.calls)+1 {
		e, err := rt.drv.NewEvent()
		if err != nil {
			return nil, err
		}
		evs = append(evs, e)
	}
	rt.prof.events[pr] = evs
	return evs, nil
}

// collect adds a finished step's event intervals to the totals (the step has synced).
func (rt *Runtime) collect(pr *prog, evs []event) error {
	if rt.prof.total == nil {
		rt.prof.total = map[string]time.Duration{}
	}
	for i, c := range pr.calls {
		ms, err := rt.drv.Elapsed(evs[i], evs[i+1])
		if err != nil {
			return err
		}
		k := c.in.Kernel
		if k == "" {
			k = c.in.Op
		}
		rt.prof.total[k] += time.Duration(float64(ms) * 1e6)
	}
	rt.prof.steps++
	if rt.prof.launch == nil {
		rt.prof.launch = map[string]time.Duration{}
	}
	if rt.prof.count == nil {
		rt.prof.count = map[string]int{}
	}
	for j := 0; j < rt.prof.nl; j++ {
		ms, err := rt.drv.Elapsed(rt.prof.lev[2*j], rt.prof.lev[2*j+1])
		if err != nil {
			return err
		}
		rt.prof.launch[rt.prof.lkeys[j]] += time.Duration(float64(ms) * 1e6)
		rt.prof.count[rt.prof.lkeys[j]]++
	}
	rt.prof.nl = 0
	return nil
}

// CopyBandwidth implements targets.DeviceBench.
func (rt *Runtime) CopyBandwidth(bytes int64, reps int) (float64, error) {
	if bytes <= 0 || reps <= 0 {
		return 0, fmt.Errorf("copy bandwidth: %d bytes, %d repetitions", bytes, reps)
	}
	var rate float64
	var err error
	rt.w.do(func() { rate, err = rt.copyBandwidth(bytes, reps) })
	return rate, err
}

func (rt *Runtime) copyBandwidth(bytes int64, reps int) (float64, error) {
	d, s := rt.drv, rt.stream
	a, err := d.Alloc(uint64(bytes))
	if err != nil {
		return 0, fmt.Errorf("copy bandwidth buffer (%d bytes): %w", bytes, err)
	}
	defer d.Free(a)
	b, err := d.Alloc(uint64(bytes))
	if err != nil {
		return 0, fmt.Errorf("copy bandwidth buffer (%d bytes): %w", bytes, err)
	}
	defer d.Free(b)
	// random-looking content, not zeros
	if err := d.Memset(a, 0x5a, uint64(bytes), s); err != nil {
		return 0, err
	}
	r := -1 // one warm-up copy
	med, err := rt.medianMs(reps, func() error {
		src, dst := a, b
		if r%2 != 0 {
			src, dst = b, a
		}
		r++
		return d.DtoD(dst, src, uint64(bytes), s)
	})
	if err != nil {
		return 0, err
	}
	if med <= 0 {
		return 0, fmt.Errorf("copy bandwidth: the device timed a copy of %d bytes at %g ms", bytes, med)
	}
	return 2 * float64(bytes) / (med / 1e3), nil
}

// medianMs runs op once untimed, then reps times between two events on the stream,
// and returns the median of the timed runs in milliseconds (the stream synchronized).
func (rt *Runtime) medianMs(reps int, op func() error) (float64, error) {
	return rt.medianMsRun(reps, 1, func(int) error { return op() })
}

// medianMsRun is medianMs over runs of n calls: each timing records an event, calls
// op(0) … op(n−1) back to back, records the second event and divides by n, so that a
// short kernel's time is its own and not the gap before the stream's first launch (an
// idle stream fires the first event before the host has submitted the launch).
func (rt *Runtime) medianMsRun(reps, n int, op func(i int) error) (float64, error) {
	if n < 1 {
		return 0, fmt.Errorf("timing: %d calls a run", n)
	}
	d, s := rt.drv, rt.stream
	e0, err := d.NewEvent()
	if err != nil {
		return 0, err
	}
	e1, err := d.NewEvent()
	if err != nil {
		return 0, err
	}
	var ms []float64
	for r := -1; r < reps; r++ {
		if err := d.Record(e0, s); err != nil {
			return 0, err
		}
		for i := range n {
			if err := op(i); err != nil {
				return 0, err
			}
		}
		if err := d.Record(e1, s); err != nil {
			return 0, err
		}
		t, err := d.Elapsed(e0, e1)
		if err != nil {
			return 0, err
		}
		if r >= 0 {
			ms = append(ms, float64(t)/float64(n))
		}
	}
	if err := d.Sync(s); err != nil {
		return 0, err
	}
	slices.Sort(ms)
	return ms[len(ms)/2], nil
}

// CopyState implements targets.DeviceBench: a device-to-device copy of the state block.
func (rt *Runtime) CopyState(dst, src targets.State) error {
	a, ok1 := dst.(*devState)
	b, ok2 := src.(*devState)
	if !ok1 || !ok2 || a.rt != rt || b.rt != rt {
		return fmt.Errorf("copy state: not two states of this runtime")
	}
	if rt.state.size == 0 || a == b {
		return nil
	}
	if a.mem == 0 || b.mem == 0 {
		return fmt.Errorf("copy state: a released state")
	}
	var err error
	rt.w.do(func() {
		if err = rt.drv.DtoD(a.mem, b.mem, uint64(rt.state.size), rt.stream); err == nil {
			err = rt.drv.Sync(rt.stream)
		}
	})
	return err
}
