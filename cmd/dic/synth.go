package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"deepinfer/synth"
)

// synthCmd writes a synthetic checkpoint: the model's config cut to the chosen layers
// and random weights in the real checkpoint's names and storage formats.
func synthCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	model := fs.String("model", "", "model directory holding config.json (required)")
	layers := fs.String("layers", "", "layers of the original to keep, e.g. 2-9 or 20-23 (default: all)")
	out := fs.String("out", "", "output directory (required; must not hold a checkpoint)")
	seed := fs.Uint64("seed", 1, "random seed: the same seed writes the same bytes")
	workers := fs.Int("workers", 0, "tensors generated at once (default: one per CPU)")
	configOnly := fs.Bool("config-only", false, "write the cut config.json only, no weights (enough for dic compile and divm simulate)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usageError{Err: fmt.Errorf("synth takes no positional arguments (got %q)", pos[0])}
	case *model == "" || *out == "":
		return usageError{Err: fmt.Errorf("synth needs --model DIR and --out DIR")}
	}
	opts := synth.Options{Seed: *seed, Workers: *workers, Progress: os.Stderr, ConfigOnly: *configOnly}
	if *layers != "" {
		if opts.Layers, err = synth.ParseLayers(*layers); err != nil {
			return usageError{Err: err}
		}
	}
	start := time.Now()
	sum, err := synth.Write(*model, *out, opts)
	if err != nil {
		return err
	}
	for _, n := range sum.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	if *configOnly {
		fmt.Fprintf(stdout, "config of %s cut to %d layers written to %s (no weights)\n", *model, sum.Layers, *out)
		return nil
	}
	kept := "every layer"
	if *layers != "" {
		kept = "layers " + strings.TrimSpace(*layers)
	}
	fmt.Fprintf(stdout, "synthetic checkpoint of %s (%s, now %d layers, seed %d): %d tensors, %.2f GB in %d shards, in %s; random values, not a trained model\n",
		*model, kept, sum.Layers, *seed, sum.Tensors, float64(sum.Bytes)/1e9, sum.Shards, time.Since(start).Round(time.Millisecond))
	return nil
}
