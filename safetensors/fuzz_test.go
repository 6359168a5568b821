package safetensors

import (
	"cmp"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fixtureHeaders returns the header and data length of each real fixture file.
func fixtureHeaders(f *testing.F) (headers [][]byte, dataLens []int64) {
	paths, _ := filepath.Glob("../testdata/tiny-v4-dev/*.safetensors")
	if len(paths) == 0 {
		f.Fatal("no fixture files found")
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		n := binary.LittleEndian.Uint64(b)
		headers = append(headers, b[8:8+n])
		dataLens = append(dataLens, int64(len(b))-8-int64(n))
	}
	return headers, dataLens
}

// checkInvariants verifies what ParseHeader promises for an accepted header.
func checkInvariants(t *testing.T, tensors map[string]TensorInfo, dataStart, fileSize int64) {
	list := make([]TensorInfo, 0, len(tensors))
	for name, ti := range tensors {
		if ti.Name != name || ti.DType.Size() == 0 {
			t.Fatalf("bad entry %q: %+v", name, ti)
		}
		numel := int64(1)
		for _, d := range ti.Shape {
			if d < 0 {
				t.Fatalf("%q: negative dim in %v", name, ti.Shape)
			}
			var ok bool
			if numel, ok = mul64(numel, d); !ok {
				t.Fatalf("%q: element count overflows", name)
			}
		}
		if numel != ti.NumElements() {
			t.Fatalf("%q: NumElements %d != %d", name, ti.NumElements(), numel)
		}
		if nbytes, ok := mul64(numel, int64(ti.DType.Size())); !ok || nbytes != ti.End-ti.Begin {
			t.Fatalf("%q: %d bytes for %v of %s", name, ti.End-ti.Begin, ti.Shape, ti.DType)
		}
		if ti.Begin < dataStart || ti.Begin > ti.End || ti.End > fileSize {
			t.Fatalf("%q: [%d, %d) outside data section [%d, %d)", name, ti.Begin, ti.End, dataStart, fileSize)
		}
		if ti.End > ti.Begin {
			list = append(list, ti)
		}
	}
	slices.SortFunc(list, func(a, b TensorInfo) int { return cmp.Compare(a.Begin, b.Begin) })
	for i := 1; i < len(list); i++ {
		if list[i].Begin < list[i-1].End {
			t.Fatalf("%q and %q overlap", list[i-1].Name, list[i].Name)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	headers, dataLens := fixtureHeaders(f)
	for i := range headers {
		f.Add(headers[i], dataLens[i])
	}
	for _, h := range []struct {
		header  string
		dataLen int64
	}{
		{`{}`, 0},
		{`{"__metadata__":{"format":"pt"}}       `, 0},
		{`{"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"I64","shape":[],"data_offsets":[8,16]}}`, 16},
		{`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12},
		{`{"w":{"dtype":"F8_E4M3","shape":[4,6],"data_offsets":[0,24]},"w_scale_inv":{"dtype":"F8_E8M0","shape":[2,3],"data_offsets":[24,30]}}`, 30},
		{`{"e":{"dtype":"BOOL","shape":[0,9223372036854775807],"data_offsets":[0,0]}}`, 0},
		{`{"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, 4},
	} {
		f.Add([]byte(h.header), h.dataLen)
	}
	f.Fuzz(func(t *testing.T, header []byte, dataLen int64) {
		dataStart := int64(8 + len(header))
		fileSize := dataStart + dataLen // may wrap negative; ParseHeader must reject it
		tensors, _, err := ParseHeader(header, dataStart, fileSize)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		checkInvariants(t, tensors, dataStart, fileSize)
	})
}

func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	seeds := [][]Tensor{
		{F32Tensor("a", []int64{2, 2}, []float32{1, 2, 3, 4}), I64Tensor("b", []int64{2}, []int64{-1, 7}), I32Tensor("c", nil, []int32{3})},
		{rawTensor("x.weight", F8_E4M3, []int64{4, 6}, fp8Weight...), F32Tensor("x.weight_scale_inv", []int64{2, 3}, fp8Scale)},
		{rawTensor("y.weight", F8_E4M3, []int64{4, 6}, fp8Weight...), rawTensor("y.scale", F8_E8M0, []int64{2, 3}, 127, 128, 129, 126, 125, 255)},
		{rawTensor("h", F16, []int64{2}, 0x00, 0x3c, 0x00, 0x7c), rawTensor("bf", BF16, []int64{1}, 0x80, 0x3f), rawTensor("d", F64, nil, make([]byte, 8)...)},
		{rawTensor("u", U8, []int64{3}, 1, 2, 3), rawTensor("bool", BOOL, []int64{2}, 0, 1), rawTensor("e", F8_E5M2, []int64{0})},
	}
	for i, ts := range seeds {
		path := filepath.Join(dir, "seed"+string(rune('0'+i)))
		mustWrite(f, path, ts, map[string]string{"i": "seed"})
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}`, 8))
	path := filepath.Join(dir, "input.safetensors") // each worker process has its own dir
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := OpenFile(path)
		if err != nil {
			return
		}
		defer c.Close()
		block := [2]int{1 + len(data)%3, 1 + len(data)%5}
		for _, name := range c.Names() {
			info, _ := c.Info(name)
			raw, err := c.ReadRaw(name)
			if err != nil || int64(len(raw)) != info.End-info.Begin || info.End > int64(len(data)) {
				t.Fatalf("%q: ReadRaw %d bytes, err %v, info %+v", name, len(raw), err, info)
			}
			for _, opt := range []ReadOptions{{}, {Block: block}} {
				if v, shape, err := c.ReadFloat32(name, opt); err == nil && (int64(len(v)) != info.NumElements() || !slices.Equal(shape, info.Shape)) {
					t.Fatalf("%q: %d values for shape %v", name, len(v), shape)
				}
			}
			if v, _, err := c.ReadInt64(name); err == nil && int64(len(v)) != info.NumElements() {
				t.Fatalf("%q: %d ints for shape %v", name, len(v), info.Shape)
			}
		}
	})
}

func BenchmarkParseHeader(b *testing.B) {
	raw, err := os.ReadFile(fixture)
	if err != nil {
		b.Fatal(err)
	}
	n := int64(binary.LittleEndian.Uint64(raw))
	header := raw[8 : 8+n]
	b.SetBytes(n)
	for b.Loop() {
		if _, _, err := ParseHeader(header, 8+n, int64(len(raw))); err != nil {
			b.Fatal(err)
		}
	}
}
