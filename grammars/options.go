package grammars

import (
	"fmt"
	"time"
)

// Whitespace is the JSON whitespace policy of schema grammars.
type Whitespace int

const (
	// WhitespacePython (the default) is the one-line form of Python's
	// json.dumps(data): ", " between items and members, ": " after keys, nothing else.
	// It is what MaskBench serializes and what models usually write on one line.
	WhitespacePython Whitespace = iota
	// WhitespaceCompact has no whitespace at all: "," and ":".
	WhitespaceCompact
	// WhitespaceFlexible allows any JSON whitespace (space, tab, CR, LF) between
	// tokens, up to MaxWhitespace bytes in a row.
	WhitespaceFlexible
)

func (w Whitespace) String() string {
	switch w {
	case WhitespacePython:
		return "python"
	case WhitespaceCompact:
		return "compact"
	case WhitespaceFlexible:
		return "flexible"
	}
	return fmt.Sprintf("Whitespace(%d)", int(w))
}

// ParseWhitespace parses "python" (or "default"), "compact" or "flexible".
func ParseWhitespace(s string) (Whitespace, error) {
	switch s {
	case "python", "default", "":
		return WhitespacePython, nil
	case "compact":
		return WhitespaceCompact, nil
	case "flexible":
		return WhitespaceFlexible, nil
	}
	return 0, fmt.Errorf("unknown whitespace policy %q (python, compact or flexible)", s)
}

// Options bound compilation and the lazily grown state of compiled grammars, and set
// the JSON Schema policies. The zero value means the defaults.
type Options struct {
	// MaxCompileTime bounds one compilation (default 10s).
	MaxCompileTime time.Duration
	// MaxNFANodes bounds one automaton's NFA (default 2,000,000 nodes).
	MaxNFANodes int
	// MaxStates bounds one automaton's lazily built DFA (default 200,000 states).
	MaxStates int
	// MaxConfigs bounds a grammar's walk configurations (default 200,000).
	MaxConfigs int
	// MaxStacks bounds the parallel parses a matcher tracks (default 10,000).
	MaxStacks int
	// MaxMaskTime bounds the work of one FillMask (default 1s): past it, FillMask
	// stops with a *MaskTimeoutError instead of stalling the decoding step. The
	// lazily built parts it made are kept, so a retry continues from there. The
	// clock is read in the vocabulary walks (every 32 lazily built transitions) and
	// in the equivalence checks of shared walks. Two kinds of lazy work that a mask
	// may start run to their end first: the translation of a subschema a generation
	// enters for the first time, and the construction of a leaf automaton it needs
	// (a pattern of up to 30,000 NFA nodes, a merged string leaf of up to 16,384;
	// larger patterns are built when the schema compiles). Both change the grammar's
	// shared rules and automata under its lock, which a half-done step would leave
	// inconsistent for every matcher; their cost is bounded by their size, not by
	// this budget, and the mask stops at the walk's next clock reading after them.
	MaxMaskTime time.Duration
	// MaxCacheBytes bounds a grammar's mask caches (default 256 MiB); past it,
	// masks are computed without caching.
	MaxCacheBytes int64
	// InlineLimit: call-free rules up to this many NFA nodes are inlined (default 256).
	InlineLimit int

	// unsharedWalks turns off the sharing of walks between equivalent string states
	// (walkshare.go) and the walks without needs; tests compare the masks with and
	// without them.
	unsharedWalks bool
	// plainStrings turns off the string alternatives of an anyOf/oneOf merged into
	// one leaf and the subsumption of items by a search's tail (automaton.go); tests
	// compare the masks with and without them.
	plainStrings bool

	// Whitespace is the JSON whitespace policy (default WhitespacePython).
	Whitespace Whitespace
	// MaxWhitespace bounds a run of flexible whitespace (default 16).
	MaxWhitespace int
	// Lenient turns unsupported JSON Schema keywords into warnings: the grammar then
	// ignores them (accepts more) and the semantic check at the end of the document
	// still enforces them.
	Lenient bool
	// FormatAnnotation makes "format" an annotation only, as draft 2020-12 says by
	// default. By default formats are asserted (grammars for date, time, date-time,
	// email, uuid, uri, ipv4, ipv6, hostname, ...).
	FormatAnnotation bool
	// GrammarOnly refuses keywords that only the semantic document check can enforce
	// (uniqueItems, not, if/then/else, contains, dependent*, unevaluated*, ...): they
	// become compile errors that name the keyword and its JSON pointer, or, with
	// Lenient, warnings (and the keyword is ignored).
	GrammarOnly bool
	// ZeroFractionIntegers lets "type": "integer" take integral values written with a
	// zero fraction (96.0), which drafts 6 and later count as integers. Off by default:
	// integer-typed output is written as users expect it (96), and draft 4 never takes
	// 96.0 as an integer. ("type": "number" with multipleOf 1 always takes 96.0.)
	ZeroFractionIntegers bool
	// SchemaLoader loads remote $ref targets (nil: remote refs are errors).
	SchemaLoader func(url string) ([]byte, error)
	// AlwaysCheck runs the full JSON Schema validation whenever a document completes,
	// even when the grammar is exact.
	AlwaysCheck bool
	// MaxSchemaRules bounds the rules one JSON Schema expands into: subschemas and
	// the combinations allOf/anyOf/oneOf merging creates (default 64,000).
	MaxSchemaRules int
	// MaxEnum bounds the values of one enum (default 100,000).
	MaxEnum int
	// MaxSchemaDepth bounds the nesting of a JSON Schema document (default 256).
	MaxSchemaDepth int

	// CacheSize is the number of compiled grammars a Compiler keeps (default 256).
	CacheSize int
	// LeafCacheSize is the number of shared leaf automata a Compiler keeps (default 4096).
	LeafCacheSize int
}

func (o Options) compileTime() time.Duration {
	if o.MaxCompileTime > 0 {
		return o.MaxCompileTime
	}
	return 10 * time.Second
}
func (o Options) maxMaskTime() time.Duration {
	if o.MaxMaskTime > 0 {
		return o.MaxMaskTime
	}
	return time.Second
}
func (o Options) maxNFANodes() int    { return def(o.MaxNFANodes, 2_000_000) }
func (o Options) maxStates() int      { return def(o.MaxStates, 200_000) }
func (o Options) maxConfigs() int     { return def(o.MaxConfigs, 200_000) }
func (o Options) maxStacks() int      { return def(o.MaxStacks, 10_000) }
func (o Options) inlineLimit() int    { return def(o.InlineLimit, 256) }
func (o Options) maxWS() int          { return def(o.MaxWhitespace, 16) }
func (o Options) maxSchemaRules() int { return def(o.MaxSchemaRules, 64_000) }
func (o Options) maxEnum() int        { return def(o.MaxEnum, 100_000) }
func (o Options) maxSchemaDepth() int { return def(o.MaxSchemaDepth, 256) }
func (o Options) maxCacheBytes() int64 {
	if o.MaxCacheBytes > 0 {
		return o.MaxCacheBytes
	}
	return 256 << 20
}

func def(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

// deadline enforces MaxCompileTime.
type deadline struct {
	at    time.Time
	limit time.Duration
	n     int
}

func newDeadline(d time.Duration) *deadline {
	return &deadline{at: time.Now().Add(d), limit: d}
}

// check returns a LimitError once the deadline has passed. It reads the clock only
// every few calls.
func (d *deadline) check() error {
	if d == nil {
		return nil
	}
	d.n++
	if d.n&15 != 0 {
		return nil
	}
	if time.Now().After(d.at) {
		return &TimeoutError{Limit: d.limit}
	}
	return nil
}

// TimeoutError reports a compilation that ran past MaxCompileTime.
type TimeoutError struct{ Limit time.Duration }

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("compile time limit exceeded (%s)", e.Limit)
}
