package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"deepinfer/grammars"
)

// matcherFor compiles a response_format into a grammar matcher. Compiled grammars are
// cached by the compiler, so a batch of lines with one schema compiles it once. It
// returns a one-line reason on failure.
func matcherFor(f *ResponseFormat, c *grammars.Compiler) (*grammars.Matcher, string) {
	if c == nil {
		return nil, "structured output is not available for this model"
	}
	var g *grammars.Grammar
	var err error
	switch f.Type {
	case "json_object":
		g, err = c.JSONSchema([]byte(`{"type":"object"}`))
	case "json_schema":
		var js struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		}
		if uerr := json.Unmarshal(f.JSONSchema, &js); uerr != nil || len(js.Schema) == 0 {
			return nil, "json_schema must be an object with a schema"
		}
		g, err = c.JSONSchema(js.Schema)
	case "regex":
		if f.Regex == "" {
			return nil, "regex is empty"
		}
		g, err = c.Regex(f.Regex)
	case "ebnf":
		if f.EBNF == "" {
			return nil, "ebnf is empty"
		}
		g, err = c.EBNF(f.EBNF)
	default:
		return nil, fmt.Sprintf("type %q is not supported", f.Type)
	}
	if err != nil {
		return nil, strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return g.NewMatcher(), ""
}
