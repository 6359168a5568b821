// gemv_fibers_main.cc: TestGemvDeviceCodeOnHostFibers' cases (follows fp4_fibers.h, the
// headers and tensorcore.cu's device branch): fast_gemv_f32, _bf16 and _fp8 on host
// fibers (a warp two weight rows, the lanes' sums folded by __shfl_xor_sync) against the
// emulated branch's order played out here (each lane's fast_gemv_lane, then the fold in
// arrays), every output bit for bit, and the values against a float64 dot of the widened
// weights and the halves' sums (within 1e-5 of the row's absolute sum).
#include <random>
#include <vector>

struct GemvCase { long M, N, K, G; int fmt; bool xexact, bf16out; long blocks; };

static int gemv_case(const GemvCase& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const long Kp = (c.K + 63) / 64 * 64, P = Kp / 2, rows = c.M * c.G;
  // the weight in format fmt: float32, bf16, or FP8 codes and UE8M0 scales (2: a 32 × 32
  // block, 3: 32 values of a row, 5: a 128 × 128 block)
  std::vector<float> wf(c.N * c.K);
  std::vector<unsigned short> wh(c.N * c.K);
  std::vector<unsigned char> codes(c.N * c.K), scales;
  Weight w{};
  w.fmt = c.fmt, w.cols = c.K;
  if (c.fmt == 0) {
    for (auto& v : wf) v = nd(rng) * 0.05f;
    w.p = wf.data();
  } else if (c.fmt == 1) {
    for (auto& v : wh) v = (unsigned short)(__float_as_uint(q_bf16(nd(rng) * 0.05f)) >> 16);
    w.p = wh.data();
  } else {
    for (auto& v : codes) v = (unsigned char)(rng() % 256), v = (v & 0x7f) == 0x7f ? 0 : v;
    long ns = c.fmt == 2 ? ((c.N + 31) / 32) * ((c.K + 31) / 32) : c.fmt == 5 ? ((c.N + 127) / 128) * ((c.K + 127) / 128) : c.N * ((c.K + 31) / 32);
    scales.resize(ns);
    for (auto& v : scales) v = (unsigned char)(116 + rng() % 10);
    w.p = codes.data(), w.s = scales.data();
  }
  // the activations' halves (hi bf16, lo its residual; zero lo where xexact)
  std::vector<u32> xs(2 * rows * P, 0);
  for (long r = 0; r < rows; r++)
    for (long k = 0; k < c.K; k += 2) {
      float v0 = nd(rng) * (rng() % 8 == 0 ? 1e3f : 1.0f), v1 = k + 1 < c.K ? nd(rng) : 0.0f;
      if (c.xexact) v0 = q_bf16(v0), v1 = q_bf16(v1);
      i64 err = 0;
      fast_pair(xs.data(), xs.data() + rows * P, r * P + k / 2, v0, v1, c.xexact, &err);
    }
  const long ldy = c.N + 3;
  std::vector<float> got(c.M * ldy, -7.0f), want(c.M * ldy, -7.0f);
  FastGemmArgs a{};
  a.xh = xs.data(), a.xl = xs.data() + rows * P, a.w = w, a.M = c.M, a.N = c.N, a.K = c.K, a.Kp = Kp, a.S = 1, a.ks = Kp;
  a.mtiles = 1, a.ldy = ldy, a.out_bf16 = c.bf16out, a.G = c.G, a.xexact = c.xexact;
  // the emulated branch's order
  a.y = want.data();
  for (long n0 = 0; n0 < c.N; n0 += FAST_GEMV_R) {
    static float acc[32][FAST_GEMV_R][FAST_GEMV_M], nx[32][FAST_GEMV_R][FAST_GEMV_M];
    for (int l = 0; l < 32; l++) {
      if (c.fmt == 0) fast_gemv_lane<0>(a, n0, l, acc[l]);
      else if (c.fmt == 1) fast_gemv_lane<1>(a, n0, l, acc[l]);
      else fast_gemv_lane<2>(a, n0, l, acc[l]);
    }
    for (int off = 16; off >= 1; off >>= 1) {
      for (int l = 0; l < 32; l++)
        for (int r = 0; r < FAST_GEMV_R; r++)
          for (int m = 0; m < FAST_GEMV_M; m++) nx[l][r][m] = acc[l][r][m] + acc[l ^ off][r][m];
      memcpy(acc, nx, sizeof acc);
    }
    fast_gemv_store(a, n0, acc[0]);
  }
  // the device branch
  a.y = got.data();
  long before = g_errors;
  fibers_launch(c.fmt == 0 ? fast_gemv_f32 : c.fmt == 1 ? fast_gemv_bf16 : fast_gemv_fp8, a, c.blocks);
  long diff = 0, far = 0;
  for (size_t i = 0; i < got.size(); i++)
    if (__float_as_uint(got[i]) != __float_as_uint(want[i])) {
      if (diff < 3) fprintf(stderr, "[%zu] %a, want %a\n", i, got[i], want[i]);
      diff++;
    }
  // the values: a float64 dot of the same operands
  for (long m = 0; m < c.M; m++)
    for (long n = 0; n < c.N; n++) {
      const long row = m * c.G + (c.G > 1 ? n / (c.N / c.G) : 0);
      double dot = 0, mag = 0;
      for (long k = 0; k < c.K; k++) {
        const u32 h = xs[row * P + k / 2], l = xs[rows * P + row * P + k / 2];
        const double x = (double)(k % 2 ? fast_hi(h) : fast_lo(h)) + (double)(k % 2 ? fast_hi(l) : fast_lo(l));
        dot += (double)wval(w, n, k) * x, mag += fabs((double)wval(w, n, k) * x);
      }
      const double v = got[m * ldy + n], tol = (c.bf16out ? 1.0 / 128 : 1e-5) * fmax(mag, fabs(dot));
      if (!(fabs(v - dot) <= tol)) {
        if (far < 3) fprintf(stderr, "y[%ld, %ld] %g, float64 dot %g\n", m, n, v, dot);
        far++;
      }
    }
  printf("gemv M %ld N %ld K %ld G %ld fmt %d xexact %d bf16 %d blocks %ld: %ld differ from the emulated order, %ld far from the dot, errors %ld\n",
         c.M, c.N, c.K, c.G, c.fmt, c.xexact, c.bf16out, c.blocks, diff, far, g_errors - before);
  return diff || far || g_errors != before;
}

int main() {
  int bad = 0;
  unsigned seed = 1;
  // every format; one to four rows; a reduction that is not a multiple of a warp's 512
  // values (lanes with fewer pieces) or of FAST_GEMV_D's steps; groups; bf16 outputs; an
  // odd N (a warp's second row past it; groups of an even N / G, as Go requires); fewer blocks than warps (the grid-stride loop)
  for (GemvCase c : {GemvCase{1, 64, 1024, 1, 5, false, false, 4}, GemvCase{2, 30, 4096, 1, 2, false, false, 2},
                     GemvCase{4, 34, 208, 1, 3, true, false, 9}, GemvCase{3, 40, 2064, 2, 5, true, true, 3},
                     GemvCase{1, 16, 512, 1, 1, false, false, 4}, GemvCase{4, 24, 336, 2, 1, false, true, 1},
                     GemvCase{1, 12, 1040, 1, 0, false, false, 2}, GemvCase{2, 9, 96, 1, 0, true, false, 3},
                     GemvCase{1, 7, 64, 1, 2, false, false, 1}})
    bad += gemv_case(c, seed++);
  if (bad) {
    printf("FAIL\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
