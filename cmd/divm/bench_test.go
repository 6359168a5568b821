package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestBenchSamplingFlags: divm bench refuses sampling flags out of range, and a top-p or
// top-k without a temperature (greedy rows take neither), as usage errors, before it
// reads the plan.
func TestBenchSamplingFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--temperature", "-1", "x.dip"}, "temperature"},
		{[]string{"--temperature", "1", "--top-p", "1.5", "x.dip"}, "top_p"},
		{[]string{"--temperature", "1", "--top-k", "-2", "x.dip"}, "top_k"},
		{[]string{"--top-p", "0.9", "x.dip"}, "need --temperature"},
		{[]string{"--top-k", "5", "x.dip"}, "need --temperature"},
	} {
		err := benchCmd(c.args, io.Discard)
		var u usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("divm bench %s: %v, want a usage error about %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
