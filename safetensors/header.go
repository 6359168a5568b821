// Package safetensors reads HuggingFace safetensors checkpoints lazily and
// writes small safetensors files.
//
// Design notes:
//
//   - Opening is cheap. Open reads the 8-byte length prefix and the JSON
//     header with ReadAt and nothing else; weight bytes stay on disk until a
//     tensor is asked for. A model compiler can list the names, dtypes and
//     shapes of a multi-gigabyte checkpoint without touching its data.
//   - The header is untrusted input. ParseHeader is a pure function that
//     checks everything later reads rely on: known dtypes, non-negative
//     shapes whose element and byte counts fit in int64, offsets inside the
//     data section, byte lengths equal to elements × dtype size, and no two
//     tensors overlapping. A read then allocates exactly End-Begin bytes,
//     which the real file size bounds, so a hostile header cannot cause a
//     huge allocation, an out-of-range slice or a panic.
//   - Every error is a single line that names the file and the tensor or
//     field involved; user-supplied strings are quoted with %q.
//   - A Checkpoint is a set of open Files (one file, or the shards named by
//     model.safetensors.index.json, each opened once) plus a name→TensorInfo
//     table. Shard names in an index must stay inside the model directory.
//     Files stay open until Close; reads use os.File.ReadAt and are safe for
//     concurrent use.
//   - ReadFloat32 converts every numeric dtype to float32 and dequantizes
//     block-scaled FP8 (E4M3) weights when a companion scale tensor exists,
//     with HF ("_scale_inv") or DeepSeek (".scale") naming.
//   - Write produces deterministic files: tensors in sorted name order, the
//     header padded with spaces to a multiple of 8 bytes, written to a
//     temporary file in the target directory and renamed into place.
package safetensors

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MaxHeaderSize is the largest JSON header Open accepts, in bytes.
const MaxHeaderSize = 100 << 20

// metadataKey is the reserved header key holding string→string metadata.
const metadataKey = "__metadata__"

// DType names an element type as spelled in safetensors headers.
type DType string

// Element types understood by this package.
const (
	F64     DType = "F64"     // IEEE 754 binary64
	F32     DType = "F32"     // IEEE 754 binary32
	F16     DType = "F16"     // IEEE 754 binary16
	BF16    DType = "BF16"    // bfloat16
	I64     DType = "I64"     // signed 64-bit integer
	I32     DType = "I32"     // signed 32-bit integer
	I16     DType = "I16"     // signed 16-bit integer
	I8      DType = "I8"      // signed 8-bit integer
	U64     DType = "U64"     // unsigned 64-bit integer
	U32     DType = "U32"     // unsigned 32-bit integer
	U16     DType = "U16"     // unsigned 16-bit integer
	U8      DType = "U8"      // unsigned 8-bit integer
	BOOL    DType = "BOOL"    // one byte, zero is false
	F8_E4M3 DType = "F8_E4M3" // OCP FP8 E4M3FN
	F8_E5M2 DType = "F8_E5M2" // OCP FP8 E5M2
	F8_E8M0 DType = "F8_E8M0" // OCP UE8M0 power-of-two scale
)

var dtypeSizes = map[DType]int{
	F64: 8, F32: 4, F16: 2, BF16: 2,
	I64: 8, I32: 4, I16: 2, I8: 1,
	U64: 8, U32: 4, U16: 2, U8: 1,
	BOOL: 1, F8_E4M3: 1, F8_E5M2: 1, F8_E8M0: 1,
}

// Size returns the number of bytes per element, or 0 for an unknown dtype.
func (d DType) Size() int { return dtypeSizes[d] }

// TensorInfo describes one tensor of an opened file.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int64
	File  string // path of the file holding the tensor
	Begin int64  // absolute byte offset of the first byte in File
	End   int64  // absolute byte offset one past the last byte in File
}

// NumElements returns the product of the shape (1 for a scalar). It does not
// check for overflow; ParseHeader guarantees it cannot overflow.
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// mul64 multiplies non-negative a and b, reporting false on int64 overflow.
func mul64(a, b int64) (int64, bool) {
	if a != 0 && b > math.MaxInt64/a {
		return 0, false
	}
	return a * b, true
}

// byteSize returns the element count and byte size of shape×dtype, checking
// that dims are non-negative and that nothing overflows.
func byteSize(shape []int64, dt DType) (numel, nbytes int64, err error) {
	numel = 1
	for i, d := range shape {
		if d < 0 {
			return 0, 0, fmt.Errorf("shape[%d] = %d is negative", i, d)
		}
		var ok bool
		if numel, ok = mul64(numel, d); !ok {
			return 0, 0, fmt.Errorf("shape %v: element count overflows int64", shape)
		}
	}
	nbytes, ok := mul64(numel, int64(dt.Size()))
	if !ok {
		return 0, 0, fmt.Errorf("shape %v of %s: byte size overflows int64", shape, dt)
	}
	return numel, nbytes, nil
}

// jsonKind returns the first non-space byte of a JSON value ('{', '[', '"', ...).
func jsonKind(raw []byte) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// short abbreviates a JSON literal for an error message.
func short(raw []byte) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

// ParseHeader parses and fully validates a safetensors JSON header. dataStart
// is the absolute offset of the data section (8 + len(header) in a file) and
// fileSize the total file size. The returned TensorInfos carry absolute
// offsets and an empty File. The second result is the __metadata__ object
// (nil if absent). ParseHeader does no I/O and never panics.
func ParseHeader(header []byte, dataStart, fileSize int64) (map[string]TensorInfo, map[string]string, error) {
	if dataStart < 0 || fileSize < dataStart {
		return nil, nil, fmt.Errorf("header: data section start %d is outside the file (%d bytes)", dataStart, fileSize)
	}
	if !utf8.Valid(header) {
		return nil, nil, errors.New("header: not valid UTF-8")
	}
	if !json.Valid(header) {
		err := json.Unmarshal(header, new(json.RawMessage)) // for the syntax error's text
		return nil, nil, fmt.Errorf("header: not valid JSON: %v", err)
	}
	if jsonKind(header) != '{' {
		return nil, nil, errors.New("header: not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	if _, err := dec.Token(); err != nil { // the opening '{'
		return nil, nil, fmt.Errorf("header: %v", err)
	}
	dataLen := fileSize - dataStart
	tensors := map[string]TensorInfo{}
	var meta map[string]string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("header: %v", err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("header: key %q: %v", key, err)
		}
		if seen[key] {
			return nil, nil, fmt.Errorf("header: duplicate key %q", key)
		}
		seen[key] = true
		if key == metadataKey {
			if meta, err = parseMetadata(raw); err != nil {
				return nil, nil, err
			}
			continue
		}
		t, err := parseEntry(raw, dataLen)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %v", key, err)
		}
		t.Name, t.Begin, t.End = key, t.Begin+dataStart, t.End+dataStart
		tensors[key] = t
	}
	if err := checkOverlaps(tensors); err != nil {
		return nil, nil, err
	}
	return tensors, meta, nil
}

// parseMetadata validates the __metadata__ value as a string→string object.
func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	var fields map[string]json.RawMessage
	if jsonKind(raw) != '{' || json.Unmarshal(raw, &fields) != nil {
		return nil, fmt.Errorf("%s: not a JSON object", metadataKey)
	}
	meta := make(map[string]string, len(fields))
	for k, v := range fields {
		var s string
		if jsonKind(v) != '"' || json.Unmarshal(v, &s) != nil {
			return nil, fmt.Errorf("%s[%q] = %s is not a string", metadataKey, k, short(v))
		}
		meta[k] = s
	}
	return meta, nil
}

// parseEntry validates one tensor entry; offsets are relative to the data section.
func parseEntry(raw json.RawMessage, dataLen int64) (TensorInfo, error) {
	var e struct {
		DType       json.RawMessage `json:"dtype"`
		Shape       json.RawMessage `json:"shape"`
		DataOffsets json.RawMessage `json:"data_offsets"`
	}
	if jsonKind(raw) != '{' || json.Unmarshal(raw, &e) != nil {
		return TensorInfo{}, errors.New("entry is not a JSON object")
	}
	var dt DType
	if e.DType == nil {
		return TensorInfo{}, errors.New(`missing "dtype"`)
	}
	if jsonKind(e.DType) != '"' || json.Unmarshal(e.DType, &dt) != nil {
		return TensorInfo{}, fmt.Errorf("dtype %s is not a string", short(e.DType))
	}
	if dt.Size() == 0 {
		return TensorInfo{}, fmt.Errorf("unknown dtype %q", string(dt))
	}
	shape, err := intList(e.Shape, "shape")
	if err != nil {
		return TensorInfo{}, err
	}
	_, nbytes, err := byteSize(shape, dt)
	if err != nil {
		return TensorInfo{}, err
	}
	offs, err := intList(e.DataOffsets, "data_offsets")
	if err != nil {
		return TensorInfo{}, err
	}
	if len(offs) != 2 {
		return TensorInfo{}, fmt.Errorf("data_offsets has %d elements, want 2", len(offs))
	}
	begin, end := offs[0], offs[1]
	switch {
	case begin > end:
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d]: begin > end", begin, end)
	case end > dataLen:
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d]: end is past the data section (%d bytes)", begin, end, dataLen)
	case end-begin != nbytes:
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] span %d bytes, but shape %v of %s needs %d", begin, end, end-begin, shape, dt, nbytes)
	}
	return TensorInfo{DType: dt, Shape: shape, Begin: begin, End: end}, nil
}

// intList decodes raw, a valid JSON value, as an array of non-negative int64
// literals. Splitting on commas is exact here: any element containing a
// comma is a string, array or object, and its pieces fail ParseInt anyway.
func intList(raw json.RawMessage, key string) ([]int64, error) {
	if raw == nil {
		return nil, fmt.Errorf("missing %q", key)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return nil, fmt.Errorf("%s = %s is not an array", key, short(raw))
	}
	inner := bytes.TrimSpace(raw[1 : len(raw)-1])
	if len(inner) == 0 {
		return []int64{}, nil
	}
	elems := bytes.Split(inner, []byte(","))
	out := make([]int64, len(elems))
	for i, e := range elems {
		v, err := strconv.ParseInt(string(bytes.TrimSpace(e)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] = %s is not an integer", key, i, short(e))
		}
		if v < 0 {
			return nil, fmt.Errorf("%s[%d] = %d is negative", key, i, v)
		}
		out[i] = v
	}
	return out, nil
}

// checkOverlaps reports two non-empty tensors whose byte ranges intersect.
func checkOverlaps(tensors map[string]TensorInfo) error {
	list := make([]TensorInfo, 0, len(tensors))
	for _, t := range tensors {
		if t.End > t.Begin {
			list = append(list, t)
		}
	}
	slices.SortFunc(list, func(a, b TensorInfo) int {
		return cmp.Or(cmp.Compare(a.Begin, b.Begin), cmp.Compare(a.End, b.End), cmp.Compare(a.Name, b.Name))
	})
	for i := 1; i < len(list); i++ {
		// Sorted by Begin; while no neighbours overlap the ends are sorted
		// too, so the first overlap is always between neighbours.
		prev, cur := list[i-1], list[i]
		if cur.Begin < prev.End {
			return fmt.Errorf("tensors %q [%d, %d) and %q [%d, %d) overlap", prev.Name, prev.Begin, prev.End, cur.Name, cur.Begin, cur.End)
		}
	}
	return nil
}
