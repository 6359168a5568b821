package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Tensor is one tensor to be written: raw little-endian Data of DType.
type Tensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// F32Tensor builds an F32 tensor from v.
func F32Tensor(name string, shape []int64, v []float32) Tensor {
	data := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
	}
	return Tensor{Name: name, DType: F32, Shape: shape, Data: data}
}

// I64Tensor builds an I64 tensor from v.
func I64Tensor(name string, shape []int64, v []int64) Tensor {
	data := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(data[8*i:], uint64(x))
	}
	return Tensor{Name: name, DType: I64, Shape: shape, Data: data}
}

// I32Tensor builds an I32 tensor from v.
func I32Tensor(name string, shape []int64, v []int32) Tensor {
	data := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(data[4*i:], uint32(x))
	}
	return Tensor{Name: name, DType: I32, Shape: shape, Data: data}
}

// Write writes tensors (any known dtype; F32Tensor, I64Tensor and I32Tensor
// build the usual ones) and optional metadata as a safetensors file. Data is
// laid out in sorted name order and the header is padded with spaces to a
// multiple of 8 bytes. The file is written to a temporary file in the same
// directory and renamed over path, so readers never see a partial file.
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	type entry struct {
		DType   DType    `json:"dtype"`
		Shape   []int64  `json:"shape"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	sorted := slices.Clone(tensors)
	slices.SortFunc(sorted, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	header := make(map[string]any, len(sorted)+1)
	if len(metadata) > 0 {
		header[metadataKey] = metadata
	}
	var off int64
	for i, t := range sorted {
		switch {
		case t.Name == "" || t.Name == metadataKey:
			return fmt.Errorf("%s: invalid tensor name %q", path, t.Name)
		case i > 0 && sorted[i-1].Name == t.Name:
			return fmt.Errorf("%s: duplicate tensor %q", path, t.Name)
		case t.DType.Size() == 0:
			return fmt.Errorf("%s: tensor %q: unknown dtype %q", path, t.Name, string(t.DType))
		}
		_, nbytes, err := byteSize(t.Shape, t.DType)
		if err != nil {
			return fmt.Errorf("%s: tensor %q: %v", path, t.Name, err)
		}
		if int64(len(t.Data)) != nbytes {
			return fmt.Errorf("%s: tensor %q: %d data bytes, but shape %v of %s needs %d", path, t.Name, len(t.Data), t.Shape, t.DType, nbytes)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{} // a scalar is [], not null
		}
		header[t.Name] = entry{t.DType, shape, [2]int64{off, off + nbytes}}
		off += nbytes
	}
	js, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	js = append(js, strings.Repeat(" ", (8-len(js)%8)%8)...)
	return writeAtomic(path, func(w *bufio.Writer) error {
		if err := binary.Write(w, binary.LittleEndian, uint64(len(js))); err != nil {
			return err
		}
		if _, err := w.Write(js); err != nil {
			return err
		}
		for _, t := range sorted {
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeAtomic writes a temporary file next to path and renames it into place.
func writeAtomic(path string, fill func(*bufio.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("%s: %v", path, err)
		}
	}()
	w := bufio.NewWriter(tmp)
	if err = fill(w); err != nil {
		return err
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
