package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"deepinfer/grammars"
	"deepinfer/plan"
	"deepinfer/tokenizer"
	"deepinfer/vm"
	"deepinfer/vm/batch"
)

// chooseTokenizer picks the tokenizer for a plan: the byte-level one for the embedded
// default, DeepSeek's BPE otherwise (the model dir's tokenizer.json first, then --tokenizer,
// then the fetched copy).
func chooseTokenizer(p *plan.Plan, modelDir, tokDir string) (tokenizer.Tokenizer, error) {
	if p.Source.Kind == plan.SourceSeeded {
		return tokenizer.Bytes{BOSID: int32(p.Model.BOS), EOSID: int32(p.Model.EOS)}, nil
	}
	return loadBPE(modelDir, tokDir)
}

func runBatch(m *vm.Machine, tok tokenizer.Tokenizer, input, output string, maxTokens, batchTokens, seqs int, spec *vm.Speculation, specStats string, stderr io.Writer) error {
	opts := batch.Options{Input: input, Output: output, Machine: m, Tokenizer: tok, ModelName: m.Plan.ModelType,
		DefaultMaxTokens: maxTokens, MaxBatchTokens: batchTokens, MaxSeqs: seqs, Spec: spec}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts.Progress = &bar{w: stderr}
	}
	if src, ok := tok.(grammars.TokenSource); ok {
		opts.Grammars = grammars.NewCompiler(grammars.VocabFrom(src, m.Plan.Model.Vocab), grammars.Options{})
	}
	sum, err := batch.Run(opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "batch: %d lines: %d ok, %d errors, %d already done; %d tokens in, %d out; %.1f output tokens/s; wall %s\n",
		sum.Lines, sum.OK, sum.Errors, sum.Skipped, sum.TokensIn, sum.TokensOut,
		float64(sum.TokensOut)/sum.Wall.Seconds(), sum.Wall.Round(time.Millisecond))
	fmt.Fprintln(stderr, "batch: "+schedulerSummary(sum.Engine, m.Overlaps()))
	if line := specSummary(sum.Spec); line != "" {
		fmt.Fprintln(stderr, "batch: "+line)
	}
	if err := writeSpecStats(specStats, sum.Spec); err != nil {
		return err
	}
	if sum.Errors > 0 {
		return fmt.Errorf("%d of %d lines failed; their error lines are in %s", sum.Errors, sum.Lines, output)
	}
	return nil
}

// bar is the terminal progress display: requests done and output tokens/s.
type bar struct {
	w     io.Writer
	b     *progressbar.ProgressBar
	start time.Time
}

func (b *bar) Start(total int) {
	b.start = time.Now()
	b.b = progressbar.NewOptions(total, progressbar.OptionSetWriter(b.w), progressbar.OptionSetDescription("requests"),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
}

func (b *bar) Update(done, tokensOut int) {
	rate := float64(tokensOut) / time.Since(b.start).Seconds()
	b.b.Describe(fmt.Sprintf("requests (%.0f tok/s)", rate))
	_ = b.b.Set(done)
}

func (b *bar) Finish() { _ = b.b.Finish() }
