// Package e2e runs the dic and divm binaries the way a user does and checks what they
// print and how they exit, including on bad input.
package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"deepinfer/plan"
	"deepinfer/safetensors"
)

const fixtureDir = "../testdata/tiny-v4-dev"

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deepinfer-e2e")
	if err != nil {
		panic(err)
	}
	binDir = dir
	cmd := exec.Command("go", "build", "-o", dir, "deepinfer/cmd/dic", "deepinfer/cmd/divm")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		panic("building the commands: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type outcome struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, dir, bin string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEEPINFER_HF_MODEL_DIR=")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	o := outcome{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		o.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return o
}

// wantUserError checks the contract for bad input: non-zero exit, one line on stderr
// that mentions every fragment, and no panic.
func wantUserError(t *testing.T, o outcome, fragments ...string) {
	t.Helper()
	if o.code == 0 {
		t.Fatalf("exit code 0 on bad input; stdout %q", o.stdout)
	}
	if strings.Contains(o.stderr, "panic") || strings.Contains(o.stderr, "goroutine ") {
		t.Fatalf("panicked:\n%s", o.stderr)
	}
	msg := strings.TrimRight(o.stderr, "\n")
	if strings.Count(msg, "\n") != 0 || msg == "" {
		t.Fatalf("want a one-line error, have %q", o.stderr)
	}
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("error %q does not mention %q", msg, f)
		}
	}
}

// copyFixture copies the fixture's config and cases into a fresh directory.
func copyFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"config.json", "cases.json"} {
		data, err := os.ReadFile(filepath.Join(fixtureDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fixtureTensors reads every fixture tensor raw.
func fixtureTensors(t *testing.T) []safetensors.Tensor {
	t.Helper()
	ck, err := safetensors.OpenFile(filepath.Join(fixtureDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var out []safetensors.Tensor
	for _, n := range ck.Names() {
		info, _ := ck.Info(n)
		raw, err := ck.ReadRaw(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, safetensors.Tensor{Name: n, DType: info.DType, Shape: info.Shape, Data: raw})
	}
	return out
}

func TestEmbeddedDefault(t *testing.T) {
	dir := t.TempDir()
	o := run(t, dir, "dic", "compile", "-o", "plan.dip")
	if o.code != 0 {
		t.Fatalf("dic compile: %s", o.stderr)
	}
	o = run(t, dir, "divm", "run", "plan.dip", "--prompt", "Hello", "--max-tokens", "8")
	if o.code != 0 {
		t.Fatalf("divm run: %s", o.stderr)
	}
	if !strings.Contains(o.stdout, "output text:") || !strings.Contains(o.stdout, "8 generated tokens") {
		t.Fatalf("unexpected output:\n%s", o.stdout)
	}
	// the same seed gives the same text
	again := run(t, dir, "divm", "run", "plan.dip", "--prompt", "Hello", "--max-tokens", "8")
	if strings.Split(again.stdout, "\n")[1] != strings.Split(o.stdout, "\n")[1] {
		t.Fatalf("two greedy runs differ:\n%s\n%s", o.stdout, again.stdout)
	}
}

func TestInspectFullSizeConfig(t *testing.T) {
	dir := t.TempDir()
	flash, _ := filepath.Abs("../testdata/deepseek-v4-flash")
	o := run(t, dir, "dic", "compile", "--model", flash, "-o", "flash.dip")
	if o.code != 0 {
		t.Fatalf("dic compile: %s", o.stderr)
	}
	o = run(t, dir, "dic", "inspect", "flash.dip")
	if o.code != 0 {
		t.Fatalf("dic inspect: %s", o.stderr)
	}
	for _, want := range []string{"43 layers (2 sliding, 21 CSA, 20 HCA)", "3 hash-routed MoE layers", "1 MTP layers"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, o.stdout)
		}
	}
}

func TestBadModelInput(t *testing.T) {
	tensors := fixtureTensors(t)
	write := func(t *testing.T, dir string, ts []safetensors.Tensor) {
		if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("missing tensor", func(t *testing.T) {
		dir := copyFixture(t)
		var ts []safetensors.Tensor
		for _, x := range tensors {
			if x.Name != "model.layers.1.attn.wq_b.weight" {
				ts = append(ts, x)
			}
		}
		write(t, dir, ts)
		wantUserError(t, run(t, dir, "dic", "compile", "--model", "."), "missing tensor", "model.layers.1.attn.wq_b.weight")
	})
	t.Run("wrong shape", func(t *testing.T) {
		dir := copyFixture(t)
		ts := append([]safetensors.Tensor(nil), tensors...)
		for i, x := range ts {
			if x.Name == "model.layers.2.attn.wkv.weight" { // [32,64] stored as [64,32]
				ts[i].Shape = []int64{64, 32}
			}
		}
		write(t, dir, ts)
		wantUserError(t, run(t, dir, "dic", "compile", "--model", "."), "model.layers.2.attn.wkv.weight", "[64 32]", "[32 64]")
	})
	t.Run("truncated safetensors", func(t *testing.T) {
		dir := copyFixture(t)
		data, _ := os.ReadFile(filepath.Join(fixtureDir, "model.safetensors"))
		os.WriteFile(filepath.Join(dir, "model.safetensors"), data[:len(data)-1000], 0o644)
		wantUserError(t, run(t, dir, "dic", "compile", "--model", "."), "model.safetensors")
	})
	header := func(t *testing.T, dir string, h map[string]any, data int) {
		js, _ := json.Marshal(h)
		var b bytes.Buffer
		binary.Write(&b, binary.LittleEndian, uint64(len(js)))
		b.Write(js)
		b.Write(make([]byte, data))
		os.WriteFile(filepath.Join(dir, "model.safetensors"), b.Bytes(), 0o644)
	}
	t.Run("overlapping offsets", func(t *testing.T) {
		dir := copyFixture(t)
		header(t, dir, map[string]any{
			"a": map[string]any{"dtype": "F32", "shape": []int{4}, "data_offsets": []int{0, 16}},
			"b": map[string]any{"dtype": "F32", "shape": []int{4}, "data_offsets": []int{8, 24}},
		}, 24)
		wantUserError(t, run(t, dir, "dic", "compile", "--model", "."), "model.safetensors", "overlap")
	})
	t.Run("offsets past the end", func(t *testing.T) {
		dir := copyFixture(t)
		header(t, dir, map[string]any{
			"a": map[string]any{"dtype": "F32", "shape": []int{4}, "data_offsets": []int{0, 16}},
		}, 8)
		wantUserError(t, run(t, dir, "dic", "compile", "--model", "."), "model.safetensors", `"a"`)
	})
	t.Run("index escapes the directory", func(t *testing.T) {
		dir := copyFixture(t)
		idx := map[string]any{"metadata": map[string]any{}, "weight_map": map[string]string{"model.embed_tokens.weight": "../evil.safetensors"}}
		js, _ := json.Marshal(idx)
		os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), js, 0o644)
		wantUserError(t, run(t, dir, "dic", "compile", "--model", "."), "model.safetensors.index.json", "../evil.safetensors", "escapes")
	})
	t.Run("unknown layer type", func(t *testing.T) {
		dir := copyFixture(t)
		path := filepath.Join(dir, "config.json")
		data, _ := os.ReadFile(path)
		os.WriteFile(path, bytes.Replace(data, []byte(`"compressed_sparse_attention",`), []byte(`"linear_attention",`), 1), 0o644)
		wantUserError(t, run(t, dir, "dic", "compile", "--model", "."), "config.json", "layer_types[1]", "linear_attention")
	})
	t.Run("eval on a broken checkpoint", func(t *testing.T) {
		dir := copyFixture(t)
		write(t, dir, tensors[1:])
		wantUserError(t, run(t, dir, "divm", "eval", "--model", ".", "--cases", "cases.json", "--out", "x.safetensors"), "missing tensor", tensors[0].Name)
	})
}

func TestBadPlans(t *testing.T) {
	dir := t.TempDir()
	if o := run(t, dir, "dic", "compile", "-o", "good.dip"); o.code != 0 {
		t.Fatal(o.stderr)
	}
	good, _ := os.ReadFile(filepath.Join(dir, "good.dip"))
	cases := map[string]struct {
		data []byte
		want []string
	}{
		"truncated":     {good[:len(good)/2], []string{"truncated"}},
		"header only":   {good[:20], []string{"truncated"}},
		"corrupt body":  {flip(good, len(good)-100), []string{"checksum"}},
		"other version": {withVersion(good, 7), []string{"version 7", fmt.Sprintf("version %d", plan.Version)}},
		"not a plan":    {[]byte("{\"hello\": 1}"), []string{"not a plan"}},
		"empty":         {nil, []string{"not a plan"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".dip")
			os.WriteFile(p, c.data, 0o644)
			for _, cmd := range [][]string{{"dic", "inspect", p}, {"divm", "run", p, "--prompt", "hi"}} {
				wantUserError(t, run(t, dir, cmd[0], cmd[1:]...), append([]string{p}, c.want...)...)
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

func withVersion(b []byte, v uint32) []byte {
	c := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(c[8:], v)
	return c
}

// TestBatchKill9 kills a batch run with SIGKILL while it writes results, checks that the
// file holds only whole lines, and that a rerun completes it with every custom_id
// exactly once.
func TestBatchKill9(t *testing.T) {
	dir := t.TempDir()
	if o := run(t, dir, "dic", "compile", "-o", "plan.dip"); o.code != 0 {
		t.Fatal(o.stderr)
	}
	var in strings.Builder
	const n = 60
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, `{"custom_id":"req-%02d","method":"POST","url":"/v1/completions","body":{"prompt":"request %d says","max_tokens":40,"temperature":0.9,"seed":%d}}`+"\n", i, i, i)
	}
	os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in.String()), 0o644)
	outPath := filepath.Join(dir, "out.jsonl")
	cmd := exec.Command(filepath.Join(binDir, "divm"), "run", "plan.dip", "--input", "in.jsonl", "--output", "out.jsonl", "--max-seqs", "2")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, _ := os.ReadFile(outPath)
		if bytes.Count(data, []byte("\n")) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no results after 60 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
	data, _ := os.ReadFile(outPath)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if !strings.HasSuffix(string(data), "\n") {
		t.Fatalf("killed run left a torn last line: %q", lines[len(lines)-1])
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("killed run left an invalid line %q", l)
		}
	}
	if len(lines) >= n {
		t.Fatalf("the run finished before the kill (%d lines); make the batch longer", len(lines))
	}
	t.Logf("killed after %d of %d results", len(lines), n)
	if o := run(t, dir, "divm", "run", "plan.dip", "--input", "in.jsonl", "--output", "out.jsonl"); o.code != 0 {
		t.Fatalf("rerun: %s", o.stderr)
	} else if !strings.Contains(o.stderr, fmt.Sprintf("%d already done", len(lines))) {
		t.Errorf("rerun summary does not report the %d done lines: %s", len(lines), o.stderr)
	}
	data, _ = os.ReadFile(outPath)
	count := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var ol struct {
			CustomID string `json:"custom_id"`
			Response *struct {
				StatusCode int `json:"status_code"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(l), &ol); err != nil || ol.Response == nil || ol.Response.StatusCode != 200 {
			t.Fatalf("bad line after rerun: %q", l)
		}
		count[ol.CustomID]++
	}
	for i := 0; i < n; i++ {
		if id := fmt.Sprintf("req-%02d", i); count[id] != 1 {
			t.Errorf("%s appears %d times", id, count[id])
		}
	}
	if len(count) != n {
		t.Errorf("%d distinct custom_ids, want %d", len(count), n)
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
