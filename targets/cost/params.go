package cost

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"
)

// Params are a model's efficiency parameters: what fraction of the published peaks each
// op family reaches, and the fixed costs under which no kernel goes. Each is a physical
// quantity with a unit; Fit adjusts the free ones (Free lists them) against measured
// kernels.
type Params struct {
	Fit string // names the fit these values came from, e.g. "h200 dev-table fit 2026-11"

	// Library GEMMs (cuBLAS, DeepGEMM class).
	ComputeEff  map[string]float64 // by dtype key (bf16, fp8, fp4): fraction of the dense peak one SM sustains in a full-size tile
	StreamEff   float64            // fraction of HBM bandwidth the operand stream of a memory-bound GEMM reaches
	TileKnee    float64            // tile intensity TM·TN/(TM+TN) below which a tile runs proportionally slower (operand feed limit)
	GEMMFloorUS float64            // device time of the smallest GEMM: launch, pipeline fill, epilogue
	Smooth      float64            // exponent p of the smooth maximum of compute and memory time (∞ = plain roofline)

	// Grouped GEMM: one kernel over all groups (torch._grouped_mm, DeepGEMM grouped).
	GroupedComputeEff float64 // relative to ComputeEff of the dtype
	GroupedStreamEff  float64 // fraction of HBM bandwidth

	// Memory-bound kernels.
	EltwiseEff     float64 // elementwise and row-reduction kernels: fraction of HBM bandwidth
	CopyEff        float64 // device-to-device copy: fraction of HBM bandwidth
	EltwiseFloorUS float64 // device time of the smallest memory-bound kernel

	// Fused decode attention (FlashMLA class). Not fitted: from published anchors.
	FlashMemEff     float64 // fraction of HBM bandwidth
	FlashComputeEff float64 // fraction of the bf16 dense peak

	// Host side of an eager call: the CPU time to issue the op's torch calls, by family
	// (gemm/bf16, gemm/fp8, grouped_gemm, mqa_decode_attention, rmsnorm_unfused, copy,
	// default), and the lag from the start event to the first launch.
	HostUS      map[string]float64
	HostLagUS   float64
	HostOverlap float64 // exponent p of the smooth maximum of host and device time (∞ = full overlap)
}

func (p Params) clone() Params {
	p.ComputeEff = maps.Clone(p.ComputeEff)
	p.HostUS = maps.Clone(p.HostUS)
	return p
}

// Clone returns a deep copy of p.
func (p Params) Clone() Params { return p.clone() }

// host is the host cost of an eager call of op.
func (p Params) host(op, dtype string) float64 {
	key := op
	if op == "gemm" || op == "grouped_gemm" {
		if dk, _, err := dtypeKey(dtype); err == nil {
			if v, ok := p.HostUS[op+"/"+dk]; ok {
				return v
			}
		}
	}
	if v, ok := p.HostUS[key]; ok {
		return v
	}
	if op == "grouped_gemm" {
		return p.host("gemm", dtype)
	}
	return p.HostUS["default"]
}

// Param is one free parameter, addressed by name.
type Param struct {
	Name  string
	Unit  string
	Value float64
}

// Free lists the parameters a fit may change, in a fixed order.
func (p *Params) Free() []Param {
	var out []Param
	add := func(name, unit string, v float64) { out = append(out, Param{name, unit, v}) }
	for _, k := range sortedKeys(p.ComputeEff) {
		add("ComputeEff."+k, "fraction", p.ComputeEff[k])
	}
	add("StreamEff", "fraction", p.StreamEff)
	add("TileKnee", "flop/B·elem", p.TileKnee)
	add("GEMMFloorUS", "us", p.GEMMFloorUS)
	add("Smooth", "exponent", p.Smooth)
	add("GroupedComputeEff", "fraction", p.GroupedComputeEff)
	add("GroupedStreamEff", "fraction", p.GroupedStreamEff)
	add("EltwiseEff", "fraction", p.EltwiseEff)
	add("CopyEff", "fraction", p.CopyEff)
	add("EltwiseFloorUS", "us", p.EltwiseFloorUS)
	for _, k := range sortedKeys(p.HostUS) {
		add("HostUS."+k, "us", p.HostUS[k])
	}
	add("HostLagUS", "us", p.HostLagUS)
	add("HostOverlap", "exponent", p.HostOverlap)
	return out
}

// Set changes the named parameter.
func (p *Params) Set(name string, v float64) error {
	if k, ok := strings.CutPrefix(name, "ComputeEff."); ok {
		p.ComputeEff[k] = v
		return nil
	}
	if k, ok := strings.CutPrefix(name, "HostUS."); ok {
		p.HostUS[k] = v
		return nil
	}
	f := map[string]*float64{
		"StreamEff": &p.StreamEff, "TileKnee": &p.TileKnee, "GEMMFloorUS": &p.GEMMFloorUS,
		"Smooth": &p.Smooth, "GroupedComputeEff": &p.GroupedComputeEff,
		"GroupedStreamEff": &p.GroupedStreamEff, "EltwiseEff": &p.EltwiseEff,
		"CopyEff": &p.CopyEff, "EltwiseFloorUS": &p.EltwiseFloorUS, "HostLagUS": &p.HostLagUS,
		"HostOverlap": &p.HostOverlap,
		"FlashMemEff": &p.FlashMemEff, "FlashComputeEff": &p.FlashComputeEff,
	}[name]
	if f == nil {
		return fmt.Errorf("cost: no parameter %q", name)
	}
	*f = v
	return nil
}

// GoString prints p as a Go literal, for pasting a new fit into a target's params file.
func (p Params) GoString() string {
	var b strings.Builder
	f := func(v float64) string {
		return fmt.Sprintf("%.4g", v)
	}
	m := func(mp map[string]float64) string {
		var parts []string
		for _, k := range sortedKeys(mp) {
			parts = append(parts, fmt.Sprintf("%q: %s", k, f(mp[k])))
		}
		return "map[string]float64{" + strings.Join(parts, ", ") + "}"
	}
	fmt.Fprintf(&b, "cost.Params{\n")
	fmt.Fprintf(&b, "\tFit:               %q,\n", p.Fit)
	fmt.Fprintf(&b, "\tComputeEff:        %s,\n", m(p.ComputeEff))
	fmt.Fprintf(&b, "\tStreamEff:         %s,\n", f(p.StreamEff))
	fmt.Fprintf(&b, "\tTileKnee:          %s,\n", f(p.TileKnee))
	fmt.Fprintf(&b, "\tGEMMFloorUS:       %s,\n", f(p.GEMMFloorUS))
	fmt.Fprintf(&b, "\tSmooth:            %s,\n", f(p.Smooth))
	fmt.Fprintf(&b, "\tGroupedComputeEff: %s,\n", f(p.GroupedComputeEff))
	fmt.Fprintf(&b, "\tGroupedStreamEff:  %s,\n", f(p.GroupedStreamEff))
	fmt.Fprintf(&b, "\tEltwiseEff:        %s,\n", f(p.EltwiseEff))
	fmt.Fprintf(&b, "\tCopyEff:           %s,\n", f(p.CopyEff))
	fmt.Fprintf(&b, "\tEltwiseFloorUS:    %s,\n", f(p.EltwiseFloorUS))
	fmt.Fprintf(&b, "\tFlashMemEff:       %s,\n", f(p.FlashMemEff))
	fmt.Fprintf(&b, "\tFlashComputeEff:   %s,\n", f(p.FlashComputeEff))
	fmt.Fprintf(&b, "\tHostUS:            %s,\n", m(p.HostUS))
	fmt.Fprintf(&b, "\tHostLagUS:         %s,\n", f(p.HostLagUS))
	fmt.Fprintf(&b, "\tHostOverlap:       %s,\n", f(p.HostOverlap))
	fmt.Fprintf(&b, "}")
	return b.String()
}

func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// valid reports parameters outside their physical range.
func (p Params) valid() error {
	frac := func(name string, v float64) error {
		if !(v > 0 && v <= 1.05) || math.IsNaN(v) {
			return fmt.Errorf("cost: %s = %g is not a fraction in (0, 1]", name, v)
		}
		return nil
	}
	for k, v := range p.ComputeEff {
		if err := frac("ComputeEff."+k, v); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		n string
		v float64
	}{{"StreamEff", p.StreamEff}, {"GroupedComputeEff", p.GroupedComputeEff},
		{"GroupedStreamEff", p.GroupedStreamEff}, {"EltwiseEff", p.EltwiseEff}, {"CopyEff", p.CopyEff},
		{"FlashMemEff", p.FlashMemEff}, {"FlashComputeEff", p.FlashComputeEff}} {
		if err := frac(c.n, c.v); err != nil {
			return err
		}
	}
	if p.Smooth < 1 || p.HostOverlap < 1 || p.TileKnee <= 0 || p.GEMMFloorUS < 0 || p.EltwiseFloorUS < 0 || p.HostLagUS < 0 {
		return fmt.Errorf("cost: Smooth, TileKnee or a floor out of range")
	}
	return nil
}
