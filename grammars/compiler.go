package grammars

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
)

// Compiler compiles regexes, JSON Schemas and EBNF grammars for one vocabulary. It
// keeps an LRU cache of compiled grammars keyed by the canonical source text, and
// shares leaf automata (strings, numbers, patterns) and their mask caches between the
// grammars it compiles. It is safe for concurrent use.
type Compiler struct {
	vocab  *Vocab
	opts   Options
	leaves leafRegistry
	cache  *lruCache
}

// NewCompiler returns a Compiler for vocab.
func NewCompiler(vocab *Vocab, opts Options) *Compiler {
	c := &Compiler{vocab: vocab, opts: opts}
	c.leaves.init()
	c.leaves.max = def(opts.LeafCacheSize, 4096)
	c.cache = newLRU(def(opts.CacheSize, 256))
	return c
}

// Fork returns a compiler with the same vocabulary, options and shared leaf automata
// (strings, numbers, patterns and their mask caches) but its own, empty grammar cache.
func (c *Compiler) Fork() *Compiler {
	return &Compiler{vocab: c.vocab, opts: c.opts, leaves: c.leaves.share(), cache: newLRU(def(c.opts.CacheSize, 256))}
}

// Vocab returns the compiler's vocabulary.
func (c *Compiler) Vocab() *Vocab { return c.vocab }

// Options returns the compiler's options.
func (c *Compiler) Options() Options { return c.opts }

// CompileError is a grammar or schema that does not compile. Reason is a short
// category (for counting), Keyword and Pointer locate a JSON Schema problem.
type CompileError struct {
	Reason  string
	Keyword string
	Pointer string
	Err     error
}

func (e *CompileError) Error() string {
	s := e.Reason
	if e.Keyword != "" {
		s += fmt.Sprintf(" %q", e.Keyword)
	}
	if e.Pointer != "" {
		s += " at " + e.Pointer
	} else if e.Keyword != "" {
		s += " at the schema root"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *CompileError) Unwrap() error { return e.Err }

// Reasons of compile errors.
const (
	ReasonInvalidSchema = "invalid schema"
	ReasonUnsupported   = "unsupported keyword"
	ReasonRegex         = "unsupported regex"
	ReasonLimit         = "limit exceeded"
	ReasonTimeout       = "compile timeout"
	ReasonSyntax        = "syntax error"
	ReasonEmpty         = "schema matches nothing"
	ReasonGrammar       = "invalid grammar"
)

// ErrorReason returns the category of a compile error (for counting).
func ErrorReason(err error) string {
	var ce *CompileError
	if errors.As(err, &ce) {
		if ce.Reason == ReasonUnsupported && ce.Keyword != "" {
			return ce.Reason + " " + ce.Keyword
		}
		return ce.Reason
	}
	var te *TimeoutError
	if errors.As(err, &te) {
		return ReasonTimeout
	}
	var le *LimitError
	if errors.As(err, &le) {
		return ReasonLimit
	}
	var re *RegexError
	if errors.As(err, &re) {
		return ReasonRegex
	}
	return "other"
}

func wrapCompileErr(err error, reason string) error {
	if err == nil {
		return nil
	}
	var ce *CompileError
	if errors.As(err, &ce) {
		return err
	}
	var te *TimeoutError
	if errors.As(err, &te) {
		return &CompileError{Reason: ReasonTimeout, Err: err}
	}
	var le *LimitError
	if errors.As(err, &le) {
		return &CompileError{Reason: ReasonLimit, Err: err}
	}
	var re *RegexError
	if errors.As(err, &re) {
		return &CompileError{Reason: ReasonRegex, Err: err}
	}
	return &CompileError{Reason: reason, Err: err}
}

// cached compiles through the LRU cache.
func (c *Compiler) cached(key string, build func() (*Grammar, error)) (*Grammar, error) {
	if g := c.cache.get(key); g != nil {
		return g, nil
	}
	g, err := build()
	if err != nil {
		return nil, err
	}
	c.cache.put(key, g)
	return g, nil
}

// Regex compiles a regular expression (RE2 syntax) that the whole output must match.
func (c *Compiler) Regex(pattern string) (*Grammar, error) {
	return c.cached("regex\x00"+pattern, func() (*Grammar, error) {
		dl := newDeadline(c.opts.compileTime())
		e, err := regexWhole(pattern, utf8Class, c.opts.maxNFANodes())
		if err != nil {
			return nil, wrapCompileErr(err, ReasonRegex)
		}
		gb := newGrammarBuilder()
		root := gb.add("regex", e)
		g, err := c.compile(&buildInput{gb: gb, root: root, kind: "regex", src: pattern}, dl)
		if err != nil {
			return nil, wrapCompileErr(err, ReasonGrammar)
		}
		return g, nil
	})
}

// lruCache is a fixed-size LRU of compiled grammars.
type lruCache struct {
	mu  sync.Mutex
	max int
	ll  *list.List
	m   map[string]*list.Element
}

type lruEntry struct {
	key string
	g   *Grammar
}

func newLRU(max int) *lruCache {
	return &lruCache{max: max, ll: list.New(), m: map[string]*list.Element{}}
}

func (l *lruCache) get(k string) *Grammar {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.m[k]; ok {
		l.ll.MoveToFront(e)
		return e.Value.(*lruEntry).g
	}
	return nil
}

func (l *lruCache) put(k string, g *Grammar) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.m[k]; ok {
		l.ll.MoveToFront(e)
		e.Value.(*lruEntry).g = g
		return
	}
	l.m[k] = l.ll.PushFront(&lruEntry{k, g})
	for l.ll.Len() > l.max {
		e := l.ll.Back()
		l.ll.Remove(e)
		delete(l.m, e.Value.(*lruEntry).key)
	}
}

// Len is the number of cached grammars.
func (l *lruCache) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ll.Len()
}
