package grammars

import "golang.org/x/sys/unix"

// threadCPUTime returns the CPU time of the calling thread (the goroutine must be
// locked to it), and whether the platform has such a clock.
func threadCPUTime() (int64, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return ts.Nano(), true
}
