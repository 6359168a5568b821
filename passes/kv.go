package passes

import (
	"deepinfer/kvlayout"
	"deepinfer/quant"
)

// kvFromLayout sizes a sequence's state from the model's KV layout: bytes per million
// tokens of context (compressed entries and index keys grow with the sequence) and the
// fixed bytes per request (window rings, open compressor windows, the Engram history).
// dtype is the spec's kv_cache.dtype: "auto" keeps the layout's own formats (a layout
// format of "" — V4's float32 CPU layout — counts as FP8 entries and keys, see
// kvFormats), anything else sizes every entry in that format.
func kvFromLayout(l *kvlayout.Layout, dtype string, modelType string) (perMTok, fixed int64) {
	window, entry, index := kvFormats(dtype, modelType)
	for _, ll := range l.Layers {
		rows := ll.RingCap
		if rows == 0 {
			rows = ll.Window - 1
		}
		rowBytes := kvBytes(window, int64(ll.Dim), false)
		if f, ok := quant.ParseFormat(ll.RingFmt); ok && (dtype == "auto" || dtype == "") {
			rowBytes = int64(f.RowBytes(ll.Dim, 32))
		}
		fixed += int64(rows+1) * rowBytes
		for _, c := range ll.Caches {
			isIndex := c.Kind == kvlayout.CacheIndexKeys
			b := kvBytes(entry, int64(c.Dim), isIndex)
			if isIndex {
				b = kvBytes(index, int64(c.Dim), true)
			}
			if f, ok := quant.ParseFormat(c.Fmt); ok && (dtype == "auto" || dtype == "") && c.Group > 0 {
				b = int64(f.RowBytes(c.Dim, c.Group))
			}
			perMTok += b * (1 << 20) / int64(c.Ratio)
			width := int64(c.Dim)
			if c.Overlap {
				width *= 2
			}
			fixed += 2 * int64(c.Ratio) * width * 4 // open window: kv and gate rows, fp32
		}
	}
	fixed += int64(l.EngramContext) * 4
	return perMTok, fixed
}
