package cuda

import (
	"fmt"
	"time"
	"unsafe"

	"deepinfer/plan"
	"deepinfer/targets"
)

// Pipelined steps (targets.Pipelined): Enqueue uploads a step, resolves its
// FromPrevious tokens on the device (from the ids the previous step left in the arena,
// next to the error flag), launches it, and queues the copy of its sampled ids and the
// error flag into page-locked host memory followed by an event; Wait waits for that
// event only — the next step may already be queued behind it — and reads the ids.
// Packed (packed.go, the default), that is one upload from the page-locked staging
// buffer, the graph (which unpacks the parameters and resolves the tokens first and
// keeps the ids last), one read-back and the event; with EnvPacked=0, one upload per
// parameter, resolve_prev, the graph, a device-to-device copy of the ids, two
// read-backs and the event.
//
// Steps that bring more than sampled ids back — logits (StepIn.Want) or the DSpark
// draft's outputs — and steps enqueued while profiling run to completion inside
// Enqueue (their Wait returns at once): correct, without the overlap.
//
// At most two steps are pending; they are waited for in order. A failed step fails
// every step enqueued after it, and Enqueue refuses new steps after a failure was
// seen (as targets.Pipeline's host pipeline does); Step is not affected.

var (
	_ targets.Pipelined = (*Runtime)(nil)
	_ targets.Timeline  = (*Runtime)(nil)
)

// pinSlot is one pending step's page-locked memory: the read-back buffer (the error
// flag, 8 bytes, then the sampled ids) and the staging buffer its uploads are copied
// from. Both are reused once the step was waited for (its event has passed).
type pinSlot struct {
	mem, up        unsafe.Pointer
	bytes, upBytes uint64
	ev             event
	busy           bool
}

// pinned makes *p a page-locked buffer of at least n bytes.
func pinned(d driver, p *unsafe.Pointer, have *uint64, n uint64) error {
	if *have >= n {
		return nil
	}
	if *p != nil {
		if err := d.FreeHost(*p); err != nil {
			return err
		}
		*p, *have = nil, 0
	}
	n = max(n, 4096)
	m, err := d.AllocHost(n)
	if err != nil {
		return fmt.Errorf("page-locked buffer (%d bytes): %w", n, err)
	}
	*p, *have = m, n
	return nil
}

type pipeline struct {
	slots     [2]pinSlot
	pending   []*pendingStep // in enqueue order
	seq       int64          // pipelined steps enqueued
	failed    error          // the first failure seen
	failedSeq int64          // the seq of the step that failed
}

// pendingStep implements targets.Pending.
type pendingStep struct {
	rt    *Runtime
	seq   int64
	slot  *pinSlot // nil for a step that ran to completion in Enqueue
	r     int64
	draft bool
	out   targets.StepOut // a completed step's outputs
	err   error
	done  bool
}

func (p *pipeline) free(d driver) {
	for i := range p.slots {
		for _, m := range []unsafe.Pointer{p.slots[i].mem, p.slots[i].up} {
			if m != nil {
				_ = d.FreeHost(m)
			}
		}
		p.slots[i] = pinSlot{}
	}
	p.pending = nil
}

// slot returns a free slot whose read-back buffer holds back bytes and whose staging
// buffer holds up bytes.
func (p *pipeline) slot(d driver, back, up uint64) (*pinSlot, error) {
	for i := range p.slots {
		sl := &p.slots[i]
		if sl.busy {
			continue
		}
		if err := pinned(d, &sl.mem, &sl.bytes, back); err != nil {
			return nil, err
		}
		if err := pinned(d, &sl.up, &sl.upBytes, up); err != nil {
			return nil, err
		}
		if sl.ev == 0 {
			e, err := d.NewEvent()
			if err != nil {
				return nil, err
			}
			sl.ev = e
		}
		return sl, nil
	}
	return nil, fmt.Errorf("enqueue: no free read-back buffer")
}

// Enqueue implements targets.Pipelined.
func (rt *Runtime) Enqueue(in *targets.StepIn) (targets.Pending, error) {
	if rt.closed {
		return nil, fmt.Errorf("runtime is closed")
	}
	var p *pendingStep
	var err error
	rt.w.do(func() { p, err = rt.enqueue(in) })
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (rt *Runtime) enqueue(in *targets.StepIn) (*pendingStep, error) {
	pp := &rt.pipe
	if len(pp.pending) >= 2 {
		return nil, fmt.Errorf("enqueue: two steps are already pending")
	}
	if pp.failed != nil {
		return nil, fmt.Errorf("enqueue after a failed step: %w", pp.failed)
	}
	pr, st, err := rt.stage(in)
	if err != nil {
		return nil, err
	}
	for i, t := range in.Tokens {
		if j, ok := targets.PreviousRow(t); ok && int64(j) >= rt.prevN {
			return nil, fmt.Errorf("token %d stands for row %d of the previous step, which sampled %d", i, j, rt.prevN)
		}
	}
	pp.seq++
	p := &pendingStep{rt: rt, seq: pp.seq, r: st.R, draft: in.Phase == plan.PhaseDraft}
	// from here on the device has work of this step: a failure fails the steps after it
	fail := func(err error) (*pendingStep, error) {
		if pp.failed == nil {
			pp.failed, pp.failedSeq = err, p.seq
		}
		return nil, err
	}
	wantsHost := p.draft || rt.prof.on
	for _, w := range in.Want {
		wantsHost = wantsHost || w
	}
	if wantsHost {
		// the whole step now: logits, drafts and profiles come back through readBack
		lay, err := rt.upload(pr, in, st, true, nil)
		if err != nil {
			return fail(err)
		}
		evs, err := rt.run(pr, st, lay)
		if err != nil {
			return fail(err)
		}
		p.err = rt.readBack(pr, in, &p.out, st.R)
		if p.err == nil && evs != nil {
			p.err = rt.collect(pr, evs)
		}
		if p.err != nil && pp.failed == nil {
			pp.failed, pp.failedSeq = p.err, p.seq
		}
		pp.pending = append(pp.pending, p)
		return p, nil
	}
	// the staging buffer: packed, the step's layout (packed.go); per parameter, each
	// upload rounded to 8 bytes (uploadParams' layout)
	var stage int64
	if rt.packed {
		stage = 4 * rt.host.lay.words // stage's layout
	} else {
		r8 := func(n int64) int64 { return (n + 7) &^ 7 }
		stage = 2*r8(4*st.T) + r8(4*st.R) + r8(16*st.R) + 40*st.NSeq
		if pr.mask >= 0 {
			stage += r8(4 * st.R * rt.params.maskCols)
		}
	}
	sl, err := pp.slot(rt.drv, uint64(8+4*st.R), uint64(stage))
	if err != nil {
		return nil, err
	}
	lay, err := rt.upload(pr, in, st, true, unsafe.Slice((*byte)(sl.up), sl.upBytes))
	if err != nil {
		return fail(err)
	}
	if _, err := rt.run(pr, st, lay); err != nil {
		return fail(err)
	}
	d, s := rt.drv, rt.stream
	// the error flag and the sampled ids lie side by side (allocArena): packed, one
	// copy brings both
	if lay != nil {
		if err := d.DtoH(sl.mem, rt.errFlag, uint64(8+4*st.R), s); err != nil {
			return fail(fmt.Errorf("read-back of the error flag and %d sampled ids: %w", st.R, err))
		}
	} else {
		if err := d.DtoH(sl.mem, rt.errFlag, 8, s); err != nil {
			return fail(err)
		}
		if st.R > 0 {
			if err := d.DtoH(unsafe.Add(sl.mem, 8), rt.prevIds, uint64(4*st.R), s); err != nil {
				return fail(err)
			}
		}
	}
	if err := d.Record(sl.ev, s); err != nil {
		return fail(err)
	}
	sl.busy = true
	p.slot = sl
	pp.pending = append(pp.pending, p)
	return p, nil
}

// Wait implements targets.Pending.
func (p *pendingStep) Wait(out *targets.StepOut) error {
	rt := p.rt
	if rt.closed {
		return fmt.Errorf("runtime is closed")
	}
	var err error
	rt.w.do(func() { err = rt.wait(p, out) })
	return err
}

func (rt *Runtime) wait(p *pendingStep, out *targets.StepOut) error {
	pp := &rt.pipe
	if p.done {
		return fmt.Errorf("wait: this step was already waited for")
	}
	if len(pp.pending) == 0 || pp.pending[0] != p {
		return fmt.Errorf("wait: an earlier enqueued step must be waited for first")
	}
	pp.pending = pp.pending[1:]
	p.done = true
	var err error
	if sl := p.slot; sl != nil {
		p.slot = nil
		err = rt.drv.EventSync(sl.ev)
		var ids []int32
		if err == nil {
			if flag := *(*int64)(sl.mem); flag != 0 {
				// reset the flag behind the steps already queued (they see it set,
				// and fail too)
				_ = rt.drv.Memset(rt.errFlag, 0, 8, rt.stream)
				err = kernelError(flag)
			} else if p.r > 0 {
				ids = unsafe.Slice((*int32)(unsafe.Add(sl.mem, 8)), p.r)
			}
		}
		if err == nil {
			out.Tokens = append(out.Tokens[:0], ids...)
			out.Logits, out.Drafts, out.Confidences = out.Logits[:0], out.Drafts[:0], out.Confidences[:0]
		}
		sl.busy = false
	} else if err = p.err; err == nil {
		*out = p.out
	}
	if pp.failed != nil && p.seq > pp.failedSeq {
		return fmt.Errorf("a step enqueued after a failed one: %w", pp.failed)
	}
	if err != nil && pp.failed == nil {
		pp.failed, pp.failedSeq = err, p.seq
	}
	return err
}

// The device timeline (targets.Timeline): an event before and after every step, and
// with kernels around every launch, from a pool of events reused after TakeTimeline.
// Event times are mapped to the host's clock through an anchor event recorded on an
// idle stream when recording begins.
type timeline struct {
	on, kernels bool
	anchor      event
	anchorT     time.Time
	pool        []event
	spans       []tlSpan
	curStep     int64
	curPhase    string
}

type tlSpan struct {
	step          int64
	phase         string
	class, kernel string
	a, b          event
}

func (t *timeline) event(d driver) (event, error) {
	if n := len(t.pool); n > 0 {
		e := t.pool[n-1]
		t.pool = t.pool[:n-1]
		return e, nil
	}
	return d.NewEvent()
}

// begin records a span's first event and returns the span's index.
func (t *timeline) begin(rt *Runtime, step int64, phase string) (int, error) {
	t.curStep, t.curPhase = step, phase
	return t.open(rt, tlSpan{step: step, phase: phase})
}

func (t *timeline) beginKernel(rt *Runtime, c *call, kernel string) (int, error) {
	class := c.in.Kernel
	if class == "" {
		class = c.in.Op
	}
	return t.open(rt, tlSpan{step: t.curStep, phase: t.curPhase, class: class, kernel: kernel})
}

func (t *timeline) open(rt *Runtime, sp tlSpan) (int, error) {
	var err error
	if sp.a, err = t.event(rt.drv); err != nil {
		return -1, err
	}
	if sp.b, err = t.event(rt.drv); err != nil {
		t.pool = append(t.pool, sp.a)
		return -1, err
	}
	if err := rt.drv.Record(sp.a, rt.stream); err != nil {
		t.pool = append(t.pool, sp.a, sp.b)
		return -1, err
	}
	t.spans = append(t.spans, sp)
	return len(t.spans) - 1, nil
}

// drop forgets the spans from i on (a step that failed before recording their ends).
func (t *timeline) drop(i int) {
	for _, sp := range t.spans[i:] {
		t.pool = append(t.pool, sp.a, sp.b)
	}
	t.spans = t.spans[:i]
}

// end records span i's second event.
func (t *timeline) end(rt *Runtime, i int) error {
	return rt.drv.Record(t.spans[i].b, rt.stream)
}

// SetTimeline implements targets.Timeline.
func (rt *Runtime) SetTimeline(on, kernels bool) {
	rt.w.do(func() {
		t := &rt.tl
		if on && !t.on {
			if err := rt.anchor(); err != nil {
				// without an anchor no span can be placed: recording stays off
				return
			}
		}
		t.on, t.kernels = on, on && kernels
	})
}

// anchor records the anchor event on the idle stream and notes the host time.
func (rt *Runtime) anchor() error {
	t, d := &rt.tl, rt.drv
	if err := d.Sync(rt.stream); err != nil {
		return err
	}
	if t.anchor == 0 {
		e, err := d.NewEvent()
		if err != nil {
			return err
		}
		t.anchor = e
	}
	t0 := time.Now()
	if err := d.Record(t.anchor, rt.stream); err != nil {
		return err
	}
	if err := d.EventSync(t.anchor); err != nil {
		return err
	}
	t1 := time.Now()
	t.anchorT = t0.Add(t1.Sub(t0) / 2)
	return nil
}

// TakeTimeline implements targets.Timeline. It waits for the recorded spans' events
// (a pending step's included).
func (rt *Runtime) TakeTimeline() ([]targets.DeviceSpan, error) {
	if rt.closed {
		return nil, fmt.Errorf("runtime is closed")
	}
	var out []targets.DeviceSpan
	var err error
	rt.w.do(func() { out, err = rt.takeTimeline() })
	return out, err
}

func (rt *Runtime) takeTimeline() ([]targets.DeviceSpan, error) {
	t, d := &rt.tl, rt.drv
	spans := t.spans
	t.spans = nil
	defer func() {
		for _, sp := range spans {
			t.pool = append(t.pool, sp.a, sp.b)
		}
	}()
	if len(spans) == 0 {
		return nil, nil
	}
	if t.anchor == 0 {
		return nil, fmt.Errorf("timeline: no anchor event")
	}
	at := func(e event) (time.Time, error) {
		ms, err := d.Elapsed(t.anchor, e)
		if err != nil {
			return time.Time{}, err
		}
		return t.anchorT.Add(time.Duration(float64(ms) * 1e6)), nil
	}
	out := make([]targets.DeviceSpan, 0, len(spans))
	for _, sp := range spans {
		a, err := at(sp.a)
		if err != nil {
			return nil, fmt.Errorf("timeline: %w", err)
		}
		b, err := at(sp.b)
		if err != nil {
			return nil, fmt.Errorf("timeline: %w", err)
		}
		out = append(out, targets.DeviceSpan{Step: sp.step, Phase: sp.phase, Class: sp.class, Kernel: sp.kernel, Start: a, End: b})
	}
	return out, nil
}
