package grammars

import (
	"bytes"
	"fmt"
	"sort"
	"sync"
)

// Vocab is the model vocabulary as the grammar engine sees it: the bytes of every
// token id, which ids are special, the EOS id and the width of the logits (the mask).
// Ids at or above NumTokens, and special ids other than EOS, are never allowed by a
// mask. A Vocab is immutable after construction and safe for concurrent use; the
// token trie that mask computation walks is built once, on first use, and shared by
// every grammar compiled against the same Vocab.
type Vocab struct {
	toks    [][]byte
	special []bool
	eos     int32
	width   int

	trieOnce sync.Once
	trie     *trie
}

// NewVocab builds a Vocab. tokens[i] holds the bytes of id i (nil or empty for ids
// that produce no bytes); special[i] marks control tokens (it may be shorter than
// tokens). width is the mask width (the logits width) and must be at least
// len(tokens); eos may be -1 when the model has none.
func NewVocab(tokens [][]byte, special []bool, eos int32, width int) (*Vocab, error) {
	if width < len(tokens) {
		return nil, fmt.Errorf("grammars: mask width %d is smaller than the vocabulary (%d tokens)", width, len(tokens))
	}
	if eos >= int32(len(tokens)) {
		return nil, fmt.Errorf("grammars: EOS id %d is outside the vocabulary (%d tokens)", eos, len(tokens))
	}
	v := &Vocab{toks: make([][]byte, len(tokens)), special: make([]bool, len(tokens)), eos: eos, width: width}
	for i, t := range tokens {
		v.toks[i] = append([]byte(nil), t...)
		if i < len(special) {
			v.special[i] = special[i]
		}
	}
	return v, nil
}

// TokenSource is what VocabFrom needs from a tokenizer.
type TokenSource interface {
	TokenBytes(int32) []byte
	IsSpecial(int32) bool
	NumTokens() int
	EOS() int32
}

// VocabFrom builds a Vocab from a tokenizer (for example *tokenizer.BPE). width is the
// model's logits width (129,280 for DeepSeek); width <= 0 means NumTokens.
func VocabFrom(t TokenSource, width int) *Vocab {
	n := t.NumTokens()
	if width < n {
		width = n
	}
	v := &Vocab{toks: make([][]byte, n), special: make([]bool, n), eos: t.EOS(), width: width}
	for i := 0; i < n; i++ {
		id := int32(i)
		v.special[i] = t.IsSpecial(id)
		if !v.special[i] {
			v.toks[i] = append([]byte(nil), t.TokenBytes(id)...)
		}
	}
	if v.eos >= int32(n) {
		v.eos = -1
	}
	return v
}

// NumTokens is the number of ids the tokenizer produces.
func (v *Vocab) NumTokens() int { return len(v.toks) }

// Width is the mask width in bits.
func (v *Vocab) Width() int { return v.width }

// MaskWords is the number of uint64 words a mask of this vocabulary needs.
func (v *Vocab) MaskWords() int { return (v.width + 63) / 64 }

// EOS is the end-of-sequence id (-1 if none).
func (v *Vocab) EOS() int32 { return v.eos }

// TokenBytes returns the bytes of id (nil for special or unknown ids). The slice must
// not be modified.
func (v *Vocab) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(v.toks) {
		return nil
	}
	return v.toks[id]
}

// IsSpecial reports whether id is a special (control) token.
func (v *Vocab) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(v.special) && v.special[id]
}

// trie is the vocabulary's byte trie in preorder. Node 0 is the root (no byte). The
// children of a node follow it in byte order; next[i] is the index just past node i's
// subtree, so a walk skips a dead subtree in one step.
type trie struct {
	b      []byte
	depth  []uint16
	next   []int32
	tok    []int32 // token ending at the node, or -1
	parent []int32
	// dups lists tokens whose bytes equal another token's (the primary, which the
	// trie holds): a mask that allows the primary allows the duplicate.
	dups     [][2]int32
	maxDepth int
	// for shared walks (walkshare.go): the trie as a trieView, each node's height
	// (the depth of its deepest descendant) and the paths to the longest tokens
	view   trieView
	height []uint16
	long   *trieView
	// for walks from states that allow any content (walkAnyContent): the paths to
	// the nodes of a quote, and the tokens of plain string content (built once)
	quote       *trieView
	contentOnce sync.Once
	content     [2]*absRes // inside the string, and before its opening quote
}

// longestToken finds the longest token that b starts with: its id (-1 if none), its
// length, and whether a longer token extends it (the trie continues below it).
func (t *trie) longestToken(b []byte) (tok int32, n int, extends bool) {
	tok, node := -1, int32(0)
	for i := range b {
		c := node + 1
		for c < t.next[node] && t.b[c] != b[i] {
			c = t.next[c]
		}
		if c >= t.next[node] {
			break
		}
		node = c
		if t.tok[node] >= 0 {
			tok, n, extends = t.tok[node], i+1, t.next[node] > node+1
		}
	}
	return tok, n, extends
}

// Warm builds the vocabulary's token trie, quote index (duplicate keys) and string
// content walks (walkAnyContent) now rather than at the first mask that needs them.
func (v *Vocab) Warm() {
	v.getTrie().contentWalk(v.MaskWords())
	v.quotes()
}

func (v *Vocab) getTrie() *trie {
	v.trieOnce.Do(func() { v.trie = buildTrie(v.toks, v.special) })
	return v.trie
}

func buildTrie(toks [][]byte, special []bool) *trie {
	ids := make([]int32, 0, len(toks))
	for i, t := range toks {
		if len(t) > 0 && !special[i] {
			ids = append(ids, int32(i))
		}
	}
	sort.Slice(ids, func(a, b int) bool {
		c := bytes.Compare(toks[ids[a]], toks[ids[b]])
		if c != 0 {
			return c < 0
		}
		return ids[a] < ids[b]
	})
	t := &trie{}
	add := func(b byte, depth int, parent int32) int32 {
		t.b = append(t.b, b)
		t.depth = append(t.depth, uint16(depth))
		t.next = append(t.next, 0)
		t.tok = append(t.tok, -1)
		t.parent = append(t.parent, parent)
		if depth > t.maxDepth {
			t.maxDepth = depth
		}
		return int32(len(t.b) - 1)
	}
	add(0, 0, -1)
	path := []int32{0} // path[d] is the node at depth d on the current path
	var prev []byte
	for _, id := range ids {
		s := toks[id]
		if len(s) > 65535 {
			continue
		}
		// common prefix with the previous token
		cp := 0
		for cp < len(prev) && cp < len(s) && prev[cp] == s[cp] {
			cp++
		}
		// close nodes deeper than cp
		for len(path)-1 > cp {
			n := path[len(path)-1]
			t.next[n] = int32(len(t.b))
			path = path[:len(path)-1]
		}
		for d := cp; d < len(s); d++ {
			n := add(s[d], d+1, path[len(path)-1])
			path = append(path, n)
		}
		last := path[len(path)-1]
		if t.tok[last] >= 0 {
			t.dups = append(t.dups, [2]int32{t.tok[last], id})
		} else {
			t.tok[last] = id
		}
		prev = s
	}
	for len(path) > 0 {
		n := path[len(path)-1]
		t.next[n] = int32(len(t.b))
		path = path[:len(path)-1]
	}
	t.prepShare()
	return t
}

// pathBytes returns the bytes from the root to node n.
func (t *trie) pathBytes(n int32, buf []byte) []byte {
	d := int(t.depth[n])
	if cap(buf) < d {
		buf = make([]byte, d)
	}
	buf = buf[:d]
	for i := d - 1; i >= 0; i-- {
		buf[i] = t.b[n]
		n = t.parent[n]
	}
	return buf
}
