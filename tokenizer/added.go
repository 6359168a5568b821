package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// addedMatcher finds added tokens in text the way HF's AddedVocabulary does with its
// aho-corasick automaton (MatchKind::LeftmostLongest): the leftmost position where any
// token matches, the longest token there, then the search goes on after it. A byte trie
// does the same job; it only runs at bytes that can start a token (all 818 of
// DeepSeek's start with '<'), so ordinary text costs one table lookup per byte.
type addedMatcher struct {
	first [256]bool
	nodes []trieNode
	toks  []addedToken // indexed by trieNode.tok
}

type trieNode struct {
	edges []trieEdge
	tok   int32 // index into toks of the token ending here, or -1
}

type trieEdge struct {
	b  byte
	to int32
}

func newAddedMatcher(toks []addedToken) *addedMatcher {
	m := &addedMatcher{nodes: []trieNode{{tok: -1}}}
	for _, t := range toks {
		if t.Content == "" {
			continue // HF ignores empty added tokens
		}
		m.first[t.Content[0]] = true
		n := int32(0)
		for i := 0; i < len(t.Content); i++ {
			n = m.child(n, t.Content[i])
		}
		// A content listed twice keeps its last entry, as HF's map does.
		if m.nodes[n].tok >= 0 {
			m.toks[m.nodes[n].tok] = t
		} else {
			m.nodes[n].tok = int32(len(m.toks))
			m.toks = append(m.toks, t)
		}
	}
	return m
}

func (m *addedMatcher) child(n int32, b byte) int32 {
	for _, e := range m.nodes[n].edges {
		if e.b == b {
			return e.to
		}
	}
	m.nodes = append(m.nodes, trieNode{tok: -1})
	to := int32(len(m.nodes) - 1)
	m.nodes[n].edges = append(m.nodes[n].edges, trieEdge{b, to})
	return to
}

// longest returns the longest token that is a prefix of s, or ok=false.
func (m *addedMatcher) longest(s string) (tok *addedToken, ok bool) {
	n, best := int32(0), int32(-1)
	for i := 0; i < len(s); i++ {
		next := int32(-1)
		for _, e := range m.nodes[n].edges {
			if e.b == s[i] {
				next = e.to
				break
			}
		}
		if next < 0 {
			break
		}
		n = next
		if m.nodes[n].tok >= 0 {
			best = m.nodes[n].tok
		}
	}
	if best < 0 {
		return nil, false
	}
	return &m.toks[best], true
}

// split hands each stretch of s that is not an added token to e.text(level, ...) and
// appends each added token's id to e.ids, in order. It reproduces HF's find_matches: a single_word token that
// touches a word character is dropped (and the search resumes after it, as the
// automaton's non-overlapping iteration does); lstrip/rstrip widen the token's span
// over the whitespace beside it, which then vanishes from the text.
func (m *addedMatcher) split(s string, e *encoder, level int) {
	if m == nil || len(m.toks) == 0 {
		e.text(level, s)
		return
	}
	done := 0 // s[:done] has been handed out
	for i := 0; i < len(s); {
		if !m.first[s[i]] {
			i++
			continue
		}
		t, ok := m.longest(s[i:])
		if !ok {
			i++
			continue
		}
		start, stop := i, i+len(t.Content)
		i = stop
		if t.SingleWord && (start > 0 && endsWithWord(s[:start]) || stop < len(s) && startsWithWord(s[stop:])) {
			continue
		}
		if t.LStrip {
			start = max(start-trailingSpace(s[:start]), done)
		}
		if t.RStrip {
			stop += leadingSpace(s[stop:])
			i = stop
		}
		if done < start {
			e.text(level, s[done:start])
		}
		e.ids = append(e.ids, t.ID)
		done = stop
	}
	if done < len(s) {
		e.text(level, s[done:])
	}
}

// isWordRune is Rust regex's Unicode \w, which HF uses for single_word:
// Alphabetic, marks, decimal digits, connector punctuation and Join_Control.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Pc, r) ||
		unicode.Is(unicode.Other_Alphabetic, r) || unicode.Is(unicode.Join_Control, r)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWordRune(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordRune(r)
}

// trailingSpace is the byte length of the White_Space run that ends s.
func trailingSpace(s string) int {
	n := len(s)
	for n > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:n])
		if !unicode.Is(unicode.White_Space, r) {
			break
		}
		n -= size
	}
	return len(s) - n
}

// leadingSpace is the byte length of the White_Space run that starts s.
func leadingSpace(s string) int {
	n := 0
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		if !unicode.Is(unicode.White_Space, r) {
			break
		}
		n += size
	}
	return n
}
