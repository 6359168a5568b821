// Package cost is the per-kernel cost model shared by the hardware targets.
//
// A Model predicts how long one kernel call takes on one device, and how long a
// collective takes across ranks. It is a roofline with efficiency curves, not a lookup
// table: device time is the larger of a compute term (FLOPs over the dtype's dense rate,
// with tile and wave quantization over the streaming multiprocessors) and a memory term
// (bytes over HBM bandwidth), blended by a smooth maximum, plus a per-kernel latency
// floor. A handful of efficiency parameters per op family scale the published peaks
// down to what kernels reach; the h200 target fits them on kernels measured on an H200
// (testdata/cost), and the sm100 and ascend950 targets reuse those efficiencies on their
// own published peaks (docs/cost-model.md says how, and why that is a transfer, not a
// measurement).
//
// Every prediction carries the model's name and version (Breakdown.Model), so any
// number printed from it can be labelled as a model prediction.
//
// Two launch modes:
//   - Device: the kernel's time on the device alone, as in a captured plan (CUDA graph)
//     where launches overlap. This is what the simulator sums per step.
//   - Eager: a lone torch-eager call timed with CUDA events around it, the way the dev
//     table was measured: the host's dispatch cost is a floor under the device time.
package cost

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"
	"sync"
)

// Kernel is one kernel call, in the columns of the measurement tables
// (op,dtype,m,n,k,groups,extra).
//
// Shape conventions per Op:
//
//	gemm                  y[M,N] = x[M,K]·w[N,K]ᵀ
//	grouped_gemm          Groups gemms of M rows each (weights [Groups,N,K])
//	mqa_decode_attention  torch-eager MQA decode: M = batch, N = context, K = head dim,
//	                      Groups = query heads, one shared K=V head (bmm, softmax, bmm)
//	flash_mqa_decode      the same attention as one fused kernel (FlashMLA-style)
//	copy                  M elements; Bytes = bytes read + written (default 2·M·elem)
//	rmsnorm_unfused       torch-eager RMSNorm on [M,N] in separate ops
//	rmsnorm               fused RMSNorm on [M,N]
//	elementwise           one memory-bound kernel moving Bytes
type Kernel struct {
	Op     string
	DType  string // bf16, fp8e4m3 (or fp8), fp4
	M      int
	N      int
	K      int
	Groups int
	Extra  string
	Bytes  int64 // bytes moved, where the shape does not say (copy, elementwise)
	// Class is the plan's kernel class the call belongs to (deepgemm.fp8_gemm_nt, ...),
	// where the caller knows it: a model with a class calibration prices it by that.
	Class string
	// Scan is the number of entries one row of an attention or indexer call has in view
	// (the compressed entries visible to a query, attended or not): the length of a
	// per-row pass over them, which rows run side by side. The roofline ignores it (a
	// FlashMLA-class kernel reads only the indices it is given); a class calibration
	// may charge for it.
	Scan float64
	// Heap is the replacements one row's heap select makes (the top-k of n entries by
	// libstdc++'s heap select where k·64 ≤ n: about k·ln(n/k) for scores in no order),
	// a serial walk a row; 0 where the selection partitions instead. The roofline ignores
	// it; a class calibration may charge for it.
	Heap float64
}

func (k Kernel) String() string {
	return fmt.Sprintf("%s %s m=%d n=%d k=%d groups=%d %s", k.Op, k.DType, k.M, k.N, k.K, k.Groups, k.Extra)
}

// Launch says which time a prediction is for.
type Launch string

// Launch modes.
const (
	Device Launch = "device" // device time alone (captured plans)
	Eager  Launch = "eager"  // a lone eager call, host dispatch included
)

// Bound names what limits a prediction.
type Bound string

// Bounds.
const (
	ComputeBound Bound = "compute"
	MemoryBound  Bound = "memory"
	LatencyBound Bound = "latency" // the kernel floor dominates: too little work to fill the device
	HostBound    Bound = "host"    // eager only: the host's dispatch is slower than the device
	LinkBound    Bound = "link"    // communication: bytes over link bandwidth
)

// Breakdown explains one prediction.
type Breakdown struct {
	Model  string // model name and version: every printed number is this model's prediction
	Launch Launch
	US     float64 // the prediction, microseconds
	Bound  Bound

	DeviceUS  float64 // device time
	HostUS    float64 // host dispatch cost (eager launch only; 0 in device mode)
	ComputeUS float64 // compute term of the device time
	MemoryUS  float64 // memory term
	LatencyUS float64 // kernel floors (launch, ramp, epilogue), summed over the op's kernels
	FLOPs     float64
	Bytes     float64
	Kernels   int    // kernels the op launches
	Plan      string // e.g. the tile, split-K and waves the GEMM model chose
}

func (b Breakdown) String() string {
	s := fmt.Sprintf("predicted %.3g us (%s, %s, %s-bound; device %.3g us = compute %.3g / memory %.3g / floor %.3g",
		b.US, b.Model, b.Launch, b.Bound, b.DeviceUS, b.ComputeUS, b.MemoryUS, b.LatencyUS)
	if b.HostUS > 0 {
		s += fmt.Sprintf("; host %.3g us", b.HostUS)
	}
	if b.Plan != "" {
		s += "; " + b.Plan
	}
	return s + ")"
}

// Rates are the published peaks a model scales down.
type Rates struct {
	Device       string
	TFLOPS       map[string]float64 // dense, by dtype key: bf16, fp8, fp4
	HBMTBps      float64
	ComputeUnits int // SMs; 0 when unknown (then no wave quantization)
	// Links, for PredictComm.
	ScaleUpTBps   float64 // per device, both directions together (as vendors quote it)
	ScaleUpDomain int     // devices in one scale-up domain
	ScaleOutGBps  float64 // per device RDMA NIC bandwidth, one direction
	Assumptions   []string
}

// Model is a per-kernel cost model for one target. It is immutable: WithLaunch and
// WithParams return copies.
type Model struct {
	Name    string // e.g. "h200"
	Version string // bump when the model's equations change; the fit is named in Params.Fit
	Rates   Rates
	P       Params
	Comm    CommParams
	// Classes, when set, replace the device time of the calls of the named kernel
	// classes (Kernel.Class) with a calibration of those kernels (see ClassCal).
	Classes map[string]ClassCal
	// ClassFit names the class calibration, for ID.
	ClassFit string
	launch   Launch
}

// ClassCal is one kernel class's calibration: the device time of one call is
//
//	FloorUS + Bytes/GBps + FLOPs/TFLOPS + Scan·ScanNS + Heap·HeapNS
//
// with Bytes, FLOPs and Scan the model's own counts for the call (what it would move,
// compute, and have in view), i.e. a kernel that does its memory traffic, its
// arithmetic and its scan one after the other at the rates it was measured to reach.
// A rate of 0 leaves its term out.
type ClassCal struct {
	FloorUS float64 // fixed time per call, µs
	GBps    float64 // bytes per second reached, 1e9
	TFLOPS  float64 // arithmetic reached, 1e12 FLOP/s
	ScanNS  float64 // time per entry in a row's view (Kernel.Scan), ns
	HeapNS  float64 // time per heap-select replacement of a row (Kernel.Heap), ns
}

// US is the calibrated device time of a call moving bytes, computing flops, scanning
// scan entries and making heap heap-select replacements.
func (c ClassCal) US(bytes, flops, scan, heap float64) float64 {
	us := c.FloorUS + scan*c.ScanNS/1e3 + heap*c.HeapNS/1e3
	if c.GBps > 0 {
		us += bytes / (c.GBps * 1e3)
	}
	if c.TFLOPS > 0 {
		us += flops / (c.TFLOPS * 1e6)
	}
	return us
}

// WithClasses returns a copy of m whose calls of the classes in cal are priced by
// their calibration; name says which fit the table is.
func (m *Model) WithClasses(name string, cal map[string]ClassCal) *Model {
	c := *m
	c.P = m.P.clone()
	c.Classes = maps.Clone(cal)
	c.ClassFit = name
	return &c
}

// NewModel makes a model that predicts eager times.
func NewModel(name, version string, r Rates, p Params, c CommParams) *Model {
	return &Model{Name: name, Version: version, Rates: r, P: p.clone(), Comm: c, launch: Eager}
}

// WithLaunch returns a copy of m predicting times for launch mode l.
func (m *Model) WithLaunch(l Launch) *Model {
	c := *m
	c.P = m.P.clone()
	c.launch = l
	return &c
}

// WithParams returns a copy of m with parameters p.
func (m *Model) WithParams(p Params) *Model {
	c := *m
	c.P = p.clone()
	return &c
}

// Launch is the mode m predicts for.
func (m *Model) Launch() Launch { return m.launch }

// ID names the model and its version, for labelling printed predictions.
func (m *Model) ID() string {
	id := "cost model " + m.Name + " " + m.Version
	if m.P.Fit != "" {
		id += " (" + m.P.Fit + ")"
	}
	if m.ClassFit != "" {
		id += " with class calibration " + m.ClassFit
	}
	return id
}

// dtypeKey maps a table dtype to a rate key: bf16, fp8, fp4.
func dtypeKey(dt string) (string, int, error) {
	switch strings.ToLower(dt) {
	case "bf16", "bfloat16", "fp16", "f16":
		return "bf16", 16, nil
	case "fp8", "fp8e4m3", "e4m3", "fp8e5m2", "mxfp8", "hif8":
		return "fp8", 8, nil
	case "fp4", "fp4e2m1", "e2m1", "mxfp4", "hif4":
		return "fp4", 4, nil
	}
	return "", 0, fmt.Errorf("unknown dtype %q (known: bf16, fp8e4m3, fp4)", dt)
}

// Predict returns the predicted time of k in microseconds and how the model got it.
// The error names an op, dtype or shape the model cannot price.
func (m *Model) Predict(k Kernel) (float64, Breakdown, error) {
	b, err := m.device(k)
	if err != nil {
		return 0, Breakdown{}, fmt.Errorf("%s: %s: %w", m.ID(), k, err)
	}
	if c, ok := m.Classes[k.Class]; ok && k.Class != "" {
		b.DeviceUS = c.US(b.Bytes, b.FLOPs, k.Scan, k.Heap)
		b.LatencyUS = c.FloorUS + k.Scan*c.ScanNS/1e3 + k.Heap*c.HeapNS/1e3
		b.MemoryUS, b.ComputeUS = 0, 0
		if c.GBps > 0 {
			b.MemoryUS = b.Bytes / (c.GBps * 1e3)
		}
		if c.TFLOPS > 0 {
			b.ComputeUS = b.FLOPs / (c.TFLOPS * 1e6)
		}
		b.Bound = bound(b.ComputeUS, b.MemoryUS, b.LatencyUS)
		b.Plan = "class calibration " + m.ClassFit + " of " + k.Class
	}
	b.Model = m.ID()
	b.Launch = m.launch
	b.US = b.DeviceUS
	if m.launch == Eager {
		b.HostUS = m.P.host(k.Op, k.DType)
		// Host dispatch and device work overlap, imperfectly: the slower of the two
		// sets the pace (a smooth maximum), and a fixed lag (event record to first
		// launch) is paid on top.
		b.US = m.P.HostLagUS + smoothMax(b.HostUS, b.DeviceUS, m.P.HostOverlap)
		if b.HostUS > b.DeviceUS {
			b.Bound = HostBound
		}
	}
	return b.US, b, nil
}

// device computes the device-time breakdown of k.
func (m *Model) device(k Kernel) (Breakdown, error) {
	if k.M < 0 || k.N < 0 || k.K < 0 || k.Groups < 0 || k.Bytes < 0 {
		return Breakdown{}, fmt.Errorf("negative dimension")
	}
	switch k.Op {
	case "gemm":
		return m.gemm(k, 1, false)
	case "grouped_gemm":
		return m.gemm(k, max(k.Groups, 1), true)
	case "mqa_decode_attention":
		return m.eagerAttention(k)
	case "flash_mqa_decode":
		return m.flashAttention(k)
	case "copy":
		return m.copyKernel(k)
	case "rmsnorm_unfused":
		return m.eagerRMSNorm(k)
	case "rmsnorm":
		return m.fusedRMSNorm(k)
	case "elementwise":
		return m.elementwise(k)
	}
	return Breakdown{}, fmt.Errorf("unknown op %q (known: %s)", k.Op, strings.Join(Ops(), ", "))
}

// Ops lists the op kinds a model prices.
func Ops() []string {
	return []string{"gemm", "grouped_gemm", "mqa_decode_attention", "flash_mqa_decode", "copy",
		"rmsnorm_unfused", "rmsnorm", "elementwise"}
}

// smoothMax blends two times that overlap imperfectly: (a^p + b^p)^(1/p). Large p is the
// plain roofline max; small p charges for the overlap a real kernel fails to get.
func smoothMax(a, b, p float64) float64 {
	if a <= 0 {
		return b
	}
	if b <= 0 {
		return a
	}
	hi := math.Max(a, b)
	return hi * math.Pow(math.Pow(a/hi, p)+math.Pow(b/hi, p), 1/p)
}

// bound names the larger of the three device terms.
func bound(compute, memory, floor float64) Bound {
	switch {
	case floor >= compute && floor >= memory:
		return LatencyBound
	case compute >= memory:
		return ComputeBound
	}
	return MemoryBound
}

var (
	regMu    sync.Mutex
	registry = map[string]func() *Model{}
)

// Register makes a target's cost model available by the target's name; targets call it
// from init.
func Register(target string, f func() *Model) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[target]; dup {
		panic("cost: registered twice: " + target)
	}
	registry[target] = f
}

// For returns the cost model of a registered target.
func For(target string) (*Model, error) {
	regMu.Lock()
	defer regMu.Unlock()
	f, ok := registry[target]
	if !ok {
		names := make([]string, 0, len(registry))
		for n := range registry {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("target %q has no cost model (with one: %s)", target, strings.Join(names, ", "))
	}
	return f(), nil
}
