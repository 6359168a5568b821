package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"deepinfer/grammars"
	"deepinfer/tokenizer"
)

// deepseekLogits is the logits (mask) width of DeepSeek models: 129,280, wider than the
// tokenizer's 128,815 ids.
const deepseekLogits = 129280

const grammarUsage = `usage:
  dic grammar bench --maskbench DIR [--tokenizer PATH] [--threads 1] [--out DIR] [--whitespace python|compact|flexible] [--timeout 10s] [--limit N] [--cpuprofile FILE] [--cpu-time]
      Run the MaskBench method over a directory of MaskBench-format files: per schema
      TTFM (compile + first mask), per token mask + commit time (TBM), correctness
      counts; writes one JSON result per file under --out.
  dic grammar check (--schema S | --regex R | --ebnf E) --instance X [--tokenizer PATH] [--raw] [-v]
      Walk the instance's tokens through the grammar and show the first rejected
      token and why. S and E are files (or inline text), R is the pattern, X a file or
      inline text. JSON instances are re-serialized the way Python's json.dumps writes
      them unless --raw.
`

// grammarCmd runs "dic grammar ...".
func grammarCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{Err: errors.New("grammar needs a subcommand: bench or check\n" + grammarUsage)}
	}
	switch args[0] {
	case "bench":
		return grammarBench(args[1:], stdout, os.Stderr)
	case "check":
		return grammarCheck(args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, grammarUsage)
		return nil
	}
	return usageError{Err: fmt.Errorf("unknown grammar subcommand %q\n%s", args[0], grammarUsage)}
}

// loadGrammarTokenizer loads DeepSeek's tokenizer from PATH (a directory or its
// tokenizer.json), or from the fetched copy when PATH is empty.
func loadGrammarTokenizer(path string) (*tokenizer.BPE, error) {
	if path != "" {
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
			path = filepath.Dir(path)
		}
	}
	dir, err := tokenizer.ResolveDir(path)
	if err != nil {
		return nil, err
	}
	return tokenizer.LoadBPE(dir)
}

func grammarBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("grammar bench", flag.ContinueOnError)
	dir := fs.String("maskbench", "", "directory of MaskBench-format *.json files")
	tokPath := fs.String("tokenizer", "", "tokenizer directory or tokenizer.json (default: the fetched DeepSeek tokenizer)")
	threads := fs.Int("threads", 1, "files benchmarked in parallel (1 compares with published MaskBench numbers)")
	out := fs.String("out", "", "write one JSON result per file into this directory")
	ws := fs.String("whitespace", "python", "JSON whitespace policy: python (json.dumps), compact or flexible")
	timeout := fs.Duration("timeout", 10*time.Second, "compile time limit per schema")
	limit := fs.Int("limit", 0, "benchmark only the first N files")
	width := fs.Int("width", deepseekLogits, "mask (logits) width")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	cpuTime := fs.Bool("cpu-time", false, "time TTFM and TBM as the working thread's CPU time (Linux), not wall time: on a shared machine wall time also counts the waits for a CPU")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{Err: fmt.Errorf("grammar bench takes no positional arguments (got %q)", pos[0])}
	}
	if *dir == "" {
		return usageError{Err: errors.New("grammar bench needs --maskbench DIR (a directory of MaskBench-format files, e.g. shared/data/maskbench-dev)")}
	}
	files, err := grammars.MaskBenchFiles(*dir)
	if err != nil {
		return err
	}
	if *limit > 0 && *limit < len(files) {
		files = files[:*limit]
	}
	policy, err := grammars.ParseWhitespace(*ws)
	if err != nil {
		return usageError{Err: err}
	}
	bpe, err := loadGrammarTokenizer(*tokPath)
	if err != nil {
		return err
	}
	vocab := grammars.VocabFrom(bpe, *width)
	// one compiler's shared leaf automata (string, number, pattern) serve every file,
	// as one server process would; compiled grammars are not reused between files
	base := grammars.NewCompiler(vocab, grammars.Options{MaxCompileTime: *timeout, Whitespace: policy})
	// as a server at start-up: the vocabulary's indexes and the shared string and
	// number automata are built before the first file
	base.Warm()
	cfg := grammars.MaskBenchConfig{
		NewCompiler: func() *grammars.Compiler { return base.Fork() },
		Encode:      func(s string) []int32 { return bpe.Encode(s, false) },
		OutDir:      *out,
		Threads:     *threads,
		CPUTime:     *cpuTime,
	}
	var pb *progressbar.ProgressBar
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("CI") == "" {
		pb = progressbar.NewOptions(len(files), progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("schemas"),
			progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
		cfg.Progress = func(done, total int, r *grammars.MaskBenchResult) { _ = pb.Set(done) }
	}
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	sum, err := grammars.RunMaskBench(cfg, files)
	if pb != nil {
		_ = pb.Finish()
	}
	if err != nil {
		return err
	}
	clock := "wall time"
	if *cpuTime {
		clock = "thread CPU time"
	}
	fmt.Fprintf(stdout, "MaskBench on %s: %d files, %d thread(s), tokenizer %d ids, mask width %d, whitespace %s, timed by %s, %s\n",
		*dir, len(files), *threads, vocab.NumTokens(), vocab.Width(), policy, clock, time.Since(start).Round(time.Millisecond))
	sum.Print(stdout)
	if *out != "" {
		fmt.Fprintf(stdout, "per-file results in %s\n", *out)
	}
	return nil
}

// readArg returns the contents of the file named arg, or arg itself when no such file
// exists.
func readArg(arg string) (string, bool) {
	if b, err := os.ReadFile(arg); err == nil {
		return string(b), true
	}
	return arg, false
}

func grammarCheck(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("grammar check", flag.ContinueOnError)
	schema := fs.String("schema", "", "JSON Schema (file or inline JSON)")
	regex := fs.String("regex", "", "regular expression the whole output must match")
	ebnf := fs.String("ebnf", "", "GBNF grammar (file or inline text)")
	instance := fs.String("instance", "", "the output to check (file or inline text)")
	tokPath := fs.String("tokenizer", "", "tokenizer directory or tokenizer.json (default: the fetched DeepSeek tokenizer)")
	raw := fs.Bool("raw", false, "use the instance text as is (no JSON re-serialization)")
	ws := fs.String("whitespace", "python", "JSON whitespace policy: python, compact or flexible")
	verbose := fs.Bool("v", false, "print every token")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{Err: fmt.Errorf("grammar check takes no positional arguments (got %q)", pos[0])}
	}
	n := 0
	for _, s := range []string{*schema, *regex, *ebnf} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return usageError{Err: errors.New("grammar check needs exactly one of --schema, --regex, --ebnf")}
	}
	if *instance == "" {
		return usageError{Err: errors.New("grammar check needs --instance X")}
	}
	policy, err := grammars.ParseWhitespace(*ws)
	if err != nil {
		return usageError{Err: err}
	}
	bpe, err := loadGrammarTokenizer(*tokPath)
	if err != nil {
		return err
	}
	vocab := grammars.VocabFrom(bpe, deepseekLogits)
	c := grammars.NewCompiler(vocab, grammars.Options{Whitespace: policy})
	text, _ := readArg(*instance)
	var g *grammars.Grammar
	t0 := time.Now()
	switch {
	case *schema != "":
		src, _ := readArg(*schema)
		g, err = c.JSONSchema([]byte(src))
		if err == nil && !*raw {
			py, perr := grammars.PythonJSON([]byte(strings.TrimSpace(text)))
			if perr != nil {
				return fmt.Errorf("the instance is not JSON (%v); use --raw to check it as text", perr)
			}
			if string(py) != text {
				fmt.Fprintln(stdout, "instance re-serialized as Python's json.dumps writes it (use --raw to keep the text)")
			}
			text = string(py)
		}
	case *regex != "":
		g, err = c.Regex(*regex)
	default:
		src, _ := readArg(*ebnf)
		g, err = c.EBNF(src)
	}
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	fmt.Fprintf(stdout, "compiled %s grammar in %s\n", g.Kind(), time.Since(t0).Round(time.Microsecond))
	for _, w := range g.Warnings() {
		fmt.Fprintf(stdout, "  warning: %s\n", w)
	}
	res := grammars.Check(g, bpe.Encode(text, false))
	res.Print(stdout, *verbose)
	if !res.OK {
		return errors.New("the instance is rejected")
	}
	return nil
}
