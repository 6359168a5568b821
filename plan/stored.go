package plan

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"deepinfer/safetensors"
)

// LocateStored is Locate for a weight whose checkpoint format is its Storage: the
// tensor (also under the released spelling without "model.") with the shape and dtype
// the format stores, and for the FP8/FP4 formats the scale tensor beside it
// (prefix.scale for DeepSeek's prefix.weight, or name_scale_inv). It returns the
// tensors, value first.
func (w *Weight) LocateStored(ck *safetensors.Checkpoint, dir string) ([]safetensors.TensorInfo, error) {
	if w.Storage == "" || w.Storage == "f32" || w.Storage == "bf16" || w.Storage == "i32" || w.Storage == "i64" {
		info, err := w.Locate(ck, dir)
		return []safetensors.TensorInfo{info}, err
	}
	info, ok := ck.Info(w.Name)
	if !ok {
		if short, found := strings.CutPrefix(w.Name, "model."); found {
			info, ok = ck.Info(short)
		}
	}
	if !ok {
		return nil, fmt.Errorf("%s: missing tensor %q", dir, w.Name)
	}
	file := filepath.Base(info.File)
	if len(w.Shape) != 2 {
		return nil, fmt.Errorf("%s: tensor %q: format %s needs a matrix, the manifest has %v", file, info.Name, w.Storage, w.Shape)
	}
	rows, cols := w.Shape[0], w.Shape[1]
	var wantShape, wantScale []int64
	var dtypes []safetensors.DType
	switch w.Storage {
	case "fp4_g32_ue8m0":
		wantShape, wantScale = []int64{rows, cols / 2}, []int64{rows, (cols + 31) / 32}
		dtypes = []safetensors.DType{safetensors.I8, safetensors.U8}
	case "fp8_b32_ue8m0":
		wantShape, wantScale = w.Shape, []int64{(rows + 31) / 32, (cols + 31) / 32}
	case "fp8_g32_ue8m0":
		wantShape, wantScale = w.Shape, []int64{rows, (cols + 31) / 32}
	case "fp8_b128_ue8m0", "fp8_b128_f32":
		wantShape, wantScale = w.Shape, []int64{(rows + 127) / 128, (cols + 127) / 128}
	default:
		return nil, fmt.Errorf("tensor %q: unknown storage format %q", info.Name, w.Storage)
	}
	if dtypes == nil {
		dtypes = []safetensors.DType{safetensors.F8_E4M3}
	}
	if !slices.Equal(info.Shape, wantShape) || !slices.Contains(dtypes, info.DType) {
		return nil, fmt.Errorf("%s: tensor %q is %s%v; format %s of a %v weight stores %s%v", file, info.Name, info.DType, info.Shape,
			w.Storage, w.Shape, dtypes[0], wantShape)
	}
	var scale safetensors.TensorInfo
	prefix, isWeight := strings.CutSuffix(info.Name, ".weight")
	if s, found := ck.Info(info.Name + "_scale_inv"); found {
		scale, ok = s, true
	} else if isWeight {
		scale, ok = ck.Info(prefix + ".scale")
	} else {
		ok = false
	}
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q (%s) has no scale tensor", file, info.Name, w.Storage)
	}
	if !slices.Equal(scale.Shape, wantScale) {
		return nil, fmt.Errorf("%s: scale %q has shape %v, format %s needs %v", file, scale.Name, scale.Shape, w.Storage, wantScale)
	}
	return []safetensors.TensorInfo{info, scale}, nil
}
