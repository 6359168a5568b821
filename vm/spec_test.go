package vm_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"deepinfer/compiler"
	"deepinfer/internal/vmtest"
	"deepinfer/vm"
)

// specRequests are the fixture's prompts as greedy requests that keep every logits row.
func specRequests(t testing.TB, dir string, maxTokens int) []vm.Request {
	t.Helper()
	cases, err := vm.ReadCases(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var reqs []vm.Request
	seen := map[string]bool{}
	names := make([]string, 0, len(cases.Cases))
	for name := range cases.Cases {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := cases.Cases[name]
		key := fmt.Sprint(c.InputIDs)
		if seen[key] || len(c.InputIDs)+maxTokens > 128 {
			continue
		}
		seen[key] = true
		reqs = append(reqs, vm.Request{ID: name, Prompt: c.InputIDs, MaxTokens: maxTokens, KeepLogits: true})
	}
	return reqs
}

func runAll(t testing.TB, e *vm.Engine, reqs []vm.Request) []vm.Result {
	t.Helper()
	return vmtest.RunAll(t, e, reqs)
}

func sameResults(t testing.TB, what string, got, want []vm.Result) {
	t.Helper()
	vmtest.SameResults(t, what, got, want)
}

// TestSpeculativeGreedyEqualsPlain runs the V4.1 fixtures' prompts with DSpark
// speculation (fixed and confidence-scheduled lengths) and without: every token and
// every committed position's logits must be the same bit for bit.
func TestSpeculativeGreedyEqualsPlain(t *testing.T) {
	for _, dir := range fixturesV41 {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			v41Tokenizer(t)
			m := compileAndLoad(t, compiler.Options{ModelDir: dir})
			reqs := specRequests(t, dir, 24)
			plain := runAll(t, &vm.Engine{M: m}, reqs)
			specs := []vm.Speculation{{MaxDraft: 5}, {MaxDraft: 2}, {MaxDraft: 5, Varlen: true, Threshold: 0.5}}
			if raceOn {
				specs = []vm.Speculation{{MaxDraft: 5}, {MaxDraft: 5, Varlen: true, Threshold: 0.5}}
			}
			for _, spec := range specs {
				e := &vm.Engine{M: m, Spec: &spec}
				got := runAll(t, e, reqs)
				name := fmt.Sprintf("γ≤%d varlen=%v", spec.MaxDraft, spec.Varlen)
				sameResults(t, name, got, plain)
				st := e.SpecStats()
				if st.Groups == 0 {
					t.Fatalf("%s: no verify group ran", name)
				}
				t.Logf("%s: %d groups, %d/%d drafts accepted, histogram %v, %.2f tokens per group, %.2f target rows per token",
					name, st.Groups, st.Accepted, st.Drafted, st.Hist, st.TokensPerGroup(), st.RowsPerToken())
			}
		})
	}
}

// plainDigests decodes prompt then cont one token per step (plain decoding) and
// returns the state's digest at every length.
func plainDigests(t *testing.T, m *vm.Machine, prompt, cont []int32) map[int][32]byte {
	t.Helper()
	s, err := m.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	out := map[int][32]byte{}
	record := func() {
		d, err := s.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out[s.Len()] = d
	}
	if _, err := m.Forward([]vm.Chunk{{Seq: s, Tokens: prompt}}); err != nil {
		t.Fatal(err)
	}
	record()
	for _, tok := range cont {
		if _, err := m.Forward([]vm.Chunk{{Seq: s, Tokens: []int32{tok}, Decode: true}}); err != nil {
			t.Fatal(err)
		}
		record()
	}
	return out
}

// TestSpeculativeForcedDrafts drives the verifier with known continuations — every
// draft right, a right prefix then a wrong token, the first draft wrong, and drafts
// running into the sequence's length limit — and checks after every group that the
// sequence's whole state (window rings, compressor groups, compressed entries, index
// keys, Engram history, DSpark rings: kvstate.Seq.Digest) equals plain decoding's at
// the same length, and that the tokens and logits are plain decoding's.
func TestSpeculativeForcedDrafts(t *testing.T) {
	for _, dir := range fixturesV41 {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			v41Tokenizer(t)
			m := compileAndLoad(t, compiler.Options{ModelDir: dir})
			V, P := m.Plan.Model.Vocab, m.Plan.Model.MaxPositions
			reqs := specRequests(t, dir, 20)[:2]
			long := reqs[0]
			for len(long.Prompt) < P-12 {
				long.Prompt = append(long.Prompt, long.Prompt...)
			}
			long.Prompt, long.MaxTokens, long.ID = long.Prompt[:P-12], 12, "at-length-limit"
			reqs = append(reqs, long)
			plain := runAll(t, &vm.Engine{M: m}, reqs)
			digests := make([]map[int][32]byte, len(reqs))
			for i, r := range reqs {
				digests[i] = plainDigests(t, m, r.Prompt, plain[i].Tokens[:len(plain[i].Tokens)-1])
			}
			wrong := func(tok int32) int32 { return (tok + 1) % int32(V) }
			cases := []struct {
				name  string
				right int // drafts right before a wrong one (-1: all right)
			}{{"accept-all", -1}, {"accept-prefix", 2}, {"reject-all", 0}}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					groups := 0
					spec := vm.Speculation{MaxDraft: 5}
					spec.Override = func(r *vm.Request, gen, _ []int32) []int32 {
						want := plain[idx(reqs, r.ID)].Tokens
						var d []int32
						for j := len(gen); j < len(want) && len(d) < 5; j++ {
							tok := want[j]
							if len(d) == c.right {
								tok = wrong(tok)
							}
							d = append(d, tok)
						}
						return d
					}
					spec.OnGroup = func(r *vm.Request, drafted, accepted int, s *vm.Sequence) {
						groups++
						i := idx(reqs, r.ID)
						wantAcc := drafted
						if c.right >= 0 {
							wantAcc = min(c.right, drafted)
						}
						if accepted != wantAcc {
							t.Errorf("%s: %d of %d drafts accepted, want %d", r.ID, accepted, drafted, wantAcc)
						}
						if s.Len() > P {
							t.Errorf("%s: sequence at %d tokens, past the model's %d positions", r.ID, s.Len(), P)
						}
						got, err := s.Digest()
						if err != nil {
							t.Fatal(err)
						}
						want, ok := digests[i][s.Len()]
						if !ok || got != want {
							t.Errorf("%s: state after a group (%d of %d accepted) at length %d differs from plain decoding's", r.ID, accepted, drafted, s.Len())
						}
					}
					e := &vm.Engine{M: m, Spec: &spec}
					sameResults(t, c.name, runAll(t, e, reqs), plain)
					if st := e.SpecStats(); groups == 0 || int64(groups) > st.Groups {
						t.Fatalf("%d groups seen, %d counted", groups, st.Groups)
					}
					t.Logf("%d groups checked; histogram %v", groups, e.SpecStats().Hist)
				})
			}
		})
	}
}

func idx(reqs []vm.Request, id string) int {
	return slices.IndexFunc(reqs, func(r vm.Request) bool { return r.ID == id })
}

// TestDraftWantLogits: Machine.DraftWant reads the drafts' logits rows back only for the
// sequences that want them (the engine asks for sampled requests alone): the same draft
// tokens and confidences as Draft, the same rows where wanted, nil elsewhere, and no
// logits at all when no sequence wants them.
func TestDraftWantLogits(t *testing.T) {
	dir := fixturesV41[0]
	v41Tokenizer(t)
	m := compileAndLoad(t, compiler.Options{ModelDir: dir})
	cases, err := vm.ReadCases(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var prompt []int32
	for _, c := range cases.Cases {
		prompt = c.InputIDs
		break
	}
	draft := func(n int, want []bool) []vm.Draft {
		t.Helper()
		var seqs []*vm.Sequence
		var anchors []int32
		for range n {
			seq, err := m.NewSequence()
			if err != nil {
				t.Fatal(err)
			}
			out, err := m.Forward([]vm.Chunk{{Seq: seq, Tokens: prompt}})
			if err != nil {
				t.Fatal(err)
			}
			seqs, anchors = append(seqs, seq), append(anchors, out[0].Token)
		}
		var d []vm.Draft
		if want == nil {
			d, err = m.Draft(seqs, anchors)
		} else {
			d, err = m.DraftWant(seqs, anchors, want)
		}
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	all := draft(1, nil)
	for _, want := range [][]bool{{true, false}, {false, true}, {false, false}} {
		var full []vm.Draft
		for range want {
			full = append(full, all[0])
		}
		got := draft(len(want), want)
		for i, d := range got {
			if !slices.Equal(d.Tokens, full[i].Tokens) || !slices.Equal(d.Confidence, full[i].Confidence) {
				t.Errorf("want %v, sequence %d: drafts %v / %v, confidences %v / %v", want, i, d.Tokens, full[i].Tokens, d.Confidence, full[i].Confidence)
			}
			switch {
			case !want[i] && d.Logits != nil:
				t.Errorf("want %v, sequence %d: %d logits rows read back", want, i, len(d.Logits))
			case want[i] && len(d.Logits) != len(full[i].Logits):
				t.Errorf("want %v, sequence %d: %d logits rows, want %d", want, i, len(d.Logits), len(full[i].Logits))
			case want[i]:
				for j := range d.Logits {
					if !slices.Equal(d.Logits[j], full[i].Logits[j]) {
						t.Errorf("want %v, sequence %d, row %d: logits differ", want, i, j)
					}
				}
			}
		}
	}
	seq, err := m.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.DraftWant([]*vm.Sequence{seq}, []int32{1}, nil); err == nil {
		t.Error("DraftWant took 1 sequence and 0 logits flags")
	}
}
