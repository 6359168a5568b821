package placement

import (
	"strings"
	"testing"
)

func TestProblemValidate(t *testing.T) {
	for _, c := range []struct {
		p       Problem
		experts int
		want    string // "" for valid
	}{
		{Problem{16, 4, 2, 8}, 12, ""},
		{Problem{288, 8, 4, 32}, 256, ""},
		{Problem{297, 8, 3, 33}, 256, ""}, // groups%nodes != 0: global policy, still valid
		{Problem{16, 4, 2, 8}, 0, "no experts"},
		{Problem{0, 4, 2, 8}, 12, "replicas must be positive, got 0"},
		{Problem{16, 0, 2, 8}, 12, "groups must be positive"},
		{Problem{16, 4, -1, 8}, 12, "nodes must be positive"},
		{Problem{16, 4, 2, 0}, 12, "gpus must be positive"},
		{Problem{16, 4, 3, 8}, 12, ""},  // global policy: gpus need not split over nodes (EPLB accepts it)
		{Problem{80, 8, 3, 16}, 64, ""}, // the example, answered by EPLB's global policy
		{Problem{16, 5, 2, 8}, 12, ""},  // global policy: experts need not split into groups
		{Problem{14, 4, 2, 7}, 12, "gpus (7) must be a multiple of nodes (2)"},
		{Problem{18, 4, 2, 8}, 12, "replicas (18) must be a multiple of gpus (8)"},
		{Problem{8, 4, 2, 8}, 12, "replicas (8) must be at least the number of experts (12)"},
		{Problem{20, 8, 2, 4}, 12, "the number of experts (12) must be divisible by groups (8)"},
		{Problem{MaxReplicas + 8, 4, 2, 8}, 12, "replicas (1048584) is more than"},
	} {
		err := c.p.Validate(c.experts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v with %d experts: %v", c.p, c.experts, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v with %d experts: error %v, want %q", c.p, c.experts, err, c.want)
		}
		// Every policy refuses what Validate refuses, with the same message.
		if c.want != "" && c.experts > 0 {
			loads := Loads{make([]float64, c.experts)}
			for _, pol := range Policies {
				if _, perr := pol.Place(loads, c.p); perr == nil || perr.Error() != err.Error() {
					t.Errorf("%s on %+v: %v", pol.Name, c.p, perr)
				}
			}
		}
	}
	if !(Problem{16, 4, 2, 8}).Hierarchical() || (Problem{16, 4, 3, 6}).Hierarchical() {
		t.Error("Hierarchical is groups%nodes == 0")
	}
}
