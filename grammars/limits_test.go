package grammars

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Adversarial inputs: each compiles within the bounds (and then masks work) or fails
// with a clear error, quickly.
func TestAdversarialSchemas(t *testing.T) {
	v := toyVocab(t)
	deep := strings.Repeat(`{"type":"array","items":`, 2000) + `{"type":"integer"}` + strings.Repeat(`}`, 2000)
	deepObj := strings.Repeat(`{"type":"object","properties":{"a":`, 500) + `{"type":"string"}` + strings.Repeat(`}}`, 500)
	var oneOfs strings.Builder
	oneOfs.WriteString(`{"type":"object","properties":{`)
	for i := 0; i < 12; i++ {
		if i > 0 {
			oneOfs.WriteString(",")
		}
		fmt.Fprintf(&oneOfs, `"p%d":{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"object","properties":{"x":{"type":"string"}}}]}`, i)
	}
	oneOfs.WriteString(`}}`)
	nested := `{"oneOf":[`
	for i := 0; i < 8; i++ {
		nested += `{"oneOf":[{"type":"string","maxLength":` + fmt.Sprint(i+1) + `},`
	}
	nested += `{"type":"null"}` + strings.Repeat(`]}`, 8) + `]}`
	var enum strings.Builder
	enum.WriteString(`{"enum":[`)
	for i := 0; i < 20000; i++ {
		if i > 0 {
			enum.WriteString(",")
		}
		fmt.Fprintf(&enum, `"value-%d"`, i)
	}
	enum.WriteString(`]}`)
	recursive := `{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"},{"type":"null"}]},"b":{"type":"array","items":{"$ref":"#/$defs/a"}},"c":{"$ref":"#/$defs/c"}},"$ref":"#/$defs/a"}`
	selfRef := `{"$defs":{"c":{"$ref":"#/$defs/c"}},"$ref":"#/$defs/c"}`
	allOfLoop := `{"$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}],"properties":{"x":{"$ref":"#/$defs/a"}}},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`
	wide := `{"type":"object","properties":{` + strings.TrimSuffix(strings.Repeat(`"k":{"type":"string"},`, 1), ",")
	for i := 0; i < 3000; i++ {
		wide += fmt.Sprintf(`,"key%d":{"type":"integer"}`, i)
	}
	wide += `},"required":["k","key1","key2999"]}`
	for name, s := range map[string]string{
		"deep arrays": deep, "deep objects": deepObj, "many oneOf": oneOfs.String(), "nested oneOf": nested,
		"huge enum": enum.String(), "recursive refs": recursive, "self ref": selfRef, "allOf loop": allOfLoop, "wide object": wide,
	} {
		c := NewCompiler(v, Options{MaxCompileTime: 5 * time.Second})
		t0 := time.Now()
		g, err := c.JSONSchema([]byte(s))
		el := time.Since(t0)
		if el > 8*time.Second {
			t.Errorf("%s: compile took %s", name, el)
		}
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) || ce.Reason == "" {
				t.Errorf("%s: error without a reason: %v", name, err)
			}
			t.Logf("%s: %v (%s)", name, err, el)
			continue
		}
		m := g.NewMatcher()
		mask := make([]uint64, v.MaskWords())
		if err := m.FillMask(mask); err != nil {
			t.Errorf("%s: first mask: %v", name, err)
		}
		t.Logf("%s: compiled in %s, first mask allows %d tokens", name, el, len(allowedTokens(mask)))
	}
}

func TestCompileTimeLimit(t *testing.T) {
	v := toyVocab(t)
	var sb strings.Builder
	sb.WriteString(`{"type":"object","properties":{`)
	for i := 0; i < 400; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"p%d":{"anyOf":[{"type":"string","pattern":"^[a-z]{%d}$"},{"type":"array","items":{"type":"integer","minimum":%d}}]}`, i, i%7+1, i)
	}
	sb.WriteString(`}}`)
	c := NewCompiler(v, Options{MaxCompileTime: time.Millisecond})
	t0 := time.Now()
	_, err := c.JSONSchema([]byte(sb.String()))
	if el := time.Since(t0); el > 2*time.Second {
		t.Fatalf("the 1ms limit took %s", el)
	}
	var ce *CompileError
	if !errors.As(err, &ce) || ce.Reason != ReasonTimeout {
		t.Fatalf("want a timeout error, got %v", err)
	}
}

// TestRuntimeStateLimit: a regex whose DFA is exponential hits MaxStates at run time
// and FillMask reports it (no hang, no crash).
func TestRuntimeStateLimit(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{MaxStates: 50})
	g, err := c.Regex(`[ab]*a[ab]{16}`)
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	mask := make([]uint64, v.MaskWords())
	var ferr error
	for i := 0; i < 200 && ferr == nil; i++ {
		if ferr = m.FillMask(mask); ferr != nil {
			break
		}
		tok := int32('a')
		if i%3 == 0 {
			tok = 'b'
		}
		if err := m.Accept(tok); err != nil {
			ferr = err
		}
	}
	if ferr == nil || !strings.Contains(ferr.Error(), "limit") {
		t.Fatalf("want a state limit error, got %v", ferr)
	}
}

func TestSpecialAndWidth(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{})
	g, err := c.Regex(`.*`)
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	mask := checkMask(t, m, "start")
	for id := 0; id < v.Width(); id++ {
		bit := mask[id>>6]&(1<<(uint(id)&63)) != 0
		if (id >= v.NumTokens() || v.IsSpecial(int32(id)) && int32(id) != v.EOS()) && bit {
			t.Fatalf("id %d allowed", id)
		}
	}
	if mask[v.EOS()>>6]&(1<<(uint(v.EOS())&63)) == 0 {
		t.Fatal("EOS not allowed where .* may end")
	}
	g2, _ := c.Regex(`ab`)
	m2 := g2.NewMatcher()
	mask = checkMask(t, m2, "ab start")
	if mask[v.EOS()>>6]&(1<<(uint(v.EOS())&63)) != 0 {
		t.Fatal("EOS allowed before the match is complete")
	}
	if err := m2.Accept(v.EOS()); err == nil {
		t.Fatal("EOS accepted early")
	}
}

func TestGrammarCache(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{CacheSize: 2})
	a1, _ := c.JSONSchema([]byte(`{"type":"string"}`))
	a2, _ := c.JSONSchema([]byte(`{ "type" : "string" }`))
	if a1 != a2 {
		t.Fatal("the same schema (canonical form) compiled twice")
	}
	c.Regex("x")
	c.Regex("y")
	a3, _ := c.JSONSchema([]byte(`{"type":"string"}`))
	if a3 == a1 {
		t.Fatal("LRU kept more than CacheSize grammars")
	}
	if c.cache.Len() != 2 {
		t.Fatalf("cache holds %d", c.cache.Len())
	}
}

func TestEnumLimit(t *testing.T) {
	c := NewCompiler(toyVocab(t), Options{MaxEnum: 10})
	var sb strings.Builder
	sb.WriteString(`{"enum":[`)
	for i := 0; i < 20; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, "%d", i)
	}
	sb.WriteString("]}")
	_, err := c.JSONSchema([]byte(sb.String()))
	var ce *CompileError
	if !errors.As(err, &ce) || ce.Reason != ReasonLimit || !strings.Contains(err.Error(), "enum") {
		t.Fatalf("want an enum limit error, got %v", err)
	}
}
