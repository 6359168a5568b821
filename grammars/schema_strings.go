package grammars

import (
	"errors"
	"fmt"
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
		fr, _, _ := formatRegex(format)
		e, err := regexWhole(fr, stringEncoder, j.opts.maxNFANodes())
		if err != nil {
			panic("grammars: bad format regex for " + format + ": " + err.Error())
		}
		content = e
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
	cb := &cachedBody{body: body, key: sb.String(), approx: approx}
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
				if _, err := patternBody(s.Pattern.String(), j.opts.maxNFANodes()); err != nil {
					return regexCompileError("pattern", pointerOf(s)+"/pattern", err)
				}
			}
		}
		for re := range s.PatternProperties {
			if _, ignored := re.(ignoredRegexp); ignored {
				continue
			}
			if _, err := patternBody(re.String(), j.opts.maxNFANodes()); err != nil {
				return regexCompileError("patternProperties", pointerOf(s)+"/patternProperties", err)
			}
		}
	}
	return nil
}

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
	body *expr
	key  string
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
	var pat, fmtS *jsonschema.Schema
	if len(m.patterns) > 0 {
		pat = m.patterns[0]
		for _, p := range m.patterns[1:] {
			if p.Pattern.String() != pat.Pattern.String() {
				j.semantic("pattern (more than one)", p)
			}
		}
	}
	if len(m.formats) > 0 {
		fmtS = m.formats[0]
		for _, f := range m.formats[1:] {
			if f.Format.Name != fmtS.Format.Name {
				j.semantic("format (more than one)", f)
			}
		}
	}
	patSrc, patPtr, format := "", "", ""
	if pat != nil {
		if _, ok := pat.Pattern.(ignoredRegexp); ok {
			j.warnings = append(j.warnings, fmt.Sprintf("ignored pattern %q at %s (unsupported regex)", pat.Pattern.String(), pointerOf(pat)))
		} else {
			patSrc, patPtr = pat.Pattern.String(), pointerOf(pat)+"/pattern"
		}
	}
	if fmtS != nil {
		f := fmtS.Format.Name
		_, exact, ok := formatRegex(f)
		switch {
		case !ok:
			if knownFormat(f) {
				j.semantic("format "+f, fmtS)
			}
		case patSrc != "":
			j.semantic("format "+f+" with pattern", fmtS)
		default:
			if !exact {
				j.semantic("format "+f, fmtS)
			}
			format = f
		}
	}
	maxLen := m.maxLen
	if fm := formatMaxLen(format); fm >= 0 && (maxLen < 0 || fm < maxLen) {
		maxLen = fm
	}
	return eCallOf(j.stringSym(m.minLen, maxLen, patSrc, patPtr, format, nil))
}

// ---- constants ----------------------------------------------------------------
