// Command loadgen loads a divm serve (or any OpenAI-compatible server) with concurrent
// streaming clients and reports what they saw, then replays the same requests through
// `divm run --input` (the offline batch runner, same engine) for the ratio of output
// tokens/s:
//
//	go run ./tools/loadgen --url http://127.0.0.1:8000 --clients 256 --duration 60s \
//	    --divm ./divm --plan plan.dip --max-num-seqs 256
//
// Every client sends completions requests with stream and usage on, one after another:
// a prompt of --prompt-chars characters, --max-tokens output tokens with ignore_eos (so
// every request has the same length), its own seed. A stream is complete when it ends
// with [DONE] and its token chunks number what its usage says. The report gives
// p50/p99 time to first token and inter-token latency (client-side), errors, the
// server's goroutines idle before and after, and output tokens/s.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

type sample struct {
	ttft    time.Duration
	itl     []time.Duration
	tokens  int
	usage   int
	ok      bool
	errText string
	body    []byte
}

func main() {
	url := flag.String("url", "http://127.0.0.1:8000", "server base URL")
	clients := flag.Int("clients", 256, "concurrent streaming clients")
	duration := flag.Duration("duration", 60*time.Second, "how long clients start new requests")
	maxTokens := flag.Int("max-tokens", 64, "output tokens per request (ignore_eos)")
	promptChars := flag.Int("prompt-chars", 32, "prompt length in characters")
	divm := flag.String("divm", "", "divm binary for the offline baseline (empty: no baseline)")
	planPath := flag.String("plan", "", "the plan the server runs (for the baseline)")
	seqs := flag.Int("max-num-seqs", 256, "the baseline's --max-seqs (use the server's --max-num-seqs)")
	batchTokens := flag.Int("max-num-batched-tokens", 2048, "the baseline's --max-batch-tokens")
	flag.Parse()

	tr := &http.Transport{MaxIdleConnsPerHost: *clients, MaxConnsPerHost: *clients}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Minute}
	idle, _ := goroutines(client, *url)
	deadline := time.Now().Add(*duration)
	var mu sync.Mutex
	var samples []sample
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < *clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				seed := c*1_000_000 + i
				body := requestBody(seed, *promptChars, *maxTokens)
				s := stream(client, *url, body)
				s.body = body
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	wall := time.Since(start)
	tr.CloseIdleConnections()
	// the server's connection goroutines end once it sees the connections close
	after := -1
	for t := time.Now(); time.Since(t) < 10*time.Second; time.Sleep(100 * time.Millisecond) {
		if after, _ = goroutines(client, *url); after <= idle {
			break
		}
		tr.CloseIdleConnections()
	}

	var ttft, itl []time.Duration
	var tokens, errs, incomplete int
	for _, s := range samples {
		if !s.ok {
			errs++
			if errs <= 3 {
				fmt.Fprintf(os.Stderr, "loadgen: error: %s\n", s.errText)
			}
			continue
		}
		if s.tokens != s.usage {
			incomplete++
		}
		tokens += s.tokens
		ttft = append(ttft, s.ttft)
		itl = append(itl, s.itl...)
	}
	rate := float64(tokens) / wall.Seconds()
	fmt.Printf("loadgen: %d clients for %s against %s: %d requests, %d errors, %d streams whose token chunks differ from usage\n",
		*clients, duration.String(), *url, len(samples), errs, incomplete)
	fmt.Printf("loadgen: time to first token p50 %s p99 %s; inter-token latency p50 %s p99 %s (client-side)\n",
		pct(ttft, 50), pct(ttft, 99), pct(itl, 50), pct(itl, 99))
	fmt.Printf("loadgen: %d output tokens in %s: %.0f output tokens/s\n", tokens, wall.Round(time.Millisecond), rate)
	fmt.Printf("loadgen: server goroutines %d idle before, %d after\n", idle, after)
	if *divm == "" {
		return
	}
	base, err := baseline(*divm, *planPath, samples, *seqs, *batchTokens)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: baseline: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("loadgen: divm run --input on the same %d requests: %.0f output tokens/s; server/offline = %.3f\n",
		len(samples)-errs, base, rate/base)
}

func requestBody(seed, chars, maxTokens int) []byte {
	// a printable prompt that differs per request
	var b strings.Builder
	x := uint32(seed)*2654435761 + 1
	for i := 0; i < chars; i++ {
		x = x*1664525 + 1013904223
		b.WriteByte(byte('a' + x>>24%26))
	}
	body, _ := json.Marshal(map[string]any{"prompt": b.String(), "max_tokens": maxTokens, "temperature": 1, "seed": seed,
		"ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	return body
}

// stream runs one streaming request and times its token chunks.
func stream(c *http.Client, url string, body []byte) sample {
	t0 := time.Now()
	resp, err := c.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return sample{errText: err.Error()}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return sample{errText: fmt.Sprintf("status %d: %s", resp.StatusCode, b)}
	}
	var s sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	last := t0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if line == "data: [DONE]" {
			s.ok = true
			break
		}
		var ch struct {
			Choices []struct {
				Text         *string `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal([]byte(line[6:]), &ch); err != nil {
			return sample{errText: err.Error()}
		}
		if ch.Error != nil {
			return sample{errText: fmt.Sprint(ch.Error)}
		}
		if ch.Usage != nil {
			s.usage = ch.Usage.CompletionTokens
		}
		for _, c := range ch.Choices {
			if c.FinishReason != nil || c.Text == nil {
				continue
			}
			now := time.Now()
			if s.tokens == 0 {
				s.ttft = now.Sub(t0)
			} else {
				s.itl = append(s.itl, now.Sub(last))
			}
			last = now
			s.tokens++
		}
	}
	if !s.ok {
		return sample{errText: "the stream ended without [DONE]"}
	}
	return s
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, len(d)*p/100)].Round(10 * time.Microsecond)
}

var goroutineRE = regexp.MustCompile(`(?m)^go_goroutines (\d+)`)

func goroutines(c *http.Client, url string) (int, error) {
	resp, err := c.Get(url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := goroutineRE.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no go_goroutines")
	}
	return strconv.Atoi(string(m[1]))
}

// baseline runs the successful requests through divm run --input and returns its
// output tokens/s.
func baseline(divm, planPath string, samples []sample, seqs, batchTokens int) (float64, error) {
	dir, err := os.MkdirTemp("", "loadgen")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	var in bytes.Buffer
	n := 0
	for _, s := range samples {
		if !s.ok {
			continue
		}
		var body map[string]any
		json.Unmarshal(s.body, &body)
		delete(body, "stream")
		delete(body, "stream_options")
		line, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprint(n), "method": "POST", "url": "/v1/completions", "body": body})
		in.Write(line)
		in.WriteByte('\n')
		n++
	}
	inPath := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(inPath, in.Bytes(), 0o644); err != nil {
		return 0, err
	}
	cmd := exec.Command(divm, "run", planPath, "--input", inPath, "--output", filepath.Join(dir, "out.jsonl"),
		"--max-seqs", fmt.Sprint(seqs), "--max-batch-tokens", fmt.Sprint(batchTokens))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%v: %s", err, stderr.String())
	}
	m := regexp.MustCompile(`([0-9.]+) output tokens/s`).FindStringSubmatch(stderr.String())
	if m == nil {
		return 0, fmt.Errorf("no tokens/s in %q", stderr.String())
	}
	return strconv.ParseFloat(m[1], 64)
}
