package placement

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadJSON(t *testing.T) {
	loads, p, err := ReadFile("testdata/eplb_readme_vector.json")
	if err != nil {
		t.Fatal(err)
	}
	if loads.Layers() != 2 || loads.Experts() != 12 || loads[1][5] != 197 {
		t.Fatalf("loads %v", loads)
	}
	if p != (Problem{Replicas: 16, Groups: 4, Nodes: 2, GPUs: 8}) {
		t.Fatalf("problem %+v", p)
	}
	// A bare array, and an object without EPLB's parameters.
	for _, in := range []string{`[[1,2],[3,4.5]]`, ` {"weight": [[1,2],[3,4.5]], "other": "x"}`} {
		l, p, err := ReadJSON(strings.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !reflect.DeepEqual(l, Loads{{1, 2}, {3, 4.5}}) || p != (Problem{}) {
			t.Fatalf("%s: %v %+v", in, l, p)
		}
	}
}

func TestReadJSONErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"num_replicas": 4}`, `no "weight" field`},
		{`{"weight": null}`, `no "weight" field`},
		{`{"weight": []}`, "/weight: no layers"},
		{`{"weight": [[]]}`, "/weight/0: no experts"},
		{`{"weight": [[1,2],[3]]}`, "/weight/1: 1 experts, but layer 0 has 2"},
		{`{"weight": [[1,2],null]}`, "/weight/1: want an array"},
		{`{"weight": [[1,-2]]}`, "/weight/0/1: load -2 is not a number in [0, 1e+15]"},
		{`{"weight": [[1,2e20]]}`, "/weight/0/1: load 2e+20"},
		{`[[1],[2,3]]`, "/1: 2 experts"},
		{`{"weight": [[1,"a"]]}`, "is a string, want float64"},
		{`{"weight": [[1,2]`, "loads:"},
		{`{"weight": [[1,2]]} x`, "syntax error at byte"},
		{`{"weight": [[1,1e400]]}`, "loads:"},
		{``, "loads:"},
	} {
		_, _, err := ReadJSON(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to mention %q", c.in, err, c.want)
		}
	}
}

func TestReadCSV(t *testing.T) {
	for _, in := range []string{
		"1,2,3\n4,5,6\n",
		"e0,e1,e2\n1,2,3\n4,5,6",
		"# loads per layer\n\n 1, 2 ,3\r\n4,5,6\n",
		"expert_0,expert_1,expert_2\n1,2,3\n# layer 2\n4,5,6\n",
	} {
		l, err := ReadCSV(strings.NewReader(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if !reflect.DeepEqual(l, Loads{{1, 2, 3}, {4, 5, 6}}) {
			t.Fatalf("%q: %v", in, l)
		}
	}
}

func TestReadCSVErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "no data rows"},
		{"a,b\n", "no data rows"},
		{"1,2\n3\n", "line 2: 1 columns, want 2"},
		{"a,b,c\n1,2\n", "line 2: 2 columns, want 3"},
		{"1,2\n3,x\n", "line 2 column 2: \"x\" is not a number"},
		{"1,2\n3,-1\n", "line 2 column 2: load \"-1\" is not a number"},
		{"1,NaN\n", "line 1 column 2"},
		{"1,Inf\n", "line 1 column 2"},
		{"1,\"2\n", "CSV:"},
	} {
		_, err := ReadCSV(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to mention %q", c.in, err, c.want)
		}
	}
}

func TestReadFileFormats(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.csv":   "1,2\n3,4\n",
		"b.json":  `{"weight": [[1,2],[3,4]]}`,
		"c.stats": `[[1,2],[3,4]]`, // sniffed as JSON
		"d.stats": "1,2\n3,4\n",    // sniffed as CSV
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		l, _, err := ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(l, Loads{{1, 2}, {3, 4}}) {
			t.Fatalf("%s: %v", name, l)
		}
	}
	if _, _, err := ReadFile(filepath.Join(dir, "a.json")); err == nil {
		t.Fatal("missing file read")
	}
	// Errors name the file.
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("1,x\n"), 0o644)
	if _, _, err := ReadFile(bad); err == nil || !strings.Contains(err.Error(), "bad.csv") {
		t.Fatalf("error %v does not name the file", err)
	}
}

func TestLoadsValidate(t *testing.T) {
	for _, c := range []struct {
		l    Loads
		want string
	}{
		{nil, "no layers"},
		{Loads{{}}, "no experts"},
		{Loads{{1, 2}, {1}}, "layer 1 has 1 experts"},
		{Loads{{1, -1}}, "layer 0 expert 1"},
		{Loads{{1, 2e15}}, "layer 0 expert 1"},
	} {
		if err := c.l.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.l, err, c.want)
		}
	}
	if err := (Loads{{0, 1}, {2, 3}}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSynthetic(t *testing.T) {
	s, err := ParseSynthetic("zipf:1.1:256:61")
	if err != nil {
		t.Fatal(err)
	}
	if s != (Synthetic{Kind: "zipf", S: 1.1, Experts: 256, Layers: 61}) || s.String() != "zipf:1.1:256:61" {
		t.Fatalf("%+v %s", s, s)
	}
	a, b, c := s.Generate(7), s.Generate(7), s.Generate(8)
	if !reflect.DeepEqual(a, b) || reflect.DeepEqual(a, c) {
		t.Fatal("not deterministic in the seed")
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	// Integer token counts; each layer its own permutation and volume; the hottest
	// expert carries about 1/H(256, 1.1) ≈ 21% of the layer.
	hot0, hot1 := argmax(a[0]), argmax(a[1])
	if hot0 == hot1 && argmax(a[2]) == hot0 {
		t.Error("layers share their hottest expert; permutations are not per layer")
	}
	for l, row := range a[:4] {
		total := 0.0
		for _, v := range row {
			if v != float64(int64(v)) {
				t.Fatalf("non-integer load %v", v)
			}
			total += v
		}
		if share := row[argmax(row)] / total; share < 0.19 || share > 0.23 {
			t.Errorf("layer %d: top share %.3f", l, share)
		}
		if total < 0.5*DefaultTokens || total > 1.5*DefaultTokens {
			t.Errorf("layer %d: %v tokens", l, total)
		}
	}
	u, err := ParseSynthetic("uniform:64:3:6400")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range u.Generate(1) {
		total := 0.0
		for _, v := range row {
			total += v
		}
		for _, v := range row {
			if v < 0.5*total/64 || v > 1.5*total/64 {
				t.Fatalf("uniform load %v far from mean %v", v, total/64)
			}
		}
	}
	for _, bad := range []string{"", "zipf", "zipf:1.1:256", "zipf:x:256:61", "zipf:-1:256:61", "zipf:1:0:61",
		"zipf:1:256:0", "zipf:1:256:61:0", "zipf:1:99999999:1", "uniform:1.5:2", "pareto:1:2:3", "uniform:4:4:4:4"} {
		if _, err := ParseSynthetic(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func argmax(x []float64) int {
	b := 0
	for i, v := range x {
		if v > x[b] {
			b = i
		}
	}
	return b
}
