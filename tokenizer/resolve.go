package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
)

// CacheDir is where scripts/fetch-tokenizer.sh puts DeepSeek-V3's tokenizer:
// $DEEPINFER_TOKENIZER_CACHE, else $HOME/.cache/deepinfer/tokenizer-deepseek_v3-3.7.2.
func CacheDir() (string, error) {
	if d := os.Getenv("DEEPINFER_TOKENIZER_CACHE"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("tokenizer cache: %w", err)
	}
	return filepath.Join(home, ".cache", "deepinfer", "tokenizer-deepseek_v3-3.7.2"), nil
}

// ResolveDir picks the directory to LoadBPE from: modelDir if it holds a
// tokenizer.json, else the fetch cache if it is populated, else an error saying how to
// populate it.
func ResolveDir(modelDir string) (string, error) {
	if modelDir != "" && hasTokenizer(modelDir) {
		return modelDir, nil
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	if hasTokenizer(cache) {
		return cache, nil
	}
	where := "no tokenizer.json"
	if modelDir != "" {
		where = fmt.Sprintf("no tokenizer.json in %s", modelDir)
	}
	return "", fmt.Errorf("%s, nor in the cache %s: run scripts/fetch-tokenizer.sh to fetch DeepSeek-V3's tokenizer", where, cache)
}

func hasTokenizer(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "tokenizer.json"))
	return err == nil && st.Mode().IsRegular()
}
