package cost

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Table is a kernel table in the dev table's columns (op,dtype,m,n,k,groups,extra and
// optionally median_us), with any extra columns kept as they are.
type Table struct {
	Name    string // file name, for errors
	Header  []string
	Records [][]string
	Lines   []int     // source line of each record
	Kernels []Kernel  // parsed
	Meas    []float64 // median_us, NaN where absent or empty
	col     map[string]int
}

// RequiredColumns are the columns a kernel table must have.
var RequiredColumns = []string{"op", "dtype", "m", "n", "k", "groups", "extra"}

// MeasuredColumn holds measured microseconds, when a table has it.
const MeasuredColumn = "median_us"

// ReadTableFile reads a kernel table from a file.
func ReadTableFile(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadTable(path, f)
}

// ReadTable parses a kernel table; errors name name:line.
func ReadTable(name string, r io.Reader) (*Table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	t := &Table{Name: name, col: map[string]int{}}
	header, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s:1: empty file, want a header with %s", name, strings.Join(RequiredColumns, ","))
	}
	if err != nil {
		return nil, csvErr(name, err)
	}
	t.Header = header
	for i, h := range header {
		t.col[strings.TrimSpace(h)] = i
	}
	for _, c := range RequiredColumns {
		if _, ok := t.col[c]; !ok {
			return nil, fmt.Errorf("%s:1: missing column %q (want %s[,%s])", name, c, strings.Join(RequiredColumns, ","), MeasuredColumn)
		}
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvErr(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			return nil, fmt.Errorf("%s:%d: %d fields, header has %d", name, line, len(rec), len(header))
		}
		k, meas, err := t.parse(rec)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		t.Records = append(t.Records, rec)
		t.Lines = append(t.Lines, line)
		t.Kernels = append(t.Kernels, k)
		t.Meas = append(t.Meas, meas)
	}
	return t, nil
}

func csvErr(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d: %v", name, pe.Line, pe.Err)
	}
	return fmt.Errorf("%s: %v", name, err)
}

func (t *Table) parse(rec []string) (Kernel, float64, error) {
	get := func(c string) string { return strings.TrimSpace(rec[t.col[c]]) }
	k := Kernel{Op: get("op"), DType: get("dtype"), Extra: get("extra")}
	if k.Op == "" {
		return k, 0, fmt.Errorf("empty op")
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"m", &k.M}, {"n", &k.N}, {"k", &k.K}, {"groups", &k.Groups}} {
		v, err := strconv.Atoi(get(f.name))
		if err != nil || v < 0 {
			return k, 0, fmt.Errorf("bad %s %q: want an integer ≥ 0", f.name, get(f.name))
		}
		*f.dst = v
	}
	meas := math.NaN()
	if i, ok := t.col[MeasuredColumn]; ok && strings.TrimSpace(rec[i]) != "" {
		v, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return k, 0, fmt.Errorf("bad %s %q: want a positive number", MeasuredColumn, rec[i])
		}
		meas = v
	}
	return k, meas, nil
}

// HasMeasured reports whether any row has a measured time.
func (t *Table) HasMeasured() bool {
	for _, v := range t.Meas {
		if !math.IsNaN(v) {
			return true
		}
	}
	return false
}

// Accuracy summarizes relative errors |pred − meas| / meas.
type Accuracy struct {
	N      int
	Median float64
	P90    float64
	Max    float64
}

func (a Accuracy) String() string {
	return fmt.Sprintf("n=%d median %.1f%% p90 %.1f%% max %.1f%%", a.N, 100*a.Median, 100*a.P90, 100*a.Max)
}

// RelErrors returns |pred − meas| / meas for rows where both are known.
func RelErrors(pred, meas []float64) []float64 {
	var out []float64
	for i := range pred {
		if i < len(meas) && !math.IsNaN(meas[i]) && meas[i] > 0 && !math.IsNaN(pred[i]) {
			out = append(out, math.Abs(pred[i]-meas[i])/meas[i])
		}
	}
	return out
}

// Summarize gives the median, p90 (nearest rank) and max of errs.
func Summarize(errs []float64) Accuracy {
	if len(errs) == 0 {
		return Accuracy{}
	}
	s := append([]float64(nil), errs...)
	sort.Float64s(s)
	rank := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Accuracy{N: len(s), Median: med, P90: rank(0.9), Max: s[len(s)-1]}
}

// Evaluate predicts every row of t and summarizes the error on rows with a measurement.
func (m *Model) Evaluate(t *Table) ([]float64, Accuracy, error) {
	pred := make([]float64, len(t.Kernels))
	for i, k := range t.Kernels {
		us, _, err := m.Predict(k)
		if err != nil {
			return nil, Accuracy{}, fmt.Errorf("%s:%d: %v", t.Name, t.Lines[i], err)
		}
		pred[i] = us
	}
	return pred, Summarize(RelErrors(pred, t.Meas)), nil
}
