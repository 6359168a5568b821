// Command dic is the DeepInfer plan compiler.
//
//	dic compile [--model DIR] [--target cpu] [-o plan.dip] [--dump-ir DIR] [--verify] [-v]
//	dic inspect plan.dip [--ir]
package main

import (
	"deepinfer/internal/cli"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"deepinfer/compiler"
	"deepinfer/deploy"
	"deepinfer/plan"
	_ "deepinfer/targets/all"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  dic compile [--model DIR] [--spec deploy.yaml] [--target cpu|sm100|ascend950] [-o plan.dip] [--dump-ir DIR] [--verify] [-v]
      Lower a DeepSeek-V4 model dir (config.json, optional safetensors) to a plan.
      Without --model (and without DEEPINFER_HF_MODEL_DIR) it compiles the embedded
      default model, whose weights are generated from a seed when the plan runs.
  dic inspect plan.dip
      Print a plan's model, phases, kernel counts, buffers and weights.
  dic schema deploy
      Print the deployment spec's JSON Schema.
  dic explain SPEC [--model DIR]
      Plan SPEC and show, per role, what each rank holds, what is left for KV,
      and whether it fits (and if not, by how much and what would).
  dic place (--loads F | --synthetic zipf:S:E:L [--seed N]) --replicas R --gpus P [--groups G] [--nodes N] [--policy eplb|default|default-global]
      Place experts (EPLB) from expert loads; print phy2log, log2phy, logcnt and balancedness as JSON.
  dic cost --csv IN [--target h200|sm100|ascend950] [--out OUT] [--launch eager|device]
      Add the target cost model's predicted_us column to a kernel table (op,dtype,m,n,k,groups,extra[,median_us]).
  dic synth --model DIR --out DIR [--layers 2-9] [--seed N] [--workers N]
      Write a synthetic checkpoint: the config cut to the chosen layers (renumbered
      from 0) and random weights in the real names and storage formats (FP8 blocks,
      FP4 experts, UE8M0 scales), one shard per layer. For timing full-width layers.
  dic grammar bench --maskbench DIR [--tokenizer PATH] [--threads 1] [--out DIR] [--cpu-time]
  dic grammar check (--schema S | --regex R | --ebnf E) --instance X [--tokenizer PATH]
      Structured output: MaskBench over a directory, or the first rejected token of an instance.
`)
}

func main() {
	cli.Main("dic", usage, map[string]func([]string) error{
		"compile": func(a []string) error { return compileCmd(a, os.Stdout) },
		"inspect": func(a []string) error { return inspectCmd(a, os.Stdout) },
		"schema":  func(a []string) error { return schemaCmd(a, os.Stdout) },
		"explain": func(a []string) error { return explainCmd(a, os.Stdout) },
		"place":   func(a []string) error { return placeCmd(a, os.Stdout) },
		"cost":    func(a []string) error { return costCmd(a, os.Stdout, os.Stderr) },
		"grammar": func(a []string) error { return grammarCmd(a, os.Stdout) },
		"synth":   func(a []string) error { return synthCmd(a, os.Stdout) },
	})
}

// usageError is a command-line mistake (exit code 2).
type usageError = cli.UsageError

func parse(fs *flag.FlagSet, args []string) ([]string, error) { return cli.Parse(fs, args) }

func compileCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("compile", flag.ContinueOnError)
	model := fs.String("model", os.Getenv("DEEPINFER_HF_MODEL_DIR"), "model directory (default: the embedded default model)")
	target := fs.String("target", "", "target: cpu, sm100 or ascend950 (default: the spec's, else cpu)")
	specPath := fs.String("spec", "", "deployment spec (YAML or JSON); see dic schema deploy")
	out := fs.String("o", "plan.dip", "output plan file")
	dump := fs.String("dump-ir", "", "write the IR after each pass into this directory")
	verify := fs.Bool("verify", false, "run the IR verifier after every pass")
	verbose := fs.Bool("v", false, "print the time of every pass")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{Err: fmt.Errorf("compile takes no positional arguments (got %q); use --model DIR", pos[0])}
	}
	start := time.Now()
	opts := compiler.Options{ModelDir: *model, Target: *target, Verify: *verify, DumpDir: *dump}
	if *specPath != "" {
		s, err := deploy.Load(*specPath)
		if err != nil {
			return err
		}
		opts.Spec = s
	}
	if *verbose {
		opts.Log = os.Stderr
	}
	res, err := compiler.Compile(opts)
	if err != nil {
		return err
	}
	data, err := plan.Encode(res.Plan)
	if err != nil {
		return err
	}
	if err := plan.WriteBytes(*out, data); err != nil {
		return err
	}
	p := res.Plan
	name := "embedded default model"
	if *model != "" {
		name = *model
	}
	weights := "weights: seeded"
	if p.Source.Kind == plan.SourceCheckpoint {
		weights = "weights: checkpoint headers checked"
		if !res.WeightsChecked {
			weights = "weights: none in the model dir (shapes only; divm run needs them)"
		}
	}
	fmt.Fprintf(stdout, "compiled %s (%s, %d layers) for %s: %d kernel calls in %d phases, %d weights, %s; wrote %s (%s) in %s\n",
		name, p.ModelType, len(p.Model.Layers), p.Target, countCalls(p), len(p.Programs), len(p.Weights), weights,
		*out, humanBytes(int64(len(data))), time.Since(start).Round(time.Millisecond))
	return nil
}

func countCalls(p *plan.Plan) int {
	n := 0
	for _, pr := range p.Programs {
		n += len(pr.Instrs)
	}
	return n
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
