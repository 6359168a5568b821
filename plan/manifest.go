package plan

import (
	"fmt"
	"path/filepath"
	"slices"
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
