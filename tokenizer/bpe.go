package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BPE is DeepSeek's byte-level BPE tokenizer, loaded from a tokenizer.json (and the
// optional tokenizer_config.json beside it). It is safe for concurrent use; a Stream
// is not.
type BPE struct {
	byteID [256]int32  // the token of each single byte: BPE's starting symbols
	merges *mergeTable // (left, right) -> rank, merged id
	cache  *wordCache

	added [2]*addedMatcher // added tokens matched on the raw text, then the normalized ones

	// Per id: the bytes the id decodes to (arena[offs[id]:offs[id+1]]) and flags.
	arena []byte
	offs  []uint32
	flags []uint8

	// token_to_id as HF has it: added-token contents, then the model vocabulary's
	// byte-level strings.
	ids map[string]int32

	bos, eos       int32 // -1 when unknown
	addBOS, addEOS bool
	chatTemplate   string
}

const (
	flagValid   = 1 << iota // the id names a token (ids can have gaps)
	flagAdded               // an added token: decodes to its content
	flagSpecial             // added with special: true; dropped by skipSpecial
)

var _ Tokenizer = (*BPE)(nil)

// maxTokenID bounds the ids a tokenizer.json may use, so a corrupt file cannot make the
// loader allocate without limit. DeepSeek's largest is 128814.
const maxTokenID = 1 << 24

// tokenizerJSON is the part of HF's tokenizer.json the loader reads.
type tokenizerJSON struct {
	AddedTokens   []addedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type                    string           `json:"type"`
		Dropout                 *float64         `json:"dropout"`
		ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
		ByteFallback            bool             `json:"byte_fallback"`
		IgnoreMerges            bool             `json:"ignore_merges"`
		Vocab                   map[string]int32 `json:"vocab"`
		Merges                  json.RawMessage  `json:"merges"`
	} `json:"model"`
}

// tokenizerConfig is the part of tokenizer_config.json the loader reads.
type tokenizerConfig struct {
	AddBOS       *bool           `json:"add_bos_token"`
	AddEOS       *bool           `json:"add_eos_token"`
	BOS          json.RawMessage `json:"bos_token"`
	EOS          json.RawMessage `json:"eos_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// LoadBPE loads dir/tokenizer.json and, when present, dir/tokenizer_config.json (BOS
// and EOS, add_bos_token, the chat template). It refuses a tokenizer.json whose
// normalizer, pre-tokenizer, model or decoder is not the DeepSeek-V3 pipeline this
// package implements, naming the part.
func LoadBPE(dir string) (*BPE, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tj tokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b, err := newBPE(&tj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cpath := filepath.Join(dir, "tokenizer_config.json")
	cdata, err := os.ReadFile(cpath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		cdata = nil
	case err != nil:
		return nil, err
	}
	if err := b.configure(cdata); err != nil {
		return nil, fmt.Errorf("%s: %w", cpath, err)
	}
	return b, nil
}

func newBPE(tj *tokenizerJSON) (*BPE, error) {
	if err := checkPipeline(tj); err != nil {
		return nil, err
	}
	m := &tj.Model
	if len(m.Vocab) == 0 {
		return nil, fmt.Errorf("model.vocab is empty")
	}

	// The id space: the model vocabulary and the added tokens.
	n := int32(0)
	for s, id := range m.Vocab {
		if id < 0 || id >= maxTokenID {
			return nil, fmt.Errorf("model.vocab[%q]: id %d out of range", s, id)
		}
		n = max(n, id+1)
	}
	for i, t := range tj.AddedTokens {
		if t.ID < 0 || t.ID >= maxTokenID {
			return nil, fmt.Errorf("added_tokens[%d]: id %d out of range", i, t.ID)
		}
		n = max(n, t.ID+1)
	}

	b := &BPE{cache: new(wordCache), bos: -1, eos: -1, flags: make([]uint8, n), ids: make(map[string]int32, len(m.Vocab)+len(tj.AddedTokens))}
	text := make([][]byte, n)
	for s, id := range m.Vocab {
		text[id] = byteLevelBytes(s)
		b.flags[id] = flagValid
		b.ids[s] = id
	}
	for _, t := range tj.AddedTokens {
		if t.Content == "" {
			continue
		}
		text[t.ID] = []byte(t.Content)
		f := uint8(flagValid | flagAdded)
		if t.Special {
			f |= flagSpecial
		}
		b.flags[t.ID] = f
		b.ids[t.Content] = t.ID
	}
	b.offs = make([]uint32, n+1)
	for id, t := range text {
		b.arena = append(b.arena, t...)
		b.offs[id+1] = uint32(len(b.arena))
	}

	for c := 0; c < 256; c++ {
		id, ok := m.Vocab[string(byteToRune[c])]
		if !ok {
			return nil, fmt.Errorf("model.vocab has no token for byte 0x%02x (%q)", c, byteToRune[c])
		}
		b.byteID[c] = id
	}

	merges, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	b.merges = newMergeTable(len(merges))
	for rank, mg := range merges {
		l, okl := m.Vocab[mg[0]]
		r, okr := m.Vocab[mg[1]]
		out, oko := m.Vocab[mg[0]+mg[1]]
		if !okl || !okr || !oko {
			return nil, fmt.Errorf("model.merges[%d] %q %q: a token is not in model.vocab", rank, mg[0], mg[1])
		}
		b.merges.put(l, r, uint32(rank), out)
	}

	var raw, normalized []addedToken
	for _, t := range tj.AddedTokens {
		if t.Normalized {
			normalized = append(normalized, t)
		} else {
			raw = append(raw, t)
		}
	}
	b.added = [2]*addedMatcher{newAddedMatcher(raw), newAddedMatcher(normalized)}
	initClasses()
	return b, nil
}

// parseMerges reads model.merges in either of HF's formats: "left right" strings, or
// (tokenizers >= 0.20) [left, right] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		return pairs, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err != nil {
		return nil, fmt.Errorf("model.merges: want strings or pairs of strings: %w", err)
	}
	pairs = make([][2]string, len(strs))
	for i, s := range strs {
		l, r, ok := cutSpace(s)
		if !ok {
			return nil, fmt.Errorf("model.merges[%d] %q: want two tokens separated by one space", i, s)
		}
		pairs[i] = [2]string{l, r}
	}
	return pairs, nil
}

func cutSpace(s string) (string, string, bool) {
	l, r, ok := strings.Cut(s, " ")
	return l, r, ok && !strings.Contains(r, " ")
}

// checkPipeline refuses the parts of tokenizer.json this package does not implement.
func checkPipeline(tj *tokenizerJSON) error {
	var norm struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if !isNull(tj.Normalizer) {
		if err := json.Unmarshal(tj.Normalizer, &norm); err != nil || norm.Type != "Sequence" || len(norm.Normalizers) != 0 {
			return fmt.Errorf("normalizer: only none (or an empty Sequence) is supported, got %s", short(tj.Normalizer))
		}
	}

	var pre struct {
		Type          string `json:"type"`
		Pretokenizers []struct {
			Type    string `json:"type"`
			Pattern struct {
				Regex *string `json:"Regex"`
			} `json:"pattern"`
			Behavior       string `json:"behavior"`
			Invert         bool   `json:"invert"`
			AddPrefixSpace bool   `json:"add_prefix_space"`
			UseRegex       *bool  `json:"use_regex"`
		} `json:"pretokenizers"`
	}
	errPre := fmt.Errorf("pre_tokenizer: not DeepSeek's Sequence of Split(%s), Split(%s), Split(<words>), ByteLevel (the splits are compiled by hand, so no other is supported)", reDigits, reCJK)
	if err := json.Unmarshal(tj.PreTokenizer, &pre); err != nil || pre.Type != "Sequence" || len(pre.Pretokenizers) != 4 {
		return errPre
	}
	for i, want := range []string{reDigits, reCJK, reWords} {
		p := pre.Pretokenizers[i]
		if p.Type != "Split" || p.Pattern.Regex == nil || !sameRegex(*p.Pattern.Regex, want) || p.Behavior != "Isolated" || p.Invert {
			return errPre
		}
	}
	if bl := pre.Pretokenizers[3]; bl.Type != "ByteLevel" || bl.AddPrefixSpace || bl.UseRegex == nil || *bl.UseRegex {
		return errPre
	}

	var dec struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(tj.Decoder, &dec); err != nil || dec.Type != "ByteLevel" {
		return fmt.Errorf("decoder: only ByteLevel is supported, got %s", short(tj.Decoder))
	}
	// The ByteLevel post-processor only adjusts offsets; BOS comes from the config's
	// add_bos_token, as transformers' LlamaTokenizerFast does.
	var post struct {
		Type string `json:"type"`
	}
	if !isNull(tj.PostProcessor) {
		if err := json.Unmarshal(tj.PostProcessor, &post); err != nil || post.Type != "ByteLevel" {
			return fmt.Errorf("post_processor: only ByteLevel is supported, got %s", short(tj.PostProcessor))
		}
	}

	m := &tj.Model
	switch {
	case m.Type != "BPE":
		return fmt.Errorf("model.type %q: only BPE is supported", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return fmt.Errorf("model.dropout: BPE dropout is not supported")
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "",
		m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return fmt.Errorf("model: continuing_subword_prefix and end_of_word_suffix are not supported")
	case m.ByteFallback:
		return fmt.Errorf("model.byte_fallback is not supported (byte-level BPE needs none)")
	case m.IgnoreMerges:
		return fmt.Errorf("model.ignore_merges is not supported")
	}
	return nil
}

func isNull(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) == 0 || string(r) == "null"
}

func short(r json.RawMessage) string {
	if len(r) > 80 {
		return string(r[:80]) + "..."
	}
	if len(r) == 0 {
		return "nothing"
	}
	return string(r)
}

// configure applies tokenizer_config.json (nil when absent). Without one there is no
// chat template and no BOS on Encode, and BOS/EOS fall back to DeepSeek's names.
func (b *BPE) configure(data []byte) error {
	var cfg tokenizerConfig
	if data != nil {
		if err := json.Unmarshal(data, &cfg); err != nil {
			return err
		}
	}
	var err error
	if b.bos, err = b.configToken(cfg.BOS, "bos_token", "<｜begin▁of▁sentence｜>"); err != nil {
		return err
	}
	if b.eos, err = b.configToken(cfg.EOS, "eos_token", "<｜end▁of▁sentence｜>"); err != nil {
		return err
	}
	b.addBOS = cfg.AddBOS != nil && *cfg.AddBOS && b.bos >= 0
	b.addEOS = cfg.AddEOS != nil && *cfg.AddEOS && b.eos >= 0
	if !isNull(cfg.ChatTemplate) {
		var s string
		if err := json.Unmarshal(cfg.ChatTemplate, &s); err != nil {
			// The list form: [{"name": "default", "template": ...}, ...].
			var named []struct{ Name, Template string }
			if err := json.Unmarshal(cfg.ChatTemplate, &named); err != nil {
				return fmt.Errorf("chat_template: want a string or a list of {name, template}")
			}
			for _, t := range named {
				if t.Name == "default" {
					s = t.Template
				}
			}
		}
		b.chatTemplate = s
	}
	return nil
}

// configToken resolves a bos_token/eos_token entry: a string, an AddedToken object, or
// absent (then def, if the vocabulary has it).
func (b *BPE) configToken(raw json.RawMessage, field, def string) (int32, error) {
	content := def
	if !isNull(raw) {
		var obj struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(raw, &content); err != nil {
			if err := json.Unmarshal(raw, &obj); err != nil {
				return -1, fmt.Errorf("%s: want a string or {\"content\": ...}", field)
			}
			content = obj.Content
		}
		if _, ok := b.ids[content]; !ok {
			return -1, fmt.Errorf("%s %q is not a token of tokenizer.json", field, content)
		}
	}
	if id, ok := b.ids[content]; ok {
		return id, nil
	}
	return -1, nil
}

// encoder is the state of one Encode call: the output, threaded through the added-token
// split, the pre-tokenizer and BPE without closures or per-piece allocation.
type encoder struct {
	b   *BPE
	ids []int32
	// trace, when set (by tests), also receives every pre-token.
	trace func(string)
}

// text handles a stretch of input with no added token of the earlier levels in it:
// level 1 looks for normalized added tokens (the normalizer is the identity, so they
// match the raw text), level 2 pre-tokenizes.
func (e *encoder) text(level int, s string) {
	if level < 2 {
		e.b.added[level].split(s, e, level+1)
		return
	}
	e.pretokenize(s)
}

// word appends the BPE ids of one pre-token.
func (e *encoder) word(w string) {
	if e.trace != nil {
		e.trace(w)
	}
	e.ids = e.b.appendWord(e.ids, w)
}

// Encode tokenizes text as HF tokenizers does: added tokens (special-token strings
// included) are cut out of the raw text first, then each stretch between them is
// pre-tokenized and each pre-token merged. addSpecial prepends BOS when
// tokenizer_config.json sets add_bos_token (and appends EOS for add_eos_token).
func (b *BPE) Encode(text string, addSpecial bool) []int32 {
	e := encoder{b: b, ids: make([]int32, 0, len(text)/3+2)}
	if addSpecial && b.addBOS {
		e.ids = append(e.ids, b.bos)
	}
	e.text(0, text)
	if addSpecial && b.addEOS {
		e.ids = append(e.ids, b.eos)
	}
	return e.ids
}

// BOS implements Tokenizer; -1 when the tokenizer has none.
func (b *BPE) BOS() int32 { return b.bos }

// EOS implements Tokenizer; -1 when the tokenizer has none.
func (b *BPE) EOS() int32 { return b.eos }

// NumTokens implements Tokenizer: one more than the largest id of tokenizer.json
// (128,815 for DeepSeek-V3). A model's logits may be wider.
func (b *BPE) NumTokens() int { return len(b.flags) }

// TokenBytes returns the bytes id decodes to: for BPE tokens the raw bytes behind their
// byte-level string (possibly a partial UTF-8 sequence), for added tokens their content.
// Nil for an id that names no token. The slice is shared: do not modify it.
func (b *BPE) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(b.flags) || b.flags[id]&flagValid == 0 {
		return nil
	}
	lo, hi := b.offs[id], b.offs[id+1]
	return b.arena[lo:hi:hi]
}

// IsSpecial reports whether id is an added token marked special (the ones Decode drops
// with skipSpecial). DeepSeek's chat markers such as <｜User｜> are added tokens but not
// special.
func (b *BPE) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(b.flags) && b.flags[id]&flagSpecial != 0
}

// TokenID returns the id of a token by its tokenizer.json spelling, as HF's
// token_to_id: an added token's content, or a vocabulary entry's byte-level string
// (e.g. "Ġthe" for " the").
func (b *BPE) TokenID(content string) (int32, bool) {
	id, ok := b.ids[content]
	return id, ok
}

// The GPT-2 byte-level alphabet: bytes that are printable (and not space) stand for
// themselves, the other 68 take the code points from U+0100 up, in byte order.
var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	n := rune(0)
	for c := 0; c < 256; c++ {
		if c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE && c <= 0xFF {
			byteToRune[c] = rune(c)
		} else {
			byteToRune[c] = 0x100 + n
			n++
		}
		runeToByte[byteToRune[c]] = byte(c)
	}
}

// byteLevelBytes maps a vocabulary string back to its bytes. A string with a character
// outside the alphabet decodes to its own UTF-8, as HF's ByteLevel decoder does (only
// the added tokens that are also in the vocabulary, like <｜begin▁of▁sentence｜>).
func byteLevelBytes(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		c, ok := runeToByte[r]
		if !ok {
			return []byte(s)
		}
		out = append(out, c)
	}
	return out
}
