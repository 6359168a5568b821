package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaDir holds 20 MaskBench dev-set schemas picked by the rule in its SOURCE.txt.
const schemaDir = "testdata/schemas"

// TestStructuredOutputValidates is the structured-output acceptance: the embedded
// default model (random weights, byte-level tokenizer) with response_format
// json_schema writes output that validates, for every schema of testdata/schemas.
// One batch holds a constrained request per schema and, as a control, the same
// request without response_format: the model alone writes noise, so the validated
// outputs come from the masks.
//
// Sampling is at temperature 1 with the seeds divm derives from custom_id. A
// random-weight model's choice between going on and closing is arbitrary: under
// greedy decoding it repeats one choice and can run to max_tokens, and open objects
// or unbounded arrays of objects can take tens of thousands of tokens (see
// SOURCE.txt). The schemas are picked to bound members and items; strings stay
// unbounded, and max_tokens 4096 leaves room for long ones (the longest document here
// takes about 1,900 tokens).
func TestStructuredOutputValidates(t *testing.T) {
	start := time.Now()
	dir := t.TempDir()
	if o := run(t, dir, "dic", "compile", "-o", "plan.dip"); o.code != 0 {
		t.Fatalf("dic compile: %s", o.stderr)
	}
	files, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) < 20 {
		t.Fatalf("%d schemas in %s, want 20", len(files), schemaDir)
	}
	schemas := map[string]json.RawMessage{}
	var in bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Schema json.RawMessage `json:"schema"`
		}
		if err := json.Unmarshal(data, &doc); err != nil || len(doc.Schema) == 0 {
			t.Fatalf("%s: no schema (%v)", f, err)
		}
		name := filepath.Base(f)
		schemas[name] = doc.Schema
		for _, constrained := range []bool{true, false} {
			body := map[string]any{
				"messages":    []map[string]string{{"role": "user", "content": "Give JSON."}},
				"temperature": 1,
				"max_tokens":  4096,
			}
			id := name
			if constrained {
				body["response_format"] = map[string]any{"type": "json_schema",
					"json_schema": map[string]any{"name": "s", "schema": doc.Schema, "strict": true}}
			} else {
				id = "plain:" + name
				body["max_tokens"] = 256
			}
			line, err := json.Marshal(map[string]any{"custom_id": id, "method": "POST", "url": "/v1/chat/completions", "body": body})
			if err != nil {
				t.Fatal(err)
			}
			in.Write(append(line, '\n'))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	o := run(t, dir, "divm", "run", "plan.dip", "--input", "in.jsonl", "--output", "out.jsonl")
	if o.code != 0 {
		t.Errorf("divm run: exit %d: %s", o.code, o.stderr)
	}
	f, err := os.Open(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	validated, plainJSON, lines := 0, 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		lines++
		var res struct {
			CustomID string `json:"custom_id"`
			Error    *struct {
				Message string `json:"message"`
			} `json:"error"`
			Response *struct {
				Body struct {
					Choices []struct {
						FinishReason string `json:"finish_reason"`
						Message      struct {
							Content string `json:"content"`
						} `json:"message"`
					} `json:"choices"`
					Usage struct {
						CompletionTokens int `json:"completion_tokens"`
					} `json:"usage"`
				} `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
			t.Fatalf("output line %d: %v", lines, err)
		}
		if res.Error != nil {
			t.Errorf("%s: error line: %s", res.CustomID, res.Error.Message)
			continue
		}
		ch := res.Response.Body.Choices[0]
		if name, ok := strings.CutPrefix(res.CustomID, "plain:"); ok {
			if json.Valid([]byte(ch.Message.Content)) && validates(t, name, schemas[name], ch.Message.Content) == nil {
				plainJSON++
			}
			continue
		}
		if ch.FinishReason != "stop" {
			t.Errorf("%s: finish_reason %q after %d tokens, want stop", res.CustomID, ch.FinishReason, res.Response.Body.Usage.CompletionTokens)
			continue
		}
		if !json.Valid([]byte(ch.Message.Content)) {
			t.Errorf("%s: content is not JSON: %.200q", res.CustomID, ch.Message.Content)
			continue
		}
		if err := validates(t, res.CustomID, schemas[res.CustomID], ch.Message.Content); err != nil {
			t.Errorf("%s: content does not validate: %v\n%.300s", res.CustomID, err, ch.Message.Content)
			continue
		}
		validated++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines != 2*len(files) {
		t.Errorf("%d output lines for %d requests", lines, 2*len(files))
	}
	// the control: without masks the model does not write valid documents
	if plainJSON > 2 {
		t.Errorf("%d of %d unconstrained outputs validate: the control does not show that masks did the work", plainJSON, len(files))
	}
	t.Logf("%d of %d schemas validated (%d of %d unconstrained outputs did), %s", validated, len(files), plainJSON, len(files), time.Since(start).Round(time.Millisecond))
}

// validates checks a document against a schema with santhosh-tekuri/jsonschema,
// asserting formats (as the grammar compiler does).
func validates(t *testing.T, name string, schema json.RawMessage, content string) error {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("%s: schema: %v", name, err)
	}
	url := "file:///" + name
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: schema: %v", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: schema: %v", name, err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}
