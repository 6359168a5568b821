package grammars

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema strings: length bounds, patterns (search semantics) and formats as shared
// string leaf automata; every pattern is translated at compile time.

var (
	anyStringCharOnce sync.Once
	anyStringCharExpr *expr
)

// anyStringChar is stringEncoder of every character (built once; expressions are
// immutable and shared).
func anyStringChar() *expr {
	anyStringCharOnce.Do(func() { anyStringCharExpr = stringEncoder(anyJSONCharRanges) })
	return anyStringCharExpr
}

var (
	tailCharOnce sync.Once
	tailCharExpr *expr
)

// tailChar is the character of a search's tail (the any characters after a match
// that is not anchored at the end): for strings, anyStringChar with its guard marked
// (gCharLT arg 1, an NFA node's univ), so that a state holding it drops the items it
// subsumes (automaton.go, subsume).
func tailChar(around *expr) *expr {
	if around != anyStringChar() {
		return around
	}
	tailCharOnce.Do(func() {
		tailCharExpr = eSeqOf(eGuardOf(gCharLT, 1), jsonClass(anyJSONCharRanges), eEffectOf(fCharInc, 0))
	})
	return tailCharExpr
}

var (
	headCharOnce sync.Once
	headCharExpr *expr
)

// headChar is the character of a search's head (the any characters before a match
// not anchored at the start): for strings, anyStringChar with its guard marked
// (gCharLT arg 2, an NFA node's anyLoop), so that the walks of states holding it know
// that every content token is allowed (walkAnyContent).
func headChar(around *expr) *expr {
	if around != anyStringChar() {
		return around
	}
	headCharOnce.Do(func() {
		headCharExpr = eSeqOf(eGuardOf(gCharLT, 2), jsonClass(anyJSONCharRanges), eEffectOf(fCharInc, 0))
	})
	return headCharExpr
}

// stringEncoder wraps each JSON character with the length counter: a guard at its
// start (which also marks the character boundary) and the count after it. The bounds
// are parameters of the automaton's start register, so every string shares it.
func stringEncoder(r []rune) *expr {
	return eSeqOf(eGuardOf(gCharLT, 0), jsonClass(r), eEffectOf(fCharInc, 0))
}

// stringSym returns a string rule: length bounds, an optional pattern (search
// semantics) or format, and optional keys it must not spell (object keys).
func (j *jsc) stringSym(minLen, maxLen int, patSrc, patPtr, format string, trie *keyTrie) int32 {
	if atom, lo, hi, ok := countedClass(patSrc); ok && trie == nil {
		// ^C{m,n}$ is C* within the length bounds [m, n]: the counter is the string's
		// own length register, so every count shares one automaton state (and one
		// vocabulary walk) instead of n states with a walk each. Not for keys that
		// must not spell known ones: the walk of a key tells a token after which it
		// can only close from the automaton, not from the length register.
		patSrc = "^" + atom + "*$"
		minLen = max(minLen, lo)
		if hi >= 0 && (maxLen < 0 || hi < maxLen) {
			maxLen = hi
		}
	}
	kind := "string"
	if patSrc != "" {
		kind = "pattern:" + patSrc
	} else if format != "" {
		kind = "format:" + format
	}
	key := fmt.Sprintf("%s|%d|%d|%p", kind, minLen, maxLen, trie)
	if id, ok := j.leafMemo[key]; ok {
		return id
	}
	name := "string"
	if patSrc != "" {
		name = "pattern"
	} else if format != "" {
		name = "format-" + format
	}
	if cb, ok := stringBodies.Load(kind); ok {
		j.widened(cb.(*cachedBody), patSrc, patPtr)
		return j.stringLeaf(key, name, cb.(*cachedBody), minLen, maxLen, trie)
	}
	anyc := anyStringChar()
	var content *expr
	switch {
	case patSrc != "":
		cb, err := patternBody(patSrc, j.opts.maxNFANodes())
		if err != nil {
			var re *RegexError
			feature := ""
			if errors.As(err, &re) {
				feature = re.Feature
			}
			if j.opts.Lenient {
				j.warnings = append(j.warnings, fmt.Sprintf("ignored pattern %q at %s: %v", patSrc, patPtr, err))
				j.inexact = append(j.inexact, "pattern at "+patPtr)
				return j.stringSym(minLen, maxLen, "", "", format, trie)
			}
			if j.err == nil {
				kw := "pattern"
				if feature != "" {
					kw = "pattern (" + feature + ")"
				}
				j.err = &CompileError{Reason: ReasonRegex, Keyword: kw, Pointer: patPtr, Err: err}
			}
			return j.gb.add("error", exprNoneV)
		}
		j.widened(cb, patSrc, patPtr)
		return j.stringLeaf(key, name, cb, minLen, maxLen, trie)
	case format != "":
		return j.stringLeaf(key, name, formatBody(format, j.opts.maxNFANodes()), minLen, maxLen, trie)
	default:
		content = eStar(anyc)
	}
	return j.stringLeaf(key, name, storeStringBody(kind, content, ""), minLen, maxLen, trie)
}

// countedClass recognizes a pattern ^C{m}$, ^C{m,}$ or ^C{m,n}$ whose atom C is one
// character: a bracket class, \d \w \s \D \W \S or ".". hi is -1 without an upper
// bound.
func countedClass(src string) (atom string, lo, hi int, ok bool) {
	if len(src) < 6 || src[0] != '^' || src[len(src)-1] != '$' || src[len(src)-2] != '}' {
		return "", 0, 0, false
	}
	body := src[1 : len(src)-1]
	switch {
	case body[0] == '[':
		i := 1
		if i < len(body) && body[i] == '^' {
			i++
		}
		if i < len(body) && body[i] == ']' {
			return "", 0, 0, false // ECMA reads []] and [^]] differently from RE2
		}
		for ; i < len(body) && body[i] != ']'; i++ {
			if body[i] == '\\' {
				i++
			} else if body[i] == '[' {
				return "", 0, 0, false
			}
		}
		if i >= len(body) {
			return "", 0, 0, false
		}
		atom = body[:i+1]
	case body[0] == '.':
		atom = "."
	case body[0] == '\\' && len(body) > 1 && strings.IndexByte("dwsDWS", body[1]) >= 0:
		atom = body[:2]
	default:
		return "", 0, 0, false
	}
	q := body[len(atom):]
	if len(q) < 3 || q[0] != '{' {
		return "", 0, 0, false
	}
	q = q[1 : len(q)-1]
	los, his, comma := strings.Cut(q, ",")
	lo, err := strconv.Atoi(los)
	if err != nil || lo < 0 || lo > 1<<20 || len(los) > 7 || los != strconv.Itoa(lo) {
		return "", 0, 0, false
	}
	hi = lo
	if comma {
		hi = -1
		if his != "" {
			if hi, err = strconv.Atoi(his); err != nil || hi < lo || len(his) > 7 || his != strconv.Itoa(hi) {
				return "", 0, 0, false
			}
		}
	}
	return atom, lo, hi, true
}

// storeStringBody wraps string content (characters in stringEncoder form) in the quotes
// and guards of a string leaf, and keeps it for every grammar of the process (bounded).
func storeStringBody(kind string, content *expr, approx string) *cachedBody {
	body := eSeqOf(eLit(`"`), eTrackOf(content), eGuardOf(gCharGE, 0), eGuardOf(gTrieOK, 0), eLit(`"`))
	var sb strings.Builder
	sb.WriteString("abs:")
	exprKey(body, &sb)
	cb := &cachedBody{body: body, content: content, key: sb.String(), approx: approx}
	if stringBodyCount.Add(1) < 10000 {
		stringBodies.Store(kind, cb)
	}
	return cb
}

// patternBody is the string leaf body of a JSON Schema pattern (search semantics),
// built once per process.
func patternBody(src string, budget int) (*cachedBody, error) {
	kind := "pattern:" + src
	if cb, ok := stringBodies.Load(kind); ok {
		return cb.(*cachedBody), nil
	}
	e, approx, err := approxPatternSearch(src, budget)
	if err != nil {
		return nil, err
	}
	return storeStringBody(kind, e, approx), nil
}

// checkPatterns translates every pattern and patternProperties regex of the schema, so
// that an unsupported construct is a compile error naming it and its JSON pointer,
// and not an error of a later mask when a generation first enters that subschema.
// The translations are kept for the lazy rules.
func (j *jsc) checkPatterns(root *jsonschema.Schema) error {
	seen := map[*jsonschema.Schema]bool{}
	for stack := []*jsonschema.Schema{root}; len(stack) > 0; {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		if err := j.dl.check(); err != nil {
			return err
		}
		stack = append(stack, schemaChildren(s)...)
		if s.Pattern != nil {
			if _, ignored := s.Pattern.(ignoredRegexp); !ignored {
				if err := j.prebuildPattern(s.Pattern.String(), false); err != nil {
					return regexCompileError("pattern", pointerOf(s)+"/pattern", err)
				}
			}
		}
		for re := range s.PatternProperties {
			if _, ignored := re.(ignoredRegexp); ignored {
				continue
			}
			if err := j.prebuildPattern(re.String(), true); err != nil {
				return regexCompileError("patternProperties", pointerOf(s)+"/patternProperties", err)
			}
		}
	}
	return nil
}

// prebuildPattern translates a pattern and, when it is large, builds its leaf
// automaton (kept in the compiler's leaf registry, where the lazily translated rule
// that uses it finds it): the NFA of a large counted pattern takes milliseconds to
// build (91,000 nodes and 6-15 ms for ^(?:\S+\s+){0,199}\S+$), which belongs to
// compile time, not to the first mask that enters the pattern. Small automata (most
// patterns; a counted class, which compiles to C* within length bounds, unless it
// is a key that must spell no known key) are built when a rule first uses them, in
// microseconds: building them all would add to the time to first mask for nothing
// where a generation never enters them, or where an anyOf merges them into one leaf.
func (j *jsc) prebuildPattern(src string, key bool) error {
	cb, err := patternBody(src, j.opts.maxNFANodes())
	if err != nil {
		return err
	}
	if _, _, _, counted := countedClass(src); counted && !key {
		return nil
	}
	if cb.body.size(prebuildAbove) <= prebuildAbove {
		return nil
	}
	_, err = j.c.leafAutomatonKeyed("pattern", cb.key, cb.body, nil, nil, true)
	return err
}

// prebuildAbove is the body size (about the NFA's nodes) past which a pattern's
// automaton is built at compile time (some 3 ms at this size).
const prebuildAbove = 30000

// regexCompileError names the keyword (and the unsupported construct) of a regex
// error.
func regexCompileError(kw, ptr string, err error) error {
	var re *RegexError
	if errors.As(err, &re) && re.Feature != "" {
		kw += " (" + re.Feature + ")"
	}
	return &CompileError{Reason: ReasonRegex, Keyword: kw, Pointer: ptr, Err: err}
}

// widened records the semantic check a widened pattern needs.
func (j *jsc) widened(cb *cachedBody, src, ptr string) {
	if cb.approx != "" {
		j.semanticAt(fmt.Sprintf("pattern %q (%s)", src, cb.approx), ptr)
	}
}

// String bodies are the same for every grammar: built once per process (bounded).
type cachedBody struct {
	body    *expr
	content *expr // the characters between the quotes
	key     string
	// a pattern the grammar widens (what it could not express; see regex_approx.go)
	approx string
}

var (
	stringBodies    sync.Map
	stringBodyCount atomic.Int64
)

func (j *jsc) stringLeaf(key, name string, cb *cachedBody, minLen, maxLen int, trie *keyTrie) int32 {
	id := j.gb.add(name, cb.body)
	sy := j.gb.syms[id]
	sy.noInline = true
	sy.abstractable = true
	sy.leafKey = cb.key
	sy.params = &auxVal{min: int32(max(minLen, 0)), max: int32(maxLen)}
	sy.trie = trie
	j.leafMemo[key] = id
	return id
}

func (j *jsc) stringExpr(m *merged) *expr {
	sp := j.stringSpec(m, true)
	return eCallOf(j.stringSym(sp.minLen, sp.maxLen, sp.patSrc, sp.patPtr, sp.format, nil))
}

// strSpec is what the grammar enforces of a string: length bounds and one pattern or
// format (the others are left to the semantic check).
type strSpec struct {
	minLen, maxLen         int
	patSrc, patPtr, format string
}

// stringSpec reads the string constraints of m; with record, it records what the
// grammar leaves to the semantic check (and ignored patterns).
func (j *jsc) stringSpec(m *merged, record bool) strSpec {
	var pat, fmtS *jsonschema.Schema
	if len(m.patterns) > 0 {
		pat = m.patterns[0]
		for _, p := range m.patterns[1:] {
			if record && p.Pattern.String() != pat.Pattern.String() {
				j.semantic("pattern (more than one)", p)
			}
		}
	}
	if len(m.formats) > 0 {
		fmtS = m.formats[0]
		for _, f := range m.formats[1:] {
			if record && f.Format.Name != fmtS.Format.Name {
				j.semantic("format (more than one)", f)
			}
		}
	}
	sp := strSpec{minLen: m.minLen}
	if pat != nil {
		if _, ok := pat.Pattern.(ignoredRegexp); ok {
			if record {
				j.warnings = append(j.warnings, fmt.Sprintf("ignored pattern %q at %s (unsupported regex)", pat.Pattern.String(), pointerOf(pat)))
			}
		} else {
			sp.patSrc, sp.patPtr = pat.Pattern.String(), pointerOf(pat)+"/pattern"
		}
	}
	if fmtS != nil {
		f := fmtS.Format.Name
		_, exact, ok := formatRegex(f)
		switch {
		case !ok:
			if record && knownFormat(f) {
				j.semantic("format "+f, fmtS)
			}
		case sp.patSrc != "":
			if record {
				j.semantic("format "+f+" with pattern", fmtS)
			}
		default:
			if record && !exact {
				j.semantic("format "+f, fmtS)
			}
			sp.format = f
		}
	}
	sp.maxLen = m.maxLen
	if fm := formatMaxLen(sp.format); fm >= 0 && (sp.maxLen < 0 || fm < sp.maxLen) {
		sp.maxLen = fm
	}
	return sp
}

// ---- string alternatives merged ----------------------------------------------
//
// An anyOf/oneOf whose alternatives admit strings under different patterns or formats
// would push one string leaf per alternative, and the first mask inside the string
// walks the vocabulary once per leaf (7 searches: 7 walks). A JSON value's type shows
// in its first byte, so the disjunction splits exactly into the alternatives' string
// parts and their other parts; the string parts of the same length bounds become ONE
// leaf whose content is the alternation of theirs (its lazily determinized states are
// sets of the alternatives' states: a single walk serves all of them), and each
// alternative keeps its non-string part (skipStrings).

// skipStrings is the part flag that takes strings out of a conjunction's types.
const skipStrings = 4

// Bounds of one merged string leaf: the members and the summed size of their bodies
// (the lazily built DFA of an alternation is at worst the product of theirs).
const (
	maxMergedStrings = 32
	maxMergedSize    = 1 << 14
)

// altString is the string part of one alternative of a disjunction.
type altString struct {
	alt int // index of the alternative
	m   *merged
	sp  strSpec
	cb  *cachedBody // the content's string body (nil: any string)
}

// splittableString reports whether the alternative with expanded conjunction conj
// (merged as m) has a string part the disjunction can merge: no disjunction of its own
// is pending, no enum, and its pattern is not a counted class (whose count lives in
// the length bounds) nor one the grammar could not translate.
func (j *jsc) splittableString(conj []part, m *merged) (altString, bool) {
	if m.types&tyStr == 0 || m.hasEnum {
		return altString{}, false
	}
	for _, p := range conj {
		if len(p.s.AnyOf) > 0 && p.skip&1 == 0 || len(p.s.OneOf) > 0 && p.skip&2 == 0 {
			return altString{}, false
		}
	}
	st := altString{m: m, sp: j.stringSpec(m, false)}
	switch {
	case st.sp.patSrc != "":
		if _, _, _, counted := countedClass(st.sp.patSrc); counted {
			return altString{}, false
		}
		cb, err := patternBody(st.sp.patSrc, j.opts.maxNFANodes())
		if err != nil {
			return altString{}, false
		}
		st.cb = cb
	case st.sp.format != "":
		st.cb = formatBody(st.sp.format, j.opts.maxNFANodes())
	}
	return st, true
}

// mergeStrings merges the string parts of a disjunction's alternatives (alive, the
// conjunction of each; strs, their splittable string parts): per length bounds with
// at least two different contents, it returns the merged leaf, and an alternative
// merged into it gets its non-string types only (skipStrings), or is removed (nil)
// when it has no other type.
func (j *jsc) mergeStrings(alive [][]part, strs []altString) []*expr {
	type bounds struct{ lo, hi int }
	groups := map[bounds][]altString{}
	var order []bounds
	for _, st := range strs {
		b := bounds{st.sp.minLen, st.sp.maxLen}
		if _, ok := groups[b]; !ok {
			order = append(order, b)
		}
		groups[b] = append(groups[b], st)
	}
	var out []*expr
	for _, b := range order {
		g := groups[b]
		if len(g) < 2 || len(g) > maxMergedStrings {
			continue
		}
		// the members' contents, each once; any string among them makes the union
		// any string
		var kinds []string
		var contents []*expr
		seen := map[string]bool{}
		plain := false
		size := 0
		for _, st := range g {
			if st.cb == nil {
				plain = true
				continue
			}
			if !seen[st.cb.key] {
				seen[st.cb.key] = true
				kinds = append(kinds, st.cb.key)
				contents = append(contents, st.cb.content)
				size += st.cb.content.size(maxMergedSize)
			}
		}
		if !plain && (len(contents) < 2 || size > maxMergedSize) {
			continue
		}
		for _, st := range g {
			j.stringSpec(st.m, true)
			if st.cb != nil && st.sp.patSrc != "" {
				j.widened(st.cb, st.sp.patSrc, st.sp.patPtr)
			}
			if st.m.types&^tyStr == 0 {
				alive[st.alt] = nil
				continue
			}
			rest := append([]part(nil), alive[st.alt]...)
			rest[len(rest)-1].skip |= skipStrings
			alive[st.alt] = rest
		}
		if plain {
			out = append(out, eCallOf(j.stringSym(b.lo, b.hi, "", "", "", nil)))
			continue
		}
		sort.Strings(kinds)
		var kb strings.Builder
		kb.WriteString("union:")
		for _, k := range kinds {
			fmt.Fprintf(&kb, "%d:%s", len(k), k)
		}
		kind := kb.String()
		key := fmt.Sprintf("%s|%d|%d|%p", kind, b.lo, b.hi, (*keyTrie)(nil))
		if id, ok := j.leafMemo[key]; ok {
			out = append(out, eCallOf(id))
			continue
		}
		var cb *cachedBody
		if c, ok := stringBodies.Load(kind); ok {
			cb = c.(*cachedBody)
		} else {
			cb = storeStringBody(kind, eAltOf(contents...), "")
		}
		out = append(out, eCallOf(j.stringLeaf(key, "pattern-union", cb, b.lo, b.hi, nil)))
	}
	return out
}

// formatBody is the string leaf body of a format, built once per process.
func formatBody(format string, budget int) *cachedBody {
	kind := "format:" + format
	if cb, ok := stringBodies.Load(kind); ok {
		return cb.(*cachedBody)
	}
	fr, _, _ := formatRegex(format)
	e, err := regexWhole(fr, stringEncoder, budget)
	if err != nil {
		panic("grammars: bad format regex for " + format + ": " + err.Error())
	}
	return storeStringBody(kind, e, "")
}

// ---- constants ----------------------------------------------------------------
