package sampling

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"deepinfer/internal/sleef"
)

func TestGreedyAndMask(t *testing.T) {
	logits := []float32{0.1, 2, -1, 2, 0.5}
	var s Scratch
	if got := Row(logits, Params{}, nil, &s); got != 1 {
		t.Fatalf("greedy = %d, want 1 (lowest index on ties)", got)
	}
	if got := Row(logits, Params{}, func(i int) bool { return i != 1 && i != 3 }, &s); got != 4 {
		t.Fatalf("masked greedy = %d, want 4", got)
	}
	if got := Row(logits, Params{Temperature: 1, U: 0.99}, func(i int) bool { return i == 2 }, &s); got != 2 {
		t.Fatalf("masked sampling = %d, want the only allowed id 2", got)
	}
}

// draw samples n tokens with uniform random numbers from a fixed stream.
func draw(logits []float32, p Params, n int) map[int]int {
	rng := rand.New(rand.NewPCG(7, 9))
	var s Scratch
	count := map[int]int{}
	for i := 0; i < n; i++ {
		p.U = rng.Float64()
		count[Row(logits, p, nil, &s)]++
	}
	return count
}

func TestDistribution(t *testing.T) {
	logits := []float32{0, float32(math.Ln2)} // p(1) = 2/3 at temperature 1
	for _, c := range []struct{ temp, want float64 }{{1, 2.0 / 3}, {2, math.Sqrt2 / (1 + math.Sqrt2)}} {
		n := 40000
		got := float64(draw(logits, Params{Temperature: c.temp}, n)[1]) / float64(n)
		if math.Abs(got-c.want) > 0.01 {
			t.Errorf("temperature %g: p(1) = %.4f, want %.4f", c.temp, got, c.want)
		}
	}
}

func TestCuts(t *testing.T) {
	logits := []float32{float32(math.Log(0.2)), float32(math.Log(0.5)), float32(math.Log(0.3))}
	seen := draw(logits, Params{Temperature: 1, TopP: 0.6}, 2000)
	if seen[1] == 0 || seen[2] == 0 || seen[0] != 0 {
		t.Errorf("top_p 0.6 drew %v, want ids 1 and 2 only", seen)
	}
	if seen := draw(logits, Params{Temperature: 5, TopK: 1}, 200); seen[1] != 200 {
		t.Errorf("top_k 1 drew %v, want only id 1", seen)
	}
	// the same u gives the same token
	var s Scratch
	a := Row(logits, Params{Temperature: 1, U: 0.42}, nil, &s)
	b := Row(logits, Params{Temperature: 1, U: 0.42}, nil, &s)
	if a != b {
		t.Fatal("Row is not a function of its inputs")
	}
}

// refRow is Row's definition written out plainly (every allowed id sorted, zero masses
// too; the cuts by position; the draw by a scan of the ids), for the differential tests.
func refRow(logits []float32, p Params, allowed func(int) bool) int {
	if !(p.Temperature > 0) {
		var s Scratch
		return Row(logits, p, allowed, &s)
	}
	var ids []int
	for i := range logits {
		if allowed == nil || allowed(i) {
			ids = append(ids, i)
		}
	}
	if len(ids) == 0 {
		return 0
	}
	mx := float32(math.Inf(-1))
	for _, i := range ids {
		if math.IsNaN(float64(logits[i])) {
			return ids[len(ids)-1]
		}
		mx = max(mx, logits[i])
	}
	if math.IsInf(float64(mx), 0) {
		return ids[len(ids)-1]
	}
	e := map[int]float32{}
	var total uint64
	for _, i := range ids {
		e[i] = sleef.Exp((logits[i] - mx) / float32(p.Temperature))
		total += mass(e[i])
	}
	sorted := append([]int(nil), ids...)
	sort.SliceStable(sorted, func(a, b int) bool { return e[sorted[a]] > e[sorted[b]] })
	keep := len(sorted)
	if p.TopK > 0 && p.TopK < keep {
		keep = p.TopK
	}
	if tp := float32(p.TopP); tp > 0 && tp < 1 {
		need := uint64(math.Ceil(float64(tp) * float64(total)))
		var acc uint64
		for j := 0; j < keep; j++ {
			if acc += mass(e[sorted[j]]); acc >= need {
				keep = j + 1
				break
			}
		}
	}
	kept := map[int]bool{}
	var m uint64
	for _, i := range sorted[:keep] {
		kept[i] = true
		m += mass(e[i])
	}
	u := uint64(0)
	if x := float64(float32(p.U)) * float64(m); x >= 1 {
		u = min(uint64(min(x, float64(m-1))), m-1)
	}
	var acc uint64
	for _, i := range ids {
		if kept[i] {
			if acc += mass(e[i]); acc > u {
				return i
			}
		}
	}
	return -1
}

// TestRowMatchesDefinition: Row against refRow on flat, peaked and tied rows, every
// kind of cut, with and without a mask; and the rows Row does not sample by mass.
func TestRowMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var s Scratch
	for trial := 0; trial < 3000; trial++ {
		v := 1 + rng.IntN(300)
		logits := make([]float32, v)
		for i := range logits {
			switch trial % 4 {
			case 0:
				logits[i] = float32(rng.NormFloat64())
			case 1:
				logits[i] = float32(rng.IntN(3)) // ties
			case 2:
				logits[i] = float32(rng.NormFloat64()) + float32(30*(rng.IntN(50)/49)) // peaked
			default:
				logits[i] = float32(rng.NormFloat64() * 40) // masses below 2^-40
			}
		}
		p := Params{Temperature: []float64{0.3, 0.7, 1, 1.7}[rng.IntN(4)], U: rng.Float64()}
		if rng.IntN(2) == 0 {
			p.TopK = rng.IntN(v + 3)
		}
		if rng.IntN(2) == 0 {
			p.TopP = []float64{0.1, 0.5, 0.9, 0.999, 1, 0}[rng.IntN(6)]
		}
		var allowed func(int) bool
		if trial%3 == 0 {
			bits := rng.Uint64()
			allowed = func(i int) bool { return bits>>(i%64)&1 != 0 }
		}
		got, want := Row(logits, p, allowed, &s), refRow(logits, p, allowed)
		if got != want {
			t.Fatalf("trial %d (%+v, %d ids): Row %d, the definition %d", trial, p, v, got, want)
		}
		if allowed != nil && !allowed(got) && got != 0 {
			t.Fatalf("trial %d: Row drew %d, not allowed", trial, got)
		}
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		logits []float32
		want   int
	}{
		{[]float32{1, nan, 2, 0}, 3},     // a NaN: the last allowed id
		{[]float32{1, inf, 2, 0}, 3},     // +Inf largest
		{[]float32{-inf, -inf, -inf}, 2}, // every logit -Inf
		{[]float32{-inf, 5, -inf}, 1},    // the others have no mass
		{[]float32{0, 0, 0, 0}, 2},       // uniform: U = 0.6 falls in the third quarter
	} {
		if got := Row(c.logits, Params{Temperature: 1, U: 0.6}, nil, &s); got != c.want {
			t.Errorf("%v: Row %d, want %d", c.logits, got, c.want)
		}
	}
	if got := Row([]float32{1, 2}, Params{Temperature: 1, U: 0.5}, func(int) bool { return false }, &s); got != 0 {
		t.Errorf("nothing allowed: Row %d, want 0", got)
	}
	// temperature below 0 or NaN is greedy
	for _, temp := range []float64{-1, math.NaN()} {
		if got := Row([]float32{1, 3, 2}, Params{Temperature: temp, U: 0.1}, nil, &s); got != 1 {
			t.Errorf("temperature %v: Row %d, want the greedy 1", temp, got)
		}
	}
}

// FuzzRow: any row and parameters give an allowed id in range (0 when none is allowed),
// the definition's.
func FuzzRow(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 1.0, 0.9, 3, 0.5, uint64(0))
	f.Add([]byte{0x7f, 0xc0, 0, 0, 0, 0, 0x80, 0x3f}, 0.5, 0.0, 0, 0.99, uint64(5))
	f.Fuzz(func(t *testing.T, raw []byte, temp, topP float64, topK int, u float64, mask uint64) {
		logits := make([]float32, len(raw)/4)
		for i := range logits {
			logits[i] = math.Float32frombits(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
		}
		if len(logits) == 0 || math.IsInf(temp, 0) || topK < 0 || topK > 1<<20 {
			return
		}
		u = math.Abs(math.Mod(u, 1))
		var allowed func(int) bool
		if mask != 0 {
			allowed = func(i int) bool { return mask>>(i%64)&1 != 0 }
		}
		var s Scratch
		p := Params{Temperature: temp, TopP: topP, TopK: topK, U: u}
		got := Row(logits, p, allowed, &s)
		if got < 0 || got >= len(logits) {
			t.Fatalf("Row %d of %d ids", got, len(logits))
		}
		if allowed != nil && !allowed(got) {
			any := false
			for i := range logits {
				any = any || allowed(i)
			}
			if any {
				t.Fatalf("Row drew %d, not allowed", got)
			}
		}
		if want := refRow(logits, p, allowed); got != want {
			t.Fatalf("%+v: Row %d, the definition %d", p, got, want)
		}
	})
}

// TestRowSeesUAsFloat32: a row's token depends on U only through float32(U), the precision
// a step's parameters reach a device with, so the VM's host path (float64 U) and the
// device (float32 U) draw the same token. For a flat row the test puts U just below the
// cumulative probability at which the draw moves to the next id, where float32(U) lies
// just above it, and requires Row to give both the same token (it does not when Row uses
// U's float64 value).
func TestRowSeesUAsFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var s Scratch
	logits := make([]float32, 20000)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 0.01)
	}
	for _, topP := range []float64{0, 0.9} {
		p := Params{Temperature: 1, TopP: topP}
		probs := Probs(logits, p, make([]float64, len(logits)), &s)
		var c float64
		checked := 0
		for _, q := range probs {
			c += q
			u := c - 0x1p-35
			if q == 0 || c >= 1 || float64(float32(u)) < c+0x1p-40 {
				continue
			}
			p.U = u
			a := Row(logits, p, nil, &s)
			p.U = float64(float32(u))
			if b := Row(logits, p, nil, &s); a != b {
				t.Fatalf("top-p %g: U %v draws %d, float32(U) %v draws %d", topP, u, a, p.U, b)
			}
			if checked++; checked == 200 {
				break
			}
		}
		if checked < 200 {
			t.Fatalf("top-p %g: %d boundaries checked", topP, checked)
		}
	}
}
