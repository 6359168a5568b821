package main

import (
	"fmt"
	"os"

	"deepinfer/compiler"
	"deepinfer/vm"
)

// compileAndLoad compiles a model directory in process and loads its weights.
func compileAndLoad(dir, target string) (*vm.Machine, error) {
	out, err := compiler.Compile(compiler.Options{ModelDir: dir, Target: target})
	if err != nil {
		return nil, err
	}
	w, err := vm.LoadWeights(out.Plan, dir)
	if err != nil {
		return nil, err
	}
	m, err := vm.Load(out.Plan, w)
	if err != nil {
		return nil, err
	}
	if d := m.Describe(); d != "" {
		fmt.Fprintf(os.Stderr, "divm: %s\n", d)
	}
	return m, nil
}
