package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFastGate41Lanes: V4.1's fast router logits (moe_fast_gate41_part, then
// moe_fast_gate41_sum) against the exact kernel (moe_gate_v41: mkl_dot a logit) on the
// same inputs, every token's scores and selection values bit for bit. The fixtures have
// fewer than 8 experts, so MKL's GEMV order (one row a sequence, 8 experts or more),
// which the fast kernel runs for 4 tokens at a time with a weight value loaded once for
// them, is checked here: 12 experts, 300 values a row (the batched loads and the tail),
// single-row sequences (GEMV) and a 3-row one (another order: each token's lane alone)
// in the same group of 4 tokens, and a last group of one token.
func TestFastGate41Lanes(t *testing.T) {
	k := newEmuKernels(t)
	rng := rand.New(rand.NewPCG(41, 4))
	const E, D, K = 12, 300, 2
	for _, T := range []int64{9, 4} {
		t.Run(fmt.Sprintf("%d tokens", T), func(t *testing.T) {
			// sequences: rows 0..4 one row each, rows 5..7 one of three rows, then one row each
			var seqs []int64
			for r := int64(0); r < T; {
				n := int64(1)
				if r == 5 && T > 7 {
					n = 3
				}
				seqs = append(seqs, r, n, 10+r, 0, 0) // SeqRec: row, n, pos, state, flags
				r += n
			}
			x, gate, bias := put(k, randRow(rng, int(T*D))), put(k, randRow(rng, E*D)), put(k, randRow(rng, E))
			sp := put(k, seqs)
			per := (2*E + K) * 8 / 4
			run := func(kernels ...string) []float32 {
				scratch := put(k, make([]float32, int(T)*per))
				part := put(k, make([]float32, int(T)*E*16))
				for _, name := range kernels {
					k.run(name, func(a *ArgBuf) {
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
						a.P(sp)
						a.I(int64(len(seqs) / 5))
						a.I(0)
						a.P(scratch)
						a.P(part)
					})
				}
				return k.get(scratch, int(T)*per)
			}
			want, got := run("moe_gate_v41"), run("moe_fast_gate41_part", "moe_fast_gate41_sum")
			nonzero := 0
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("scratch word %d (token %d): exact %g, fast %g", i, i/per, want[i], got[i])
				}
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
