package grammars

import (
	"fmt"
	"math/bits"
	"strings"
)

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) addRange(lo, hi int) {
	for c := lo; c <= hi; c++ {
		s.add(byte(c))
	}
}
func (s *byteSet) count() int {
	return bits.OnesCount64(s[0]) + bits.OnesCount64(s[1]) + bits.OnesCount64(s[2]) + bits.OnesCount64(s[3])
}
func (s *byteSet) empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }

func (s *byteSet) String() string {
	var sb strings.Builder
	sb.WriteByte('[')
	for c := 0; c < 256; c++ {
		if !s.has(byte(c)) {
			continue
		}
		e := c
		for e+1 < 256 && s.has(byte(e+1)) {
			e++
		}
		sb.WriteString(fmt.Sprintf("%02x", c))
		if e > c {
			sb.WriteString(fmt.Sprintf("-%02x", e))
		}
		c = e
	}
	sb.WriteByte(']')
	return sb.String()
}

// exprOp is the operator of an expression node.
type exprOp uint8

const (
	eEmpty  exprOp = iota // the empty string
	eNone                 // no string at all
	eBytes                // a literal byte string
	eSet                  // one byte from a set
	eSeq                  // concatenation
	eAlt                  // alternation
	eRep                  // repetition {min,max}; max < 0 is unbounded
	eCall                 // a call of another symbol (rule or leaf automaton)
	eGuard                // zero width: the path continues only if the guard holds on aux
	eEffect               // zero width: changes aux
	eTrack                // the byte edges inside advance aux's exclusion-trie position
)

// auxKind names a guard or an effect on an item's aux value (object member sets,
// counters, exclusion-trie positions).
type auxKind uint8

const (
	auxNone     auxKind = iota
	gNotBit             // guard: bit arg not set
	gHasBits            // guard: every bit of bitset arg (index into automaton's sets) is set
	gCountLT            // guard: bits set + count < arg
	gCountGE            // guard: bits set + count >= arg
	gTrieOK             // guard: exclusion-trie position is not a terminal (an excluded string)
	gTrieStart          // effect: start tracking at the root of trie arg
	fSetBit             // effect: set bit arg (fails if already set)
	fInc                // effect: count++, saturating at arg
	fResetCount         // effect: count = 0
	gCharLT             // guard (char start): count < aux max (if any); marks a character boundary (arg 1: of a search's tail, nnode.univ; arg 2: of its head)
	gCharGE             // guard: count >= aux min
	fCharInc            // effect: count++ when the string is length-bounded
	gUnionLT            // guard: bits of (set arg | item bits) + count < arg2 (room for an optional member)
)

type auxOp struct {
	kind auxKind
	arg  int32
	arg2 int32
}

// expr is the grammar expression tree that every front end produces. Leaves are bytes,
// so a front end encodes characters (UTF-8, or JSON-string escapes) itself.
type expr struct {
	op   exprOp
	lit  []byte
	set  byteSet
	subs []*expr
	min  int
	max  int
	ref  int32 // eCall: symbol id
	aux  auxOp
}

var (
	exprEmptyV = &expr{op: eEmpty}
	exprNoneV  = &expr{op: eNone}
)

func eLit(s string) *expr {
	if s == "" {
		return exprEmptyV
	}
	return &expr{op: eBytes, lit: []byte(s)}
}

func eLitBytes(b []byte) *expr {
	if len(b) == 0 {
		return exprEmptyV
	}
	return &expr{op: eBytes, lit: append([]byte(nil), b...)}
}

func eByteSet(s byteSet) *expr {
	if s.empty() {
		return exprNoneV
	}
	return &expr{op: eSet, set: s}
}

func eByteRange(lo, hi byte) *expr {
	var s byteSet
	s.addRange(int(lo), int(hi))
	return &expr{op: eSet, set: s}
}

func eSeqOf(subs ...*expr) *expr {
	out := make([]*expr, 0, len(subs))
	for _, s := range subs {
		switch s.op {
		case eNone:
			return exprNoneV
		case eEmpty:
			continue
		case eSeq:
			out = append(out, s.subs...)
			continue
		}
		out = append(out, s)
	}
	switch len(out) {
	case 0:
		return exprEmptyV
	case 1:
		return out[0]
	}
	return &expr{op: eSeq, subs: out}
}

func eAltOf(subs ...*expr) *expr {
	out := make([]*expr, 0, len(subs))
	for _, s := range subs {
		switch s.op {
		case eNone:
			continue
		case eAlt:
			out = append(out, s.subs...)
			continue
		}
		out = append(out, s)
	}
	switch len(out) {
	case 0:
		return exprNoneV
	case 1:
		return out[0]
	}
	return &expr{op: eAlt, subs: out}
}

func eRepOf(sub *expr, min, max int) *expr {
	if max >= 0 && max < min {
		return exprNoneV
	}
	if max == 0 {
		return exprEmptyV
	}
	if sub.op == eNone {
		if min == 0 {
			return exprEmptyV
		}
		return exprNoneV
	}
	if sub.op == eEmpty {
		return exprEmptyV
	}
	if min == 1 && max == 1 {
		return sub
	}
	return &expr{op: eRep, subs: []*expr{sub}, min: min, max: max}
}

func eOpt(sub *expr) *expr  { return eRepOf(sub, 0, 1) }
func eStar(sub *expr) *expr { return eRepOf(sub, 0, -1) }
func eCallOf(sym int32) *expr {
	return &expr{op: eCall, ref: sym}
}
func eGuardOf(k auxKind, arg int32) *expr  { return &expr{op: eGuard, aux: auxOp{kind: k, arg: arg}} }
func eEffectOf(k auxKind, arg int32) *expr { return &expr{op: eEffect, aux: auxOp{kind: k, arg: arg}} }
func eTrackOf(sub *expr) *expr             { return &expr{op: eTrack, subs: []*expr{sub}} }

// size estimates the NFA nodes an expression needs (for limits), saturating at limit.
func (e *expr) size(limit int) int {
	switch e.op {
	case eEmpty, eNone:
		return 1
	case eBytes:
		return len(e.lit) + 1
	case eSet, eCall, eGuard, eEffect:
		return 2
	case eSeq, eAlt, eTrack:
		n := 2
		for _, s := range e.subs {
			n += s.size(limit)
			if n > limit {
				return limit + 1
			}
		}
		return n
	case eRep:
		k := e.max
		if k < 0 {
			k = e.min + 1
		}
		s := e.subs[0].size(limit)
		if k > 0 && s > limit/k {
			return limit + 1
		}
		return s*k + 2
	}
	return 1
}

// nullable reports whether e matches the empty string (calls are assumed not to).
func (e *expr) nullable(callNullable func(int32) bool) bool {
	switch e.op {
	case eEmpty, eGuard, eEffect:
		return true
	case eNone, eBytes, eSet:
		return false
	case eCall:
		return callNullable(e.ref)
	case eSeq:
		for _, s := range e.subs {
			if !s.nullable(callNullable) {
				return false
			}
		}
		return true
	case eAlt:
		for _, s := range e.subs {
			if s.nullable(callNullable) {
				return true
			}
		}
		return false
	case eRep:
		return e.min == 0 || e.subs[0].nullable(callNullable)
	case eTrack:
		return e.subs[0].nullable(callNullable)
	}
	return false
}

// literal returns the single string e matches, if it matches exactly one string
// without calls.
func (e *expr) literal() ([]byte, bool) {
	switch e.op {
	case eEmpty:
		return nil, true
	case eBytes:
		return e.lit, true
	case eSet:
		if e.set.count() == 1 {
			for c := 0; c < 256; c++ {
				if e.set.has(byte(c)) {
					return []byte{byte(c)}, true
				}
			}
		}
		return nil, false
	case eSeq:
		var out []byte
		for _, s := range e.subs {
			l, ok := s.literal()
			if !ok {
				return nil, false
			}
			out = append(out, l...)
		}
		return out, true
	}
	return nil, false
}
