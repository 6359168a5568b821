package grammars

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// parseJSON against the schema library's UnmarshalJSON (encoding/json with UseNumber).

var jsonCases = []string{
	``, ` `, `null`, `true`, `false`, `nul`, `tru`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-12.5e+30`, `.5`, `+1`,
	`""`, `"a"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ude00"`, `"\ud83d\u0041"`, `"\ud83d\uzzzz"`, `"\u12"`, `"\x"`,
	`"\"\\\/\b\f\n\r\t"`, "\"\x01\"", "\"\x7f\"", "\"\xff\"", "\"a\xc3\"", "\"\xc3\xa9\"", "\"\xef\xbf\xbd\"", `"abc`, `"\`,
	`[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, `[[[]]]`, `{}`, `{ }`, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1,"a":2}`,
	`{"a":{"b":[1,{"c":null}]}}`, `1 2`, `{} `, "\t{}\r\n", `{}x`, `[1]]`, "\xef\xbb\xbf{}", `{"\u0000":1}`, `"\/"`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
}

func sameAsEncodingJSON(t *testing.T, b []byte) {
	t.Helper()
	v1, e1 := parseJSON(b)
	v2, e2 := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if (e1 == nil) != (e2 == nil) {
		t.Fatalf("%.80q: parseJSON error %v, encoding/json error %v", b, e1, e2)
	}
	if e1 == nil && !reflect.DeepEqual(v1, v2) {
		t.Fatalf("%.80q: parseJSON %#v, encoding/json %#v", b, v1, v2)
	}
}

func TestParseJSONMatchesEncodingJSON(t *testing.T) {
	for _, c := range jsonCases {
		sameAsEncodingJSON(t, []byte(c))
	}
	files, _ := filepath.Glob("testdata/*/*.json")
	more, _ := filepath.Glob(filepath.Join(suiteDir, "tests", "draft2020-12", "*.json"))
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sameAsEncodingJSON(t, b)
	}
}

func FuzzParseJSON(f *testing.F) {
	for _, c := range jsonCases {
		if len(c) < 1000 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsEncodingJSON(t, b)
	})
}

func TestCanonicalCacheKey(t *testing.T) {
	same := [][2]string{
		{`{"a": 1, "b": [true, null, "x"]}`, `{"b":[true,null,"x"],"a":1}`},
		{`{"a": {"c": 1, "b": 2}}`, "{\n\"a\":{\"b\":2,\"c\":1}}"},
	}
	differ := [][2]string{
		{`{"a": "x\"y"}`, `{"a": "x\\\"y"}`},
		{`{"a": "b", "c": "d"}`, `{"a": "b\",\"c\":\"d"}`},
		{`{"a": 1}`, `{"a": 1.0}`},
		{`{"a": "1"}`, `{"a": 1}`},
		{`["a", "b"]`, `["b", "a"]`},
	}
	key := func(s string) string {
		v, err := parseJSON([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return string(appendCanon(nil, v))
	}
	for _, p := range same {
		if key(p[0]) != key(p[1]) {
			t.Errorf("%s and %s: keys differ", p[0], p[1])
		}
	}
	for _, p := range differ {
		if key(p[0]) == key(p[1]) {
			t.Errorf("%s and %s: same key %s", p[0], p[1], key(p[0]))
		}
	}
}
