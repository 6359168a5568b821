package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"deepinfer/quant"
)

// TestFastV41AttentionNearSerial: V4.1's fast decode attention (csa_fast_logits and
// csa_fast_logits_n, csa_fast_out, csa_fast_out_n) against the exact kernels on the same
// widened keys: every logit within the float32 dot product's error bound (dim · 2^-24 ·
// Σ|q·k|) of the exact one, empty slots -inf and keys past a row's list untouched, the
// two logit kernels bit for bit equal; the two output kernels bit for bit equal (they run the same chains, grouped differently) and within
// one bf16 step of the exact output. Shapes: heads that leave a partial group of 16,
// dims that take the four-value loads and the scalar tail, a misaligned query, heads
// that the four-value loads of probabilities do not divide, rows with
// empty slots, an empty first block and a row in no view. The tensor-core kernels
// (csa_tc_logits, csa_tc_out and their narrow forms) likewise: each logit within the
// split products' bound (splitBound) plus the exact dot's, each output within a bf16
// step plus the split bound of Σ p·|v| / den, the wide and narrow kernels bit for bit
// equal, and at least one value differing from the exact kernel's. The softmax block
// (8 keys) is not a multiple of the tensor-core step (16), so steps end at blocks' ends.
func TestFastV41AttentionNearSerial(t *testing.T) {
	k := newEmuKernels(t)
	rng := rand.New(rand.NewPCG(41, 12))
	const T, lmax, block = 5, 37, 8
	const nblk = (lmax + block - 1) / block
	rlen := []int64{37, 20, -1, 9, 1}
	for _, c := range []struct {
		heads, dim int
		qOffset    int // values the query starts past an aligned address
	}{{20, 72, 0}, {20, 70, 0}, {20, 64, 1}, {18, 64, 0}} {
		H, D := c.heads, c.dim
		t.Run(fmt.Sprintf("%d heads of %d, query offset %d", H, D, c.qOffset), func(t *testing.T) {
			q := randRow(rng, c.qOffset+T*H*D)
			kf := make([]float32, T*lmax*D)
			valid := make([]byte, T*lmax)
			for r := 0; r < T; r++ {
				for j := 0; j < int(max(rlen[r], 0)); j++ {
					// row 1's first block empty; else a key in five an empty slot
					if (r == 1 && j < block) || rng.IntN(5) == 0 {
						continue
					}
					valid[r*lmax+j] = 1
					copy(kf[(r*lmax+j)*D:], randRow(rng, D))
				}
			}
			scale := float64(float32(1 / math.Sqrt(float64(D))))
			const sentinel = 7.5
			fill := func(n int, v float32) []float32 {
				s := make([]float32, n)
				for i := range s {
					s[i] = v
				}
				return s
			}
			qp, kp, vp := put(k, q), put(k, kf), putBytes(k, valid)
			rp, sink := put(k, rlen), put(k, randRow(rng, H))
			ps, bsc, den := put(k, make([]float32, T*H*lmax)), put(k, make([]float32, T*nblk*H)), put(k, make([]float32, T*H))
			args := func(pb, out, kfp devptr, tc int64) func(a *ArgBuf) {
				return func(a *ArgBuf) {
					a.P(qp + devptr(4*c.qOffset))
					a.P(0) // kv
					a.W(Operand{Ptr: sink, Cols: int64(H)})
					a.P(0) // idx
					a.P(out)
					a.P(0) // seqs
					a.I(0)
					a.I(T)
					a.I(0)
					a.I(int64(H))
					a.I(int64(D))
					a.I(lmax)
					a.I(block)
					a.F(scale)
					for range 12 { // ratio .. kv_ratio: the key lookup's, unused here
						a.I(0)
					}
					a.P(0) // err
					a.P(kfp)
					a.P(pb)
					a.P(ps)
					a.P(bsc)
					a.P(den)
					a.P(vp)
					a.I(lmax)
					a.I(nblk)
					a.P(rp)
					a.P(0) // kref
					a.P(0) // rlo (csa_attn_rows' and csa_attn_kdec's)
					a.I(tc)
					a.P(0) // klo (csa_attn_kdec's)
				}
			}
			// the tensor-core kernels' arguments (tensorcore_attn.cu's CsaTcArgs): the keys'
			// bf16 halves (hi then lo, as csa_attn_kdec writes them), the rows' flags of
			// nonzero lo halves and the keys'
			tcArgs := func(pb, out, halves, rlo, klo devptr) func(a *ArgBuf) {
				return func(a *ArgBuf) {
					a.P(qp + devptr(4*c.qOffset))
					a.P(halves)
					a.P(halves + devptr(2*T*lmax*D))
					a.P(vp)
					a.P(rp)
					a.P(rlo)
					a.P(pb)
					a.P(bsc)
					a.P(den)
					a.P(out)
					a.I(T)
					a.I(int64(H))
					a.I(int64(D))
					a.I(lmax)
					a.I(nblk)
					a.I(block)
					a.F(scale)
					a.P(klo)
				}
			}
			pbExact, pbFast := put(k, fill(T*lmax*H, sentinel)), put(k, fill(T*lmax*H, sentinel))
			k.run("csa_attn_logits", args(pbExact, 0, kp, 0))
			k.run("csa_fast_logits", args(pbFast, 0, kp, 0))
			want, got := k.get(pbExact, T*lmax*H), k.get(pbFast, T*lmax*H)
			pbNarrow := put(k, fill(T*lmax*H, sentinel))
			k.run("csa_fast_logits_n", args(pbNarrow, 0, kp, 0))
			sameBits(t, "csa_fast_logits against csa_fast_logits_n", got, k.get(pbNarrow, T*lmax*H))
			// checkLogits: a kernel's logits (at(r, j, h) their index) against the exact ones:
			// keys past a row's list untouched, empty slots −inf, the others within bound(mag,
			// w) (mag: Σ|q·k|) and some different
			checkLogits := func(what string, got []float32, at func(r, j, h int) int, bound func(mag float64, w float32) float64) {
				t.Helper()
				differ, worst := 0, 0.0
				for r := 0; r < T; r++ {
					for j := 0; j < lmax; j++ {
						for h := 0; h < H; h++ {
							w, g := want[(r*lmax+j)*H+h], got[at(r, j, h)]
							switch {
							case j >= int(rlen[r]):
								if w != sentinel || g != sentinel {
									t.Fatalf("%s: row %d key %d head %d past the row's %d keys written: exact %g, %g", what, r, j, h, rlen[r], w, g)
								}
							case valid[r*lmax+j] == 0:
								if !math.IsInf(float64(g), -1) || !math.IsInf(float64(w), -1) {
									t.Fatalf("%s: row %d key %d head %d, an empty slot: exact %g, %g", what, r, j, h, w, g)
								}
							default:
								var mag float64
								for d := 0; d < D; d++ {
									mag += math.Abs(float64(q[c.qOffset+(r*H+h)*D+d]) * float64(kf[(r*lmax+j)*D+d]))
								}
								b := bound(mag, w)
								if math.IsNaN(float64(g)) || math.Abs(float64(g-w)) > b {
									t.Fatalf("%s: row %d key %d head %d: logit %g, the exact kernel's %g (bound %.3g)", what, r, j, h, g, w, b)
								}
								worst = max(worst, math.Abs(float64(g-w))/b)
								if g != w {
									differ++
								}
							}
						}
					}
				}
				if differ == 0 {
					t.Fatalf("%s: every logit equal to the exact kernel's", what)
				}
				// the bounds are worst cases; on these seeds the errors reach 0.02-0.06 of them,
				// and an eighth is the gate (a lost split product moves logits by ~2^-9·mag)
				if worst > 0.125 {
					t.Fatalf("%s: the worst logit error is %.3g of the worst-case bound, over the eighth these shapes reach", what, worst)
				}
				t.Logf("%s: %d logits differ from the exact kernel's, all within an eighth of the bound (the worst at %.3g of it)", what, differ, worst)
			}
			// the fused multiply-adds: the float32 dot's bound
			checkLogits("csa_fast_logits", got, func(r, j, h int) int { return (r*lmax+j)*H + h },
				func(mag float64, _ float32) float64 { return float64(D+1) * 0x1p-24 * mag * scale })
			// the tensor-core logits
			pbTC, pbTCn := put(k, fill(T*lmax*H, sentinel)), put(k, fill(T*lmax*H, sentinel))
			kh, rloKeys, kloKeys := keyHalves(kf, T, lmax)
			for r := 0; r < T; r++ {
				keys := false
				for j := 0; j < lmax; j++ {
					keys = keys || valid[r*lmax+j] != 0
				}
				if keys && rloKeys[r] == 0 {
					t.Fatalf("row %d's random keys: no lo half marked", r)
				}
			}
			hp, rlop, klop := putBytes(k, kh), put(k, rloKeys), putBytes(k, kloKeys)
			k.run("csa_tc_logits", tcArgs(pbTC, 0, hp, rlop, klop))
			k.run("csa_tc_logits_n", tcArgs(pbTCn, 0, hp, rlop, klop))
			tc := k.get(pbTC, T*lmax*H)
			sameBits(t, "csa_tc_logits against csa_tc_logits_n", tc, k.get(pbTCn, T*lmax*H))
			// the split products: their bound and the exact dot's, and the scale's rounding
			checkLogits("csa_tc_logits", tc, func(r, j, h int) int { return (r*H+h)*lmax + j },
				func(mag float64, w float32) float64 {
					return scale*(splitBound(mag, int64(D))+float64(D+1)*0x1p-24*mag) + 0x1p-23*math.Abs(float64(w))
				})
			// the softmax on the exact logits, then the three outputs from it
			k.run("csa_attn_softmax", args(pbExact, 0, kp, 0))
			outs := make([][]float32, 3)
			for i, name := range []string{"csa_attn_out", "csa_fast_out", "csa_fast_out_n"} {
				o := put(k, fill(T*H*D, sentinel))
				k.run(name, args(pbExact, o, kp, 0))
				outs[i] = k.get(o, T*H*D)
			}
			sameBits(t, "csa_fast_out against csa_fast_out_n", outs[1], outs[2])
			// the softmax on the exact logits laid out head-major (pbhm, as the tensor-core
			// kernels keep them): the same probabilities, rescales and denominators
			probs, bscs, dens := k.get(pbExact, T*lmax*H), k.get(bsc, T*nblk*H), k.get(den, T*H)
			tr := make([]float32, T*H*lmax)
			for r := 0; r < T; r++ {
				for j := 0; j < lmax; j++ {
					for h := 0; h < H; h++ {
						tr[(r*H+h)*lmax+j] = want[(r*lmax+j)*H+h]
					}
				}
			}
			pbT := put(k, tr)
			k.run("csa_attn_softmax", args(pbT, 0, kp, 1))
			trp := k.get(pbT, T*H*lmax)
			for r := 0; r < T; r++ {
				for j := 0; j < int(max(rlen[r], 0)); j++ {
					for h := 0; h < H; h++ {
						if g, w := trp[(r*H+h)*lmax+j], probs[(r*lmax+j)*H+h]; math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("row %d key %d head %d: head-major softmax %g, the other %g", r, j, h, g, w)
						}
					}
				}
			}
			sameBits(t, "the head-major softmax's rescales", k.get(bsc, T*nblk*H), bscs)
			sameBits(t, "the head-major softmax's denominators", k.get(den, T*H), dens)
			// the tensor-core outputs, and the exact output of |v| (the magnitude the split
			// products' error is relative to)
			tcOut := make([][]float32, 2)
			for i, name := range []string{"csa_tc_out", "csa_tc_out_n"} {
				o := put(k, fill(T*H*D, sentinel))
				k.run(name, tcArgs(pbT, o, hp, rlop, klop))
				tcOut[i] = k.get(o, T*H*D)
			}
			sameBits(t, "csa_tc_out against csa_tc_out_n", tcOut[0], tcOut[1])
			absKf := make([]float32, len(kf))
			for i, v := range kf {
				absKf[i] = abs32(v)
			}
			magOut := put(k, fill(T*H*D, sentinel))
			k.run("csa_attn_out", args(pbExact, magOut, put(k, absKf), 0))
			mags := k.get(magOut, T*H*D)
			differ := 0
			for r := 0; r < T; r++ {
				for i := r * H * D; i < (r+1)*H*D; i++ {
					w, g := outs[0][i], tcOut[0][i]
					if rlen[r] < 0 {
						if g != sentinel {
							t.Fatalf("tc: row %d in no view written: %g", r, g)
						}
						continue
					}
					bound := bf16Step(max(abs32(w), abs32(g))) + splitBound(1.01*float64(mags[i]), lmax)
					if math.IsNaN(float64(g)) || math.Abs(float64(g-w)) > bound {
						t.Fatalf("tc: row %d value %d: %g, the exact kernel's %g (bound %.3g)", r, i, g, w, bound)
					}
					if g != w {
						differ++
					}
				}
			}
			if differ == 0 {
				t.Fatal("every tensor-core output equal to the exact kernel's")
			}
			t.Logf("tensor-core outputs: %d differ from the exact kernel's, all within the bound", differ)
			// keys that are bf16 values (V4.1's FP8 and FP4 keys): no row's lo halves are
			// marked, and the kernels that leave their mma out give the values of the
			// kernels that run them (rows forced marked) bit for bit
			kfB := append([]float32(nil), kf...)
			quant.BF16Slice(kfB)
			khB, rloB, _ := keyHalves(kfB, T, lmax)
			for r, v := range rloB {
				if v != 0 {
					t.Fatalf("row %d of bf16 keys marked as having lo halves", r)
				}
			}
			ones, keyOnes := make([]uint32, T), make([]byte, T*lmax)
			for r := range ones {
				ones[r] = 1
			}
			for i := range keyOnes {
				keyOnes[i] = 1
			}
			hpB, zero, one, keysOne := putBytes(k, khB), put(k, rloB), put(k, ones), putBytes(k, keyOnes)
			for _, name := range []string{"csa_tc_logits", "csa_tc_logits_n", "csa_tc_out", "csa_tc_out_n"} {
				out := strings.HasPrefix(name, "csa_tc_out")
				n := T * lmax * H
				if out {
					n = T * H * D
				}
				got := make([][]float32, 2)
				for i, flags := range []devptr{zero, one} {
					dst := put(k, fill(n, sentinel))
					if out {
						k.run(name, tcArgs(pbT, dst, hpB, flags, keysOne))
					} else {
						k.run(name, tcArgs(dst, 0, hpB, flags, keysOne))
					}
					got[i] = k.get(dst, n)
				}
				sameBits(t, name+" on bf16 keys, the lo mma left out against run", got[0], got[1])
			}
			for r := 0; r < T; r++ {
				for i := r * H * D; i < (r+1)*H*D; i++ {
					w, g := outs[0][i], outs[1][i]
					if rlen[r] < 0 {
						if w != sentinel || g != sentinel {
							t.Fatalf("row %d in no view written: exact %g, fast %g", r, w, g)
						}
						continue
					}
					if math.IsNaN(float64(g)) || math.Abs(float64(g-w)) > bf16Step(max(abs32(w), abs32(g))) {
						t.Fatalf("row %d value %d: %g, the exact kernel's %g", r, i, g, w)
					}
				}
			}
		})
	}
}

// keyHalves is csa_attn_kdec's tensor-core layout of the keys of rows rows of lmax (kf: [rows,
// lmax, dim]): their bf16 hi halves, then their lo halves (bf16(v − hi)), as bytes; each
// row's flag of a nonzero lo half, and each key's (dim values a key).
func keyHalves(kf []float32, rows, lmax int) ([]byte, []uint32, []byte) {
	n, per := len(kf), len(kf)/rows
	out, flags := make([]byte, 4*n), make([]uint32, rows)
	dim := len(kf) / rows / lmax
	keys := make([]byte, len(kf)/dim)
	for i, v := range kf {
		hi := quant.BF16(v)
		lo := quant.BF16(v - hi)
		binary.LittleEndian.PutUint16(out[2*i:], uint16(math.Float32bits(hi)>>16))
		binary.LittleEndian.PutUint16(out[2*(n+i):], uint16(math.Float32bits(lo)>>16))
		if lo != 0 {
			flags[i/per] = 1
			keys[i/dim] = 1
		}
	}
	return out, flags, keys
}

func abs32(v float32) float32 { return float32(math.Abs(float64(v))) }

// bf16Step is the spacing of bf16 values at v (v > 0), 0 at 0.
func bf16Step(v float32) float64 {
	if v == 0 {
		return 0
	}
	e := math.Float32bits(v) >> 23 & 0xff
	return math.Ldexp(1, int(e)-127-7)
}

// putBytes uploads bytes and returns their device address.
func putBytes(k *emuKernels, v []byte) devptr {
	k.t.Helper()
	p, err := k.d.Alloc(uint64(max(len(v), 8)))
	if err != nil {
		k.t.Fatal(err)
	}
	if err := k.d.HtoD(p, unsafe.Pointer(&v[0]), uint64(len(v)), 0); err != nil {
		k.t.Fatal(err)
	}
	return p
}

// TestKeyWideningLoHalves: csa_attn_kdec's tensor-core branch (a warp a (row, key) on the
// device, a key at a time on the emulated one) writes every attended key's bf16 hi
// halves, the lo halves only of the keys that have a nonzero one (the rest left as they
// were: the tensor-core kernels read them only where klo marks them), and marks those
// keys (klo) and their rows (rlo): float32 keys (lo halves), float32 keys of bf16 values
// but one (a lo half in one lane's values), FP8 keys (none), empty slots; a row without
// lo halves, a row in no view, an empty row; dims of four pieces a lane, of fewer values
// than a warp's 128, and off a multiple of 4. On the H200 (newKernels) the device branch.
func TestKeyWideningLoHalves(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(20, 1))
	const R, L, g = 5, 9, 32
	for _, D := range []int{512, 72, 70} {
		t.Run(fmt.Sprint("dim ", D), func(t *testing.T) {
			rlen := []int64{L, -1, 0, 4, 7}
			kref := make([]int64, 3*R*L) // csa_Key: the row's address, its format, its group
			want := make([]uint16, 2*R*L*D)
			for i := range want {
				want[i] = 0xA5A5
			}
			wantKlo, wantRlo := make([]byte, R*L), make([]uint32, R)
			for i := range wantKlo {
				wantKlo[i] = 0xEE
			}
			for r := range R {
				for j := range max(int(rlen[r]), 0) {
					tj := r*L + j
					kind := rng.IntN(4)
					if r == 3 && kind < 2 {
						kind = 2 // row 3: FP8 keys and empty slots only
					}
					vals := make([]float32, D)
					switch kind {
					case 0, 1: // float32; kind 1 bf16 values but one
						row := make([]byte, 4*D)
						one := rng.IntN(D)
						for d := range vals {
							vals[d] = float32(rng.NormFloat64() * 2)
							if kind == 1 && d != one {
								vals[d] = quant.BF16(vals[d])
							}
							binary.LittleEndian.PutUint32(row[4*d:], math.Float32bits(vals[d]))
						}
						kref[3*tj], kref[3*tj+1], kref[3*tj+2] = int64(putBytes(k, row)), 0, 1
					case 2: // FP8 codes, a UE8M0 scale a group of 32
						ng := (D + g - 1) / g
						row := make([]byte, D+ng)
						for i := range ng {
							row[D+i] = byte(118 + rng.IntN(16))
						}
						for d := range vals {
							c := byte(rng.IntN(256))
							if c&0x7f == 0x7f {
								c = 0
							}
							row[d] = c
							vals[d] = quant.DecodeE4M3(c) * float32(math.Ldexp(1, int(row[D+d/g])-127))
						}
						kref[3*tj], kref[3*tj+1], kref[3*tj+2] = int64(putBytes(k, row)), 1, g
					default: // an empty slot: zeros
						kref[3*tj+1], kref[3*tj+2] = 1, g
					}
					any := false
					lo := make([]uint16, D)
					for d, v := range vals {
						hv := quant.BF16(v)
						want[tj*D+d] = uint16(math.Float32bits(hv) >> 16)
						if hv != v {
							lo[d] = uint16(math.Float32bits(quant.BF16(v-hv)) >> 16)
						}
						any = any || lo[d] != 0
					}
					if any {
						copy(want[R*L*D+tj*D:], lo)
						wantRlo[r] = 1
					}
					wantKlo[tj] = b2b(any)
				}
			}
			if wantRlo[0] == 0 || wantRlo[3] != 0 {
				t.Fatalf("the keys: rows' lo flags %v, want row 0 marked and row 3 not", wantRlo)
			}
			init := make([]byte, 4*R*L*D)
			for i := range init {
				init[i] = 0xA5
			}
			klo := make([]byte, R*L)
			for i := range klo {
				klo[i] = 0xEE
			}
			halves, kp, rlop, klop, rp := putBytes(k, init), put(k, kref), put(k, make([]uint32, R)), putBytes(k, klo), put(k, rlen)
			k.run("csa_attn_kdec", func(a *ArgBuf) {
				a.P(0) // q
				a.P(0) // kv
				a.W(Operand{})
				a.P(0) // idx
				a.P(0) // out
				a.P(0) // seqs
				a.I(0)
				a.I(R)
				a.I(0)
				a.I(1) // heads
				a.I(int64(D))
				for range 15 { // window .. kv_ratio: the key lookup's, unused here
					a.I(0)
				}
				a.P(0) // err
				a.P(halves)
				for range 5 { // pb, ps, bsc, den, valid
					a.P(0)
				}
				a.I(L)
				a.I(1) // nblk
				a.P(rp)
				a.P(kp)
				a.P(rlop)
				a.I(1) // tc
				a.P(klop)
			})
			got := k.getBytes(halves, 4*R*L*D)
			for i, w := range want {
				if g := binary.LittleEndian.Uint16(got[2*i:]); g != w {
					half, tj := "hi", i/D
					if i >= R*L*D {
						half, tj = "lo", (i-R*L*D)/D
					}
					t.Fatalf("row %d key %d value %d, %s half: %#04x, want %#04x", tj/L, tj%L, i%D, half, g, w)
				}
			}
			if got := k.getBytes(klop, R*L); string(got) != string(wantKlo) {
				t.Fatalf("keys' lo flags %v, want %v", got, wantKlo)
			}
			gotRlo := k.getBytes(rlop, 4*R)
			for r := range R {
				if binary.LittleEndian.Uint32(gotRlo[4*r:]) != wantRlo[r] {
					t.Fatalf("rows' lo flags %v, want %v", gotRlo, wantRlo)
				}
			}
		})
	}
}

// b2b is 1 for true, as a byte.
func b2b(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// getBytes reads n bytes at p.
func (k *emuKernels) getBytes(p devptr, n int) []byte {
	k.t.Helper()
	v := make([]byte, n)
	if err := k.d.DtoH(unsafe.Pointer(&v[0]), p, uint64(n), 0); err != nil {
		k.t.Fatal(err)
	}
	return v
}

// TestAttnKeysIndexCheck: csa_attn_keys reports error 404 for a row whose top-k list
// names a compressed entry its sequence does not hold, wherever in the list it lies
// (past the row's key count too: the index is checked whole, as the cpu target does),
// and nothing for lists of held entries and -1 pads; a row in no sequence is not
// checked. The check is spread over the row's work items (one index an item), so a
// bad index at the first, a middle and the last position each must be found.
func TestAttnKeysIndexCheck(t *testing.T) {
	k := newKernels(t)
	const T, window, ratio, topk = 3, 4, 4, 8
	lmax := int64(window + topk)
	// rows 0 and 1 decode at positions 40 and 5 (10 and 1 entries held); row 2 in no
	// sequence
	state := putBytes(k, make([]byte, 1<<12))
	seqs := []int64{0, 1, 40, int64(state), 1, 1, 1, 5, int64(state) + 2048, 1}
	good := [][]int32{{0, 3, 9, 1, 2, 4, 5, 6}, {0, -1, -1, -1, -1, -1, -1, -1}, {77, 77, 77, 77, 77, 77, 77, 77}}
	run := func(idx [][]int32) int64 {
		var flat []uint32
		for _, r := range idx {
			for _, e := range r {
				flat = append(flat, uint32(e))
			}
		}
		ip, sp, errp := put(k, flat), put(k, seqs), put(k, []int64{0})
		rlen, kref := put(k, make([]int64, T)), putBytes(k, make([]byte, 24*T*int(lmax)))
		valid, rlo, klo := putBytes(k, make([]byte, T*int(lmax))), put(k, make([]uint32, T)), putBytes(k, make([]byte, T*int(lmax)))
		for _, name := range []string{"csa_attn_rows", "csa_attn_keys"} {
			k.run(name, func(a *ArgBuf) {
				a.P(0) // q
				a.P(0) // kv
				a.W(Operand{})
				a.P(ip)
				a.P(0) // out
				a.P(sp)
				a.I(2) // nseq
				a.I(T)
				a.I(0) // keep
				a.I(1) // heads
				a.I(64)
				a.I(window)
				a.I(64) // block
				a.F(1)  // scale
				a.I(ratio)
				a.I(topk)
				for _, v := range []int64{0, 0, 1, 32, 96, 1024, 1, 32, 96, ratio} { // ring_*, kv_*
					a.I(v)
				}
				a.P(errp)
				for range 5 { // kf, pb, ps, bsc, den
					a.P(0)
				}
				a.P(valid)
				a.I(lmax)
				a.I(1) // nblk
				a.P(rlen)
				a.P(kref)
				a.P(rlo)
				a.I(1) // tc
				a.P(klo)
			})
		}
		if got := k.getI64(rlen, T); got[0] != window+topk || got[1] != window+1 || got[2] != -1 {
			t.Fatalf("key counts %v, want [12 5 -1]", got)
		}
		return k.getI64(errp, 1)[0]
	}
	if e := run(good); e != 0 {
		t.Fatalf("held entries: error %d", e)
	}
	for _, c := range []struct {
		row, at int
		e       int32
	}{{0, 0, 10}, {0, 4, 11}, {0, topk - 1, 10}, {1, topk - 1, 1}, {1, 1, 2}} {
		idx := [][]int32{append([]int32(nil), good[0]...), append([]int32(nil), good[1]...), good[2]}
		idx[c.row][c.at] = c.e
		if e := run(idx); e != 404 {
			t.Errorf("row %d index %d = %d (not held): error %d, want 404", c.row, c.at, c.e, e)
		}
	}
}
