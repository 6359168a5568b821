package openai

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"deepinfer/grammars"
	"deepinfer/tokenizer"
	"deepinfer/vm"
)

// Env is what preparing a request needs from its front end.
type Env struct {
	Tokenizer tokenizer.Tokenizer
	Grammars  *grammars.Compiler // nil refuses response_format
	// MaxPositions is the model's context; DefaultMaxTokens applies when a request sets
	// no max_tokens (capped by the room the prompt leaves).
	MaxPositions     int
	DefaultMaxTokens int
	// DefaultSeed gives the seed of a request that sets none (choice index given).
	DefaultSeed func(choice int) uint64
}

// Job is a request on its way through the engine: one Choice per prompt.
type Job struct {
	Req     *Request
	Choices []*Choice
	Created int64
}

// Choice is one generated sequence: its prompt and the text decoded so far, with stop
// strings applied.
type Choice struct {
	Index   int
	Prompt  []int32
	stops   []string
	tok     tokenizer.Tokenizer
	mu      sync.Mutex
	stream  tokenizer.Stream
	text    strings.Builder
	emitted int // bytes of text handed out by Delta
	cut     int // text length at the stop string, -1 if none
	tokens  int
}

// Prepare tokenizes a request and makes one engine request per choice.
func Prepare(r *Request, env Env) (*Job, []vm.Request, *Error) {
	var constraint func() vm.Constraint
	if r.Format != nil {
		// one matcher per choice: each follows its own output
		if _, lerr := matcherFor(r.Format, env.Grammars); lerr != "" {
			return nil, nil, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_response_format", Param: "response_format",
				Message: "response_format: " + lerr}
		}
		constraint = func() vm.Constraint { m, _ := matcherFor(r.Format, env.Grammars); return m }
	}
	tok := env.Tokenizer
	var prompts [][]int32
	if r.URL == ChatURL {
		ids, err := tok.EncodeChat(r.Messages, true)
		if err != nil {
			return nil, nil, Invalid("messages", "%v", err)
		}
		prompts = append(prompts, ids)
	} else {
		for i, p := range r.Prompts {
			ids := p.IDs
			if !p.HasIDs {
				ids = tok.Encode(p.Text, true)
			}
			for j, t := range ids {
				if t < 0 || int(t) >= tok.NumTokens() {
					return nil, nil, Invalid("prompt", "prompt %d: token %d at index %d is outside the vocabulary [0,%d)", i, t, j, tok.NumTokens())
				}
			}
			prompts = append(prompts, ids)
		}
	}
	j := &Job{Req: r, Created: time.Now().Unix()}
	var reqs []vm.Request
	for i, prompt := range prompts {
		if len(prompt) == 0 {
			return nil, nil, Invalid(promptParam(r), "the prompt encodes to no tokens")
		}
		room := env.MaxPositions - len(prompt)
		maxTokens := r.MaxTokens
		if maxTokens == 0 {
			maxTokens = min(max(env.DefaultMaxTokens, 1), room)
		}
		if maxTokens > room || room < 1 {
			return nil, nil, &Error{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Param: "max_tokens",
				Message: fmt.Sprintf("prompt (%d tokens) plus max_tokens (%d) exceeds the model's %d positions", len(prompt), maxTokens, env.MaxPositions)}
		}
		c := &Choice{Index: i, Prompt: prompt, stops: r.Stop, tok: tok, cut: -1, stream: tok.NewStream(true)}
		j.Choices = append(j.Choices, c)
		seed := r.Seed
		if !r.SeedSet && env.DefaultSeed != nil {
			seed = env.DefaultSeed(i)
		}
		stop := []int32{tok.EOS()}
		if r.IgnoreEOS {
			stop = nil
		}
		vr := vm.Request{Prompt: prompt, MaxTokens: maxTokens, Stop: stop,
			Sampling: vm.Sampling{Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, Seed: seed},
			Logprobs: r.Logprobs, TopLogprobs: r.TopLogprobs}
		vr.Check = c.push
		if constraint != nil {
			vr.Constraint = constraint()
		}
		reqs = append(reqs, vr)
	}
	return j, reqs, nil
}

func promptParam(r *Request) string {
	if r.URL == ChatURL {
		return "messages"
	}
	return "prompt"
}

// push appends a generated token's text and reports whether a stop string appeared
// (the engine's Request.Check).
func (c *Choice) push(tok int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens++
	prev := c.text.Len()
	c.text.WriteString(c.stream.Push(tok))
	if len(c.stops) == 0 {
		return false
	}
	s := c.text.String()
	for _, stop := range c.stops {
		// a stop string can only end in the new text
		from := max(0, prev-len(stop)+1)
		if i := strings.Index(s[from:], stop); i >= 0 {
			if c.cut < 0 || from+i < c.cut {
				c.cut = from + i
			}
		}
	}
	return c.cut >= 0
}

// Delta returns the text generated since the last Delta that can no longer turn into
// the start of a stop string; final returns the rest (up to the stop string).
func (c *Choice) Delta(final bool) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.text.String()
	end := len(s)
	switch {
	case c.cut >= 0:
		end = c.cut
	case final:
		s += c.stream.Flush()
		c.text.Reset()
		c.text.WriteString(s)
		end = len(s)
	default:
		// hold back a tail that is a prefix of some stop string
		for _, stop := range c.stops {
			for k := min(len(stop)-1, len(s)); k > 0; k-- {
				if strings.HasSuffix(s, stop[:k]) {
					end = min(end, len(s)-k)
					break
				}
			}
		}
	}
	if end <= c.emitted {
		return ""
	}
	d := s[c.emitted:end]
	c.emitted = end
	return d
}

// Text is the whole output (after the engine finished the choice).
func (c *Choice) Text(res vm.Result) string {
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if cut >= 0 {
		return c.textString()[:cut]
	}
	return c.tok.Decode(res.Tokens, true)
}

func (c *Choice) textString() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.text.String()
}

// TokenText is the text of one token for logprobs (a token that ends inside a UTF-8
// sequence shows U+FFFD, as decoding it alone gives).
func (c *Choice) TokenText(tok int32) string { return c.tok.Decode([]int32{tok}, false) }
