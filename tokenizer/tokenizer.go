package tokenizer

// Tokenizer turns text into a model's token ids and back. Both the byte-level tokenizer
// of the embedded default and DeepSeek's BPE implement it.
type Tokenizer interface {
	// Encode tokenizes text. Special-token strings inside text become their ids.
	// addSpecial prepends BOS when the tokenizer's config asks for it (as HF's
	// add_special_tokens=True does).
	Encode(text string, addSpecial bool) []int32
	// Decode returns the text of ids; skipSpecial drops special tokens.
	Decode(ids []int32, skipSpecial bool) string
	// NewStream starts an incremental decoder for ids that arrive one at a time.
	NewStream(skipSpecial bool) Stream
	// EncodeChat renders messages with the model's chat template and tokenizes the
	// result (BOS included); addGenerationPrompt ends it with the assistant prefix.
	EncodeChat(msgs []Message, addGenerationPrompt bool) ([]int32, error)
	BOS() int32
	EOS() int32
	// NumTokens is the number of ids the tokenizer can produce (ids 0..NumTokens-1).
	NumTokens() int
}

// Stream decodes ids incrementally. Push returns the text that is complete so far and
// holds back a partial UTF-8 sequence until the ids that finish it arrive.
type Stream interface {
	Push(id int32) string
	// Flush returns whatever is held back (invalid UTF-8 becomes U+FFFD).
	Flush() string
}

// Message is one chat message.
type Message struct {
	Role    string // system, user or assistant
	Content string
}
