// Package engram is DeepSeek-V4.1's hashed n-gram memory (MODEL.md §2, "Engram"): the
// compressed token map built from the tokenizer, the prime-sized bucket layout of the
// n-gram tables, and the XOR n-gram hashes that index them.
//
// A position is hashed as max_ngram-1 n-grams (the 2-gram up to the max_ngram-gram
// ending there), each split over n_heads heads. Every (layer, n-gram size, head) owns a
// bucket range whose size is a prime, drawn in order above engram_vocab_size-1 and never
// reused, so the ranges of one layer's table are disjoint and laid end to end. The
// n-gram's hash is the XOR of its compressed token ids, each multiplied by a per-layer,
// per-lookback odd multiplier; the running XOR after k lookbacks is the (k+1)-gram's
// hash, reduced modulo its bucket prime.
package engram

import (
	"fmt"
	"math"
	"math/big"
)

// Layout is the bucket layout and hash constants of every Engram layer.
type Layout struct {
	Layers   []int // backbone layer ids, in config order
	MaxNgram int
	Heads    int
	// Primes[l] lists the bucket sizes of layer l, n-gram size major then head:
	// entry (n-2)·Heads + h is the n-gram size n, head h.
	Primes [][]int64
	// Offsets[l][c] is the first row of column c's bucket range in layer l's table.
	Offsets [][]int64
	// Mult[l][k] multiplies the token k positions back (k = 0 is the current token).
	Mult [][]int64
}

// Cols is the number of table rows each position reads per layer.
func (l *Layout) Cols() int { return (l.MaxNgram - 1) * l.Heads }

// Rows is the table size of layer index li: the sum of its primes.
func (l *Layout) Rows(li int) int64 {
	var n int64
	for _, p := range l.Primes[li] {
		n += p
	}
	return n
}

// NewLayout derives the layout from the config: the layer ids, max n-gram size, heads,
// engram_vocab_size (where the prime search starts) and engram_compressed_vocab_size
// (which bounds the multipliers).
func NewLayout(layers []int, maxNgram, heads int, vocab, compressedVocab int64) (*Layout, error) {
	switch {
	case len(layers) == 0:
		return nil, fmt.Errorf("engram: no layers")
	case maxNgram < 2 || maxNgram > 16:
		return nil, fmt.Errorf("engram: max n-gram size %d is outside [2, 16]", maxNgram)
	case heads < 1 || heads > 1024:
		return nil, fmt.Errorf("engram: %d heads is outside [1, 1024]", heads)
	case vocab < 1 || vocab > 1<<40:
		return nil, fmt.Errorf("engram: vocab size %d is outside [1, 2^40]", vocab)
	case compressedVocab < 1 || compressedVocab > 1<<31:
		return nil, fmt.Errorf("engram: compressed vocab size %d is outside [1, 2^31]", compressedVocab)
	}
	l := &Layout{Layers: append([]int(nil), layers...), MaxNgram: maxNgram, Heads: heads}
	seen := map[int64]bool{}
	for _, id := range layers {
		if id < 0 {
			return nil, fmt.Errorf("engram: negative layer id %d", id)
		}
		var primes, offs []int64
		var off int64
		for n := 0; n < maxNgram-1; n++ {
			cur := vocab - 1
			for h := 0; h < heads; h++ {
				cur = nextPrime(cur, seen)
				seen[cur] = true
				primes = append(primes, cur)
				offs = append(offs, off)
				off += cur
			}
		}
		l.Primes = append(l.Primes, primes)
		l.Offsets = append(l.Offsets, offs)
		l.Mult = append(l.Mult, Multipliers(id, maxNgram, compressedVocab))
	}
	return l, nil
}

// nextPrime is the smallest prime above start not in seen.
func nextPrime(start int64, seen map[int64]bool) int64 {
	c := start + 1
	for !big.NewInt(c).ProbablyPrime(20) || seen[c] {
		c++
	}
	return c
}

// Multipliers are layer id's odd hash multipliers, one per lookback, bounded so that
// a compressed id times a multiplier cannot overflow int64: the reference draws
// default_rng(10007·layer).integers(0, (2^63-1) // compressedVocab // 2) and maps v
// to 2v+1.
func Multipliers(layerID, maxNgram int, compressedVocab int64) []int64 {
	bound := max(int64(1), (math.MaxInt64/compressedVocab)/2)
	v := newPCG64(uint64(10007*layerID)).integers(bound, maxNgram)
	for i := range v {
		v[i] = 2*v[i] + 1
	}
	return v
}

// Hash writes layer li's Cols() table rows for one position into out. toks holds the
// compressed ids of the position and its MaxNgram-1 predecessors (toks[k] is k back),
// with the pad id already put where the look-back runs past the sequence start.
func (l *Layout) Hash(li int, toks []int64, out []int32) {
	mult, primes, offs := l.Mult[li], l.Primes[li], l.Offsets[li]
	rolling := toks[0] * mult[0]
	for k := 1; k < l.MaxNgram; k++ {
		rolling ^= toks[k] * mult[k]
		for h := 0; h < l.Heads; h++ {
			c := (k-1)*l.Heads + h
			out[c] = int32(rolling%primes[c] + offs[c])
		}
	}
}
