package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFastGate41Lanes: V4.1's fast router logits (moe_fast_gate41_part, then
// moe_fast_gate41_sum) against the exact kernel (moe_gate_v41: mkl_dot a logit) on the
// same inputs, every token's scores and selection values bit for bit: the same order.
// (The fast chains round each fused multiply-add once, the exact ones twice — fma_fast
// and fma32, TestFastGate41SingleRounding — which differ only on inputs these random
// rows do not hold; a change of order would show at once.) The fixtures have
// fewer than 8 experts, so MKL's GEMV order (one row a sequence, 8 experts or more),
// which the fast kernel runs for 4 tokens at a time with a weight value loaded once for
// them, is checked here: 12 experts, 300 values a row (the batched loads and the tail),
// single-row sequences (GEMV) and a 3-row one (another order: each token's lane alone)
// in the same group of 4 tokens, and a last group of one token; and the staged kernel
// for steps of few tokens (moe_fast_gate41_rows: on a GPU, each (token, expert)'s rows
// through shared memory, with 4,100 values two stages; 301 values leave the rows
// unaligned, so its fallback runs).
func TestFastGate41Lanes(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(41, 4))
	const E, K = 12, 2
	for _, c := range []struct{ T, D int64 }{{9, 300}, {4, 300}, {5, 4100}, {3, 301}} {
		T, D := c.T, c.D
		t.Run(fmt.Sprintf("%d tokens, %d values", T, D), func(t *testing.T) {
			seqs := oneRowSeqs(T)
			x, gate, bias := put(k, randRow(rng, int(T*D))), put(k, randRow(rng, int(E*D))), put(k, randRow(rng, E))
			sp := put(k, seqs)
			per := (2*E + K) * 8 / 4
			run := func(kernels ...string) []float32 {
				scratch := put(k, make([]float32, int(T)*per))
				part := put(k, make([]float32, int(T)*E*16))
				for _, name := range kernels {
					k.run(name, gate41Args(x, gate, bias, sp, len(seqs)/5, T, E, D, K, scratch, part))
				}
				return k.get(scratch, int(T)*per)
			}
			want := run("moe_gate_v41")
			nonzero := 0
			for _, fast := range [][]string{{"moe_fast_gate41_part", "moe_fast_gate41_sum"}, {"moe_fast_gate41_rows", "moe_fast_gate41_sum"}} {
				got := run(fast...)
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
						t.Fatalf("%s: scratch word %d (token %d): exact %g, fast %g", fast[0], i, i/per, want[i], got[i])
					}
				}
			}
			for i := range want {
				if want[i] != 0 {
					nonzero++
				}
			}
			if nonzero < int(T)*E {
				t.Fatalf("only %d nonzero words in %d tokens' scores", nonzero, T)
			}
		})
	}
}

// gate41Args fills moe_gate_v41's and the fast router kernels' arguments (MoERoute41Args):
// one token a row, every token's selection kept.
func gate41Args(x, gate, bias, seqs devptr, nseq int, T, E, D, K int64, scratch, part devptr) func(a *ArgBuf) {
	return func(a *ArgBuf) {
		a.P(x)
		a.W(Operand{Ptr: gate, Cols: D})
		a.W(Operand{Ptr: bias, Cols: E})
		a.I(1)
		a.P(0) // wout
		a.P(0) // idout
		a.I(T)
		a.I(E)
		a.I(D)
		a.I(K)
		a.I(1)
		a.F(1)
		a.P(seqs)
		a.I(int64(nseq))
		a.I(0)
		a.P(scratch)
		a.P(part)
		a.I(0) // fold
	}
}

// TestFastGate41SingleRounding: the fast mode's MKL-order chains round each fused
// multiply-add once (numerics.h fma_fast), where the exact kernels round the double FMA
// to float32 (fma32). Lane 0 of a one-token router row (MKL's GEMV order: x(0)·w(0), then
// k = 1, 17, 33, …) is planted with the case where the two differ: x(0)·w(0) = 0,
// x(1)·w(1) = 1 + 2^-23, then x(17)·w(17) = 2^-24·(1 − 2^-46), so the exact
// sum lies 2^-70 below the midpoint between 1 + 2^-23 and 1 + 2^-22: a single rounding
// gives 1 + 2^-23, the double FMA rounds to the midpoint and then to the even 1 + 2^-22.
// Every fast kernel of the router (the lanes, the staged rows, both tiles: the helpers the
// mixes' kernels run too) must hold 1 + 2^-23 in that lane.
func TestFastGate41SingleRounding(t *testing.T) {
	k := newKernels(t)
	const T, E, D, K = 1, 12, 300, 2
	one := float32(1 + 0x1p-23)
	a17, b17 := float32((1+0x1p-23)*0x1p-12), float32((1-0x1p-23)*0x1p-12)
	exact := float32(math.FMA(float64(a17), float64(b17), float64(one)))
	if want := float32(1 + 0x1p-22); exact != want || math.FMA(float64(a17), float64(b17), float64(one)) == float64(exact) {
		t.Fatalf("the planted case: fma32 gives %x, want the double rounding's %x", math.Float32bits(exact), math.Float32bits(want))
	}
	xs, ws := make([]float32, T*D), make([]float32, E*D)
	xs[1], ws[1] = one, 1
	xs[17], ws[17] = a17, b17
	x, gate, bias := put(k, xs), put(k, ws), put(k, make([]float32, E))
	seqs := oneRowSeqs(T)
	sp := put(k, seqs)
	per := (2*E + K) * 8 / 4
	for _, name := range []string{"moe_fast_gate41_part", "moe_fast_gate41_rows", "moe_fast_gate41_tile1", "moe_fast_gate41_tile"} {
		part := put(k, make([]float32, T*E*16))
		k.run(name, gate41Args(x, gate, bias, sp, len(seqs)/5, T, E, D, K, put(k, make([]float32, T*per)), part))
		if got := k.get(part, T*E*16)[0]; got != one {
			t.Errorf("%s: lane 0 of token 0, expert 0 holds %x, want the single rounding's %x (fma32's: %x)",
				name, math.Float32bits(got), math.Float32bits(one), math.Float32bits(exact))
		}
	}
}

// TestFastCompressProjLanes: V4.1's fast compressor projections (csa_fast_proj_part,
// then csa_fast_proj_sum) against the exact kernel (csa_compress_proj: mkl_dot a value)
// under ratio 2, the kv projection and the gate bit for bit: 12 channels, 300 values a
// row, single-row sequences (MKL's GEMV order) and a 3-row sequence (another order).
func TestFastCompressProjLanes(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(41, 5))
	const d, D = 12, 300
	for _, T := range []int64{9, 3} {
		t.Run(fmt.Sprintf("%d tokens", T), func(t *testing.T) {
			seqs := oneRowSeqs(T)
			x, wkv, wg := put(k, randRow(rng, int(T*D))), put(k, randRow(rng, d*D)), put(k, randRow(rng, d*D))
			sp := put(k, seqs)
			run := func(kernels ...string) ([]float32, []float32) {
				P, G := put(k, make([]float32, T*d)), put(k, make([]float32, T*d))
				part := put(k, make([]float32, T*d*32))
				for _, name := range kernels {
					k.run(name, func(a *ArgBuf) {
						a.P(x)
						a.W(Operand{Ptr: wkv, Cols: D})
						a.W(Operand{Ptr: wg, Cols: D})
						for range 3 { // norm, wk, knorm
							a.W(Operand{})
						}
						a.P(sp)
						a.I(int64(len(seqs) / 5))
						a.I(T)
						a.I(D)
						a.I(d)
						a.I(0) // idim
						a.I(2) // ratio
						a.F(1e-6)
						a.P(P)
						a.P(G)
						a.P(0)
						a.P(0)
						for range 10 { // kv_off .. pend_off
							a.I(0)
						}
						a.I(1)        // procs
						for range 2 { // rope_dim, rope_fp32
							a.I(0)
						}
						a.F(1)
						for range 64 { // inv
							a.F(0)
						}
						a.P(0) // err
						a.P(part)
						a.I(32)
						a.P(0)
						a.I(0)
					})
				}
				return k.get(P, int(T*d)), k.get(G, int(T*d))
			}
			wp, wgv := run("csa_compress_proj")
			gp, ggv := run("csa_fast_proj_part", "csa_fast_proj_sum")
			for i := range wp {
				if math.Float32bits(wp[i]) != math.Float32bits(gp[i]) || math.Float32bits(wgv[i]) != math.Float32bits(ggv[i]) {
					t.Fatalf("value %d (token %d): exact %g / %g, fast %g / %g", i, i/d, wp[i], wgv[i], gp[i], ggv[i])
				}
				if wp[i] == 0 || wgv[i] == 0 {
					t.Fatalf("value %d (token %d) not written: %g / %g", i, i/d, wp[i], wgv[i])
				}
			}
		})
	}
}

// oneRowSeqs is a step's sequence table (SeqRec: row, n, pos, state, flags) of T rows:
// one row a sequence, but rows 5..7 one sequence of three when T holds them.
func oneRowSeqs(T int64) []int64 {
	var seqs []int64
	for r := int64(0); r < T; {
		n := int64(1)
		if r == 5 && T > 7 {
			n = 3
		}
		seqs = append(seqs, r, n, 10+r, 0, 0)
		r += n
	}
	return seqs
}
