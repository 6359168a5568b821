package sim

import (
	"encoding/json"
	"os"
)

// TraceEvent is one Chrome/Perfetto trace event (complete events, "ph":"X").
type TraceEvent struct {
	Name string  `json:"name"`
	Cat  string  `json:"cat"`
	Ph   string  `json:"ph"`
	TS   float64 `json:"ts"`  // µs
	Dur  float64 `json:"dur"` // µs
	PID  int     `json:"pid"`
	TID  string  `json:"tid"`
	Args any     `json:"args,omitempty"`
}

// WriteTrace writes the steps of every role and one representative step per role, kernel
// by kernel, as a Chrome trace (open it in ui.perfetto.dev or chrome://tracing).
func WriteTrace(path string, r *Result) error {
	var events []TraceEvent
	for _, rr := range r.Roles {
		events = append(events, rr.Trace...)
		var t float64
		for _, c := range rr.Roofline {
			tid := rr.Role + " representative step: compute"
			if c.Comm {
				tid = rr.Role + " representative step: all-to-all"
			}
			events = append(events, TraceEvent{Name: c.Kernel, Cat: c.Op, Ph: "X", TS: t, Dur: c.US, PID: 2, TID: tid,
				Args: map[string]any{"layer": c.Layer, "bound": c.Bound, "flops": c.FLOPs, "bytes": c.Bytes}})
			if !c.Comm {
				t += c.US
			}
		}
	}
	doc := map[string]any{"traceEvents": events, "displayTimeUnit": "ms",
		"otherData": map[string]any{"note": "simulated with " + r.Model + "; not a measurement"}}
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
