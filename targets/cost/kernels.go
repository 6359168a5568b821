package cost

import (
	"fmt"
	"strconv"
	"strings"
)

// memKernel is one memory-bound kernel moving bytes at fraction eff of HBM bandwidth.
func (m *Model) memKernel(bytes, eff float64) (device, memory float64) {
	memory = bytes / (m.Rates.HBMTBps * 1e12 * eff) * 1e6
	return m.P.EltwiseFloorUS + memory, memory
}

// eagerAttention prices MQA decode attention written as torch ops, the way the dev
// table measured it: s = bmm(q, kvᵀ)·scale; p = softmax(s.float()).bf16; o = bmm(p, kv).
// Two batched GEMMs (B problems of H×L×D and H×D×L) and four memory-bound kernels over
// the B·H·L scores: scale (2+2 B/elem), upcast (2+4), softmax (4+4), downcast (4+2).
func (m *Model) eagerAttention(k Kernel) (Breakdown, error) {
	b, l, d, h := k.M, k.N, k.K, max(k.Groups, 1)
	if b <= 0 || l <= 0 || d <= 0 {
		return Breakdown{}, fmt.Errorf("attention needs m (batch), n (context), k (head dim) > 0")
	}
	dk, bits, err := dtypeKey(k.DType)
	if err != nil {
		return Breakdown{}, err
	}
	var out Breakdown
	add := func(x Breakdown) {
		out.DeviceUS += x.DeviceUS
		out.ComputeUS += x.ComputeUS
		out.MemoryUS += x.MemoryUS
		out.LatencyUS += x.LatencyUS
		out.FLOPs += x.FLOPs
		out.Bytes += x.Bytes
		out.Kernels += x.Kernels
	}
	for _, s := range []gemmShape{
		{dtype: dk, bits: bits, g: b, m: h, n: l, k: d, outBytes: 2}, // scores
		{dtype: dk, bits: bits, g: b, m: h, n: d, k: l, outBytes: 2}, // output
	} {
		x, err := m.gemmCore(s)
		if err != nil {
			return Breakdown{}, err
		}
		add(x)
	}
	scores := float64(b) * float64(h) * float64(l)
	for _, perElem := range []float64{4, 6, 8, 6} {
		dev, mem := m.memKernel(scores*perElem, m.P.EltwiseEff)
		add(Breakdown{DeviceUS: dev, MemoryUS: mem, LatencyUS: m.P.EltwiseFloorUS, Bytes: scores * perElem, Kernels: 1})
	}
	out.Bound = bound(out.ComputeUS, out.MemoryUS, out.LatencyUS)
	out.Plan = "torch eager: bmm, scale, upcast, softmax, downcast, bmm"
	return out, nil
}

// flashAttention prices the same decode attention as one fused kernel (FlashMLA class):
// the K=V cache is read once; FLOPs 4·B·H·L·D. Its efficiencies come from FlashMLA's
// published H800 numbers (3000 GB/s memory-bound, 660 TFLOPS compute-bound), not from a
// measurement here.
func (m *Model) flashAttention(k Kernel) (Breakdown, error) {
	b, l, d, h := float64(k.M), float64(k.N), float64(k.K), float64(max(k.Groups, 1))
	if b <= 0 || l <= 0 || d <= 0 {
		return Breakdown{}, fmt.Errorf("attention needs m (batch), n (context), k (head dim) > 0")
	}
	_, bits, err := dtypeKey(k.DType)
	if err != nil {
		return Breakdown{}, err
	}
	peak := m.Rates.TFLOPS["bf16"]
	if peak <= 0 {
		peak = m.Rates.TFLOPS["fp8"] / 2
	}
	flops := 4 * b * h * l * d
	bytes := b*l*d*float64(bits)/8 + 2*b*h*d*2
	compute := flops / (peak * 1e12 * m.P.FlashComputeEff) * 1e6
	memory := bytes / (m.Rates.HBMTBps * 1e12 * m.P.FlashMemEff) * 1e6
	out := Breakdown{ComputeUS: compute, MemoryUS: memory, LatencyUS: m.P.GEMMFloorUS, FLOPs: flops, Bytes: bytes, Kernels: 1,
		Plan: "fused decode attention (FlashMLA-class, published efficiencies)"}
	out.DeviceUS = out.LatencyUS + smoothMax(compute, memory, m.P.Smooth)
	out.Bound = bound(compute, memory, out.LatencyUS)
	return out, nil
}

// copyBytes is what a copy moves: Kernel.Bytes, or extra's bytes=N, or read+write of M
// elements.
func copyBytes(k Kernel) (float64, error) {
	if k.Bytes > 0 {
		return float64(k.Bytes), nil
	}
	for _, f := range strings.FieldsFunc(k.Extra, func(r rune) bool { return r == ';' || r == ' ' }) {
		if v, ok := strings.CutPrefix(f, "bytes="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("bad bytes= in extra %q", k.Extra)
			}
			return float64(n), nil
		}
	}
	_, bits, err := dtypeKey(k.DType)
	if err != nil {
		return 0, err
	}
	return 2 * float64(k.M) * float64(max(k.N, 1)) * float64(bits) / 8, nil
}

func (m *Model) copyKernel(k Kernel) (Breakdown, error) {
	bytes, err := copyBytes(k)
	if err != nil {
		return Breakdown{}, err
	}
	dev, mem := m.memKernel(bytes, m.P.CopyEff)
	return Breakdown{DeviceUS: dev, MemoryUS: mem, LatencyUS: m.P.EltwiseFloorUS, Bytes: bytes, Kernels: 1,
		Bound: bound(0, mem, m.P.EltwiseFloorUS)}, nil
}

func (m *Model) elementwise(k Kernel) (Breakdown, error) {
	bytes := float64(k.Bytes)
	if bytes == 0 {
		var err error
		if bytes, err = copyBytes(k); err != nil {
			return Breakdown{}, err
		}
	}
	dev, mem := m.memKernel(bytes, m.P.EltwiseEff)
	return Breakdown{DeviceUS: dev, MemoryUS: mem, LatencyUS: m.P.EltwiseFloorUS, Bytes: bytes, Kernels: 1,
		Bound: bound(0, mem, m.P.EltwiseFloorUS)}, nil
}

// eagerRMSNorm prices HF-style RMSNorm in torch ops on an [M,N] bf16 tensor: upcast
// (2+4 B/elem), pow (4+4), mean (4), add eps and rsqrt (per row), scale (4+4),
// downcast (4+2), weight (2+2): 8 kernels, 36 B/elem.
func (m *Model) eagerRMSNorm(k Kernel) (Breakdown, error) {
	if k.M <= 0 || k.N <= 0 {
		return Breakdown{}, fmt.Errorf("rmsnorm needs m, n > 0")
	}
	elems := float64(k.M) * float64(k.N)
	rows := float64(k.M)
	var out Breakdown
	for _, bytes := range []float64{6 * elems, 8 * elems, 4*elems + 4*rows, 8 * rows, 8 * rows, 8*elems + 4*rows, 6 * elems, 4 * elems} {
		dev, mem := m.memKernel(bytes, m.P.EltwiseEff)
		out.DeviceUS += dev
		out.MemoryUS += mem
		out.LatencyUS += m.P.EltwiseFloorUS
		out.Bytes += bytes
		out.Kernels++
	}
	out.Bound = bound(0, out.MemoryUS, out.LatencyUS)
	out.Plan = "torch eager: upcast, pow, mean, add, rsqrt, mul, downcast, mul"
	return out, nil
}

// fusedRMSNorm is one kernel: read x, write y (the weight stays in cache).
func (m *Model) fusedRMSNorm(k Kernel) (Breakdown, error) {
	if k.M <= 0 || k.N <= 0 {
		return Breakdown{}, fmt.Errorf("rmsnorm needs m, n > 0")
	}
	_, bits, err := dtypeKey(k.DType)
	if err != nil {
		return Breakdown{}, err
	}
	bytes := 2 * float64(k.M) * float64(k.N) * float64(bits) / 8
	dev, mem := m.memKernel(bytes, m.P.EltwiseEff)
	return Breakdown{DeviceUS: dev, MemoryUS: mem, LatencyUS: m.P.EltwiseFloorUS, Bytes: bytes, Kernels: 1,
		Bound: bound(0, mem, m.P.EltwiseFloorUS)}, nil
}
