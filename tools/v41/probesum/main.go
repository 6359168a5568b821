// Command probesum condenses what tools/v41/probe_*.py recorded with PyTorch on the
// reference's machine into the small files targets/cpu's tests read:
//
//	go run ./tools/v41/probesum -dir OUTDIR -out targets/cpu/testdata
//
// probe_m.safetensors (probe_gemm.py) becomes v41_probe_m.json: the SHA-256 of each
// fp32 F.linear result, keyed K.N.M (default thread count only); probe_ew.safetensors
// (probe_elementwise.py) becomes v41_probe_ew.json: the SHA-256 of each torch.sigmoid
// result, and for torch.exp the indices and bits of the results that differ from the
// correctly rounded exp. topk_torch.json (probe_topk.py) is gzipped as-is.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"deepinfer/internal/probedata"
	"deepinfer/safetensors"
)

func main() {
	dir := flag.String("dir", "", "folder with the probes' outputs")
	out := flag.String("out", "targets/cpu/testdata", "folder for the condensed files")
	flag.Parse()
	if err := run(*dir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "probesum:", err)
		os.Exit(1)
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func run(dir, out string) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	m, err := safetensors.OpenFile(filepath.Join(dir, "probe_m.safetensors"))
	if err != nil {
		return err
	}
	sums := map[string]string{}
	for _, k := range m.Names() {
		if !strings.HasPrefix(k, "y.") || strings.Count(k, ".") != 3 {
			continue // thread-count variants stay out
		}
		v, _, err := m.ReadFloat32(k, safetensors.ReadOptions{})
		if err != nil {
			return err
		}
		sums[strings.TrimPrefix(k, "y.")] = probedata.Digest(v)
	}
	if err := writeJSON(filepath.Join(out, "v41_probe_m.json"), map[string]any{"source": "tools/v41/probe_gemm.py, torch 2.11.0+cu130 (MKL 2024.2), 16 threads, Intel Xeon (AVX-512)", "sha256_128": sums}); err != nil {
		return err
	}
	ew, err := safetensors.OpenFile(filepath.Join(dir, "probe_ew.safetensors"))
	if err != nil {
		return err
	}
	sig := map[string]string{}
	type diff struct {
		I    int    `json:"i"`
		Bits uint32 `json:"bits"`
	}
	exp := map[string][]diff{}
	for n := 1; n <= 200; n++ {
		s, _, err := ew.ReadFloat32(fmt.Sprintf("sigmoid.%d", n), safetensors.ReadOptions{})
		if err != nil {
			return err
		}
		sig[fmt.Sprint(n)] = probedata.Digest(s)
		e, _, err := ew.ReadFloat32(fmt.Sprintf("exp.%d", n), safetensors.ReadOptions{})
		if err != nil {
			return err
		}
		x := probedata.Elementwise(n)
		var d []diff
		for i := range e {
			if float32(math.Exp(float64(x[i]))) != e[i] {
				d = append(d, diff{i, math.Float32bits(e[i])})
			}
		}
		sort.Slice(d, func(a, b int) bool { return d[a].I < d[b].I })
		exp[fmt.Sprint(n)] = d
	}
	if err := writeJSON(filepath.Join(out, "v41_probe_ew.json"), map[string]any{"source": "tools/v41/probe_elementwise.py, torch 2.11.0+cu130, Intel Xeon (AVX-512)", "sigmoid_sha256_128": sig, "exp_not_correctly_rounded": exp}); err != nil {
		return err
	}
	tk, err := os.ReadFile(filepath.Join(dir, "topk_torch.json"))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(tk)
	zw.Close()
	return os.WriteFile(filepath.Join(out, "v41_torch_topk.json.gz"), buf.Bytes(), 0o644)
}
