package calib

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/synth"
	"deepinfer/vm/stepbench"
)

// Measured is one divm bench report and the plan it timed: the synthetic checkpoint's
// config (a model directory's config.json, cut to Layers as dic synth cuts it) compiled
// for the h200 target, which needs the config only.
type Measured struct {
	File     string // the bench report (JSON)
	Config   string // model directory holding config.json
	Layers   string // the layers dic synth kept, e.g. 4-5
	Numerics string // fast or exact
}

// Run8 are the reports of run 8 (testdata/run8, NVIDIA H200, 2026-12-02, CUDA graphs
// on), relative to the repository root: the shipped calibrations are fitted on them.
var Run8 = []Measured{
	{"sim/calib/testdata/run8/v4.fast.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast"},
	{"sim/calib/testdata/run8/v4.fast.long.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast"},
	{"sim/calib/testdata/run8/v41.fast.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast"},
	{"sim/calib/testdata/run8/v41.fast.long.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "fast"},
	{"sim/calib/testdata/run8/v4.exact.bench.json", "testdata/deepseek-v4-flash", "4-5", "exact"},
	{"sim/calib/testdata/run8/v41.exact.bench.json", "testdata/deepseek-v4.1-flash", "20-23", "exact"},
}

// Run8NoGraphs is run 8's graphs-off report (V4 fast, context 512, every kernel
// launched one by one): step times only, no class times; compared, not fitted.
var Run8NoGraphs = Measured{"sim/calib/testdata/run8/v4.fast.nographs.bench.json", "testdata/deepseek-v4-flash", "4-5", "fast"}

// SynthPlan compiles the plan of a synthetic checkpoint of the model in configDir cut
// to layers, for target, from the cut config alone (no weights).
func SynthPlan(configDir, layers, target string) (*plan.Plan, error) {
	ls, err := synth.ParseLayers(layers)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "calib-plan-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if _, err := synth.Write(configDir, dir, synth.Options{Layers: ls, ConfigOnly: true}); err != nil {
		return nil, err
	}
	out, err := compiler.Compile(compiler.Options{ModelDir: dir, Target: target})
	if err != nil {
		return nil, fmt.Errorf("%s layers %s: %w", configDir, layers, err)
	}
	return out.Plan, nil
}

// Loaded is a Measured report read, with its plan.
type Loaded struct {
	Measured
	Report *stepbench.Report
	Plan   *plan.Plan
}

// Load reads the reports and compiles their plans (for h200), relative to root; plans
// of the same config and layers are compiled once.
func Load(root string, ms []Measured) ([]Loaded, error) {
	plans := map[string]*plan.Plan{}
	var out []Loaded
	for _, m := range ms {
		r, err := ReadBench(under(root, m.File))
		if err != nil {
			return nil, err
		}
		if m.Numerics == "" {
			if m.Numerics = Numerics(r); m.Numerics == "" {
				return nil, fmt.Errorf("%s: the report does not say its numerics mode", m.File)
			}
		}
		if got := Numerics(r); got != "" && got != m.Numerics {
			return nil, fmt.Errorf("%s: measured in %s numerics, listed as %s", m.File, got, m.Numerics)
		}
		key := m.Config + "@" + m.Layers
		p := plans[key]
		if p == nil {
			if p, err = SynthPlan(under(root, m.Config), m.Layers, "h200"); err != nil {
				return nil, err
			}
			plans[key] = p
		}
		out = append(out, Loaded{Measured: m, Report: r, Plan: p})
	}
	return out, nil
}

func under(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

// FromDir lists the reports of a scripts/gpu-bench.sh output directory: v4.*.bench.json
// timed testdata/deepseek-v4-flash cut to layersV4, v41.*.bench.json
// testdata/deepseek-v4.1-flash cut to layersV41; the numerics mode is read from each
// report. The graphs-off comparison reports (*.nographs.bench.json, no class times) are
// left out: the calibrations describe steps run as captured graphs.
func FromDir(dir, layersV4, layersV41 string) ([]Measured, error) {
	var out []Measured
	for _, c := range []struct{ glob, config, layers string }{
		{"v4.*.bench.json", "testdata/deepseek-v4-flash", layersV4},
		{"v41.*.bench.json", "testdata/deepseek-v4.1-flash", layersV41},
	} {
		files, err := filepath.Glob(filepath.Join(dir, c.glob))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if strings.HasSuffix(f, ".nographs.bench.json") {
				continue
			}
			if abs, err := filepath.Abs(f); err == nil {
				f = abs
			}
			out = append(out, Measured{File: f, Config: c.config, Layers: c.layers})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no v4.*.bench.json or v41.*.bench.json", dir)
	}
	return out, nil
}
