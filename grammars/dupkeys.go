package grammars

import (
	"bytes"
	"sync"
)

// Duplicate object keys. The grammar writes each known property at most once, but the
// members that patternProperties and additionalProperties admit are open-ended: their
// keys spell no known property, yet two of them could spell the same key. A grammar
// cannot remember an unbounded set of keys, so the matcher does: keyScan follows the
// accepted JSON text and keeps the keys of every open object, Accept refuses a token
// that completes a key already present in its object, and FillMask clears those
// tokens from the mask. Keys compare as written; the grammar admits one spelling per
// string (json.dumps' escapes), so equal keys are equal bytes.

// keyScan is the object structure of a JSON text read so far.
type keyScan struct {
	depth  int        // wouldRepeat: the frames of the base state the token left open
	objs   []keyFrame // open containers, innermost last
	inStr  bool       // inside a string
	esc    bool       // after a backslash in a string
	isKey  bool       // the string is an object key
	key    []byte     // the key read so far
	expect bool       // the innermost container is an object that expects a key next
}

type keyFrame struct {
	obj  bool
	keys map[string]struct{}
}

func (k *keyScan) reset() {
	k.objs = k.objs[:0]
	k.inStr, k.esc, k.isKey, k.expect = false, false, false, false
	k.key = k.key[:0]
}

// feed advances over bs; it returns false (and stops) at a key that repeats a key of
// its object.
func (k *keyScan) feed(bs []byte) bool {
	for _, b := range bs {
		if k.inStr {
			switch {
			case k.esc:
				k.esc = false
			case b == '\\':
				k.esc = true
			case b == '"':
				k.inStr = false
				if k.isKey {
					top := &k.objs[len(k.objs)-1]
					if _, dup := top.keys[string(k.key)]; dup {
						return false
					}
					if top.keys == nil {
						top.keys = map[string]struct{}{}
					}
					top.keys[string(k.key)] = struct{}{}
					k.isKey = false
					continue
				}
			}
			if k.isKey {
				k.key = append(k.key, b)
			}
			continue
		}
		switch b {
		case '"':
			k.inStr = true
			k.isKey = k.expect
			k.expect = false
			k.key = k.key[:0]
		case '{':
			k.objs = append(k.objs, keyFrame{obj: true})
			k.expect = true
		case '[':
			k.objs = append(k.objs, keyFrame{})
			k.expect = false
		case '}', ']':
			if n := len(k.objs); n > 0 {
				k.objs[n-1].keys = nil
				k.objs = k.objs[:n-1]
			}
			k.expect = false
		case ',':
			k.expect = len(k.objs) > 0 && k.objs[len(k.objs)-1].obj
		}
	}
	return true
}

// wouldRepeat reports whether bs, read from the current state, completes a key that
// repeats one of its object. It leaves k unchanged.
func (k *keyScan) wouldRepeat(bs []byte, tmp *keyScan) bool {
	// objects the token opens start empty, those it closes are left; a copy of the
	// frames' headers (not of their key sets, which feed only adds to at the top)
	// keeps k as it was
	tmp.objs = append(tmp.objs[:0], k.objs...)
	tmp.inStr, tmp.esc, tmp.isKey, tmp.expect = k.inStr, k.esc, k.isKey, k.expect
	tmp.key = append(tmp.key[:0], k.key...)
	for i := range tmp.objs {
		tmp.objs[i].keys = nil
	}
	// the key sets are read through k; a frame of k keeps its index in tmp while the
	// token has not closed it
	base := len(k.objs)
	depth := base
	for _, b := range bs {
		if tmp.inStr {
			switch {
			case tmp.esc:
				tmp.esc = false
			case b == '\\':
				tmp.esc = true
			case b == '"':
				tmp.inStr = false
				if tmp.isKey {
					i := len(tmp.objs) - 1
					key := string(tmp.key)
					if i < depth && i < base {
						if _, dup := k.objs[i].keys[key]; dup {
							return true
						}
					}
					if _, dup := tmp.objs[i].keys[key]; dup {
						return true
					}
					if tmp.objs[i].keys == nil {
						tmp.objs[i].keys = map[string]struct{}{}
					}
					tmp.objs[i].keys[key] = struct{}{}
					tmp.isKey = false
					continue
				}
			}
			if tmp.isKey {
				tmp.key = append(tmp.key, b)
			}
			continue
		}
		switch b {
		case '"':
			tmp.inStr = true
			tmp.isKey = tmp.expect
			tmp.expect = false
			tmp.key = tmp.key[:0]
		case '{', '[':
			tmp.objs = append(tmp.objs, keyFrame{obj: b == '{'})
			tmp.expect = b == '{'
		case '}', ']':
			if n := len(tmp.objs); n > 0 {
				tmp.objs = tmp.objs[:n-1]
				depth = min(depth, n-1)
			}
			tmp.expect = false
		case ',':
			tmp.expect = len(tmp.objs) > 0 && tmp.objs[len(tmp.objs)-1].obj
		}
	}
	tmp.depth = depth
	return false
}

// lastBytes adds to s the byte before the closing quote of every key in an open
// object ('"' for the empty key).
func (k *keyScan) lastBytes(s *byteSet) bool {
	any := false
	for _, f := range k.objs {
		for key := range f.keys {
			any = true
			if key == "" {
				s.add('"')
			} else {
				s.add(key[len(key)-1])
			}
		}
	}
	if k.inStr && k.isKey {
		any = true
		if len(k.key) == 0 {
			s.add('"')
		} else {
			s.add(k.key[len(k.key)-1])
		}
	}
	return any
}

// quoteIndex lists, per byte c, the tokens in which c is followed by '"', and the
// tokens that begin with '"': every token that can close a key is in the list of the
// key's last byte, or (when the key began in an earlier token) begins with '"'.
type quoteIndex struct {
	after [256][]int32
	first []int32
	multi []int32 // tokens with four quotes or more, which may hold two keys
	// tokens by the bytes after their last quote (those that open a key and end in
	// it), and tokens without a quote by their bytes (those that go on with a key)
	tail  map[string][]int32
	plain map[string][]int32
}

var quoteIndexes sync.Map // *Vocab -> *quoteIndex

func (v *Vocab) quotes() *quoteIndex {
	if q, ok := quoteIndexes.Load(v); ok {
		return q.(*quoteIndex)
	}
	q := &quoteIndex{tail: map[string][]int32{}, plain: map[string][]int32{}}
	for id, bs := range v.toks {
		if v.IsSpecial(int32(id)) || len(bs) == 0 {
			continue
		}
		if i := bytes.LastIndexByte(bs, '"'); i >= 0 {
			q.tail[string(bs[i+1:])] = append(q.tail[string(bs[i+1:])], int32(id))
		} else {
			q.plain[string(bs)] = append(q.plain[string(bs)], int32(id))
		}
		if len(bs) > 0 && bs[0] == '"' {
			q.first = append(q.first, int32(id))
		}
		if bytes.Count(bs, []byte{'"'}) >= 4 {
			q.multi = append(q.multi, int32(id))
		}
		var seen byteSet
		for i := 1; i < len(bs); i++ {
			if bs[i] == '"' && !seen.has(bs[i-1]) {
				seen.add(bs[i-1])
				q.after[bs[i-1]] = append(q.after[bs[i-1]], int32(id))
			}
		}
	}
	actual, _ := quoteIndexes.LoadOrStore(v, q)
	return actual.(*quoteIndex)
}

// clearRepeats clears from mask the allowed tokens that would complete a repeated
// key: it tries (wouldRepeat, as Accept does) every token the quote index names for
// the open keys' last bytes, and those that may spell two keys.
func (m *Matcher) clearRepeats(mask []uint64) {
	var last byteSet
	has := m.keys.lastBytes(&last)
	q := m.g.vocab.quotes()
	try := func(ids []int32) {
		for _, id := range ids {
			w, bit := id>>6, uint64(1)<<(uint(id)&63)
			if mask[w]&bit != 0 && m.keys.wouldRepeat(m.g.vocab.toks[id], &m.keysTmp) {
				mask[w] &^= bit
			}
		}
	}
	try(q.multi)
	if !has {
		return
	}
	for c := 0; c < 256; c++ {
		if last.has(byte(c)) {
			try(q.after[c])
		}
	}
	try(q.first)
	// tokens that stop inside a key spelling a key of its object, where the grammar
	// lets the key only close (a finite key language): the next token would be a dead
	// end
	dead := func(ids []int32) {
		for _, id := range ids {
			w, bit := id>>6, uint64(1)<<(uint(id)&63)
			if mask[w]&bit != 0 && m.keyOnlyRepeats(m.g.vocab.toks[id]) {
				mask[w] &^= bit
			}
		}
	}
	for _, f := range m.keys.objs {
		for key := range f.keys {
			dead(q.tail[key])
			if m.keys.inStr && m.keys.isKey && len(m.keys.key) < len(key) && key[:len(m.keys.key)] == string(m.keys.key) {
				dead(q.plain[key[len(m.keys.key):]])
			}
		}
	}
}

// keyOnlyRepeats reports whether after bs the matcher is inside a key that spells a
// key of its object so far and that the grammar lets only close.
func (m *Matcher) keyOnlyRepeats(bs []byte) bool {
	t := &m.keysTmp
	if !m.keys.endsInRepeat(bs, t) {
		return false
	}
	tops, err := m.advance(m.tops, bs)
	if err != nil {
		return false
	}
	closed, _, err := m.closure(tops)
	if err != nil {
		return false
	}
	// only the closing quote may follow: no frame steps on another byte, one on '"'
	// (stopping at the first other live byte: inside a key most bytes are)
	quote := false
	for _, f := range closed {
		a, s := m.g.autOf(m.frames[f].state)
		eb := &a.state(s).edgeBytes
		for c := 0; c < a.ncls; c++ {
			b := a.reps[c]
			if !eb.has(b) {
				continue
			}
			if b == '"' {
				if !quote && a.step(s, '"') >= 0 {
					quote = true
				}
				continue
			}
			if a.step(s, b) >= 0 {
				return false
			}
		}
	}
	return quote
}

// endsInRepeat reports whether bs, read from the current state, stops inside a key
// whose bytes so far are a key of its object.
func (k *keyScan) endsInRepeat(bs []byte, tmp *keyScan) bool {
	if k.wouldRepeat(bs, tmp) || !tmp.inStr || !tmp.isKey {
		return false
	}
	i := len(tmp.objs) - 1
	key := string(tmp.key)
	if _, ok := tmp.objs[i].keys[key]; ok {
		return true
	}
	if i < tmp.depth {
		_, ok := k.objs[i].keys[key]
		return ok
	}
	return false
}
