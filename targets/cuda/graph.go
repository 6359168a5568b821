package cuda

import (
	"fmt"
	"os"
	"strconv"
)

// CUDA graphs: a program's launches for one step shape are captured once into a graph
// and the graph is replayed for every later step of that shape, so that a step costs
// one cuGraphLaunch instead of one cuLaunchKernel per kernel.
//
// What a launch's fill writes (its grid and its argument struct) depends on the step's
// shape — T, R, K, NSeq, RowsAlone — and on device addresses that are fixed while the arena stays
// (operands, scratch, the sequence table, the error flag, the weight tables); it never
// depends on a step's host values (positions, context lengths, tokens), which kernels
// read from the device (the uploaded parameters and SeqRec table). The binders in
// ops_*.go were audited for this: fills read only Step's T, R, K, NSeq, RowsAlone, Seqs, Err,
// operands, scratch and tables, and values fixed when the plan was bound (csa41's
// lanes also read GOMAXPROCS, which matters only on the emulated device and does not
// change while a process runs). So (phase, T, R, K, NSeq, RowsAlone) keys a graph, and every
// graph is dropped when the arena is reallocated. With packed uploads a graph also
// holds unpack_step and keep_ids, whose arguments follow the same rule (packed.go).

// EnvGraphs set to 0 turns graphs off (every step launches its kernels one by one).
const EnvGraphs = "DEEPINFER_CUDA_GRAPHS"

// EnvProfileDecode set to 1 starts the profiler's collection (cuProfilerStart) right
// before the first decode step, so that a profiler that waits for it (Nsight Compute's
// --profile-from-start off; scripts/gpu-bench.sh's NCU) sees the decode steps' launches
// and none of the prefill's before them.
const EnvProfileDecode = "DEEPINFER_CUDA_PROFILE_DECODE"

// maxGraphs bounds the graphs kept: the least recently replayed is dropped first.
const maxGraphs = 64

// EnvGraphAfter is the number of steps of one shape after which the shape is captured
// into a graph (a positive integer): 1, the default, captures a shape at its first step;
// N > 1 launches a shape's first N − 1 steps kernel by kernel and captures it at the Nth,
// so that shapes that never come back (speculation's rebuild and verify groups, whose
// rows follow the acceptance; a serving batch's changing mix) pay no capture and
// instantiation and evict no graph that is replayed. On the emulated device, 16
// requests run plainly and then with speculation and partial acceptance captured 13
// graphs with the default and 6 with 3 (8 requests, TestGraphAfter: 5 and 3). For comparisons in one run; read when a runtime is opened.
const EnvGraphAfter = "DEEPINFER_CUDA_GRAPH_AFTER"

// graphAfter reads EnvGraphAfter (1 when unset; an error names a bad value).
func graphAfter() (int, error) {
	v := os.Getenv(EnvGraphAfter)
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1<<20 {
		return 0, fmt.Errorf("%s=%q: want a number of steps from 1", EnvGraphAfter, v)
	}
	return n, nil
}

type graphKey struct {
	phase         string
	T, R, K, NSeq int64
	rowsAlone     bool
}

type graphEntry struct {
	exec graphExec
	used uint64
}

type graphCache struct {
	on    bool             // not turned off (EnvGraphs, SetGraphs)
	limit int              // maxGraphs (tests lower it)
	after int              // EnvGraphAfter
	seen  map[graphKey]int // steps launched one by one of shapes not captured yet (after > 1)
	m     map[graphKey]*graphEntry
	tick  uint64
	stats GraphStats
}

// GraphStats counts the runtime's graphs.
type GraphStats struct {
	On       bool   // steps may run as graphs (not off by DEEPINFER_CUDA_GRAPHS or SetGraphs)
	Captured int64  // graphs captured (one per new step shape)
	Replayed int64  // steps run as a graph (the capturing step included)
	Waiting  int64  // steps launched one by one before their shape's capture (EnvGraphAfter > 1)
	Dropped  int64  // graphs dropped to keep at most maxGraphs, or with the arena
	Cached   int    // graphs held now
	Failed   string // why graphs were turned off after a capture failed ("" if not)
}

func (g *graphCache) init(on bool, after int) {
	g.on, g.limit, g.after, g.m, g.seen = on, maxGraphs, after, map[graphKey]*graphEntry{}, map[graphKey]int{}
}

// clear drops every graph.
func (g *graphCache) clear(d driver) error {
	var first error
	for k, e := range g.m {
		if err := d.GraphExecDestroy(e.exec); err != nil && first == nil {
			first = err
		}
		delete(g.m, k)
		g.stats.Dropped++
	}
	clear(g.seen)
	return first
}

// evict drops the least recently replayed graph.
func (g *graphCache) evict(d driver) error {
	var old graphKey
	var oldest *graphEntry
	for k, e := range g.m {
		if oldest == nil || e.used < oldest.used {
			old, oldest = k, e
		}
	}
	if oldest == nil {
		return nil
	}
	delete(g.m, old)
	g.stats.Dropped++
	return d.GraphExecDestroy(oldest.exec)
}

// graphable reports whether this step may run as a graph: not while a Hook wraps each
// instruction, while profiling or the kernel timeline puts events between launches,
// while the expert census reads ids back between them, or when graphs are turned off.
func (rt *Runtime) graphable() bool {
	return rt.graphs.on && rt.hook == nil && !rt.prof.on && !(rt.tl.on && rt.tl.kernels) && !rt.census.On
}

// runGraph launches the program for st's shape as a graph, capturing it first when
// this shape has none; with EnvGraphAfter > 1 a shape's first steps are left to the
// caller to launch one by one (graphed false).
func (rt *Runtime) runGraph(pr *prog, st Step, lay *packLayout) (graphed bool, err error) {
	g := &rt.graphs
	k := graphKey{pr.p.Phase, st.T, st.R, st.K, st.NSeq, st.RowsAlone}
	e := g.m[k]
	if e == nil && g.seen[k]+1 < g.after {
		if len(g.seen) >= 16*maxGraphs { // (a bound on the shapes remembered)
			clear(g.seen)
		}
		g.seen[k]++
		g.stats.Waiting++
		return false, nil
	}
	if e == nil {
		delete(g.seen, k)
		if len(g.m) >= g.limit {
			if err := g.evict(rt.drv); err != nil {
				return false, err
			}
		}
		x, err := rt.capture(pr, st, lay)
		if err != nil {
			return false, err
		}
		e = &graphEntry{exec: x}
		g.m[k] = e
		g.stats.Captured++
	}
	g.tick++
	e.used = g.tick
	if err := rt.drv.GraphLaunch(e.exec, rt.stream); err != nil {
		return false, err
	}
	g.stats.Replayed++
	return true, nil
}

// captureError is a graph call's failure while capturing (begin, end, instantiate):
// nothing of the step ran, so the step can run launch by launch instead.
type captureError struct{ err error }

func (e *captureError) Error() string { return "capturing a graph: " + e.err.Error() }
func (e *captureError) Unwrap() error { return e.err }

// capture records the program's launches for st's shape into an executable graph,
// with a packed layout between unpack_step and keep_ids (packed.go says why they may).
func (rt *Runtime) capture(pr *prog, st Step, lay *packLayout) (graphExec, error) {
	d, s := rt.drv, rt.stream
	if err := d.BeginCapture(s); err != nil {
		return 0, &captureError{err}
	}
	abort := func(err error) (graphExec, error) {
		// end the capture so that the stream is usable again
		if gr, e2 := d.EndCapture(s); e2 == nil {
			_ = d.GraphDestroy(gr)
		}
		return 0, err
	}
	if lay != nil {
		if err := rt.unpack(lay); err != nil {
			return abort(fmt.Errorf("capturing: %w", err))
		}
	}
	for i, c := range pr.calls {
		rt.setShapes(c, st)
		if err := rt.launch(c); err != nil {
			return abort(fmt.Errorf("capturing instr %d (%s): %w", i, c.in.Op, err))
		}
	}
	if lay != nil {
		if err := rt.keepIds(rt.sampledIds(pr), st.R); err != nil {
			return abort(fmt.Errorf("capturing: %w", err))
		}
	}
	gr, err := d.EndCapture(s)
	if err != nil {
		return 0, &captureError{err}
	}
	x, err := d.Instantiate(gr)
	// the executable graph does not need the graph it was made from
	if e2 := d.GraphDestroy(gr); err == nil {
		err = e2
	}
	if err != nil {
		return 0, &captureError{err}
	}
	return x, nil
}

// graphFailed turns graphs off for good after a capture failed (a driver that cannot
// capture, say): the reason is kept for GraphStats and said once on stderr, and steps
// run launch by launch from then on.
func (rt *Runtime) graphFailed(err error) {
	g := &rt.graphs
	g.on = false
	g.stats.Failed = err.Error()
	_ = g.clear(rt.drv)
	fmt.Fprintf(os.Stderr, "cuda: %v; CUDA graphs turned off, steps launch their kernels one by one\n", err)
}

// SetGraphs turns graphs on or off (off: every step launches its kernels one by one);
// turning them off drops the captured graphs. DEEPINFER_CUDA_GRAPHS=0 starts a runtime
// with them off.
func (rt *Runtime) SetGraphs(on bool) error {
	var err error
	rt.w.do(func() {
		rt.graphs.on = on
		if !on {
			if err = rt.drv.Sync(rt.stream); err == nil {
				err = rt.graphs.clear(rt.drv)
			}
		}
	})
	return err
}

// GraphStats reports the runtime's graphs.
func (rt *Runtime) GraphStats() GraphStats {
	var s GraphStats
	get := func() {
		s = rt.graphs.stats
		s.On, s.Cached = rt.graphs.on, len(rt.graphs.m)
	}
	if rt.closed {
		get()
	} else {
		rt.w.do(get)
	}
	return s
}

// GraphSummary is GraphStats in words.
func (rt *Runtime) GraphSummary() string {
	g := rt.GraphStats()
	if !g.On {
		if g.Failed != "" {
			return fmt.Sprintf("graphs off after a failed capture (%s; %d steps replayed while on)", g.Failed, g.Replayed)
		}
		return fmt.Sprintf("graphs off (%d steps replayed while on)", g.Replayed)
	}
	if rt.graphs.after > 1 {
		return fmt.Sprintf("graphs on (%d captured, %d steps replayed; a shape captured at its step %d, %d steps launched one by one before)", g.Captured, g.Replayed, rt.graphs.after, g.Waiting)
	}
	return fmt.Sprintf("graphs on (%d captured, %d steps replayed)", g.Captured, g.Replayed)
}
