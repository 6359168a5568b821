package openai

import (
	"strings"
	"testing"
)

// FuzzParseBody: any bytes on either endpoint give a request or an error with a status,
// never a panic; an accepted request is within the documented bounds.
func FuzzParseBody(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":["a","b"],"logprobs":3,"stop":["x","y"],"seed":-4,"temperature":0.5,"top_p":0.9,"top_k":3}`,
		`{"prompt":[[1,2],[3]],"max_completion_tokens":2,"ignore_eos":true}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"logprobs":true,"top_logprobs":2}`,
		`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}}}`,
		`{"prompt":1}`, `null`, ``, `{"n":2,"prompt":"x"}`, `{"prompt":"x"} {}`,
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, body string, chat bool) {
		url := CompletionURL
		if chat {
			url = ChatURL
		}
		r, err := ParseBody(url, []byte(body), ParseOptions{Stream: true})
		if err != nil {
			if err.Status < 400 || err.Status > 499 || err.Message == "" || strings.Contains(err.Message, "\n") {
				t.Fatalf("error %+v", err)
			}
			return
		}
		if r.Temperature < 0 || r.Temperature > 2 || r.TopP <= 0 || r.TopP > 1 || r.TopK < 0 || r.MaxTokens < 0 ||
			len(r.Stop) > 4 || r.TopLogprobs < 0 || r.TopLogprobs > 20 || len(r.Prompts) > MaxPrompts {
			t.Fatalf("accepted out of bounds: %+v", r)
		}
		if (url == ChatURL) != (len(r.Messages) > 0) || (url == CompletionURL) != (len(r.Prompts) > 0) {
			t.Fatalf("%s accepted with %d messages and %d prompts", url, len(r.Messages), len(r.Prompts))
		}
	})
}
