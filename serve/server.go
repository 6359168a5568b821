// Package serve is divm's OpenAI-compatible HTTP server: /v1/chat/completions and
// /v1/completions (streamed as Server-Sent Events or not), /v1/models, /health and
// /metrics, on one live engine whose continuous batch every request joins.
//
// Request bodies are validated by package openai, the same code as offline batches.
// A client that disconnects cancels its request (its sequence leaves the batch within
// one step); a full queue answers 429 with Retry-After; Drain refuses new requests with
// 503, lets in-flight ones finish within a grace period and then ends them with an
// error chunk.
package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"deepinfer/api/openai"
	"deepinfer/grammars"
	"deepinfer/tokenizer"
	"deepinfer/vm"
)

// Options configure a server.
type Options struct {
	Machine   *vm.Machine
	Tokenizer tokenizer.Tokenizer
	Grammars  *grammars.Compiler // nil refuses response_format
	// ModelName is the model id clients name (--served-model-name).
	ModelName string
	// MaxNumSeqs and MaxBatchTokens bound the engine's batch; MaxQueue the requests
	// waiting to start (default 4 × MaxNumSeqs); MaxModelLen a request's prompt plus
	// output (default the model's positions).
	MaxNumSeqs, MaxBatchTokens, MaxQueue, MaxModelLen int
	// DefaultMaxTokens applies when a request sets no max_tokens (default 256).
	DefaultMaxTokens int
	// MaxBodyBytes bounds a request body (default 8 MiB).
	MaxBodyBytes int64
	// Log receives one line per request (nil: none).
	Log io.Writer
	// Spec turns on speculative decoding (vm.Engine.Spec).
	Spec *vm.Speculation
}

// Server is an OpenAI-compatible server on one engine.
type Server struct {
	o        Options
	eng      *vm.Engine
	live     *vm.Live
	m        *metrics
	mux      *http.ServeMux
	draining atomic.Bool
	inflight sync.WaitGroup
	// stopAll ends every in-flight request (the grace period is over)
	stopCtx context.Context
	stopAll context.CancelFunc
	logMu   sync.Mutex
	created int64
}

// New starts the engine and returns the server.
func New(o Options) (*Server, error) {
	if o.Machine == nil || o.Tokenizer == nil {
		return nil, fmt.Errorf("serve: a machine and a tokenizer are needed")
	}
	if o.ModelName == "" {
		o.ModelName = "deepinfer"
	}
	o.MaxNumSeqs = cmpOr(o.MaxNumSeqs, 64)
	o.MaxBatchTokens = cmpOr(o.MaxBatchTokens, 2048)
	o.MaxQueue = cmpOr(o.MaxQueue, 4*o.MaxNumSeqs)
	o.DefaultMaxTokens = cmpOr(o.DefaultMaxTokens, 256)
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 8 << 20
	}
	pos := o.Machine.Plan.Model.MaxPositions
	if o.MaxModelLen <= 0 || o.MaxModelLen > pos {
		o.MaxModelLen = pos
	}
	s := &Server{o: o, created: time.Now().Unix()}
	s.eng = &vm.Engine{M: o.Machine, MaxBatchTokens: o.MaxBatchTokens, MaxSeqs: o.MaxNumSeqs, Spec: o.Spec}
	s.live = s.eng.Start(o.MaxQueue)
	s.m = newMetrics(s.eng, float64(o.MaxNumSeqs)*float64(o.MaxModelLen))
	s.stopCtx, s.stopAll = context.WithCancel(context.Background())
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/v1/chat/completions", s.completions(openai.ChatURL))
	s.mux.HandleFunc("/v1/completions", s.completions(openai.CompletionURL))
	s.mux.HandleFunc("/v1/models", s.models)
	s.mux.HandleFunc("/health", s.health)
	s.mux.Handle("/metrics", promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// the label is fixed: a client's path can be anything, invalid UTF-8 included
		s.fail(w, "other", &openai.Error{Status: 404, Type: "invalid_request_error", Code: "unknown_url",
			Message: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
	})
	return s, nil
}

func cmpOr(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

// Handler is the server's HTTP handler: every request logged in one line.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.o.Log == nil {
			s.mux.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		l := &logEntry{}
		rec := &recorder{ResponseWriter: w, status: 200}
		s.mux.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), logKey{}, l)))
		ttft := "-"
		if l.ttft > 0 {
			ttft = l.ttft.Round(time.Microsecond).String()
		}
		s.logMu.Lock()
		defer s.logMu.Unlock()
		fmt.Fprintf(s.o.Log, "%s %s %s %d %dB %s remote=%s", start.UTC().Format(time.RFC3339Nano), r.Method, r.URL.Path,
			rec.status, rec.bytes, time.Since(start).Round(time.Microsecond), r.RemoteAddr)
		if l.id != "" {
			fmt.Fprintf(s.o.Log, " id=%s stream=%v prompt_tokens=%d completion_tokens=%d ttft=%s finish=%s",
				l.id, l.stream, l.prompt, l.completion, ttft, l.finish)
		}
		fmt.Fprintln(s.o.Log)
	})
}

type logKey struct{}

// logEntry is what a completions handler adds to its log line.
type logEntry struct {
	id, finish         string
	stream             bool
	prompt, completion int
	ttft               time.Duration
}

// recorder keeps a response's status and size for the log (and still flushes).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Engine is the engine the server runs (for its counters).
func (s *Server) Engine() *vm.Engine { return s.eng }

// Drain refuses new requests (503) and waits for the in-flight ones until ctx ends;
// then it cancels those left (their streams end with an error chunk) and waits for
// them, and stops the engine. It returns ctx's error when the grace period ran out.
func (s *Server) Drain(ctx context.Context) error {
	s.draining.Store(true)
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.stopAll()
		<-done
	}
	s.live.Stop()
	return err
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, "ok\n")
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.fail(w, "/v1/models", &openai.Error{Status: 405, Type: "invalid_request_error", Code: "method_not_allowed", Message: "use GET"})
		return
	}
	writeJSON(w, 200, map[string]any{"object": "list", "data": []any{map[string]any{
		"id": s.o.ModelName, "object": "model", "created": s.created, "owned_by": "deepinfer",
		"max_model_len": s.o.MaxModelLen}}})
	s.m.requests.WithLabelValues("/v1/models", "200").Inc()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// fail writes an error in OpenAI's shape.
func (s *Server) fail(w http.ResponseWriter, endpoint string, e *openai.Error) {
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, openai.ErrorBody(e))
	s.m.requests.WithLabelValues(endpoint, fmt.Sprint(e.Status)).Inc()
}

// event is what the engine's loop tells a request's handler.
type event struct {
	choice int
	tok    int32
	lp     *vm.TokenLogprob
	at     time.Time
	done   *vm.Result
}

// inbox queues events from the engine's loop, which must never block, to the handler.
type inbox struct {
	mu     sync.Mutex
	evs    []event
	notify chan struct{}
}

func (b *inbox) put(e event) {
	b.mu.Lock()
	b.evs = append(b.evs, e)
	b.mu.Unlock()
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

func (b *inbox) take() []event {
	b.mu.Lock()
	defer b.mu.Unlock()
	evs := b.evs
	b.evs = nil
	return evs
}

// request is one HTTP request in flight.
type request struct {
	s        *Server
	endpoint string
	job      *openai.Job
	id       string
	model    string
	start    time.Time
	firstTok time.Time
	lastTok  []time.Time
	results  []vm.Result
	left     int
	box      inbox
	status   int
	finish   string
}

func (s *Server) completions(url string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if r.Method != http.MethodPost {
			s.fail(w, url, &openai.Error{Status: 405, Type: "invalid_request_error", Code: "method_not_allowed", Message: "use POST"})
			return
		}
		if s.draining.Load() {
			s.fail(w, url, &openai.Error{Status: 503, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"})
			return
		}
		s.inflight.Add(1)
		defer s.inflight.Done()
		data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes))
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				s.fail(w, url, &openai.Error{Status: 413, Type: "invalid_request_error", Code: "request_too_large",
					Message: fmt.Sprintf("the body is larger than %d bytes", s.o.MaxBodyBytes)})
				return
			}
			s.fail(w, url, &openai.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_request", Message: "reading the body: " + err.Error()})
			return
		}
		body, perr := openai.ParseBody(url, data, openai.ParseOptions{Stream: true})
		if perr != nil {
			s.fail(w, url, perr)
			return
		}
		if body.Model != "" && body.Model != s.o.ModelName {
			s.fail(w, url, &openai.Error{Status: 404, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
				Message: fmt.Sprintf("model: %q does not exist (this server serves %q)", body.Model, s.o.ModelName)})
			return
		}
		seed := rand.Uint64()
		env := openai.Env{Tokenizer: s.o.Tokenizer, Grammars: s.o.Grammars, MaxPositions: s.o.MaxModelLen,
			DefaultMaxTokens: s.o.DefaultMaxTokens, DefaultSeed: func(c int) uint64 { return seed + uint64(c) }}
		job, vrs, perr := openai.Prepare(body, env)
		if perr != nil {
			s.fail(w, url, perr)
			return
		}
		model := cmpOrStr(body.Model, s.o.ModelName)
		q := &request{s: s, endpoint: url, job: job, id: openai.NewID(job.IDPrefix()), model: model, start: start,
			results: make([]vm.Result, len(vrs)), left: len(vrs), lastTok: make([]time.Time, len(vrs)),
			box: inbox{notify: make(chan struct{}, 1)}}
		// the request ends with the client, or when the grace period is over
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(s.stopCtx, cancel)
		defer stop()
		for i := range vrs {
			c := i
			vrs[i].ID = q.id
			vrs[i].Ctx = ctx
			vrs[i].OnToken = func(tok int32, lp *vm.TokenLogprob) {
				q.box.put(event{choice: c, tok: tok, lp: lp, at: time.Now()})
			}
			if err := s.live.Submit(vrs[i], func(res vm.Result) { q.box.put(event{choice: c, done: &res}) }); err != nil {
				cancel() // the choices already queued leave
				q.drainSubmitted(i)
				switch {
				case errors.Is(err, vm.ErrQueueFull):
					s.fail(w, url, &openai.Error{Status: 429, Type: "rate_limit_error", Code: "queue_full",
						Message: "the server's queue is full; retry later"})
				case errors.Is(err, vm.ErrStopped):
					s.fail(w, url, &openai.Error{Status: 503, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"})
				default:
					s.fail(w, url, openai.Invalid("", "%v", err))
				}
				return
			}
		}
		if body.Stream {
			q.stream(w)
		} else {
			q.wait()
			q.respond(w)
		}
		if l, ok := r.Context().Value(logKey{}).(*logEntry); ok {
			l.id, l.stream, l.finish = q.id, body.Stream, q.finish
			for _, res := range q.results {
				l.prompt += res.PromptTokens
				l.completion += len(res.Tokens)
			}
			if !q.firstTok.IsZero() {
				l.ttft = q.firstTok.Sub(q.start)
			}
		}
	}
}

func cmpOrStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// drainSubmitted waits for the first n choices (cancelled) to leave the engine.
func (q *request) drainSubmitted(n int) {
	for left := n; left > 0; {
		<-q.box.notify
		for _, e := range q.box.take() {
			if e.done != nil {
				left--
			}
		}
	}
}

// observe records an event's metrics and bookkeeping.
func (q *request) observe(e event) {
	m := q.s.m
	if e.done != nil {
		q.results[e.choice] = *e.done
		q.left--
		m.promptToks.Add(float64(e.done.PromptTokens))
		return
	}
	m.genToks.Inc()
	if q.firstTok.IsZero() {
		q.firstTok = e.at
		m.ttft.Observe(e.at.Sub(q.start).Seconds())
	}
	if last := q.lastTok[e.choice]; !last.IsZero() {
		m.itl.Observe(e.at.Sub(last).Seconds())
	}
	q.lastTok[e.choice] = e.at
}

// wait collects every choice's result.
func (q *request) wait() {
	for q.left > 0 {
		<-q.box.notify
		for _, e := range q.box.take() {
			q.observe(e)
		}
	}
}

// failure is the first failed choice's error, as an API error.
func (q *request) failure() *openai.Error {
	for _, r := range q.results {
		if r.Err == nil {
			continue
		}
		if errors.Is(r.Err, context.Canceled) {
			if q.s.stopCtx.Err() != nil {
				return &openai.Error{Status: 503, Type: "server_error", Code: "shutting_down", Message: "the server shut down before the request finished"}
			}
			return &openai.Error{Status: 499, Type: "invalid_request_error", Code: "client_closed_request", Message: "the client closed the request"}
		}
		return &openai.Error{Status: 500, Type: "server_error", Code: "server_error", Message: r.Err.Error()}
	}
	return nil
}

func (q *request) respond(w http.ResponseWriter) {
	if e := q.failure(); e != nil {
		q.status = e.Status
		q.s.fail(w, q.endpoint, e)
		return
	}
	q.status = 200
	writeJSON(w, 200, q.job.Body(q.id, q.model, q.results))
	q.s.m.requests.WithLabelValues(q.endpoint, "200").Inc()
	q.s.m.duration.WithLabelValues(q.endpoint).Observe(time.Since(q.start).Seconds())
	q.finish = q.results[0].Finish
}

// stream sends one chunk per generated token (its text may be empty while a UTF-8
// sequence or a possible stop string is held back), a last chunk per choice with its
// finish reason, the usage chunk when asked for, and data: [DONE].
func (q *request) stream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(200)
	q.status = 200
	flusher, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return true
	}
	first := make([]bool, len(q.results))
	offsets := make([]int, len(q.results))
	for i := range first {
		first[i] = true
	}
	ok := true
	for q.left > 0 {
		<-q.box.notify
		for _, e := range q.box.take() {
			q.observe(e)
			if !ok {
				continue // the client is gone; the engine is told through the context
			}
			c := q.job.Choices[e.choice]
			if e.done == nil {
				d := c.Delta(false)
				var lps []vm.TokenLogprob
				if e.lp != nil {
					lps = []vm.TokenLogprob{*e.lp}
				}
				ok = send(q.job.Chunk(q.id, q.model, e.choice, d, first[e.choice], lps, offsets[e.choice], "", nil))
				offsets[e.choice] += len(d)
				first[e.choice] = false
				continue
			}
			if e.done.Err != nil {
				continue // reported after every choice has ended
			}
			ok = send(q.job.Chunk(q.id, q.model, e.choice, c.Delta(true), first[e.choice], nil, offsets[e.choice], e.done.Finish, nil))
			first[e.choice] = false
		}
		if ok && flusher != nil {
			flusher.Flush()
		}
	}
	if !ok {
		q.status, q.finish = 499, "cancelled"
		return
	}
	if e := q.failure(); e != nil {
		q.status, q.finish = e.Status, "error"
		if e.Status == 499 {
			q.finish = "cancelled"
		}
		send(openai.ErrorBody(e))
	} else {
		q.finish = q.results[0].Finish
		if q.job.Req.IncludeUsage {
			var u openai.Usage
			for _, r := range q.results {
				u.PromptTokens += r.PromptTokens
				u.CompletionTokens += len(r.Tokens)
			}
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
			send(q.job.Chunk(q.id, q.model, -1, "", false, nil, 0, "", &u))
		}
	}
	io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
	q.s.m.requests.WithLabelValues(q.endpoint, fmt.Sprint(q.status)).Inc()
	q.s.m.duration.WithLabelValues(q.endpoint).Observe(time.Since(q.start).Seconds())
}
