package grammars

import (
	"sync/atomic"
)

// Values stored in transition tables.
const (
	tUnknown int32 = -2 // not computed yet
	tDead    int32 = -1 // no transition
)

const chunkBits = 10
const chunkRows = 1 << chunkBits

// tableChunkBytes is about the size of a lazy table's chunk: a new chunk is allocated
// (zeroed) while a mask waits, so wide tables take fewer rows per chunk.
const tableChunkBytes = 64 << 10

// lazyTable is a growable table of int32 rows that many goroutines read while one
// (holding the owner's lock) appends rows and fills entries. Rows live in fixed-size
// chunks that never move; the chunk directory is replaced atomically when it grows,
// and entries are read and written atomically, so readers need no lock. An entry
// holds its value ^ tUnknown (enc), so that zeroed memory reads tUnknown and a new
// chunk needs no filling; readers of raw rows decode with ld.
type lazyTable struct {
	width int
	shift uint // rows per chunk: 1 << shift
	dir   atomic.Pointer[[][]int32]
	rows  int32 // owner's lock
}

func enc(v int32) int32 { return v ^ tUnknown }

// ld reads a raw table entry.
func ld(p *int32) int32 { return atomic.LoadInt32(p) ^ tUnknown }

func newLazyTable(width int) *lazyTable {
	t := &lazyTable{width: width, shift: chunkBits}
	for t.shift > 3 && (1<<t.shift)*width*4 > tableChunkBytes {
		t.shift--
	}
	d := [][]int32{}
	t.dir.Store(&d)
	return t
}

// addRow appends a row of tUnknown and returns its index. Caller holds the owner lock.
// The first chunk starts small and doubles (copied; readers of the old copy see
// tUnknown for newer entries and take the locked slow path), later chunks are full.
func (t *lazyTable) addRow() int32 {
	r := t.rows
	d := *t.dir.Load()
	ci := int(r >> t.shift)
	if ci >= len(d) {
		rows := 1 << t.shift
		if ci == 0 {
			rows = min(8, rows)
		}
		nd := make([][]int32, len(d)+1)
		copy(nd, d)
		nd[len(d)] = make([]int32, rows*t.width)
		t.dir.Store(&nd)
	} else if ci == 0 && int(r)*t.width >= len(d[0]) {
		old := d[0]
		rows := min(2*len(old)/t.width, 1<<t.shift)
		c := make([]int32, rows*t.width)
		for i := range old {
			c[i] = atomic.LoadInt32(&old[i])
		}
		nd := make([][]int32, len(d))
		copy(nd, d)
		nd[0] = c
		t.dir.Store(&nd)
	}
	t.rows++
	return r
}

// row returns row r (entries must be accessed atomically, and decoded with ld).
func (t *lazyTable) row(r int32) []int32 {
	d := *t.dir.Load()
	off := int(r&(1<<t.shift-1)) * t.width
	return d[r>>t.shift][off : off+t.width : off+t.width]
}

func (t *lazyTable) get(r int32, col int) int32 {
	return ld(&t.row(r)[col])
}

func (t *lazyTable) set(r int32, col int, v int32) {
	atomic.StoreInt32(&t.row(r)[col], enc(v))
}

func (t *lazyTable) bytes() int64 {
	var n int64
	for _, c := range *t.dir.Load() {
		n += int64(len(c)) * 4
	}
	return n
}

// ptrStore is a growable array of pointers with the same publication scheme.
type ptrStore[T any] struct {
	dir atomic.Pointer[[]*[chunkRows]atomic.Pointer[T]]
	n   int32
}

func (s *ptrStore[T]) init() {
	d := []*[chunkRows]atomic.Pointer[T]{}
	s.dir.Store(&d)
}

// push appends v; caller holds the owner lock.
func (s *ptrStore[T]) push(v *T) int32 {
	i := s.n
	d := *s.dir.Load()
	if int(i>>chunkBits) >= len(d) {
		nd := make([]*[chunkRows]atomic.Pointer[T], len(d)+1)
		copy(nd, d)
		nd[len(d)] = new([chunkRows]atomic.Pointer[T])
		s.dir.Store(&nd)
		d = nd
	}
	d[i>>chunkBits][i&(chunkRows-1)].Store(v)
	s.n++
	return i
}

func (s *ptrStore[T]) at(i int32) *T {
	d := *s.dir.Load()
	return d[i>>chunkBits][i&(chunkRows-1)].Load()
}
