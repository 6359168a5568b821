package e2e

import (
	"deepinfer/internal/testtok"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestPlanningCommands(t *testing.T) {
	dir := t.TempDir()
	flash := abs(t, "../testdata/deepseek-v4-flash")
	o := run(t, dir, "dic", "schema", "deploy")
	if o.code != 0 || !json.Valid([]byte(o.stdout)) {
		t.Fatalf("dic schema deploy: code %d, valid JSON %v", o.code, json.Valid([]byte(o.stdout)))
	}
	o = run(t, dir, "dic", "compile", "--model", flash, "--spec", abs(t, "../examples/deploy/v4-flash-pd.json"), "-o", "pd.dip")
	if o.code != 0 {
		t.Fatalf("compile with spec: %s", o.stderr)
	}
	o = run(t, dir, "dic", "inspect", "pd.dip", "--heatmap", "map.svg")
	if o.code != 0 || !strings.Contains(o.stdout, "role decode: 64 ranks") || !strings.Contains(o.stdout, "left for KV") {
		t.Fatalf("inspect: %s%s", o.stdout, o.stderr)
	}
	for _, f := range []string{"map-prefill.svg", "map-decode.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("heatmap %s not written", f)
		}
	}
	// a spec that does not fit: exit 1, the shortfall named
	tight := "target: sm100\ntopology: {nodes: 1, devices_per_node: 2}\nroles:\n  decode: {dp: 2, ep: 2, max_num_seqs: 256, max_model_len: 131072, max_num_batched_tokens: 256}\n"
	os.WriteFile(filepath.Join(dir, "tight.yaml"), []byte(tight), 0o644)
	o = run(t, dir, "dic", "explain", "tight.yaml", "--model", flash)
	if o.code != 1 || !strings.Contains(o.stdout, "does not fit") || !strings.Contains(o.stdout, "short by") {
		t.Fatalf("explain on a spec that does not fit: code %d\n%s", o.code, o.stdout)
	}
	wantUserError(t, run(t, dir, "dic", "compile", "--model", flash, "--spec", "tight.yaml"), "role decode does not fit", "short by")
	// a malformed spec names the field
	os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(strings.Replace(tight, "ep: 2", "ep: 3", 1)), 0o644)
	wantUserError(t, run(t, dir, "dic", "compile", "--model", flash, "--spec", "bad.yaml"), "bad.yaml", "/roles/decode/ep")

	// placement on the command line
	o = run(t, dir, "dic", "place", "--synthetic", "zipf:1.1:64:4", "--replicas", "80", "--gpus", "8", "--groups", "4", "--nodes", "2", "--policy", "eplb")
	var placed struct {
		Phy2Log      [][]int `json:"phy2log"`
		Balancedness float64 `json:"balancedness"`
	}
	if o.code != 0 || json.Unmarshal([]byte(o.stdout), &placed) != nil || len(placed.Phy2Log) != 4 || len(placed.Phy2Log[0]) != 80 {
		t.Fatalf("dic place: code %d %s %s", o.code, o.stdout, o.stderr)
	}
	if o := run(t, dir, "dic", "place", "--synthetic", "zipf:1.1:64:4", "--replicas", "80", "--gpus", "7"); o.code != 1 {
		t.Errorf("dic place with 80 replicas on 7 gpus: exit %d, want 1", o.code)
	}
	if o := run(t, dir, "dic", "place", "--bogus"); o.code != 2 {
		t.Errorf("dic place --bogus: exit %d, want 2", o.code)
	}

	// simulation and the VM overhead probe
	o = run(t, dir, "divm", "simulate", "pd.dip", "--workload", "concurrency_per_rank=4,requests=64,input_len=fixed:512,output_len=fixed:16",
		"--trace", "trace.json", "--plots", "plots")
	if o.code != 0 || !strings.Contains(o.stdout, "SIMULATED with cost model sm100") || !strings.Contains(o.stdout, "TPOT ms") || !strings.Contains(o.stdout, "TTFT ms") {
		t.Fatalf("simulate: code %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "trace.json")); err != nil || !json.Valid(data) {
		t.Errorf("trace not written or not JSON")
	}
	o = run(t, dir, "divm", "overhead", "pd.dip", "--batch", "8", "--steps", "20")
	if o.code != 0 || !strings.Contains(o.stdout, "median") {
		t.Fatalf("overhead: %s%s", o.stdout, o.stderr)
	}
}

// TestTokenizeCommand runs divm tokenize on DeepSeek's tokenizer, fetched by the
// project's script.
func TestTokenizeCommand(t *testing.T) {
	dir := t.TempDir()
	tokDir := testtok.Need(t)
	c := exec.Command(filepath.Join(binDir, "divm"), "tokenize", "--tokenizer", tokDir)
	c.Dir = dir
	c.Stdin = strings.NewReader("\"Hello, world!\"\nnot json\n\"你好\"\n")
	stdout, err := c.Output()
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	if len(lines) != 3 {
		t.Fatalf("want one output line per input line, have %q", stdout)
	}
	if !strings.Contains(lines[1], `"error"`) || !strings.Contains(lines[1], "line 2") {
		t.Errorf("malformed line: %q", lines[1])
	}
	var ee *exec.ExitError
	if !strings.Contains(lines[0], `"ids"`) || err == nil || !errorsAs(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("good line %q; exit %v (want 1 because a line failed)", lines[0], err)
	}
	// and back
	c = exec.Command(filepath.Join(binDir, "divm"), "tokenize", "--tokenizer", tokDir, "--decode")
	c.Stdin = strings.NewReader(lines[0] + "\n" + lines[2] + "\n")
	back, err := c.Output()
	if err != nil || strings.TrimSpace(string(back)) != "\"Hello, world!\"\n\"你好\"" {
		t.Errorf("decode: %q %v", back, err)
	}
}
