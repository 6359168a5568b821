package grammars

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSON text in the form Python's json.dumps(data, ensure_ascii=False) writes: ", "
// and ": " separators, non-ASCII characters raw, and a canonical escape for every
// character that needs one. Schema grammars accept strings in exactly this encoding.

const hexLower = "0123456789abcdef"

// appendJSONChar appends the canonical encoding of r inside a JSON string.
func appendJSONChar(b []byte, r rune) []byte {
	switch r {
	case '"':
		return append(b, '\\', '"')
	case '\\':
		return append(b, '\\', '\\')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	}
	if r < 0x20 {
		return append(b, '\\', 'u', '0', '0', hexLower[r>>4], hexLower[r&15])
	}
	if r >= 0xD800 && r <= 0xDFFF || r > utf8.MaxRune {
		// a lone surrogate (Python str can hold one); write it escaped
		return append(b, '\\', 'u', hexLower[r>>12&15], hexLower[r>>8&15], hexLower[r>>4&15], hexLower[r&15])
	}
	return utf8.AppendRune(b, r)
}

// appendJSONString appends s as a JSON string literal (canonical encoding).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		b = appendJSONChar(b, r)
	}
	return append(b, '"')
}

// jsonContent returns the canonical encoding of s without quotes.
func jsonContent(s string) []byte {
	var b []byte
	for _, r := range s {
		b = appendJSONChar(b, r)
	}
	return b
}

// jsonClass encodes a set of runes (sorted ranges lo,hi,...) as JSON string content:
// raw UTF-8 for the characters that need no escape, the canonical escape otherwise.
func jsonClass(ranges []rune) *expr {
	var raw []rune
	var esc []*expr
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		// split out the characters that are escaped
		for lo <= hi {
			switch {
			case lo < 0x20:
				e := min(hi, 0x1f)
				for r := lo; r <= e; r++ {
					esc = append(esc, eLitBytes(appendJSONChar(nil, r)))
				}
				lo = e + 1
			case lo == '"' || lo == '\\':
				esc = append(esc, eLitBytes(appendJSONChar(nil, lo)))
				lo++
			default:
				e := hi
				if lo < '"' && e >= '"' {
					e = '"' - 1
				} else if lo < '\\' && e >= '\\' {
					e = '\\' - 1
				}
				raw = append(raw, lo, e)
				lo = e + 1
			}
		}
	}
	alts := []*expr{}
	if len(raw) > 0 {
		alts = append(alts, utf8Class(raw))
	}
	if len(esc) > 0 {
		// share the leading backslash
		var rests []*expr
		for _, e := range esc {
			rests = append(rests, eLitBytes(e.lit[1:]))
		}
		alts = append(alts, eSeqOf(eLit(`\`), eAltOf(rests...)))
	}
	return eAltOf(alts...)
}

// anyJSONChar is one character of JSON string content.
var anyJSONCharRanges = []rune{0, utf8.MaxRune}

// pyFloat formats f the way Python's repr(float) does.
func pyFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "Infinity"
	}
	if math.IsInf(f, -1) {
		return "-Infinity"
	}
	if math.IsNaN(f) {
		return "NaN"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exps, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(exps)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	if exp >= -4 && exp < 16 {
		// fixed notation: digits with the decimal point after exp+1 digits
		if exp >= 0 {
			if len(digits) <= exp+1 {
				out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
			} else {
				out = digits[:exp+1] + "." + digits[exp+1:]
			}
		} else {
			out = "0." + strings.Repeat("0", -exp-1) + digits
		}
	}
	if out == "" {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign = "-"
			exp = -exp
		}
		out = fmt.Sprintf("%se%s%02d", m, sign, exp)
	}
	if neg {
		out = "-" + out
	}
	return out
}

// PythonJSON re-serializes JSON text the way Python's json.dumps(json.loads(text),
// ensure_ascii=False) does: key order kept, ", " and ": " separators, canonical
// string escapes. Numbers keep their text (MaskBench files were written by Python,
// so their numbers are already in Python's form).
func PythonJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out []byte
	type ctx struct {
		obj   bool
		n     int
		isKey bool
	}
	var stack []ctx
	sep := func() {
		if len(stack) == 0 {
			return
		}
		c := &stack[len(stack)-1]
		if c.obj {
			if c.isKey {
				if c.n > 0 {
					out = append(out, ',', ' ')
				}
			} else {
				out = append(out, ':', ' ')
			}
		} else if c.n > 0 {
			out = append(out, ',', ' ')
		}
	}
	after := func() {
		if len(stack) == 0 {
			return
		}
		c := &stack[len(stack)-1]
		if c.obj {
			if !c.isKey {
				c.n++
			}
			c.isKey = !c.isKey
		} else {
			c.n++
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				sep()
				out = append(out, byte(t))
				stack = append(stack, ctx{obj: t == '{', isKey: true})
			case '}', ']':
				out = append(out, byte(t))
				stack = stack[:len(stack)-1]
				after()
			}
			continue
		case string:
			sep()
			out = appendJSONString(out, t)
		case json.Number:
			sep()
			out = append(out, t...)
		case bool:
			sep()
			if t {
				out = append(out, "true"...)
			} else {
				out = append(out, "false"...)
			}
		case nil:
			sep()
			out = append(out, "null"...)
		}
		after()
	}
	return out, nil
}

// pyValue serializes a decoded JSON value (maps in sorted key order).
func pyValue(b []byte, v any) []byte {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		if t {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case string:
		return appendJSONString(b, t)
	case json.Number:
		return append(b, t...)
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1e16 {
			return strconv.AppendInt(b, int64(t), 10)
		}
		return append(b, pyFloat(t)...)
	case []any:
		b = append(b, '[')
		for i, x := range t {
			if i > 0 {
				b = append(b, ',', ' ')
			}
			b = pyValue(b, x)
		}
		return append(b, ']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',', ' ')
			}
			b = appendJSONString(b, k)
			b = append(b, ':', ' ')
			b = pyValue(b, t[k])
		}
		return append(b, '}')
	}
	return append(b, fmt.Sprint(v)...)
}
