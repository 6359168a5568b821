package placement

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Loads holds expert-load statistics: Loads[layer][expert] is the load (tokens routed)
// of one logical expert in one MoE layer. Every layer has the same number of experts.
type Loads [][]float64

// Layers is the number of layers.
func (l Loads) Layers() int { return len(l) }

// Experts is the number of logical experts per layer (0 when there are no layers).
func (l Loads) Experts() int {
	if len(l) == 0 {
		return 0
	}
	return len(l[0])
}

// MaxLoad bounds a single load. No routing statistic comes near it, and it keeps every
// sum the policies form finite, in float32 (eplb's arithmetic) as in float64.
const MaxLoad = 1e15

// Validate checks that the matrix is non-empty and rectangular and that every load is
// a number in [0, MaxLoad]: a negative or NaN load has no meaning, and eplb's argmax
// would treat NaN as larger than everything.
func (l Loads) Validate() error {
	if len(l) == 0 {
		return errors.New("loads: no layers")
	}
	if len(l[0]) == 0 {
		return errors.New("loads: layer 0 has no experts")
	}
	for i, row := range l {
		if len(row) != len(l[0]) {
			return fmt.Errorf("loads: layer %d has %d experts, layer 0 has %d", i, len(row), len(l[0]))
		}
		for j, v := range row {
			if !validLoad(v) {
				return fmt.Errorf("loads: layer %d expert %d: load %v is not a number in [0, %g]", i, j, v, MaxLoad)
			}
		}
	}
	return nil
}

func validLoad(v float64) bool { return v >= 0 && v <= MaxLoad } // false for NaN

// MaxInputBytes bounds what the readers accept, so a hostile or mistaken file cannot
// make them allocate without limit: the parsed matrix is never larger than a small
// multiple of the input.
const MaxInputBytes = 64 << 20

// readAll reads at most MaxInputBytes.
func readAll(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxInputBytes {
		return nil, fmt.Errorf("loads: input is larger than %d bytes", MaxInputBytes)
	}
	return data, nil
}

// jsonLoads is the file format of EPLB's example (shared/data/eplb_readme_vector.json):
// the loads under "weight", optionally the problem under EPLB's parameter names. Other
// fields (the expected phy2log, a source note) are ignored.
type jsonLoads struct {
	Weight   *[][]float64 `json:"weight"`
	Replicas *int         `json:"num_replicas"`
	Groups   *int         `json:"num_groups"`
	Nodes    *int         `json:"num_nodes"`
	GPUs     *int         `json:"num_gpus"`
}

// ReadJSON reads loads from a JSON object whose "weight" field is a layers × experts
// array of numbers, or from such a bare array. When the object also carries EPLB's
// num_replicas, num_groups, num_nodes and num_gpus, they come back in the Problem; absent
// ones are zero. Errors name the offending element as a JSON pointer.
func ReadJSON(r io.Reader) (Loads, Problem, error) {
	data, err := readAll(r)
	if err != nil {
		return nil, Problem{}, err
	}
	return decodeJSON(data)
}

func decodeJSON(data []byte) (Loads, Problem, error) {
	var prob Problem
	var rows [][]float64
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	prefix := "/weight"
	if len(trimmed) > 0 && trimmed[0] == '[' {
		prefix = ""
		if err := json.Unmarshal(data, &rows); err != nil {
			return nil, prob, jsonError(err)
		}
	} else {
		var f jsonLoads
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, prob, jsonError(err)
		}
		if f.Weight == nil {
			return nil, prob, errors.New(`loads: JSON has no "weight" field (want {"weight": [[...], ...]})`)
		}
		rows = *f.Weight
		for _, p := range []struct {
			dst *int
			src *int
		}{{&prob.Replicas, f.Replicas}, {&prob.Groups, f.Groups}, {&prob.Nodes, f.Nodes}, {&prob.GPUs, f.GPUs}} {
			if p.src != nil {
				*p.dst = *p.src
			}
		}
	}
	if len(rows) == 0 {
		return nil, prob, fmt.Errorf("loads: %s: no layers", orRoot(prefix))
	}
	for i, row := range rows {
		if row == nil {
			return nil, prob, fmt.Errorf("loads: %s/%d: want an array of expert loads", prefix, i)
		}
		if len(row) != len(rows[0]) {
			return nil, prob, fmt.Errorf("loads: %s/%d: %d experts, but layer 0 has %d", prefix, i, len(row), len(rows[0]))
		}
		for j, v := range row {
			if !validLoad(v) {
				return nil, prob, fmt.Errorf("loads: %s/%d/%d: load %v is not a number in [0, %g]", prefix, i, j, v, MaxLoad)
			}
		}
	}
	if len(rows[0]) == 0 {
		return nil, prob, fmt.Errorf("loads: %s/0: no experts", prefix)
	}
	return Loads(rows), prob, nil
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// jsonError gives encoding/json's errors a position a person can find.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("loads: JSON syntax error at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		where := te.Field
		if where == "" {
			where = "value"
		}
		return fmt.Errorf("loads: JSON byte %d: %s is a %s, want %s", te.Offset, where, te.Value, te.Type)
	}
	return fmt.Errorf("loads: %v", err)
}

// ReadCSV reads loads as CSV: one row per layer, one column per expert. A first row with
// any non-numeric field is a header and is skipped. Blank lines and lines starting with
// '#' are ignored; fields may carry surrounding spaces. Errors name the line and column.
func ReadCSV(r io.Reader) (Loads, error) {
	data, err := readAll(r)
	if err != nil {
		return nil, err
	}
	cr := csv.NewReader(bufio.NewReader(bytes.NewReader(data)))
	cr.FieldsPerRecord = -1 // checked below, with a better message
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	var out Loads
	width := -1
	for rec := 0; ; rec++ {
		fields, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("loads: CSV: %v", err)
		}
		line, _ := cr.FieldPos(0)
		if rec == 0 && isHeader(fields) {
			width = len(fields)
			continue
		}
		if width >= 0 && len(fields) != width {
			return nil, fmt.Errorf("loads: CSV line %d: %d columns, want %d", line, len(fields), width)
		}
		width = len(fields)
		row := make([]float64, len(fields))
		for j, f := range fields {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return nil, fmt.Errorf("loads: CSV line %d column %d: %q is not a number", line, j+1, f)
			}
			if !validLoad(v) {
				return nil, fmt.Errorf("loads: CSV line %d column %d: load %q is not a number in [0, %g]", line, j+1, f, MaxLoad)
			}
			row[j] = v
		}
		out = append(out, row)
	}
	if len(out) == 0 {
		return nil, errors.New("loads: CSV has no data rows")
	}
	return out, nil
}

// isHeader reports whether a record has a field that is not a number.
func isHeader(fields []string) bool {
	for _, f := range fields {
		if _, err := strconv.ParseFloat(strings.TrimSpace(f), 64); err != nil {
			return true
		}
	}
	return false
}

// ReadFile reads loads from a .json or .csv file (by extension; otherwise a file whose
// first non-space byte is '{' or '[' is JSON, anything else CSV). The Problem comes back
// from JSON files that carry EPLB's parameters.
func ReadFile(path string) (Loads, Problem, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Problem{}, err
	}
	defer f.Close()
	data, err := readAll(f)
	if err != nil {
		return nil, Problem{}, fmt.Errorf("%s: %w", path, err)
	}
	isJSON := strings.HasSuffix(strings.ToLower(path), ".json")
	if !isJSON && !strings.HasSuffix(strings.ToLower(path), ".csv") {
		t := bytes.TrimLeft(data, " \t\r\n")
		isJSON = len(t) > 0 && (t[0] == '{' || t[0] == '[')
	}
	var l Loads
	var p Problem
	if isJSON {
		l, p, err = decodeJSON(data)
	} else {
		l, err = ReadCSV(bytes.NewReader(data))
	}
	if err != nil {
		return nil, Problem{}, fmt.Errorf("%s: %w", path, err)
	}
	return l, p, nil
}
