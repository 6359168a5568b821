package placement

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Synthetic describes generated expert loads, for benchmarks and tests when no routing
// statistics are at hand.
//
// The model: layer l routes T_l token-expert assignments, T_l = Tokens·(0.5+U) with U
// uniform on [0,1), so layers differ in volume as real ones do. The layer draws its own
// random permutation π_l of the experts; the expert of popularity rank k (1-based) is
// π_l(k) and is chosen with probability p_k = k^-S / Σ_j j^-S (Zipf; S = 0 is uniform
// routing). Its load is the multinomial count of T_l draws, in the normal approximation
// round(T_l·p_k + sqrt(T_l·p_k·(1-p_k))·z), z standard normal, clamped at 0: integer
// token counts, as EPLB's statistics are, so float32 represents them exactly (below
// 2^24) and eplb's arithmetic is exact on them.
//
// Everything derives from the seed through splitmix64, so the same seed gives the same
// loads on every run (and, with the rounding to integers, on every platform barring a
// last-ulp difference in math.Pow landing exactly on a .5).
type Synthetic struct {
	// Kind is "zipf" or "uniform".
	Kind string
	// S is the Zipf exponent (0 for uniform).
	S float64
	// Experts and Layers are the matrix's shape.
	Experts, Layers int
	// Tokens is the mean number of token-expert assignments per layer; 0 means
	// DefaultTokens.
	Tokens float64
}

// DefaultTokens is the default mean routed assignments per layer: about 131k tokens
// with top-8 routing, a few decode minutes of a busy server.
const DefaultTokens = 1 << 20

// Bounds on generated sizes, so a mistyped spec cannot ask for gigabytes.
const (
	maxSynthExperts = 1 << 16
	maxSynthLayers  = 1 << 12
)

// ParseSynthetic parses "zipf:S:EXPERTS:LAYERS[:TOKENS]" or
// "uniform:EXPERTS:LAYERS[:TOKENS]", e.g. zipf:1.1:256:61.
func ParseSynthetic(spec string) (Synthetic, error) {
	parts := strings.Split(spec, ":")
	bad := func(why string) (Synthetic, error) {
		return Synthetic{}, fmt.Errorf("synthetic %q: %s (want zipf:S:EXPERTS:LAYERS[:TOKENS] or uniform:EXPERTS:LAYERS[:TOKENS])", spec, why)
	}
	var s Synthetic
	var rest []string
	switch parts[0] {
	case "zipf":
		if len(parts) < 4 || len(parts) > 5 {
			return bad("wrong number of fields")
		}
		v, err := strconv.ParseFloat(parts[1], 64)
		if err != nil || !(v >= 0 && v <= 10) {
			return bad("S must be a number in [0, 10]")
		}
		s = Synthetic{Kind: "zipf", S: v}
		rest = parts[2:]
	case "uniform":
		if len(parts) < 3 || len(parts) > 4 {
			return bad("wrong number of fields")
		}
		s = Synthetic{Kind: "uniform"}
		rest = parts[1:]
	default:
		return bad("unknown kind " + strconv.Quote(parts[0]))
	}
	e, err := strconv.Atoi(rest[0])
	if err != nil || e < 1 || e > maxSynthExperts {
		return bad(fmt.Sprintf("EXPERTS must be an integer in [1, %d]", maxSynthExperts))
	}
	l, err := strconv.Atoi(rest[1])
	if err != nil || l < 1 || l > maxSynthLayers {
		return bad(fmt.Sprintf("LAYERS must be an integer in [1, %d]", maxSynthLayers))
	}
	s.Experts, s.Layers = e, l
	if len(rest) == 3 {
		t, err := strconv.ParseFloat(rest[2], 64)
		if err != nil || !(t > 0 && t <= 1e12) {
			return bad("TOKENS must be a number in (0, 1e12]")
		}
		s.Tokens = t
	}
	return s, nil
}

// String is the spec ParseSynthetic reads back.
func (s Synthetic) String() string {
	var b strings.Builder
	b.WriteString(s.Kind)
	if s.Kind == "zipf" {
		fmt.Fprintf(&b, ":%g", s.S)
	}
	fmt.Fprintf(&b, ":%d:%d", s.Experts, s.Layers)
	if s.Tokens != 0 {
		fmt.Fprintf(&b, ":%g", s.Tokens)
	}
	return b.String()
}

// Generate draws the loads for a seed.
func (s Synthetic) Generate(seed uint64) Loads {
	exp := s.S
	if s.Kind == "uniform" {
		exp = 0
	}
	tokens := s.Tokens
	if tokens == 0 {
		tokens = DefaultTokens
	}
	return zipfLoads(exp, s.Experts, s.Layers, tokens, seed)
}

// Zipf returns layers × experts loads under the Zipf model of Synthetic, with
// DefaultTokens assignments per layer on average.
func Zipf(s float64, experts, layers int, seed uint64) Loads {
	return zipfLoads(s, experts, layers, DefaultTokens, seed)
}

// Uniform returns loads of uniform routing (Zipf with S = 0): equal probabilities, so
// the only imbalance is sampling noise.
func Uniform(experts, layers int, seed uint64) Loads {
	return zipfLoads(0, experts, layers, DefaultTokens, seed)
}

func zipfLoads(s float64, experts, layers int, tokens float64, seed uint64) Loads {
	prob := make([]float64, experts)
	h := 0.0
	for k := range prob {
		prob[k] = math.Pow(float64(k+1), -s)
		h += prob[k]
	}
	for k := range prob {
		prob[k] /= h
	}
	rng := splitmix{state: seed}
	out := make(Loads, layers)
	perm := make([]int, experts)
	for l := range out {
		// float64(...) conversions keep the compiler from fusing a*b+c into one FMA on
		// the architectures that have it, so results match across platforms.
		t := float64(tokens * (0.5 + rng.float()))
		for i := range perm {
			perm[i] = i
		}
		for i := experts - 1; i > 0; i-- { // Fisher–Yates
			j := rng.below(i + 1)
			perm[i], perm[j] = perm[j], perm[i]
		}
		row := make([]float64, experts)
		for k, e := range perm {
			mean := float64(t * prob[k])
			sd := math.Sqrt(float64(mean * (1 - prob[k])))
			row[e] = max(0, math.Round(mean+float64(sd*rng.normal())))
		}
		out[l] = row
	}
	return out
}

// splitmix is Steele, Lea and Flood's SplitMix64: tiny, fully specified, and ours, so
// the loads for a seed never change with the Go release.
type splitmix struct{ state uint64 }

func (r *splitmix) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float is uniform on [0, 1) with 53 random bits.
func (r *splitmix) float() float64 { return float64(r.next()>>11) * 0x1p-53 }

// below is uniform on [0, n) (Lemire's multiply-high; the bias is below 2^-40 here).
func (r *splitmix) below(n int) int {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int(hi)
}

// normal is a standard normal draw (Box–Muller, cosine branch).
func (r *splitmix) normal() float64 {
	u1 := 1 - r.float() // (0, 1]
	u2 := r.float()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}
