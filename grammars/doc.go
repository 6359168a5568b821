// Package grammars is structured output: regular expressions, JSON Schemas and EBNF
// (GBNF) grammars compiled to token automata over the model vocabulary, with masks
// computed fast enough for every decoding step.
//
// # Use
//
//	vocab := grammars.VocabFrom(bpe, 129280)        // token bytes, specials, EOS, logits width
//	c := grammars.NewCompiler(vocab, grammars.Options{})
//	g, err := c.JSONSchema(schema)                  // or c.Regex(pattern), c.EBNF(src)
//	m := g.NewMatcher()                             // one per sequence; g is shared
//	mask := make([]uint64, vocab.MaskWords())
//	for {
//		m.FillMask(mask)                            // allowed ids of the next token
//		tok := sample(logits, mask)
//		m.Accept(tok)                               // *RejectError if not allowed
//		if m.IsTerminated() { break }               // EOS accepted
//	}
//
// A Matcher also has Rollback(n) (undo tokens, for speculative decoding),
// ForcedBytes/ForcedTokens (jump-forward: the continuation when only one is possible)
// and IsAccepting (EOS allowed). Masks: bit i of word i/64 is id i; ids at or above the
// tokenizer's NumTokens and special tokens are 0; EOS is 1 only where the output may
// end. A compiled Grammar is immutable from the outside and safe to share between
// goroutines and any number of matchers; its caches grow lazily under bounds. A
// Compiler keeps an LRU cache of grammars keyed by the canonical schema or grammar text.
//
// # Front ends
//
// Regex: RE2 syntax (regexp/syntax), \d \w \s included; the whole output must match.
// Anchors anywhere hold as in RE2 (an alternative whose ^ follows input, or whose $
// precedes it, matches nothing). Lookarounds, backreferences, word boundaries and an
// anchor inside a group repeated more than once get an error that names the construct.
// In a JSON Schema pattern those (and atomic groups, and counts over RE2's limit of
// 1000) widen the grammar instead — a lookaround or word boundary becomes empty, a
// backreference any text, the anchor an empty match — and the semantic check decides
// with the exact pattern (regexp2 in its ECMAScript mode, or Go's regexp). Every
// pattern is translated when the schema compiles, so what stays unsupported (\Z, \G,
// invalid syntax) is a compile error, never one of a later mask.
//
// JSON Schema: any draft (4, 6, 7, 2019-09, 2020-12; 2020-12 by default), loaded in
// linear time by the package (schema_load.go: the drafts' metaschema rules, resources,
// anchors and references, filling santhosh-tekuri/jsonschema's Schema type as its
// compiler does, and compared with it on every test schema); that library loads what
// the package leaves to it (remote references, other metaschemas) and validates where
// dynamic scopes are involved. Types, properties, required, additionalProperties, patternProperties,
// items, prefixItems (and draft-4..7 tuple items/additionalItems), min/maxItems,
// min/maxProperties, enum, const, anyOf, oneOf (disjoint alternatives exactly), allOf
// (merged), $ref with recursion, $defs, minLength, maxLength (code points), pattern
// (ECMA escapes \uXXXX rewritten), formats (date, time, date-time, email, uuid, uri,
// ipv4, ipv6, hostname), minimum/maximum (exact digit ranges; for non-integers over
// plain decimals, plus the exponent forms the range holds whole) are grammar. Numbers
// stay below 1e308 in magnitude, so that they parse as finite float64s. Object
// members may come in any order, each at most once, required ones tracked exactly.
// Keywords no grammar expresses — uniqueItems, not, if/then/else, contains,
// dependentRequired/dependentSchemas/dependencies, unevaluated*, propertyNames,
// multipleOf, bounds with more than 40 decimals, non-disjoint oneOf, $dynamicRef —
// make the grammar accept a superset, and the full schema is then enforced by a semantic check
// inside the matcher (fastValid, the library validator's decisions on the package's
// graph; the library's validator where dynamic scopes are involved): at the token that
// completes the document and before EOS. Grammar.Warnings names each such keyword and its JSON
// pointer. Options.GrammarOnly turns them into compile errors naming the keyword and
// pointer instead; with Options.Lenient as well they become warnings (and are ignored).
//
// Dead ends: a state where FillMask allows no token, EOS included. The grammar offers a
// separator only where a member or item can follow it (maxProperties, maxItems, known
// members all present, room for the required members still missing), keeps a bounded
// string's distance to its end (a pattern that needs k more characters is refused k
// characters before maxLength), and allows a token after which a string can only close
// only where it may close (minimum length, excluded keys). A generation can still reach
// a dead end (1) when a schema's semantic check refuses every completion: a value
// already written breaks a keyword the grammar leaves to the check (an object matching
// two oneOf alternatives, a repeated item under uniqueItems, a failed dependency,
// multipleOf, not, ...), and nothing but completions remains; (2) in parts of a schema
// no value satisfies although the schema does, where the compiler cannot see it: a
// member, item or alternative whose subschema admits no value is left out when it
// compiles (schema_empty.go: through $ref/allOf, anyOf/oneOf, required members,
// minProperties and minItems, to a bounded depth; a required one makes its object
// impossible), but a string whose pattern cannot meet its length bounds is taken as
// satisfiable, and pattern properties that can only spell known keys are offered;
// (3) under minLength with a pattern that can end short of it (only the upper bound is
// tracked ahead). The sampler must treat an empty mask as an error.
//
// Counted patterns: ^C{m,n}$ with C one character (a class, \d, ., ...) compiles as
// C* within the length bounds [m, n] (the string's length register), so all counts
// share one automaton state and one vocabulary walk.
//
// Whitespace: the default policy (WhitespacePython) accepts exactly the one-line form of
// Python's json.dumps: ", " between items and members, ": " after keys, no other
// whitespace. That is the form MaskBench serializes and the form models usually write
// on one line. WhitespaceCompact has "," and ":"; WhitespaceFlexible allows any JSON
// whitespace between tokens (bounded runs). Strings use the canonical escapes of
// json.dumps(ensure_ascii=False): non-ASCII raw, \" \\ \n \r \t \b \f, \u00XX for
// other control characters.
//
// EBNF: the GBNF dialect of llama.cpp and XGrammar, parsed with participle: rules
// "name ::= ...", start rule root, literals, character classes, ".", groups, |, * + ?
// {m} {m,} {m,n} {,n}, # comments. Errors carry line:col; left recursion is refused
// with the cycle named (rewrite with repetition).
//
// # Engine
//
// Every rule compiles (Thompson) to an NFA over bytes whose edges are byte sets,
// epsilon moves and calls of other rules; nodes can guard or change a small item
// register (object member bitsets and counts, array counts, string lengths, a position
// in a trie of keys a string must not spell). Rules without calls are leaf automata
// shared by every grammar of a Compiler; one parameterized automaton serves all JSON
// strings (length bounds and excluded keys live in its start register). Automata are
// determinized lazily into lock-free transition tables. A parse is a set of stacks of
// DFA states (a pushdown automaton with tail calls elided).
//
// FillMask walks the vocabulary's byte trie (preorder, a dead subtree skipped in one
// step) from each stack's top state: the result of that walk — allowed tokens and the
// trie nodes where the top rule can return — is cached per DFA state, and the returns
// are continued in the parent's context ("levels"), also cached. JSON string states
// are walked once, "abstractly" (counts and excluded keys erased), recording how many
// characters each token needs; each concrete state filters that shared result by its
// remaining length and excluded keys (a state whose remaining length no token can
// exhaust takes a walk that records no needs). An abstract state a generation reaches
// for the first time shares the walk of an earlier state that no byte string of up to
// 20 bytes tells apart from it (checked by exploring both side by side; a counter far
// from its bound, a word count), or else the parts of earlier walks below the trie
// root's children that it enters in equivalent states (a partial match of text
// searched anywhere); the nodes deeper than 20 bytes, on the paths of the few longer
// tokens, are walked for every state. A free walk (no length bound to keep) from a
// state that holds the loop of a search's head or tail (any characters) allows every
// token of string content, the same set for all such states (computed once per
// vocabulary): it walks only the trie's paths to the quote nodes, to find where the
// string may close. In a string leaf an item at the start of a search's tail subsumes
// the other items of its state (they accept nothing it does not), so the states after
// any match are one state. So most masks are a cached bitset plus a few small lists.
//
// Alternatives of strings: an anyOf/oneOf splits exactly into its alternatives'
// string parts and their other types (a value's type shows in its first byte); the
// string parts with the same length bounds are one leaf whose content is the
// alternation of their patterns and formats, walked once instead of once per
// alternative. Pattern automata over 30,000 nodes (word counts such as {0,199}) are
// built when the schema compiles, not in the first mask that enters them. Compile time is bounded by Options.MaxCompileTime (10 s), automata,
// configurations, stacks and caches by the other Options; adversarial inputs get a
// result within those bounds or a clear error.
//
// # Benchmarks
//
// RunMaskBench implements the MaskBench method (see `dic grammar bench`); Check shows
// the first token a grammar refuses (`dic grammar check`). Measured figures and the
// commands that produced them are in README.md.
package grammars
