package placement

import (
	"bytes"
	"os"
	"testing"
)

// FuzzReadLoads feeds the same bytes to both readers. Whatever they accept must be a
// valid, placeable matrix no larger than the input (each number takes at least one
// byte), so a file cannot make them allocate beyond a constant factor of its size; and
// nothing may panic.
func FuzzReadLoads(f *testing.F) {
	vector, err := os.ReadFile("testdata/eplb_readme_vector.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][]byte{
		vector,
		[]byte(`[[1,2,3],[4,5,6]]`),
		[]byte(`{"weight": [[0,0],[0,1e15]], "num_gpus": 2}`),
		[]byte(`{"weight": [[1,2],[3]]}`),
		[]byte("e0,e1,e2\n1,2,3\n4,5,6\n"),
		[]byte("# comment\n 1, 2\r\n3,4\n"),
		[]byte("1,\"2\"\n3,4e3\n"),
		[]byte("1,2\n3\n"),
		[]byte(""),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		readers := []struct {
			name string
			read func([]byte) (Loads, error)
		}{
			{"json", func(b []byte) (Loads, error) { l, _, err := ReadJSON(bytes.NewReader(b)); return l, err }},
			{"csv", func(b []byte) (Loads, error) { return ReadCSV(bytes.NewReader(b)) }},
		}
		for _, r := range readers {
			l, err := r.read(data)
			if err != nil {
				if l != nil {
					t.Fatalf("%s: loads and an error", r.name)
				}
				continue
			}
			if err := l.Validate(); err != nil {
				t.Fatalf("%s accepted invalid loads: %v", r.name, err)
			}
			if cells := l.Layers() * l.Experts(); cells > len(data) {
				t.Fatalf("%s: %d cells from %d bytes", r.name, cells, len(data))
			}
			if l.Experts() > 64 || l.Layers() > 4 {
				continue
			}
			gpus := min(4, l.Experts())
			p := Problem{Replicas: gpus * ((2*l.Experts() + gpus - 1) / gpus), Groups: 1, Nodes: 1, GPUs: gpus}
			for _, pol := range Policies {
				pl, err := pol.Place(l, p)
				if err != nil {
					t.Fatalf("%s %+v: %v", pol.Name, p, err)
				}
				if err := pl.Check(p, l.Layers(), l.Experts()); err != nil {
					t.Fatalf("%s: %v", pol.Name, err)
				}
			}
		}
	})
}
