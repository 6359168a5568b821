// Package kvstate is the cpu target's per-sequence decode state of a DeepSeek-V4 model,
// in Go slices, allocated from a kvlayout.Layout.
//
// Every layer keeps a window ring of the last window-1 K=V rows (the current step's rows
// complete the window). Compressed layers add one or two compressor caches (the
// attention's, and for CSA the lightning indexer's): the rows of a window that has not
// closed yet, the previous window's Ca slice for the overlapping CSA series, and the
// compressed entries emitted so far. The layout is computed by the compiler and carried
// in the plan (package kvlayout); this package only allocates and updates it.
//
// DeepSeek-V4.1 (MODEL.md §2) adds, in v41.go: window rings stored as MXFP8 (E4M3
// values with a power-of-two scale per 32: 528 B per 512-wide row); compressed caches
// that only KV source layers own and every consumer layer reads, stored as FP4 pages
// (E2M1 with an E4M3 scale per 16: 288 B per 512-wide entry); the index keys beside
// them (FP4 with a UE8M0 scale per 32: 68 B per 128-wide key); the compressor's partial
// group; the Engram n-gram history; and the DSpark stages' window rings.
package kvstate

import (
	"deepinfer/kvlayout"
	"deepinfer/quant"
)

// Ring keeps the last Cap rows of a layer's K=V stream with their positions.
type Ring struct {
	Dim, Cap int
	data     []float32
	pos      []int32
	head, n  int
	// packed rows (a RingFmt): rowBytes each
	fmt      quant.Format
	q        []byte
	rowBytes int
}

func newRing(dim, capRows int, format string) Ring {
	r := Ring{Dim: dim, Cap: capRows, pos: make([]int32, capRows)}
	if f, ok := quant.ParseFormat(format); ok {
		r.fmt, r.rowBytes = f, f.RowBytes(dim, kvlayout.RingGroup)
		r.q = make([]byte, capRows*r.rowBytes)
	} else {
		r.data = make([]float32, capRows*dim)
	}
	return r
}

// Len is the number of rows held.
func (r *Ring) Len() int { return r.n }

// Row returns the i-th oldest row and its position. It is for float32 rings; a packed
// ring's rows come from RowInto.
func (r *Ring) Row(i int) ([]float32, int32) {
	if r.fmt != 0 {
		panic("kvstate: Row on a packed ring")
	}
	j := (r.head + i) % r.Cap
	return r.data[j*r.Dim : (j+1)*r.Dim], r.pos[j]
}

// RowInto decodes the i-th oldest row into dst (len Dim) and returns its position.
func (r *Ring) RowInto(i int, dst []float32) int32 {
	j := (r.head + i) % r.Cap
	if r.fmt != 0 {
		r.fmt.Unpack(r.q[j*r.rowBytes:(j+1)*r.rowBytes], kvlayout.RingGroup, dst)
	} else {
		copy(dst, r.data[j*r.Dim:(j+1)*r.Dim])
	}
	return r.pos[j]
}

// Push appends rows (n×Dim) at consecutive positions starting at pos0, dropping the
// oldest. A packed ring quantizes each row (lossless for rows already rounded to its
// format, which is what V4.1 pushes).
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
		src := rows[i*r.Dim : (i+1)*r.Dim]
		if r.fmt != 0 {
			r.fmt.Pack(src, kvlayout.RingGroup, r.q[j*r.rowBytes:(j+1)*r.rowBytes])
		} else {
			copy(r.data[j*r.Dim:(j+1)*r.Dim], src)
		}
		r.pos[j] = int32(pos0 + i)
	}
}

// Compressed is one compressor cache.
type Compressed struct {
	kvlayout.CacheLayout
	// Pending rows of the open window: raw projections, Width() floats per row.
	PendKV, PendGate []float32
	// Previous closed window's Ca slice (gate includes the position bias), Ratio×Dim.
	PrevKV, PrevGate []float32
	HasPrev          bool
	// Entries emitted so far, N×Dim (float32 caches; packed ones use pages).
	Entries []float32
	N       int
	pages   pages
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

// Entry returns entry i of a float32 cache.
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
	// Engram is the compressed ids of the last EngramContext tokens, oldest first.
	Engram []int32
}

// New allocates an empty state for layout l.
func New(l *kvlayout.Layout) *Seq {
	s := &Seq{Layers: make([]Layer, len(l.Layers))}
	for i, ll := range l.Layers {
		capRows := ll.Window - 1
		if ll.RingCap > 0 {
			capRows = ll.RingCap
		}
		if capRows < 0 {
			capRows = 0
		}
		s.Layers[i].Ring = newRing(ll.Dim, capRows, ll.RingFmt)
		s.Layers[i].Caches = make([]Compressed, len(ll.Caches))
		for j, cl := range ll.Caches {
			s.Layers[i].Caches[j] = Compressed{CacheLayout: cl}
			s.Layers[i].Caches[j].init()
		}
	}
	return s
}

// Bytes is the state's current footprint.
func (s *Seq) Bytes() int {
	n := 0
	for _, l := range s.Layers {
		n += len(l.Ring.data)*4 + len(l.Ring.q)
		for _, c := range l.Caches {
			n += 4 * (cap(c.PendKV) + cap(c.PendGate) + cap(c.PrevKV) + cap(c.PrevGate) + cap(c.Entries))
			n += c.pages.bytes()
		}
	}
	return n + 4*cap(s.Engram)
}
