package kvstate

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"slices"
)

// Saved is a sequence's state as it was when Save was called, for speculative
// decoding's rollback. Its cost is bounded by the window, not the context: the rings,
// the compressors' open groups and previous windows, and the Engram history are
// copied; the append-only parts (compressed entries, index keys) only by their count,
// since a step after Save appends to them and never rewrites an entry it did not add.
type Saved struct {
	seq    *Seq
	len    int
	engram []int32
	layers []savedLayer
}

type savedLayer struct {
	ring   Ring
	caches []savedCache
}

type savedCache struct {
	pendKV, pendGate, prevKV, prevGate []float32
	hasPrev                            bool
	n                                  int
}

// Save records the state's current content.
func (s *Seq) Save() *Saved {
	sv := &Saved{seq: s, len: s.Len, engram: slices.Clone(s.Engram), layers: make([]savedLayer, len(s.Layers))}
	for i := range s.Layers {
		l := &s.Layers[i]
		r := l.Ring
		r.data, r.pos, r.q = slices.Clone(r.data), slices.Clone(r.pos), slices.Clone(r.q)
		sl := savedLayer{ring: r, caches: make([]savedCache, len(l.Caches))}
		for j := range l.Caches {
			c := &l.Caches[j]
			sl.caches[j] = savedCache{pendKV: slices.Clone(c.PendKV), pendGate: slices.Clone(c.PendGate),
				prevKV: slices.Clone(c.PrevKV), prevGate: slices.Clone(c.PrevGate), hasPrev: c.HasPrev, n: c.N}
		}
		sv.layers[i] = sl
	}
	return sv
}

// Restore puts the state back as it was at Save; entries appended since are dropped.
// The saved copy stays valid, so a state can be restored to it again.
func (sv *Saved) Restore() {
	s := sv.seq
	s.Len = sv.len
	s.Engram = append(s.Engram[:0], sv.engram...)
	for i := range s.Layers {
		l, sl := &s.Layers[i], &sv.layers[i]
		copy(l.Ring.data, sl.ring.data)
		copy(l.Ring.pos, sl.ring.pos)
		copy(l.Ring.q, sl.ring.q)
		l.Ring.head, l.Ring.n = sl.ring.head, sl.ring.n
		for j := range l.Caches {
			c, sc := &l.Caches[j], &sl.caches[j]
			c.PendKV = append(c.PendKV[:0], sc.pendKV...)
			c.PendGate = append(c.PendGate[:0], sc.pendGate...)
			c.PrevKV = append(c.PrevKV[:0], sc.prevKV...)
			c.PrevGate = append(c.PrevGate[:0], sc.prevGate...)
			c.HasPrev = sc.hasPrev
			c.N = sc.n
			if !c.Packed() {
				c.Entries = c.Entries[:c.N*c.Dim]
			}
		}
	}
}

// Digest is a hash of the state's logical content: the token count, every ring's rows
// oldest first with their positions, every compressor's open group and previous window,
// every entry held (decoded), and the Engram history. Two states with equal digests
// hold the same values bit for bit, however their buffers are laid out (a ring's head,
// a page's spare room).
func (s *Seq) Digest() [32]byte {
	h := sha256.New()
	var b [8]byte
	putInt := func(v int) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	putF32 := func(xs []float32) {
		putInt(len(xs))
		for _, x := range xs {
			binary.LittleEndian.PutUint32(b[:4], math.Float32bits(x))
			h.Write(b[:4])
		}
	}
	putInt(s.Len)
	putInt(len(s.Engram))
	for _, id := range s.Engram {
		putInt(int(id))
	}
	for i := range s.Layers {
		l := &s.Layers[i]
		putInt(l.Ring.n)
		row := make([]float32, l.Ring.Dim)
		for r := 0; r < l.Ring.n; r++ {
			putInt(int(l.Ring.RowInto(r, row)))
			putF32(row)
		}
		for j := range l.Caches {
			c := &l.Caches[j]
			putF32(c.PendKV)
			putF32(c.PendGate)
			if c.HasPrev {
				putInt(1)
				putF32(c.PrevKV)
				putF32(c.PrevGate)
			} else {
				putInt(0)
			}
			putInt(c.N)
			e := make([]float32, c.Dim)
			for k := 0; k < c.N; k++ {
				c.EntryInto(k, e)
				putF32(e)
			}
		}
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}
