package sim

import (
	"strings"
	"testing"

	"deepinfer/ir"
	"deepinfer/plan"
	"deepinfer/targets/cost"
)

// Every IR op has a cost mapping: an op added to ir/ops.go without a case in price.go
// (or in elementwiseOps) fails here, not in the middle of a user's simulation.
func TestEveryOpHasACostMapping(t *testing.T) {
	m, err := cost.For("h200")
	if err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{}
	prog := &plan.Program{}
	pr := newPricer(m, p, prog, &plan.Role{})
	for _, op := range ir.Ops() {
		if err := mapped(pr, op); err != nil && strings.Contains(err.Error(), "no cost mapping") {
			t.Errorf("op %s: %v", op, err)
		}
	}
}

// mapped prices a bare instruction of op. Its operands are missing, so a mapped op
// usually fails (or panics) reading them; only the fallback's error matters here.
func mapped(pr *pricer, op string) (err error) {
	defer func() {
		if recover() != nil {
			err = nil
		}
	}()
	_, err = pr.instr(&plan.Instr{Op: op, Kernel: op}, stepShape{T: 1})
	return err
}
