package openai

import (
	"crypto/rand"
	"encoding/hex"

	"deepinfer/vm"
)

// Usage is a response's token counts.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// NewID is a random response id with prefix (chatcmpl-, cmpl-).
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// IDPrefix is the id prefix of the request's endpoint.
func (j *Job) IDPrefix() string {
	if j.Req.URL == ChatURL {
		return "chatcmpl-"
	}
	return "cmpl-"
}

// Body is the complete (non-streamed) response for the finished choices (results in
// choice order).
func (j *Job) Body(id, model string, res []vm.Result) map[string]any {
	var usage Usage
	choices := make([]any, len(res))
	for i, r := range res {
		c := j.Choices[i]
		usage.PromptTokens += r.PromptTokens
		usage.CompletionTokens += len(r.Tokens)
		text := c.Text(r)
		ch := map[string]any{"index": i, "finish_reason": r.Finish, "logprobs": j.logprobs(c, r.Logprobs, 0)}
		if j.Req.URL == ChatURL {
			ch["message"] = map[string]any{"role": "assistant", "content": text}
		} else {
			ch["text"] = text
		}
		choices[i] = ch
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	obj := "text_completion"
	if j.Req.URL == ChatURL {
		obj = "chat.completion"
	}
	return map[string]any{"id": id, "object": obj, "created": j.Created, "model": model, "choices": choices, "usage": usage}
}

// Chunk is one streamed chunk: a text delta for a choice (with its new tokens'
// log-probabilities), a finish reason when it ends, or (choice < 0) the usage.
func (j *Job) Chunk(id, model string, choice int, delta string, first bool, lps []vm.TokenLogprob, textOffset int, finish string, usage *Usage) map[string]any {
	obj := "text_completion"
	if j.Req.URL == ChatURL {
		obj = "chat.completion.chunk"
	}
	m := map[string]any{"id": id, "object": obj, "created": j.Created, "model": model}
	if choice < 0 {
		m["choices"] = []any{}
		m["usage"] = usage
		return m
	}
	var fin any
	if finish != "" {
		fin = finish
	}
	var lp any
	if len(lps) > 0 {
		lp = j.logprobs(j.Choices[choice], lps, textOffset)
	}
	ch := map[string]any{"index": choice, "finish_reason": fin, "logprobs": lp}
	if j.Req.URL == ChatURL {
		// every token's chunk carries content (maybe ""), so a client counts tokens;
		// the finish chunk carries only what was held back
		d := map[string]any{}
		if first {
			d["role"] = "assistant"
		}
		if finish == "" || delta != "" {
			d["content"] = delta
		}
		ch["delta"] = d
	} else {
		ch["text"] = delta
	}
	m["choices"] = []any{ch}
	if j.Req.IncludeUsage {
		m["usage"] = nil // every chunk but the last has usage null
	}
	return m
}

// logprobs renders log-probabilities in the endpoint's shape (nil when not asked for).
func (j *Job) logprobs(c *Choice, lps []vm.TokenLogprob, offset int) any {
	if !j.Req.Logprobs {
		return nil
	}
	if j.Req.URL == ChatURL {
		content := make([]any, 0, len(lps))
		for _, l := range lps {
			t := c.TokenText(l.Token)
			top := make([]any, 0, len(l.Top))
			for _, p := range l.Top {
				pt := c.TokenText(p.Token)
				top = append(top, map[string]any{"token": pt, "logprob": p.Logprob, "bytes": bytesOf(pt)})
			}
			content = append(content, map[string]any{"token": t, "logprob": l.Logprob, "bytes": bytesOf(t), "top_logprobs": top})
		}
		return map[string]any{"content": content}
	}
	var toks []string
	var lp []float64
	var top []map[string]float64
	var offs []int
	for _, l := range lps {
		t := c.TokenText(l.Token)
		toks = append(toks, t)
		lp = append(lp, l.Logprob)
		tm := map[string]float64{}
		for _, p := range l.Top {
			tm[c.TokenText(p.Token)] = p.Logprob
		}
		top = append(top, tm)
		offs = append(offs, offset)
		offset += len(t)
	}
	return map[string]any{"tokens": toks, "token_logprobs": lp, "top_logprobs": top, "text_offset": offs}
}

// bytesOf is a token's UTF-8 bytes as ints (OpenAI's "bytes").
func bytesOf(s string) []int {
	b := make([]int, len(s))
	for i := range s {
		b[i] = int(s[i])
	}
	return b
}

// ErrorBody is OpenAI's error shape.
func ErrorBody(e *Error) map[string]any {
	var param any
	if e.Param != "" {
		param = e.Param
	}
	return map[string]any{"error": map[string]any{"message": e.Message, "type": e.Type, "param": param, "code": e.Code}}
}
