package kvcache

import (
	"fmt"

	"deepinfer/quant"
)

// Cache kinds of DeepSeek-V4.1's KV source layers.
const (
	// CacheKV is a KV source's compressed entries (RoPE'd, FP4), which every layer that
	// reads this source attends over; its PendKV/PendGate hold the open group.
	CacheKV = "kv"
	// CacheIndexKeys is the source's index keys, which every indexer reading this
	// source scores.
	CacheIndexKeys = "index_keys"
)

// ringGroup is the MXFP8 group of a packed window ring row.
const ringGroup = 32

// pageEntries is how many entries one page of a packed cache holds: caches grow a page
// at a time and never move the entries they hold.
const pageEntries = 64

func checkFmt(format string, group, dim int) error {
	if format == "" {
		return nil
	}
	if _, ok := quant.ParseFormat(format); !ok {
		return fmt.Errorf("unknown storage format %q", format)
	}
	if group < 1 || dim%group != 0 || (format != "mxfp8" && group%2 != 0) {
		return fmt.Errorf("group %d does not split rows of %d", group, dim)
	}
	return nil
}

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
		g = ringGroup
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

// RingRowBytes is the stored size of one window ring row of l.
func (l *LayerLayout) RingRowBytes() int {
	if f, ok := quant.ParseFormat(l.RingFmt); ok {
		return f.RowBytes(l.Dim, ringGroup)
	}
	return 4 * l.Dim
}

// RingRows is the rows l's ring keeps.
func (l *LayerLayout) RingRows() int {
	if l.RingCap > 0 {
		return l.RingCap
	}
	return max(l.Window-1, 0)
}

// EntryBytesPerToken is the compressed-cache bytes one more token adds to a sequence
// of layout l: each cache's entry size over its ratio.
func (l *Layout) EntryBytesPerToken() float64 {
	var b float64
	for _, ll := range l.Layers {
		for _, c := range ll.Caches {
			cc := Compressed{CacheLayout: c}
			cc.init()
			b += float64(cc.EntryBytes()) / float64(c.Ratio)
		}
	}
	return b
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
