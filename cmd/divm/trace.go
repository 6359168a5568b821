package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/vm"
)

// A run's trace (divm run --trace) in the Chrome trace-event format, which Perfetto
// and chrome://tracing read: complete ("X") events with microsecond timestamps from the
// run's start, one track (tid) each for the engine's host work, the device's steps, its
// kernels and its idle gaps between steps.

// The trace's tracks.
const (
	tracePid      = 1
	tidHost       = 1
	tidDevSteps   = 2
	tidDevKernels = 3
	tidDevIdle    = 4
)

type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

type traceFile struct {
	TraceEvents     []traceEvent `json:"traceEvents"`
	DisplayTimeUnit string       `json:"displayTimeUnit"`
}

// tracer collects the engine's host spans during a run.
type tracer struct {
	spans []vm.TraceSpan
}

func (t *tracer) add(s vm.TraceSpan) { t.spans = append(t.spans, s) }

// gap is the device's idle time between two consecutive steps.
type gap struct {
	after, before int64 // the steps (the runtime's counter)
	start, end    time.Time
	decode        bool // between two decode steps
}

// deviceGaps are the idle stretches between consecutive device steps (kernel spans
// are ignored), in time order; overlapping steps give a gap of 0.
func deviceGaps(dev []targets.DeviceSpan) []gap {
	var steps []targets.DeviceSpan
	for _, s := range dev {
		if s.Kernel == "" && s.Class == "" {
			steps = append(steps, s)
		}
	}
	slices.SortStableFunc(steps, func(a, b targets.DeviceSpan) int { return a.Start.Compare(b.Start) })
	var gaps []gap
	for i := 1; i < len(steps); i++ {
		a, b := steps[i-1], steps[i]
		end := b.Start
		if end.Before(a.End) {
			end = a.End
		}
		gaps = append(gaps, gap{after: a.Step, before: b.Step, start: a.End, end: end,
			decode: a.Phase == plan.PhaseDecode && b.Phase == plan.PhaseDecode})
	}
	return gaps
}

// traceSummary is what the run's summary line reports.
type traceSummary struct {
	Steps          int64
	DeviceGaps     bool // a device timeline was recorded
	Gaps           int  // gaps between decode steps
	GapP50, GapP90 time.Duration
	HostP50        time.Duration // engine host time per step (schedule, prepare, enqueue, tokens)
	Hidden         time.Duration // host time the overlap hid, in all
	AsyncSteps     int64
	DeviceSpans    int
	Overlaps       bool // the runtime has a device queue (else nothing is hidden)
	// with --trace-kernels: the last decode step's launches, their summed time and the
	// kernels that took most of it (name, launches, time), longest first
	KernelStep     int64
	KernelLaunches int
	KernelTime     time.Duration
	Kernels        []kernelTotal
}

// kernelTotal is one kernel's launches and summed time in a step.
type kernelTotal struct {
	Name     string
	Launches int
	Time     time.Duration
}

// traceTopKernels is how many kernels the summary line names.
const traceTopKernels = 6

// lastDecodeKernels totals the kernel spans of the last decode step that has any, by
// kernel name (its class where the span names no kernel), longest first, ties by name.
func lastDecodeKernels(dev []targets.DeviceSpan) (step int64, launches int, total time.Duration, ks []kernelTotal) {
	step = -1
	for _, s := range dev {
		if s.Phase == plan.PhaseDecode && (s.Kernel != "" || s.Class != "") && s.Step > step {
			step = s.Step
		}
	}
	if step < 0 {
		return step, 0, 0, nil
	}
	by := map[string]*kernelTotal{}
	for _, s := range dev {
		if s.Step != step || s.Phase != plan.PhaseDecode || (s.Kernel == "" && s.Class == "") {
			continue
		}
		name := s.Kernel
		if name == "" {
			name = s.Class
		}
		k := by[name]
		if k == nil {
			k = &kernelTotal{Name: name}
			by[name] = k
		}
		d := max(0, s.End.Sub(s.Start))
		k.Launches++
		k.Time += d
		launches++
		total += d
	}
	for _, k := range by {
		ks = append(ks, *k)
	}
	slices.SortFunc(ks, func(a, b kernelTotal) int {
		if a.Time != b.Time {
			return cmp.Compare(b.Time, a.Time)
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return step, launches, total, ks
}

func (s traceSummary) String() string {
	line := fmt.Sprintf("%d steps (%d async); engine host time per step median %.1f µs", s.Steps, s.AsyncSteps, us(s.HostP50))
	if s.Overlaps {
		line += fmt.Sprintf("; hidden by the overlap %.1f µs in all", us(s.Hidden))
		if s.AsyncSteps > 0 {
			line += fmt.Sprintf(" (%.1f µs per async step)", us(s.Hidden)/float64(s.AsyncSteps))
		}
	} else {
		line += "; nothing hidden (no device queue)"
	}
	switch {
	case !s.DeviceGaps:
		line += "; device idle gaps unavailable: this target records no device timeline"
	case s.Gaps == 0:
		line += "; no two consecutive decode steps on the device timeline"
	default:
		line += fmt.Sprintf("; device idle between decode steps median %.1f µs, p90 %.1f µs (%d gaps)", us(s.GapP50), us(s.GapP90), s.Gaps)
	}
	if s.KernelLaunches > 0 {
		line += fmt.Sprintf("\ntrace kernels: decode step %d, %d launches, %.1f µs of kernel time; longest:", s.KernelStep, s.KernelLaunches, us(s.KernelTime))
		for i, k := range s.Kernels[:min(len(s.Kernels), traceTopKernels)] {
			if i > 0 {
				line += ","
			}
			line += fmt.Sprintf(" %s %.1f µs (%d)", k.Name, us(k.Time), k.Launches)
		}
	}
	return line
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// quantile is the q-quantile of durations (nearest rank; 0 for none).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q * float64(len(s)))
	return s[min(i, len(s)-1)]
}

// hostPerStep sums the engine's own host work per step: everything but waiting for
// the device and synchronous steps (which hold the runtime's work).
func hostPerStep(spans []vm.TraceSpan) []time.Duration {
	per := map[int]time.Duration{}
	for _, s := range spans {
		switch s.Name {
		case "schedule", "prepare", "enqueue", "tokens":
			per[s.Step] += s.End.Sub(s.Start)
		}
	}
	out := make([]time.Duration, 0, len(per))
	for _, d := range per {
		out = append(out, d)
	}
	return out
}

// buildTrace lays out the host spans and the device's spans (nil without a timeline)
// as trace events, and summarizes them.
func buildTrace(host []vm.TraceSpan, dev []targets.DeviceSpan, timeline bool, st vm.Stats) (traceFile, traceSummary) {
	sum := traceSummary{Steps: st.Steps, AsyncSteps: st.AsyncSteps, Hidden: st.Hidden, DeviceGaps: timeline, DeviceSpans: len(dev)}
	sum.KernelStep, sum.KernelLaunches, sum.KernelTime, sum.Kernels = lastDecodeKernels(dev)
	var base time.Time
	first := func(t time.Time) {
		if base.IsZero() || t.Before(base) {
			base = t
		}
	}
	for _, s := range host {
		first(s.Start)
	}
	for _, s := range dev {
		first(s.Start)
	}
	ts := func(t time.Time) float64 { return us(t.Sub(base)) }
	dur := func(a, b time.Time) float64 { return max(0, us(b.Sub(a))) }
	meta := func(tid int, name string) traceEvent {
		return traceEvent{Name: "thread_name", Ph: "M", Pid: tracePid, Tid: tid, Args: map[string]any{"name": name}}
	}
	f := traceFile{DisplayTimeUnit: "ns", TraceEvents: []traceEvent{
		{Name: "process_name", Ph: "M", Pid: tracePid, Args: map[string]any{"name": "divm run"}},
		meta(tidHost, "engine (host)"),
	}}
	if timeline {
		f.TraceEvents = append(f.TraceEvents, meta(tidDevSteps, "device steps"), meta(tidDevKernels, "device kernels"), meta(tidDevIdle, "device idle"))
	}
	var events []traceEvent
	for _, s := range host {
		events = append(events, traceEvent{Name: s.Name, Cat: "host", Ph: "X", Ts: ts(s.Start), Dur: dur(s.Start, s.End),
			Pid: tracePid, Tid: tidHost, Args: map[string]any{"step": s.Step}})
	}
	for _, s := range dev {
		e := traceEvent{Ph: "X", Ts: ts(s.Start), Dur: dur(s.Start, s.End), Pid: tracePid, Args: map[string]any{"step": s.Step, "phase": s.Phase}}
		if s.Kernel == "" && s.Class == "" {
			e.Name, e.Cat, e.Tid = s.Phase+" step", "device", tidDevSteps
		} else {
			e.Name, e.Cat, e.Tid = s.Kernel, "kernel", tidDevKernels
			if e.Name == "" {
				e.Name = s.Class
			}
			e.Args["class"] = s.Class
		}
		events = append(events, e)
	}
	var decodeGaps []time.Duration
	for _, g := range deviceGaps(dev) {
		d := g.end.Sub(g.start)
		events = append(events, traceEvent{Name: "idle", Cat: "gap", Ph: "X", Ts: ts(g.start), Dur: dur(g.start, g.end), Pid: tracePid, Tid: tidDevIdle,
			Args: map[string]any{"after_step": g.after, "before_step": g.before, "decode": g.decode, "gap_us": us(d)}})
		if g.decode {
			decodeGaps = append(decodeGaps, d)
		}
	}
	slices.SortStableFunc(events, func(a, b traceEvent) int {
		if a.Tid != b.Tid {
			return a.Tid - b.Tid
		}
		switch {
		case a.Ts < b.Ts:
			return -1
		case a.Ts > b.Ts:
			return 1
		}
		return 0
	})
	f.TraceEvents = append(f.TraceEvents, events...)
	sum.Gaps = len(decodeGaps)
	sum.GapP50, sum.GapP90 = quantile(decodeGaps, 0.5), quantile(decodeGaps, 0.9)
	sum.HostP50 = quantile(hostPerStep(host), 0.5)
	return f, sum
}

// writeTrace writes the trace file.
func writeTrace(path string, f traceFile) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
