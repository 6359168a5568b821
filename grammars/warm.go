package grammars

// Warm builds, before the first request, what every grammar of this compiler (and of
// its forks) shares and would otherwise build at its first masks: the vocabulary trie
// and quote index, and the shared leaf automata of plain strings, numbers, integers
// and object keys with their vocabulary walks, following a few documents through
// them. A server calls it once at start-up; the first schema's time to first mask
// then no longer pays for them (tens of milliseconds).
func (c *Compiler) Warm() { c.warm() }

// warm returns how many of its documents it followed to the end.
func (c *Compiler) warm() (done int) {
	c.vocab.Warm()
	schema := `{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"number"},{"type":"integer"},` +
		`{"type":"boolean"},{"type":"null"},{"type":"object","additionalProperties":{"type":["string","integer","number"]}}]}}`
	g, err := c.JSONSchema([]byte(schema))
	if err != nil {
		return 0
	}
	docs := []string{
		"[\"abc dé\\n\\\"x\", 12.5e3, -7, 0, true, false, null, {\"key\": \"value\", \"n\": 3.25}]",
		"[{\"a b\": -1.5E-7, \"c\": \"\"}, \"Hello, world.\", 1234567890, -0.0]",
	}
	mask := make([]uint64, c.vocab.MaskWords())
	for _, d := range docs {
		m := g.NewMatcher()
		t := c.vocab.getTrie()
		p := 0
		for p < len(d) {
			if m.FillMask(mask) != nil {
				break
			}
			tok, n, _ := t.longestToken([]byte(d[p:]))
			if tok < 0 || m.Accept(tok) != nil {
				break
			}
			p += n
		}
		if p == len(d) && m.FillMask(mask) == nil && m.IsAccepting() {
			done++
		}
	}
	return done
}
