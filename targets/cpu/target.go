// Package cpu is the executing target: Go kernels in float32 that compute every IR op.
//
// It is the reference executor for tests (matched against transformers' float64
// logits) and runs the embedded default model. Dense products go through gonum's
// blas32 GEMM; kernels that loop over sequences, heads or experts split the work over
// all cores. Sums whose order would otherwise depend on scheduling are reduced in a
// fixed order, so a sequence's numbers do not depend on what else is in the batch.
package cpu

import (
	"fmt"

	"deepinfer/ir"
	"deepinfer/targets"
)

// Target is the cpu target.
type Target struct{}

func init() { targets.Register(Target{}) }

// Name implements targets.Target.
func (Target) Name() string { return "cpu" }

// Mode implements targets.Target.
func (Target) Mode() targets.Mode { return targets.Executed }

// Hardware implements targets.Target: the machine's cores, no published peak.
func (Target) Hardware() targets.Hardware {
	return targets.Hardware{Device: "host CPU (float32 Go kernels)", Source: "this machine", MeasuredOnHand: true,
		NumericsEmulate: "native float32", ActivationBytes: 4}
}

type factory func(args, results []ir.Type, a ir.Attrs) (Kernel, error)

// kernels maps kernel names to their factories. Decode variants assume one new
// token per sequence.
var kernels = map[string]factory{
	"cpu.embed":                   newEmbed,
	"cpu.hc_init":                 newHCInit,
	"cpu.hc_mix":                  newHCMixAny, // v41_mhc.go: V4.1 numerics by attribute
	"cpu.hc_collapse":             newHCCollapse,
	"cpu.hc_expand":               newHCExpandAny,
	"cpu.hc_head":                 newHCHead,
	"cpu.rmsnorm":                 newRMSNormAny,
	"cpu.linear":                  newLinear,
	"cpu.grouped_linear":          newGroupedLinear,
	"cpu.rope":                    newRope,
	"cpu.compress":                newCompress,
	"cpu.index_topk":              newIndexTopK,
	"cpu.window_attention":        newAttention(false, false),
	"cpu.window_attention.decode": newAttention(false, true),
	"cpu.sparse_attention":        newAttention(true, false),
	"cpu.sparse_attention.decode": newAttention(true, true),
	"cpu.moe_route":               newMoERoute,
	"cpu.moe_experts":             newMoEExpertsAny, // v41_numerics.go: V4.1 numerics by attribute
	"cpu.swiglu":                  newSwiGLU,
	"cpu.add":                     newAdd,
	"cpu.lm_head":                 newLMHead,
	"cpu.moe_dispatch":            newSingleRank,
	"cpu.moe_combine":             newSingleRank,
	"cpu.cp_gather":               newSingleRank,
	// DeepSeek-V4.1 (v41_*.go)
	"cpu.fake_quant":           newFakeQuant,
	"cpu.qlinear":              newQLinear,
	"cpu.hc_select":            newHCSelect,
	"cpu.hc_mean":              newHCMean,
	"cpu.concat":               newConcat,
	"cpu.tail_rows":            newTailRows,
	"cpu.tail_index":           newTailIndex,
	"cpu.engram_hash":          newEngramHash,
	"cpu.engram_lookup":        newEngramLookup,
	"cpu.engram_mix":           newEngramMix,
	"cpu.csa_compress":         newCSACompress,
	"cpu.csa_index":            newCSAIndex(false),
	"cpu.csa_index_candidates": newCSAIndex(true),
	"cpu.csa_attention":        newCSAAttention,
	"cpu.dspark_push":          newDSparkPush,
	"cpu.dspark_attention":     newDSparkAttention,
	"cpu.dspark_head":          newDSparkHead,
	"cpu.sample":               newSample,
}

// Kernel implements targets.Target.
func (Target) Kernel(op, phase string) (string, bool) {
	name := "cpu." + op
	if phase == "decode" {
		if _, ok := kernels[name+".decode"]; ok {
			return name + ".decode", true
		}
	}
	_, ok := kernels[name]
	return name, ok
}

// Prepare implements targets.Executor.
func (Target) Prepare(kernel string, args, results []ir.Type, a ir.Attrs) (Kernel, error) {
	f, ok := kernels[kernel]
	if !ok {
		return nil, fmt.Errorf("cpu: unknown kernel %q", kernel)
	}
	return f(args, results, a)
}

func attrInt(a ir.Attrs, k string) int       { v, _ := a.Int(k); return int(v) }
func attrFloat(a ir.Attrs, k string) float64 { v, _ := a.Float(k); return v }
func attrBool(a ir.Attrs, k string) bool     { v, _ := a.Bool(k); return v }
