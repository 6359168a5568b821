package grammars

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"
)

// MaskBench: the method of JSONSchemaBench's MaskBench runner over a directory of
// MaskBench-format files ({description, meta, schema, tests: [{description, valid,
// data}]}). Per file: compile the schema; TTFM is compile plus the first mask. Per
// test: serialize data like Python's json.dumps(data, ensure_ascii=False), tokenize
// it, and for each token compute the mask, check the token against it and commit it,
// timing mask plus commit (TBM). A valid instance must be accepted to the end and then
// allow EOS; an invalid one must be refused at some token, EOS included.

// MaskBenchFile is one file of the benchmark.
type MaskBenchFile struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Valid       bool            `json:"valid"`
		Data        json.RawMessage `json:"data"`
	} `json:"tests"`
}

// MaskBenchResult is the per-file result, with the MaskBench runner's fields.
type MaskBenchResult struct {
	ID              string  `json:"id"`
	TTFMUs          int64   `json:"ttfm_us"`
	MaxTTFMUs       int64   `json:"max_ttfm_us"`
	MasksUs         int64   `json:"masks_us"`
	MaxMaskUs       int64   `json:"max_mask_us"`
	NumTokens       int     `json:"num_tokens"`
	NumTests        int     `json:"num_tests"`
	AllMaskUs       []int64 `json:"all_mask_us"`
	NumValidTests   int     `json:"num_valid_tests"`
	NumInvalidTests int     `json:"num_invalid_tests"`
	CompileError    string  `json:"compile_error,omitempty"`
	CompileReason   string  `json:"compile_reason,omitempty"`
	ValidationError string  `json:"validation_error,omitempty"`
	Crash           string  `json:"crash,omitempty"`
	Timeout         string  `json:"timeout,omitempty"`
	Warnings        int     `json:"warnings,omitempty"`
	// counts of failed instances (ours; the runner keeps only the last message)
	ValidRejected   int `json:"valid_rejected,omitempty"`
	InvalidAccepted int `json:"invalid_accepted,omitempty"`
	// tokenization went wrong for an instance (no tokens)
	TokenizeErrors int `json:"tokenize_errors,omitempty"`
	// masks that passed Options.MaxMaskTime and were continued
	MaskRetries int `json:"mask_retries,omitempty"`
}

// MaskBenchConfig configures a run.
type MaskBenchConfig struct {
	// NewCompiler returns the compiler for a file (a fresh one per file keeps files
	// independent, as separate MaskBench processes are; it may share vocabulary).
	NewCompiler func() *Compiler
	// Encode tokenizes an instance (no special tokens).
	Encode func(string) []int32
	// OutDir receives one JSON result per file, under the file's name ("" for none).
	OutDir string
	// Threads runs files in parallel (default 1: timings compare with MaskBench).
	Threads int
	// FileTimeout bounds the matching of one file after compilation (default 60s);
	// compilation is bounded by the compiler's MaxCompileTime.
	FileTimeout time.Duration
	// Progress, if set, is called after each file.
	Progress func(done, total int, r *MaskBenchResult)
	// CPUTime times TTFM and TBM as the CPU time of the thread doing the work
	// (Linux; elsewhere wall time) instead of wall time: on a shared machine the
	// wall time also counts the waits for a CPU, which can reach seconds per mask.
	CPUTime bool
}

// MaskBenchSummary aggregates a run.
type MaskBenchSummary struct {
	Files           int
	Compiled        int
	CompileErrors   map[string]int
	ValidTests      int
	InvalidTests    int
	ValidRejected   int
	InvalidAccepted int
	Crashes         int
	Timeouts        int
	MaskRetries     int
	Tokens          int
	TBM             Dist
	TTFM            Dist
	FailingFiles    []string
	Results         []*MaskBenchResult
}

// Dist summarizes a distribution in microseconds.
type Dist struct {
	N                                  int
	Avg                                float64
	P50, P90, P95, P99, P999, Max, Min int64
}

func distOf(v []int64) Dist {
	if len(v) == 0 {
		return Dist{}
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum float64
	for _, x := range s {
		sum += float64(x)
	}
	q := func(p float64) int64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(s) {
			i = len(s) - 1
		}
		return s[i]
	}
	return Dist{N: len(s), Avg: sum / float64(len(s)), P50: q(0.5), P90: q(0.9), P95: q(0.95), P99: q(0.99), P999: q(0.999), Max: s[len(s)-1], Min: s[0]}
}

// MaskBenchFiles lists the *.json files of dir (sorted).
func MaskBenchFiles(dir string) ([]string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("maskbench directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("maskbench: %s is not a directory", dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("maskbench: no *.json files in %s", dir)
	}
	sort.Strings(files)
	return files, nil
}

// RunMaskBench runs the benchmark over files.
func RunMaskBench(cfg MaskBenchConfig, files []string) (*MaskBenchSummary, error) {
	if cfg.NewCompiler == nil || cfg.Encode == nil {
		return nil, errors.New("maskbench: NewCompiler and Encode are required")
	}
	if cfg.OutDir != "" {
		if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
			return nil, err
		}
	}
	threads := max(cfg.Threads, 1)
	results := make([]*MaskBenchResult, len(files))
	var mu sync.Mutex
	done := 0
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				r := runMaskBenchFile(cfg, files[i])
				if cfg.OutDir != "" {
					if data, err := json.MarshalIndent(r, "", "  "); err == nil {
						_ = os.WriteFile(filepath.Join(cfg.OutDir, filepath.Base(files[i])), data, 0o644)
					}
				}
				mu.Lock()
				results[i] = r
				done++
				if cfg.Progress != nil {
					cfg.Progress(done, len(files), r)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range files {
		work <- i
	}
	close(work)
	wg.Wait()
	return summarize(results), nil
}

func summarize(results []*MaskBenchResult) *MaskBenchSummary {
	s := &MaskBenchSummary{Files: len(results), CompileErrors: map[string]int{}, Results: results}
	var tbm, ttfm []int64
	for _, r := range results {
		if r.Crash != "" {
			s.Crashes++
		}
		if r.Timeout != "" {
			s.Timeouts++
		}
		if r.CompileError != "" {
			s.CompileErrors[r.CompileReason]++
			continue
		}
		if r.Crash != "" || r.Timeout != "" {
			continue
		}
		s.Compiled++
		s.MaskRetries += r.MaskRetries
		ttfm = append(ttfm, r.TTFMUs)
		tbm = append(tbm, r.AllMaskUs...)
		s.Tokens += r.NumTokens
		s.ValidTests += r.NumValidTests
		s.InvalidTests += r.NumInvalidTests
		s.ValidRejected += r.ValidRejected
		s.InvalidAccepted += r.InvalidAccepted
		if r.ValidRejected+r.InvalidAccepted > 0 {
			s.FailingFiles = append(s.FailingFiles, r.ID)
		}
	}
	s.TBM = distOf(tbm)
	s.TTFM = distOf(ttfm)
	return s
}

// benchClock reads the time a MaskBench run measures: wall time, or with CPUTime
// the thread's CPU time.
type benchClock struct{ cpu bool }

func (c benchClock) now() int64 {
	if c.cpu {
		if ns, ok := threadCPUTime(); ok {
			return ns
		}
	}
	return time.Now().UnixNano()
}

func (c benchClock) usSince(t0 int64) int64 { return (c.now() - t0) / 1000 }

func runMaskBenchFile(cfg MaskBenchConfig, path string) (res *MaskBenchResult) {
	res = &MaskBenchResult{ID: filepath.Base(path), AllMaskUs: []int64{}}
	data, err := os.ReadFile(path)
	if err != nil {
		res.CompileError, res.CompileReason = err.Error(), "unreadable file"
		return res
	}
	var f MaskBenchFile
	if err := json.Unmarshal(data, &f); err != nil {
		res.CompileError, res.CompileReason = err.Error(), "unreadable file"
		return res
	}
	res.NumTests = len(f.Tests)
	timeout := cfg.FileTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	// the work runs in a goroutine so that a hang becomes a timeout and a panic a crash
	type outcome struct{ r *MaskBenchResult }
	ch := make(chan outcome, 1)
	go func() {
		r := *res
		defer func() {
			if p := recover(); p != nil {
				r.Crash = fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
				ch <- outcome{&r}
			}
		}()
		if cfg.CPUTime {
			// a thread's CPU clock follows the goroutine only while it stays there
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		benchOneFile(cfg, &f, &r)
		ch <- outcome{&r}
	}()
	compileLimit := cfg.NewCompiler().Options().compileTime()
	select {
	case o := <-ch:
		return o.r
	case <-time.After(compileLimit + timeout):
		res.Timeout = fmt.Sprintf("no result after %s", compileLimit+timeout)
		return res
	}
}

func benchOneFile(cfg MaskBenchConfig, f *MaskBenchFile, r *MaskBenchResult) {
	c := cfg.NewCompiler()
	v := c.Vocab()
	mask := make([]uint64, v.MaskWords())
	clk := benchClock{cfg.CPUTime}
	t0 := clk.now()
	g, err := c.JSONSchema(f.Schema)
	if err != nil {
		r.CompileError = err.Error()
		r.CompileReason = ErrorReason(err)
		var te *TimeoutError
		if errors.As(err, &te) {
			r.Timeout = err.Error()
		}
		return
	}
	m := g.NewMatcher()
	if err := fillContinued(m, mask, r); err != nil {
		r.CompileError, r.CompileReason = err.Error(), ReasonLimit
		return
	}
	r.TTFMUs = clk.usSince(t0)
	r.MaxTTFMUs = r.TTFMUs
	r.Warnings = len(g.Warnings())
	for i, tc := range f.Tests {
		inst, err := PythonJSON(tc.Data)
		if err != nil {
			r.ValidationError = fmt.Sprintf("test #%d: bad data: %v", i, err)
			continue
		}
		toks := cfg.Encode(string(inst))
		if len(toks) == 0 {
			r.TokenizeErrors++
		}
		m := g.NewMatcher()
		accepted := true
		why := ""
		pos := 0
		for _, tk := range toks {
			t1 := clk.now()
			ferr := fillContinued(m, mask, r)
			ok := ferr == nil && tk >= 0 && int(tk) < v.Width() && mask[tk>>6]&(1<<(uint(tk)&63)) != 0
			var aerr error
			if ok {
				aerr = m.Accept(tk)
			}
			us := clk.usSince(t1)
			r.AllMaskUs = append(r.AllMaskUs, us)
			r.MasksUs += us
			r.MaxMaskUs = max(r.MaxMaskUs, us)
			r.NumTokens++
			if ferr != nil {
				accepted, why = false, ferr.Error()
				break
			}
			if aerr != nil {
				// the mask allowed a token that Accept refuses: an engine bug
				panic(fmt.Sprintf("token %d allowed by the mask but refused: %v", tk, aerr))
			}
			if !ok {
				accepted, why = false, fmt.Sprintf("token %d %q not allowed after %q", tk, v.TokenBytes(tk), tail(string(inst[:pos]), 120))
				break
			}
			pos += len(v.TokenBytes(tk))
		}
		if accepted {
			// EOS must be allowed after a complete valid instance
			if err := fillContinued(m, mask, r); err != nil {
				accepted, why = false, err.Error()
			} else if eos := v.EOS(); eos >= 0 && mask[eos>>6]&(1<<(uint(eos)&63)) == 0 {
				accepted, why = false, "EOS not allowed at the end"
			}
		}
		switch {
		case accepted && !tc.Valid:
			r.InvalidAccepted++
			r.ValidationError = fmt.Sprintf("test #%d: should reject but didn't", i)
		case !accepted && tc.Valid:
			r.ValidRejected++
			r.ValidationError = fmt.Sprintf("test #%d: should accept but didn't: %s", i, why)
		case tc.Valid:
			r.NumValidTests++
		default:
			r.NumInvalidTests++
		}
	}
}

// fillContinued is FillMask continued past Options.MaxMaskTime, as its error says (a
// loaded machine can deschedule the process for that long); the retries are counted.
func fillContinued(m *Matcher, mask []uint64, r *MaskBenchResult) error {
	err := m.FillMask(mask)
	var te *MaskTimeoutError
	for tries := 0; errors.As(err, &te) && tries < 60; tries++ {
		r.MaskRetries++
		err = m.FillMask(mask)
	}
	return err
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// Print writes the summary.
func (s *MaskBenchSummary) Print(w io.Writer) {
	fmt.Fprintf(w, "files %d, compiled %d (%.1f%%), tokens %d, valid tests passed %d, invalid tests passed %d\n",
		s.Files, s.Compiled, 100*float64(s.Compiled)/float64(max(s.Files, 1)), s.Tokens, s.ValidTests, s.InvalidTests)
	fmt.Fprintf(w, "valid-rejected %d, invalid-accepted %d (%.2f%% of compiled schemas), crashes %d, timeouts %d\n",
		s.ValidRejected, s.InvalidAccepted, 100*float64(s.ValidRejected+s.InvalidAccepted)/float64(max(s.Compiled, 1)), s.Crashes, s.Timeouts)
	if s.MaskRetries > 0 {
		fmt.Fprintf(w, "masks continued past the per-mask time budget: %d\n", s.MaskRetries)
	}
	fmt.Fprintf(w, "TBM  (us): avg %.1f  p50 %d  p95 %d  p99 %d  p99.9 %d  max %d  (n=%d)\n",
		s.TBM.Avg, s.TBM.P50, s.TBM.P95, s.TBM.P99, s.TBM.P999, s.TBM.Max, s.TBM.N)
	fmt.Fprintf(w, "TTFM (us): p50 %d  p99 %d  avg %.0f  max %d\n", s.TTFM.P50, s.TTFM.P99, s.TTFM.Avg, s.TTFM.Max)
	if len(s.CompileErrors) > 0 {
		var ks []string
		for k := range s.CompileErrors {
			ks = append(ks, k)
		}
		sort.Slice(ks, func(i, j int) bool { return s.CompileErrors[ks[i]] > s.CompileErrors[ks[j]] })
		var parts []string
		for _, k := range ks {
			parts = append(parts, fmt.Sprintf("%s: %d", k, s.CompileErrors[k]))
		}
		fmt.Fprintf(w, "compile errors by reason: %s\n", strings.Join(parts, ", "))
	}
	if len(s.FailingFiles) > 0 {
		fmt.Fprintf(w, "files with wrong decisions: %s\n", strings.Join(s.FailingFiles, " "))
	}
}
