package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"deepinfer/compiler"
	"deepinfer/deploy"
	"deepinfer/passes"
)

// explainCmd plans a spec and prints the reasoning: per role, what each rank holds and
// what is left for KV, whether or not it fits.
func explainCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	model := fs.String("model", os.Getenv("DEEPINFER_HF_MODEL_DIR"), "model directory (default: the embedded default model)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{Err: fmt.Errorf("usage: dic explain SPEC [--model DIR]")}
	}
	spec, err := deploy.Load(pos[0])
	if err != nil {
		return err
	}
	out, cerr := compiler.Compile(compiler.Options{ModelDir: *model, Spec: spec})
	if out == nil || out.Module == nil {
		return cerr
	}
	name := "the embedded default model"
	if *model != "" {
		name = *model
	}
	fmt.Fprintf(w, "%s on %s (%d nodes × %d devices, scale-up domain %d):\n", name, spec.Target,
		spec.Topology.Nodes, spec.Topology.DevicesPerNode, spec.Topology.ScaleUpDomain)
	d := compiler.DeploymentOf(out.Module, spec)
	for i := range d.Roles {
		writeRole(w, &d.Roles[i])
	}
	var inf *passes.InfeasibleError
	switch {
	case errors.As(cerr, &inf):
		fmt.Fprintf(w, "verdict: does not fit. %v\n", cerr)
		return fmt.Errorf("%s does not fit", pos[0])
	case cerr != nil:
		return cerr
	}
	fmt.Fprintln(w, "verdict: fits")
	return nil
}
