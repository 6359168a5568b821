package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// IndexFileName is the index of a sharded checkpoint inside a model directory.
const IndexFileName = "model.safetensors.index.json"

// SingleFileName is the checkpoint file of an unsharded model directory.
const SingleFileName = "model.safetensors"

// File is one open safetensors file whose header has been parsed and
// validated; tensor data is read on demand.
type File struct {
	path    string
	f       *os.File
	tensors map[string]TensorInfo
	meta    map[string]string
}

// Open opens a safetensors file and reads and validates its header only.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	file, err := readHeader(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return file, nil
}

func readHeader(path string, f *os.File) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("%s: file is %d bytes, shorter than the 8-byte header length", path, size)
	}
	var lenBuf [8]byte
	if _, err := f.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("%s: reading header length: %v", path, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("%s: header length %d exceeds the %d-byte limit", path, n, MaxHeaderSize)
	}
	if n > uint64(size-8) {
		return nil, fmt.Errorf("%s: header length %d is larger than the rest of the file (%d bytes)", path, n, size-8)
	}
	header := make([]byte, n)
	if _, err := f.ReadAt(header, 8); err != nil {
		return nil, fmt.Errorf("%s: reading header: %v", path, err)
	}
	tensors, meta, err := ParseHeader(header, 8+int64(n), size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for name, t := range tensors {
		t.File = path
		tensors[name] = t
	}
	return &File{path: path, f: f, tensors: tensors, meta: meta}, nil
}

// Path returns the path the file was opened with.
func (f *File) Path() string { return f.path }

// Names returns the tensor names in sorted order.
func (f *File) Names() []string { return slices.Sorted(maps.Keys(f.tensors)) }

// Info returns the description of the named tensor (Shape is a copy).
func (f *File) Info(name string) (TensorInfo, bool) {
	t, ok := f.tensors[name]
	t.Shape = slices.Clone(t.Shape)
	return t, ok
}

// Metadata returns a copy of the header's __metadata__ object.
func (f *File) Metadata() map[string]string { return maps.Clone(f.meta) }

// ReadRaw reads exactly the bytes of the named tensor.
func (f *File) ReadRaw(name string) ([]byte, error) {
	t, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", f.path, name)
	}
	return f.read(t)
}

// read performs one ranged read; End-Begin was validated against the file
// size at open time, which bounds the allocation.
func (f *File) read(t TensorInfo) ([]byte, error) {
	buf := make([]byte, t.End-t.Begin)
	if _, err := f.f.ReadAt(buf, t.Begin); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%s: tensor %q: reading bytes [%d, %d): %v", f.path, t.Name, t.Begin, t.End, err)
	}
	return buf, nil
}

// Close closes the underlying file.
func (f *File) Close() error { return f.f.Close() }

// Checkpoint is a set of open safetensors files (one file or the shards of
// an index) seen as one name→tensor table.
type Checkpoint struct {
	name    string           // directory or file path, for error messages
	files   map[string]*File // by path
	tensors map[string]TensorInfo
	names   []string
	meta    map[string]string
}

// OpenFile opens a single safetensors file as a checkpoint.
func OpenFile(path string) (*Checkpoint, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	return &Checkpoint{
		name:    path,
		files:   map[string]*File{path: f},
		tensors: f.tensors,
		names:   f.Names(),
		meta:    f.meta,
	}, nil
}

// OpenDir opens a model directory: model.safetensors.index.json if present
// (every shard it references is opened once and each weight_map entry is
// checked against the shard's header), else model.safetensors.
func OpenDir(dir string) (*Checkpoint, error) {
	for _, name := range []string{IndexFileName, SingleFileName} {
		path := filepath.Join(dir, name)
		_, err := os.Stat(path)
		switch {
		case err == nil && name == IndexFileName:
			return openIndex(dir, path)
		case err == nil:
			return OpenFile(path)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s: no %s or %s in the model directory", dir, IndexFileName, SingleFileName)
}

func openIndex(dir, path string) (_ *Checkpoint, err error) {
	data, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	var index struct {
		Metadata  map[string]json.RawMessage `json:"metadata"`
		WeightMap map[string]string          `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(index.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: weight_map is missing or empty", path)
	}
	names := slices.Sorted(maps.Keys(index.WeightMap))
	shardPath := make(map[string]string, len(names)) // tensor -> shard path
	for _, name := range names {
		shard := index.WeightMap[name]
		if !filepath.IsLocal(shard) {
			return nil, fmt.Errorf("%s: weight_map[%q] = %q escapes the model directory", path, name, shard)
		}
		shardPath[name] = filepath.Join(dir, shard)
	}
	c := &Checkpoint{name: dir, files: map[string]*File{}, tensors: make(map[string]TensorInfo, len(names)), names: names}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for _, sp := range slices.Sorted(maps.Values(shardPath)) {
		if c.files[sp] != nil {
			continue
		}
		f, err := Open(sp)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		c.files[sp] = f
	}
	for _, name := range names {
		t, ok := c.files[shardPath[name]].tensors[name]
		if !ok {
			return nil, fmt.Errorf("%s: weight_map[%q] = %q, but that shard has no tensor %q", path, name, index.WeightMap[name], name)
		}
		c.tensors[name] = t
	}
	c.meta = make(map[string]string, len(index.Metadata))
	for k, v := range index.Metadata {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v) // numbers such as total_size keep their JSON text
		}
		c.meta[k] = s
	}
	return c, nil
}

// readSmall reads a whole file of at most MaxHeaderSize bytes.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxHeaderSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(data) > MaxHeaderSize {
		return nil, fmt.Errorf("%s: larger than the %d-byte limit", path, MaxHeaderSize)
	}
	return data, nil
}

// Close closes every file of the checkpoint.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// Info returns the description of the named tensor (Shape is a copy).
func (c *Checkpoint) Info(name string) (TensorInfo, bool) {
	t, ok := c.tensors[name]
	t.Shape = slices.Clone(t.Shape)
	return t, ok
}

// Names returns all tensor names in sorted order.
func (c *Checkpoint) Names() []string { return slices.Clone(c.names) }

// Metadata returns the file's __metadata__, or for a sharded checkpoint the
// index's "metadata" object (non-string values as their JSON text).
func (c *Checkpoint) Metadata() map[string]string { return maps.Clone(c.meta) }

// ReadRaw reads exactly the bytes of the named tensor with one ranged read.
func (c *Checkpoint) ReadRaw(name string) ([]byte, error) {
	_, raw, err := c.readRaw(name)
	return raw, err
}

func (c *Checkpoint) readRaw(name string) (TensorInfo, []byte, error) {
	t, ok := c.tensors[name]
	if !ok {
		return t, nil, fmt.Errorf("%s: no tensor %q", c.name, name)
	}
	raw, err := c.files[t.File].read(t)
	return t, raw, err
}
