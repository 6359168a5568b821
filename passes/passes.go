// Package passes is the compiler's pipeline: one ordered table of passes over ir.Module.
//
// A pass is func(*ir.Module, *Config) (changed bool, err error). The manager runs the
// table in order, times each pass, optionally verifies the module after each one and
// dumps its text form, and turns a panic inside a pass (a compiler bug) into an error
// that names the pass. Targets contribute their kernels through targets.Target; no
// pass switches on a target's name.
package passes

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"deepinfer/deploy"
	"deepinfer/ir"
	"deepinfer/kvlayout"
	"deepinfer/targets"
)

// Config is what passes may read.
type Config struct {
	Target targets.Target
	// Verify runs ir.Verify after every pass.
	Verify bool
	// DumpDir, when set, receives the module's text after each pass (NN-name.ir).
	DumpDir string
	// Log, when set, receives one line per pass with its time.
	Log io.Writer
	// Spec is the deployment; nil compiles both phases for one device.
	Spec *deploy.Spec
	// KV is the model's per-sequence state layout, which the memory pass sizes; nil
	// sizes it from the IR's stateful ops.
	KV *kvlayout.Layout
	// Replay, when set, configures the SWA bounded-replay pass (swa_replay.go) and
	// overrides Spec.SWAReplay and the environment.
	Replay *Replay
}

// Pass is one table entry.
type Pass struct {
	Name string
	Fn   func(*ir.Module, *Config) (bool, error)
	Doc  string
}

// Table is the pipeline, in order.
var Table = []Pass{
	{"shard", shard, "rewrite each phase for its deployment role: expert-parallel dispatch/combine, context-parallel gathers"},
	{"place", placeExperts, "place each MoE layer's experts (and redundant replicas) on the expert-parallel ranks"},
	{"dce", deadCode, "remove pure instructions whose results are never used"},
	{"swa_replay", swaReplay, "SWA bounded replay (YOCO prefill truncation): prefill runs the layers after the last KV source on each sequence's last keep rows"},
	{"share_quant", shareQuant, "place qlinears that quantize one activation the same way next to each other, the later ones marked quant_shared (a target quantizes it once)"},
	{"fuse", fuse, "group single-use chains the target runs as one kernel (rules from the target)"},
	{"lower", lowerToKernels, "pick the target kernel of every instruction, per phase"},
	{"memplan", arenaPlan, "assign every value to an arena slot by liveness"},
	{"memory", memoryPlan, "prove each role fits its devices: weights, arena, workspaces, KV capacity"},
}

// Result records what one pass did.
type Result struct {
	Name    string
	Changed bool
	Time    time.Duration
}

// Run runs the table over m.
func Run(m *ir.Module, cfg *Config) (res []Result, err error) {
	var dumps []dumped
	if cfg.DumpDir != "" {
		if err := os.MkdirAll(cfg.DumpDir, 0o755); err != nil {
			return nil, err
		}
		d, err := dump(cfg.DumpDir, 0, "input", m)
		if err != nil {
			return nil, err
		}
		dumps = append(dumps, d)
		defer func() {
			if herr := writeHTML(cfg.DumpDir, dumps); err == nil {
				err = herr
			}
		}()
	}
	var out []Result
	for i, p := range Table {
		start := time.Now()
		changed, err := runOne(p, m, cfg)
		r := Result{Name: p.Name, Changed: changed, Time: time.Since(start)}
		out = append(out, r)
		if err != nil {
			return out, err
		}
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "pass %-8s %10s  changed=%v\n", p.Name, r.Time.Round(time.Microsecond), changed)
		}
		if cfg.Verify {
			if err := ir.Verify(m); err != nil {
				return out, fmt.Errorf("verifier after pass %s: %w", p.Name, err)
			}
		}
		if cfg.DumpDir != "" {
			d, err := dump(cfg.DumpDir, i+1, p.Name, m)
			if err != nil {
				return out, err
			}
			dumps = append(dumps, d)
		}
	}
	return out, nil
}

// runOne calls a pass and turns a panic into an error naming the pass.
func runOne(p Pass, m *ir.Module, cfg *Config) (changed bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("compiler bug in pass %s: %v\n%s", p.Name, r, debug.Stack())
		}
	}()
	changed, err = p.Fn(m, cfg)
	if err != nil {
		err = fmt.Errorf("pass %s: %w", p.Name, err)
	}
	return changed, err
}

type dumped struct{ name, text string }

func dump(dir string, i int, name string, m *ir.Module) (dumped, error) {
	d := dumped{name: fmt.Sprintf("%02d-%s", i, name), text: m.String()}
	return d, os.WriteFile(filepath.Join(dir, d.name+".ir"), []byte(d.text), 0o644)
}
