package ir

import (
	"fmt"
	"sort"
)

// Storage formats name how a checkpoint stores a weight, which the planner needs to
// count bytes per device (the runtime type of a weight is what a kernel reads; the
// storage format is what sits in memory on a real target).
//
//	f32, bf16, i64, i32       plain
//	fp8_b128_f32              FP8 e4m3 + one fp32 scale_inv per 128×128 block (V4 release)
//	fp8_b128_ue8m0            FP8 e4m3 + one ue8m0 byte per 128×128 block
//	fp8_b32_ue8m0             FP8 e4m3 + one ue8m0 byte per 32×32 block (V4.1)
//	fp8_g32_ue8m0             FP8 e4m3 + one ue8m0 byte per 32 values of a row (Engram tables)
//	fp4_g32_ue8m0             FP4 e2m1, two per byte, + one ue8m0 byte per 32 values of a row
type StorageFormat struct {
	Name string
	// Tensors is how many checkpoint tensors the weight takes (2 with a scale companion).
	Tensors int
	bytes   func(rows, cols int64) int64
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

var storageFormats = map[string]StorageFormat{}

func init() {
	for _, f := range []StorageFormat{
		{"f32", 1, func(r, c int64) int64 { return 4 * r * c }},
		{"bf16", 1, func(r, c int64) int64 { return 2 * r * c }},
		{"i64", 1, func(r, c int64) int64 { return 8 * r * c }},
		{"i32", 1, func(r, c int64) int64 { return 4 * r * c }},
		{"fp8_b128_f32", 2, func(r, c int64) int64 { return r*c + 4*ceilDiv(r, 128)*ceilDiv(c, 128) }},
		{"fp8_b128_ue8m0", 2, func(r, c int64) int64 { return r*c + ceilDiv(r, 128)*ceilDiv(c, 128) }},
		{"fp8_b32_ue8m0", 2, func(r, c int64) int64 { return r*c + ceilDiv(r, 32)*ceilDiv(c, 32) }},
		{"fp8_g32_ue8m0", 2, func(r, c int64) int64 { return r*c + r*ceilDiv(c, 32) }},
		{"fp4_g32_ue8m0", 2, func(r, c int64) int64 { return ceilDiv(r*c, 2) + r*ceilDiv(c, 32) }},
	} {
		storageFormats[f.Name] = f
	}
}

// LookupStorage finds a storage format by name.
func LookupStorage(name string) (StorageFormat, bool) {
	f, ok := storageFormats[name]
	return f, ok
}

// StorageNames lists the known formats.
func StorageNames() []string {
	out := make([]string, 0, len(storageFormats))
	for n := range storageFormats {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// StorageBytes is the checkpoint size of a weight of type t in format name: a 1-D
// weight counts as one row.
func StorageBytes(name string, t Type) (int64, int, error) {
	f, ok := storageFormats[name]
	if !ok {
		return 0, 0, fmt.Errorf("unknown storage format %q", name)
	}
	var rows, cols int64 = 1, 1
	switch len(t.Shape) {
	case 0:
	case 1:
		cols = t.Shape[0].N
	default:
		cols = t.Shape[len(t.Shape)-1].N
		for _, d := range t.Shape[:len(t.Shape)-1] {
			rows *= d.N
		}
	}
	return f.bytes(rows, cols), f.Tensors, nil
}
