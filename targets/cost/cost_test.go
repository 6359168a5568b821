package cost

import (
	"math"
	"strings"
	"testing"
)

// toy is a Hopper-like model with round numbers, independent of any fit.
func toy() *Model {
	r := Rates{Device: "toy", TFLOPS: map[string]float64{"bf16": 1000, "fp8": 2000}, HBMTBps: 4,
		ComputeUnits: 100, ScaleUpTBps: 0.4, ScaleUpDomain: 8, ScaleOutGBps: 50}
	p := Params{
		ComputeEff: map[string]float64{"bf16": 0.8, "fp8": 0.7}, StreamEff: 0.8, TileKnee: 64,
		GEMMFloorUS: 4, Smooth: 3, GroupedComputeEff: 0.9, GroupedStreamEff: 0.7,
		EltwiseEff: 0.6, CopyEff: 0.85, EltwiseFloorUS: 2, FlashMemEff: 0.9, FlashComputeEff: 0.6,
		HostUS: map[string]float64{"gemm/bf16": 8, "default": 4}, HostLagUS: 1, HostOverlap: 4,
	}
	return NewModel("toy", "test", r, p, HopperDeepEP())
}

func predict(t *testing.T, m *Model, k Kernel) (float64, Breakdown) {
	t.Helper()
	us, b, err := m.Predict(k)
	if err != nil {
		t.Fatal(err)
	}
	return us, b
}

func TestSmoothMax(t *testing.T) {
	if got := smoothMax(3, 0, 2); got != 3 {
		t.Errorf("smoothMax(3,0) = %g", got)
	}
	if got := smoothMax(3, 4, 2); math.Abs(got-5) > 1e-12 {
		t.Errorf("smoothMax(3,4,p=2) = %g, want 5", got)
	}
	if got := smoothMax(3, 4, 200); math.Abs(got-4) > 1e-2 {
		t.Errorf("large p should approach max: %g", got)
	}
}

// More rows never take less time (every tiling's terms grow with M, and the model
// takes the best tiling).
func TestGEMMMonotoneInM(t *testing.T) {
	m := toy().WithLaunch(Device)
	prev := 0.0
	for M := 1; M <= 20000; M += 1 + M/7 {
		us, _ := predict(t, m, Kernel{Op: "gemm", DType: "bf16", M: M, N: 4096, K: 4096})
		if us < prev-1e-9 {
			t.Fatalf("M=%d: %.3f us < %.3f at smaller M", M, us, prev)
		}
		prev = us
	}
}

func TestBounds(t *testing.T) {
	m := toy()
	d := m.WithLaunch(Device)
	for _, c := range []struct {
		m    *Model
		k    Kernel
		want Bound
	}{
		{d, Kernel{Op: "gemm", DType: "bf16", M: 8192, N: 8192, K: 8192}, ComputeBound},
		{d, Kernel{Op: "gemm", DType: "bf16", M: 1, N: 16384, K: 16384}, MemoryBound},
		{d, Kernel{Op: "gemm", DType: "bf16", M: 1, N: 64, K: 64}, LatencyBound},
		{m, Kernel{Op: "gemm", DType: "bf16", M: 1, N: 64, K: 64}, HostBound},
		{d, Kernel{Op: "copy", DType: "bf16", M: 1 << 28}, MemoryBound},
	} {
		_, b := predict(t, c.m, c.k)
		if b.Bound != c.want {
			t.Errorf("%s (%s): bound %s, want %s (%s)", c.k, c.m.Launch(), b.Bound, c.want, b)
		}
	}
}

// A big GEMM runs near the rate it was given; FP8 is faster than BF16.
func TestRooflineRates(t *testing.T) {
	m := toy().WithLaunch(Device)
	k := Kernel{Op: "gemm", DType: "bf16", M: 16384, N: 8192, K: 8192}
	us, b := predict(t, m, k)
	tflops := b.FLOPs / us / 1e6
	if tflops > 1000*0.8*1.001 || tflops < 1000*0.8*0.9 {
		t.Errorf("big bf16 GEMM at %.0f TFLOPS, want a little under 800", tflops)
	}
	k.DType = "fp8e4m3"
	us8, _ := predict(t, m, k)
	if !(us8 < 0.7*us) {
		t.Errorf("fp8 %.1f us vs bf16 %.1f us", us8, us)
	}
	// A big copy runs at CopyEff of HBM bandwidth.
	cus, cb := predict(t, m, Kernel{Op: "copy", DType: "bf16", M: 1 << 30})
	if bw := cb.Bytes / cus / 1e6; math.Abs(bw-4*0.85) > 0.01 {
		t.Errorf("copy at %.2f TB/s, want 3.40", bw)
	}
}

func TestEagerAddsHost(t *testing.T) {
	k := Kernel{Op: "gemm", DType: "bf16", M: 1, N: 512, K: 512}
	e, b := predict(t, toy(), k)
	d, _ := predict(t, toy().WithLaunch(Device), k)
	if !(e > d) || b.HostUS != 8 || b.Launch != Eager {
		t.Errorf("eager %.2f device %.2f host %.2f", e, d, b.HostUS)
	}
}

func TestErrors(t *testing.T) {
	m := toy()
	for _, k := range []Kernel{
		{Op: "conv", DType: "bf16", M: 1, N: 1, K: 1},
		{Op: "gemm", DType: "int3", M: 1, N: 1, K: 1},
		{Op: "gemm", DType: "fp4", M: 1, N: 1, K: 1}, // toy has no fp4 rate
		{Op: "gemm", DType: "bf16", M: 0, N: 1, K: 1},
	} {
		if _, _, err := m.Predict(k); err == nil || !strings.Contains(err.Error(), "cost model toy") {
			t.Errorf("%s: err %v", k, err)
		}
	}
}

// HopperDeepEP solves the communication model for DeepEP's published H800 numbers: on
// H800 rates it must give them back, and it should land near the README's other
// low-latency points, which it never saw.
func TestDeepEPAnchors(t *testing.T) {
	h800 := Rates{Device: "H800", TFLOPS: map[string]float64{"bf16": 989}, HBMTBps: 3.35, ComputeUnits: 132,
		ScaleUpTBps: 0.4, ScaleUpDomain: 8, ScaleOutGBps: 50}
	m := NewModel("h800", "test", h800, toy().P, HopperDeepEP())
	dispatch := int64(128 * 8 * (7168 + 7168/128*4))
	combine := int64(128 * 8 * 7168 * 2)
	check := func(kind string, bytes int64, ranks int, want, tol float64) {
		t.Helper()
		us, b, err := m.PredictComm(kind, bytes, ranks, "low_latency")
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(us-want)/want > tol {
			t.Errorf("LL %s EP%d: %.1f us, want %.0f ±%.0f%% (%s)", kind, ranks, us, want, 100*tol, b)
		}
	}
	check("dispatch", dispatch, 64, 173, 1e-9)
	check("combine", combine, 64, 314, 1e-9)
	check("dispatch", dispatch, 8, 77, 1e-9)
	for _, p := range []struct {
		kind  string
		ranks int
		us    float64
	}{{"dispatch", 16, 118}, {"dispatch", 32, 155}, {"dispatch", 128, 192}, {"dispatch", 256, 194},
		{"combine", 8, 114}, {"combine", 16, 195}, {"combine", 32, 273}, {"combine", 128, 369}, {"combine", 256, 360}} {
		b := dispatch
		if p.kind == "combine" {
			b = combine
		}
		check(p.kind, b, p.ranks, p.us, 0.25)
	}
	// Normal mode, intranode: a big message moves at ~153 GB/s.
	big := int64(1 << 30)
	us, _, err := m.PredictComm("dispatch", big, 8, "normal")
	if err != nil {
		t.Fatal(err)
	}
	if gbps := float64(big) * 7 / 8 / us / 1e3; math.Abs(gbps-153) > 2 {
		t.Errorf("normal intranode dispatch at %.0f GB/s, want 153", gbps)
	}
	if _, _, err := m.PredictComm("dispatch", 1, 8, "fast"); err == nil {
		t.Error("unknown mode accepted")
	}
	if _, _, err := m.PredictComm("broadcast", 1, 8, ""); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, b, _ := m.PredictComm("all_reduce", 1<<20, 8, ""); !strings.Contains(b.Model, "h800") {
		t.Errorf("comm prediction not labelled: %q", b.Model)
	}
}

func TestReadTable(t *testing.T) {
	good := "op,dtype,m,n,k,groups,extra,note\ngemm,bf16,1,1024,4096,1,q_a,x\ncopy,bf16,8,1,1,1,\"bytes=32\",y\n"
	tb, err := ReadTable("in.csv", strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Kernels) != 2 || tb.HasMeasured() || tb.Lines[1] != 3 {
		t.Errorf("parsed %+v lines %v", tb.Kernels, tb.Lines)
	}
	for _, c := range []struct{ in, want string }{
		{"op,dtype,m,n,k,groups\n", "in.csv:1: missing column \"extra\""},
		{"op,dtype,m,n,k,groups,extra\ngemm,bf16,x,1,1,1,\n", "in.csv:2: bad m \"x\""},
		{"op,dtype,m,n,k,groups,extra\ngemm,bf16,1,1,1,1,\ngemm,bf16,1,1,1\n", "in.csv:3: 5 fields, header has 7"},
		{"op,dtype,m,n,k,groups,extra,median_us\ngemm,bf16,1,1,1,1,,-3\n", "in.csv:2: bad median_us"},
		{"", "in.csv:1: empty file"},
	} {
		_, err := ReadTable("in.csv", strings.NewReader(c.in))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: err %v, want prefix %q", c.in, err, c.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	a := Summarize([]float64{0.5, 0.1, 0.2, 0.3, 0.4, 0.05, 0.15, 0.25, 0.35, 0.45})
	if a.N != 10 || math.Abs(a.Median-0.275) > 1e-12 || a.P90 != 0.45 || a.Max != 0.5 {
		t.Errorf("%+v", a)
	}
	if e := RelErrors([]float64{2, 1}, []float64{1, math.NaN()}); len(e) != 1 || e[0] != 1 {
		t.Errorf("RelErrors %v", e)
	}
}

// Fit recovers parameters from data a model generated.
func TestFitRecoversParameters(t *testing.T) {
	truth := toy()
	tb := &Table{Name: "synthetic"}
	for _, M := range []int{1, 16, 256, 1024, 4096, 16384} {
		for _, nk := range [][2]int{{1024, 4096}, {4096, 8192}, {512, 4096}} {
			k := Kernel{Op: "gemm", DType: "bf16", M: M, N: nk[0], K: nk[1], Groups: 1}
			us, _, _ := truth.Predict(k)
			tb.Kernels = append(tb.Kernels, k)
			tb.Meas = append(tb.Meas, us)
		}
	}
	p := truth.P.Clone()
	p.ComputeEff["bf16"] = 0.6
	p.StreamEff = 0.6
	p.HostUS["gemm/bf16"] = 12
	got, _, err := Fit(truth.WithParams(p), []FitData{{T: tb, Launch: Eager}},
		FitOptions{Free: []string{"ComputeEff.bf16", "StreamEff", "HostUS.gemm/bf16"}, Prior: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"ComputeEff.bf16": 0.8, "StreamEff": 0.8, "HostUS.gemm/bf16": 8} {
		for _, q := range got.P.Free() {
			if q.Name == name && math.Abs(q.Value-want)/want > 0.02 {
				t.Errorf("%s: fitted %.4g, true %.4g", name, q.Value, want)
			}
		}
	}
}

func TestClassCalibration(t *testing.T) {
	m := NewModel("t", "v", Rates{Device: "d", TFLOPS: map[string]float64{"bf16": 1000}, HBMTBps: 4, ComputeUnits: 100},
		Params{ComputeEff: map[string]float64{"bf16": 0.8}, StreamEff: 0.8, TileKnee: 64, GEMMFloorUS: 5, Smooth: 3,
			GroupedComputeEff: 0.9, GroupedStreamEff: 0.6, EltwiseEff: 0.6, CopyEff: 0.8, EltwiseFloorUS: 2,
			FlashMemEff: 0.9, FlashComputeEff: 0.6, HostUS: map[string]float64{"default": 4}, HostLagUS: 1, HostOverlap: 3},
		CommParams{}).WithLaunch(Device)
	k := Kernel{Op: "gemm", DType: "bf16", M: 64, N: 4096, K: 4096, Class: "deepgemm.bf16_gemm_nt"}
	plain, pb, err := m.Predict(k)
	if err != nil {
		t.Fatal(err)
	}
	noClass := k
	noClass.Class = ""
	if us, _, _ := m.Predict(noClass); us != plain {
		t.Errorf("without a calibration the class changes the price: %g vs %g", us, plain)
	}
	cal := ClassCal{FloorUS: 10, GBps: 500, TFLOPS: 20}
	cm := m.WithClasses("test fit", map[string]ClassCal{"deepgemm.bf16_gemm_nt": cal})
	us, b, err := cm.Predict(k)
	if err != nil {
		t.Fatal(err)
	}
	want := 10 + pb.Bytes/(500*1e3) + pb.FLOPs/(20*1e6)
	if math.Abs(us-want) > 1e-9*want || b.LatencyUS != 10 || b.Bytes != pb.Bytes || b.FLOPs != pb.FLOPs {
		t.Errorf("calibrated: %g us (%+v), want %g", us, b, want)
	}
	if !strings.Contains(cm.ID(), "test fit") {
		t.Errorf("ID %q does not name the class calibration", cm.ID())
	}
	other := k
	other.Class = "deepgemm.fp8_gemm_nt"
	if us, _, _ := cm.Predict(other); us != plain {
		t.Errorf("a class outside the table: %g, want the model's %g", us, plain)
	}
	scan := k
	scan.Scan = 1e6
	sm := m.WithClasses("scan", map[string]ClassCal{"deepgemm.bf16_gemm_nt": {FloorUS: 1, ScanNS: 2}})
	if us, _, _ := sm.Predict(scan); math.Abs(us-(1+2e6/1e3)) > 1e-9 {
		t.Errorf("a scan of 1e6 entries at 2 ns: %g us, want 2001", us)
	}
	if us, _, _ := m.Predict(scan); us != plain {
		t.Errorf("the roofline charges for the scan: %g, want %g", us, plain)
	}
	heap := scan
	heap.Heap = 2000
	hm := m.WithClasses("heap", map[string]ClassCal{"deepgemm.bf16_gemm_nt": {FloorUS: 1, ScanNS: 2, HeapNS: 500}})
	hus, b, _ := hm.Predict(heap)
	if math.Abs(hus-(1+2e6/1e3+2000*500/1e3)) > 1e-9 || math.Abs(b.LatencyUS-hus) > 1e-9 {
		t.Errorf("a scan of 1e6 entries at 2 ns and 2,000 heap replacements at 500 ns: %g us (latency %g), want 3001", hus, b.LatencyUS)
	}
	if us, _, _ := m.Predict(heap); us != plain {
		t.Errorf("the roofline charges for the heap walk: %g, want %g", us, plain)
	}
	if got := (ClassCal{FloorUS: 3}).US(1e9, 1e12, 1e9, 1e9); got != 3 {
		t.Errorf("zero rates leave their terms out: %g", got)
	}
}
