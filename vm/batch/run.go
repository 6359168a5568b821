package batch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"
	"time"

	"deepinfer/grammars"
	"deepinfer/tokenizer"
	"deepinfer/vm"
)

// Options configure one batch run.
type Options struct {
	Input, Output string
	Machine       *vm.Machine
	Tokenizer     tokenizer.Tokenizer
	// ModelName is reported in responses when a line does not name a model.
	ModelName string
	// DefaultMaxTokens applies when a line sets no max_tokens (capped by the context).
	DefaultMaxTokens int
	MaxBatchTokens   int
	MaxSeqs          int
	// Progress, when set, is told about every finished request and every step.
	Progress Progress
	// Grammars compiles response_format constraints; nil refuses them.
	Grammars *grammars.Compiler
}

// Progress receives updates while the batch runs.
type Progress interface {
	Start(total int)
	Update(done, tokensOut int)
	Finish()
}

// Summary is what a run did.
type Summary struct {
	Lines     int // input lines
	Skipped   int // already in the output file
	OK        int
	Errors    int
	TokensIn  int
	TokensOut int
	Wall      time.Duration
}

// job is a request on its way through the engine.
type job struct {
	req    *Request
	prompt []int32
	stream tokenizer.Stream
	text   strings.Builder
	cut    int // text length at the stop string, -1 if none
}

// Run executes a batch file.
func Run(opts Options) (Summary, error) {
	start := time.Now()
	var sum Summary
	out, err := OpenOutput(opts.Output)
	if err != nil {
		return sum, err
	}
	defer out.Close()
	in, err := os.Open(opts.Input)
	if err != nil {
		return sum, err
	}
	defer in.Close()

	model := opts.Machine.Plan.Model
	var jobs []*job
	var reqs []vm.Request
	firstLine := map[string]int{}
	writeErr := func(e *LineError) error {
		sum.Errors++
		return out.Write(errorLine(e))
	}
	r := bufio.NewReaderSize(in, 1<<16)
	for lineNo := 1; ; lineNo++ {
		data, rerr := readLine(r)
		if rerr == io.EOF && data == nil {
			break
		}
		if rerr != nil && rerr != io.EOF {
			if le := (*LineError)(nil); errors.As(rerr, &le) {
				le.Line = lineNo
				sum.Lines++
				if !out.Done("", lineNo) {
					if err := writeErr(le); err != nil {
						return sum, err
					}
				} else {
					sum.Skipped++
				}
				continue
			}
			return sum, fmt.Errorf("%s: %w", opts.Input, rerr)
		}
		sum.Lines++
		req, perr := parseOrBlank(data, lineNo)
		if perr != nil {
			// malformed: its error line is keyed by line number
			if out.Done("", lineNo) {
				sum.Skipped++
				continue
			}
			var le *LineError
			errors.As(perr, &le)
			if err := writeErr(le); err != nil {
				return sum, err
			}
			continue
		}
		id := req.CustomID
		if first, dup := firstLine[id]; dup {
			if out.Done("", lineNo) {
				sum.Skipped++
				continue
			}
			if err := writeErr(&LineError{Line: lineNo, CustomID: id, Code: "duplicate_custom_id",
				Msg: fmt.Sprintf("duplicate custom_id %q (first on line %d)", id, first)}); err != nil {
				return sum, err
			}
			continue
		}
		firstLine[id] = lineNo
		if out.Done(id, lineNo) {
			sum.Skipped++
			continue
		}
		j, vr, lerr := prepare(req, opts, model.MaxPositions)
		if lerr != nil {
			if err := writeErr(lerr); err != nil {
				return sum, err
			}
			continue
		}
		jobs = append(jobs, j)
		reqs = append(reqs, vr)
	}

	if opts.Progress != nil {
		opts.Progress.Start(len(reqs))
	}
	eng := &vm.Engine{M: opts.Machine, MaxBatchTokens: opts.MaxBatchTokens, MaxSeqs: opts.MaxSeqs}
	finished := 0
	var werr error
	eng.Run(reqs, func(res vm.Result) {
		j := jobs[res.Index]
		var line *OutputLine
		if res.Err != nil {
			sum.Errors++
			line = errorLine(&LineError{Line: j.req.Line, CustomID: j.req.CustomID, Code: "server_error", Msg: res.Err.Error()})
		} else {
			sum.OK++
			sum.TokensIn += res.PromptTokens
			sum.TokensOut += len(res.Tokens)
			line = j.result(res, opts)
		}
		if err := out.Write(line); err != nil && werr == nil {
			werr = err
		}
		finished++
		if opts.Progress != nil {
			opts.Progress.Update(finished, sum.TokensOut)
		}
	})
	if opts.Progress != nil {
		opts.Progress.Finish()
	}
	sum.Wall = time.Since(start)
	return sum, werr
}

func parseOrBlank(data []byte, lineNo int) (*Request, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &LineError{Line: lineNo, Code: "invalid_request", Msg: "empty line"}
	}
	return ParseLine(data, lineNo)
}

// readLine returns the next line without its newline. A line longer than MaxLineBytes is
// consumed and reported as a *LineError.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) <= MaxLineBytes {
			buf = append(buf, chunk...)
		} else if buf != nil || len(chunk) > 0 {
			buf = buf[:0]
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			return []byte{}, &LineError{Code: "invalid_request", Msg: fmt.Sprintf("line is longer than %d bytes", MaxLineBytes)}
		}
		switch {
		case err == nil:
			return bytes.TrimRight(buf, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if len(buf) == 0 {
				return nil, io.EOF
			}
			return bytes.TrimRight(buf, "\r\n"), nil
		default:
			return nil, err
		}
	}
}

func seedFor(r *Request, set bool) uint64 {
	if set {
		return r.Seed
	}
	h := fnv.New64a()
	h.Write([]byte(r.CustomID))
	return h.Sum64()
}

// prepare tokenizes a request and turns it into an engine request.
func prepare(r *Request, opts Options, maxPos int) (*job, vm.Request, *LineError) {
	fail := func(code, format string, args ...any) (*job, vm.Request, *LineError) {
		return nil, vm.Request{}, &LineError{Line: r.Line, CustomID: r.CustomID, Code: code, Msg: fmt.Sprintf(format, args...)}
	}
	var constraint vm.Constraint
	if r.Format != nil {
		m, lerr := matcherFor(r.Format, opts.Grammars)
		if lerr != "" {
			return fail("invalid_response_format", "body.response_format: %s", lerr)
		}
		constraint = m
	}
	tok := opts.Tokenizer
	var prompt []int32
	if r.URL == ChatURL {
		ids, err := tok.EncodeChat(r.Messages, true)
		if err != nil {
			return fail("invalid_request", "body.messages: %v", err)
		}
		prompt = ids
	} else {
		prompt = tok.Encode(r.Prompt, true)
	}
	if len(prompt) == 0 {
		return fail("invalid_request", "the prompt encodes to no tokens")
	}
	room := maxPos - len(prompt)
	maxTokens := r.MaxTokens
	if maxTokens == 0 {
		maxTokens = min(max(opts.DefaultMaxTokens, 1), room)
	}
	if maxTokens > room || room < 1 {
		return fail("context_length_exceeded", "prompt (%d tokens) plus max_tokens (%d) exceeds the model's %d positions", len(prompt), maxTokens, maxPos)
	}
	j := &job{req: r, prompt: prompt, cut: -1, stream: tok.NewStream(true)}
	vr := vm.Request{ID: r.CustomID, Prompt: prompt, MaxTokens: maxTokens, Stop: []int32{tok.EOS()},
		Sampling: vm.Sampling{Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, Seed: seedFor(r, r.Seed != 0)}}
	if len(r.Stop) > 0 {
		vr.Check = j.checkStop
	}
	vr.Constraint = constraint
	return j, vr, nil
}

// checkStop appends a token's text and reports whether a stop string has appeared.
func (j *job) checkStop(tok int32) bool {
	j.text.WriteString(j.stream.Push(tok))
	s := j.text.String()
	for _, stop := range j.req.Stop {
		if i := strings.Index(s, stop); i >= 0 {
			j.cut = i
			return true
		}
	}
	return false
}

func (j *job) result(res vm.Result, opts Options) *OutputLine {
	var text string
	if j.cut >= 0 {
		text = j.text.String()[:j.cut]
	} else {
		text = opts.Tokenizer.Decode(res.Tokens, true)
	}
	model := j.req.Model
	if model == "" {
		model = opts.ModelName
	}
	usage := map[string]int{"prompt_tokens": res.PromptTokens, "completion_tokens": len(res.Tokens),
		"total_tokens": res.PromptTokens + len(res.Tokens)}
	created := time.Now().Unix()
	var body map[string]any
	if j.req.URL == ChatURL {
		body = map[string]any{
			"id": requestID("chatcmpl-", j.req.CustomID, j.req.Line), "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": res.Finish, "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": text}}},
			"usage": usage,
		}
	} else {
		body = map[string]any{
			"id": requestID("cmpl-", j.req.CustomID, j.req.Line), "object": "text_completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": res.Finish, "logprobs": nil, "text": text}},
			"usage":   usage,
		}
	}
	id := j.req.CustomID
	return &OutputLine{ID: requestID("batch_req_", id, j.req.Line), CustomID: &id,
		Response: &Response{StatusCode: 200, RequestID: requestID("req_", id, j.req.Line), Body: body}}
}
