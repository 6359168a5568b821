package vm_test

import (
	"path/filepath"
	"testing"

	"deepinfer/compiler"
	"deepinfer/internal/testtok"
	"deepinfer/targets"
	"deepinfer/vm"
)

// BenchmarkBatchInvariant times one batch — 24 mixed requests of a fixture (prompts up
// to 24 tokens, greedy and sampled), 64-token steps, 16 sequences at a time — with the
// default numerics and in batch-invariant mode, on each fixture. The cost of the mode
// is the ratio of the two medians of one run:
//
//	go test ./vm -run '^$' -bench BatchInvariant -count 5
func BenchmarkBatchInvariant(b *testing.B) {
	for _, dir := range append([]string{fixtureDir}, fixturesV41...) {
		for _, mode := range []string{"default", "invariant"} {
			b.Run(filepath.Base(dir)+"/"+mode, func(b *testing.B) {
				if dir != fixtureDir {
					b.Setenv(vm.TokenizerDirEnv, testtok.Need(b))
				}
				m := compileAndLoadWith(b, compiler.Options{ModelDir: dir}, targets.Options{Invariant: mode == "invariant"})
				reqs := invariantPool(b, dir, 24, 24)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					(&vm.Engine{M: m, MaxBatchTokens: 64, MaxSeqs: 16}).Run(reqs, func(r vm.Result) {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
					})
				}
			})
		}
	}
}
