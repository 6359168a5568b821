// gemv_fibers_main.cc: TestGemvDeviceCodeOnHostFibers' cases (follows fp4_fibers.h, the
// headers and tensorcore.cu's device branch): fast_gemv_* on host fibers (four warps a
// launch block, one to four a pair of weight rows, the lanes' sums folded by
// __shfl_xor_sync, the slices' through shared memory) against the emulated branch's
// order played out here (each lane's fast_gemv_lane, the folds in arrays, the slices
// added in order), every output bit for bit, and the values against a float64 dot of the
// widened weights and the activations (within 1e-5 of the dot's absolute sum).
#include <random>
#include <vector>

struct GemvCase { long M, N, K, G; int fmt; bool xq, bf16out, picked; long blocks; };

typedef float Sums[FAST_GEMV_R][FAST_GEMV_M];

template <int WF, bool XQ>
static void reference(const FastGemvArgs& a) {
  const int KS = fast_gemv_ks(a.N);
  for (long n0 = 0; n0 < a.N; n0 += FAST_GEMV_R) {
    Sums t;
    for (int s = 0; s < KS; s++) {
      static Sums acc[32], nx[32];
      for (int l = 0; l < 32; l++) fast_gemv_lane<WF, XQ>(a, n0, s, KS, l, acc[l]);
      for (int off = 16; off >= 1; off >>= 1) {
        for (int l = 0; l < 32; l++)
          for (int r = 0; r < FAST_GEMV_R; r++)
            for (int m = 0; m < FAST_GEMV_M; m++) nx[l][r][m] = acc[l][r][m] + acc[l ^ off][r][m];
        memcpy(acc, nx, sizeof acc);
      }
      for (int r = 0; r < FAST_GEMV_R; r++)
        for (int m = 0; m < FAST_GEMV_M; m++) t[r][m] = s == 0 ? acc[0][r][m] : t[r][m] + acc[0][r][m];
    }
    fast_gemv_store(a, n0, t);
  }
}

// both: the emulated order into want, the device code into got, and the staged kernel
// (fast_gemv_f32s, _bf16s, _fp8s and their _q) into staged on `sblocks` blocks, and
// for one FP8 row the forms written for one row (fast_gemv1_fp8, fast_gemv1b_fp8,
// fast_gemv1p_fp8 and their _q) into one, oneb and onep
template <bool XQ>
static void both(const FastGemvArgs& a, int fmt, long blocks, long sblocks, std::vector<float>& want, std::vector<float>& got, std::vector<float>& staged,
                 std::vector<float>& one, std::vector<float>& oneb, std::vector<float>& onep) {
  FastGemvArgs b = a;
  b.y = want.data();
  if (fmt == 0) reference<0, XQ>(b);
  else if (fmt == 1) reference<1, XQ>(b);
  else reference<2, XQ>(b);
  b.y = got.data();
  if (fmt == 0) fibers_launch(XQ ? fast_gemv_f32_q : fast_gemv_f32, b, blocks);
  else if (fmt == 1) fibers_launch(XQ ? fast_gemv_bf16_q : fast_gemv_bf16, b, blocks);
  else fibers_launch(XQ ? fast_gemv_fp8_q : fast_gemv_fp8, b, blocks);
  b.y = staged.data();
  if (fmt == 0) fibers_launch(XQ ? fast_gemv_f32s_q : fast_gemv_f32s, b, sblocks);
  else if (fmt == 1) fibers_launch(XQ ? fast_gemv_bf16s_q : fast_gemv_bf16s, b, sblocks);
  else fibers_launch(XQ ? fast_gemv_fp8s_q : fast_gemv_fp8s, b, sblocks);
  if (fmt >= 2 && a.M == 1) {
    b.y = one.data();
    fibers_launch(XQ ? fast_gemv1_fp8_q : fast_gemv1_fp8, b, blocks);
    b.y = oneb.data();
    fibers_launch(XQ ? fast_gemv1b_fp8_q : fast_gemv1b_fp8, b, sblocks);
    b.y = onep.data();
    fibers_launch(XQ ? fast_gemv1p_fp8_q : fast_gemv1p_fp8, b, blocks);
  } else {
    one = want, oneb = want, onep = want;
  }
}

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
  g_valid.clear();  // (what the staged kernel's cp.async may read)
  g_valid.push_back({(const char*)codes.data(), (const char*)(codes.data() + codes.size())});
  g_valid.push_back({(const char*)wf.data(), (const char*)(wf.data() + wf.size())});
  g_valid.push_back({(const char*)wh.data(), (const char*)(wh.data() + wh.size())});
  // the activations: x's rows (row q of the product at rows[q] with picked, the rows
  // reversed, in a matrix of rows + 2 rows with a wider stride), or the hi halves of a
  // split of bf16 values
  const long arows = rows + 2, ldx = c.K + 16;
  std::vector<float> x(arows * ldx);
  for (auto& v : x) v = nd(rng) * (rng() % 8 == 0 ? 1e3f : 1.0f);
  std::vector<int> pick(rows);
  for (long q = 0; q < rows; q++) pick[q] = (int)(rows - 1 - q + 1);
  std::vector<u32> xs(2 * rows * P, 0);
  for (long q = 0; q < rows; q++)
    for (long k = 0; k < c.K; k += 2) {
      i64 err = 0;
      fast_pair(xs.data(), xs.data() + rows * P, q * P + k / 2, q_bf16(nd(rng)), q_bf16(nd(rng)), true, &err);
    }
  const long ldy = c.N + 3;
  std::vector<float> got(c.M * ldy, -7.0f), want(c.M * ldy, -7.0f), staged(c.M * ldy, -7.0f), one(c.M * ldy, -7.0f), oneb(c.M * ldy, -7.0f),
      onep(c.M * ldy, -7.0f);
  i64 err = 0;
  FastGemvArgs a{};
  a.x = x.data(), a.rows = c.picked ? pick.data() : nullptr, a.xh = xs.data(), a.w = w, a.M = c.M, a.N = c.N, a.K = c.K, a.Kp = Kp;
  a.ldx = ldx, a.ldy = ldy, a.out_bf16 = c.bf16out, a.G = c.G, a.arows = arows, a.err = &err;
  long before = g_errors;
  // the staged kernel on fewer blocks than pairs need (each block several pairs in
  // turn, the next one's bytes copied ahead), or on one block
  const long sblocks = c.blocks > 1 ? (c.blocks + 1) / 2 : 1;
  if (c.xq) both<true>(a, c.fmt, c.blocks, sblocks, want, got, staged, one, oneb, onep);
  else both<false>(a, c.fmt, c.blocks, sblocks, want, got, staged, one, oneb, onep);
  long diff = 0, far = 0, sdiff = 0, odiff = 0;
  for (size_t i = 0; i < got.size(); i++) {
    if (__float_as_uint(got[i]) != __float_as_uint(want[i])) {
      if (diff < 3) fprintf(stderr, "[%zu] %a, want %a\n", i, got[i], want[i]);
      diff++;
    }
    if (__float_as_uint(staged[i]) != __float_as_uint(want[i])) {
      if (sdiff < 3) fprintf(stderr, "staged [%zu] %a, want %a\n", i, staged[i], want[i]);
      sdiff++;
    }
    if (__float_as_uint(one[i]) != __float_as_uint(want[i]) || __float_as_uint(oneb[i]) != __float_as_uint(want[i]) ||
        __float_as_uint(onep[i]) != __float_as_uint(want[i])) {
      if (odiff < 3) fprintf(stderr, "one-row forms [%zu] %a, %a, %a, want %a\n", i, one[i], oneb[i], onep[i], want[i]);
      odiff++;
    }
  }
  // the values: a float64 dot of the same operands
  for (long m = 0; m < c.M; m++)
    for (long n = 0; n < c.N; n++) {
      const long q = m * c.G + (c.G > 1 ? n / (c.N / c.G) : 0);
      double dot = 0, mag = 0;
      for (long k = 0; k < c.K; k++) {
        const u32 h = xs[q * P + k / 2];
        const double xv = c.xq ? (double)(k % 2 ? fast_hi(h) : fast_lo(h)) : (double)x[(c.picked ? pick[q] : q) * ldx + k];
        dot += (double)wval(w, n, k) * xv, mag += fabs((double)wval(w, n, k) * xv);
      }
      const double v = got[m * ldy + n], tol = (c.bf16out ? 1.0 / 128 : 1e-5) * fmax(mag, fabs(dot));
      if (!(fabs(v - dot) <= tol)) {
        if (far < 3) fprintf(stderr, "y[%ld, %ld] %g, float64 dot %g\n", m, n, v, dot);
        far++;
      }
    }
  printf("gemv M %ld N %ld K %ld G %ld fmt %d xq %d bf16 %d picked %d blocks %ld (KS %d): %ld differ from the emulated order, %ld far from the dot, err %ld, errors %ld; staged on %ld blocks: %ld differ; one-row forms: %ld differ\n",
         c.M, c.N, c.K, c.G, c.fmt, c.xq, c.bf16out, c.picked, c.blocks, fast_gemv_ks(c.N), diff, far, (long)err, g_errors - before, sblocks, sdiff, odiff);
  return diff || sdiff || odiff || far || err || g_errors != before;
}

// bad_row: a rows operand naming a row x does not have sets error 2.
static int bad_row() {
  std::vector<float> x(4 * 64, 1.0f), y(8, 0.0f), wf(4 * 64, 0.5f);
  std::vector<int> pick = {0, 7};  // 7 ≥ arows
  i64 err = 0;
  FastGemvArgs a{};
  a.x = x.data(), a.rows = pick.data(), a.w.p = wf.data(), a.w.fmt = 0, a.w.cols = 64, a.y = y.data(), a.M = 2, a.N = 4, a.K = 64, a.Kp = 64;
  a.ldx = 64, a.ldy = 4, a.G = 1, a.arows = 4, a.err = &err;
  fibers_launch(fast_gemv_f32, a, 1);
  printf("a row past x: err %ld (want 2)\n", (long)err);
  // the same through the staged FP8 kernel (codes of 1.0, scale 2^0)
  std::vector<unsigned char> codes(4 * 64, 0x38), scales(2 * 2, 127);
  i64 serr = 0;
  a.w.p = codes.data(), a.w.s = scales.data(), a.w.fmt = 3, a.err = &serr;
  g_valid.clear();
  g_valid.push_back({(const char*)codes.data(), (const char*)(codes.data() + codes.size())});
  fibers_launch(fast_gemv_fp8s, a, 1);
  printf("a row past x, staged: err %ld (want 2)\n", (long)serr);
  return err != 2 || serr != 2;
}

int main() {
  int bad = 0;
  unsigned seed = 1;
  // every format, both activation sources; one to four rows; one, two and four warps a
  // pair (N ≥ 4096, ≥ 2048, smaller); a reduction that is not a multiple of a warp's 512
  // values (lanes with fewer pieces) or of FAST_GEMV_D's steps; groups (N / G even, as
  // Go requires); bf16 outputs; picked rows; an odd N (a pair's second row past it);
  // fewer blocks than the launch has (the grid-stride loop)
  for (GemvCase c : {GemvCase{1, 64, 1024, 1, 5, false, false, false, 4}, GemvCase{2, 30, 4096, 1, 2, true, false, false, 2},
                     GemvCase{4, 34, 208, 1, 3, true, false, false, 9}, GemvCase{3, 40, 2064, 2, 5, false, true, false, 3},
                     GemvCase{1, 16, 512, 1, 1, false, false, true, 4}, GemvCase{4, 24, 336, 2, 1, true, true, false, 1},
                     GemvCase{1, 12, 1040, 1, 0, false, false, false, 2}, GemvCase{2, 9, 96, 1, 0, true, false, false, 3},
                     GemvCase{1, 7, 64, 1, 2, false, false, true, 1}, GemvCase{1, 4096, 64, 1, 5, false, false, false, 64},
                     GemvCase{2, 2050, 128, 1, 1, false, true, false, 40}, GemvCase{1, 2048, 96, 2, 3, true, false, false, 50},
                     // several trips of FAST_GEMV_D pieces a lane, the last one partial
                     GemvCase{1, 12, 9232, 1, 5, false, false, false, 2}, GemvCase{2, 10, 8720, 1, 2, true, false, false, 3},
                     GemvCase{1, 4096, 4160, 1, 3, false, false, false, 8}})
    bad += gemv_case(c, seed++);
  bad += bad_row();
  if (bad) {
    printf("FAIL\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
