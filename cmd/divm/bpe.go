package main

import (
	"deepinfer/tokenizer"
)

// loadBPE loads DeepSeek's tokenizer: --tokenizer DIR when given, else the model dir's
// tokenizer.json, else the copy scripts/fetch-tokenizer.sh fetched.
func loadBPE(modelDir, tokDir string) (tokenizer.Tokenizer, error) {
	dir := tokDir
	if dir == "" {
		var err error
		if dir, err = tokenizer.ResolveDir(modelDir); err != nil {
			return nil, err
		}
	}
	return tokenizer.LoadBPE(dir)
}
