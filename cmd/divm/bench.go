package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/vm"
	"deepinfer/vm/stepbench"
)

// benchCmd times decode steps of a plan on its target over a grid of batch sizes and
// contexts and sets them against the bytes each step must read.
func benchCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	model := fs.String("model", "", "model directory with the checkpoint (default $DEEPINFER_HF_MODEL_DIR)")
	batches := fs.String("batch", "1,64,256", "batch sizes (sequences per decode step)")
	contexts := fs.String("context", "4096", "contexts (tokens in each sequence before the timed steps)")
	steps := fs.Int("steps", 10, "timed decode steps per point (the median is reported)")
	warmup := fs.Int("warmup", 3, "untimed decode steps first")
	profile := fs.Int("profile-steps", 3, "steps run again with per-kernel device events (0: none)")
	chunk := fs.Int("chunk", 1024, "prefill tokens per step when building a context")
	profilePrefill := fs.Bool("profile-prefill", false, "build each context once more with per-kernel device events (the prefill's time by kernel class)")
	copyMiB := fs.Int64("copy-mib", 2048, "buffer for the device-to-device copy bandwidth, MiB")
	seed := fs.Uint64("seed", 1, "token seed")
	out := fs.String("out", "", "write the full report as JSON")
	graphs := fs.Bool("graphs", true, "run a device runtime's steps as captured CUDA graphs (false: each kernel launched on its own, to compare)")
	numerics := fs.String("numerics", "exact", "a device runtime's numerics: exact (the cpu target's values bit for bit) fast (tensor-core products, within a tolerance) or fp8 (fast, with V4.1's MXFP8 products on the FP8 tensor cores)")
	temp := fs.Float64("temperature", 0, "sample the decode rows at this temperature (0: greedy)")
	topP := fs.Float64("top-p", 1, "with --temperature: the nucleus sampling mass")
	topK := fs.Int("top-k", 0, "with --temperature: keep the k most likely tokens (0: all)")
	route := fs.String("route", "model", "routed experts: model (the checkpoint's routers) or uniform (a device runtime replaces every top-k router's choices by k distinct uniform draws a token, as a trained, balanced router spreads a batch; random-weight routers send rows that share a context to a few experts; the values are no longer the model's)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{Err: fmt.Errorf("bench takes one plan file")}
	}
	cfg := stepbench.Config{Warmup: *warmup, Steps: *steps, ProfileSteps: *profile, Chunk: *chunk,
		CopyBytes: *copyMiB << 20, Seed: *seed, Progress: os.Stderr, NoGraphs: !*graphs, ProfilePrefill: *profilePrefill}
	if cfg.Batches, err = intList("--batch", *batches); err != nil {
		return err
	}
	if cfg.Contexts, err = intList("--context", *contexts); err != nil {
		return err
	}
	if *route != "model" && *route != "uniform" {
		return usageError{Err: fmt.Errorf("--route %q: want model or uniform", *route)}
	}
	if err := targets.CheckNumerics(*numerics); err != nil {
		return usageError{Err: fmt.Errorf("--numerics: %w", err)}
	}
	cfg.Sampling = vm.Sampling{Temperature: *temp, TopP: *topP, TopK: *topK, Seed: *seed}
	if err := cfg.Sampling.Validate(); err != nil {
		return usageError{Err: err}
	}
	if *temp == 0 && (*topP != 1 || *topK != 0) {
		return usageError{Err: fmt.Errorf("--top-p and --top-k need --temperature above 0 (greedy rows take neither)")}
	}
	if *steps < 1 || *warmup < 0 || *profile < 0 || *chunk < 1 || *copyMiB < 1 {
		return usageError{Err: fmt.Errorf("--steps, --chunk and --copy-mib must be positive, --warmup and --profile-steps not negative")}
	}
	p, err := plan.ReadFile(pos[0])
	if err != nil {
		return err
	}
	maxCtx, maxB := 0, 0
	for _, c := range cfg.Contexts {
		maxCtx = max(maxCtx, c)
	}
	for _, b := range cfg.Batches {
		maxB = max(maxB, b)
	}
	if need := maxCtx + *warmup + *steps + *profile + 8; need > p.Model.MaxPositions {
		return fmt.Errorf("--context %d plus the steps needs %d positions; the model has %d", maxCtx, need, p.Model.MaxPositions)
	}
	dir := *model
	if dir == "" && p.Source.Kind == plan.SourceCheckpoint {
		dir = os.Getenv("DEEPINFER_HF_MODEL_DIR")
	}
	start := time.Now()
	w, err := vm.LoadWeights(p, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "divm bench: weights read in %s\n", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	m, err := vm.Load(p, w, targets.Options{MaxTokens: max(*chunk, maxB), MaxContext: maxCtx + *warmup + *steps + *profile + 8, Numerics: *numerics,
		UniformRoute: *route == "uniform"})
	if err != nil {
		return err
	}
	defer m.Close()
	if d := m.Describe(); d != "" {
		fmt.Fprintf(os.Stderr, "divm bench: %s; start-up %s\n", d, time.Since(start).Round(time.Millisecond))
	}
	rep, err := stepbench.Run(m, cfg)
	if err != nil {
		return err
	}
	if *out != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "%s: %s, %d layers, target %s\n", pos[0], p.ModelType, len(p.Model.Layers), p.Target)
	fmt.Fprintf(stdout, "bytes a step must read: weights touched + KV attended, in this plan's formats; routed experts: the distinct experts a census step's slots went to (\"experts touched\", a MoE layer), else the expectation for independent tokens (\"expected\")\n")
	rep.Table(stdout)
	return nil
}

func intList(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, usageError{Err: fmt.Errorf("%s %q: want positive integers separated by commas", flagName, s)}
		}
		out = append(out, v)
	}
	return out, nil
}
