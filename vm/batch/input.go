// Package batch runs offline batches in the OpenAI Batch API format: a JSONL file of
// requests in, a JSONL file with exactly one result or error line per request out.
//
// Output is appended one whole line per write, so a run killed at any point leaves only
// complete lines (a partial tail, which a crash mid-write could leave on some file
// systems, is cut off when the file is reopened). A rerun with the same output file
// skips every request that already has a line, so runs are resumable.
package batch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"deepinfer/tokenizer"
)

// Endpoints a line may target.
const (
	ChatURL       = "/v1/chat/completions"
	CompletionURL = "/v1/completions"
)

// Request is one validated input line.
type Request struct {
	Line     int
	CustomID string
	URL      string
	Model    string
	Messages []tokenizer.Message
	Prompt   string
	// MaxTokens is 0 when the line does not set it.
	MaxTokens   int
	Temperature float64
	TopP        float64
	TopK        int
	Seed        uint64
	Stop        []string
	Format      *ResponseFormat
}

// ResponseFormat is the body's response_format.
type ResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
	Regex      string          `json:"regex,omitempty"`
	EBNF       string          `json:"ebnf,omitempty"`
}

type rawLine struct {
	CustomID *string         `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
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
	User                string          `json:"user"`
}

// LineError is a line that cannot run; it becomes an error line in the output.
type LineError struct {
	Line     int
	CustomID string // "" when the line has none
	Code     string
	Msg      string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// MaxLineBytes bounds one input line.
const MaxLineBytes = 16 << 20

// ParseLine validates one input line. lineNo is 1-based.
func ParseLine(data []byte, lineNo int) (*Request, error) {
	bad := func(id, format string, args ...any) error {
		return &LineError{Line: lineNo, CustomID: id, Code: "invalid_request", Msg: fmt.Sprintf(format, args...)}
	}
	var raw rawLine
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		// recover the custom_id if the line is JSON with unexpected fields
		var loose struct {
			CustomID *string `json:"custom_id"`
		}
		id := ""
		if json.Unmarshal(data, &loose) == nil && loose.CustomID != nil {
			id = *loose.CustomID
		}
		return nil, bad(id, "not a valid request line: %s", jsonErr(err))
	}
	if dec.More() {
		return nil, bad("", "more than one JSON value on the line")
	}
	if raw.CustomID == nil || *raw.CustomID == "" {
		return nil, bad("", "missing custom_id")
	}
	id := *raw.CustomID
	if len(id) > 512 {
		return nil, bad("", "custom_id is longer than 512 bytes")
	}
	if raw.Method != "POST" {
		return nil, bad(id, "method %q: only POST is supported", raw.Method)
	}
	if raw.URL != ChatURL && raw.URL != CompletionURL {
		return nil, bad(id, "url %q: want %s or %s", raw.URL, ChatURL, CompletionURL)
	}
	if len(raw.Body) == 0 || string(raw.Body) == "null" {
		return nil, bad(id, "missing body")
	}
	var body rawBody
	bdec := json.NewDecoder(bytes.NewReader(raw.Body))
	bdec.DisallowUnknownFields()
	if err := bdec.Decode(&body); err != nil {
		return nil, bad(id, "body: %s", jsonErr(err))
	}
	r := &Request{Line: lineNo, CustomID: id, URL: raw.URL, Model: body.Model, TopP: 1}
	if raw.URL == ChatURL {
		if len(body.Messages) == 0 {
			return nil, bad(id, "body.messages: missing or empty (required for %s)", ChatURL)
		}
		if len(body.Prompt) != 0 {
			return nil, bad(id, "body.prompt: not allowed on %s (use messages)", ChatURL)
		}
		for i, m := range body.Messages {
			switch m.Role {
			case "system", "user", "assistant":
			default:
				return nil, bad(id, "body.messages[%d].role: %q is not supported (system, user, assistant)", i, m.Role)
			}
			text, err := contentText(m.Content)
			if err != nil {
				return nil, bad(id, "body.messages[%d].content: %v", i, err)
			}
			r.Messages = append(r.Messages, tokenizer.Message{Role: m.Role, Content: text})
		}
	} else {
		if len(body.Messages) != 0 {
			return nil, bad(id, "body.messages: not allowed on %s (use prompt)", CompletionURL)
		}
		if err := json.Unmarshal(body.Prompt, &r.Prompt); err != nil || len(body.Prompt) == 0 {
			return nil, bad(id, "body.prompt: want a string")
		}
	}
	if body.MaxTokens != nil && body.MaxCompletionTokens != nil {
		return nil, bad(id, "body: give max_tokens or max_completion_tokens, not both")
	}
	for name, v := range map[string]*int{"max_tokens": body.MaxTokens, "max_completion_tokens": body.MaxCompletionTokens} {
		if v != nil {
			if *v < 1 {
				return nil, bad(id, "body.%s: %d must be at least 1", name, *v)
			}
			r.MaxTokens = *v
		}
	}
	if v := body.Temperature; v != nil {
		if *v < 0 || *v > 2 || math.IsNaN(*v) {
			return nil, bad(id, "body.temperature: %g is outside [0, 2]", *v)
		}
		r.Temperature = *v
	} else {
		r.Temperature = 1 // OpenAI's default
	}
	if v := body.TopP; v != nil {
		if *v <= 0 || *v > 1 {
			return nil, bad(id, "body.top_p: %g is outside (0, 1]", *v)
		}
		r.TopP = *v
	}
	if v := body.TopK; v != nil {
		if *v < 0 {
			return nil, bad(id, "body.top_k: %d is negative", *v)
		}
		r.TopK = *v
	}
	if v := body.Seed; v != nil {
		r.Seed = uint64(*v)
	}
	if v := body.N; v != nil && *v != 1 {
		return nil, bad(id, "body.n: %d choices are not supported (only 1)", *v)
	}
	if v := body.Stream; v != nil && *v {
		return nil, bad(id, "body.stream: streaming does not apply to batch requests")
	}
	stop, err := stopStrings(body.Stop)
	if err != nil {
		return nil, bad(id, "body.stop: %v", err)
	}
	r.Stop = stop
	if f := body.ResponseFormat; f != nil {
		switch f.Type {
		case "text", "":
		case "json_object", "json_schema", "regex", "ebnf":
			r.Format = f
		default:
			return nil, bad(id, "body.response_format.type: %q is not one of text, json_object, json_schema, regex, ebnf", f.Type)
		}
	}
	return r, nil
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

func jsonErr(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	return strings.ReplaceAll(msg, "\n", " ")
}
