// Package kvlayout is the per-sequence state layout of a model, as the compiler plans it
// and the plan carries it: each layer's window ring and compressor caches, their widths
// and storage formats, and the Engram context. It says what state a sequence has, not
// how an executor holds it: the cpu target keeps it in Go slices (targets/cpu/kvstate),
// a GPU target in device memory.
package kvlayout

import (
	"fmt"

	"deepinfer/quant"
)

// CacheLayout describes one compressor cache.
type CacheLayout struct {
	Ratio   int  // source tokens per entry
	Dim     int  // entry width
	Overlap bool // CSA: two series, width 2·Dim per source row
	// V4.1: Kind is CacheKV (a KV source's compressed entries) or CacheIndexKeys ("" for
	// V4's caches); Fmt is the entry storage ("" float32, or a quant block format name)
	// in groups of Group values.
	Kind  string
	Fmt   string
	Group int
}

// LayerLayout describes one layer's state.
type LayerLayout struct {
	Window int // window size in tokens (the ring keeps Window-1 rows)
	Dim    int // K=V row width
	Caches []CacheLayout
	// RingCap is the rows the ring keeps when it is not Window-1 (a DSpark stage keeps
	// a whole window); RingFmt is the row storage: "" float32, "mxfp8" packed.
	RingCap int
	RingFmt string
}

// Layout is the state layout of a whole model.
type Layout struct {
	Layers []LayerLayout
	// EngramContext is how many previous compressed token ids a sequence keeps for the
	// Engram n-gram hashes (max_ngram-1); 0 without Engram.
	EngramContext int
}

// Cache kinds of DeepSeek-V4.1's KV source layers.
const (
	// CacheKV is a KV source's compressed entries (RoPE'd, FP4), which every layer that
	// reads this source attends over; its PendKV/PendGate hold the open group.
	CacheKV = "kv"
	// CacheIndexKeys is the source's index keys, which every indexer reading this
	// source scores.
	CacheIndexKeys = "index_keys"
)

// RingGroup is the MXFP8 group of a packed window ring row.
const RingGroup = 32

// Validate checks a layout's numbers before anything is allocated from it.
func (l *Layout) Validate() error {
	if len(l.Layers) > 1<<16 {
		return fmt.Errorf("kv layout: %d layers", len(l.Layers))
	}
	if l.EngramContext < 0 || l.EngramContext > 64 {
		return fmt.Errorf("kv layout: engram context %d out of range", l.EngramContext)
	}
	for i, ll := range l.Layers {
		if ll.Window < 1 || ll.Window > 1<<20 || ll.Dim < 1 || ll.Dim > 1<<16 || len(ll.Caches) > 2 || ll.RingCap < 0 || ll.RingCap > 1<<20 {
			return fmt.Errorf("kv layout: layer %d: window %d, dim %d, ring %d, %d caches out of range", i, ll.Window, ll.Dim, ll.RingCap, len(ll.Caches))
		}
		if err := checkFmt(ll.RingFmt, RingGroup, ll.Dim); err != nil {
			return fmt.Errorf("kv layout: layer %d ring: %v", i, err)
		}
		for j, c := range ll.Caches {
			if c.Ratio < 1 || c.Ratio > 1<<16 || c.Dim < 1 || c.Dim > 1<<16 {
				return fmt.Errorf("kv layout: layer %d cache %d: ratio %d, dim %d out of range", i, j, c.Ratio, c.Dim)
			}
			if c.Kind != "" && c.Kind != CacheKV && c.Kind != CacheIndexKeys {
				return fmt.Errorf("kv layout: layer %d cache %d: unknown kind %q", i, j, c.Kind)
			}
			if err := checkFmt(c.Fmt, c.Group, c.Dim); err != nil {
				return fmt.Errorf("kv layout: layer %d cache %d: %v", i, j, err)
			}
		}
	}
	return nil
}

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

// RingRowBytes is the stored size of one window ring row of l.
func (l *LayerLayout) RingRowBytes() int {
	if f, ok := quant.ParseFormat(l.RingFmt); ok {
		return f.RowBytes(l.Dim, RingGroup)
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
			b += float64(c.EntryBytes()) / float64(c.Ratio)
		}
	}
	return b
}

// EntryBytes is the stored size of one entry of cache c: 4 bytes a value, or the
// packed row of its block format (an MXFP8 cache without a group uses RingGroup).
func (c *CacheLayout) EntryBytes() int {
	f, ok := quant.ParseFormat(c.Fmt)
	if !ok {
		return 4 * c.Dim
	}
	g := c.Group
	if f == quant.MXFP8 && g == 0 {
		g = RingGroup
	}
	return f.RowBytes(c.Dim, g)
}
