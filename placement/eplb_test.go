package placement

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

type readmeVector struct {
	Weight  [][]float64 `json:"weight"`
	Phy2Log [][]int     `json:"phy2log"`
	LogCnt  [][]int     `json:"logcnt"`
	Replicas int `json:"num_replicas"`
	Groups int `json:"num_groups"`
	Nodes int `json:"num_nodes"`
	GPUs int `json:"num_gpus"`
}

func TestEPLBReadmeVector(t *testing.T) {
	data, err := os.ReadFile("testdata/eplb_readme_vector.json")
	if err != nil {
		t.Fatal(err)
	}
	var v readmeVector
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	p := Problem{v.Replicas, v.Groups, v.Nodes, v.GPUs}
	pl, err := EPLB(v.Weight, p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pl.Phy2Log, v.Phy2Log) {
		t.Errorf("phy2log\n got %v\nwant %v", pl.Phy2Log, v.Phy2Log)
	}
	if !reflect.DeepEqual(pl.LogCnt, v.LogCnt) {
		t.Errorf("logcnt\n got %v\nwant %v", pl.LogCnt, v.LogCnt)
	}
	t.Log(pl.Log2Phy)
}
