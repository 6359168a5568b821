//go:build !linux

package grammars

// threadCPUTime: no per-thread CPU clock here.
func threadCPUTime() (int64, bool) { return 0, false }
