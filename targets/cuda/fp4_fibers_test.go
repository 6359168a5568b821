package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFP4DeviceCodeOnHostFibers runs the device branch of tensorcore_fp4.cu (the code
// NVRTC compiles, which the emulated device never runs) on the host: the sources as
// compiled for the device, with their inline PTX replaced by testdata/fp4_fibers.h's
// stand-ins (a launch block's threads as fibers, the warp's mma and __any_sync and the
// block's __syncthreads as barriers, cp.async copies that clobber their destination when
// issued and land only when a wait_group requires them, each copy's alignment and source
// range checked), and testdata/fp4_fibers_main.cc's cases (tails of N and K, unaligned
// scale rows, one to four slices, more than 16 slots an expert). The pipelined tiles,
// the _reg tiles and the emulated loop (fp4_tiles, here fp4_ref) must write the same
// values bit for bit, the stand-in mma summing in the emulated loop's order. What only
// the GPU can check: that NVRTC accepts the PTX, the real mma's order, registers, speed.
func TestFP4DeviceCodeOnHostFibers(t *testing.T) {
	h, err := newHostCompiler()
	if err != nil {
		t.Fatal(err)
	}
	src, err := fp4FiberSource()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cc, bin := filepath.Join(dir, "fp4_fibers.cc"), filepath.Join(dir, "fp4_fibers")
	if err := os.WriteFile(cc, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(h.cxx, "-std=c++17", "-O1", "-w", "-ffp-contract=off", "-fno-fast-math", "-UDI_EMULATE", cc, "-o", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("compiling the device branch with the fiber stand-ins: %v\n%s", err, firstLines(string(out), 30))
	}
	out, err = exec.Command(bin).CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "PASS") {
		t.Fatalf("the device branch on host fibers: %v", err)
	}
}

// fp4FiberSource is the harness's translation unit: fp4_fibers.h, the headers,
// tensorcore.cu and tensorcore_fp4.cu with their inline PTX replaced, the emulated
// branch's fp4_tiles as fp4_ref, then fp4_fibers_main.cc.
func fp4FiberSource() (string, error) {
	pre, err := os.ReadFile("testdata/fp4_fibers.h")
	if err != nil {
		return "", err
	}
	main, err := os.ReadFile("testdata/fp4_fibers_main.cc")
	if err != nil {
		return "", err
	}
	head, _ := kernelFiles()
	var bad []string
	rep := func(s, old, new string) string {
		if strings.Count(s, old) != 1 {
			bad = append(bad, old)
		}
		return strings.Replace(s, old, new, 1)
	}
	tc := cuFile("tensorcore.cu")
	tc = rep(tc, `asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));`,
		`d = (bits_f32(q_bf16(lo)) >> 16) | (bits_f32(q_bf16(hi)) & 0xffff0000u);`)
	tc = rep(tc, `asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));`,
		`d = fast_rn(fast_lo(a) * fast_lo(b), fast_hi(a) * fast_hi(b));`)
	mma := regexp.MustCompile(`(?s)asm volatile\(\s*"mma\.sync.*?"\{%0,%1,%2,%3\};"\s*:[^;]*;`)
	if n := len(mma.FindAllString(tc, -1)); n != 1 {
		bad = append(bad, "fast_mma's asm")
	}
	tc = mma.ReplaceAllLiteralString(tc, "harness_mma(c, a0, a1, a2, a3, b0, b1);")
	fp4 := cuFile("tensorcore_fp4.cu")
	fp4 = rep(fp4, `asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));`, `r = harness_smem(p);`)
	fp4 = rep(fp4, `asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(in ? 16 : 0) : "memory");`,
		`harness_cp(dst, src, 16, in ? 16 : 0);`)
	fp4 = rep(fp4, `asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(in ? 4 : 0) : "memory");`,
		`harness_cp(dst, src, 4, in ? 4 : 0);`)
	fp4 = rep(fp4, `asm volatile("cp.async.commit_group;" ::: "memory");`, `harness_commit();`)
	fp4 = rep(fp4, `asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");`, `harness_wait(N);`)
	for _, l := range strings.Split(tc+fp4, "\n") {
		if code, _, _ := strings.Cut(l, "//"); strings.Contains(code, "asm") {
			bad = append(bad, "inline PTX left: "+strings.TrimSpace(l))
		}
	}
	ref := regexp.MustCompile(`(?s)#ifdef DI_EMULATE\n(template <int NW>\nDEVM void fp4_tiles\(const FastMoEArgs& a, i64 blocks\) \{.*?\n\})\n#else`).FindStringSubmatch(fp4)
	if ref == nil {
		bad = append(bad, "the emulated fp4_tiles")
		ref = []string{"", ""}
	}
	if len(bad) > 0 {
		return "", &harnessError{bad}
	}
	return string(pre) + head + tc + fp4 + "\n" + strings.Replace(ref[1], "fp4_tiles(", "fp4_ref(", 1) + "\n" + string(main), nil
}

// harnessError lists the sources' pieces the harness expected and did not find (the
// kernels changed: update fp4FiberSource with them).
type harnessError struct{ missing []string }

func (e *harnessError) Error() string {
	return "fp4 fiber harness: not found exactly once in the kernel sources: " + strings.Join(e.missing, "; ")
}
