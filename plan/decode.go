package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"deepinfer/ir"
)

// MaxFileSize bounds what the decoder accepts.
const MaxFileSize = 512 << 20

// Error is a plan the decoder refuses; it says why.
type Error struct {
	File string
	Msg  string
}

func (e *Error) Error() string {
	if e.File == "" {
		return "plan: " + e.Msg
	}
	return e.File + ": " + e.Msg
}

// ReadFile reads and validates a plan file.
func ReadFile(path string) (*Plan, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxFileSize {
		return nil, &Error{File: path, Msg: fmt.Sprintf("%d bytes is larger than the %d-byte plan limit", st.Size(), MaxFileSize)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Decode(data)
	if e, ok := err.(*Error); ok {
		e.File = path
	}
	return p, err
}

// Decode parses and validates a plan. It never panics, and every allocation is bounded
// by the input's length.
func Decode(data []byte) (*Plan, error) {
	if len(data) > MaxFileSize {
		return nil, &Error{Msg: "larger than the plan size limit"}
	}
	if len(data) < len(Magic) || string(data[:len(Magic)]) != Magic {
		return nil, &Error{Msg: "not a plan file (bad magic; want \"DIPLAN\\r\\n\")"}
	}
	if len(data) < headerSize {
		return nil, &Error{Msg: fmt.Sprintf("truncated: %d bytes, the header alone is %d", len(data), headerSize)}
	}
	v := binary.LittleEndian.Uint32(data[len(Magic):])
	if v != Version {
		return nil, &Error{Msg: fmt.Sprintf("plan format version %d; this build reads version %d (recompile the plan with this dic)", v, Version)}
	}
	n := binary.LittleEndian.Uint64(data[len(Magic)+4:])
	body := data[headerSize:]
	if n != uint64(len(body)) {
		return nil, &Error{Msg: fmt.Sprintf("truncated or padded: header says %d body bytes, file has %d", n, len(body))}
	}
	sum := sha256.Sum256(body)
	if !bytes.Equal(sum[:], data[len(Magic)+12:headerSize]) {
		return nil, &Error{Msg: "checksum mismatch: the file is corrupt"}
	}
	p, err := decodeBody(body)
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	if err := Validate(p); err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	return p, nil
}

type decoder struct {
	r   *bytes.Reader
	d   *msgpack.Decoder
	err error
	at  string // what is being read, for errors
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %s", d.at, fmt.Sprintf(format, args...))
	}
}

// arr reads an array header whose length must be want (or any if want < 0) and at most
// the bytes left, so a forged length cannot make us allocate.
func (d *decoder) arr(want int) int {
	if d.err != nil {
		return 0
	}
	n, err := d.d.DecodeArrayLen()
	if err != nil {
		d.fail("%v", err)
		return 0
	}
	if n < 0 || n > d.r.Len() {
		d.fail("array length %d exceeds the %d bytes left", n, d.r.Len())
		return 0
	}
	if want >= 0 && n != want {
		d.fail("array of %d elements, want %d", n, want)
		return 0
	}
	return n
}

func (d *decoder) str() string {
	if d.err != nil {
		return ""
	}
	c, err := d.d.PeekCode()
	if err == nil && !msgpcode.IsString(c) && !msgpcode.IsBin(c) {
		d.fail("want a string")
		return ""
	}
	s, err := d.d.DecodeString()
	if err != nil {
		d.fail("%v", err)
	}
	if len(s) > 1<<16 {
		d.fail("string of %d bytes is too long", len(s))
	}
	return s
}

func (d *decoder) int(lo, hi int64) int64 {
	if d.err != nil {
		return 0
	}
	n, err := d.d.DecodeInt64()
	if err != nil {
		d.fail("%v", err)
		return 0
	}
	if n < lo || n > hi {
		d.fail("%d is out of range [%d, %d]", n, lo, hi)
	}
	return n
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	n, err := d.d.DecodeUint64()
	if err != nil {
		d.fail("%v", err)
	}
	return n
}

func (d *decoder) float() float64 {
	if d.err != nil {
		return 0
	}
	f, err := d.d.DecodeFloat64()
	if err != nil {
		d.fail("%v", err)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		d.fail("non-finite number")
	}
	return f
}

func (d *decoder) bool() bool {
	if d.err != nil {
		return false
	}
	b, err := d.d.DecodeBool()
	if err != nil {
		d.fail("%v", err)
	}
	return b
}

const maxDim = 1 << 40

func (d *decoder) typ() ir.Type {
	d.arr(2)
	dt := ir.DType(d.int(1, int64(ir.State)))
	n := d.arr(-1)
	if n > 8 {
		d.fail("%d dims", n)
		return ir.Type{}
	}
	t := ir.Type{DType: dt}
	if n > 0 {
		t.Shape = make(ir.Shape, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		c, err := d.d.PeekCode()
		if err != nil {
			d.fail("%v", err)
			break
		}
		if msgpcode.IsString(c) {
			s := d.str()
			if s != ir.SymTokens && s != ir.SymRows && s != ir.SymKept {
				d.fail("unknown symbolic dim %q", s)
			}
			t.Shape = append(t.Shape, ir.S(s))
		} else {
			t.Shape = append(t.Shape, ir.Dim{N: d.int(0, maxDim)})
		}
	}
	return t
}

func (d *decoder) types() []ir.Type {
	n := d.arr(-1)
	out := make([]ir.Type, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, d.typ())
	}
	return out
}

func (d *decoder) operands() []Operand {
	n := d.arr(-1)
	out := make([]Operand, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		d.arr(2)
		k := d.uint()
		idx := d.uint()
		if k > uint64(OpNone) || idx > 1<<31 {
			d.fail("bad operand (%d, %d)", k, idx)
		}
		out = append(out, Operand{Kind: uint8(k), Index: int(idx)})
	}
	return out
}

func (d *decoder) attrs() ir.Attrs {
	n := d.arr(-1)
	a := make(ir.Attrs, n)
	for i := 0; i < n && d.err == nil; i++ {
		d.arr(2)
		k := d.str()
		if _, dup := a[k]; dup {
			d.fail("attribute %s twice", k)
		}
		c, err := d.d.PeekCode()
		if err != nil {
			d.fail("%v", err)
			break
		}
		switch {
		case msgpcode.IsString(c):
			a[k] = d.str()
		case c == msgpcode.True || c == msgpcode.False:
			a[k] = d.bool()
		case c == msgpcode.Float || c == msgpcode.Double:
			a[k] = d.float()
		case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
			m := d.arr(-1)
			list := make([]int64, 0, m)
			for j := 0; j < m && d.err == nil; j++ {
				list = append(list, d.int(math.MinInt64, math.MaxInt64))
			}
			a[k] = list
		default:
			a[k] = d.int(math.MinInt64, math.MaxInt64)
		}
	}
	return a
}

func decodeBody(body []byte) (*Plan, error) {
	r := bytes.NewReader(body)
	d := &decoder{r: r, d: msgpack.NewDecoder(r), at: "body"}
	p := &Plan{}
	d.arr(10)
	d.at = "header"
	p.ModelType, p.ConfigHash, p.Target, p.Compiler = d.str(), d.str(), d.str(), d.str()
	d.at = "model"
	d.arr(9)
	m := &p.Model
	m.Vocab, m.Hidden = int(d.int(1, 1<<24)), int(d.int(1, 1<<20))
	m.BOS, m.EOS = int(d.int(0, 1<<24)), int(d.int(0, 1<<24))
	m.MaxPositions, m.MTPLayers = int(d.int(1, 1<<40)), int(d.int(0, 64))
	nl := d.arr(-1)
	for i := 0; i < nl && d.err == nil; i++ {
		d.arr(9)
		m.Layers = append(m.Layers, Layer{Attn: d.str(), Ratio: int(d.int(0, 1<<20)), MLP: d.str(), Role: d.str(),
			KVSource: int(d.int(-1, 1<<16)), IndexSource: int(d.int(-1, 1<<16)), Candidate: d.str(), Engram: d.bool(), DSparkTarget: d.bool()})
	}
	m.DSpark = decodeDSpark(d)
	m.Vision = decodeVision(d)
	d.at = "source"
	d.arr(2)
	p.Source.Kind, p.Source.Seed = d.str(), d.uint()
	nw := d.arr(-1)
	for i := 0; i < nw && d.err == nil; i++ {
		d.at = fmt.Sprintf("weight %d", i)
		d.arr(4)
		w := Weight{Name: d.str()}
		t := d.typ()
		w.DType = t.DType
		for _, dim := range t.Shape {
			w.Shape = append(w.Shape, dim.N)
			if dim.Sym != "" {
				d.fail("symbolic dim in a weight")
			}
		}
		d.arr(3)
		w.Init = Init{Kind: d.str(), Mean: d.float(), Std: d.float()}
		w.Storage = d.str()
		p.Weights = append(p.Weights, w)
	}
	d.at = "kv layout"
	d.arr(2)
	nk := d.arr(-1)
	for i := 0; i < nk && d.err == nil; i++ {
		d.arr(5)
		l := kvLayer(d)
		p.KV.Layers = append(p.KV.Layers, l)
	}
	p.KV.EngramContext = int(d.int(0, 64))
	np := d.arr(-1)
	for i := 0; i < np && d.err == nil; i++ {
		d.at = fmt.Sprintf("program %d", i)
		d.arr(5)
		pr := Program{Phase: d.str()}
		npar := d.arr(-1)
		for j := 0; j < npar && d.err == nil; j++ {
			d.arr(2)
			pr.Params = append(pr.Params, Param{Name: d.str(), Type: d.typ()})
		}
		pr.Slots = d.types()
		ni := d.arr(-1)
		for j := 0; j < ni && d.err == nil; j++ {
			d.at = fmt.Sprintf("program %d instr %d", i, j)
			d.arr(7)
			in := Instr{Op: d.str(), Kernel: d.str()}
			in.Args, in.ArgTypes = d.operands(), d.types()
			in.Results, in.ResultTypes = d.operands(), d.types()
			in.Attrs = d.attrs()
			pr.Instrs = append(pr.Instrs, in)
		}
		pr.Returns = d.operands()
		p.Programs = append(p.Programs, pr)
	}
	d.at = "deployment"
	p.Deployment = decodeDeployment(d)
	if d.err == nil && r.Len() != 0 {
		d.at = "body"
		d.fail("%d trailing bytes", r.Len())
	}
	return p, d.err
}

func decodeDeployment(d *decoder) *Deployment {
	if d.err != nil {
		return nil
	}
	if c, err := d.d.PeekCode(); err == nil && c == msgpcode.Nil {
		_ = d.d.DecodeNil()
		return nil
	}
	d.arr(2)
	dep := &Deployment{Spec: d.str()}
	n := d.arr(-1)
	for i := 0; i < n && d.err == nil; i++ {
		d.arr(11)
		r := Role{Name: d.str()}
		for _, f := range []*int{&r.DP, &r.EP, &r.CP, &r.TP, &r.MaxNumSeqs, &r.MaxModelLen, &r.MaxNumBatchedTokens} {
			*f = int(d.int(1, 1<<24))
		}
		nm := d.arr(-1)
		for j := 0; j < nm && d.err == nil; j++ {
			d.arr(2)
			r.Memory = append(r.Memory, MemoryItem{Name: d.str(), Bytes: d.int(math.MinInt64/2, math.MaxInt64/2)})
		}
		np := d.arr(-1)
		for j := 0; j < np && d.err == nil; j++ {
			d.arr(2)
			lp := LayerPlacement{Layer: int(d.int(0, 1<<16))}
			ne := d.arr(-1)
			lp.Phy2Log = make([]int, 0, ne)
			for k := 0; k < ne && d.err == nil; k++ {
				lp.Phy2Log = append(lp.Phy2Log, int(d.int(0, 1<<20)))
			}
			r.Placement = append(r.Placement, lp)
		}
		r.Balancedness = d.float()
		dep.Roles = append(dep.Roles, r)
	}
	return dep
}
