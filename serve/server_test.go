package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"deepinfer/compiler"
	"deepinfer/grammars"
	"deepinfer/tokenizer"
	"deepinfer/vm"
)

// newTestServer serves the embedded default model (random weights, byte tokenizer).
func newTestServer(t testing.TB, o Options) (*Server, *httptest.Server) {
	t.Helper()
	out, err := compiler.Compile(compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := vm.LoadWeights(out.Plan, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.Load(out.Plan, w)
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenizer.Bytes{BOSID: int32(out.Plan.Model.BOS), EOSID: int32(out.Plan.Model.EOS)}
	o.Machine, o.Tokenizer, o.ModelName = m, tok, "tiny"
	o.Grammars = grammars.NewCompiler(grammars.VocabFrom(tok, out.Plan.Model.Vocab), grammars.Options{})
	return startServer(t, o)
}

// startServer serves o over HTTP until the test ends, then drains.
func startServer(t testing.TB, o Options) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Drain(ctx)
	})
	return s, hs
}

func post(t testing.TB, url, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

func errParam(m map[string]any) (string, string) {
	e, _ := m["error"].(map[string]any)
	p, _ := e["param"].(string)
	msg, _ := e["message"].(string)
	return p, msg
}

func TestErrorsHaveOpenAIShape(t *testing.T) {
	_, hs := newTestServer(t, Options{MaxBodyBytes: 1 << 10})
	chat := hs.URL + "/v1/chat/completions"
	for _, c := range []struct {
		url, body string
		status    int
		param     string
	}{
		{chat, `{"messages":[{"role":"user","content":"x"}],"temperature":-1}`, 400, "temperature"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"top_p":2}`, 400, "top_p"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"max_tokens":"many"}`, 400, "max_tokens"},
		{chat, `{"messages":[{"role":"robot","content":"x"}]}`, 400, "messages[0].role"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"frequency_penalty":1}`, 400, "frequency_penalty"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, 400, "stream_options"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"top_logprobs":3}`, 400, "top_logprobs"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"regex","regex":"("}}`, 400, "response_format"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"max_tokens":100000}`, 400, "max_tokens"},
		{chat, `{"model":"gpt-4","messages":[{"role":"user","content":"x"}]}`, 404, "model"},
		{chat, `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`, 413, ""},
		{chat, `{"messages":`, 400, ""},
		{hs.URL + "/v1/completions", `{"prompt":[1,2,-5]}`, 400, "prompt"},
		{hs.URL + "/v1/completions", `{"prompt":[]}`, 400, "prompt"},
		{hs.URL + "/v1/nope", `{}`, 404, ""},
	} {
		resp, m := post(t, c.url, c.body)
		p, msg := errParam(m)
		if resp.StatusCode != c.status || p != c.param || (c.param != "" && !strings.Contains(msg, c.param)) {
			t.Errorf("%s %.60s: %d param %q message %q; want %d param %q", c.url, c.body, resp.StatusCode, p, msg, c.status, c.param)
		}
		if _, ok := m["error"].(map[string]any)["type"]; !ok {
			t.Errorf("%.60s: error body %v has no type", c.body, m)
		}
	}
	resp, err := http.Get(hs.URL + "/v1/chat/completions")
	if err != nil || resp.StatusCode != 405 {
		t.Errorf("GET on a POST endpoint: %v %v", resp.StatusCode, err)
	}
}

// sse reads a stream's data lines.
func sse(t testing.TB, r io.Reader) (chunks []map[string]any, done bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if line == "data: [DONE]" {
			return chunks, true
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line[6:]), &m); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		chunks = append(chunks, m)
	}
	return chunks, false
}

func TestStreamCountsAndLogprobs(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(
		`{"prompt":["ab","cd"],"max_tokens":7,"temperature":1,"seed":9,"stream":true,"stream_options":{"include_usage":true},"logprobs":2}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	chunks, done := sse(t, resp.Body)
	if !done {
		t.Fatal("stream did not end with [DONE]")
	}
	perChoice := map[float64]int{}
	var usage map[string]any
	for _, c := range chunks {
		if u, ok := c["usage"].(map[string]any); ok {
			usage = u
		}
		for _, ch := range c["choices"].([]any) {
			ch := ch.(map[string]any)
			if ch["finish_reason"] == nil {
				perChoice[ch["index"].(float64)]++
				lp := ch["logprobs"].(map[string]any)
				if len(lp["top_logprobs"].([]any)[0].(map[string]any)) == 0 {
					t.Errorf("no top logprobs in %v", ch)
				}
			}
		}
	}
	if usage == nil || usage["completion_tokens"].(float64) != float64(perChoice[0]+perChoice[1]) || len(perChoice) != 2 {
		t.Errorf("token chunks per choice %v, usage %v", perChoice, usage)
	}
}

// A client that goes away frees its sequence within a step; a full queue answers 429.
func TestCancelAndQueueFull(t *testing.T) {
	s, hs := newTestServer(t, Options{MaxNumSeqs: 2, MaxQueue: 2})
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":3000,"temperature":1,"stream":true,"ignore_eos":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	br.ReadString('\n')
	if got := s.Engine().Stats().Running; got != 1 {
		t.Errorf("%d running while one stream is open", got)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for s.Engine().Stats().Running != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if r := s.Engine().Stats().Running; r != 0 {
		t.Fatalf("%d still running after the client left", r)
	}
	// fill two slots and the queue, then one more: 429 with Retry-After
	var wg sync.WaitGroup
	codes := make(chan int, 16)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":400,"temperature":1,"ignore_eos":true}`))
			if err != nil {
				return
			}
			if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for c := range codes {
		n[c]++
	}
	if n[429] == 0 || n[200] < 2 || n[200]+n[429] != 8 {
		t.Errorf("8 requests on 2 slots and a queue of 2: %v", n)
	}
	http.DefaultClient.CloseIdleConnections()
	deadline = time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base+2 {
		t.Errorf("%d goroutines after the requests, %d before", g, base)
	}
}

// Drain: new requests get 503; a stream still running when the grace period ends gets an
// error chunk and [DONE]; nothing hangs. (ignore_eos keeps the random model from
// stopping early.)
func TestDrain(t *testing.T) {
	s, hs := newTestServer(t, Options{})
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":60000,"temperature":1,"stream":true,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	br.ReadString('\n')
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		drained <- s.Drain(ctx)
	}()
	time.Sleep(50 * time.Millisecond)
	r2, m := post(t, hs.URL+"/v1/completions", `{"prompt":"x","max_tokens":2}`)
	if r2.StatusCode != 503 || r2.Header.Get("Retry-After") == "" {
		t.Errorf("during drain: %d %v", r2.StatusCode, m)
	}
	rest, _ := io.ReadAll(br)
	select {
	case err := <-drained:
		if err == nil {
			t.Error("Drain reported no timeout while a 60000-token stream ran")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain hung")
	}
	if !bytes.Contains(rest, []byte(`"error"`)) || !bytes.HasSuffix(bytes.TrimSpace(rest), []byte("data: [DONE]")) {
		t.Errorf("the cut stream ended with %q", tail(rest))
	}
}

func tail(b []byte) string {
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	return string(b)
}

func TestModelsHealthMetrics(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	post(t, hs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":1,"seed":1}`)
	for path, want := range map[string]string{
		"/v1/models": `"id":"tiny"`, "/health": "ok",
		"/metrics": "deepinfer_time_to_first_token_seconds_count 1",
	} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, no %q in %.300s", path, resp.StatusCode, want, b)
		}
	}
}

// FuzzHandler sends arbitrary bodies and headers to every endpoint: the server answers
// each with a status and, for errors, OpenAI's error shape; it never panics, and memory
// stays bounded (bodies over the limit are refused, generation is capped).
func FuzzHandler(f *testing.F) {
	s, _ := newTestServer(f, Options{MaxBodyBytes: 64 << 10, DefaultMaxTokens: 2, MaxModelLen: 64})
	h := s.Handler()
	for _, c := range []struct{ path, body, ct string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, "application/json"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`, ""},
		{"/v1/completions", `{"prompt":[1,2,3],"max_tokens":1,"logprobs":2}`, "text/plain"},
		{"/v1/completions", `{"prompt":"a","response_format":{"type":"regex","regex":"[0-9]"}}`, "application/json"},
		{"/v1/models", ``, ""}, {"/metrics", ``, ""}, {"/health", ``, ""}, {"/x", `{}`, ""},
	} {
		f.Add(c.path, c.body, c.ct, "POST")
	}
	f.Fuzz(func(t *testing.T, path, body, ct, method string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " ?#%") || len(path) > 200 ||
			strings.ContainsFunc(path, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return // not a path a client can send
		}
		req := httptest.NewRequest(http.MethodPost, "http://x"+path, strings.NewReader(body))
		if method == "GET" {
			req.Method = http.MethodGet
		}
		if ct != "" && !strings.ContainsAny(ct, "\r\n") {
			req.Header.Set("Content-Type", ct)
		}
		// generation is capped so an accepted body runs a few steps at most
		if strings.Contains(body, "max_tokens") || strings.Contains(body, "max_completion_tokens") {
			return
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code == 0 || w.Code >= 500 && w.Code != 503 {
			t.Fatalf("%s %s %q: status %d: %s", method, path, body, w.Code, w.Body.String())
		}
		if w.Code >= 400 && strings.HasPrefix(path, "/v1/") {
			var m map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || m["error"] == nil {
				t.Fatalf("%s %q: %d with body %q", path, body, w.Code, w.Body.String())
			}
		}
	})
}
