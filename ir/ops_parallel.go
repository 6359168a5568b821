package ir

import "fmt"

// Collectives inserted by the sharding pass. Each is typed as an identity on the
// sending rank's view of the data: the planner reasons about the bytes each moves
// (bytes_per_token × T), and a single-rank executor may run them as copies.

func identityRows(a []Type, _ Attrs) ([]Type, error) {
	if err := rows(a[0], F32, 2, "x"); err != nil {
		return nil, err
	}
	if len(a) >= 2 {
		ids := a[len(a)-1]
		if err := rows(ids, I32, 2, "ids"); err != nil {
			return nil, err
		}
		if err := sameTokens(a[0], ids, "collective"); err != nil {
			return nil, err
		}
		if len(a) == 3 {
			if err := rows(a[1], F32, 2, "weights"); err != nil {
				return nil, err
			}
			if err := sameTokens(a[1], ids, "collective"); err != nil {
				return nil, err
			}
			if a[1].Shape[1] != ids.Shape[1] {
				return nil, fmt.Errorf("collective: routing weights %s and ids %s differ in shape", a[1], ids)
			}
		}
	}
	return one(a[0])
}

var collectiveAttrs = []AttrSpec{{"ranks", AInt, true}, {"bytes_per_token", AInt, true}, {"mode", AStr, false}}

func init() {
	declare(&OpInfo{Name: "moe_dispatch", MinArgs: 3, MaxArgs: 3, Results: 1, Attrs: collectiveAttrs,
		Doc:   "expert-parallel all-to-all: send each token's activations (x[T,D], with its routing weights w[T,k], routed by ids[T,k]) to the ranks holding its experts; mode low_latency or normal (DeepEP)",
		Infer: identityRows})
	declare(&OpInfo{Name: "moe_combine", MinArgs: 2, MaxArgs: 2, Results: 1, Attrs: collectiveAttrs,
		Doc:   "expert-parallel all-to-all back: gather the weighted expert outputs of each token (y[T,D]) from the ranks that computed them",
		Infer: identityRows})
	declare(&OpInfo{Name: "cp_gather", MinArgs: 1, MaxArgs: 1, Results: 1, Attrs: collectiveAttrs,
		Doc:   "context-parallel all-gather of K=V rows so each rank's queries see the keys its causal window and the compressed entries need",
		Infer: identityRows})
}

func init() {
	declare(&OpInfo{Name: "sample", MinArgs: 2, MaxArgs: 3, Results: 1,
		Doc: "one token per logits row: sample(logits f32[R,V], params f32[R,4][, mask i32[R,1+2⌈V/64⌉]]) with params (temperature, top_p, top_k, u) per row: greedy at temperature 0, else the token where the kept probability mass passes u (vm/sampling); a mask row whose first word is non-zero restricts the row to the ids whose bits are set in the 64-bit words that follow (little-endian halves)",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "logits"); err != nil {
				return nil, err
			}
			if !a[1].Equal(T(F32, a[0].Shape[0], 4)) {
				return fail("params: want f32[%s,4], have %s", a[0].Shape[0], a[1])
			}
			if len(a) == 3 {
				if !a[2].Equal(T(I32, a[0].Shape[0], int(MaskCols(a[0].Last())))) {
					return fail("mask: want i32[%s,%d], have %s", a[0].Shape[0], MaskCols(a[0].Last()), a[2])
				}
			}
			return one(T(I32, a[0].Shape[0]))
		}})
}

// MaskCols is the width of a sample mask row for a vocabulary of v ids: a flag word and
// two int32 halves per 64-bit mask word.
func MaskCols(v int64) int64 { return 1 + 2*((v+63)/64) }
