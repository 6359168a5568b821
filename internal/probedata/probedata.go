// Package probedata holds what tools/v41/probesum and targets/cpu's probe tests share:
// the digest of a float32 result and the integer-hash inputs the tools/v41 probe
// scripts generate, so that both sides regenerate the same values.
package probedata

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
)

// Digest is the first 128 bits of the SHA-256 of v's little-endian float32 bytes, hex.
func Digest(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:16])
}

// Elementwise is probe_elementwise.py's input of length n: values in [-8, 8).
func Elementwise(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		h := (int64(i)*1000003 + int64(n)*15485863) % 2147483647
		h = (h * 48271) % 2147483647
		out[i] = float32(h%65537-32768) * 0x1p-12
	}
	return out
}

// Matrix is probe_gemm.py's gen(rows, cols, seed, kind): kind "x" gives bf16-exact
// activations, anything else small weights.
func Matrix(rows, cols, seed int, kind string) []float32 {
	out := make([]float32, rows*cols)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			h := (int64(i)*1000003 + int64(j)*7919 + int64(seed)*15485863) % 2147483647
			h = (h * 48271) % 2147483647
			if kind == "x" {
				out[i*cols+j] = float32(h%255-127) / 32
			} else {
				out[i*cols+j] = float32(h%65537-32768) * 0x1p-20
			}
		}
	}
	return out
}
