package kvstate

import (
	"deepinfer/kvlayout"
	"deepinfer/quant"
)

// pageEntries is how many entries one page of a packed cache holds: caches grow a page
// at a time and never move the entries they hold.
const pageEntries = 64

// pages is a growable store of packed entries.
type pages struct {
	fmt      quant.Format
	group    int
	dim      int
	rowBytes int
	p        [][]byte
}

func (p *pages) bytes() int { return len(p.p) * pageEntries * p.rowBytes }

func (c *Compressed) init() {
	f, ok := quant.ParseFormat(c.Fmt)
	if !ok {
		return
	}
	g := c.Group
	if f == quant.MXFP8 && g == 0 {
		g = kvlayout.RingGroup
	}
	c.pages = pages{fmt: f, group: g, dim: c.Dim, rowBytes: f.RowBytes(c.Dim, g)}
}

// Packed reports whether entries live in packed pages (Append/EntryInto) rather than
// in Entries.
func (c *Compressed) Packed() bool { return c.pages.fmt != 0 }

// Append stores one entry (Dim values), quantizing it to the cache's format, and
// returns its index. A float32 cache appends to Entries.
func (c *Compressed) Append(row []float32) int {
	if !c.Packed() {
		c.Entries = append(c.Entries, row...)
		c.N++
		return c.N - 1
	}
	p := &c.pages
	if c.N == len(p.p)*pageEntries {
		p.p = append(p.p, make([]byte, pageEntries*p.rowBytes))
	}
	pg, off := c.N/pageEntries, (c.N%pageEntries)*p.rowBytes
	p.fmt.Pack(row, p.group, p.p[pg][off:off+p.rowBytes])
	c.N++
	return c.N - 1
}

// EntryInto decodes entry i into dst (len Dim).
func (c *Compressed) EntryInto(i int, dst []float32) {
	if !c.Packed() {
		copy(dst, c.Entry(i))
		return
	}
	p := &c.pages
	pg, off := i/pageEntries, (i%pageEntries)*p.rowBytes
	p.fmt.Unpack(p.p[pg][off:off+p.rowBytes], p.group, dst)
}

// EntryBytes is the stored size of one entry.
func (c *Compressed) EntryBytes() int {
	if !c.Packed() {
		return 4 * c.Dim
	}
	return c.pages.rowBytes
}

// PushEngram appends compressed ids to the sequence's Engram history, keeping the last
// ctx.
func (s *Seq) PushEngram(ids []int32, ctx int) {
	if ctx <= 0 {
		return
	}
	s.Engram = append(s.Engram, ids...)
	if over := len(s.Engram) - ctx; over > 0 {
		s.Engram = append(s.Engram[:0], s.Engram[over:]...)
	}
}
