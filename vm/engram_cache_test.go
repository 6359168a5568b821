package vm

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"deepinfer/engram"
	"deepinfer/internal/testtok"
	"deepinfer/tokenizer"
)

// TestEngramMapCache: a token map taken from engramMaps is the one the tokenizer gives
// (built again from the file), a caller's changes to its copy do not reach the next
// caller, and a rewritten tokenizer file (another modification time) is read again, its
// older maps dropped.
func TestEngramMapCache(t *testing.T) {
	src := testtok.Need(t)
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(src, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const V = 129280
	before := engramBuilds.Load()
	m1, n1, err := engramMap(dir, V)
	if err != nil {
		t.Fatal(err)
	}
	if got := engramBuilds.Load() - before; got != 1 {
		t.Fatalf("first call built %d maps, want 1", got)
	}
	// the reference: the tokenizer loaded and the map built here, without the cache
	bpe, err := tokenizer.LoadBPE(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref, refN := engram.BuildTokenMap(bpe, V)
	for len(ref) < V {
		ref = append(ref, -1)
	}
	if !slices.Equal(m1, ref) || n1.compressed != refN || n1.ids != min(V, bpe.NumTokens()) {
		t.Fatalf("map of %d ids (%d compressed, %d covered) differs from the tokenizer's (%d, %d)", len(m1), n1.compressed, n1.ids, len(ref), refN)
	}
	m1[0], m1[V-1] = 12345, 12345 // a caller's own copy
	m2, n2, err := engramMap(dir, V)
	if err != nil {
		t.Fatal(err)
	}
	if got := engramBuilds.Load() - before; got != 1 {
		t.Fatalf("second call built a map again (%d builds)", got)
	}
	if !slices.Equal(m2, ref) || n2 != n1 {
		t.Fatal("the second caller saw the first caller's changes, or another map")
	}
	// a shorter vocabulary is another map
	m3, _, err := engramMap(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(m3) != 1000 || !slices.Equal(m3, ref[:1000]) || engramBuilds.Load()-before != 2 {
		t.Fatalf("vocabulary 1000: %d ids, %d builds", len(m3), engramBuilds.Load()-before)
	}
	// the file rewritten: read again
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
	if _, _, err := engramMap(dir, V); err != nil {
		t.Fatal(err)
	}
	if got := engramBuilds.Load() - before; got != 3 {
		t.Fatalf("after the file changed: %d builds, want 3", got)
	}
	// the older version's maps (both vocabularies) are not kept beside the new one
	engramMaps.Lock()
	kept := 0
	for k := range engramMaps.m {
		if k.path == file {
			kept++
		}
	}
	engramMaps.Unlock()
	if kept != 1 {
		t.Fatalf("%d maps kept for the file, want 1 (the current version's)", kept)
	}
	// a broken file is an error, and not kept
	if err := os.WriteFile(file, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := engramMap(dir, V); err == nil {
		t.Fatal("a broken tokenizer.json gave a map")
	}
}
