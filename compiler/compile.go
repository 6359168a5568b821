// Package compiler is dic's front end and driver: it reads a model (config.json and the
// safetensors headers, never the weight bytes), lowers it to IR, runs the pass table
// and emits a plan.
package compiler

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"deepinfer/deploy"
	"deepinfer/ir"
	"deepinfer/kvlayout"
	"deepinfer/passes"
	"deepinfer/plan"
	"deepinfer/safetensors"
	"deepinfer/targets"
)

// Version names this compiler in the plans it writes.
const Version = "dic 0.1"

// Options configure one compilation.
type Options struct {
	// ModelDir is a model directory (config.json, optional *.safetensors). Empty means
	// the embedded default model.
	ModelDir string
	Target   string
	Verify   bool
	DumpDir  string
	Log      io.Writer
	// Spec is the deployment to plan for; nil plans both phases for one device.
	Spec *deploy.Spec
	// Replay overrides the SWA bounded-replay settings (passes.Config.Replay).
	Replay *passes.Replay
}

// Output is a compilation's result.
type Output struct {
	Config *ModelConfig
	Module *ir.Module
	Plan   *plan.Plan
	Passes []passes.Result
	// WeightsChecked is true when the checkpoint's headers were checked against the manifest.
	WeightsChecked bool
}

// Compile runs the whole pipeline.
func Compile(opts Options) (*Output, error) {
	if opts.Spec != nil {
		if opts.Target != "" && opts.Target != opts.Spec.Target {
			return nil, fmt.Errorf("--target %s contradicts the spec's target %s", opts.Target, opts.Spec.Target)
		}
		opts.Target = opts.Spec.Target
	}
	if opts.Target == "" {
		opts.Target = "cpu"
	}
	tgt, err := targets.Lookup(opts.Target)
	if err != nil {
		return nil, err
	}
	var cfg *ModelConfig
	if opts.ModelDir == "" {
		cfg = EmbeddedConfig()
	} else if cfg, err = LoadConfig(opts.ModelDir); err != nil {
		return nil, err
	}
	m, err := Lower(cfg)
	if err != nil {
		return nil, err
	}
	out := &Output{Config: cfg, Module: m}
	if opts.Verify {
		if err := ir.Verify(m); err != nil {
			return nil, fmt.Errorf("verifier after lowering: %w", err)
		}
	}
	if opts.ModelDir != "" {
		if err := storageFromCheckpoint(opts.ModelDir, m); err != nil {
			return nil, err
		}
	}
	kv := KVLayoutFor(m, cfg)
	out.Passes, err = passes.Run(m, &passes.Config{Target: tgt, Verify: opts.Verify, DumpDir: opts.DumpDir, Log: opts.Log, Spec: opts.Spec, Replay: opts.Replay, KV: &kv})
	if err != nil {
		return out, err // the module shows how far planning got (dic explain prints it)
	}
	out.Plan, err = Emit(m, cfg, tgt.Name(), opts.ModelDir == "")
	if err != nil {
		return nil, err
	}
	if opts.Spec != nil {
		out.Plan.Deployment = DeploymentOf(m, opts.Spec)
		if err := plan.Validate(out.Plan); err != nil {
			return nil, fmt.Errorf("compiler bug: emitted plan is invalid: %w", err)
		}
	}
	if opts.ModelDir != "" {
		if out.WeightsChecked, err = checkCheckpoint(opts.ModelDir, out.Plan); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// storageFromCheckpoint corrects the storage the lowering assumed for a weight when the
// checkpoint holds it in float32 instead of bf16 (V4.1's reference keeps the heads, the
// compressors' projections and DSpark's Markov and confidence heads in float32): the
// memory plan, the plan's manifest and the executors then agree with what is loaded.
func storageFromCheckpoint(dir string, m *ir.Module) error {
	_, errIdx := os.Stat(filepath.Join(dir, "model.safetensors.index.json"))
	_, errOne := os.Stat(filepath.Join(dir, "model.safetensors"))
	if errors.Is(errIdx, os.ErrNotExist) && errors.Is(errOne, os.ErrNotExist) {
		return nil
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return err
	}
	defer ck.Close()
	for _, w := range m.Weights {
		if w.Storage != "bf16" {
			continue
		}
		info, ok := ck.Info(w.Name)
		if !ok {
			info, ok = ck.Info(strings.TrimPrefix(w.Name, "model."))
		}
		if ok && info.DType == safetensors.F32 {
			w.Storage = "f32"
		}
	}
	return nil
}

// checkCheckpoint compares the manifest with the safetensors headers of dir, when the
// directory has weights at all: every weight must exist with the manifest's shape.
func checkCheckpoint(dir string, p *plan.Plan) (bool, error) {
	_, errIdx := os.Stat(filepath.Join(dir, "model.safetensors.index.json"))
	_, errOne := os.Stat(filepath.Join(dir, "model.safetensors"))
	if errors.Is(errIdx, os.ErrNotExist) && errors.Is(errOne, os.ErrNotExist) {
		return false, nil // a config-only directory: planning needs shapes only
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return false, err
	}
	defer ck.Close()
	for i := range p.Weights {
		if p.Weights[i].Init.Kind == plan.InitTokenMap {
			continue // derived from tokenizer.json at load time
		}
		if _, err := p.Weights[i].LocateStored(ck, dir); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Emit turns a lowered, planned module into a plan.
func Emit(m *ir.Module, cfg *ModelConfig, target string, embedded bool) (*plan.Plan, error) {
	p := &plan.Plan{ModelType: cfg.ModelType, ConfigHash: cfg.Hash, Target: target, Compiler: Version}
	p.Model = plan.Model{Vocab: cfg.VocabSize, Hidden: cfg.Hidden, BOS: cfg.BOS, EOS: cfg.EOS,
		MaxPositions: cfg.MaxPositions, MTPLayers: cfg.NumMTP}
	for _, l := range cfg.Layers {
		p.Model.Layers = append(p.Model.Layers, plan.Layer{Attn: l.Attn.String(), Ratio: l.CompressRatio, MLP: l.MLP.String()})
	}
	if cfg.V41 != nil {
		p.Model.Layers, p.Model.DSpark, p.Model.Vision = modelV41(cfg) // emit_v41.go
	}
	p.Source = plan.WeightSource{Kind: plan.SourceCheckpoint}
	if embedded {
		p.Source = plan.WeightSource{Kind: plan.SourceSeeded, Seed: EmbeddedSeed}
	}
	for _, w := range m.Weights {
		pw := plan.Weight{Name: w.Name, DType: w.Type.DType}
		for _, d := range w.Type.Shape {
			pw.Shape = append(pw.Shape, d.N)
		}
		if embedded {
			pw.Init = DefaultInit(w.Name, pw.Shape)
		}
		pw.Storage = w.Storage
		if w.Name == EngramTokenMap {
			pw.Init = plan.Init{Kind: plan.InitTokenMap}
		}
		p.Weights = append(p.Weights, pw)
	}
	p.KV = kvLayout(m, cfg)
	if cfg.V41 != nil {
		p.KV = kvLayoutV41(cfg)
	}
	for _, f := range m.Funcs {
		pr, err := emitFunc(f)
		if err != nil {
			return nil, fmt.Errorf("emit %s: %w", f.Name, err)
		}
		p.Programs = append(p.Programs, pr)
	}
	if err := plan.Validate(p); err != nil {
		return nil, fmt.Errorf("compiler bug: emitted plan is invalid: %w", err)
	}
	return p, nil
}

// kvLayout derives the per-sequence state from the stateful instructions of the first
// function (every phase touches the same state).
func kvLayout(m *ir.Module, cfg *ModelConfig) kvlayout.Layout {
	l := kvlayout.Layout{Layers: make([]kvlayout.LayerLayout, len(cfg.Layers))}
	for i := range l.Layers {
		l.Layers[i] = kvlayout.LayerLayout{Window: cfg.SlidingWindow, Dim: cfg.HeadDim}
	}
	for _, in := range m.Funcs[0].Body {
		if in.Op != "compress" {
			continue
		}
		layer, _ := in.Attrs.Int("layer")
		cache, _ := in.Attrs.Int("cache")
		ratio, _ := in.Attrs.Int("ratio")
		dim, _ := in.Attrs.Int("head_dim")
		ov, _ := in.Attrs.Bool("overlap")
		ll := &l.Layers[layer]
		for len(ll.Caches) <= int(cache) {
			ll.Caches = append(ll.Caches, kvlayout.CacheLayout{})
		}
		ll.Caches[cache] = kvlayout.CacheLayout{Ratio: int(ratio), Dim: int(dim), Overlap: ov}
	}
	return l
}

func emitFunc(f *ir.Func) (plan.Program, error) {
	pr := plan.Program{Phase: f.Name, Slots: f.Slots}
	param := map[*ir.Value]int{}
	for i, v := range f.Params {
		param[v] = i
		pr.Params = append(pr.Params, plan.Param{Name: v.Name, Type: v.Type})
	}
	slot := map[*ir.Value]int{}
	operand := func(v *ir.Value) (plan.Operand, error) {
		switch {
		case v.Weight:
			return plan.Operand{Kind: plan.OpWeight, Index: v.ID}, nil
		case v.Type.DType == ir.State:
			return plan.Operand{Kind: plan.OpNone}, nil
		}
		if i, ok := param[v]; ok {
			return plan.Operand{Kind: plan.OpParam, Index: i}, nil
		}
		if s, ok := slot[v]; ok {
			return plan.Operand{Kind: plan.OpSlot, Index: s}, nil
		}
		return plan.Operand{}, fmt.Errorf("%s has no buffer (did memplan run?)", v.Ref())
	}
	for _, in := range f.Body {
		kernel, _ := in.Attrs.Str("kernel")
		slots, ok := in.Attrs.Ints("slots")
		if kernel == "" || !ok {
			return pr, fmt.Errorf("%s is not lowered or not planned", in.Op)
		}
		pi := plan.Instr{Op: in.Op, Kernel: kernel, Attrs: in.Attrs.Clone()}
		delete(pi.Attrs, "kernel")
		delete(pi.Attrs, "slots")
		for _, a := range in.Args {
			o, err := operand(a)
			if err != nil {
				return pr, err
			}
			pi.Args = append(pi.Args, o)
			pi.ArgTypes = append(pi.ArgTypes, a.Type)
		}
		for j, r := range in.Results {
			if slots[j] >= 0 {
				slot[r] = int(slots[j])
			}
			o, err := operand(r)
			if err != nil {
				return pr, err
			}
			pi.Results = append(pi.Results, o)
			pi.ResultTypes = append(pi.ResultTypes, r.Type)
		}
		pr.Instrs = append(pr.Instrs, pi)
	}
	for _, r := range f.Returns {
		o, err := operand(r)
		if err != nil {
			return pr, err
		}
		pr.Returns = append(pr.Returns, o)
	}
	return pr, nil
}

// DeploymentOf collects what the planning passes recorded for each role (also when
// planning stopped early, for dic explain).
func DeploymentOf(m *ir.Module, s *deploy.Spec) *plan.Deployment {
	js, _ := json.Marshal(s)
	d := &plan.Deployment{Spec: string(js)}
	for _, name := range s.RoleNames() {
		if m.Func(name) == nil {
			continue
		}
		r := s.Role(name)
		pr := plan.Role{Name: name, DP: r.DP, EP: r.EP, CP: r.CP, TP: r.TP, MaxNumSeqs: r.MaxNumSeqs,
			MaxModelLen: r.MaxModelLen, MaxNumBatchedTokens: r.MaxNumBatchedTokens}
		for _, k := range passes.MemoryItems {
			if v, ok := m.Attrs.Int("mem." + name + "." + k); ok {
				pr.Memory = append(pr.Memory, plan.MemoryItem{Name: k, Bytes: v})
			}
		}
		pr.Placement, pr.Balancedness = passes.PlacementOf(m, name)
		d.Roles = append(d.Roles, pr)
	}
	return d
}
