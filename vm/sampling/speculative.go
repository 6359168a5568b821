package sampling

// Streams of a request's random numbers: one uniform per (token index, stream).
const (
	StreamSample = 0 // the token sampled at an index (plain decoding; the bonus or resample)
	StreamDraft  = 1 // a draft token drawn from the drafter's distribution
	StreamAccept = 2 // the accept/reject test of a draft token
)

// Uniform is the request's random number in [0, 1) for the token at index idx (its
// position among the generated tokens) in one stream: a pure function of the seed,
// the index and the stream, so a request draws the same numbers whatever batch slot,
// step or speculation schedule it runs under.
func Uniform(seed uint64, idx int, stream int) float64 {
	x := seed ^ (uint64(idx)+1)*0x9e3779b97f4a7c15 ^ (uint64(stream)+1)*0xd1b54a32d192ed03
	// splitmix64's finalizer, twice
	for i := 0; i < 2; i++ {
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		x ^= x >> 31
	}
	return float64(x>>11) / (1 << 53)
}

// Probs is the distribution Row draws from at p's temperature, top-k and top-p (U
// ignored), written into dst (len(logits)): each kept id's mass over the kept mass, 0
// for the others. Temperature not above 0 puts all the mass on the greedy token.
func Probs(logits []float32, p Params, dst []float64, s *Scratch) []float64 {
	dst = dst[:len(logits)]
	clear(dst)
	if !(p.Temperature > 0) {
		dst[Row(logits, p, nil, s)] = 1
		return dst
	}
	e, total, tok := weigh(logits, p.Temperature, nil, s)
	if tok >= 0 {
		dst[tok] = 1
		return dst
	}
	c := cutRow(e, total, p, s)
	for i, v := range e {
		if q := mass(v); q > 0 && c.keeps(i, v) {
			dst[i] = float64(q) / float64(c.mass)
		}
	}
	return dst
}

// Draw returns the id where the cumulative mass of probs (walked by id) passes u·total.
func Draw(probs []float64, u float64) int {
	var tot float64
	for _, v := range probs {
		tot += v
	}
	x := u * tot
	last := 0
	for i, v := range probs {
		if v <= 0 {
			continue
		}
		last = i
		x -= v
		if x < 0 {
			return i
		}
	}
	return last
}

// Verify is speculative sampling's decision for one draft group (Leviathan et al.,
// Chen et al.): target[i] is the target model's distribution after the group's i-th
// token (len(drafts)+1 rows), draft[i] the drafter's distribution that drafts[i] was
// drawn from, and u(i, stream) the request's uniforms for the token at group index i.
// Draft i is accepted with probability min(1, target[i][d]/draft[i][d]); at the first
// rejection the token is drawn from the residual max(0, target[i]−draft[i])
// (normalized), and when every draft is accepted one more token is drawn from the
// last target row. The committed tokens are therefore distributed exactly as tokens
// drawn one by one from the target. It returns the accepted count and the committed
// tokens (the accepted drafts and the one drawn after them). residual is scratch of
// the vocabulary's size.
func Verify(target, draft [][]float64, drafts []int32, u func(i, stream int) float64, residual []float64) (int, []int32) {
	out := make([]int32, 0, len(drafts)+1)
	for i, d := range drafts {
		pt, pd := target[i][d], draft[i][d]
		if pd > 0 && u(i, StreamAccept)*pd < pt || pd == 0 && pt > 0 {
			out = append(out, d)
			continue
		}
		res := residual[:len(target[i])]
		var tot float64
		for j := range res {
			res[j] = max(0, target[i][j]-draft[i][j])
			tot += res[j]
		}
		if tot <= 0 { // target == draft: any rejection is impossible; draw from the target
			res = target[i]
		}
		return i, append(out, int32(Draw(res, u(i, StreamSample))))
	}
	n := len(drafts)
	return n, append(out, int32(Draw(target[n], u(n, StreamSample))))
}
