package vm_test

import (
	"testing"

	"deepinfer/compiler"
	"deepinfer/vm"
)

// onlyAllowed is a constraint that allows a fixed set of ids.
type onlyAllowed struct {
	ids      []int32
	accepted []int32
}

func (o *onlyAllowed) FillMask(mask []uint64) error {
	for _, id := range o.ids {
		mask[id/64] |= 1 << (id % 64)
	}
	return nil
}

func (o *onlyAllowed) Accept(tok int32) error { o.accepted = append(o.accepted, tok); return nil }

// TestConstraintMasksSampling checks that masks reach the sampler in both phases, at
// temperature 0 and above, for masked and unmasked requests in one batch.
func TestConstraintMasksSampling(t *testing.T) {
	out, err := compiler.Compile(compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := vm.LoadWeights(out.Plan, "")
	m, err := vm.Load(out.Plan, w)
	if err != nil {
		t.Fatal(err)
	}
	a := &onlyAllowed{ids: []int32{65, 66, 200}}
	b := &onlyAllowed{ids: []int32{7}}
	reqs := []vm.Request{
		{ID: "a", Prompt: []int32{256, 1, 2, 3}, MaxTokens: 12, Constraint: a, Sampling: vm.Sampling{Temperature: 1.5, Seed: 1}},
		{ID: "b", Prompt: []int32{256, 9}, MaxTokens: 12, Constraint: b},
		{ID: "free", Prompt: []int32{256, 4, 5}, MaxTokens: 12, Sampling: vm.Sampling{Temperature: 1, Seed: 2}},
	}
	res := map[string]vm.Result{}
	(&vm.Engine{M: m}).Run(reqs, func(r vm.Result) { res[r.ID] = r })
	for _, c := range []struct {
		id      string
		allowed []int32
	}{{"a", a.ids}, {"b", b.ids}} {
		r := res[c.id]
		if r.Err != nil || len(r.Tokens) != 12 {
			t.Fatalf("%s: %v, %d tokens", c.id, r.Err, len(r.Tokens))
		}
		for _, tok := range r.Tokens {
			ok := false
			for _, id := range c.allowed {
				ok = ok || tok == id
			}
			if !ok {
				t.Fatalf("%s produced %d outside its mask %v: %v", c.id, tok, c.allowed, r.Tokens)
			}
		}
	}
	if len(a.accepted) != 12 {
		t.Fatalf("constraint saw %d accepted tokens, want 12", len(a.accepted))
	}
	free := res["free"].Tokens
	outside := 0
	for _, tok := range free {
		if tok != 65 && tok != 66 && tok != 200 && tok != 7 {
			outside++
		}
	}
	if outside == 0 {
		t.Fatalf("the unmasked request looks masked: %v", free)
	}
}
