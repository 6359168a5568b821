package vm

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"deepinfer/ir"
	"deepinfer/plan"
	"deepinfer/safetensors"
	"deepinfer/targets"
)

// Weights are the manifest's tensors in manifest order, each in its checkpoint storage
// format (FP8 and FP4 stay packed; the executor decides what it keeps).
type Weights []targets.Weight

// LoadWeights produces the weights a plan needs: read from the checkpoint in modelDir
// (checking every tensor against the manifest), or generated from the plan's seed.
func LoadWeights(p *plan.Plan, modelDir string) (Weights, error) {
	switch p.Source.Kind {
	case plan.SourceSeeded:
		if modelDir != "" {
			return nil, fmt.Errorf("this plan is the embedded default model with seeded weights; compile a plan from %s instead", modelDir)
		}
		return seededWeights(p), nil
	case plan.SourceCheckpoint:
		if modelDir == "" {
			return nil, fmt.Errorf("this plan reads its weights from a checkpoint: pass --model DIR (or set DEEPINFER_HF_MODEL_DIR)")
		}
		return checkpointWeights(p, modelDir)
	}
	return nil, fmt.Errorf("unknown weight source %q", p.Source.Kind)
}

func shapeInts(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

func checkpointWeights(p *plan.Plan, dir string) (Weights, error) {
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	ws := make(Weights, len(p.Weights))
	for i := range p.Weights {
		w := &p.Weights[i]
		if ws[i], err = readWeight(p, w, ck, dir); err != nil {
			return nil, err
		}
	}
	return ws, nil
}

// readWeight reads one manifest weight: FP8 (32×32 or 128×128 blocks or 32-value groups
// with UE8M0 scales) and FP4 weights as their packed bytes, bf16 tensors as their bytes,
// and the rest widened to the runtime dtype (V4's FP8 with float block scales is
// dequantized: its storage is not one an executor keeps).
func readWeight(p *plan.Plan, w *plan.Weight, ck *safetensors.Checkpoint, dir string) (targets.Weight, error) {
	t := targets.Weight{Name: w.Name, Storage: w.Storage, Shape: shapeInts(w.Shape)}
	if w.Init.Kind == plan.InitTokenMap {
		m, err := EngramTokenMap(p, dir)
		t.I32, t.Storage = m, "i32"
		return t, err
	}
	switch w.Storage {
	case "fp4_g32_ue8m0", "fp8_b32_ue8m0", "fp8_g32_ue8m0":
		return packedWeight(t, w, ck, dir) // v41_weights.go
	case "fp8_b128_ue8m0":
		// kept packed when its scales are UE8M0 bytes; float scales are widened below
		if infos, err := w.LocateStored(ck, dir); err == nil && (infos[1].DType == safetensors.F8_E8M0 || infos[1].DType == safetensors.U8) {
			return packedWeight(t, w, ck, dir)
		}
	}
	info, err := w.Locate(ck, dir)
	if err != nil {
		return t, err
	}
	switch w.DType {
	case ir.F32:
		if info.DType == safetensors.BF16 {
			t.Storage = "bf16"
			t.Codes, err = ck.ReadRaw(info.Name)
			return t, err
		}
		t.Storage = "f32"
		t.F32, _, err = ck.ReadFloat32(info.Name, safetensors.ReadOptions{})
	case ir.I32:
		t.Storage = "i32"
		var v []int64
		v, _, err = ck.ReadInt64(info.Name)
		if err == nil {
			t.I32 = make([]int32, len(v))
			for j, x := range v {
				if x < math.MinInt32 || x > math.MaxInt32 {
					return t, fmt.Errorf("tensor %q: value %d does not fit int32", info.Name, x)
				}
				t.I32[j] = int32(x)
			}
		}
	}
	return t, err
}

// seededWeights generates each weight from a stream keyed by the plan seed and the
// weight's name, so a weight's values do not depend on the manifest's order.
func seededWeights(p *plan.Plan) Weights {
	ws := make(Weights, len(p.Weights))
	for i := range p.Weights {
		w := &p.Weights[i]
		h := fnv.New64a()
		h.Write([]byte(w.Name))
		rng := rand.New(rand.NewPCG(p.Source.Seed, h.Sum64()))
		n := int(w.Elems())
		t := targets.Weight{Name: w.Name, Storage: "f32", Shape: shapeInts(w.Shape)}
		switch w.Init.Kind {
		case "expert_table":
			// rows of distinct experts, as a hash router's tid2eid table holds
			t.Storage = "i32"
			t.I32 = make([]int32, n)
			k := t.Shape[len(t.Shape)-1]
			experts := expertCount(p, w.Name)
			for r := 0; r < n/k; r++ {
				perm := rng.Perm(experts)
				for j := 0; j < k; j++ {
					t.I32[r*k+j] = int32(perm[j%experts])
				}
			}
		case "const":
			t.F32 = make([]float32, n)
			for j := range t.F32 {
				t.F32[j] = float32(w.Init.Mean)
			}
		default:
			t.F32 = make([]float32, n)
			for j := range t.F32 {
				t.F32[j] = float32(w.Init.Mean + w.Init.Std*rng.NormFloat64())
			}
		}
		ws[i] = t
	}
	return ws
}

// expertCount reads the routed expert count from the gate weight next to a tid2eid table.
func expertCount(p *plan.Plan, tableName string) int {
	gate := tableName[:len(tableName)-len("tid2eid")] + "weight"
	for i := range p.Weights {
		if p.Weights[i].Name == gate {
			return int(p.Weights[i].Shape[0])
		}
	}
	return 1
}
