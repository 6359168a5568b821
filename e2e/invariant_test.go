package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"deepinfer/internal/testtok"
)

// invariantBatch is 50 mixed batch lines: completions (text and token-id prompts,
// logprobs: N) and chats (logprobs, top_logprobs), greedy and seeded sampling, with
// different lengths and cuts. idsOnly keeps to token-id completions (a tiny model's
// vocabulary is smaller than the tokenizer's), still greedy and sampled, with and
// without log-probabilities.
func invariantBatch(idsOnly bool) []string {
	var lines []string
	for i := 0; i < 50; i++ {
		var body string
		kind := i % 4
		if idsOnly {
			kind = 1
		}
		switch kind {
		case 0:
			body = fmt.Sprintf(`{"prompt":"line %d of the batch says","max_tokens":%d,"temperature":0}`, i, 4+i%7)
		case 1:
			ids := make([]string, 3+i%23)
			for j := range ids {
				ids[j] = fmt.Sprint((37*i + 11*j) % 250)
			}
			body = fmt.Sprintf(`{"prompt":[%s],"max_tokens":%d`, strings.Join(ids, ","), 3+i%5)
			if i%3 != 0 {
				body += fmt.Sprintf(`,"temperature":0.9,"seed":%d`, i)
			}
			if i%2 == 1 {
				body += `,"logprobs":2`
			}
			body += "}"
		case 2:
			body = fmt.Sprintf(`{"messages":[{"role":"user","content":"question %d"}],"max_tokens":%d,"logprobs":true,"top_logprobs":3,"temperature":0.7,"top_p":0.9,"seed":%d}`, i, 5+i%4, 100+i)
		default:
			body = fmt.Sprintf(`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"%s"}],"max_tokens":%d}`, strings.Repeat("long prompt ", i%9+1), 6)
		}
		url := "/v1/completions"
		if strings.Contains(body, "messages") {
			url = "/v1/chat/completions"
		}
		lines = append(lines, fmt.Sprintf(`{"custom_id":"req-%02d","method":"POST","url":"%s","body":%s}`, i, url, body))
	}
	return lines
}

// comparable drops what differs between two runs of the same line by design: the
// batch and response ids and the creation time.
func comparable(t *testing.T, line string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("output line %q: %v", line, err)
	}
	delete(v, "id")
	if r, ok := v["response"].(map[string]any); ok {
		delete(r, "request_id")
		if b, ok := r["body"].(map[string]any); ok {
			delete(b, "id")
			delete(b, "created")
		}
	}
	return v
}

// TestBatchInvariantCLI: with DEEPINFER_BATCH_INVARIANT=1, each of several requests
// run alone and inside a 50-line batch (divm run --input, 8 sequences at a time, a
// 24-token step budget so prompts are chunked) gives the same output line, apart from
// ids and the creation time — on the embedded default model (V4) and on the V4.1
// fixture, where DSpark speculation is on.
func TestBatchInvariantCLI(t *testing.T) {
	cases := []struct {
		name  string
		model string // "" for the embedded default
	}{{"embedded-v4", ""}, {"tiny-v41-dev2", "../testdata/tiny-v41-dev2"}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines := invariantBatch(c.model != "")
			dir := t.TempDir()
			args := []string{"compile", "-o", "plan.dip"}
			var model []string
			if c.model != "" {
				t.Setenv("DEEPINFER_TOKENIZER_DIR", testtok.Need(t))
				abs, _ := filepath.Abs(c.model)
				args = append(args, "--model", abs)
				model = []string{"--model", abs}
			}
			if o := run(t, dir, "dic", args...); o.code != 0 {
				t.Fatal(o.stderr)
			}
			t.Setenv("DEEPINFER_BATCH_INVARIANT", "1")
			runBatch := func(name string, in []string) []string {
				os.WriteFile(filepath.Join(dir, name+".jsonl"), []byte(strings.Join(in, "\n")+"\n"), 0o644)
				a := append([]string{"run", "plan.dip", "--input", name + ".jsonl", "--output", name + ".out", "--max-seqs", "8", "--max-batch-tokens", "24"}, model...)
				o := run(t, dir, "divm", a...)
				if o.code != 0 {
					out, _ := os.ReadFile(filepath.Join(dir, name+".out"))
					for _, l := range strings.Split(string(out), "\n") {
						if strings.Contains(l, `"error":{`) {
							t.Fatalf("divm run %s: %s\nfirst failed line: %s", name, o.stderr, l)
						}
					}
					t.Fatalf("divm run %s: %s", name, o.stderr)
				}
				if c.model != "" && !strings.Contains(o.stderr, "speculation:") {
					t.Errorf("no speculation counters in the summary: %s", o.stderr)
				}
				data, err := os.ReadFile(filepath.Join(dir, name+".out"))
				if err != nil {
					t.Fatal(err)
				}
				return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			}
			all := runBatch("all", lines)
			byID := map[string]string{}
			for _, l := range all {
				var v struct {
					CustomID string `json:"custom_id"`
					Error    any    `json:"error"`
				}
				json.Unmarshal([]byte(l), &v)
				if v.Error != nil {
					t.Fatalf("line failed: %s", l)
				}
				byID[v.CustomID] = l
			}
			for _, i := range []int{0, 13, 22, 35, 49} {
				id := fmt.Sprintf("req-%02d", i)
				alone := runBatch(id, []string{lines[i]})
				if len(alone) != 1 {
					t.Fatalf("%s alone: %d output lines", id, len(alone))
				}
				if !reflect.DeepEqual(comparable(t, alone[0]), comparable(t, byID[id])) {
					t.Errorf("%s alone and in the 50-line batch differ:\n alone: %s\n batch: %s", id, alone[0], byID[id])
				}
			}
		})
	}
}
