package placement

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestReportJSON(t *testing.T) {
	loads, p, err := ReadFile("testdata/eplb_readme_vector.json")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := EPLB(loads, p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := NewReport("eplb", loads, p, pl, 1500*time.Microsecond).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Policy       string    `json:"policy"`
		Balancedness float64   `json:"balancedness"`
		TimeMS       float64   `json:"time_ms"`
		PerLayer     []float64 `json:"layer_balancedness"`
		Hierarchical bool      `json:"hierarchical"`
		Replicas     int       `json:"replicas"`
		Phy2Log      [][]int   `json:"phy2log"`
		LogCnt       [][]int   `json:"logcnt"`
		Log2Phy      [][][]int `json:"log2phy"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if got.Policy != "eplb" || got.TimeMS != 1.5 || !got.Hierarchical || got.Replicas != 16 || len(got.PerLayer) != 2 {
		t.Fatalf("%+v", got)
	}
	if got.Balancedness != Balancedness(loads, pl, p) {
		t.Fatalf("balancedness %v", got.Balancedness)
	}
	if !reflect.DeepEqual(got.Phy2Log, pl.Phy2Log) || !reflect.DeepEqual(got.LogCnt, pl.LogCnt) || !reflect.DeepEqual(got.Log2Phy, pl.Log2PhyPadded()) {
		t.Fatalf("maps differ:\n%s", buf.String())
	}
	// One matrix row per line keeps it readable: 2 layers → 2 lines per matrix.
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != 1+11+3*(1+2+1)+1 {
		t.Errorf("%d lines:\n%s", n, buf.String())
	}
}
