package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func noEnv(string) (string, bool) { return "", false }

func TestExamplesLoad(t *testing.T) {
	files, _ := filepath.Glob("../examples/deploy/*")
	if len(files) < 3 {
		t.Fatalf("want the example specs, found %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(data, f, noEnv)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(s.RoleNames()) == 0 {
			t.Errorf("%s: no roles", f)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	data, _ := os.ReadFile("../examples/deploy/v41-flash-prefill-ep4.yaml")
	env := map[string]string{
		"DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE": "off",
		"DEEPINFER_YOCO_PREFILL_KEEP_TOKENS":     "256",
		"DEEPINFER_BATCH_INVARIANT":              "1",
		"DEEPINFER_USE_NEXTN_DECODE":             "3",
	}
	s, err := Parse(data, "p.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if s.SWAReplay.Mode != "off" || s.SWAReplay.KeepTokens != 256 || !s.BatchInvariant ||
		s.Speculative.NumSpeculativeTokens != 3 || s.Speculative.Method != "dspark" {
		t.Fatalf("overrides not applied: %+v", s)
	}
	env = map[string]string{"DEEPINFER_YOCO_PREFILL_KEEP_TOKENS": "lots"}
	_, err = Parse(data, "p.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil || !strings.Contains(err.Error(), "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS") || !strings.Contains(err.Error(), "/swa_replay/keep_tokens") {
		t.Fatalf("bad env value: %v", err)
	}
}

func TestErrorsNamePointer(t *testing.T) {
	base := map[string]any{
		"target":   "sm100",
		"topology": map[string]any{"nodes": 1, "devices_per_node": 8},
		"roles": map[string]any{"decode": map[string]any{"dp": 8, "ep": 8, "max_num_seqs": 64,
			"max_model_len": 4096, "max_num_batched_tokens": 64}},
	}
	cases := []struct {
		edit func(m map[string]any)
		want string
	}{
		{func(m map[string]any) { m["target"] = "tpu" }, "/target"},
		{func(m map[string]any) { m["topology"].(map[string]any)["nodes"] = 0 }, "/topology/nodes"},
		{func(m map[string]any) { role(m)["ep"] = 3 }, "/roles/decode/ep"},
		{func(m map[string]any) { role(m)["dp"] = 16; role(m)["ep"] = 16 }, "/roles"},
		{func(m map[string]any) { role(m)["tp"] = 2; role(m)["dp"] = 4 }, "/roles/decode/tp"},
		{func(m map[string]any) { role(m)["bogus"] = 1 }, "/roles/decode"},
		{func(m map[string]any) { role(m)["max_num_batched_tokens"] = 8 }, "/roles/decode/max_num_batched_tokens"},
		{func(m map[string]any) { m["kv_cache"] = map[string]any{"memory_fraction": 1.5} }, "/kv_cache/memory_fraction"},
		{func(m map[string]any) { m["experts"] = map[string]any{"synthetic": "pareto"} }, "/experts/synthetic"},
		{func(m map[string]any) { delete(m, "roles") }, "/"},
	}
	for _, c := range cases {
		m := clone(base)
		c.edit(m)
		data, _ := json.Marshal(m)
		_, err := Parse(data, "spec.json", noEnv)
		if err == nil {
			t.Errorf("%s: accepted", c.want)
			continue
		}
		if !strings.Contains(err.Error(), "spec.json: "+c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("want a one-line error at %s, have %q", c.want, err)
		}
	}
}

func role(m map[string]any) map[string]any {
	return m["roles"].(map[string]any)["decode"].(map[string]any)
}

func clone(m map[string]any) map[string]any {
	data, _ := json.Marshal(m)
	var out map[string]any
	json.Unmarshal(data, &out)
	return out
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../examples/deploy/*")
	for _, p := range files {
		data, _ := os.ReadFile(p)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.yaml", noEnv)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if s.Check() != nil {
			t.Fatal("accepted spec fails its own check")
		}
	})
}
