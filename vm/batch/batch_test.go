package batch_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
	_ "deepinfer/targets/cpu"
	"deepinfer/tokenizer"
	"deepinfer/vm"
	"deepinfer/vm/batch"
)

func machine(t *testing.T) (*vm.Machine, tokenizer.Tokenizer) {
	t.Helper()
	out, err := compiler.Compile(compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := vm.LoadWeights(out.Plan, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.Load(out.Plan, w)
	if err != nil {
		t.Fatal(err)
	}
	p := out.Plan
	return m, tokenizer.Bytes{BOSID: int32(p.Model.BOS), EOSID: int32(p.Model.EOS)}
}

var _ = plan.Version

func readOutput(t *testing.T, path string) []batch.OutputLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []batch.OutputLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l batch.OutputLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

const good = `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"temperature":0}}
{"custom_id":"b","method":"POST","url":"/v1/completions","body":{"prompt":"once","max_tokens":7,"seed":3}}
`

func TestLineSemantics(t *testing.T) {
	m, tok := machine(t)
	dir := t.TempDir()
	in := good +
		"{not json\n" +
		`{"method":"POST","url":"/v1/completions","body":{"prompt":"x"}}` + "\n" +
		`{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"prompt":"dup"}}` + "\n" +
		"\n" +
		`{"custom_id":"c","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"tool","content":"x"}]}}` + "\n" +
		`{"custom_id":"d","method":"POST","url":"/v1/completions","body":{"prompt":"x","logprobs":true}}` + "\n" +
		`{"custom_id":"e","method":"POST","url":"/v1/completions","body":{"prompt":"x","max_tokens":100000}}` + "\n" +
		`{"custom_id":"f","method":"POST","url":"/v1/completions","body":{"prompt":"x","temperature":3}}` + "\n"
	os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in), 0o644)
	sum, err := batch.Run(batch.Options{Input: filepath.Join(dir, "in.jsonl"), Output: filepath.Join(dir, "out.jsonl"),
		Machine: m, Tokenizer: tok, DefaultMaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	lines := readOutput(t, filepath.Join(dir, "out.jsonl"))
	if sum.Lines != 10 || len(lines) != 10 || sum.OK != 2 || sum.Errors != 8 {
		t.Fatalf("summary %+v, %d output lines; want 10 lines, 2 ok, 8 errors", sum, len(lines))
	}
	wantErr := map[int]string{3: "not a valid request line", 4: "missing custom_id", 5: "duplicate custom_id \"a\" (first on line 1)",
		6: "empty line", 7: "role", 8: "logprobs", 9: "exceeds the model's", 10: "temperature"}
	seen := map[int]bool{}
	for _, l := range lines {
		if l.Response != nil {
			if l.Error != nil || l.Response.StatusCode != 200 {
				t.Errorf("bad result line %+v", l)
			}
			continue
		}
		n := l.Error.Line
		seen[n] = true
		if w, ok := wantErr[n]; ok && !strings.Contains(l.Error.Message, w) {
			t.Errorf("line %d: error %q, want it to mention %q", n, l.Error.Message, w)
		}
		if !strings.HasPrefix(l.Error.Message, "line ") {
			t.Errorf("error without its line number: %q", l.Error.Message)
		}
	}
	for n := range wantErr {
		if !seen[n] {
			t.Errorf("no error line for input line %d", n)
		}
	}
}

func TestResume(t *testing.T) {
	m, tok := machine(t)
	dir := t.TempDir()
	inPath, outPath := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	os.WriteFile(inPath, []byte(good), 0o644)
	opts := batch.Options{Input: inPath, Output: outPath, Machine: m, Tokenizer: tok, DefaultMaxTokens: 8}
	if _, err := batch.Run(opts); err != nil {
		t.Fatal(err)
	}
	first := readOutput(t, outPath)
	// keep only the first line plus a torn half of the second, as a crash could leave
	data, _ := os.ReadFile(outPath)
	cut := strings.Index(string(data), "\n") + 1
	os.WriteFile(outPath, append(data[:cut], data[cut:cut+40]...), 0o644)
	sum, err := batch.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Skipped != 1 || sum.OK != 1 {
		t.Fatalf("resume: %+v, want 1 skipped and 1 run", sum)
	}
	after := readOutput(t, outPath)
	if len(after) != 2 || *after[0].CustomID == *after[1].CustomID {
		t.Fatalf("after resume: %d lines", len(after))
	}
	// greedy and seeded requests give the same text again
	text := func(ls []batch.OutputLine, id string) string {
		for _, l := range ls {
			if *l.CustomID == id {
				b, _ := json.Marshal(l.Response.Body.(map[string]any)["choices"])
				return string(b)
			}
		}
		return ""
	}
	for _, id := range []string{"a", "b"} {
		if text(first, id) != text(after, id) {
			t.Errorf("%s: rerun differs: %s vs %s", id, text(first, id), text(after, id))
		}
	}
	// a third run has nothing to do
	sum, _ = batch.Run(opts)
	if sum.Skipped != 2 || sum.OK != 0 {
		t.Fatalf("third run: %+v", sum)
	}
}

func FuzzParseLine(f *testing.F) {
	for _, l := range strings.Split(good, "\n") {
		f.Add([]byte(l))
	}
	data, _ := os.ReadFile("../../examples/requests.jsonl")
	for _, l := range strings.Split(string(data), "\n") {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := batch.ParseLine(line, 7)
		if err != nil {
			var le *batch.LineError
			if !errorsAs(err, &le) || le.Line != 7 || strings.Contains(err.Error(), "\n") {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		if r.CustomID == "" || (r.URL != batch.ChatURL && r.URL != batch.CompletionURL) {
			t.Fatalf("accepted an incomplete request %+v", r)
		}
	})
}
