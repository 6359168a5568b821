package batch

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// OutputLine is one line of the results file (the OpenAI batch output shape).
type OutputLine struct {
	ID       string       `json:"id"`
	CustomID *string      `json:"custom_id"`
	Response *Response    `json:"response"`
	Error    *ErrorObject `json:"error"`
}

// Response is a successful request's HTTP-like envelope.
type Response struct {
	StatusCode int    `json:"status_code"`
	RequestID  string `json:"request_id"`
	Body       any    `json:"body"`
}

// ErrorObject is a failed request. Line is this project's extension: the input line it
// belongs to, so lines without a custom_id can be matched on resume.
type ErrorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
}

// A result line marks its custom_id done; an error line marks its input line number
// done (so a duplicate custom_id's error never hides the first request's result).
func idKey(customID string) string { return "id:" + customID }
func lineKey(line int) string      { return fmt.Sprintf("line:%d", line) }

// requestID derives stable ids from the custom_id and line, so a resumed run writes the
// same ids.
func requestID(prefix, customID string, line int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", customID, line)))
	return prefix + hex.EncodeToString(h[:12])
}

// Output appends whole lines to the results file.
type Output struct {
	mu   sync.Mutex
	f    *os.File
	done map[string]bool
}

// OpenOutput opens (or creates) the results file, cuts off a partial last line left by
// an interrupted run, and records which requests already have a line.
func OpenOutput(path string) (*Output, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	o := &Output{f: f, done: map[string]bool{}}
	keep, err := o.scan()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Truncate(keep); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(keep, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return o, nil
}

// scan reads the existing lines and returns the length of the complete ones.
func (o *Output) scan() (int64, error) {
	r := bufio.NewReaderSize(o.f, 1<<16)
	var keep int64
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return keep, nil // a tail without '\n' is a torn write: dropped
		}
		if err != nil {
			return 0, err
		}
		var ol OutputLine
		if jerr := json.Unmarshal(bytes.TrimSpace(line), &ol); jerr != nil {
			return 0, fmt.Errorf("line %d of the existing results is not a result line (%v); use a new output file", n, jsonErr(jerr))
		}
		switch {
		case ol.Response != nil && ol.CustomID != nil:
			o.done[idKey(*ol.CustomID)] = true
		case ol.Error != nil && ol.Error.Line > 0:
			o.done[lineKey(ol.Error.Line)] = true
		default:
			return 0, fmt.Errorf("line %d of the existing results has neither a response with a custom_id nor an error with a line", n)
		}
		keep += int64(len(line))
	}
}

// Done reports whether an input line already has its output line.
func (o *Output) Done(customID string, line int) bool {
	return (customID != "" && o.done[idKey(customID)]) || o.done[lineKey(line)]
}

// Write appends one line with a single write call.
func (o *Output) Write(l *OutputLine) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err = o.f.Write(data)
	return err
}

// Close closes the file.
func (o *Output) Close() error { return o.f.Close() }

func errorLine(e *LineError) *OutputLine {
	ol := &OutputLine{ID: requestID("batch_req_", e.CustomID, e.Line),
		Error: &ErrorObject{Code: e.Code, Message: e.Error(), Line: e.Line}}
	if e.CustomID != "" {
		id := e.CustomID
		ol.CustomID = &id
	}
	return ol
}
