package plan_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
	_ "deepinfer/targets/cpu"
)

func embeddedPlan(t testing.TB) *plan.Plan {
	out, err := compiler.Compile(compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return out.Plan
}

func TestRoundTrip(t *testing.T) {
	p := embeddedPlan(t)
	data, err := plan.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := plan.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Fatal("decoded plan differs from the encoded one")
	}
	again, err := plan.Encode(q)
	if err != nil || !bytes.Equal(again, data) {
		t.Fatal("re-encoding is not byte-identical")
	}
}

// TestValidateRejects corrupts one field at a time of an otherwise valid plan (with a
// correct checksum) and checks that validation names the problem.
func TestValidateRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(p *plan.Plan)
		want string
	}{
		{"slot out of range", func(p *plan.Plan) { p.Programs[0].Instrs[3].Args[0].Index = 999 }, "slot 999"},
		{"weight type", func(p *plan.Plan) { p.Programs[0].Instrs[0].Args[1].Index = 5 }, "weight operand"},
		{"unknown op", func(p *plan.Plan) { p.Programs[0].Instrs[1].Op = "conv2d" }, "unknown op"},
		{"bad attr", func(p *plan.Plan) { p.Programs[0].Instrs[1].Attrs["mult"] = "four" }, "mult"},
		{"result type", func(p *plan.Plan) { p.Programs[1].Instrs[2].ResultTypes[0].Shape[1].N = 3 }, "result"},
		{"read before write", func(p *plan.Plan) {
			pr := &p.Programs[0]
			pr.Instrs[0], pr.Instrs[1] = pr.Instrs[1], pr.Instrs[0]
		}, "read before it is written"},
		{"layer past kv", func(p *plan.Plan) {
			for i := range p.Programs[0].Instrs {
				if _, ok := p.Programs[0].Instrs[i].Attrs["layer"]; ok {
					p.Programs[0].Instrs[i].Attrs["layer"] = int64(99)
					return
				}
			}
		}, "layer 99"},
		{"duplicate weight", func(p *plan.Plan) { p.Weights[1].Name = p.Weights[0].Name }, "repeated name"},
		{"source", func(p *plan.Plan) { p.Source.Kind = "ftp" }, "weight source"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := embeddedPlan(t)
			c.edit(p)
			data, err := plan.Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			_, err = plan.Decode(data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	data, err := plan.Encode(embeddedPlan(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/3])
	f.Add([]byte(plan.Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := plan.Decode(b)
		if err != nil {
			return
		}
		// whatever decodes must re-encode and decode to the same plan
		again, err := plan.Encode(p)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		q, err := plan.Decode(again)
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip of an accepted plan failed: %v", err)
		}
	})
}

// FuzzDecodeBody fuzzes the msgpack body behind a valid header and checksum, which is
// where the structural decoding happens (a random file almost never passes the checksum).
func FuzzDecodeBody(f *testing.F) {
	data, err := plan.Encode(embeddedPlan(f))
	if err != nil {
		f.Fatal(err)
	}
	body := data[len(plan.Magic)+4+8+32:]
	f.Add(body)
	f.Add(body[:len(body)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := plan.Decode(plan.Frame(b))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if err := plan.Validate(p); err != nil {
			t.Fatalf("accepted an invalid plan: %v", err)
		}
	})
}

// TestAccount checks the checkpoint accounting: without a deployment the manifest's
// storage bytes; with one, a role whose placement drops an expert holds that much less.
func TestAccount(t *testing.T) {
	p := embeddedPlan(t)
	h := p.Account()
	var want int64
	for i := range p.Weights {
		b, _ := p.Weights[i].StorageBytes()
		want += b
	}
	if h.Bytes != want || h.Tensors != len(p.Weights) || len(h.Roles) != 0 {
		t.Fatalf("account %+v, want %d bytes in %d tensors", h, want, len(p.Weights))
	}
	// every expert of layer 1 placed but expert 3, on 2 ranks
	phy := []int{0, 1, 2, 4, 5, 6, 7, 0}
	p.Deployment = &plan.Deployment{Roles: []plan.Role{{Name: "decode", DP: 2, EP: 2, CP: 1, TP: 1,
		Placement: []plan.LayerPlacement{{Layer: 1, Phy2Log: phy}}}}}
	r := p.Account().Roles[0]
	var expert3 int64
	for i := range p.Weights {
		if strings.HasPrefix(p.Weights[i].Name, "model.layers.1.ffn.experts.3.") {
			b, _ := p.Weights[i].StorageBytes()
			expert3 += b
		}
	}
	if r.Missing != 1 || r.Bytes() != want-expert3 || expert3 == 0 {
		t.Fatalf("role holdings %+v (%d bytes), want %d missing expert and %d bytes", r, r.Bytes(), 1, want-expert3)
	}
}
