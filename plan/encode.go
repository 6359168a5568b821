package plan

// Plan file layout, version 3. All integers in the fixed header are little-endian.
//
//	file      = magic version length checksum body
//	magic     = "DIPLAN\r\n"                      8 bytes
//	version   = uint32                            format version (Version)
//	length    = uint64                            byte length of body
//	checksum  = [32]byte                          SHA-256 of body
//	body      = msgpack array:
//	            [ model_type:str, config_hash:str, target:str, compiler:str,
//	              model, source, [weight...], kv, [program...], deployment ]
//	deployment = nil | [ spec:str, [role ...] ]
//	role      = [ name:str, dp:int, ep:int, cp:int, tp:int, max_num_seqs:int, max_model_len:int,
//	              max_num_batched_tokens:int, [ [item:str, bytes:int] ... ],
//	              [ [layer:int, [logical:int ...]] ... ] (phy2log per MoE layer), balancedness:float ]
//	model     = [ vocab:int, hidden:int, bos:int, eos:int, max_positions:int, mtp_layers:int,
//	              [ layer ... ], dspark, vision ]
//	layer     = [ attn:str, ratio:int, mlp:str, role:str, kv_source:int, index_source:int,
//	              candidate:str, engram:bool, dspark_target:bool ]
//	dspark    = nil | [ block:int, noise:int, stages:int, markov_rank:int, [target:int ...] ]
//	vision    = nil | [ layers:int, hidden:int, heads:int, intermediate:int, patch:int,
//	              max_image_tokens:int ]
//	source    = [ kind:str, seed:uint ]
//	weight    = [ name:str, type, init, storage:str ]
//	init      = [ kind:str, mean:float, std:float ]
//	kv        = [ [ kvlayer ... ], engram_context:int ]
//	kvlayer   = [ window:int, dim:int, ring_cap:int, ring_fmt:str, [ cache ... ] ]
//	cache     = [ ratio:int, dim:int, overlap:bool, kind:str, fmt:str, group:int ]
//	program   = [ phase:str, [ [name:str, type] ... ], [type ...] (slots),
//	              [instr ...], [operand ...] (returns) ]
//	instr     = [ op:str, kernel:str, [operand ...], [type ...], [operand ...], [type ...], attrs ]
//	operand   = [ kind:uint (0 weight, 1 param, 2 slot, 3 none), index:uint ]
//	type      = [ dtype:uint, [ dim ... ] ]
//	dim       = str (symbol) | int (constant)
//	attrs     = [ [ key:str, value ] ... ]            sorted by key
//	value     = int | float | str | bool | [int ...]
//
// A weight's type is its runtime type with a constant shape. Slots hold the largest
// value the memory plan puts in them; a value uses the first elements of its slot.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/vmihailenco/msgpack/v5"

	"deepinfer/ir"
)

type encoder struct {
	e   *msgpack.Encoder
	err error
}

func (w *encoder) arr(n int) {
	if w.err == nil {
		w.err = w.e.EncodeArrayLen(n)
	}
}
func (w *encoder) str(s string) {
	if w.err == nil {
		w.err = w.e.EncodeString(s)
	}
}
func (w *encoder) int(n int64) {
	if w.err == nil {
		w.err = w.e.EncodeInt(n)
	}
}
func (w *encoder) uint(n uint64) {
	if w.err == nil {
		w.err = w.e.EncodeUint(n)
	}
}
func (w *encoder) float(f float64) {
	if w.err == nil {
		w.err = w.e.EncodeFloat64(f)
	}
}
func (w *encoder) bool(b bool) {
	if w.err == nil {
		w.err = w.e.EncodeBool(b)
	}
}

func (w *encoder) typ(t ir.Type) {
	w.arr(2)
	w.uint(uint64(t.DType))
	w.arr(len(t.Shape))
	for _, d := range t.Shape {
		if d.Sym != "" {
			w.str(d.Sym)
		} else {
			w.int(d.N)
		}
	}
}

func (w *encoder) operand(o Operand) {
	w.arr(2)
	w.uint(uint64(o.Kind))
	w.uint(uint64(o.Index))
}

func (w *encoder) operands(os []Operand) {
	w.arr(len(os))
	for _, o := range os {
		w.operand(o)
	}
}

func (w *encoder) types(ts []ir.Type) {
	w.arr(len(ts))
	for _, t := range ts {
		w.typ(t)
	}
}

func (w *encoder) attrs(a ir.Attrs) {
	keys := a.Keys()
	w.arr(len(keys))
	for _, k := range keys {
		w.arr(2)
		w.str(k)
		switch v := a[k].(type) {
		case int64:
			w.int(v)
		case float64:
			w.float(v)
		case string:
			w.str(v)
		case bool:
			w.bool(v)
		case []int64:
			w.arr(len(v))
			for _, n := range v {
				w.int(n)
			}
		default:
			if w.err == nil {
				w.err = fmt.Errorf("attribute %s: cannot encode %T", k, v)
			}
		}
	}
}

// Encode serializes p.
func Encode(p *Plan) ([]byte, error) {
	var body bytes.Buffer
	w := &encoder{e: msgpack.NewEncoder(&body)}
	w.arr(10)
	w.str(p.ModelType)
	w.str(p.ConfigHash)
	w.str(p.Target)
	w.str(p.Compiler)
	m := p.Model
	w.arr(9)
	for _, n := range []int{m.Vocab, m.Hidden, m.BOS, m.EOS, m.MaxPositions, m.MTPLayers} {
		w.int(int64(n))
	}
	w.arr(len(m.Layers))
	for _, l := range m.Layers {
		w.arr(9)
		w.str(l.Attn)
		w.int(int64(l.Ratio))
		w.str(l.MLP)
		w.str(l.Role)
		w.int(int64(l.KVSource))
		w.int(int64(l.IndexSource))
		w.str(l.Candidate)
		w.bool(l.Engram)
		w.bool(l.DSparkTarget)
	}
	w.dspark(m.DSpark)
	w.vision(m.Vision)
	w.arr(2)
	w.str(p.Source.Kind)
	w.uint(p.Source.Seed)
	w.arr(len(p.Weights))
	for _, wt := range p.Weights {
		w.arr(4)
		w.str(wt.Name)
		shape := make([]any, len(wt.Shape))
		for i, d := range wt.Shape {
			shape[i] = int(d)
		}
		w.typ(ir.T(wt.DType, shape...))
		w.arr(3)
		w.str(wt.Init.Kind)
		w.float(wt.Init.Mean)
		w.float(wt.Init.Std)
		w.str(wt.Storage)
	}
	w.arr(2)
	w.arr(len(p.KV.Layers))
	for _, l := range p.KV.Layers {
		w.arr(5)
		w.int(int64(l.Window))
		w.int(int64(l.Dim))
		w.int(int64(l.RingCap))
		w.str(l.RingFmt)
		w.arr(len(l.Caches))
		for _, c := range l.Caches {
			w.arr(6)
			w.int(int64(c.Ratio))
			w.int(int64(c.Dim))
			w.bool(c.Overlap)
			w.str(c.Kind)
			w.str(c.Fmt)
			w.int(int64(c.Group))
		}
	}
	w.int(int64(p.KV.EngramContext))
	w.arr(len(p.Programs))
	for _, pr := range p.Programs {
		w.arr(5)
		w.str(pr.Phase)
		w.arr(len(pr.Params))
		for _, pa := range pr.Params {
			w.arr(2)
			w.str(pa.Name)
			w.typ(pa.Type)
		}
		w.types(pr.Slots)
		w.arr(len(pr.Instrs))
		for _, in := range pr.Instrs {
			w.arr(7)
			w.str(in.Op)
			w.str(in.Kernel)
			w.operands(in.Args)
			w.types(in.ArgTypes)
			w.operands(in.Results)
			w.types(in.ResultTypes)
			w.attrs(in.Attrs)
		}
		w.operands(pr.Returns)
	}
	w.deployment(p.Deployment)
	if w.err != nil {
		return nil, w.err
	}
	return Frame(body.Bytes()), nil
}

// Frame puts the fixed header (magic, version, length, checksum) in front of a body.
func Frame(body []byte) []byte {
	sum := sha256.Sum256(body)
	out := make([]byte, 0, headerSize+len(body))
	out = append(out, Magic...)
	out = binary.LittleEndian.AppendUint32(out, Version)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(body)))
	out = append(out, sum[:]...)
	return append(out, body...)
}

const headerSize = len(Magic) + 4 + 8 + sha256.Size

// WriteFile writes p to path atomically (a temporary file in the same directory, then rename).
func WriteFile(path string, p *Plan) error {
	data, err := Encode(p)
	if err != nil {
		return err
	}
	return writeAtomic(path, data)
}

// WriteBytes writes an encoded plan atomically.
func WriteBytes(path string, data []byte) error { return writeAtomic(path, data) }

func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = io.Copy(f, bytes.NewReader(data))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func (w *encoder) deployment(d *Deployment) {
	if d == nil {
		if w.err == nil {
			w.err = w.e.EncodeNil()
		}
		return
	}
	w.arr(2)
	w.str(d.Spec)
	w.arr(len(d.Roles))
	for _, r := range d.Roles {
		w.arr(11)
		w.str(r.Name)
		for _, n := range []int{r.DP, r.EP, r.CP, r.TP, r.MaxNumSeqs, r.MaxModelLen, r.MaxNumBatchedTokens} {
			w.int(int64(n))
		}
		w.arr(len(r.Memory))
		for _, m := range r.Memory {
			w.arr(2)
			w.str(m.Name)
			w.int(m.Bytes)
		}
		w.arr(len(r.Placement))
		for _, lp := range r.Placement {
			w.arr(2)
			w.int(int64(lp.Layer))
			w.arr(len(lp.Phy2Log))
			for _, e := range lp.Phy2Log {
				w.int(int64(e))
			}
		}
		w.float(r.Balancedness)
	}
}
