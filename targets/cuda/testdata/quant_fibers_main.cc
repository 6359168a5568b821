// quant_fibers_main.cc: TestQuantSplitDeviceCodeOnHostFibers' cases (follows
// fp4_fibers.h, dense41.cu, tensorcore.cu and tensorcore_fp4.cu): activation rows run
// through fast_quant_split's device branch on host fibers (a warp a piece of 32 values, and
// QS_PIECES pieces, the pieces' maxima and the pairs by shuffles) and through the two launches it
// replaces, dense_quant's device branch then fast_split or fast_split_fp4, and through a
// serial loop (q_act_piece a piece, as the emulated device runs it); the halves and the
// error word must be the same, bit for bit; with the E4M3 codes asked for too (mode 2),
// the same halves and each finite value code times its piece's scale.
#include <cstdlib>
#include <random>

struct Case { long M, K, mode, fp4; };

static float value(std::mt19937& rng, int kind) {
  std::normal_distribution<float> nd(0.0f, 3.0f);
  switch (kind) {
    case 0: return nd(rng);
    case 1: return nd(rng) * 1e-6f;                     // small: the 1e-4 floor of the scale
    case 2: return nd(rng) * 1e5f;                      // large: codes clamped at 448
    case 3: return __uint_as_float(0x3f808000u);        // a bf16 tie, rounded to even
    case 4: return (rng() & 1) ? -0.0f : 0.0f;
    case 5: return __uint_as_float(rng() & 1 ? 0xff800000u : 0x7f800000u);  // ±inf
    case 6: return __uint_as_float(0x7fc00000u);       // NaN
    default: return __uint_as_float(0x00000100u + (rng() & 0xff));  // subnormal
  }
}

static int run_case(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  const long Kp = c.fp4 ? (c.K + 127) / 128 * 128 : (c.K + 63) / 64 * 64, P = Kp / 2;
  std::vector<float> x(c.M * c.K), y(c.M * c.K, 7.0f);
  const bool specials = seed % 2 == 0;  // every other case: NaN, inf, zeros, ties
  for (auto& v : x) v = value(rng, specials ? (int)(rng() % 8) : (int)(rng() % 3));
  std::vector<u32> h(2 * c.M * P, 0xA5A5A5A5u), r(2 * c.M * P, 0x5A5A5A5Au);
  i64 err = 0, rerr = 0;
  long before = g_errors;
  // the two launches: dense_quant (a warp a piece), then the split of the quantized rows
  DenseQuantArgs q = {x.data(), y.data(), c.M, c.K, 32, c.mode};
  fibers_launch(dense_quant, q, (c.M * ((c.K + 31) / 32) * 32 + 127) / 128);
  FastSplitArgs s = {y.data(), nullptr, r.data(), r.data() + c.M * P, c.M, c.K, Kp, c.K, c.M, &rerr, 1};
  fibers_launch(c.fp4 ? fast_split_fp4 : fast_split, s, (c.M * P + 127) / 128);
  // fused, over fewer blocks than pieces where there are many (the grid-stride loop), a
  // warp a piece (h) and QS_PIECES pieces (h4)
  std::vector<u32> h4(2 * c.M * P, 0xC3C3C3C3u);
  i64 err4 = 0;
  for (long qs : {1L, (long)QS_PIECES}) {
    std::vector<u32>& out = qs == 1 ? h : h4;
    FastQuantSplitArgs f = {x.data(), out.data(), out.data() + c.M * P, c.M, c.K, Kp, c.mode, c.fp4, qs == 1 ? &err : &err4, qs};
    long blocks = (c.M * ((Kp / 32 + qs - 1) / qs) * 32 + 127) / 128;  // (quantSplitArgs' threads)
    fibers_launch(fast_quant_split, f, blocks > 3 ? blocks / 3 : blocks);
  }
  // and serially, a piece at a time (the emulated device's loop: quantizeActs' order)
  std::vector<u32> e(2 * c.M * P, 0x3C3C3C3Cu);
  i64 eerr = 0;
  for (long m = 0; m < c.M; m++)
    for (long p = 0; p < Kp / 32; p++) {
      float v[32] = {0};
      q_act_piece(x.data() + m * c.K, c.K, p * 32, 32, c.mode, v);
      for (int j = 0; j < 16; j++) {
        const int k = c.fp4 ? 8 * (j >> 2) + (j & 3) : 2 * j;
        fast_pair(e.data() + m * P + p * 16, e.data() + c.M * P + m * P + p * 16, j, v[k], v[k + (c.fp4 ? 4 : 1)], true, &eerr);
      }
    }
  // with the E4M3 codes and the pieces' scales too (mode 2, whole pieces: the fp8
  // numerics' fast_gemm_wg_e4m3 reads them): the same halves, and each finite value of a
  // whole piece code times scale, bit for bit (codes of NaN values are not defined)
  long cdiff = 0;
  if (c.mode == 2 && c.K % 32 == 0) {
    for (long qs : {1L, (long)QS_PIECES}) {
      std::vector<u32> hq(2 * c.M * P, 0x99999999u);
      std::vector<unsigned char> codes(c.M * c.K, 0x7f);
      std::vector<float> sc(c.M * c.K / 32, -1.0f);
      i64 qerr = 0;
      FastQuantSplitArgs f = {x.data(), hq.data(), hq.data() + c.M * P, c.M, c.K, Kp, c.mode, c.fp4, &qerr, qs, codes.data(), sc.data()};
      long blocks = (c.M * ((Kp / 32 + qs - 1) / qs) * 32 + 127) / 128;
      fibers_launch(fast_quant_split, f, blocks > 3 ? blocks / 3 : blocks);
      for (size_t i = 0; i < hq.size(); i++) cdiff += hq[i] != r[i];
      cdiff += qerr != rerr;
      for (long m = 0; m < c.M; m++)
        for (long p = 0; p < c.K / 32; p++) {
          float v[32] = {0};
          q_act_piece(x.data() + m * c.K, c.K, p * 32, 32, c.mode, v);
          for (int u = 0; u < 32; u++) {
            const float d = e4m3_f32(codes[m * c.K + p * 32 + u]) * sc[m * (c.K / 32) + p];
            if (v[u] != v[u]) {
              cdiff += d == d;
              continue;
            }
            if (__float_as_uint(d) != __float_as_uint(v[u]) && cdiff < 3 && getenv("QF_DEBUG"))
              printf("    m %ld p %ld u %d: code %02x scale %g -> %g, want %g (x %g)\n", m, p, u, codes[m * c.K + p * 32 + u], sc[m * (c.K / 32) + p], d, v[u], x[m * c.K + p * 32 + u]);
            cdiff += __float_as_uint(d) != __float_as_uint(v[u]);
          }
        }
    }
    printf("  with the E4M3 codes: %ld values or words differ\n", cdiff);
  }
  long diff = 0, ediff = 0, diff4 = 0;
  for (size_t i = 0; i < h.size(); i++) diff += h[i] != r[i], ediff += h[i] != e[i], diff4 += h4[i] != r[i];
  printf("M %ld K %ld mode %ld fp4 %ld%s: %ld of %zu words differ from the two launches (%ld with %d pieces a warp), %ld from the serial loop, errors %lld / %lld / %lld / %lld, harness errors %ld\n",
         c.M, c.K, c.mode, c.fp4, specials ? " (specials)" : "", diff, h.size(), diff4, QS_PIECES, ediff, (long long)err,
         (long long)err4, (long long)rerr, (long long)eerr, g_errors - before);
  return diff == 0 && diff4 == 0 && ediff == 0 && cdiff == 0 && err == rerr && err4 == rerr && err == eerr && g_errors == before ? 0 : 1;
}

int main() {
  std::vector<Case> cases = {
      {1, 32, 2, 0}, {1, 32, 2, 1}, {3, 100, 2, 0}, {3, 100, 2, 1},  // a partial piece (no MXFP8 there), padding
      {2, 640, 1, 0}, {2, 640, 1, 1}, {5, 256, 2, 0}, {5, 256, 2, 1},
      {4, 1024, 2, 0}, {4, 1024, 2, 1}, {2, 130, 1, 1}, {1, 4096, 2, 1},
      {3, 400, 2, 0}, {2, 1000, 2, 1}, {1, 5120, 2, 0}, {2, 200, 0, 0},  // a row's last warp short of QS_PIECES pieces; mode 0
  };
  int bad = 0;
  unsigned seed = 1;
  for (auto& c : cases) bad += run_case(c, seed++);
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
