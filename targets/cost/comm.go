package cost

import (
	"fmt"
	"strings"
)

// Communication: a fixed cost plus bytes over link bandwidth, split by where the peers
// are. With R ranks and a scale-up domain of D devices (NVLink node, NVL72, SuperPoD), a
// share f = 1 − D/R of an all-to-all's traffic leaves the domain over the RDMA NIC and
// the rest rides the scale-up links:
//
//	t = fixed + bytes·(1−f) / (scaleUp·effUp) + bytes·f / (NIC·effOut)
//
// with scaleUp the one-direction scale-up bandwidth (half the bidirectional figure
// vendors quote). Mode picks the DeepEP kernel family: low_latency (decode: IBGDA
// sends, no CPU sync) or normal (prefill: NVLink forwarding + RDMA, higher fixed cost).
// Ring collectives (all_reduce, all_gather, reduce_scatter) pay a hop latency per step
// and the ring's bus bytes over the slowest link in the ring.

// CommParams are the link efficiencies and fixed costs.
type CommParams struct {
	LLFixedUS     float64 // DeepEP low-latency dispatch/combine fixed cost
	LLScaleUpEff  float64 // low-latency kernels: fraction of one-direction scale-up bandwidth
	NormalFixedUS float64 // DeepEP normal-mode fixed cost (layout, notify, CPU wait for counts)
	ScaleUpEff    float64 // normal mode and collectives: fraction of one-direction scale-up bandwidth
	ScaleOutEff   float64 // fraction of the NIC's bandwidth
	HopUS         float64 // per-step latency of a ring collective
	Source        string  // where these come from
}

// CommModes lists PredictComm's modes.
var CommModes = []string{"low_latency", "normal"}

// CommKinds lists PredictComm's kinds.
var CommKinds = []string{"dispatch", "combine", "all_to_all", "all_reduce", "all_gather", "reduce_scatter"}

// PredictComm predicts one collective: kind (dispatch, combine, all_to_all, all_reduce,
// all_gather, reduce_scatter), bytes each rank sends (for dispatch: tokens·topk·hidden
// bytes as the library sends them; for ring collectives: each rank's buffer), the number
// of ranks, and mode (low_latency or normal; ring collectives ignore it).
func (m *Model) PredictComm(kind string, bytes int64, ranks int, mode string) (float64, Breakdown, error) {
	b, err := m.comm(kind, float64(bytes), ranks, mode)
	if err != nil {
		return 0, Breakdown{}, fmt.Errorf("%s: %s of %d bytes over %d ranks: %w", m.ID(), kind, bytes, ranks, err)
	}
	b.Model = m.ID()
	b.Launch = Device
	b.Bytes = float64(bytes)
	b.US = b.DeviceUS
	return b.US, b, nil
}

func (m *Model) comm(kind string, bytes float64, ranks int, mode string) (Breakdown, error) {
	r, c := m.Rates, m.Comm
	if ranks < 1 || bytes < 0 {
		return Breakdown{}, fmt.Errorf("need ranks ≥ 1 and bytes ≥ 0")
	}
	if r.ScaleUpTBps <= 0 {
		return Breakdown{}, fmt.Errorf("%s has no published scale-up bandwidth", r.Device)
	}
	up := r.ScaleUpTBps * 1e12 / 2 // one direction
	out := r.ScaleOutGBps * 1e9
	dom := max(r.ScaleUpDomain, 1)
	remote := 0.0
	if ranks > dom {
		remote = 1 - float64(dom)/float64(ranks)
	}
	if ranks == 1 {
		return Breakdown{Bound: LatencyBound, Plan: "one rank: nothing to send"}, nil
	}
	if remote > 0 && out <= 0 {
		return Breakdown{}, fmt.Errorf("%d ranks exceed the scale-up domain of %d and %s has no NIC bandwidth", ranks, dom, r.Device)
	}
	var b Breakdown
	switch kind {
	case "dispatch", "combine", "all_to_all":
		fixed, effUp := c.NormalFixedUS, c.ScaleUpEff
		switch mode {
		case "low_latency", "ll":
			fixed, effUp = c.LLFixedUS, c.LLScaleUpEff
		case "normal", "":
		default:
			return Breakdown{}, fmt.Errorf("unknown mode %q (known: %s)", mode, strings.Join(CommModes, ", "))
		}
		// Traffic to itself never leaves the device.
		self := 1 / float64(ranks)
		local := (1 - remote - self) * bytes / (up * effUp) * 1e6
		far := 0.0
		if remote > 0 {
			far = remote * bytes / (out * c.ScaleOutEff) * 1e6
		}
		b = Breakdown{LatencyUS: fixed, MemoryUS: local + far, DeviceUS: fixed + local + far,
			Plan: fmt.Sprintf("DeepEP %s, %.0f%% of bytes leave the %d-device scale-up domain", modeName(mode), 100*remote, dom)}
	case "all_reduce", "all_gather", "reduce_scatter":
		n := float64(ranks)
		factor := (n - 1) / n
		steps := n - 1
		if kind == "all_reduce" {
			factor, steps = 2*(n-1)/n, 2*(n-1)
		}
		bw := up * c.ScaleUpEff
		if remote > 0 {
			bw = min(bw, out*c.ScaleOutEff)
		}
		t := factor * bytes / bw * 1e6
		b = Breakdown{LatencyUS: steps * c.HopUS, MemoryUS: t, DeviceUS: steps*c.HopUS + t,
			Plan: fmt.Sprintf("ring over %d ranks", ranks)}
	default:
		return Breakdown{}, fmt.Errorf("unknown kind %q (known: %s)", kind, strings.Join(CommKinds, ", "))
	}
	b.Bound = LinkBound
	if b.LatencyUS > b.MemoryUS {
		b.Bound = LatencyBound
	}
	return b, nil
}

func modeName(mode string) string {
	if mode == "low_latency" || mode == "ll" {
		return "low-latency"
	}
	return "normal"
}

// DeepEP's published numbers on H800 (NVLink ~160 GB/s usable of 200 one-direction,
// CX7 400 Gb/s NIC of ~50 GB/s), 128 tokens · top-8 · hidden 7168, FP8 dispatch (7168 B
// + 56 fp32 scales per token copy) and BF16 combine. The EP64 pair is in MODEL.md §3;
// EP8 is the first row of the same README table.
const (
	anchorLLDispatchEP64US = 173.0
	anchorLLCombineEP64US  = 314.0
	anchorLLDispatchEP8US  = 77.0
	anchorNormalNVLinkGBps = 153.0 // normal mode, intranode EP8
	anchorNormalRDMAGBps   = 51.0  // normal mode, internode EP64
	anchorH800UpGBps       = 200.0 // H800 NVLink, one direction
	anchorH800NICGBps      = 50.0  // CX7 400 Gb/s
	anchorTokens           = 128 * 8
	anchorHidden           = 7168
)

// HopperDeepEP derives CommParams from DeepEP's H800 anchors, solving the model above
// for its unknowns: the two EP64 low-latency points (dispatch and combine move different
// bytes over the same links) give the fixed cost and the per-byte cost; the EP8 point
// (all traffic on NVLink) gives the low-latency NVLink efficiency; the normal-mode
// bandwidths give the normal-mode efficiencies directly. The normal-mode fixed cost and
// the ring hop latency have no anchor: they are stated assumptions.
func HopperDeepEP() CommParams {
	dispatchB := float64(anchorTokens) * (anchorHidden + anchorHidden/128*4)
	combineB := float64(anchorTokens) * anchorHidden * 2
	perByte := (anchorLLCombineEP64US - anchorLLDispatchEP64US) / (combineB - dispatchB) // us/B at EP64
	fixed := anchorLLDispatchEP64US - dispatchB*perByte
	// EP8: 7/8 of the bytes cross NVLink (1/8 stay on the device).
	upLL := (7.0 / 8) * dispatchB / ((anchorLLDispatchEP8US - fixed) * 1e-6) / (anchorH800UpGBps * 1e9)
	// EP64: remote share 7/8, local (other 7 GPUs of the node) 7/64.
	localUS := (7.0 / 64) * dispatchB / (upLL * anchorH800UpGBps * 1e9) * 1e6
	farUS := anchorLLDispatchEP64US - fixed - localUS
	outEff := (7.0 / 8) * dispatchB / (farUS * 1e-6) / (anchorH800NICGBps * 1e9)
	return CommParams{
		LLFixedUS:     fixed,
		LLScaleUpEff:  upLL,
		NormalFixedUS: 50, // assumption: no anchor for the normal kernels' fixed cost
		ScaleUpEff:    anchorNormalNVLinkGBps / anchorH800UpGBps,
		ScaleOutEff:   min(outEff, anchorNormalRDMAGBps/anchorH800NICGBps, 1),
		HopUS:         5, // assumption: NCCL ring step latency on NVLink, order of magnitude
		Source:        "DeepEP README (H800): LL EP8 77 us, EP64 173/314 us; normal 153 GB/s NVLink, 51 GB/s RDMA",
	}
}
