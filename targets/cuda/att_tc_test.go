package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestFastV4AttentionTCNearExact: V4's fast decode attention on the tensor cores
// (tensorcore_attn.cu: att_tc_logits, att_tc_softmax, att_tc_out and their narrow
// variants) against the exact kernels (att_dec_logits, att_dec_softmax, att_dec_out) on
// the same key lists: every logit within the split bf16 products' error bound of the
// exact one (a product hi·hi + hi·lo + lo·hi is within 3·2^-16 of |q·k|, plus the
// float32 sums), entries past a row's keys untouched; the softmax's denominators within
// (keys + 2)·2^-52 of the exact kernel's (float64 sums in another order) and its
// probability halves summing to the float32 probability (zero past the keys); each
// output value within the same bound of the exact one (relative to Σ p·|v| / den); the
// wide and narrow kernels equal bit for bit. Shapes: heads that leave a partial group of
// 16, head dims that are not multiples of 64 (one not of 4: the scalar loads), key
// counts that are not multiples of the tiles (8, 16, 64 keys), a row with no keys, a row
// in no sequence, and list slots past a row's keys pointing at a row of NaNs (read, they
// would show).
func TestFastV4AttentionTCNearExact(t *testing.T) {
	k := newEmuKernels(t)
	rng := rand.New(rand.NewPCG(4, 12))
	const kmax = 70
	nks := []int64{37, 9, -1, 0, 1, 70, 64} // -1: the row is in no sequence
	T := int64(len(nks))
	for _, c := range []struct{ heads, dim int64 }{{20, 72}, {20, 70}, {18, 64}, {16, 136}} {
		H, D := c.heads, c.dim
		t.Run(fmt.Sprintf("%d heads of %d", H, D), func(t *testing.T) {
			// the key rows (kmax a token) and one row of NaNs for the empty slots
			kf := randRow(rng, int(T*kmax*D+D))
			for i := T * kmax * D; i < T*kmax*D+D; i++ {
				kf[i] = float32(math.NaN())
			}
			kp := put(k, kf)
			list, nkeys := make([]int64, T*kmax), make([]int64, T)
			var seqs []int64
			for r := int64(0); r < T; r++ {
				for j := int64(0); j < kmax; j++ {
					list[r*kmax+j] = int64(kp) + 4*(T*kmax*D) // NaN row
					if j < nks[r] {
						list[r*kmax+j] = int64(kp) + 4*((r*kmax+j)*D)
					}
				}
				nkeys[r] = max(nks[r], 0)
				if nks[r] >= 0 {
					seqs = append(seqs, r, 1, 100+r, 0, 1) // SeqRec: row, n, pos, state, flags
				}
			}
			nseq := int64(len(seqs) / 5)
			q := randRow(rng, int(T*H*D))
			sink := randRow(rng, int(H))
			scale := float64(float32(1 / math.Sqrt(float64(D))))
			lp, np, sp, qp := put(k, list), put(k, nkeys), put(k, seqs), put(k, q)
			sinkp := put(k, sink)
			const sentinel = 7.5
			fill64 := func(n int64, v float64) []float32 {
				s := make([]float32, 2*n)
				for i := int64(0); i < n; i++ {
					b := math.Float64bits(v)
					s[2*i], s[2*i+1] = math.Float32frombits(uint32(b)), math.Float32frombits(uint32(b>>32))
				}
				return s
			}
			fill32 := func(n int64, v float32) []float32 {
				s := make([]float32, n)
				for i := range s {
					s[i] = v
				}
				return s
			}
			kpad := int64((kmax + 15) / 16 * 16)
			// attention.cu's AttArgs for the decode kernels
			att := func(lg, den, out, pp devptr) func(a *ArgBuf) {
				return func(a *ArgBuf) {
					a.P(qp)
					a.P(0) // kv
					a.P(0) // pos
					a.W(Operand{Ptr: sinkp, Cols: H})
					a.P(0) // idx
					a.P(out)
					a.P(0) // acc
					a.P(sp)
					a.I(nseq)
					a.I(T)
					a.I(H)
					a.I(D)
					a.I(0) // window
					a.F(scale)
					for range 10 { // ring_off .. mark: the key lookup's, unused here
						a.I(0)
					}
					a.I(0) // maxe
					a.P(lp)
					a.P(np)
					a.P(lg)
					a.P(den)
					a.I(kmax)
					a.P(pp)
					a.I(kpad)
				}
			}
			// the query halves (tensorcore.cu's fast_split), the dim padded to 64
			dp := (D + 63) / 64 * 64
			halves := put(k, make([]float32, T*H*dp))
			qh, ql := halves, halves+devptr(T*H*dp*2)
			k.run("fast_split", func(a *ArgBuf) {
				a.P(qp)
				a.P(0)
				a.P(qh)
				a.P(ql)
				a.I(T * H)
				a.I(D)
				a.I(dp)
				a.I(D)
				a.I(T * H)
				a.P(0)
				a.I(0) // xexact
			})
			fast := func(lg, pp, den, out devptr) func(a *ArgBuf) {
				return func(a *ArgBuf) {
					a.P(qh)
					a.P(ql)
					a.P(lp)
					a.P(np)
					a.P(lg)
					a.W(Operand{Ptr: sinkp, Cols: H})
					a.P(pp)
					a.P(den)
					a.P(out)
					a.P(sp)
					a.I(nseq)
					a.I(T)
					a.I(H)
					a.I(D)
					a.I(kmax)
					a.I(kpad)
					a.I(dp / 2)
					a.F(scale)
				}
			}
			n := T * H * kmax
			lgExact, lgWide, lgNarrow := put(k, fill64(n, sentinel)), put(k, fill64(n, sentinel)), put(k, fill64(n, sentinel))
			k.run("att_dec_logits", att(lgExact, 0, 0, 0))
			k.run("att_tc_logits", fast(lgWide, 0, 0, 0))
			k.run("att_tc_logits_n", fast(lgNarrow, 0, 0, 0))
			want, got, narrow := k.get64(lgExact, int(n)), k.get64(lgWide, int(n)), k.get64(lgNarrow, int(n))
			differ := 0
			for r := int64(0); r < T; r++ {
				for h := int64(0); h < H; h++ {
					for j := int64(0); j < kmax; j++ {
						i := (r*H+h)*kmax + j
						if math.Float64bits(got[i]) != math.Float64bits(narrow[i]) {
							t.Fatalf("row %d head %d key %d: att_tc_logits %g, att_tc_logits_n %g", r, h, j, got[i], narrow[i])
						}
						if j >= nkeys[r] {
							if got[i] != sentinel || want[i] != sentinel {
								t.Fatalf("row %d head %d key %d past the row's %d keys written: exact %g, fast %g", r, h, j, nkeys[r], want[i], got[i])
							}
							continue
						}
						var mag float64
						for d := int64(0); d < D; d++ {
							mag += math.Abs(float64(q[(r*H+h)*D+d]) * float64(kf[(r*kmax+j)*D+d]))
						}
						if bound := splitBound(mag*scale, D); math.Abs(got[i]-want[i]) > bound {
							t.Fatalf("row %d head %d key %d: logit %g, the exact kernel's %g (bound %.3g)", r, h, j, got[i], want[i], bound)
						}
						if got[i] != want[i] {
							differ++
						}
					}
				}
			}
			if differ == 0 {
				t.Fatal("every logit equal to the exact kernel's: the tensor-core products did not run")
			}
			// the softmax: the exact kernel in place on a copy of the exact logits; the
			// fast one writing the probability halves
			lgCopy := put(k, fill64(n, 0))
			if err := k.d.DtoD(lgCopy, lgExact, uint64(8*n), 0); err != nil {
				t.Fatal(err)
			}
			denExact, denFast := put(k, make([]float32, 2*T*H)), put(k, make([]float32, 2*T*H))
			pp := put(k, fill32(T*H*kpad, float32(math.NaN())))
			k.run("att_dec_softmax", att(lgCopy, denExact, 0, 0))
			k.run("att_tc_softmax", att(lgExact, denFast, 0, pp))
			de, df := k.get64(denExact, int(T*H)), k.get64(denFast, int(T*H))
			probs, halves32 := k.get64(lgCopy, int(n)), k.get(pp, int(T*H*kpad))
			for r := int64(0); r < T; r++ {
				for h := int64(0); h < H; h++ {
					th := r*H + h
					if math.Abs(df[th]-de[th]) > float64(nkeys[r]+2)*0x1p-52*de[th] {
						t.Fatalf("row %d head %d: denominator %g, the exact kernel's %g", r, h, df[th], de[th])
					}
					for j := int64(0); j < (nkeys[r]+15)/16*16; j++ {
						u := func(o int64) uint32 { return math.Float32bits(halves32[th*kpad+j/4*4+o+(j&3)/2]) }
						part := func(w uint32) float32 {
							if j&1 == 1 {
								return math.Float32frombits(w & 0xffff0000)
							}
							return math.Float32frombits(w << 16)
						}
						hi, lo := part(u(0)), part(u(2))
						var p float32
						if j < nkeys[r] {
							p = float32(probs[th*kmax+j])
						}
						if e := math.Abs(float64(hi) + float64(lo) - float64(p)); e > 0x1p-16*float64(p) {
							t.Fatalf("row %d head %d key %d: halves %g + %g, probability %g", r, h, j, hi, lo, p)
						}
					}
				}
			}
			// the outputs from the same probabilities
			m := T * H * D
			outExact, outWide, outNarrow := put(k, fill32(m, sentinel)), put(k, fill32(m, sentinel)), put(k, fill32(m, sentinel))
			k.run("att_dec_out", att(lgCopy, denExact, outExact, 0))
			k.run("att_tc_out", fast(0, pp, denFast, outWide))
			k.run("att_tc_out_n", fast(0, pp, denFast, outNarrow))
			ow, og, on := k.get(outExact, int(m)), k.get(outWide, int(m)), k.get(outNarrow, int(m))
			sameBits(t, "att_tc_out against att_tc_out_n", og, on)
			differ = 0
			for r := int64(0); r < T; r++ {
				for h := int64(0); h < H; h++ {
					th := r*H + h
					for d := int64(0); d < D; d++ {
						i := th*D + d
						w, g := ow[i], og[i]
						if nks[r] < 0 {
							if w != sentinel || g != sentinel {
								t.Fatalf("row %d in no sequence written: exact %g, fast %g", r, w, g)
							}
							continue
						}
						var mag float64
						for j := int64(0); j < nkeys[r]; j++ {
							mag += probs[th*kmax+j] * math.Abs(float64(kf[(r*kmax+j)*D+d]))
						}
						mag /= de[th]
						if bound := splitBound(mag, nkeys[r]) + 0x1p-24*math.Abs(float64(w)); math.IsNaN(float64(g)) || math.Abs(float64(g-w)) > bound {
							t.Fatalf("row %d head %d value %d: %g, the exact kernel's %g (bound %.3g)", r, h, d, g, w, bound)
						}
						if g != w {
							differ++
						}
					}
				}
			}
			if differ == 0 {
				t.Fatal("every output equal to the exact kernel's: the tensor-core products did not run")
			}
		})
	}
}

// splitBound bounds the error of a sum of n products computed as split bf16 products
// (hi·hi + hi·lo + lo·hi, each factor's halves within 2^-16 of it: 3·2^-16 of a product)
// summed in float32 (fewer than 3n + 16 additions, 2^-24 each), given mag, the sum of
// the products' magnitudes; the float32 inputs themselves exact.
func splitBound(mag float64, n int64) float64 {
	return mag * (3*0x1p-16 + float64(3*n+16)*0x1p-24)
}

// TestFastV4KeyListSameAsExact: the fast mode's key list (att_tc_keys, a warp per token
// placing 32 keys a pass by a ballot) equals att_dec_keys's: the same keys in the same
// order, the same counts and errors. Cases: a top-k marked by bytes (CSA) and every
// entry (HCA); a row at position 0, rows whose keys span several passes, a sequence of two
// rows (error 302), a row in no sequence, and lists too short for a row's keys (error
// 303, the first kmax kept).
func TestFastV4KeyListSameAsExact(t *testing.T) {
	k := newEmuKernels(t)
	rng := rand.New(rand.NewPCG(4, 13))
	const T, capRows, ratio, maxe, dim = 7, 7, 4, 80, 4
	pos := []int64{0, 37, 50, 51, -1, 300, 131}
	state := put(k, make([]float32, 1<<16))
	// SeqRec: row, n, pos, state, flags; row 4 in no sequence; rows 2-3 one sequence of
	// two rows (error 302) where the lists are long enough, else in none (a step has one
	// error code)
	seqsOf := func(pair bool) []int64 {
		var seqs []int64
		for r := 0; r < T; r++ {
			switch {
			case r == 2 && pair:
				seqs = append(seqs, 2, 2, pos[2], int64(state), 1)
			case r == 2 || r == 3 || r == 4:
			default:
				seqs = append(seqs, int64(r), 1, pos[r], int64(state)+int64(r)*4096, 1)
			}
		}
		return seqs
	}
	mark := make([]byte, T*maxe)
	for i := range mark {
		if rng.IntN(5) < 2 {
			mark[i] = 1
		}
	}
	mp := putBytes(k, mark)
	posp, kvp := put(k, make([]float32, T)), put(k, make([]float32, T*dim))
	for _, c := range []struct {
		name string
		topk bool
		kmax int64
	}{{"top-k", true, capRows + 1 + maxe}, {"every entry", false, capRows + 1 + maxe}, {"top-k, short lists", true, 12}, {"every entry, short lists", false, 40}} {
		t.Run(c.name, func(t *testing.T) {
			short := c.kmax < capRows+1+maxe
			seqs := seqsOf(!short)
			sp := put(k, seqs)
			run := func(name string) ([]int64, []int64, []int64) {
				keys, nkeys, errp := put(k, make([]int64, T*c.kmax)), put(k, make([]int64, T)), put(k, make([]int64, 1))
				k.run(name, func(a *ArgBuf) {
					a.P(0) // q
					a.P(kvp)
					a.P(posp)
					a.W(Operand{})
					if c.topk {
						a.P(mp) // idx: only whether there is one
					} else {
						a.P(0)
					}
					a.P(0) // out
					a.P(0) // acc
					a.P(sp)
					a.I(int64(len(seqs) / 5))
					a.I(T)
					a.I(1) // heads
					a.I(dim)
					a.I(8) // window
					a.F(1)
					a.I(0) // ring_off
					a.I(capRows)
					a.I(1) // decode
					a.I(1) // sparse
					a.I(0) // topk
					a.I(1024)
					a.I(ratio)
					a.I(dim)
					a.P(errp)
					a.P(mp)
					a.I(maxe)
					a.P(keys)
					a.P(nkeys)
					a.P(0)
					a.P(0)
					a.I(c.kmax)
					a.P(0)
					a.I(0)
				})
				return k.getI64(keys, int(T*c.kmax)), k.getI64(nkeys, T), k.getI64(errp, 1)
			}
			wk, wn, we := run("att_dec_keys")
			gk, gn, ge := run("att_tc_keys")
			if we[0] != ge[0] {
				t.Fatalf("error %d, att_dec_keys's %d", ge[0], we[0])
			}
			many := false
			for r := int64(0); r < T; r++ {
				if wn[r] != gn[r] {
					t.Fatalf("row %d: %d keys, att_dec_keys's %d", r, gn[r], wn[r])
				}
				for j := int64(0); j < wn[r]; j++ {
					if wk[r*c.kmax+j] != gk[r*c.kmax+j] {
						t.Fatalf("row %d key %d: %#x, att_dec_keys's %#x", r, j, gk[r*c.kmax+j], wk[r*c.kmax+j])
					}
				}
				many = many || wn[r] > 32
			}
			want := int64(302)
			if short {
				want = 303
			}
			if we[0] != want {
				t.Fatalf("error %d, want %d", we[0], want)
			}
			if !many && c.kmax > 32 {
				t.Fatal("no row with keys in more than one pass")
			}
		})
	}
}

func (k *emuKernels) getI64(p devptr, n int) []int64 {
	k.t.Helper()
	v := make([]int64, n)
	if err := k.d.DtoH(unsafe.Pointer(&v[0]), p, uint64(8*n), 0); err != nil {
		k.t.Fatal(err)
	}
	return v
}
