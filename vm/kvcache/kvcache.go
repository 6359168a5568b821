// Package kvcache holds the per-sequence decode state of a DeepSeek-V4 model.
//
// Every layer keeps a window ring of the last window-1 K=V rows (the current step's rows
// complete the window). Compressed layers add one or two compressor caches (the
// attention's, and for CSA the lightning indexer's): the rows of a window that has not
// closed yet, the previous window's Ca slice for the overlapping CSA series, and the
// compressed entries emitted so far. The layout is computed by the compiler and carried
// in the plan; this package only allocates and updates it.
package kvcache

import "fmt"

// CacheLayout describes one compressor cache.
type CacheLayout struct {
	Ratio   int  // source tokens per entry
	Dim     int  // entry width
	Overlap bool // CSA: two series, width 2·Dim per source row
}

// LayerLayout describes one layer's state.
type LayerLayout struct {
	Window int // window size in tokens (the ring keeps Window-1 rows)
	Dim    int // K=V row width
	Caches []CacheLayout
}

// Layout is the state layout of a whole model.
type Layout struct {
	Layers []LayerLayout
}

// Ring keeps the last Cap rows of a layer's K=V stream with their positions.
type Ring struct {
	Dim, Cap int
	data     []float32
	pos      []int32
	head, n  int
}

// Len is the number of rows held.
func (r *Ring) Len() int { return r.n }

// Row returns the i-th oldest row and its position.
func (r *Ring) Row(i int) ([]float32, int32) {
	j := (r.head + i) % r.Cap
	return r.data[j*r.Dim : (j+1)*r.Dim], r.pos[j]
}

// Push appends rows (n×Dim) at consecutive positions starting at pos0, dropping the oldest.
func (r *Ring) Push(rows []float32, pos0 int) {
	if r.Cap == 0 {
		return
	}
	n := len(rows) / r.Dim
	start := 0
	if n > r.Cap {
		start = n - r.Cap
	}
	for i := start; i < n; i++ {
		var j int
		if r.n < r.Cap {
			j = (r.head + r.n) % r.Cap
			r.n++
		} else {
			j = r.head
			r.head = (r.head + 1) % r.Cap
		}
		copy(r.data[j*r.Dim:(j+1)*r.Dim], rows[i*r.Dim:(i+1)*r.Dim])
		r.pos[j] = int32(pos0 + i)
	}
}

// Compressed is one compressor cache.
type Compressed struct {
	CacheLayout
	// Pending rows of the open window: raw projections, Width() floats per row.
	PendKV, PendGate []float32
	// Previous closed window's Ca slice (gate includes the position bias), Ratio×Dim.
	PrevKV, PrevGate []float32
	HasPrev          bool
	// Entries emitted so far, N×Dim.
	Entries []float32
	N       int
}

// Width is the projected row width: 2·Dim with overlap, else Dim.
func (c *Compressed) Width() int {
	if c.Overlap {
		return 2 * c.Dim
	}
	return c.Dim
}

// Pending is the number of buffered rows of the open window.
func (c *Compressed) Pending() int { return len(c.PendKV) / c.Width() }

// Entry returns entry i.
func (c *Compressed) Entry(i int) []float32 { return c.Entries[i*c.Dim : (i+1)*c.Dim] }

// Layer is one layer's state.
type Layer struct {
	Ring   Ring
	Caches []Compressed
}

// Seq is one sequence's state: every layer, and the number of tokens it has seen.
type Seq struct {
	Layers []Layer
	Len    int
}

// New allocates an empty state for layout l.
func New(l *Layout) *Seq {
	s := &Seq{Layers: make([]Layer, len(l.Layers))}
	for i, ll := range l.Layers {
		capRows := ll.Window - 1
		if capRows < 0 {
			capRows = 0
		}
		s.Layers[i].Ring = Ring{Dim: ll.Dim, Cap: capRows, data: make([]float32, capRows*ll.Dim), pos: make([]int32, capRows)}
		s.Layers[i].Caches = make([]Compressed, len(ll.Caches))
		for j, cl := range ll.Caches {
			s.Layers[i].Caches[j] = Compressed{CacheLayout: cl}
		}
	}
	return s
}

// Validate checks a layout's numbers before anything is allocated from it.
func (l *Layout) Validate() error {
	if len(l.Layers) > 1<<16 {
		return fmt.Errorf("kv layout: %d layers", len(l.Layers))
	}
	for i, ll := range l.Layers {
		if ll.Window < 1 || ll.Window > 1<<20 || ll.Dim < 1 || ll.Dim > 1<<16 || len(ll.Caches) > 2 {
			return fmt.Errorf("kv layout: layer %d: window %d, dim %d, %d caches out of range", i, ll.Window, ll.Dim, len(ll.Caches))
		}
		for j, c := range ll.Caches {
			if c.Ratio < 1 || c.Ratio > 1<<16 || c.Dim < 1 || c.Dim > 1<<16 {
				return fmt.Errorf("kv layout: layer %d cache %d: ratio %d, dim %d out of range", i, j, c.Ratio, c.Dim)
			}
		}
	}
	return nil
}

// Bytes is the state's current float32 footprint.
func (s *Seq) Bytes() int {
	n := 0
	for _, l := range s.Layers {
		n += len(l.Ring.data) * 4
		for _, c := range l.Caches {
			n += 4 * (cap(c.PendKV) + cap(c.PendGate) + cap(c.PrevKV) + cap(c.PrevGate) + cap(c.Entries))
		}
	}
	return n
}
