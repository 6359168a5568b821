// Command divm is the DeepInfer VM: it runs compiled plans.
//
//	divm run plan.dip [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3) [sampling flags]
//	divm eval --model DIR --cases cases.json --out logits.safetensors
package main

import (
	"deepinfer/internal/cli"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"deepinfer/plan"
	"deepinfer/safetensors"
	"deepinfer/targets"
	_ "deepinfer/targets/all"
	"deepinfer/tokenizer"
	"deepinfer/vm"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  divm run plan.dip [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3)
           [--max-tokens 32] [--temperature 0] [--top-p 1] [--top-k 0] [--seed 0]
           [--repeat N] [--max-seqs N] [--ignore-eos] [--max-context N]
           [--trace trace.json [--trace-kernels]]
      Generate from one prompt. Text is tokenized with the plan's tokenizer: bytes
      for the embedded default, DeepSeek's BPE for checkpoints (--tokenizer DIR, the
      model dir's tokenizer.json, or the copy scripts/fetch-tokenizer.sh fetched).
      --repeat N runs the prompt as N requests in one batch (--max-seqs defaults to N).
      --trace writes a Perfetto trace (Chrome trace-event JSON): the engine's host work
      per step and, on a runtime with a device timeline (cuda), the device's steps and
      the idle gaps between them; --trace-kernels adds every kernel launch, which runs
      steps without their CUDA graphs. The async scheduler (on by default;
      DEEPINFER_ASYNC=0 turns it off) is summarized after the run. A run that lasts
      longer than 5 s prints a progress line to stderr every 5 s (steps, tokens run,
      requests running, waiting and done).
  divm run plan.dip --input batch.jsonl --output results.jsonl [--model DIR]
           [--max-tokens 256] [--max-batch-tokens 2048] [--max-seqs 64]
      Run an OpenAI Batch API file: one result or error line per input line, resumable
      (a rerun skips what the output file already holds).
  divm serve plan.dip [--model DIR] [--tokenizer DIR] [--host 127.0.0.1] [--port 8000]
           [--served-model-name NAME] [--max-num-seqs 64] [--max-num-batched-tokens 2048]
           [--max-model-len N] [--max-queue N] [--default-max-tokens 256] [--shutdown-grace 30s]
      Serve the OpenAI API (/v1/chat/completions, /v1/completions, streamed or not;
      /v1/models, /health, /metrics) on one continuously batched engine, until SIGTERM.
  divm eval --model DIR --cases cases.json --out logits.safetensors [--target cpu] [--solo]
      Compile DIR, run every reference case (prefill_N, incremental_L_S, greedy) as one
      continuous batch, and write the logits and greedy ids under the cases' keys.
  divm simulate plan.dip --workload W [--calibration cuda-fast|cuda-exact] [--acceptance STATS]
           [--trace FILE] [--plots DIR]
      Predict how a deployed plan (dic compile --spec) serves a workload on its target,
      rank by rank and step by step, with the target's cost model (--calibration: an
      h200 plan's kernels priced as this project's cuda kernels were measured). Every
      figure is a prediction, labelled with the model that made it.
  divm simulate plan.dip --compare BENCH.json [--calibration NAME|auto]
      Price each point of a divm bench report as one decode step and set it against the
      measured step and kernel classes. Either form takes --target T, a check that the
      plan was compiled for T (the plan's target picks the cost model).
  divm overhead plan.dip [--batch 256] [--steps 300]
      Measure the VM's own time per decode step (scheduling, batch preparation,
      sampling randoms, outputs) with every kernel replaced by a no-op.
  divm bench plan.dip [--model DIR] [--batch 1,64,256] [--context 4096] [--steps 10]
           [--warmup 3] [--profile-steps 3] [--profile-prefill] [--chunk 1024] [--copy-mib 2048]
           [--numerics exact|fast] [--graphs=false] [--temperature 0 [--top-p 1] [--top-k 0]] [--out FILE]
      Time decode steps at each batch size and context (one sequence prefilled, the rest
      copied from it on the device), next to the bytes a step must read and the
      device's copy bandwidth measured in the same run; per-kernel times from events
      (--profile-prefill: each context built again with events, the prefill by kernel;
      --temperature: the decode rows sampled, not greedy, to time the sampler).
  divm tokenize [--tokenizer DIR] [--decode]
      JSON strings, one per line, to {"ids":[...]} lines (or back with --decode).
`)
}

// usageError is a command-line mistake (exit code 2).
type usageError = cli.UsageError

func main() {
	cli.Main("divm", usage, map[string]func([]string) error{
		"run":      func(a []string) error { return runCmd(a, os.Stdout) },
		"eval":     func(a []string) error { return evalCmd(a, os.Stdout) },
		"serve":    func(a []string) error { return serveCmd(a, os.Stdout) },
		"simulate": func(a []string) error { return simulateCmd(a, os.Stdout) },
		"overhead": func(a []string) error { return overheadCmd(a, os.Stdout) },
		"bench":    func(a []string) error { return benchCmd(a, os.Stdout) },
		"tokenize": func(a []string) error { return tokenizeCmd(a, os.Stdin, os.Stdout) },
	})
}

func parse(fs *flag.FlagSet, args []string) ([]string, error) { return cli.Parse(fs, args) }

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, usageError{Err: fmt.Errorf("--prompt-ids: %q is not a token id", f)}
		}
		ids = append(ids, int32(n))
	}
	if len(ids) == 0 {
		return nil, usageError{Err: fmt.Errorf("--prompt-ids: no ids")}
	}
	return ids, nil
}

func loadMachine(planPath, modelDir string) (*vm.Machine, error) {
	p, err := plan.ReadFile(planPath)
	if err != nil {
		return nil, err
	}
	w, err := vm.LoadWeights(p, modelDir)
	if err != nil {
		return nil, err
	}
	return vm.Load(p, w)
}

// openPlan reads a plan, loads its weights (from modelDir, else $DEEPINFER_HF_MODEL_DIR
// for checkpoint plans) and opens it on its target for steps of up to maxTokens tokens.
// It says on stderr where a device runtime runs it.
// serving is how the engine runs a plan: batch-invariant mode and speculation, from
// the plan's deploy spec with the environment over it.
type serving struct {
	invariant bool
	spec      *vm.Speculation
	numerics  string // targets.Options.Numerics, from DEEPINFER_NUMERICS
}

// servingConfig reads DEEPINFER_BATCH_INVARIANT, DEEPINFER_NUMERICS and the speculation variables
// (vm.SpeculationFromEnv) over the plan's deploy spec (batch_invariant, speculative).
// Speculation runs only on plans with a DSpark draft program.
func servingConfig(p *plan.Plan, getenv func(string) string) (serving, error) {
	var sc serving
	var dep struct {
		BatchInvariant bool `json:"batch_invariant"`
		Speculative    struct {
			NumSpeculativeTokens *int `json:"num_speculative_tokens"`
			Varlen               bool `json:"varlen"`
		} `json:"speculative"`
	}
	if p.Deployment != nil && p.Deployment.Spec != "" {
		if err := json.Unmarshal([]byte(p.Deployment.Spec), &dep); err != nil {
			return sc, fmt.Errorf("plan's deploy spec: %w", err)
		}
	}
	sc.invariant = dep.BatchInvariant
	switch v := getenv("DEEPINFER_BATCH_INVARIANT"); v {
	case "":
	case "1", "true":
		sc.invariant = true
	case "0", "false":
		sc.invariant = false
	default:
		return sc, fmt.Errorf("DEEPINFER_BATCH_INVARIANT=%q: want 0 or 1", v)
	}
	switch v := getenv("DEEPINFER_ASYNC"); v {
	case "", "0", "1", "true", "false":
	default:
		return sc, fmt.Errorf("DEEPINFER_ASYNC=%q: want 0 or 1", v)
	}
	sc.numerics = getenv("DEEPINFER_NUMERICS")
	if err := targets.CheckNumerics(sc.numerics); err != nil {
		return sc, fmt.Errorf("DEEPINFER_NUMERICS: %w", err)
	}
	env := func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		switch {
		case k == "DEEPINFER_USE_NEXTN_DECODE" && dep.Speculative.NumSpeculativeTokens != nil:
			return strconv.Itoa(*dep.Speculative.NumSpeculativeTokens)
		case k == "DEEPINFER_ENABLE_MTP_VARLEN" && dep.Speculative.Varlen:
			return "1"
		}
		return ""
	}
	spec, err := vm.SpeculationFromEnv(env)
	if err != nil {
		return sc, err
	}
	if p.Model.DSpark != nil && spec != nil {
		spec.Exact = sc.invariant
		sc.spec = spec
	}
	return sc, nil
}

func openPlan(path, modelDir string, maxTokens, maxContext int) (*plan.Plan, *vm.Machine, string, serving, error) {
	p, err := plan.ReadFile(path)
	if err != nil {
		return nil, nil, "", serving{}, err
	}
	sc, err := servingConfig(p, os.Getenv)
	if err != nil {
		return nil, nil, "", serving{}, err
	}
	dir := modelDir
	if dir == "" && p.Source.Kind == plan.SourceCheckpoint {
		dir = os.Getenv("DEEPINFER_HF_MODEL_DIR")
	}
	w, err := vm.LoadWeights(p, dir)
	if err != nil {
		return nil, nil, "", sc, err
	}
	start := time.Now()
	m, err := vm.Load(p, w, targets.Options{MaxTokens: maxTokens, MaxContext: maxContext, Invariant: sc.invariant, Numerics: sc.numerics})
	if err != nil {
		return nil, nil, "", sc, err
	}
	if d := m.Describe(); d != "" {
		fmt.Fprintf(os.Stderr, "divm: %s; start-up %s\n", d, time.Since(start).Round(time.Millisecond))
	}
	return p, m, dir, sc, nil
}

// specSummary is the speculation line of a run's summary ("" without speculation).
func specSummary(s vm.SpecStats) string {
	if s.Groups == 0 {
		return ""
	}
	return fmt.Sprintf("speculation: %d verify groups, %d of %d drafts accepted, accepted-length histogram %v, %.2f tokens per group, %.2f target rows per committed token (verify + rebuild; plain decoding: 1), %d draft steps",
		s.Groups, s.Accepted, s.Drafted, s.Hist, s.TokensPerGroup(), s.RowsPerToken(), s.DraftSteps)
}

// writeSpecStats writes the speculation counters as JSON, with the accepted-length
// distribution under "acceptance" (divm simulate --acceptance reads it).
func writeSpecStats(path string, s vm.SpecStats) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(struct {
		Acceptance []float64 `json:"acceptance"`
		vm.SpecStats
		TokensPerGroup float64 `json:"tokens_per_group"`
		RowsPerToken   float64 `json:"rows_per_token"`
	}{s.Acceptance(), s, s.TokensPerGroup(), s.RowsPerToken()}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func runCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	model := fs.String("model", "", "model directory with the checkpoint (for plans compiled from one; default $DEEPINFER_HF_MODEL_DIR)")
	prompt := fs.String("prompt", "", "prompt text (embedded default model)")
	promptIDs := fs.String("prompt-ids", "", "prompt token ids, comma separated")
	maxTokens := fs.Int("max-tokens", 32, "tokens to generate")
	temp := fs.Float64("temperature", 0, "sampling temperature (0: greedy)")
	topP := fs.Float64("top-p", 1, "nucleus sampling mass")
	topK := fs.Int("top-k", 0, "keep the k most likely tokens (0: all)")
	seed := fs.Uint64("seed", 0, "sampling seed")
	input := fs.String("input", "", "batch input file (OpenAI Batch API JSONL)")
	output := fs.String("output", "", "batch results file (appended; reruns resume)")
	tokDir := fs.String("tokenizer", "", "directory with tokenizer.json (default: the model dir's, then the fetched one)")
	batchTokens := fs.Int("max-batch-tokens", 2048, "tokens per engine step (chunked prefill budget)")
	seqs := fs.Int("max-seqs", 64, "sequences running at once (with --repeat N: default N)")
	specStats := fs.String("spec-stats", "", "write the speculation counters (and the accepted-length distribution for divm simulate --acceptance) as JSON here")
	repeat := fs.Int("repeat", 1, "run the prompt as N identical requests in one continuous batch")
	ignoreEOS := fs.Bool("ignore-eos", false, "do not stop at the end-of-sequence token (every request generates --max-tokens)")
	maxContext := fs.Int("max-context", 0, "longest sequence the runtime holds per request (0: prompt plus --max-tokens with --prompt-ids, else the model's)")
	tracePath := fs.String("trace", "", "write a Perfetto trace (Chrome trace-event JSON) of the engine's host work and, where the runtime records one, the device's steps and idle gaps")
	traceKernels := fs.Bool("trace-kernels", false, "with --trace, also time every kernel launch on the device (this runs steps without their CUDA graphs, so step times and gaps are not those of a graphed run)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{Err: fmt.Errorf("run takes one plan file")}
	}
	batchMode := *input != "" || *output != ""
	switch {
	case batchMode && (*input == "" || *output == ""):
		return usageError{Err: fmt.Errorf("batch mode needs both --input and --output")}
	case batchMode && (*prompt != "" || *promptIDs != ""):
		return usageError{Err: fmt.Errorf("--input/--output and --prompt/--prompt-ids exclude each other")}
	case !batchMode && (*prompt == "") == (*promptIDs == ""):
		return usageError{Err: fmt.Errorf("give exactly one of --prompt and --prompt-ids (or --input and --output)")}
	case batchMode && (*tracePath != "" || *repeat != 1):
		return usageError{Err: fmt.Errorf("--trace and --repeat work with --prompt or --prompt-ids, not with --input")}
	case *traceKernels && *tracePath == "":
		return usageError{Err: fmt.Errorf("--trace-kernels needs --trace FILE")}
	}
	if *maxTokens < 1 || *batchTokens < 1 || *seqs < 1 || *repeat < 1 || *maxContext < 0 {
		return usageError{Err: fmt.Errorf("--max-tokens, --max-batch-tokens, --max-seqs and --repeat must be positive, --max-context not negative")}
	}
	var ids []int32
	ctx := *maxContext
	if *promptIDs != "" {
		if ids, err = parseIDs(*promptIDs); err != nil {
			return err
		}
		if ctx == 0 {
			ctx = len(ids) + *maxTokens
		}
	}
	p, m, dir, sc, err := openPlan(pos[0], *model, *batchTokens, ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	if batchMode {
		tk, err := chooseTokenizer(p, dir, *tokDir)
		if err != nil {
			return err
		}
		mt := *maxTokens
		if !flagSet(fs, "max-tokens") {
			mt = 256
		}
		return runBatch(m, tk, *input, *output, mt, *batchTokens, *seqs, sc.spec, *specStats, os.Stderr)
	}
	tok, err := chooseTokenizer(p, dir, *tokDir)
	if err != nil && *prompt != "" {
		return err
	}
	if *prompt != "" {
		ids = tok.Encode(*prompt, true)
	}
	ro := promptRun{ids: ids, n: *repeat, maxTokens: *maxTokens, maxSeqs: *seqs, batchTokens: *batchTokens,
		sampling: vm.Sampling{Temperature: *temp, TopP: *topP, TopK: *topK, Seed: *seed},
		trace:    *tracePath, kernels: *traceKernels, spec: sc.spec, progress: os.Stderr, progressEvery: progressEvery}
	if !flagSet(fs, "max-seqs") && *repeat > 1 {
		ro.maxSeqs = *repeat
	}
	if !*ignoreEOS {
		ro.stop = []int32{int32(p.Model.EOS)}
	}
	res, eng, lines, err := runPrompts(m, ro)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "prompt ids: %v\n", ids)
	fmt.Fprintf(stdout, "output ids: %v\n", res.Tokens)
	if b, ok := tok.(tokenizer.Bytes); ok {
		fmt.Fprintf(stdout, "output text: %s\n", tokenizer.Printable(b.DecodeBytes(res.Tokens)))
	} else if tok != nil {
		fmt.Fprintf(stdout, "output text: %q\n", tok.Decode(res.Tokens, true))
	}
	for _, l := range lines {
		fmt.Fprintln(stdout, l)
	}
	if line := specSummary(eng.SpecStats()); line != "" {
		fmt.Fprintln(stdout, line)
	}
	return writeSpecStats(*specStats, eng.SpecStats())
}

// schedulerSummary is the run's line about the async scheduler: steps async and
// synchronous, rows run ahead for finished requests, and the host time the overlap hid.
func schedulerSummary(st vm.Stats, overlaps bool) string {
	line := fmt.Sprintf("scheduler: %d steps, %d async and %d synchronous", st.Steps, st.AsyncSteps, st.Steps-st.AsyncSteps)
	if st.Discarded > 0 {
		line += fmt.Sprintf(", %d rows run ahead for finished requests", st.Discarded)
	}
	if overlaps {
		line += fmt.Sprintf("; host time hidden by the overlap %s", st.Hidden.Round(time.Microsecond))
		if st.AsyncSteps > 0 {
			line += fmt.Sprintf(" (%.1f µs per async step)", us(st.Hidden)/float64(st.AsyncSteps))
		}
	} else {
		line += "; nothing hidden: this runtime has no device queue (each step runs inside its enqueue)"
	}
	return line
}

// promptRun is divm run's prompt mode: one prompt, as n identical requests.
type promptRun struct {
	ids                   []int32
	n, maxTokens, maxSeqs int
	batchTokens           int
	sampling              vm.Sampling
	stop                  []int32
	trace                 string // trace file ("" for none)
	kernels               bool
	spec                  *vm.Speculation
	progress              io.Writer     // a line every progressEvery while the run goes on (nil: none)
	progressEvery         time.Duration // (zero: none)
}

// progressEvery is how often divm run reports a run that is still going.
const progressEvery = 5 * time.Second

// startProgress writes progressLine to w every interval until the returned stop is
// called (stop waits for the writer to be done): a long run shows how far it got.
func startProgress(w io.Writer, every time.Duration, eng *vm.Engine, start time.Time, total int) (stop func()) {
	if w == nil || every <= 0 {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintln(w, progressLine(eng.Stats(), time.Since(start), total))
			}
		}
	}()
	return func() { close(done); <-exited }
}

// progressLine is one progress report of divm run: the time so far, the steps run and
// the tokens they carried (prompt rows, decode rows, drafts verified), the requests
// running, waiting and done.
func progressLine(st vm.Stats, el time.Duration, total int) string {
	finished := max(total-st.Running-st.Queued, 0)
	return fmt.Sprintf("divm run: %s: %d steps, %d tokens run (%.1f a second); %d requests running, %d waiting, %d of %d done",
		el.Round(time.Second), st.Steps, st.Tokens, float64(st.Tokens)/max(el.Seconds(), 1e-9), st.Running, st.Queued, finished, total)
}

// runPrompts runs the prompt requests (and writes the trace); it returns the first
// request's result and the run's summary lines.
func runPrompts(m *vm.Machine, ro promptRun) (vm.Result, *vm.Engine, []string, error) {
	var lines []string
	reqs := make([]vm.Request, ro.n)
	for i := range reqs {
		reqs[i] = vm.Request{ID: "prompt", Prompt: ro.ids, MaxTokens: ro.maxTokens, Stop: ro.stop, Sampling: ro.sampling}
		if ro.n > 1 {
			reqs[i].ID = fmt.Sprintf("prompt-%d", i)
		}
	}
	eng := &vm.Engine{M: m, Spec: ro.spec, MaxSeqs: ro.maxSeqs, MaxBatchTokens: ro.batchTokens}
	var tr tracer
	tl := m.Timeline()
	if ro.trace != "" {
		eng.Trace = tr.add
		if tl != nil {
			tl.SetTimeline(true, ro.kernels)
			if _, err := tl.TakeTimeline(); err != nil { // start afresh
				return vm.Result{}, nil, nil, fmt.Errorf("trace: %w", err)
			}
		}
	}
	results := make([]vm.Result, len(reqs))
	start := time.Now()
	stop := startProgress(ro.progress, ro.progressEvery, eng, start, len(reqs))
	eng.Run(reqs, func(r vm.Result) { results[r.Index] = r })
	stop()
	el := time.Since(start)
	var generated int
	for _, r := range results {
		if r.Err != nil {
			return r, eng, nil, fmt.Errorf("request %s: %w", r.ID, r.Err)
		}
		generated += len(r.Tokens)
	}
	st := eng.Stats()
	res := results[0]
	if ro.n == 1 {
		lines = append(lines, fmt.Sprintf("finish: %s; %d prompt + %d generated tokens in %s (%.1f tokens/s)",
			res.Finish, len(ro.ids), len(res.Tokens), el.Round(time.Microsecond), float64(len(ro.ids)+len(res.Tokens))/el.Seconds()))
	} else {
		lines = append(lines, fmt.Sprintf("finish: %d requests (the first: %s); %d prompt + %d generated tokens in %s (%.1f generated tokens/s)",
			ro.n, res.Finish, ro.n*len(ro.ids), generated, el.Round(time.Microsecond), float64(generated)/el.Seconds()))
	}
	line := schedulerSummary(st, m.Overlaps())
	lines = append(lines, line)
	if ro.trace == "" {
		return res, eng, lines, nil
	}
	var dev []targets.DeviceSpan
	if tl != nil {
		var err error
		dev, err = tl.TakeTimeline()
		tl.SetTimeline(false, false)
		if err != nil {
			return res, eng, nil, fmt.Errorf("trace: %w", err)
		}
	}
	f, sum := buildTrace(tr.spans, dev, tl != nil, st)
	sum.Overlaps = m.Overlaps()
	if err := writeTrace(ro.trace, f); err != nil {
		return res, eng, nil, err
	}
	lines = append(lines, fmt.Sprintf("trace: %s: %d events; %s", ro.trace, len(f.TraceEvents), sum))
	return res, eng, lines, nil
}

func evalCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	model := fs.String("model", os.Getenv("DEEPINFER_HF_MODEL_DIR"), "model directory")
	casesPath := fs.String("cases", "", "cases.json")
	out := fs.String("out", "", "output safetensors file")
	target := fs.String("target", "cpu", "target to compile for")
	solo := fs.Bool("solo", false, "run the cases one at a time instead of as one continuous batch")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *model == "" || *casesPath == "" || *out == "" {
		return usageError{Err: fmt.Errorf("eval needs --model DIR --cases FILE --out FILE")}
	}
	start := time.Now()
	m, err := compileAndLoad(*model, *target)
	if err != nil {
		return err
	}
	cases, err := vm.ReadCases(*casesPath)
	if err != nil {
		return err
	}
	e := &vm.Engine{M: m}
	stagger := 1
	if *solo {
		e.MaxSeqs = 1
		stagger = 0
	}
	res, err := vm.RunCases(e, cases, stagger)
	if err != nil {
		return err
	}
	tensors := make([]safetensors.Tensor, 0, len(res))
	for _, t := range res {
		tensors = append(tensors, t)
	}
	if err := safetensors.Write(*out, tensors, map[string]string{"producer": "divm eval", "target": *target}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d tensors for %d cases to %s in %s\n", len(tensors), len(cases.Cases), *out, time.Since(start).Round(time.Millisecond))
	return nil
}
