package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWidenByIntegerOps: the fast mode widens FP8 e4m3 and FP4 e2m1 codes to bf16 by
// placing their bits at bf16's and multiplying by a power of two (tensorcore.cu
// e4m3_widen16, tensorcore_fp4.cu fp4_pair/fp4_m1/fp4_m2). For every code and every
// UE8M0 scale byte, the result must be the code's value times the scale (prelude.h
// e4m3_f32, e2m1_f32, ue8m0_f32) rounded to bf16, bit for bit (NaN for the NaN scale;
// the e4m3 NaN codes are excluded: weights never hold them). The program runs the
// kernels' own source on the host, as the emulated device does.
func TestWidenByIntegerOps(t *testing.T) {
	h, err := newHostCompiler()
	if err != nil {
		t.Fatal(err)
	}
	prog := Source() + `
#include <cstdio>
static int bad = 0;
static void check(const char* what, int code, int u, u32 got, float want) {
  u32 w = bits_f32(q_bf16(want)) >> 16;
  bool nan = want != want;
  if (nan ? (got & 0x7fff) <= 0x7f80 : got != w) {
    if (bad++ < 10) printf("%s code %d scale %d: got %04x want %04x\n", what, code, u, got, w);
  }
}
int main() {
  for (int u = 0; u < 256; u++) {
    for (int c = 0; c < 256; c++) {
      if ((c & 0x7f) == 0x7f) continue;
      // code c at value position j = c % 16 of a 16-code group, the others zero
      int j = c % 16;
      u32 word[4] = {0, 0, 0, 0};
      word[j / 4] = (u32)c << (8 * (j % 4));
      uint4 q = {word[0], word[1], word[2], word[3]};
      u32 hi[8];
      e4m3_widen16(q, (u32)u, hi);
      u32 got = (j % 2 == 0 ? hi[j / 2] : hi[j / 2] >> 16) & 0xffff;
      check("e4m3", c, u, got, e4m3_f32((unsigned char)c) * ue8m0_f32((unsigned char)u));
    }
    for (int c = 0; c < 16; c++) {
      for (int j = 0; j < 8; j++) {
        u32 q = (u32)c << (4 * j);
        u32 p = bf2_mul(bf2_mul(fp4_pair(q, j % 4), fp4_m1(u)), fp4_m2(u));
        u32 got = (j < 4 ? p : p >> 16) & 0xffff;
        check("e2m1", c, u, got, e2m1_f32((unsigned char)c) * ue8m0_f32((unsigned char)u));
      }
    }
  }
  printf("%d mismatches\n", bad);
  return bad != 0;
}
`
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "widen.cc"), filepath.Join(dir, "widen")
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(h.cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-fno-fast-math", "-w", "-DDI_EMULATE", src, "-o", bin).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, firstLines(string(out), 20))
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0 mismatches") {
		t.Fatalf("%v\n%s", err, out)
	}
}
