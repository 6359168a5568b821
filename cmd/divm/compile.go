package main

import (
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
	return vm.Load(out.Plan, w)
}
