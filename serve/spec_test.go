package serve

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/internal/testtok"
	"deepinfer/tokenizer"
	"deepinfer/vm"
)

// newV41Server serves the tiny-v41-dev2 fixture (DeepSeek's tokenizer, token-id prompts:
// its vocabulary is 448 ids) with the given speculation.
func newV41Server(t *testing.T, spec *vm.Speculation) *httptest.Server {
	t.Helper()
	dir := testtok.Need(t)
	t.Setenv(vm.TokenizerDirEnv, dir)
	out, err := compiler.Compile(compiler.Options{ModelDir: "../testdata/tiny-v41-dev2"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := vm.LoadWeights(out.Plan, "../testdata/tiny-v41-dev2")
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.Load(out.Plan, w)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.LoadBPE(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, hs := startServer(t, Options{Machine: m, Tokenizer: tok, ModelName: "tiny-v41", Spec: spec})
	return hs
}

// TestServeSpeculation: a server that speculates answers greedy and seeded requests
// (exact-match verification) with the same choices and log-probabilities as one that
// does not, and counts its verify groups in /metrics.
func TestServeSpeculation(t *testing.T) {
	plain := newV41Server(t, nil)
	spec := newV41Server(t, &vm.Speculation{MaxDraft: 4, Exact: true})
	for _, body := range []string{
		`{"prompt":[5,17,99,230,41,8],"max_tokens":9,"logprobs":3,"temperature":0}`,
		`{"prompt":[[7,7,7],[100,200,300,400]],"max_tokens":6,"temperature":0.8,"seed":4,"logprobs":1}`,
	} {
		_, a := post(t, plain.URL+"/v1/completions", body)
		_, b := post(t, spec.URL+"/v1/completions", body)
		if a["choices"] == nil || !reflect.DeepEqual(a["choices"], b["choices"]) {
			t.Errorf("%s:\n plain       %v\n speculative %v", body, a["choices"], b["choices"])
		}
	}
	resp, err := http.Get(spec.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(b)
	if !strings.Contains(metrics, "deepinfer_spec_groups_total") || strings.Contains(metrics, "deepinfer_spec_groups_total 0\n") {
		t.Errorf("no verify groups counted in /metrics")
	}
}
