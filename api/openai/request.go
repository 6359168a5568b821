// Package openai is the OpenAI API surface the batch runner and the HTTP server share:
// request bodies of /v1/chat/completions and /v1/completions validated into one form,
// prompts tokenized into engine requests, generated text decoded with stop strings and
// grammars, and the response and streaming-chunk bodies built from engine results.
// Both front ends accept exactly the same fields with the same validation.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"deepinfer/tokenizer"
)

// Endpoints.
const (
	ChatURL       = "/v1/chat/completions"
	CompletionURL = "/v1/completions"
)

// MaxPrompts bounds the prompts of one completions request (one choice each).
const MaxPrompts = 64

// Request is a validated request body.
type Request struct {
	URL      string
	Model    string
	Messages []tokenizer.Message
	// Prompts are a completions request's prompts, one choice each: text, or token ids.
	Prompts []Prompt
	// MaxTokens is 0 when the body does not set it.
	MaxTokens   int
	Temperature float64
	TopP        float64
	TopK        int
	Seed        uint64
	SeedSet     bool
	Stop        []string
	Format      *ResponseFormat
	Stream      bool
	// IncludeUsage adds a usage chunk to a stream (stream_options.include_usage).
	IncludeUsage bool
	// Logprobs asks for each generated token's log-probability, with TopLogprobs
	// alternatives (chat: logprobs + top_logprobs; completions: logprobs = n).
	Logprobs    bool
	TopLogprobs int
	// IgnoreEOS keeps generating past the end-of-sequence token until max_tokens (vLLM's
	// extension, for benchmarks).
	IgnoreEOS bool
}

// Prompt is one completions prompt.
type Prompt struct {
	Text   string
	IDs    []int32
	HasIDs bool
}

// ResponseFormat is the body's response_format.
type ResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
	Regex      string          `json:"regex,omitempty"`
	EBNF       string          `json:"ebnf,omitempty"`
}

type rawMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name,omitempty"`
}

type rawBody struct {
	Model               string          `json:"model"`
	Messages            []rawMessage    `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	ResponseFormat      *ResponseFormat `json:"response_format"`
	N                   *int            `json:"n"`
	Stream              *bool           `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	Logprobs    json.RawMessage `json:"logprobs"`
	TopLogprobs *int            `json:"top_logprobs"`
	User        string          `json:"user"`
	IgnoreEOS   *bool           `json:"ignore_eos"`
}

// Error is a request OpenAI's API would refuse: the HTTP status, the error type and
// code, and the field it is about.
type Error struct {
	Status  int
	Type    string // invalid_request_error, server_error, ...
	Code    string
	Param   string // the offending field, "" when none
	Message string
}

func (e *Error) Error() string { return e.Message }

// Invalid is a 400 about field param.
func Invalid(param, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if param != "" {
		msg = param + ": " + msg
	}
	return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_request", Param: param, Message: msg}
}

// ParseOptions say what the front end allows.
type ParseOptions struct {
	// Stream allows stream: true (the server; batch requests are not streamed).
	Stream bool
}

// ParseBody validates a request body for url.
func ParseBody(url string, data []byte, o ParseOptions) (*Request, *Error) {
	if url != ChatURL && url != CompletionURL {
		return nil, &Error{Status: 404, Type: "invalid_request_error", Code: "unknown_url", Param: "url",
			Message: fmt.Sprintf("url %q: want %s or %s", url, ChatURL, CompletionURL)}
	}
	if len(bytes.TrimSpace(data)) == 0 || string(bytes.TrimSpace(data)) == "null" {
		return nil, Invalid("", "missing body")
	}
	var body rawBody
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, Invalid(te.Field, "want %s, not a JSON %s", kindName(te.Type.Kind().String()), te.Value)
		}
		return nil, Invalid(jsonField(err), "%s", jsonErr(err))
	}
	if dec.More() {
		return nil, Invalid("", "more than one JSON value in the body")
	}
	r := &Request{URL: url, Model: body.Model, TopP: 1}
	if url == ChatURL {
		if len(body.Messages) == 0 {
			return nil, Invalid("messages", "missing or empty (required for %s)", ChatURL)
		}
		if len(body.Prompt) != 0 {
			return nil, Invalid("prompt", "not allowed on %s (use messages)", ChatURL)
		}
		for i, m := range body.Messages {
			switch m.Role {
			case "system", "user", "assistant":
			default:
				return nil, Invalid(fmt.Sprintf("messages[%d].role", i), "%q is not supported (system, user, assistant)", m.Role)
			}
			text, err := contentText(m.Content)
			if err != nil {
				return nil, Invalid(fmt.Sprintf("messages[%d].content", i), "%v", err)
			}
			r.Messages = append(r.Messages, tokenizer.Message{Role: m.Role, Content: text})
		}
	} else {
		if len(body.Messages) != 0 {
			return nil, Invalid("messages", "not allowed on %s (use prompt)", CompletionURL)
		}
		ps, err := prompts(body.Prompt)
		if err != nil {
			return nil, Invalid("prompt", "%v", err)
		}
		r.Prompts = ps
	}
	if body.MaxTokens != nil && body.MaxCompletionTokens != nil {
		return nil, Invalid("max_tokens", "give max_tokens or max_completion_tokens, not both")
	}
	for name, v := range map[string]*int{"max_tokens": body.MaxTokens, "max_completion_tokens": body.MaxCompletionTokens} {
		if v != nil {
			if *v < 1 {
				return nil, Invalid(name, "%d must be at least 1", *v)
			}
			r.MaxTokens = *v
		}
	}
	r.Temperature = 1 // OpenAI's default
	if v := body.Temperature; v != nil {
		if *v < 0 || *v > 2 || math.IsNaN(*v) {
			return nil, Invalid("temperature", "%g is outside [0, 2]", *v)
		}
		r.Temperature = *v
	}
	if v := body.TopP; v != nil {
		if *v <= 0 || *v > 1 || math.IsNaN(*v) {
			return nil, Invalid("top_p", "%g is outside (0, 1]", *v)
		}
		r.TopP = *v
	}
	if v := body.TopK; v != nil {
		if *v < 0 {
			return nil, Invalid("top_k", "%d is negative", *v)
		}
		r.TopK = *v
	}
	if v := body.Seed; v != nil {
		r.Seed, r.SeedSet = uint64(*v), true
	}
	if v := body.N; v != nil && *v != 1 {
		return nil, Invalid("n", "%d choices are not supported (only 1)", *v)
	}
	if v := body.Stream; v != nil && *v {
		if !o.Stream {
			return nil, Invalid("stream", "streaming does not apply to batch requests")
		}
		r.Stream = true
	}
	if so := body.StreamOptions; so != nil {
		if !r.Stream {
			return nil, Invalid("stream_options", "only allowed with stream: true")
		}
		r.IncludeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	}
	r.IgnoreEOS = body.IgnoreEOS != nil && *body.IgnoreEOS
	if err := r.logprobs(body); err != nil {
		return nil, err
	}
	stop, err := stopStrings(body.Stop)
	if err != nil {
		return nil, Invalid("stop", "%v", err)
	}
	r.Stop = stop
	if f := body.ResponseFormat; f != nil {
		switch f.Type {
		case "text", "":
		case "json_object", "json_schema", "regex", "ebnf":
			r.Format = f
		default:
			return nil, Invalid("response_format.type", "%q is not one of text, json_object, json_schema, regex, ebnf", f.Type)
		}
	}
	return r, nil
}

// logprobs reads logprobs/top_logprobs: a bool and a count on chat, a count on
// completions.
func (r *Request) logprobs(body rawBody) *Error {
	lp := bytes.TrimSpace(body.Logprobs)
	if r.URL == ChatURL {
		if len(lp) > 0 && string(lp) != "null" {
			if err := json.Unmarshal(lp, &r.Logprobs); err != nil {
				return Invalid("logprobs", "want a boolean on %s", ChatURL)
			}
		}
		if v := body.TopLogprobs; v != nil {
			if *v < 0 || *v > 20 {
				return Invalid("top_logprobs", "%d is outside [0, 20]", *v)
			}
			if !r.Logprobs {
				return Invalid("top_logprobs", "needs logprobs: true")
			}
			r.TopLogprobs = *v
		}
		return nil
	}
	if body.TopLogprobs != nil {
		return Invalid("top_logprobs", "not a field of %s (logprobs is the count there)", CompletionURL)
	}
	if len(lp) > 0 && string(lp) != "null" {
		var n int
		if err := json.Unmarshal(lp, &n); err != nil || n < 0 || n > 5 {
			return Invalid("logprobs", "want an integer in [0, 5] on %s", CompletionURL)
		}
		r.Logprobs, r.TopLogprobs = true, n
	}
	return nil
}

// prompts reads a completions prompt: a string, a list of strings, a list of token ids,
// or a list of token-id lists.
func prompts(raw json.RawMessage) ([]Prompt, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("missing (a string, a list of strings, or token ids)")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Prompt{{Text: s}}, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return []Prompt{{IDs: ids, HasIDs: true}}, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		return nil, fmt.Errorf("want a string, a non-empty list of strings, or token ids")
	}
	if len(list) > MaxPrompts {
		return nil, fmt.Errorf("%d prompts (at most %d)", len(list), MaxPrompts)
	}
	var out []Prompt
	for i, e := range list {
		if json.Unmarshal(e, &s) == nil {
			out = append(out, Prompt{Text: s})
			continue
		}
		if json.Unmarshal(e, &ids) == nil && len(ids) > 0 {
			out = append(out, Prompt{IDs: ids, HasIDs: true})
			continue
		}
		return nil, fmt.Errorf("element %d: want a string or a non-empty list of token ids", i)
	}
	return out, nil
}

// contentText accepts a string or an array of {"type":"text","text":...} parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("want a string or a list of text parts")
	}
	var sb strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("part %d has type %q; only text parts are supported (no image input yet)", i, p.Type)
		}
		sb.WriteString(p.Text)
	}
	return sb.String(), nil
}

func stopStrings(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, fmt.Errorf("empty stop string")
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("want a string or a list of up to 4 strings")
	}
	if len(list) > 4 {
		return nil, fmt.Errorf("%d stop strings (at most 4)", len(list))
	}
	for i, s := range list {
		if s == "" {
			return nil, fmt.Errorf("stop[%d] is empty", i)
		}
	}
	return list, nil
}

// kindName says what a Go kind holds, for messages about JSON values.
func kindName(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "an integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "string":
		return "a string"
	case k == "bool":
		return "a boolean"
	case k == "slice":
		return "a list"
	case k == "struct", k == "map":
		return "an object"
	}
	return "another type"
}

func jsonErr(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	return strings.ReplaceAll(msg, "\n", " ")
}

// jsonField names the field a decoding error is about: an unknown field's name, or a
// field of the wrong type.
func jsonField(err error) string {
	var te *json.UnmarshalTypeError
	msg := err.Error()
	if errors.As(err, &te) && te.Field != "" {
		return te.Field
	}
	if i := strings.Index(msg, `unknown field "`); i >= 0 {
		rest := msg[i+len(`unknown field "`):]
		if j := strings.Index(rest, `"`); j >= 0 {
			return rest[:j]
		}
	}
	return ""
}
