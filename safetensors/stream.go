package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Spec is a tensor to be written by WriteStream: its name, dtype and shape; the data
// comes from the generator.
type Spec struct {
	Name  string
	DType DType
	Shape []int64
}

// WriteStream writes a safetensors file whose tensors are too large to hold at once:
// gen(i, dst) fills dst (exactly the byte size of specs[i]) with the little-endian
// data of specs[i]. Up to workers tensors are generated concurrently (each into its
// own buffer) and written in sorted name order as they complete, so memory holds at
// most about workers+1 tensors. The layout and header are Write's, the file is
// written atomically, and the same specs and generator give the same bytes.
func WriteStream(path string, specs []Spec, metadata map[string]string, workers int, gen func(i int, dst []byte) error) error {
	order := make([]int, len(specs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(specs[a].Name, specs[b].Name) })
	type entry struct {
		DType   DType    `json:"dtype"`
		Shape   []int64  `json:"shape"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	header := make(map[string]any, len(specs)+1)
	if len(metadata) > 0 {
		header[metadataKey] = metadata
	}
	sizes := make([]int64, len(specs))
	var off int64
	for k, i := range order {
		t := specs[i]
		switch {
		case t.Name == "" || t.Name == metadataKey:
			return fmt.Errorf("%s: invalid tensor name %q", path, t.Name)
		case k > 0 && specs[order[k-1]].Name == t.Name:
			return fmt.Errorf("%s: duplicate tensor %q", path, t.Name)
		case t.DType.Size() == 0:
			return fmt.Errorf("%s: tensor %q: unknown dtype %q", path, t.Name, string(t.DType))
		}
		_, nbytes, err := byteSize(t.Shape, t.DType)
		if err != nil {
			return fmt.Errorf("%s: tensor %q: %v", path, t.Name, err)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		header[t.Name] = entry{t.DType, shape, [2]int64{off, off + nbytes}}
		sizes[i] = nbytes
		off += nbytes
	}
	js, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	js = append(js, strings.Repeat(" ", (8-len(js)%8)%8)...)
	workers = max(workers, 1)
	return writeAtomic(path, func(w *bufio.Writer) error {
		if err := binary.Write(w, binary.LittleEndian, uint64(len(js))); err != nil {
			return err
		}
		if _, err := w.Write(js); err != nil {
			return err
		}
		type result struct {
			data []byte
			err  error
		}
		// one channel per tensor in write order; a semaphore bounds the buffers alive
		done := make([]chan result, len(order))
		for k := range done {
			done[k] = make(chan result, 1)
		}
		sem := make(chan struct{}, workers)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for k, i := range order {
				select {
				case sem <- struct{}{}:
				case <-stop:
					return
				}
				go func(k, i int) {
					buf := make([]byte, sizes[i])
					err := gen(i, buf)
					done[k] <- result{buf, err}
				}(k, i)
			}
		}()
		for k, i := range order {
			r := <-done[k]
			<-sem
			if r.err != nil {
				return fmt.Errorf("tensor %q: %v", specs[i].Name, r.err)
			}
			if _, err := w.Write(r.data); err != nil {
				return err
			}
		}
		return nil
	})
}
