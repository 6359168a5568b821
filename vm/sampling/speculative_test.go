package sampling

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// chiSquareP is the p-value of Pearson's goodness-of-fit test of counts against the
// expected probabilities (categories with zero probability must have zero counts).
func chiSquareP(t *testing.T, counts []int, probs []float64) float64 {
	t.Helper()
	n := 0
	for _, c := range counts {
		n += c
	}
	var x2 float64
	df := -1
	for i, p := range probs {
		if p == 0 {
			if counts[i] != 0 {
				t.Fatalf("category %d has probability 0 and %d samples", i, counts[i])
			}
			continue
		}
		e := p * float64(n)
		x2 += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
		df++
	}
	return distuv.ChiSquared{K: float64(df)}.Survival(x2)
}

// A tiny model: the target's next-token distribution depends on the previous token
// (a Markov chain over 6 ids), the drafter's on its own previous draft, and they
// differ.
var (
	targetT = [][]float64{
		{0.05, 0.30, 0.20, 0.10, 0.25, 0.10},
		{0.40, 0.05, 0.05, 0.20, 0.10, 0.20},
		{0.10, 0.10, 0.50, 0.10, 0.10, 0.10},
		{0.25, 0.25, 0, 0.25, 0.25, 0},
		{0.02, 0.08, 0.30, 0.30, 0.20, 0.10},
		{0.15, 0.15, 0.15, 0.15, 0.20, 0.20},
	}
	draftQ = [][]float64{
		{0.20, 0.20, 0.20, 0.20, 0.10, 0.10},
		{0.50, 0.10, 0.10, 0.10, 0.10, 0.10},
		{0.05, 0.05, 0.70, 0.05, 0.05, 0.10},
		{0.10, 0.40, 0.10, 0.20, 0.10, 0.10},
		{0.10, 0.10, 0.20, 0.20, 0.30, 0.10},
		{0.30, 0.10, 0.10, 0.10, 0.10, 0.30},
	}
)

// generate draws n tokens after x0 with speculation (groups of gamma drafts) when
// gamma > 0, else one by one from the target; verify decides each group.
func generate(seed uint64, x0 int32, n, gamma int, verify func(target, draft [][]float64, drafts []int32, u func(i, s int) float64, res []float64) (int, []int32)) []int32 {
	var out []int32
	last := x0
	res := make([]float64, 6)
	for len(out) < n {
		base := len(out)
		if gamma == 0 {
			last = int32(Draw(targetT[last], Uniform(seed, base, StreamSample)))
			out = append(out, last)
			continue
		}
		drafts := make([]int32, gamma)
		draft := make([][]float64, gamma)
		target := make([][]float64, gamma+1)
		prev := last
		target[0] = targetT[last]
		for i := range drafts {
			draft[i] = draftQ[prev]
			drafts[i] = int32(Draw(draft[i], Uniform(seed, base+i, StreamDraft)))
			prev = drafts[i]
			target[i+1] = targetT[prev]
		}
		_, toks := verify(target, draft, drafts, func(i, s int) float64 { return Uniform(seed, base+i, s) }, res)
		out = append(out, toks...)
		last = toks[len(toks)-1]
	}
	return out[:n]
}

// TestSpeculativeSamplingChiSquare: over 20,000 seeds, the first three tokens drawn
// with speculation (γ = 3, so groups end at every length) have the target's joint
// distribution, as do plain draws: Pearson's chi-square over the 216 triples gives
// p > 0.01 for both, and a verifier that accepts every draft is rejected (p < 1e-6),
// so the test can tell.
func TestSpeculativeSamplingChiSquare(t *testing.T) {
	const seeds, x0 = 20000, 0
	exact := make([]float64, 216)
	for a := 0; a < 6; a++ {
		for b := 0; b < 6; b++ {
			for c := 0; c < 6; c++ {
				exact[a*36+b*6+c] = targetT[x0][a] * targetT[a][b] * targetT[b][c]
			}
		}
	}
	acceptAll := func(target, draft [][]float64, drafts []int32, u func(i, s int) float64, res []float64) (int, []int32) {
		n := len(drafts)
		return n, append(append([]int32(nil), drafts...), int32(Draw(target[n], u(n, StreamSample))))
	}
	for _, c := range []struct {
		name   string
		gamma  int
		verify func([][]float64, [][]float64, []int32, func(int, int) float64, []float64) (int, []int32)
		wantOK bool
	}{
		{"plain", 0, nil, true},
		{"speculative γ=1", 1, Verify, true},
		{"speculative γ=3", 3, Verify, true},
		{"accept-every-draft (control)", 3, acceptAll, false},
	} {
		counts := make([]int, 216)
		for s := uint64(0); s < seeds; s++ {
			tk := generate(s, x0, 3, c.gamma, c.verify)
			counts[int(tk[0])*36+int(tk[1])*6+int(tk[2])]++
		}
		var p float64
		if c.wantOK {
			p = chiSquareP(t, counts, exact)
		} else {
			// the control draws triples the target never makes, so test on the mixture
			mix := make([]float64, 216)
			for i := range mix {
				mix[i] = exact[i]
			}
			p = chiSquareWithFloor(counts, mix)
		}
		t.Logf("%s: chi-square p = %.4g over %d samples", c.name, p, seeds)
		if c.wantOK && p <= 0.01 {
			t.Errorf("%s: token distribution differs from the target's (p = %.3g ≤ 0.01)", c.name, p)
		}
		if !c.wantOK && p >= 1e-6 {
			t.Errorf("%s: the test cannot tell a wrong verifier (p = %.3g)", c.name, p)
		}
	}
}

// chiSquareWithFloor is Pearson's statistic where categories of probability 0 count
// against the fit (as if of probability 1e-9), for the control.
func chiSquareWithFloor(counts []int, probs []float64) float64 {
	n := 0
	for _, c := range counts {
		n += c
	}
	var x2 float64
	for i, p := range probs {
		e := math.Max(p, 1e-9) * float64(n)
		x2 += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
	}
	return distuv.ChiSquared{K: float64(len(probs) - 1)}.Survival(x2)
}

// TestProbsIsRowsDistribution: Row's draws follow Probs, with and without cuts
// (chi-square p > 0.01 over 20,000 draws each).
func TestProbsIsRowsDistribution(t *testing.T) {
	logits := []float32{0.3, -1, 2, 0.5, 1.5, -0.2, 0.9, 0}
	var s Scratch
	for _, p := range []Params{{Temperature: 1}, {Temperature: 0.7, TopK: 4}, {Temperature: 1.3, TopP: 0.8}, {Temperature: 1, TopK: 5, TopP: 0.9}} {
		probs := Probs(logits, p, make([]float64, len(logits)), &s)
		counts := make([]int, len(logits))
		for i := 0; i < 20000; i++ {
			p.U = Uniform(42, i, StreamSample)
			counts[Row(logits, p, nil, &s)]++
		}
		pv := chiSquareP(t, counts, probs)
		t.Logf("%+v: p = %.3g", p, pv)
		if pv <= 0.01 {
			t.Errorf("%+v: Row's draws do not follow Probs (p = %.3g)", p, pv)
		}
	}
}

// TestUniformIsAFunctionOfSeedIndexStream: the same (seed, index, stream) gives the
// same number; changing any one changes it; the numbers are uniform (chi-square over
// 20 bins, p > 0.01).
func TestUniformIsAFunctionOfSeedIndexStream(t *testing.T) {
	a := Uniform(7, 3, StreamSample)
	if a != Uniform(7, 3, StreamSample) {
		t.Fatal("Uniform is not deterministic")
	}
	for _, b := range []float64{Uniform(8, 3, StreamSample), Uniform(7, 4, StreamSample), Uniform(7, 3, StreamDraft)} {
		if a == b {
			t.Fatal("Uniform ignores one of its inputs")
		}
	}
	counts := make([]int, 20)
	exp := make([]float64, 20)
	for i := range exp {
		exp[i] = 1.0 / 20
	}
	for i := 0; i < 40000; i++ {
		u := Uniform(uint64(i/100), i%100, i%3)
		if u < 0 || u >= 1 {
			t.Fatalf("Uniform = %g outside [0, 1)", u)
		}
		counts[int(u*20)]++
	}
	if p := chiSquareP(t, counts, exp); p <= 0.01 {
		t.Errorf("Uniform is not uniform: p = %.3g", p)
	}
}
