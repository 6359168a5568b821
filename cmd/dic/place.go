package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"deepinfer/placement"
)

// placeCmd is `dic place`: expert placement (EPLB) from expert-load statistics, printed
// as JSON (placement.Report).
func placeCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("place", flag.ContinueOnError)
	loadsPath := fs.String("loads", "", `expert loads: JSON with a "weight" field (layers × experts), or CSV`)
	synth := fs.String("synthetic", "", "generated loads instead: zipf:S:EXPERTS:LAYERS[:TOKENS] or uniform:EXPERTS:LAYERS[:TOKENS]")
	seed := fs.Uint64("seed", 1, "seed for --synthetic")
	replicas := fs.Int("replicas", 0, "physical expert slots per layer, all GPUs together (default: the file's num_replicas)")
	groups := fs.Int("groups", 1, "expert groups (default: the file's num_groups, else 1)")
	nodes := fs.Int("nodes", 1, "nodes (default: the file's num_nodes, else 1)")
	gpus := fs.Int("gpus", 0, "GPUs (default: the file's num_gpus)")
	policy := fs.String("policy", "default", "placement policy: "+strings.Join(placement.PolicyNames(), ", "))
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{Err: fmt.Errorf("place takes no positional arguments (got %q); use --loads FILE", pos[0])}
	}
	if (*loadsPath == "") == (*synth == "") {
		return usageError{Err: fmt.Errorf("place needs exactly one of --loads FILE and --synthetic SPEC")}
	}
	known := false
	for _, name := range placement.PolicyNames() {
		known = known || name == *policy
	}
	if !known {
		return usageError{Err: fmt.Errorf("unknown --policy %q (have %s)", *policy, strings.Join(placement.PolicyNames(), ", "))}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var loads placement.Loads
	var fromFile placement.Problem
	if *synth != "" {
		spec, err := placement.ParseSynthetic(*synth)
		if err != nil {
			return usageError{Err: err}
		}
		loads = spec.Generate(*seed)
	} else {
		if loads, fromFile, err = placement.ReadFile(*loadsPath); err != nil {
			return err
		}
	}
	p := placement.Problem{Replicas: *replicas, Groups: *groups, Nodes: *nodes, GPUs: *gpus}
	for _, f := range []struct {
		name string
		dst  *int
		file int
	}{{"replicas", &p.Replicas, fromFile.Replicas}, {"groups", &p.Groups, fromFile.Groups}, {"nodes", &p.Nodes, fromFile.Nodes}, {"gpus", &p.GPUs, fromFile.GPUs}} {
		if !set[f.name] && f.file != 0 {
			*f.dst = f.file
		}
	}
	if !set["replicas"] && p.Replicas == 0 {
		return usageError{Err: fmt.Errorf("--replicas is required (the loads carry no num_replicas)")}
	}
	if !set["gpus"] && p.GPUs == 0 {
		return usageError{Err: fmt.Errorf("--gpus is required (the loads carry no num_gpus)")}
	}

	start := time.Now()
	pl, err := placement.Place(*policy, loads, p)
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	return placement.NewReport(*policy, loads, p, pl, elapsed).WriteJSON(stdout)
}
