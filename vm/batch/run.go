package batch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"time"

	"deepinfer/api/openai"
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
	// Spec turns on speculative decoding (vm.Engine.Spec).
	Spec *vm.Speculation
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
	// Spec is the engine's speculation counters (zero without speculation).
	Spec vm.SpecStats
	// Engine is the engine's counters at the end (steps, async steps, hidden host time).
	Engine vm.Stats
}

// job is a line on its way through the engine: its choices' results as they finish.
type job struct {
	req     *Request
	j       *openai.Job
	results []vm.Result
	left    int
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
	var jobs []*job // per engine request: its line's job
	var choice []int
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
		j, vrs, lerr := prepare(req, opts, model.MaxPositions)
		if lerr != nil {
			if err := writeErr(lerr); err != nil {
				return sum, err
			}
			continue
		}
		for c := range vrs {
			jobs = append(jobs, j)
			choice = append(choice, c)
		}
		reqs = append(reqs, vrs...)
	}

	if opts.Progress != nil {
		opts.Progress.Start(len(reqs))
	}
	eng := &vm.Engine{M: opts.Machine, MaxBatchTokens: opts.MaxBatchTokens, MaxSeqs: opts.MaxSeqs, Spec: opts.Spec}
	finished := 0
	var werr error
	eng.Run(reqs, func(res vm.Result) {
		j := jobs[res.Index]
		j.results[choice[res.Index]] = res
		if j.left--; j.left > 0 {
			return // the line's other choices are still running
		}
		var line *OutputLine
		var failed error
		for _, r := range j.results {
			if r.Err != nil && failed == nil {
				failed = r.Err
			}
		}
		if failed != nil {
			sum.Errors++
			line = errorLine(&LineError{Line: j.req.Line, CustomID: j.req.CustomID, Code: "server_error", Msg: failed.Error()})
		} else {
			sum.OK++
			for _, r := range j.results {
				sum.TokensIn += r.PromptTokens
				sum.TokensOut += len(r.Tokens)
			}
			line = j.result(opts)
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
	sum.Spec = eng.SpecStats()
	sum.Engine = eng.Stats()
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

// prepare tokenizes a line's body into one engine request per choice. A line without a
// seed gets one derived from its custom_id (and the choice), so reruns draw the same.
func prepare(r *Request, opts Options, maxPos int) (*job, []vm.Request, *LineError) {
	env := openai.Env{Tokenizer: opts.Tokenizer, Grammars: opts.Grammars, MaxPositions: maxPos,
		DefaultMaxTokens: opts.DefaultMaxTokens, DefaultSeed: func(choice int) uint64 {
			h := fnv.New64a()
			h.Write([]byte(r.CustomID))
			return h.Sum64() + uint64(choice)
		}}
	oj, vrs, err := openai.Prepare(r.Body, env)
	if err != nil {
		return nil, nil, &LineError{Line: r.Line, CustomID: r.CustomID, Code: err.Code, Msg: bodyMsg(err)}
	}
	for i := range vrs {
		vrs[i].ID = r.CustomID
	}
	return &job{req: r, j: oj, results: make([]vm.Result, len(vrs)), left: len(vrs)}, vrs, nil
}

func (j *job) result(opts Options) *OutputLine {
	model := j.req.Body.Model
	if model == "" {
		model = opts.ModelName
	}
	id := j.req.CustomID
	body := j.j.Body(requestID(j.j.IDPrefix(), id, j.req.Line), model, j.results)
	return &OutputLine{ID: requestID("batch_req_", id, j.req.Line), CustomID: &id,
		Response: &Response{StatusCode: 200, RequestID: requestID("req_", id, j.req.Line), Body: body}}
}
