package grammars

import (
	"fmt"
	"math/big"
	"math/rand"
	"strings"
	"testing"
)

// TestDecimalRangeExact: a number with minimum/maximum (non-integer type) is a
// grammar, not a semantic check: every text it allows is in range (checked with exact
// rationals), every plain decimal in range is allowed, and a random generation always
// finishes in range.
func TestDecimalRangeExact(t *testing.T) {
	v := byteVocab(t)
	c := NewCompiler(v, Options{})
	bounds := []string{"", "0", "1", "-1", "0.5", "-2.25", "90", "-90", "100.001", "3", "0.001", "-0.75", "2147483647", "1e-3"}
	cands := []string{"0", "1", "-1", "0.5", "-0.5", "0.0", "1.0", "1.00", "0.001", "0.0010", "0.0009", "0.0011", "-2.25", "-2.2500", "-2.26",
		"-2.249", "90", "90.0", "90.000001", "-90", "-90.5", "89.99999", "100.001", "100.0011", "100.0009", "3", "2.999", "3.0001", "-0.75",
		"-0.7499", "-0.7501", "2147483647", "2147483647.5", "2147483646.9", "1e-3", "5e-1", "9.99e-1", "1e-05", "1.5e+16", "1e0", "2E3", "-1e-05",
		"-1.5e+16", "7", "-7", "45.25", "-45.25", "12345678901234567890", "0.99999999999", "1.000000001"}
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 120; i++ {
		var sb strings.Builder
		if rng.Intn(2) == 0 {
			sb.WriteByte('-')
		}
		fmt.Fprintf(&sb, "%d", rng.Intn([]int{2, 10, 200, 5000}[rng.Intn(4)]))
		if rng.Intn(2) == 0 {
			sb.WriteByte('.')
			for k := 0; k <= rng.Intn(4); k++ {
				sb.WriteByte(byte('0' + rng.Intn(10)))
			}
		}
		cands = append(cands, sb.String())
	}
	rat := func(s string) *big.Rat {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("bad number %q", s)
		}
		return r
	}
	// plain decimals (no exponent, no negative zero) in range must all be allowed
	plain := func(s string) bool { return !strings.ContainsAny(s, "eE") && !(s[0] == '-' && rat(s).Sign() == 0) }
	checked := 0
	for li, lo := range bounds {
		for hi2, hi := range bounds {
			if (testing.Short() || raceEnabled) && (li+hi2)%3 != 0 {
				continue // a third of the pairs under the race detector
			}
			for ex := 0; ex < 4; ex++ {
				loEx, hiEx := ex&1 != 0, ex&2 != 0
				var parts []string
				if lo != "" {
					kw := "minimum"
					if loEx {
						kw = "exclusiveMinimum"
					}
					parts = append(parts, fmt.Sprintf("%q:%s", kw, lo))
				} else if loEx {
					continue
				}
				if hi != "" {
					kw := "maximum"
					if hiEx {
						kw = "exclusiveMaximum"
					}
					parts = append(parts, fmt.Sprintf("%q:%s", kw, hi))
				} else if hiEx {
					continue
				}
				schema := fmt.Sprintf(`{"type":"number"%s}`, strings.Join(append([]string{""}, parts...), ","))
				g, err := c.JSONSchema([]byte(schema))
				if err != nil {
					if lo != "" && hi != "" && (rat(lo).Cmp(rat(hi)) > 0 || rat(lo).Cmp(rat(hi)) == 0 && (loEx || hiEx)) {
						continue // an empty range
					}
					t.Fatalf("%s: %v", schema, err)
				}
				if w := g.Warnings(); len(w) > 0 {
					t.Fatalf("%s: not exact: %v", schema, w)
				}
				in := func(x *big.Rat) bool {
					if lo != "" {
						if cmp := x.Cmp(rat(lo)); cmp < 0 || cmp == 0 && loEx {
							return false
						}
					}
					if hi != "" {
						if cmp := x.Cmp(rat(hi)); cmp > 0 || cmp == 0 && hiEx {
							return false
						}
					}
					return true
				}
				for _, s := range cands {
					ok, why := runDoc(t, g, s, false)
					want := in(rat(s))
					if ok && !want {
						t.Fatalf("%s: %s accepted, out of range", schema, s)
					}
					if !ok && want && plain(s) {
						t.Fatalf("%s: %s refused, in range: %s", schema, s, why)
					}
					checked++
				}
				m := g.NewMatcher()
				if out, ended := randomWalk(t, m, rng, 60, false); ended && !in(rat(string(out))) {
					t.Fatalf("%s: generated %s, out of range", schema, out)
				}
			}
		}
	}
	t.Logf("%d decisions", checked)
}

// TestFormatsExact: the formats marked exact need no semantic check, so everything
// their grammar allows must pass the validator: random walks (and listed strings)
// are validated; strings that the validator takes and the grammar should too are
// accepted.
func TestFormatsExact(t *testing.T) {
	v := byteVocab(t)
	c := NewCompiler(v, Options{})
	cases := map[string]struct{ ok, bad []string }{
		"date":      {[]string{"2024-02-29", "2000-02-29", "1900-02-28", "0000-02-29", "2023-12-31", "2023-04-30"}, []string{"2023-02-29", "1900-02-29", "2023-04-31", "2023-02-30", "2023-13-01"}},
		"date-time": {[]string{"2024-02-29T23:59:60Z", "1999-12-31t23:59:59.5+01:00", "2021-06-30T00:00:00-00:00"}, []string{"2023-02-29T00:00:00Z", "2024-01-01T12:00:60Z", "2024-01-01T23:59:60+01:00"}},
		"time":      {[]string{"23:59:60z", "00:00:00Z", "12:34:56.789+05:30"}, []string{"24:00:00Z", "12:00:60Z"}},
		"ipv4":      {[]string{"0.0.0.0", "255.255.255.255", "10.1.2.3"}, []string{"256.1.1.1", "01.1.1.1", "1.2.3"}},
		"ipv6":      {[]string{"::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "fe80::1:2", "1::2:3:4:5:6:7"}, []string{"1:2:3:4:5:6:7:8::", "1::2::3", ":1::", "12345::", "::1.2.3", "1:2:3:4:5:6:7:1.2.3.4", "fe80::1%eth0"}},
		"hostname":  {[]string{"example.com", "a", "x-y.z.", strings.Repeat("a", 63) + ".b"}, []string{"-a.com", "a-.com", "a..b", strings.Repeat("a", 64) + ".b"}},
		"email":     {[]string{"a@b.c", "john.doe@example.com", "\"x y\"@h", "u@[IPv6:::1]", "u@[10.0.0.1]", "x@host."}, []string{"a..b@c", ".a@b", "a@b..c", "@b", "a@-b", strings.Repeat("a", 65) + "@b", "u@[1.2.3]"}},
		"uri":       {[]string{"http://example.com/a/b?c=d#e", "mailto:x@y.z", "urn:isbn:0451450523", "https://user:pw@host:8080/p%20q", "http://[::1]:80/", "file:///etc/hosts", "x:", "http://h/a b"}, []string{"example.com", "http://a b/", "http://h/%zz", "http://h:x/", "1http://h"}},
		// the MaskBench meta-schemas' "$id"/"$ref" values: Python's rfc3987 (the labels'
		// validator) refuses spaces where url.Parse takes them
		"uri-reference": {[]string{"", "#", "#/definitions/a", "../a/b?c=d#e", "//host:8/p", "http://example.com/x", "a/b:c", "?q", "/abs", "mailto:a@b", "urn:x:y", "//[::1]/", "https://example.com/schema"}, []string{"!not a uri-reference!", "invalid Id", "invalid uri", "a b", `a\b`, "%zz", ":a", "http://h/é", "a:b c", "//h:x/"}},
	}
	for f, tc := range cases {
		schema := fmt.Sprintf(`{"type":"string","format":%q}`, f)
		g, err := c.JSONSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		if w := g.Warnings(); len(w) > 0 {
			t.Fatalf("%s: not exact: %v", f, w)
		}
		sch, err := c.loadSchema(mustDoc(t, []byte(schema)))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tc.ok {
			doc := string(appendJSONString(nil, s))
			if err := sch.Validate(mustDoc(t, []byte(doc))); err != nil {
				t.Fatalf("%s: test string %s is not valid: %v", f, doc, err)
			}
			if ok, why := runDoc(t, g, doc, false); !ok {
				t.Errorf("%s: %s refused: %s", f, doc, why)
			}
		}
		for _, s := range tc.bad {
			doc := string(appendJSONString(nil, s))
			if ok, _ := runDoc(t, g, doc, false); ok {
				t.Errorf("%s: %s accepted", f, doc)
			}
		}
		rng := rand.New(rand.NewSource(int64(len(f))))
		n := 0
		for w := 0; w < 300 && n < 60; w++ {
			out, ended := randomWalk(t, g.NewMatcher(), rng, 120, false)
			if !ended {
				continue
			}
			n++
			if err := sch.Validate(mustDoc(t, out)); err != nil {
				t.Fatalf("%s: generated %s, invalid: %v", f, out, err)
			}
		}
		if n < 20 {
			t.Errorf("%s: only %d random strings finished", f, n)
		}
	}
}
