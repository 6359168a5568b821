package synth

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/quant"
	"deepinfer/safetensors"
)

// Options says what Write generates.
type Options struct {
	Layers   []int     // original layer ids to keep (ascending); nil keeps every layer
	Seed     uint64    // the same seed gives the same bytes
	Workers  int       // tensors generated at once (0: GOMAXPROCS)
	Progress io.Writer // one line per shard written (nil: quiet)
	// ConfigOnly writes the cut config.json and no weights: enough to compile (and
	// simulate) the plan the full checkpoint would give.
	ConfigOnly bool
}

// Summary is what Write wrote.
type Summary struct {
	Layers  int      // layers in the written config
	Tensors int      // checkpoint tensors (scales counted)
	Bytes   int64    // tensor bytes
	Shards  int      // safetensors files
	Notes   []string // what the cut changed beyond dropping layers
}

// Write cuts the config in modelDir (config.json) to opts.Layers, writes it to outDir,
// compiles it to learn the weight manifest, and writes random weights for every
// manifest tensor in its checkpoint format: one shard per layer (and one for the
// embeddings and head, one for the MTP stages) and model.safetensors.index.json.
func Write(modelDir, outDir string, opts Options) (Summary, error) {
	raw, err := os.ReadFile(filepath.Join(modelDir, "config.json"))
	if err != nil {
		return Summary{}, err
	}
	var notes []string
	if opts.Layers != nil {
		if raw, notes, err = TrimConfig(raw, opts.Layers); err != nil {
			return Summary{}, err
		}
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return Summary{}, err
	}
	if _, err := os.Stat(filepath.Join(outDir, safetensors.IndexFileName)); err == nil {
		return Summary{}, fmt.Errorf("%s already holds a checkpoint (%s); choose an empty directory", outDir, safetensors.IndexFileName)
	}
	if err := os.WriteFile(filepath.Join(outDir, "config.json"), raw, 0o644); err != nil {
		return Summary{}, err
	}
	res, err := compiler.Compile(compiler.Options{ModelDir: outDir, Target: "cpu"})
	if err != nil {
		return Summary{}, fmt.Errorf("the cut config does not compile: %w", err)
	}
	p := res.Plan
	if opts.ConfigOnly {
		sum := Summary{Layers: len(p.Model.Layers), Notes: notes}
		if p.Model.DSpark != nil {
			sum.Layers -= p.Model.DSpark.Stages
		}
		return sum, nil
	}
	gen := generator{p: p, seed: opts.Seed, v4Names: p.ModelType == "deepseek_v4"}
	shards := map[string][]safetensors.Spec{}
	shardOf := func(name string) string {
		switch l := plan.LayerOf(name); {
		case strings.HasPrefix(name, "mtp."):
			return "mtp"
		case l >= 0:
			return fmt.Sprintf("layer%03d", l)
		}
		return "globals"
	}
	srcByShard := map[string][]tensorSource{}
	for i := range p.Weights {
		w := &p.Weights[i]
		if w.Init.Kind == plan.InitTokenMap {
			return Summary{}, fmt.Errorf("weight %s is derived from the tokenizer: synthetic checkpoints do not cover Engram", w.Name)
		}
		specs, srcs, err := gen.tensors(w)
		if err != nil {
			return Summary{}, err
		}
		s := shardOf(w.Name)
		shards[s] = append(shards[s], specs...)
		srcByShard[s] = append(srcByShard[s], srcs...)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range shards {
			if !yield(k) {
				return
			}
		}
	})
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	sum := Summary{Layers: len(p.Model.Layers), Shards: len(names), Notes: notes}
	if p.Model.DSpark != nil {
		sum.Layers -= p.Model.DSpark.Stages
	}
	index := map[string]string{}
	for k, s := range names {
		file := fmt.Sprintf("model-%05d-of-%05d.safetensors", k+1, len(names))
		specs, srcs := shards[s], srcByShard[s]
		var bytes int64
		for _, sp := range specs {
			index[sp.Name] = file
			bytes += numBytes(sp)
		}
		start := time.Now()
		err := safetensors.WriteStream(filepath.Join(outDir, file), specs, map[string]string{"format": "pt", "synthetic": "deepinfer synth"}, workers,
			func(i int, dst []byte) error { return srcs[i](dst) })
		if err != nil {
			return sum, err
		}
		sum.Tensors += len(specs)
		sum.Bytes += bytes
		if opts.Progress != nil {
			el := time.Since(start)
			fmt.Fprintf(opts.Progress, "synth: %s (%s): %d tensors, %.2f GB in %s (%.2f GB/s)\n", file, s, len(specs), float64(bytes)/1e9,
				el.Round(time.Millisecond), float64(bytes)/1e9/max(el.Seconds(), 1e-9))
		}
	}
	idx, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": sum.Bytes}, "weight_map": index}, "", "  ")
	if err != nil {
		return sum, err
	}
	return sum, os.WriteFile(filepath.Join(outDir, safetensors.IndexFileName), append(idx, '\n'), 0o644)
}

func numBytes(s safetensors.Spec) int64 {
	n := int64(s.DType.Size())
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// tensorSource fills one tensor's bytes.
type tensorSource func(dst []byte) error

type generator struct {
	p       *plan.Plan
	seed    uint64
	v4Names bool // V4 (transformers' names): FP8 scales are name_scale_inv; V4.1: prefix.scale
}

func (g *generator) rng(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(g.seed, h.Sum64()))
}

// tensors lists the checkpoint tensors of one manifest weight (the value, then the
// scale for the quantized formats) and how to fill each.
func (g *generator) tensors(w *plan.Weight) ([]safetensors.Spec, []tensorSource, error) {
	init := compiler.DefaultInit(w.Name, w.Shape)
	rows, cols := int64(1), int64(1)
	if len(w.Shape) == 2 {
		rows, cols = w.Shape[0], w.Shape[1]
	}
	scaleName := w.Name + "_scale_inv"
	if prefix, ok := strings.CutSuffix(w.Name, ".weight"); ok && !g.v4Names {
		scaleName = prefix + ".scale"
	}
	// the power-of-two scale that gives codes drawn at unit std the weight's std
	pow2 := func(unit float64) float32 {
		std := init.Std
		if std <= 0 {
			std = 1
		}
		return float32(math.Exp2(math.Round(math.Log2(std / unit))))
	}
	switch w.Storage {
	case "fp4_g32_ue8m0", "fp8_b32_ue8m0", "fp8_g32_ue8m0", "fp8_b128_ue8m0", "fp8_b128_f32":
		if len(w.Shape) != 2 {
			return nil, nil, fmt.Errorf("weight %s: %s needs a matrix, the manifest has %v", w.Name, w.Storage, w.Shape)
		}
		value := safetensors.Spec{Name: w.Name, DType: safetensors.F8_E4M3, Shape: []int64{rows, cols}}
		var scale safetensors.Spec
		var table *[256]byte
		var unit float64
		switch w.Storage {
		case "fp4_g32_ue8m0":
			value.DType, value.Shape = safetensors.I8, []int64{rows, cols / 2}
			scale = safetensors.Spec{Name: scaleName, DType: safetensors.F8_E8M0, Shape: []int64{rows, (cols + 31) / 32}}
			table, unit = &fp4Pairs, fp4Unit
		case "fp8_b32_ue8m0":
			scale = safetensors.Spec{Name: scaleName, DType: safetensors.F8_E8M0, Shape: []int64{(rows + 31) / 32, (cols + 31) / 32}}
			table, unit = &e4m3Normals, e4m3Unit
		case "fp8_g32_ue8m0":
			scale = safetensors.Spec{Name: scaleName, DType: safetensors.F8_E8M0, Shape: []int64{rows, (cols + 31) / 32}}
			table, unit = &e4m3Normals, e4m3Unit
		default: // 128×128 blocks
			scale = safetensors.Spec{Name: scaleName, DType: safetensors.F8_E8M0, Shape: []int64{(rows + 127) / 128, (cols + 127) / 128}}
			if w.Storage == "fp8_b128_f32" {
				scale.DType = safetensors.F32
			}
			table, unit = &e4m3Normals, e4m3Unit
		}
		s := pow2(unit)
		fillScale := func(dst []byte) error {
			if scale.DType == safetensors.F32 {
				for i := 0; i < len(dst); i += 4 {
					binary.LittleEndian.PutUint32(dst[i:], math.Float32bits(s))
				}
				return nil
			}
			b := quant.UE8M0(s)
			for i := range dst {
				dst[i] = b
			}
			return nil
		}
		fillValue := func(dst []byte) error {
			fillFromTable(g.rng(w.Name), table, dst)
			return nil
		}
		return []safetensors.Spec{value, scale}, []tensorSource{fillValue, fillScale}, nil
	}
	n := w.Elems()
	if strings.HasSuffix(w.Name, "tid2eid") {
		spec := safetensors.Spec{Name: w.Name, DType: safetensors.I64, Shape: w.Shape}
		experts := g.expertsOf(w.Name)
		k := w.Shape[len(w.Shape)-1]
		return []safetensors.Spec{spec}, []tensorSource{func(dst []byte) error {
			rng := g.rng(w.Name)
			for r := int64(0); r < n/k; r++ {
				perm := rng.Perm(experts)
				for j := int64(0); j < k; j++ {
					binary.LittleEndian.PutUint64(dst[8*(r*k+j):], uint64(perm[int(j)%experts]))
				}
			}
			return nil
		}}, nil
	}
	dt := safetensors.F32
	if w.Storage == "bf16" {
		dt = safetensors.BF16
	} else if w.Storage != "" && w.Storage != "f32" {
		return nil, nil, fmt.Errorf("weight %s: no synthetic values for storage %q", w.Name, w.Storage)
	}
	spec := safetensors.Spec{Name: w.Name, DType: dt, Shape: w.Shape}
	return []safetensors.Spec{spec}, []tensorSource{func(dst []byte) error {
		rng := g.rng(w.Name)
		var r uint64
		for i := int64(0); i < n; i++ {
			v := float32(init.Mean)
			if init.Kind == "normal" {
				if i%4 == 0 {
					r = rng.Uint64()
				}
				v = float32(init.Mean + init.Std*float64(normals[uint16(r>>(16*(i%4)))]))
			}
			if dt == safetensors.BF16 {
				binary.LittleEndian.PutUint16(dst[2*i:], uint16(math.Float32bits(quant.BF16(v))>>16))
			} else {
				binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
			}
		}
		return nil
	}}, nil
}

// expertsOf is the routed expert count of the MoE a hash table belongs to.
func (g *generator) expertsOf(table string) int {
	gate := strings.TrimSuffix(table, "tid2eid") + "weight"
	for i := range g.p.Weights {
		if g.p.Weights[i].Name == gate {
			return int(g.p.Weights[i].Shape[0])
		}
	}
	return 1
}

// fillFromTable fills dst with random entries of table: eight a draw.
func fillFromTable(rng *rand.Rand, table *[256]byte, dst []byte) {
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		r := rng.Uint64()
		for k := 0; k < 8; k++ {
			dst[i+k] = table[byte(r>>(8*k))]
		}
	}
	r := rng.Uint64()
	for ; i < len(dst); i++ {
		dst[i] = table[byte(r)]
		r >>= 8
	}
}

// The code tables: 256 codes whose decoded values are draws from a normal of std
// e4m3Unit (FP8) or fp4Unit (each FP4 nibble), so that a uniformly random entry is a
// normal draw rounded to the format, and a power-of-two scale brings it to the
// weight's std.
const (
	e4m3Unit = 16.0
	fp4Unit  = 1.5
)

// normals are 65,536 standard normal draws, indexed by 16 random bits (four a draw).
var normals = func() (t [1 << 16]float32) {
	rng := rand.New(rand.NewPCG(0x5eed, 0x4e4f))
	for i := range t {
		t[i] = float32(rng.NormFloat64())
	}
	return t
}()

var e4m3Normals, fp4Pairs = func() ([256]byte, [256]byte) {
	var e, f [256]byte
	rng := rand.New(rand.NewPCG(0x5eed, 0xc0de))
	for i := range e {
		e[i] = quant.EncodeE4M3(float32(e4m3Unit * rng.NormFloat64()))
		lo := quant.EncodeE2M1(float32(fp4Unit * rng.NormFloat64()))
		hi := quant.EncodeE2M1(float32(fp4Unit * rng.NormFloat64()))
		f[i] = lo | hi<<4
	}
	return e, f
}()
