package cpu

import (
	"sync"
	"sync/atomic"

	"deepinfer/targets"
)

// comm is an in-process communicator between the ranks of one process: an all-to-all
// exchange of byte buffers, with the bytes each collective moved counted. Every rank
// calls the same collectives in the same order (the ranks run one program); a rank that
// fails aborts the communicator, which wakes every rank waiting in it with the error,
// so a failed step never leaves ranks blocked.
type comm struct {
	n     int
	mu    sync.Mutex
	cond  *sync.Cond
	box   [][]msg // box[src][dst]
	count int     // ranks arrived at the current barrier
	gen   uint64  // barrier generation
	err   error
	// bytes moved, by collective: payload to other ranks, payload to itself, and
	// the pair descriptors (token, slot, expert, weight) beside the payload
	stats map[string]*commStats
}

// msg is what one rank sends another in one collective: a payload (the wire format
// of the rows) and the pairs it carries.
type msg struct {
	pairs   []pair
	payload []byte
}

// pair names one (token, routing slot) of the sending rank and the expert it goes to.
type pair struct {
	tok, slot, expert int32
	w                 float32
}

// pairBytes is a pair's descriptor on the wire: token, slot and expert as int32 and
// the routing weight as fp32 (DeepEP sends the top-k ids and weights beside the rows).
const pairBytes = 16

type commStats struct {
	calls                  atomic.Int64
	remote, local, headers atomic.Int64
}

func newComm(n int) *comm {
	c := &comm{n: n, box: make([][]msg, n), stats: map[string]*commStats{}}
	for i := range c.box {
		c.box[i] = make([]msg, n)
	}
	for _, op := range []string{"moe_dispatch", "moe_combine"} {
		c.stats[op] = &commStats{}
	}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// barrier waits until every rank has arrived (or the communicator is aborted).
func (c *comm) barrier() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	g := c.gen
	c.count++
	if c.count == c.n {
		c.count = 0
		c.gen++
		c.cond.Broadcast()
		return nil
	}
	for c.gen == g && c.err == nil {
		c.cond.Wait()
	}
	return c.err
}

// abortedError is what the ranks waiting in a collective get when another rank fails.
type abortedError struct{ cause error }

func (e *abortedError) Error() string { return "another rank failed: " + e.cause.Error() }
func (e *abortedError) Unwrap() error { return e.cause }

// abort fails the communicator: every rank in or entering a collective gets err.
func (c *comm) abort(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = &abortedError{err}
	}
	c.cond.Broadcast()
	c.mu.Unlock()
}

// reset clears an abort once every rank has left the failed step, so the next step
// starts afresh (the failed step's sequences are the VM's to give up).
func (c *comm) reset() {
	c.mu.Lock()
	c.err, c.count = nil, 0
	for i := range c.box {
		clear(c.box[i])
	}
	c.mu.Unlock()
}

// allToAll sends send[dst] to every rank and returns what every rank sent this one
// (recv[src]), counting the bytes under op.
func (c *comm) allToAll(op string, rank int, send []msg) ([]msg, error) {
	st := c.stats[op]
	if rank == 0 {
		st.calls.Add(1)
	}
	for dst, m := range send {
		if dst == rank {
			st.local.Add(int64(len(m.payload)))
		} else {
			st.remote.Add(int64(len(m.payload)))
		}
		st.headers.Add(int64(len(m.pairs) * pairBytes))
		c.box[rank][dst] = m
	}
	if err := c.barrier(); err != nil {
		return nil, err
	}
	recv := make([]msg, c.n)
	for src := range recv {
		recv[src] = c.box[src][rank]
	}
	// nobody overwrites a box before every rank has read its own
	if err := c.barrier(); err != nil {
		return nil, err
	}
	return recv, nil
}

func (c *comm) snapshot() map[string]targets.CommBytes {
	out := map[string]targets.CommBytes{}
	for op, st := range c.stats {
		out[op] = targets.CommBytes{Calls: st.calls.Load(), Remote: st.remote.Load(), Local: st.local.Load(), Header: st.headers.Load()}
	}
	return out
}
