package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const fixture = "../testdata/tiny-v4-dev/model.safetensors"

// rawFile assembles a safetensors file from a header string and dataLen zero bytes.
func rawFile(header string, dataLen int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, dataLen)...)
}

func writeBytes(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustWrite(t testing.TB, path string, tensors []Tensor, meta map[string]string) {
	t.Helper()
	if err := Write(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
}

func mustOpen(t testing.TB, open func(string) (*Checkpoint, error), path string) *Checkpoint {
	t.Helper()
	c, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wantErr checks that err is a single line mentioning every substring.
func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", subs)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans several lines: %q", msg)
	}
	for _, s := range subs {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not mention %q", msg, s)
		}
	}
}

func rawTensor(name string, dt DType, shape []int64, data ...byte) Tensor {
	return Tensor{Name: name, DType: dt, Shape: shape, Data: data}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.safetensors")
	f32 := []float32{1, -2.5, float32(math.Inf(1)), 3e-40, 0, 7}
	i64 := []int64{math.MinInt64, -1, 0, math.MaxInt64}
	i32 := []int32{math.MinInt32, 5, math.MaxInt32}
	meta := map[string]string{"format": "pt", "note": "a \"quoted\"\nvalue"}
	mustWrite(t, path, []Tensor{
		F32Tensor("z.f32", []int64{2, 3}, f32),
		I64Tensor("b.i64", []int64{4}, i64),
		I32Tensor("a.i32", []int64{3, 1}, i32),
		F32Tensor("scalar", nil, []float32{42}),
		F32Tensor("empty", []int64{0, 3}, nil),
	}, meta)

	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	b, _ := os.ReadFile(path)
	if n := binary.LittleEndian.Uint64(b); n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}

	c := mustOpen(t, OpenFile, path)
	if got, want := c.Names(), []string{"a.i32", "b.i64", "empty", "scalar", "z.f32"}; !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if got := c.Metadata(); got["format"] != "pt" || got["note"] != meta["note"] || len(got) != 2 {
		t.Errorf("Metadata = %v", got)
	}
	// Data is laid out in sorted name order.
	var prev int64
	for _, name := range c.Names() {
		info, _ := c.Info(name)
		if info.Begin < prev || info.File != path {
			t.Errorf("%s: %+v not in sorted layout", name, info)
		}
		prev = info.End
	}
	got, shape, err := c.ReadFloat32("z.f32", ReadOptions{})
	if err != nil || !slices.Equal(got, f32) || !slices.Equal(shape, []int64{2, 3}) {
		t.Errorf("z.f32 = %v %v %v", got, shape, err)
	}
	gi, shape, err := c.ReadInt64("b.i64")
	if err != nil || !slices.Equal(gi, i64) || !slices.Equal(shape, []int64{4}) {
		t.Errorf("b.i64 = %v %v %v", gi, shape, err)
	}
	gi, _, err = c.ReadInt64("a.i32")
	if err != nil || !slices.Equal(gi, []int64{math.MinInt32, 5, math.MaxInt32}) {
		t.Errorf("a.i32 = %v %v", gi, err)
	}
	if got, shape, err := c.ReadFloat32("scalar", ReadOptions{}); err != nil || !slices.Equal(got, []float32{42}) || len(shape) != 0 {
		t.Errorf("scalar = %v %v %v", got, shape, err)
	}
	if got, shape, err := c.ReadFloat32("empty", ReadOptions{}); err != nil || len(got) != 0 || !slices.Equal(shape, []int64{0, 3}) {
		t.Errorf("empty = %v %v %v", got, shape, err)
	}
	if _, _, err := c.ReadInt64("z.f32"); err == nil {
		t.Error("ReadInt64 of F32 succeeded")
	}
	wantErr(t, func() error { _, err := c.ReadRaw("nope"); return err }(), path, `"nope"`)
}

func TestWriteErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	for _, tc := range []struct {
		tensors []Tensor
		want    string
	}{
		{[]Tensor{F32Tensor("a", []int64{3}, []float32{1, 2})}, `"a": 8 data bytes`},
		{[]Tensor{F32Tensor("a", nil, []float32{1}), F32Tensor("a", nil, []float32{1})}, `duplicate tensor "a"`},
		{[]Tensor{F32Tensor("", nil, []float32{1})}, `invalid tensor name ""`},
		{[]Tensor{F32Tensor("__metadata__", nil, []float32{1})}, `invalid tensor name`},
		{[]Tensor{{Name: "q", DType: "Q4", Data: []byte{1}}}, `unknown dtype "Q4"`},
		{[]Tensor{F32Tensor("n", []int64{-1}, nil)}, `shape[0] = -1 is negative`},
	} {
		wantErr(t, Write(path, tc.tensors, nil), path, tc.want)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("failed Write left a file")
	}
}

func TestFixture(t *testing.T) {
	c := mustOpen(t, OpenFile, fixture)
	emb, ok := c.Info("model.embed_tokens.weight")
	if !ok || emb.DType != F32 || !slices.Equal(emb.Shape, []int64{512, 64}) || emb.NumElements() != 512*64 {
		t.Fatalf("embed info = %+v %v", emb, ok)
	}
	vals, shape, err := c.ReadFloat32(emb.Name, ReadOptions{})
	if err != nil || len(vals) != 512*64 || !slices.Equal(shape, emb.Shape) {
		t.Fatalf("ReadFloat32: len %d shape %v err %v", len(vals), shape, err)
	}
	// Cross-check against an independent decode of the whole file.
	whole, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int64{0, 1, 777, 512*64 - 1} {
		want := math.Float32frombits(binary.LittleEndian.Uint32(whole[emb.Begin+4*i:]))
		if vals[i] != want {
			t.Errorf("embed[%d] = %v, want %v", i, vals[i], want)
		}
	}
	ids, shape, err := c.ReadInt64("model.layers.0.ffn.gate.tid2eid")
	if err != nil || len(ids) != 1024 || !slices.Equal(shape, []int64{512, 2}) {
		t.Fatalf("tid2eid: len %d shape %v err %v", len(ids), shape, err)
	}
	info, _ := c.Info("model.layers.0.ffn.gate.tid2eid")
	if ids[5] != int64(binary.LittleEndian.Uint64(whole[info.Begin+40:])) {
		t.Errorf("tid2eid[5] = %d", ids[5])
	}
	if got := c.Metadata()["format"]; got != "pt" {
		t.Errorf("metadata format = %q", got)
	}

	// OpenDir falls back to model.safetensors.
	d := mustOpen(t, OpenDir, filepath.Dir(fixture))
	if !slices.Equal(d.Names(), c.Names()) {
		t.Error("OpenDir and OpenFile disagree on names")
	}

	// Concurrent reads share the open file.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if v, _, err := c.ReadFloat32(emb.Name, ReadOptions{}); err != nil || !slices.Equal(v, vals) {
				t.Errorf("concurrent read: %v", err)
			}
		})
	}
	wg.Wait()
}

func TestValidation(t *testing.T) {
	entry := func(name, body string) string { return `{"` + name + `":` + body + `}` }
	big := binary.LittleEndian.AppendUint64(nil, 200<<20)
	for _, tc := range []struct {
		name string
		file []byte
		want []string
	}{
		{"short file", []byte{1, 2, 3}, []string{"3 bytes", "shorter than the 8-byte header length"}},
		{"header past file", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), []string{"header length 100", "larger than"}},
		{"header over cap", append(big, "{}"...), []string{"header length 209715200", "exceeds"}},
		{"not json", rawFile(`{"a":`, 0), []string{"header", "not valid JSON"}},
		{"trailing garbage", rawFile(`{} x`, 0), []string{"header", "not valid JSON"}},
		{"not utf8", rawFile("{\"\xff\":1}", 0), []string{"header", "UTF-8"}},
		{"not object", rawFile(`[1,2]`, 0), []string{"header", "not a JSON object"}},
		{"entry not object", rawFile(entry("w", `3`), 0), []string{`tensor "w"`, "not a JSON object"}},
		{"entry null", rawFile(entry("w", `null`), 0), []string{`tensor "w"`, "not a JSON object"}},
		{"duplicate", rawFile(entry("w", `{"dtype":"U8","shape":[],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[],"data_offsets":[1,2]}`), 2), []string{`duplicate key "w"`}},
		{"missing dtype", rawFile(entry("w", `{"shape":[1],"data_offsets":[0,4]}`), 4), []string{`tensor "w"`, `missing "dtype"`}},
		{"dtype not string", rawFile(entry("w", `{"dtype":4,"shape":[1],"data_offsets":[0,4]}`), 4), []string{`tensor "w"`, "dtype", "not a string"}},
		{"unknown dtype", rawFile(entry("w", `{"dtype":"F99","shape":[1],"data_offsets":[0,4]}`), 4), []string{`tensor "w"`, `unknown dtype "F99"`}},
		{"missing shape", rawFile(entry("w", `{"dtype":"F32","data_offsets":[0,4]}`), 4), []string{`tensor "w"`, `missing "shape"`}},
		{"shape null", rawFile(entry("w", `{"dtype":"F32","shape":null,"data_offsets":[0,4]}`), 4), []string{`tensor "w"`, "shape", "not an array"}},
		{"negative dim", rawFile(entry("w", `{"dtype":"F32","shape":[2,-3],"data_offsets":[0,4]}`), 4), []string{`tensor "w"`, "shape[1] = -3 is negative"}},
		{"fractional dim", rawFile(entry("w", `{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}`), 4), []string{`tensor "w"`, `shape[0] = "1.5" is not an integer`}},
		{"string dim", rawFile(entry("w", `{"dtype":"F32","shape":["2"],"data_offsets":[0,4]}`), 4), []string{`tensor "w"`, "shape[0]", "not an integer"}},
		{"dim beyond int64", rawFile(entry("w", `{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]}`), 4), []string{`tensor "w"`, "shape[0]", "not an integer"}},
		{"element overflow", rawFile(entry("w", `{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,4]}`), 4), []string{`tensor "w"`, "element count overflows"}},
		{"byte overflow", rawFile(entry("w", `{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}`), 4), []string{`tensor "w"`, "byte size overflows"}},
		{"offsets count", rawFile(entry("w", `{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}`), 8), []string{`tensor "w"`, "data_offsets has 3 elements, want 2"}},
		{"offsets missing", rawFile(entry("w", `{"dtype":"F32","shape":[1]}`), 8), []string{`tensor "w"`, `missing "data_offsets"`}},
		{"offset negative", rawFile(entry("w", `{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}`), 8), []string{`tensor "w"`, "data_offsets[0] = -4 is negative"}},
		{"offset float", rawFile(entry("w", `{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}`), 8), []string{`tensor "w"`, "data_offsets[1]", "not an integer"}},
		{"begin after end", rawFile(entry("w", `{"dtype":"F32","shape":[1],"data_offsets":[8,4]}`), 8), []string{`tensor "w"`, "data_offsets [8, 4]: begin > end"}},
		{"end past data", rawFile(entry("w", `{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`), 4), []string{`tensor "w"`, "data_offsets [0, 8]: end is past the data section (4 bytes)"}},
		{"length mismatch", rawFile(entry("w", `{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}`), 16), []string{`tensor "w"`, "span 12 bytes", "needs 16"}},
		{"overlap", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12),
			[]string{`"a" [`, `"b" [`, "overlap"}},
		{"overlap nested", rawFile(`{"a":{"dtype":"U8","shape":[10],"data_offsets":[0,10]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},"c":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}}`, 12),
			[]string{`"a" [`, `"b" [`, "overlap"}},
		{"metadata not object", rawFile(`{"__metadata__":"x"}`, 0), []string{"__metadata__", "not a JSON object"}},
		{"metadata not strings", rawFile(`{"__metadata__":{"k":1}}`, 0), []string{`__metadata__["k"] = "1" is not a string`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeBytes(t, t.TempDir(), "bad.safetensors", tc.file)
			_, err := OpenFile(path)
			wantErr(t, err, append([]string{path}, tc.want...)...)
		})
	}
}

func TestValidHeaderEdgeCases(t *testing.T) {
	// Empty tensors may share offsets; padding with spaces is allowed;
	// unknown entry fields are ignored.
	h := `{"e1":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"e2":{"dtype":"BOOL","shape":[3,0],"data_offsets":[4,4]},` +
		`"x":{"dtype":"F32","shape":[],"data_offsets":[0,4],"extra":true}}    `
	tensors, meta, err := ParseHeader([]byte(h), int64(8+len(h)), int64(8+len(h)+4))
	if err != nil || len(tensors) != 3 || meta != nil {
		t.Fatalf("got %v %v %v", tensors, meta, err)
	}
	if x := tensors["x"]; x.Begin != int64(8+len(h)) || x.End != x.Begin+4 || x.NumElements() != 1 {
		t.Errorf("x = %+v", x)
	}
}

func TestTruncatedAfterOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.safetensors")
	mustWrite(t, path, []Tensor{F32Tensor("a", []int64{4}, make([]float32, 4)), F32Tensor("b", []int64{4}, make([]float32, 4))}, nil)
	c := mustOpen(t, OpenFile, path)
	b, _ := c.Info("b")
	if err := os.Truncate(path, b.Begin+2); err != nil {
		t.Fatal(err)
	}
	_, err := c.ReadRaw("b")
	wantErr(t, err, path, `tensor "b"`, "unexpected EOF")
	_, _, err = c.ReadFloat32("b", ReadOptions{})
	wantErr(t, err, path, `tensor "b"`)
	if _, err := c.ReadRaw("a"); err != nil {
		t.Errorf("tensor a before the cut: %v", err)
	}
}

func TestConversions(t *testing.T) {
	negZero := math.Copysign(0, -1)
	check := func(kind string, in uint16, got float32, want float64) {
		t.Helper()
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) {
				t.Errorf("%s(%#x) = %v, want NaN", kind, in, got)
			}
			return
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Errorf("%s(%#x) = %v, want %v", kind, in, got, want)
		}
	}
	for in, want := range map[uint16]float64{
		0x3f80: 1, 0xc000: -2, 0x4049: 3.140625, 0x7f80: math.Inf(1), 0xff80: math.Inf(-1),
		0x0000: 0, 0x8000: negZero, 0x0001: math.Ldexp(1, -133), 0x7fc0: math.NaN(),
	} {
		check("BF16", in, BF16ToFloat32(in), want)
	}
	for in, want := range map[uint16]float64{
		0x3c00: 1, 0xc000: -2, 0x7c00: math.Inf(1), 0xfc00: math.Inf(-1), 0x0001: math.Ldexp(1, -24),
		0x03ff: 1023 * math.Ldexp(1, -24), 0x0400: math.Ldexp(1, -14), 0x7bff: 65504, 0x3555: 0.333251953125,
		0x8000: negZero, 0x7e00: math.NaN(), 0x7c01: math.NaN(),
	} {
		check("F16", in, F16ToFloat32(in), want)
	}
	for in, want := range map[uint16]float64{
		0x38: 1, 0x7e: 448, 0xfe: -448, 0x01: math.Ldexp(1, -9), 0x07: 7 * math.Ldexp(1, -9), 0x08: math.Ldexp(1, -6),
		0x80: negZero, 0x00: 0, 0x3c: 1.5, 0xc0: -2, 0x77: 240, 0x7f: math.NaN(), 0xff: math.NaN(), 0x78: 256,
	} {
		check("E4M3", in, E4M3ToFloat32(byte(in)), want)
	}
	for in, want := range map[uint16]float64{
		127: 1, 128: 2, 126: 0.5, 0: math.Ldexp(1, -127), 254: math.Ldexp(1, 127), 1: math.Ldexp(1, -126), 255: math.NaN(),
	} {
		check("E8M0", in, E8M0ToFloat32(byte(in)), want)
	}
	for in, want := range map[uint16]float64{0x3c: 1, 0x7c: math.Inf(1), 0x01: math.Ldexp(1, -16), 0xc0: -2, 0x7d: math.NaN()} {
		check("E5M2", in, E5M2ToFloat32(byte(in)), want)
	}
	// Exhaustive comparison with the textbook formula (-1)^s × 2^(e-bias) × (1.m), subnormals 2^(1-bias) × 0.m.
	formula := func(v uint32, ebits, mbits uint, bias int) float64 {
		s, e, m := v>>(ebits+mbits), int(v>>mbits)&(1<<ebits-1), float64(v&(1<<mbits-1))
		var f float64
		if e == 0 {
			f = math.Ldexp(m/float64(uint(1)<<mbits), 1-bias)
		} else {
			f = math.Ldexp(1+m/float64(uint(1)<<mbits), e-bias)
		}
		if s == 1 {
			f = -f
		}
		return f
	}
	for v := range 1 << 16 {
		if v&0x7c00 != 0x7c00 {
			check("F16", uint16(v), F16ToFloat32(uint16(v)), formula(uint32(v), 5, 10, 15))
		}
	}
	for v := range 256 {
		if v&0x7f != 0x7f {
			check("E4M3", uint16(v), E4M3ToFloat32(byte(v)), formula(uint32(v), 4, 3, 7))
		}
	}
}

// fp8Values maps the E4M3 bytes used below to their values, derived by hand.
var fp8Values = map[byte]float32{0x38: 1, 0x40: 2, 0x30: 0.5, 0xb8: -1, 0x3c: 1.5, 0x44: 3, 0x00: 0, 0x7e: 448}

var fp8Weight = []byte{ // [4, 6]
	0x38, 0x40, 0x30, 0xb8, 0x3c, 0x44,
	0x00, 0x7e, 0x38, 0x38, 0x40, 0x30,
	0xb8, 0x3c, 0x44, 0x00, 0x38, 0x40,
	0x30, 0x38, 0x7e, 0x44, 0xb8, 0x3c,
}

// fp8Scale is the [2, 3] block scale; E8M0 bytes 127+k encode 2^k.
var fp8Scale = []float32{1, 2, 4, 0.5, 0.25, 8}

func fp8Expected(rows int, scaleRow func(i int) int) []float32 {
	want := make([]float32, 0, rows*6)
	for i := range rows {
		for j := range 6 {
			want = append(want, fp8Values[fp8Weight[(i%4)*6+j]]*fp8Scale[scaleRow(i)*3+j/2])
		}
	}
	return want
}

func TestFP8BlockDequant(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fp8.safetensors")
	e8m0 := []byte{127, 128, 129, 126, 125, 130}
	// A [5, 6] weight with a [3, 3] scale: inferred block 2x2, last row block is partial.
	w5 := append(slices.Clone(fp8Weight), fp8Weight[:6]...)
	mustWrite(t, path, []Tensor{
		rawTensor("hf.weight", F8_E4M3, []int64{4, 6}, fp8Weight...),
		F32Tensor("hf.weight_scale_inv", []int64{2, 3}, fp8Scale),
		rawTensor("ds.weight", F8_E4M3, []int64{4, 6}, fp8Weight...),
		rawTensor("ds.scale", F8_E8M0, []int64{2, 3}, e8m0...),
		rawTensor("plain", F8_E4M3, []int64{4, 6}, fp8Weight...),
		rawTensor("odd.weight", F8_E4M3, []int64{5, 6}, w5...),
		F32Tensor("odd.weight_scale_inv", []int64{3, 3}, append(slices.Clone(fp8Scale), 16, 16, 16)),
		rawTensor("bad.weight", F8_E4M3, []int64{5, 6}, w5...),
		F32Tensor("bad.weight_scale_inv", []int64{4, 3}, make([]float32, 12)),
	}, nil)
	c := mustOpen(t, OpenFile, path)
	want := fp8Expected(4, func(i int) int { return i / 2 })
	for _, name := range []string{"hf.weight", "ds.weight"} {
		for _, opt := range []ReadOptions{{}, {Block: [2]int{2, 2}}} {
			got, shape, err := c.ReadFloat32(name, opt)
			if err != nil || !slices.Equal(got, want) || !slices.Equal(shape, []int64{4, 6}) {
				t.Errorf("%s %+v = %v %v %v, want %v", name, opt, got, shape, err, want)
			}
		}
	}
	plain := make([]float32, len(fp8Weight))
	for i, b := range fp8Weight {
		plain[i] = fp8Values[b]
	}
	for _, tc := range []struct {
		name string
		opt  ReadOptions
	}{{"plain", ReadOptions{}}, {"hf.weight", ReadOptions{NoDequant: true}}} {
		if got, _, err := c.ReadFloat32(tc.name, tc.opt); err != nil || !slices.Equal(got, plain) {
			t.Errorf("%s %+v = %v %v, want %v", tc.name, tc.opt, got, err, plain)
		}
	}
	scale16 := append(slices.Clone(fp8Scale), 16, 16, 16)
	got, _, err := c.ReadFloat32("odd.weight", ReadOptions{})
	for i := range 30 {
		if err != nil || got[i] != fp8Values[w5[i]]*scale16[(i/6)/2*3+(i%6)/2] {
			t.Fatalf("odd.weight = %v %v", got, err)
		}
	}

	_, _, err = c.ReadFloat32("hf.weight", ReadOptions{Block: [2]int{3, 3}})
	wantErr(t, err, path, `"hf.weight" [4 6]`, `"hf.weight_scale_inv" [2 3]`, "needs scale shape [2 2]")
	_, _, err = c.ReadFloat32("hf.weight", ReadOptions{Block: [2]int{0, 3}})
	wantErr(t, err, `"hf.weight"`, "invalid block")
	_, _, err = c.ReadFloat32("bad.weight", ReadOptions{})
	wantErr(t, err, `"bad.weight" [5 6]`, `"bad.weight_scale_inv" [4 3]`, "no block size")
}

// writeIndex writes model.safetensors.index.json with the given weight map.
func writeIndex(t *testing.T, dir string, weightMap map[string]string) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 123, "format": "pt"}, "weight_map": weightMap})
	if err != nil {
		t.Fatal(err)
	}
	writeBytes(t, dir, IndexFileName, b)
}

func TestSharded(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), []Tensor{
		F32Tensor("a", []int64{2}, []float32{1, 2}),
		rawTensor("w.weight", F8_E4M3, []int64{4, 6}, fp8Weight...),
		F32Tensor("unlisted", []int64{1}, []float32{9}),
	}, nil)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "sub", "model-00002-of-00002.safetensors"), []Tensor{
		I64Tensor("b", []int64{3}, []int64{4, 5, 6}),
		F32Tensor("w.weight_scale_inv", []int64{2, 3}, fp8Scale),
	}, nil)
	writeIndex(t, dir, map[string]string{
		"a":                  "model-00001-of-00002.safetensors",
		"w.weight":           "./model-00001-of-00002.safetensors",
		"b":                  "sub/model-00002-of-00002.safetensors",
		"w.weight_scale_inv": "sub/model-00002-of-00002.safetensors",
	})
	c := mustOpen(t, OpenDir, dir)
	if got, want := c.Names(), []string{"a", "b", "w.weight", "w.weight_scale_inv"}; !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if len(c.files) != 2 {
		t.Errorf("%d files opened, want 2", len(c.files))
	}
	if m := c.Metadata(); m["total_size"] != "123" || m["format"] != "pt" {
		t.Errorf("Metadata = %v", m)
	}
	if info, _ := c.Info("b"); info.File != filepath.Join(dir, "sub", "model-00002-of-00002.safetensors") {
		t.Errorf("b lives in %q", info.File)
	}
	if v, _, err := c.ReadFloat32("a", ReadOptions{}); err != nil || !slices.Equal(v, []float32{1, 2}) {
		t.Errorf("a = %v %v", v, err)
	}
	if v, _, err := c.ReadInt64("b"); err != nil || !slices.Equal(v, []int64{4, 5, 6}) {
		t.Errorf("b = %v %v", v, err)
	}
	if v, _, err := c.ReadFloat32("w.weight", ReadOptions{}); err != nil || !slices.Equal(v, fp8Expected(4, func(i int) int { return i / 2 })) {
		t.Errorf("cross-shard dequant = %v %v", v, err)
	}
	if _, ok := c.Info("unlisted"); ok {
		t.Error("tensor missing from weight_map is visible")
	}
}

func TestIndexErrors(t *testing.T) {
	shard := "model-00001-of-00001.safetensors"
	for _, tc := range []struct {
		name      string
		weightMap map[string]string
		want      []string
	}{
		{"parent", map[string]string{"w": "../evil.safetensors"}, []string{`model.safetensors.index.json: weight_map["w"] = "../evil.safetensors" escapes the model directory`}},
		{"absolute", map[string]string{"w": "/etc/passwd"}, []string{`weight_map["w"] = "/etc/passwd" escapes the model directory`}},
		{"sneaky", map[string]string{"w": "sub/../../x.safetensors"}, []string{`weight_map["w"] = "sub/../../x.safetensors" escapes`}},
		{"empty name", map[string]string{"w": ""}, []string{`weight_map["w"] = "" escapes`}},
		{"missing shard", map[string]string{"w": "gone.safetensors"}, []string{IndexFileName, "gone.safetensors", "no such file"}},
		{"tensor not in shard", map[string]string{"a": shard, "ghost": shard}, []string{IndexFileName, `weight_map["ghost"]`, shard, `no tensor "ghost"`}},
		{"empty map", map[string]string{}, []string{IndexFileName, "weight_map is missing or empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mustWrite(t, filepath.Join(dir, shard), []Tensor{F32Tensor("a", nil, []float32{1})}, nil)
			writeIndex(t, dir, tc.weightMap)
			_, err := OpenDir(dir)
			wantErr(t, err, append([]string{dir}, tc.want...)...)
		})
	}
	t.Run("bad shard header", func(t *testing.T) {
		dir := t.TempDir()
		writeBytes(t, dir, shard, rawFile(`{"w":7}`, 0))
		writeIndex(t, dir, map[string]string{"w": shard})
		_, err := OpenDir(dir)
		wantErr(t, err, filepath.Join(dir, shard), `tensor "w"`)
	})
	t.Run("bad index json", func(t *testing.T) {
		dir := t.TempDir()
		writeBytes(t, dir, IndexFileName, []byte(`{"weight_map": [1]}`))
		_, err := OpenDir(dir)
		wantErr(t, err, filepath.Join(dir, IndexFileName), "weight_map")
	})
	t.Run("empty dir", func(t *testing.T) {
		dir := t.TempDir()
		_, err := OpenDir(dir)
		wantErr(t, err, dir, IndexFileName, SingleFileName)
	})
}

func TestReadDTypes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dtypes.safetensors")
	mustWrite(t, path, []Tensor{
		rawTensor("f64", F64, []int64{1}, 0, 0, 0, 0, 0, 0, 0xf8, 0xbf), // -1.5
		rawTensor("f16", F16, []int64{2}, 0x00, 0x3c, 0x00, 0xc0),       // 1, -2
		rawTensor("bf16", BF16, []int64{1}, 0x49, 0x40),                 // 3.140625
		rawTensor("i8", I8, []int64{2}, 0xff, 0x7f),                     // -1, 127
		rawTensor("i16", I16, []int64{1}, 0x00, 0x80),                   // -32768
		rawTensor("u16", U16, []int64{1}, 0x00, 0x80),                   // 32768
		rawTensor("u32", U32, []int64{1}, 0xff, 0xff, 0xff, 0xff),       // 4294967295
		rawTensor("u8", U8, []int64{1}, 200),
		rawTensor("bool", BOOL, []int64{3}, 0, 1, 7),
	}, nil)
	c := mustOpen(t, OpenFile, path)
	for name, want := range map[string][]float32{
		"f64": {-1.5}, "f16": {1, -2}, "bf16": {3.140625}, "i8": {-1, 127}, "i16": {-32768},
		"u16": {32768}, "u32": {4294967295}, "u8": {200}, "bool": {0, 1, 1},
	} {
		if got, _, err := c.ReadFloat32(name, ReadOptions{}); err != nil || !slices.Equal(got, want) {
			t.Errorf("ReadFloat32(%s) = %v %v, want %v", name, got, err, want)
		}
	}
	for name, want := range map[string][]int64{
		"i8": {-1, 127}, "i16": {-32768}, "u16": {32768}, "u32": {4294967295}, "u8": {200}, "bool": {0, 1, 1},
	} {
		if got, _, err := c.ReadInt64(name); err != nil || !slices.Equal(got, want) {
			t.Errorf("ReadInt64(%s) = %v %v, want %v", name, got, err, want)
		}
	}
	_, _, err := c.ReadInt64("f16")
	wantErr(t, err, path, `tensor "f16"`, "cannot convert F16 to int64")
}
