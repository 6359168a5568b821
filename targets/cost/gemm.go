package cost

import (
	"fmt"
	"math"
)

// A GEMM's device time is the best over the tilings a library would consider:
//
//	compute  = waves · tileFLOPs / (perSMpeak · ComputeEff · tileEff)
//	           waves = ⌈G·⌈M/TM⌉·⌈N/TN⌉·split / SMs⌉      (tile and wave quantization)
//	           tileEff = min(1, TM·TN/(TM+TN) / TileKnee)  (small tiles are feed-limited)
//	memory   = (G·(M·K + N·K)·in + G·M·N·out + split-K partials) / (HBM · StreamEff)
//	device   = GEMMFloorUS + smoothMax(compute, memory)
//
// Small M rides on the memory term (the weights stream once) and on the floor; large M
// on the compute term, whose waves make the staircase the measurements show.

// tilings are the CTA tiles considered (Hopper wgmma: M in multiples of 64).
var tilings = [][2]int{{128, 256}, {128, 128}, {64, 128}, {64, 64}}

// splits are the split-K factors considered for a single GEMM.
var splits = []int{1, 2, 4}

// gemmShape is one (possibly batched) GEMM problem.
type gemmShape struct {
	dtype    string // dtype key
	bits     int
	g        int // independent problems (groups or batch)
	m, n, k  int
	grouped  bool // one grouped kernel: its own efficiencies, no split-K
	outBytes float64
}

func (m *Model) gemm(k Kernel, groups int, grouped bool) (Breakdown, error) {
	dk, bits, err := dtypeKey(k.DType)
	if err != nil {
		return Breakdown{}, err
	}
	if k.M <= 0 || k.N <= 0 || k.K <= 0 {
		return Breakdown{}, fmt.Errorf("gemm needs m, n, k > 0")
	}
	return m.gemmCore(gemmShape{dtype: dk, bits: bits, g: groups, m: k.M, n: k.N, k: k.K, grouped: grouped, outBytes: 2})
}

func (m *Model) gemmCore(s gemmShape) (Breakdown, error) {
	peak, ok := m.Rates.TFLOPS[s.dtype]
	if !ok || peak <= 0 {
		return Breakdown{}, fmt.Errorf("%s has no published %s rate", m.Rates.Device, s.dtype)
	}
	eff := m.P.ComputeEff[s.dtype]
	if eff <= 0 {
		eff = m.P.ComputeEff["bf16"]
	}
	stream := m.P.StreamEff
	if s.grouped {
		eff *= m.P.GroupedComputeEff
		stream = m.P.GroupedStreamEff
	}
	in := float64(s.bits) / 8
	G, M, N, K := float64(s.g), float64(s.m), float64(s.n), float64(s.k)
	flops := 2 * G * M * N * K
	bytes := G*(M*K+N*K)*in + G*M*N*s.outBytes
	bw := m.Rates.HBMTBps * 1e12 * stream
	sms := m.Rates.ComputeUnits
	rate := peak * 1e12 * eff // whole device, full-size tiles

	best := math.Inf(1)
	var b Breakdown
	for _, t := range tilings {
		tm, tn := t[0], t[1]
		tileEff := math.Min(1, float64(tm*tn)/float64(tm+tn)/m.P.TileKnee)
		for _, split := range splits {
			if split > 1 && (s.grouped || s.k/split < 256) {
				continue
			}
			units := s.g * ceilDiv(s.m, tm) * ceilDiv(s.n, tn) * split
			var compute float64
			tileFLOPs := 2 * float64(tm) * float64(tn) * K / float64(split)
			if sms > 0 {
				waves := float64(ceilDiv(units, sms))
				compute = waves * tileFLOPs / (rate / float64(sms) * tileEff)
			} else { // unknown unit count: no wave quantization
				compute = float64(units) * tileFLOPs / (rate * tileEff)
			}
			mem := bytes
			if split > 1 { // fp32 partials written and read back
				mem += 2 * G * M * N * 4 * float64(split)
			}
			memory := mem / bw
			t := smoothMax(compute*1e6, memory*1e6, m.P.Smooth)
			if t < best {
				best = t
				b = Breakdown{ComputeUS: compute * 1e6, MemoryUS: memory * 1e6,
					Plan: fmt.Sprintf("tile %dx%d split-K %d, %d tiles", tm, tn, split, units)}
				if sms > 0 {
					b.Plan += fmt.Sprintf(" in %d waves of %d SMs", ceilDiv(units, sms), sms)
				}
			}
		}
	}
	b.LatencyUS = m.P.GEMMFloorUS
	b.DeviceUS = b.LatencyUS + best
	b.FLOPs, b.Bytes, b.Kernels = flops, bytes, 1
	b.Bound = bound(b.ComputeUS, b.MemoryUS, b.LatencyUS)
	return b, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
