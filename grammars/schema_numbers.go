package grammars

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// JSON Schema numbers: integer and decimal ranges for minimum/maximum as exact
// grammars, and the bounded number forms (|value| < 1e308).

// maxNumDigits bounds the numbers a schema grammar writes: |value| < 10^308 (integer
// digits plus exponent at most 308), so that every number it allows parses as a finite
// float64 (in Go's encoding/json, JavaScript, Python's float), not only as a big
// number. Integer bounds beyond it are clamped to it.
const maxNumDigits = 308

// numberSym returns the number rule for a type set and bounds; exact is false when
// the bounds are left to the semantic check.
func (j *jsc) numberSym(types uint8, zeroFrac bool, lo *big.Rat, loEx bool, hi *big.Rat, hiEx bool) (sym int32, exact bool) {
	if types&tyFrac == 0 {
		// integers: exact ranges
		var ilo, ihi *big.Int
		if lo != nil {
			ilo = ceilRat(lo, loEx)
		}
		if hi != nil {
			ihi = floorRat(hi, hiEx)
		}
		// integers as users write them: no fraction, no exponent (96, not 96.0; draft 4
		// counts 96.0 as a number that is not an integer)
		key := fmt.Sprintf("int:%v:%v:%v", ilo, ihi, zeroFrac)
		body := intRange(ilo, ihi)
		if zeroFrac {
			// a "number" with multipleOf 1 may also be written with a zero fraction
			body = eSeqOf(body, eOpt(eSeqOf(eLit("."), eRepOf(eLit("0"), 1, -1))))
		}
		return j.leaf(key, "integer", body), true
	}
	nonneg := lo != nil && lo.Sign() >= 0
	if lo == nil && hi == nil || hi == nil && lo.Sign() == 0 && !loEx {
		// no bounds, or minimum 0: exact with every number form
		key := fmt.Sprintf("num:%v", nonneg)
		sign := eOpt(eLit("-"))
		if nonneg {
			sign = exprEmptyV
		}
		return j.leaf(key, "number", eSeqOf(sign, boundedNumber())), true
	}
	if body, ok := decimalRange(lo, loEx, hi, hiEx); ok {
		key := fmt.Sprintf("dec:%v:%v:%v:%v", lo, loEx, hi, hiEx)
		return j.leaf(key, "number", body), true
	}
	// bounds without a short decimal expansion: the semantic check enforces them
	key := fmt.Sprintf("num:%v", nonneg)
	sign := eOpt(eLit("-"))
	if nonneg {
		sign = exprEmptyV
	}
	return j.leaf(key, "number", eSeqOf(sign, boundedNumber())), false
}

// maxBoundFrac bounds the fraction digits of a minimum or maximum the number grammar
// takes exactly.
const maxBoundFrac = 40

// decimalRange matches the numbers in a range (lo or hi nil: open), exactly: decimals
// without an exponent (an integer part, optionally a fraction), no negative zero,
// |value| < 10^308, and where the range holds them whole, the exponent forms Python's
// repr writes: d.ddde-k for (0, 1) and d.ddde+k for [1, 1e308), and their negatives.
// ok is false when a bound has no decimal expansion of at most maxBoundFrac digits.
func decimalRange(lo *big.Rat, loEx bool, hi *big.Rat, hiEx bool) (*expr, bool) {
	zero := new(big.Rat)
	var alts []*expr
	neg := func(r *big.Rat) *big.Rat {
		if r == nil {
			return nil
		}
		return new(big.Rat).Neg(r)
	}
	// x >= 0
	if hi == nil || hi.Sign() > 0 || hi.Sign() == 0 && !hiEx {
		l, lex := zero, false
		if lo != nil && lo.Sign() >= 0 {
			l, lex = lo, loEx
		}
		e, ok := magnitudeRange(l, lex, hi, hiEx)
		if !ok {
			return nil, false
		}
		alts = append(alts, e)
	}
	// x < 0: magnitudes in (max(0, -hi), -lo]
	if lo == nil || lo.Sign() < 0 {
		l, lex := zero, true
		if hi != nil && hi.Sign() < 0 {
			l, lex = neg(hi), hiEx
		}
		e, ok := magnitudeRange(l, lex, neg(lo), loEx)
		if !ok {
			return nil, false
		}
		alts = append(alts, eSeqOf(eLit("-"), e))
	}
	// exponent forms, where the range holds every number they can write
	one := big.NewRat(1, 1)
	var es byteSet
	es.add('e')
	es.add('E')
	digit := eByteRange('0', '9')
	mant := eSeqOf(eByteRange('1', '9'), eOpt(eSeqOf(eLit("."), eRepOf(digit, 1, -1)))) // [1, 10)
	// a negative exponent of 1 to 3 digits, not all zero: values in (0, 1)
	small := eSeqOf(mant, eByteSet(es), eLit("-"), eAltOf(
		eSeqOf(eByteRange('1', '9'), eRepOf(digit, 0, 2)),
		eSeqOf(eLit("0"), eByteRange('1', '9'), eOpt(digit)),
		eSeqOf(eLit("00"), eByteRange('1', '9'))))
	// a positive exponent up to 307: values in [1, 1e308)
	large := eSeqOf(mant, eByteSet(es), eOpt(eLit("+")), expDigitsUpTo(maxNumDigits-1))
	le := func(a *big.Rat, b *big.Rat) bool { return a.Cmp(b) <= 0 }
	if (lo == nil || lo.Sign() <= 0) && (hi == nil || le(one, hi)) {
		alts = append(alts, small)
	}
	if (hi == nil || hi.Sign() >= 0) && (lo == nil || le(lo, neg(one))) {
		alts = append(alts, eSeqOf(eLit("-"), small))
	}
	if hi == nil && (lo == nil || lo.Cmp(one) < 0 || lo.Cmp(one) == 0 && !loEx) {
		alts = append(alts, large)
	}
	if lo == nil && (hi == nil || hi.Cmp(neg(one)) > 0 || hi.Cmp(neg(one)) == 0 && !hiEx) {
		alts = append(alts, eSeqOf(eLit("-"), large))
	}
	return eAltOf(alts...), true
}

// decimalDigits writes a non-negative rational as integer digits and fraction digits
// (no trailing zeros); ok is false when its expansion does not end within
// maxBoundFrac digits.
func decimalDigits(r *big.Rat) (ip, fp string, ok bool) {
	// r * 10^k is an integer for the smallest such k
	scaled := new(big.Rat).Set(r)
	ten := big.NewRat(10, 1)
	k := 0
	for ; !scaled.IsInt(); k++ {
		if k >= maxBoundFrac {
			return "", "", false
		}
		scaled.Mul(scaled, ten)
	}
	s := scaled.Num().String()
	if len(s) <= k {
		s = strings.Repeat("0", k-len(s)+1) + s
	}
	return s[:len(s)-k], strings.TrimRight(s[len(s)-k:], "0"), true
}

// magnitudeRange matches unsigned decimals ("0", "12", "3.25", no exponent, at most
// maxNumDigits integer digits) with value in [l, h] (lex, hex: exclusive; h nil: no
// upper bound).
func magnitudeRange(l *big.Rat, lex bool, h *big.Rat, hex bool) (*expr, bool) {
	li, lf, ok := decimalDigits(l)
	if !ok {
		return nil, false
	}
	if h != nil {
		if c := l.Cmp(h); c > 0 || c == 0 && (lex || hex) {
			return exprNoneV, true
		}
	}
	var hi, hf string
	if h != nil {
		if hi, hf, ok = decimalDigits(h); !ok {
			return nil, false
		}
		if len(hi) > maxNumDigits {
			h = nil
		}
	}
	if len(li) > maxNumDigits {
		return exprNoneV, true
	}
	LI, _ := new(big.Int).SetString(li, 10)
	one := big.NewInt(1)
	anyFrac := eOpt(eSeqOf(eLit("."), eRepOf(eByteRange('0', '9'), 1, -1)))
	var alts []*expr
	if h == nil {
		alts = append(alts,
			eSeqOf(eLitBytes([]byte(li)), fracRange(lf, lex, true, "", false, false)),
			eSeqOf(natRange(new(big.Int).Add(LI, one), nil), anyFrac))
		return eAltOf(alts...), true
	}
	HI, _ := new(big.Int).SetString(hi, 10)
	if LI.Cmp(HI) == 0 {
		return eSeqOf(eLitBytes([]byte(li)), fracRange(lf, lex, true, hf, hex, true)), true
	}
	alts = append(alts,
		eSeqOf(eLitBytes([]byte(li)), fracRange(lf, lex, true, "", false, false)),
		eSeqOf(eLitBytes([]byte(hi)), fracRange("", false, false, hf, hex, true)))
	if mid := new(big.Int).Add(LI, one); mid.Cmp(HI) < 0 {
		alts = append(alts, eSeqOf(natRange(mid, new(big.Int).Sub(HI, one)), anyFrac))
	}
	return eAltOf(alts...), true
}

// fracRange matches the fraction of a decimal, "" or "." and digits, whose value
// 0.ddd is >= 0.a (> when aEx) if hasA and <= 0.b (< when bEx) if hasB.
func fracRange(a string, aEx, hasA bool, b string, bEx, hasB bool) *expr {
	digitAt := func(s string, i int) byte {
		if i < len(s) {
			return s[i]
		}
		return '0'
	}
	allZero := func(s string) bool { return strings.Trim(s, "0") == "" }
	anyDigits := eStar(eByteRange('0', '9'))
	type key struct {
		pos      int
		loT, hiT bool
		needOne  bool
	}
	memo := map[key]*expr{}
	// rest matches the digits after pos; loT/hiT: the digits so far equal a/b
	var rest func(pos int, loT, hiT, needOne bool) *expr
	rest = func(pos int, loT, hiT, needOne bool) *expr {
		if loT && pos >= len(a) && !aEx {
			loT = false // anything from here on is >= a
		}
		if hiT && pos >= len(b) {
			// equal to b so far: only zeros may follow, and not at all when strict
			if bEx || loT {
				return exprNoneV
			}
			if needOne {
				return eRepOf(eLit("0"), 1, -1)
			}
			return eStar(eLit("0"))
		}
		if !loT && !hiT {
			if needOne {
				return eRepOf(eByteRange('0', '9'), 1, -1)
			}
			return anyDigits
		}
		if loT && !hiT && pos >= len(a) {
			// equal to a so far and strict: some nonzero digit must come
			return eSeqOf(anyDigits, eByteRange('1', '9'), anyDigits)
		}
		k := key{pos, loT, hiT, needOne}
		if e, ok := memo[k]; ok {
			return e
		}
		var alts []*expr
		if !needOne {
			// the fraction ends here: what remains of it is zero
			okLo := !loT || allZero(a[min(pos, len(a)):]) && !aEx
			okHi := !hiT || !bEx || !allZero(b[min(pos, len(b)):])
			if okLo && okHi {
				alts = append(alts, exprEmptyV)
			}
		}
		// digits with the same outcome (still equal to a, to b) share a branch
		type branch struct {
			lo, hi byte
			nl, nh bool
		}
		var brs []branch
		for d := byte('0'); d <= '9'; d++ {
			if loT && d < digitAt(a, pos) || hiT && d > digitAt(b, pos) {
				continue
			}
			nl := loT && d == digitAt(a, pos)
			nh := hiT && d == digitAt(b, pos)
			if n := len(brs); n > 0 && brs[n-1].hi == d-1 && brs[n-1].nl == nl && brs[n-1].nh == nh {
				brs[n-1].hi = d
				continue
			}
			brs = append(brs, branch{d, d, nl, nh})
		}
		for _, br := range brs {
			alts = append(alts, eSeqOf(eByteRange(br.lo, br.hi), rest(pos+1, br.nl, br.nh, false)))
		}
		r := eAltOf(alts...)
		memo[k] = r
		return r
	}
	aT, bT := hasA, hasB
	var alts []*expr
	// no fraction at all: the value is the integer part
	if (!aT || allZero(a) && !aEx) && (!bT || !bEx || !allZero(b)) {
		alts = append(alts, exprEmptyV)
	}
	alts = append(alts, eSeqOf(eLit("."), rest(0, aT, bT, true)))
	return eAltOf(alts...)
}

// boundedNumber is a JSON number without its sign whose magnitude is below 10^308.
// With n integer digits ("0" counts as one) a positive exponent E needs n+E <= 308;
// the grammar takes that in bands (n <= 1 with E <= 307, n <= 9 with E <= 299,
// n <= 209 with E <= 99, n <= 299 with E <= 9, and n <= 308 without a positive
// exponent), which holds every number Python's repr or JavaScript writes and keeps the
// automaton small. Negative exponents have at most 3 digits (small values underflow
// to zero, which every parser accepts, and a validator never expands 1e-999999999).
func boundedNumber() *expr {
	digit := eByteRange('0', '9')
	frac := eOpt(eSeqOf(eLit("."), eRepOf(digit, 1, -1)))
	var es byteSet
	es.add('e')
	es.add('E')
	intPart := func(n int) *expr { // 1 to n integer digits
		return eAltOf(eLit("0"), eSeqOf(eByteRange('1', '9'), eRepOf(digit, 0, n-1)))
	}
	neg := eSeqOf(eByteSet(es), eLit("-"), eRepOf(digit, 1, 3))
	alts := []*expr{eSeqOf(intPart(maxNumDigits), frac, eOpt(neg))}
	for _, b := range [][2]int{{1, 307}, {9, 299}, {209, 99}, {299, 9}} {
		pos := eSeqOf(eByteSet(es), eOpt(eLit("+")), expDigitsUpTo(b[1]))
		alts = append(alts, eSeqOf(intPart(b[0]), frac, pos))
	}
	return eAltOf(alts...)
}

// expDigitsUpTo matches exponent digits (1 to 3, leading zeros allowed) of value <= k.
func expDigitsUpTo(k int) *expr {
	var alts []*expr
	for l := 1; l <= 3; l++ {
		top := strings.Repeat("9", l)
		if v, _ := strconv.Atoi(top); k < v {
			top = fmt.Sprintf("%0*d", l, k)
		}
		alts = append(alts, sameLenRange(strings.Repeat("0", l), top))
	}
	return eAltOf(alts...)
}

func ceilRat(r *big.Rat, ex bool) *big.Int {
	q := new(big.Int).Quo(r.Num(), r.Denom()) // truncates toward zero
	if r.IsInt() {
		if ex {
			q.Add(q, big.NewInt(1))
		}
		return q
	}
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func floorRat(r *big.Rat, ex bool) *big.Int {
	q := new(big.Int).Quo(r.Num(), r.Denom())
	if r.IsInt() {
		if ex {
			q.Sub(q, big.NewInt(1))
		}
		return q
	}
	if r.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q
}

// intRange matches the decimal integers in [lo, hi] (nil: unbounded, which is at most
// maxNumDigits digits), no leading zeros, "-" for negatives (never "-0").
func intRange(lo, hi *big.Int) *expr {
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return exprNoneV
	}
	zero := big.NewInt(0)
	var alts []*expr
	// negative part: -[max(1,-hi) .. -lo]
	if lo == nil || lo.Sign() < 0 {
		var nlo, nhi *big.Int // magnitudes
		nlo = big.NewInt(1)
		if hi != nil && hi.Sign() < 0 {
			nlo = new(big.Int).Neg(hi)
		}
		if lo != nil {
			nhi = new(big.Int).Neg(lo)
		}
		alts = append(alts, eSeqOf(eLit("-"), natRange(nlo, nhi)))
	}
	if hi == nil || hi.Sign() >= 0 {
		plo := zero
		if lo != nil && lo.Sign() > 0 {
			plo = lo
		}
		alts = append(alts, natRange(plo, hi))
	}
	return eAltOf(alts...)
}

// natRange matches naturals in [lo, hi] without leading zeros and with at most
// maxNumDigits digits (hi nil: no other upper bound).
func natRange(lo, hi *big.Int) *expr {
	if hi != nil && len(hi.String()) > maxNumDigits {
		hi = nil
	}
	if hi != nil && lo.Cmp(hi) > 0 {
		return exprNoneV
	}
	ls := lo.String()
	if len(ls) > maxNumDigits {
		return exprNoneV
	}
	digit := eByteRange('0', '9')
	if hi == nil {
		// all numbers with more digits than lo, plus those with len(lo) digits >= lo
		n := len(ls)
		if lo.Sign() == 0 {
			return eAltOf(eLit("0"), eSeqOf(eByteRange('1', '9'), eRepOf(digit, 0, maxNumDigits-1)))
		}
		top := strings.Repeat("9", n)
		longer := exprNoneV
		if n < maxNumDigits {
			longer = eSeqOf(eByteRange('1', '9'), eRepOf(digit, n, maxNumDigits-1))
		}
		return eAltOf(sameLenRange(ls, top), longer)
	}
	hs := hi.String()
	var alts []*expr
	for n := len(ls); n <= len(hs); n++ {
		a := ls
		if n > len(ls) {
			a = "1" + strings.Repeat("0", n-1)
		}
		b := hs
		if n < len(hs) {
			b = strings.Repeat("9", n)
		}
		if n == 1 && len(ls) == 1 {
			a = ls
		}
		alts = append(alts, sameLenRange(a, b))
	}
	return eAltOf(alts...)
}

// sameLenRange matches digit strings of len(a) between a and b (a <= b, same length).
func sameLenRange(a, b string) *expr {
	if len(a) == 0 {
		return exprEmptyV
	}
	if a == b {
		return eLit(a)
	}
	if strings.Trim(a, "0") == "" && strings.Trim(b, "9") == "" {
		return eRepOf(eByteRange('0', '9'), len(a), len(a))
	}
	if a[0] == b[0] {
		return eSeqOf(eLit(a[:1]), sameLenRange(a[1:], b[1:]))
	}
	n := len(a) - 1
	allLow := strings.Repeat("0", n)
	allHigh := strings.Repeat("9", n)
	var alts []*expr
	// first digit a[0] with rest >= a[1:]
	alts = append(alts, eSeqOf(eLit(a[:1]), sameLenRange(a[1:], allHigh)))
	if b[0]-a[0] > 1 {
		alts = append(alts, eSeqOf(eByteRange(a[0]+1, b[0]-1), eRepOf(eByteRange('0', '9'), n, n)))
	}
	alts = append(alts, eSeqOf(eLit(b[:1]), sameLenRange(allLow, b[1:])))
	return eAltOf(alts...)
}

// ---- strings ----------------------------------------------------------------
