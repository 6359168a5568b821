package placement

import (
	"bufio"
	"encoding/json"
	"io"
	"time"
)

// Report is what `dic place` prints: a placement with its problem, its figure of merit
// and the time the policy took.
type Report struct {
	Policy    string
	Problem   Problem
	Layers    int
	Experts   int
	Elapsed   time.Duration
	Placement *Placement
	// Balancedness and LayerBalancedness are filled by NewReport.
	Balancedness      float64
	LayerBalancedness []float64
}

// NewReport measures a placement.
func NewReport(policy string, loads Loads, p Problem, pl *Placement, elapsed time.Duration) *Report {
	per := LayerBalancedness(loads, pl, p)
	sum := 0.0
	for _, b := range per {
		sum += b
	}
	return &Report{
		Policy: policy, Problem: p, Layers: loads.Layers(), Experts: loads.Experts(),
		Elapsed: elapsed, Placement: pl,
		Balancedness: sum / float64(len(per)), LayerBalancedness: per,
	}
}

// WriteJSON writes the report as one JSON object, one key per line and one matrix row
// per line, so that it stays readable and diffable for 61 layers × 288 slots. log2phy is
// in EPLB's padded layout (-1 past an expert's replicas).
func (r *Report) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	type field struct {
		key string
		val any
	}
	head := []field{
		{"policy", r.Policy},
		{"layers", r.Layers},
		{"experts", r.Experts},
		{"replicas", r.Problem.Replicas},
		{"groups", r.Problem.Groups},
		{"nodes", r.Problem.Nodes},
		{"gpus", r.Problem.GPUs},
		{"hierarchical", KeepsGroupsInNodes(r.Policy, r.Problem)},
		{"balancedness", r.Balancedness},
		{"time_ms", float64(r.Elapsed.Microseconds()) / 1000},
		{"layer_balancedness", r.LayerBalancedness},
	}
	bw.WriteString("{\n")
	for _, f := range head {
		writeKey(bw, f.key)
		writeJSON(bw, f.val)
		bw.WriteString(",\n")
	}
	writeKey(bw, "phy2log")
	writeRows(bw, r.Placement.Phy2Log)
	bw.WriteString(",\n")
	writeKey(bw, "logcnt")
	writeRows(bw, r.Placement.LogCnt)
	bw.WriteString(",\n")
	writeKey(bw, "log2phy")
	writeRows(bw, r.Placement.Log2PhyPadded())
	bw.WriteString("\n}\n")
	return bw.Flush()
}

func writeKey(w *bufio.Writer, k string) {
	w.WriteString("  ")
	writeJSON(w, k)
	w.WriteString(": ")
}

func writeJSON(w *bufio.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only ints, floats (finite), strings and bools reach here
	}
	w.Write(b)
}

func writeRows[T any](w *bufio.Writer, rows []T) {
	w.WriteString("[\n")
	for i, row := range rows {
		w.WriteString("    ")
		writeJSON(w, row)
		if i < len(rows)-1 {
			w.WriteByte(',')
		}
		w.WriteByte('\n')
	}
	w.WriteString("  ]")
}
