package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
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
			args := func(pb, out, kfp devptr, pbhm int64) func(a *ArgBuf) {
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
					a.I(pbhm)
				}
			}
			// the tensor-core kernels' arguments (tensorcore_attn.cu's CsaTcArgs)
			tcArgs := func(pb, out, kfp devptr) func(a *ArgBuf) {
				return func(a *ArgBuf) {
					a.P(qp + devptr(4*c.qOffset))
					a.P(kfp)
					a.P(vp)
					a.P(rp)
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
				}
			}
			pbExact, pbFast := put(k, fill(T*lmax*H, sentinel)), put(k, fill(T*lmax*H, sentinel))
			k.run("csa_attn_logits", args(pbExact, 0, kp, 0))
			k.run("csa_fast_logits", args(pbFast, 0, kp, 0))
			want, got := k.get(pbExact, T*lmax*H), k.get(pbFast, T*lmax*H)
			pbNarrow := put(k, fill(T*lmax*H, sentinel))
			k.run("csa_fast_logits_n", args(pbNarrow, 0, kp, 0))
			sameBits(t, "csa_fast_logits against csa_fast_logits_n", got, k.get(pbNarrow, T*lmax*H))
			differ := 0
			for r := 0; r < T; r++ {
				for j := 0; j < lmax; j++ {
					for h := 0; h < H; h++ {
						i := (r*lmax+j)*H + h
						w, g := want[i], got[i]
						switch {
						case j >= int(rlen[r]):
							if w != sentinel || g != sentinel {
								t.Fatalf("row %d key %d head %d past the row's %d keys written: exact %g, fast %g", r, j, h, rlen[r], w, g)
							}
						case valid[r*lmax+j] == 0:
							if !math.IsInf(float64(g), -1) || !math.IsInf(float64(w), -1) {
								t.Fatalf("row %d key %d head %d, an empty slot: exact %g, fast %g", r, j, h, w, g)
							}
						default:
							var mag float64
							for d := 0; d < D; d++ {
								mag += math.Abs(float64(q[c.qOffset+(r*H+h)*D+d]) * float64(kf[(r*lmax+j)*D+d]))
							}
							if bound := float64(D+1) * 0x1p-24 * mag * scale; math.Abs(float64(g-w)) > bound {
								t.Fatalf("row %d key %d head %d: logit %g, the exact kernel's %g (bound %.3g)", r, j, h, g, w, bound)
							}
							if g != w {
								differ++
							}
						}
					}
				}
			}
			if differ == 0 {
				t.Fatal("every logit equal to the exact kernel's: the fused multiply-adds did not run")
			}
			t.Logf("logits: %d differ from the exact kernel's, all within the bound", differ)
			// the tensor-core logits
			pbTC, pbTCn := put(k, fill(T*lmax*H, sentinel)), put(k, fill(T*lmax*H, sentinel))
			k.run("csa_tc_logits", tcArgs(pbTC, 0, kp))
			k.run("csa_tc_logits_n", tcArgs(pbTCn, 0, kp))
			tc := k.get(pbTC, T*lmax*H)
			sameBits(t, "csa_tc_logits against csa_tc_logits_n", tc, k.get(pbTCn, T*lmax*H))
			differ = 0
			for r := 0; r < T; r++ {
				for j := 0; j < lmax; j++ {
					for h := 0; h < H; h++ {
						w, g := want[(r*lmax+j)*H+h], tc[(r*H+h)*lmax+j]
						switch {
						case j >= int(rlen[r]):
							if g != sentinel {
								t.Fatalf("tc: row %d key %d head %d past the row's %d keys written: %g", r, j, h, rlen[r], g)
							}
						case valid[r*lmax+j] == 0:
							if !math.IsInf(float64(g), -1) {
								t.Fatalf("tc: row %d key %d head %d, an empty slot: %g", r, j, h, g)
							}
						default:
							var mag float64
							for d := 0; d < D; d++ {
								mag += math.Abs(float64(q[c.qOffset+(r*H+h)*D+d]) * float64(kf[(r*lmax+j)*D+d]))
							}
							bound := scale*(splitBound(mag, int64(D))+float64(D+1)*0x1p-24*mag) + 0x1p-23*math.Abs(float64(w))
							if math.IsNaN(float64(g)) || math.Abs(float64(g-w)) > bound {
								t.Fatalf("tc: row %d key %d head %d: logit %g, the exact kernel's %g (bound %.3g)", r, j, h, g, w, bound)
							}
							if g != w {
								differ++
							}
						}
					}
				}
			}
			if differ == 0 {
				t.Fatal("every tensor-core logit equal to the exact kernel's: the split products did not run")
			}
			t.Logf("tensor-core logits: %d differ from the exact kernel's, all within the bound", differ)
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
				k.run(name, tcArgs(pbT, o, kp))
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
			differ = 0
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
