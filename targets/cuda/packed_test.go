package cuda

import (
	"os"
	"slices"
	"strings"
	"testing"

	"deepinfer/plan"
	"deepinfer/targets"
)

// Packed uploads (packed.go) against the per-parameter path (EnvPacked=0) on the
// emulated device: the copies a step makes, the results, grammar masks, failures.

// openMode opens a fixture with packed uploads on or off.
func openMode(t *testing.T, model string, packed bool, o targets.Options) *Runtime {
	t.Helper()
	t.Setenv(EnvPacked, map[bool]string{true: "1", false: "0"}[packed])
	rt := openFixture(t, model, o)
	if rt.packed != packed || !strings.Contains(rt.Describe(), map[bool]string{true: "; packed uploads", false: "; per-parameter uploads"}[packed]) {
		t.Fatalf("%s=%s: packed %v (%s)", EnvPacked, os.Getenv(EnvPacked), rt.packed, rt.Describe())
	}
	return rt
}

func modeName(packed bool) string {
	if packed {
		return "packed"
	}
	return "per-parameter"
}

// TestPackedCopies: a pipelined decode step makes one upload and one read-back packed
// (one graph launch that unpacks, runs and keeps the ids), and the per-parameter
// path's six uploads (tokens, positions, rows, sampling values, sequences, masks) and
// two read-backs with EnvPacked=0; a synchronous step uploads once packed. The
// uploaded bytes are the layout's, without the unmasked rows' mask words.
func TestPackedCopies(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(modeName(packed), func(t *testing.T) {
			rt := openMode(t, "tiny-v4-dev", packed, targets.Options{MaxTokens: 32})
			if rt.progs[plan.PhaseDecode].mask < 0 {
				t.Fatal("the fixture's decode program has no mask parameter")
			}
			s := newScript(t, rt, 4)
			var out targets.StepOut
			pre := s.prefill([]int{0, 1, 2, 3})
			d := rt.fake
			b := d.stats
			if err := rt.Step(pre, &out); err != nil {
				t.Fatal(err)
			}
			s.took(pre, &out)
			wantUp := 6
			if packed {
				wantUp = 1
			}
			if n := d.stats.Uploads - b.Uploads; n != wantUp {
				t.Errorf("a synchronous step made %d uploads, want %d", n, wantUp)
			}
			seqs := []int{0, 1, 2, 3}
			var q []targets.Pending
			for n := 0; n < 5; n++ {
				in := s.decode(seqs, func(i int) int { return i }, false)
				b := d.stats
				p, err := rt.Enqueue(in)
				if err != nil {
					t.Fatal(err)
				}
				q = append(q, p)
				a := d.stats
				up, down := a.Uploads-b.Uploads, a.Downloads-b.Downloads
				R := int64(len(seqs))
				cols := rt.params.maskCols
				if packed {
					l := layoutFor(R, R, R, cols, 0)
					if up != 1 || down != 1 || a.UploadBytes-b.UploadBytes != uint64(4*l.words) || a.DownloadBytes-b.DownloadBytes != uint64(8+4*R) {
						t.Errorf("step %d: %d uploads (%d bytes), %d read-backs (%d bytes); want 1 (%d), 1 (%d)", n, up, a.UploadBytes-b.UploadBytes,
							down, a.DownloadBytes-b.DownloadBytes, 4*l.words, 8+4*R)
					}
					if l.words != packHeader+2*R+R+4*R+10*R+2*R {
						t.Errorf("a layout of %d words for %d rows without masks", l.words, R)
					}
				} else if want := 4*R + 4*R + 4*R + 16*R + 40*R + 4*R*cols; up != 6 || down != 2 || a.UploadBytes-b.UploadBytes != uint64(want) {
					t.Errorf("step %d: %d uploads (%d bytes), %d read-backs; want 6 (%d bytes, every row's mask words among them), 2", n, up, a.UploadBytes-b.UploadBytes, down, want)
				}
				if g := a.GraphLaunches - b.GraphLaunches; g != 1 {
					t.Errorf("step %d: %d graph launches", n, g)
				}
				if len(q) == 2 {
					if err := q[0].Wait(&out); err != nil {
						t.Fatal(err)
					}
					q = q[1:]
				}
			}
			for _, p := range q {
				if err := p.Wait(&out); err != nil || len(out.Tokens) != 4 {
					t.Fatalf("%v, %v", err, out.Tokens)
				}
			}
		})
	}
}

// TestPackedMatchesParams: the Step loop and the pipelined loop give the same tokens,
// logits and states packed and per parameter, with graphs and without; the reference
// is the per-parameter Step loop launched kernel by kernel.
func TestPackedMatchesParams(t *testing.T) {
	for _, model := range []string{"tiny-v4-dev", "tiny-v41-dev2"} {
		t.Run(model, func(t *testing.T) {
			o := targets.Options{MaxTokens: 64}
			var want trace
			t.Run("reference", func(t *testing.T) {
				ref := openMode(t, model, false, o)
				if err := ref.SetGraphs(false); err != nil {
					t.Fatal(err)
				}
				want = runSync(t, ref)
			})
			for _, packed := range []bool{true, false} {
				t.Run(modeName(packed), func(t *testing.T) {
					for _, graphs := range []bool{true, false} {
						rt := openMode(t, model, packed, o)
						if err := rt.SetGraphs(graphs); err != nil {
							t.Fatal(err)
						}
						sameTrace(t, "steps", runSync(t, rt), want)
						sameTrace(t, "pipelined", runPipelined(t, rt), want)
						if graphs && rt.GraphStats().Replayed == 0 {
							t.Error("no step replayed a graph")
						}
					}
				})
			}
		})
	}
}

// TestPackedMasks: grammar masks on some rows, changing from step to step (a row
// masked, then not: its old words stay on the device behind a clear flag), through
// Step and Enqueue: every masked row's token is one its mask allows, and the packed
// tokens equal the per-parameter path's, which rewrites every row's words.
func TestPackedMasks(t *testing.T) {
	run := func(t *testing.T, packed, pipelined bool) [][]int32 {
		rt := openMode(t, "tiny-v4-dev", packed, targets.Options{MaxTokens: 32})
		V := rt.plan.Model.Vocab
		mask := func(allow func(int) bool) []uint64 {
			m := make([]uint64, (V+63)/64)
			for i := 0; i < V; i++ {
				if allow(i) {
					m[i/64] |= 1 << (i % 64)
				}
			}
			return m
		}
		narrow := mask(func(i int) bool { return i%97 == 5 })
		odd := mask(func(i int) bool { return i%2 == 1 })
		// per step, the mask of each of the four rows (nil: none)
		plans := [][][]uint64{
			{narrow, nil, narrow, nil},
			{nil, nil, nil, nil}, // rows 0 and 2 lose their masks
			{nil, odd, nil, nil},
			{narrow, narrow, odd, odd},
			{nil, nil, nil, nil},
		}
		s := newScript(t, rt, 4)
		var out targets.StepOut
		pre := s.prefill([]int{0, 1, 2, 3})
		if err := rt.Step(pre, &out); err != nil {
			t.Fatal(err)
		}
		s.took(pre, &out)
		var got [][]int32
		for n, ms := range plans {
			in := s.decode([]int{0, 1, 2, 3}, nil, false)
			for r := range in.Sample {
				in.Sample[r] = 0 // greedy: an unmasked row takes its argmax
			}
			in.Masks = ms
			if pipelined {
				p, err := rt.Enqueue(in)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Wait(&out); err != nil {
					t.Fatal(err)
				}
			} else if err := rt.Step(in, &out); err != nil {
				t.Fatal(err)
			}
			s.took(in, &out)
			for r, m := range ms {
				if tok := out.Tokens[r]; m != nil && m[tok/64]>>(tok%64)&1 == 0 {
					t.Errorf("step %d row %d: token %d, which its mask forbids", n, r, tok)
				}
			}
			got = append(got, slices.Clone(out.Tokens))
		}
		return got
	}
	for _, pipelined := range []bool{false, true} {
		name := map[bool]string{false: "steps", true: "pipelined"}[pipelined]
		t.Run(name, func(t *testing.T) {
			var want, got [][]int32
			t.Run("per-parameter", func(t *testing.T) { want = run(t, false, pipelined) })
			t.Run("packed", func(t *testing.T) { got = run(t, true, pipelined) })
			if len(got) != len(want) {
				t.Fatalf("%d and %d steps", len(got), len(want))
			}
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("step %d: packed %v, per parameter %v", i, got[i], want[i])
				}
			}
			// the unmasked steps are not all the masked rows' tokens (the masks bit)
			if slices.Equal(want[0], want[1]) {
				t.Errorf("masks changed nothing: %v", want)
			}
		})
	}
}

// TestPackedCopyFailures: a pipelined step whose upload or read-back fails, or whose
// unpacking launch fails, is an error of Enqueue naming what failed; the step pending
// before it still completes, Enqueue refuses new steps, and Step still runs.
func TestPackedCopyFailures(t *testing.T) {
	for _, c := range []struct {
		call, want string
		packed     bool
		graphs     bool
	}{
		{"cuMemcpyHtoDAsync", "upload of the step's parameters", true, true},
		{"cuMemcpyDtoHAsync", "read-back of the error flag", true, true},
		{"cuLaunchKernel", "kernel unpack_step", true, false},
		{"cuLaunchKernel", "capturing: kernel unpack_step", true, true},
		{"cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync", false, true},
		{"cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync", false, true},
	} {
		t.Run(modeName(c.packed)+"/"+c.call+"/"+c.want, func(t *testing.T) {
			rt := openMode(t, "tiny-v4-dev", c.packed, targets.Options{MaxTokens: 32})
			if err := rt.SetGraphs(c.graphs); err != nil {
				t.Fatal(err)
			}
			s := newScript(t, rt, 3)
			var out targets.StepOut
			pre := s.prefill([]int{0, 1})
			if err := rt.Step(pre, &out); err != nil {
				t.Fatal(err)
			}
			s.took(pre, &out)
			p1, err := rt.Enqueue(s.decode([]int{0, 1}, nil, false))
			if err != nil {
				t.Fatal(err)
			}
			// the next step: one sequence (a shape not captured yet)
			rt.fake.failAt[c.call] = rt.fake.calls[c.call] + 1
			_, err = rt.Enqueue(s.decode([]int{0}, func(int) int { return 0 }, false))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("a failing %s: %v; want an error naming %q", c.call, err, c.want)
			}
			if err := p1.Wait(&out); err != nil || len(out.Tokens) != 2 {
				t.Errorf("the step pending before the failure: %v, %v", err, out.Tokens)
			}
			if _, err := rt.Enqueue(s.decode([]int{1}, nil, false)); err == nil || !strings.Contains(err.Error(), "after a failed step") {
				t.Errorf("enqueue after the failure: %v", err)
			}
			if err := rt.Step(s.prefill([]int{2}), &out); err != nil || len(out.Tokens) != 1 {
				t.Errorf("a step after the failure: %v, %v", err, out.Tokens)
			}
		})
	}
}

// TestEmptySequencesFit: a step with more sequences than tokens (some of them empty)
// grows the arena for its sequence table, and gives the tokens of the same step
// without the empty sequences.
func TestEmptySequencesFit(t *testing.T) {
	for _, packed := range []bool{true, false} {
		t.Run(modeName(packed), func(t *testing.T) {
			var toks [2][]int32
			for k, empty := range []bool{false, true} {
				rt := openMode(t, "tiny-v4-dev", packed, targets.Options{MaxTokens: 4})
				var seqs []targets.SeqIn
				for i := 0; i < 20; i++ {
					st, err := rt.NewState()
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case i < 2:
						seqs = append(seqs, targets.SeqIn{State: st, N: 2})
					case empty:
						seqs = append(seqs, targets.SeqIn{State: st})
					}
				}
				in := &targets.StepIn{Phase: plan.PhasePrefill, Tokens: []int32{1, 2, 3, 4}, Rows: []int32{1, 3}, Sample: make([]float32, 8), Seqs: seqs}
				var out targets.StepOut
				if err := rt.Step(in, &out); err != nil {
					t.Fatal(err)
				}
				toks[k] = slices.Clone(out.Tokens)
				if empty && rt.maxT < 20 {
					t.Errorf("20 sequences in an arena of %d tokens", rt.maxT)
				}
			}
			if !slices.Equal(toks[0], toks[1]) {
				t.Errorf("with empty sequences %v, without %v", toks[1], toks[0])
			}
		})
	}
}
