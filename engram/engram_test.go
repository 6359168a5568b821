package engram

import (
	"slices"
	"testing"
)

// Values numpy 2.5.2 printed for SeedSequence(10007).generate_state(4, uint64) and for
// default_rng(12345).bit_generator.random_raw(3).
func TestSeedSequenceAndPCG64(t *testing.T) {
	want := []uint64{8634291315755388167, 11042498673593962405, 15418481100450270793, 9041516862649747678}
	if got := seedSequenceState(10007, 4); !slices.Equal(got, want) {
		t.Fatalf("SeedSequence(10007) = %v, want %v", got, want)
	}
	p := newPCG64(12345)
	raw := []uint64{p.next64(), p.next64(), p.next64()}
	if w := []uint64{4193609425186963869, 5843160025838961886, 14708796524633321433}; !slices.Equal(raw, w) {
		t.Fatalf("PCG64(12345) = %v, want %v", raw, w)
	}
}

// Multipliers against numpy: default_rng(10007·layer).integers(0, bound, 4) (before the
// 2v+1 map), for the tiny fixture's compressed vocab (418) and the release's (99,092).
func TestMultipliers(t *testing.T) {
	for _, c := range []struct {
		vocab int64
		layer int
		want  []int64
	}{
		{418, 0, []int64{7027433750464757, 2976487119192136, 452050304933610, 182345133216701}},
		{418, 1, []int64{9083286676333292, 573675839519884, 4262339532857611, 8769800530415101}},
		{418, 3, []int64{3262802763910717, 9679159727812102, 1289373155061196, 8332374110514466}},
		{418, 14, []int64{8026548097816850, 6105632616646373, 3665141312215400, 9792947836017169}},
		{99092, 0, []int64{29643839136299, 12555722115027, 1906884788502, 769186873658}},
		{99092, 1, []int64{38316048023122, 2419938046656, 17979836159674, 36993668729195}},
		{99092, 3, []int64{13763488024408, 40829620617460, 5438965595765, 35148471906864}},
		{99092, 14, []int64{33858405369630, 25755403400457, 15460673601360, 41309613242795}},
	} {
		got := Multipliers(c.layer, 4, c.vocab)
		for i := range got {
			if got[i] != 2*c.want[i]+1 {
				t.Errorf("vocab %d layer %d: multipliers %v, want 2·%v+1", c.vocab, c.layer, got, c.want)
				break
			}
		}
	}
}

// The tiny fixture's layout: engram_num_embeddings [660, 864] are exactly the prime sums.
func TestLayoutPrimes(t *testing.T) {
	l, err := NewLayout([]int{0, 1}, 4, 2, 100, 418)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.Primes[0], []int64{101, 103, 107, 109, 113, 127}) || !slices.Equal(l.Primes[1], []int64{131, 137, 139, 149, 151, 157}) {
		t.Fatalf("primes %v", l.Primes)
	}
	if l.Rows(0) != 660 || l.Rows(1) != 864 {
		t.Fatalf("rows %d %d, want 660 864", l.Rows(0), l.Rows(1))
	}
	if !slices.Equal(l.Offsets[0], []int64{0, 101, 204, 311, 420, 533}) {
		t.Fatalf("offsets %v", l.Offsets[0])
	}
	full, err := NewLayout([]int{1, 14}, 4, 8, 16000000, 99092)
	if err != nil {
		t.Fatal(err)
	}
	if full.Rows(0) != 384006168 || full.Rows(1) != 384016682 {
		t.Fatalf("release rows %d %d, want 384006168 384016682", full.Rows(0), full.Rows(1))
	}
}
