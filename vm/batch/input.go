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
	"strings"

	"deepinfer/api/openai"
)

// Endpoints a line may target.
const (
	ChatURL       = openai.ChatURL
	CompletionURL = openai.CompletionURL
)

// Request is one validated input line: its id and its body.
type Request struct {
	Line     int
	CustomID string
	URL      string
	Body     *openai.Request
}

type rawLine struct {
	CustomID *string         `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
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
	body, berr := openai.ParseBody(raw.URL, raw.Body, openai.ParseOptions{})
	if berr != nil {
		return nil, bad(id, "%s", bodyMsg(berr))
	}
	return &Request{Line: lineNo, CustomID: id, URL: raw.URL, Body: body}, nil
}

// bodyMsg prefixes a body error with "body." and the field it names.
func bodyMsg(e *openai.Error) string {
	if e.Param != "" {
		return "body." + e.Message
	}
	return "body: " + e.Message
}

func jsonErr(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	return strings.ReplaceAll(msg, "\n", " ")
}
