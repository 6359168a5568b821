package main

import (
	"fmt"

	"deepinfer/tokenizer"
)

func loadBPE(modelDir, tokDir string) (tokenizer.Tokenizer, error) {
	return nil, fmt.Errorf("checkpoint models need DeepSeek's tokenizer, which this build does not have yet; use --prompt-ids")
}
