package plan

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"deepinfer/safetensors"
)

// Locate finds a manifest weight in a checkpoint — also under the released checkpoints'
// spelling without the "model." prefix — and checks its shape. Errors name the file
// and the tensor.
func (w *Weight) Locate(ck *safetensors.Checkpoint, dir string) (safetensors.TensorInfo, error) {
	info, ok := ck.Info(w.Name)
	if !ok {
		if short, found := strings.CutPrefix(w.Name, "model."); found {
			info, ok = ck.Info(short)
		}
	}
	if !ok {
		return info, fmt.Errorf("%s: missing tensor %q", dir, w.Name)
	}
	if !slices.Equal(info.Shape, w.Shape) {
		return info, fmt.Errorf("%s: tensor %q has shape %v, the model config needs %v", filepath.Base(info.File), info.Name, info.Shape, w.Shape)
	}
	return info, nil
}

// LayerOf is the layer index in a weight name such as "model.layers.7.ffn…", the key
// of a role's expert placement; -1 for weights outside the numbered layers (the
// DSpark stages' "mtp.*").
func LayerOf(name string) int {
	i := strings.Index(name, "layers.")
	if i < 0 {
		return -1
	}
	rest := name[i+len("layers."):]
	if j := strings.IndexByte(rest, '.'); j >= 0 {
		rest = rest[:j]
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return -1
	}
	return n
}
