package vm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"deepinfer/engram"
	"deepinfer/plan"
	"deepinfer/safetensors"
	"deepinfer/targets"
	"deepinfer/tokenizer"
)

// packedWeight reads a V4.1 weight in its packed checkpoint format: FP8 e4m3 codes
// with UE8M0 scales per 32×32 block (fp8_b32_ue8m0) or per 32 values of a row
// (fp8_g32_ue8m0), or FP4 e2m1 codes two a byte (I8 [out, in/2], the even element in
// the low nibble) with a UE8M0 scale per 32 values (fp4_g32_ue8m0).
func packedWeight(t targets.Weight, w *plan.Weight, ck *safetensors.Checkpoint, dir string) (targets.Weight, error) {
	infos, err := w.LocateStored(ck, dir)
	if err != nil {
		return t, err
	}
	if t.Codes, err = ck.ReadRaw(infos[0].Name); err != nil {
		return t, err
	}
	if infos[1].DType != safetensors.F8_E8M0 && infos[1].DType != safetensors.U8 {
		return t, fmt.Errorf("%s: scale %q is %s, a %s weight's scales are F8_E8M0", filepath.Base(infos[1].File), infos[1].Name, infos[1].DType, w.Storage)
	}
	if t.Scales, err = ck.ReadRaw(infos[1].Name); err != nil {
		return t, err
	}
	if err := t.Check(); err != nil {
		return t, fmt.Errorf("%s: tensor %q: %w", filepath.Base(infos[0].File), infos[0].Name, err)
	}
	return t, nil
}

// TokenizerDirEnv names a directory holding tokenizer.json, for a model directory
// without one (the V4.1 fixture is one: its Engram token map comes from DeepSeek's
// tokenizer, which scripts/fetch-tokenizer.sh fetches).
const TokenizerDirEnv = "DEEPINFER_TOKENIZER_DIR"

// tokenizerDir finds the tokenizer for a model: DIR/tokenizer.json, else
// $DEEPINFER_TOKENIZER_DIR, else the cache scripts/fetch-tokenizer.sh fills.
func tokenizerDir(modelDir string) (string, error) {
	cands := []string{modelDir}
	if d := os.Getenv(TokenizerDirEnv); d != "" {
		cands = append(cands, d)
	}
	if home, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(home, ".cache", "deepinfer", "tokenizer-deepseek_v3-3.7.2"))
	}
	for _, d := range cands {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "tokenizer.json")); err == nil {
			return d, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s: no tokenizer.json for the Engram token map: put one in the model directory, set %s, or run scripts/fetch-tokenizer.sh", modelDir, TokenizerDirEnv)
}

// EngramTokenMap builds a V4.1 plan's Engram token map (engram.py's compressed token
// map over the tokenizer's ids within the model vocabulary) from the model's tokenizer,
// and checks it yields the compressed vocabulary size the plan's hashes were derived
// from. Ids past the tokenizer map to -1: they take no part in an n-gram.
func EngramTokenMap(p *plan.Plan, modelDir string) ([]int32, error) {
	want := int64(-1)
	for _, pr := range p.Programs {
		for _, in := range pr.Instrs {
			if in.Op == "engram_hash" {
				want, _ = in.Attrs.Int("compressed_vocab")
			}
		}
	}
	dir, err := tokenizerDir(modelDir)
	if err != nil {
		return nil, err
	}
	V := p.Model.Vocab
	m, n, err := engramMap(dir, V)
	if err != nil {
		return nil, err
	}
	if want > 0 && int64(n.compressed) != want {
		return nil, fmt.Errorf("%s: the tokenizer's first %d ids compress to %d Engram ids, the model's config says %d (engram_compressed_vocab_size): a different tokenizer",
			filepath.Join(dir, "tokenizer.json"), n.ids, n.compressed, want)
	}
	return m, nil
}

// engramCounts: the ids a token map covers (the tokenizer's within the vocabulary) and
// the compressed ids they map to.
type engramCounts struct{ ids, compressed int }

// engramMaps keeps the token maps built, by tokenizer file (its path, size and
// modification time) and vocabulary: loading the tokenizer (~130,000 merges) is most of
// a V4.1 fixture's load, and a process that loads a model more than once (the tests,
// a server reloading) reads the same file each time.
var engramMaps struct {
	sync.Mutex
	m map[engramKey]engramEntry
}

// engramBuilds counts the token maps built (not taken from engramMaps).
var engramBuilds atomic.Int64

type engramKey struct {
	path  string
	size  int64
	mtime int64
	vocab int
}

type engramEntry struct {
	m []int32
	n engramCounts
}

// engramMap: the token map of the tokenizer in dir over V ids (ids past the tokenizer
// -1), a copy of the one built before for the same file and V.
func engramMap(dir string, V int) ([]int32, engramCounts, error) {
	file := filepath.Join(dir, "tokenizer.json")
	st, err := os.Stat(file)
	if err != nil {
		return nil, engramCounts{}, err
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, engramCounts{}, err
	}
	key := engramKey{abs, st.Size(), st.ModTime().UnixNano(), V}
	engramMaps.Lock()
	e, ok := engramMaps.m[key]
	engramMaps.Unlock()
	if !ok {
		engramBuilds.Add(1)
		bpe, err := tokenizer.LoadBPE(dir)
		if err != nil {
			return nil, engramCounts{}, err
		}
		m, n := engram.BuildTokenMap(bpe, V)
		for len(m) < V {
			m = append(m, -1)
		}
		e = engramEntry{m, engramCounts{min(V, bpe.NumTokens()), n}}
		engramMaps.Lock()
		if engramMaps.m == nil {
			engramMaps.m = map[engramKey]engramEntry{}
		}
		// (a map of an older version of the same file is not used again)
		for k := range engramMaps.m {
			if k.path == key.path && (k.size != key.size || k.mtime != key.mtime) {
				delete(engramMaps.m, k)
			}
		}
		engramMaps.m[key] = e
		engramMaps.Unlock()
	}
	return append([]int32(nil), e.m...), e.n, nil
}
