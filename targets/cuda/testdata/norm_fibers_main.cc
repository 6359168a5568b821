// norm_fibers_main.cc: TestLaunchCutsOnHostFibers' cases (follows fp4_fibers.h, the headers
// and mhc.cu's device branch): mhc_fast_norm41_one (a launch block a chunk: the cascade
// lanes' level-0 blocks summed in parallel, the levels replayed, the lanes folded, every
// value normalized) against mhc_fast_norm41_part then _apply, every output bit for bit,
// with and without a weight, with and without the bf16 rounding, on chunk sizes with and
// without a tail block, with one and two levels of promotion, and below one vector step;
// and cascade_lane_fold against cascade_lane directly, on sizes with three levels.
#include <random>
#include <vector>

// a bf16 weight row of n values
static std::vector<unsigned short> bf16_row(long n, std::mt19937& rng) {
  std::normal_distribution<float> nd(1.0f, 0.05f);
  std::vector<unsigned short> h(n);
  for (auto& v : h) v = (unsigned short)(__float_as_uint(q_bf16(nd(rng))) >> 16);
  return h;
}

// norm_diff: the values of two runs that differ (the first three reported), g a chunk.
static long norm_diff(const std::vector<float>& got, const std::vector<float>& want, long g) {
  long diff = 0;
  for (size_t i = 0; i < got.size(); i++)
    if (__float_as_uint(got[i]) != __float_as_uint(want[i])) {
      if (diff < 3) fprintf(stderr, "chunk %ld value %ld: %a, want %a\n", (long)i / g, (long)i % g, got[i], want[i]);
      diff++;
    }
  return diff;
}

static int norm_case(long chunks, long g, bool weighted, bool round, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(chunks * g), part(chunks * 32);
  for (auto& v : x) v = ((float)(rng() % 2000001) - 1000000.0f) / (float)(1 + rng() % 1000);
  std::vector<unsigned short> wh = bf16_row(g, rng);
  Weight w{};
  w.fmt = 1, w.cols = g, w.p = wh.data(), w.s = nullptr;
  std::vector<float> want(chunks * g, -1.0f), got(chunks * g, -2.0f);
  mhc_FastNorm41Args a{};
  a.x = x.data(), a.w = w, a.chunks = chunks, a.g = g, a.eps = 1e-6, a.weighted = weighted, a.round = round;
  a.part = part.data();
  long before = g_errors;
  a.y = want.data();
  fibers_launch(mhc_fast_norm41_part, a, (chunks * 32 + 127) / 128);
  fibers_launch(mhc_fast_norm41_apply, a, (chunks * g + 127) / 128);
  a.y = got.data(), a.part = nullptr;  // the one-launch form keeps no parts
  fibers_launch(mhc_fast_norm41_one, a, chunks > 1 ? chunks - 1 : 1);  // a block takes two chunks
  const long diff = norm_diff(got, want, g);
  printf("norm chunks %ld, g %ld (%lld blocks a lane), weighted %d, round %d: %ld values differ, errors %ld\n", chunks, g,
         cascade_blocks(g), weighted, round, diff, g_errors - before);
  return diff || g_errors != before;
}

// v4_case: V4's mhc_fast_norm_one (P float64 parts, a launch block a chunk) against
// mhc_fast_norm_part then _apply, every output bit for bit.
static int v4_case(long chunks, long g, long P, bool weighted, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(chunks * g);
  std::vector<double> part(chunks * P);
  for (auto& v : x) v = ((float)(rng() % 2000001) - 1000000.0f) / (float)(1 + rng() % 1000);
  std::vector<unsigned short> wh = bf16_row(g, rng);
  Weight w{};
  w.fmt = 1, w.cols = g, w.p = wh.data(), w.s = nullptr;
  std::vector<float> want(chunks * g, -1.0f), got(chunks * g, -2.0f);
  mhc_FastNormPartArgs pa{x.data(), part.data(), chunks, g, P};
  mhc_FastNormApplyArgs a{};
  a.x = x.data(), a.w = w, a.part = part.data(), a.chunks = chunks, a.g = g, a.P = P, a.eps = 1e-6, a.weighted = weighted;
  long before = g_errors;
  a.y = want.data();
  fibers_launch(mhc_fast_norm_part, pa, (chunks * P + 127) / 128);
  fibers_launch(mhc_fast_norm_apply, a, (chunks * g + 127) / 128);
  a.y = got.data(), a.part = nullptr;
  fibers_launch(mhc_fast_norm_one, a, chunks > 1 ? chunks - 1 : 1);  // a block takes two chunks
  const long diff = norm_diff(got, want, g);
  printf("v4 norm chunks %ld, g %ld, P %ld, weighted %d: %ld values differ, errors %ld\n", chunks, g, P, weighted, diff,
         g_errors - before);
  return diff || g_errors != before;
}

// cascade_lane_fold from blocks summed here, against cascade_lane, every lane of n values
static int fold_case(long n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = ((float)(rng() % 2000001) - 1000000.0f) / 977.0f;
  mhc_Sq sq;
  sq.p = x.data();
  const long nb = cascade_blocks(n);
  long diff = 0;
  for (int lane = 0; lane < 32; lane++) {
    std::vector<float> bs(nb + 1);
    for (long b = 0; b < nb; b++) bs[b] = cascade_block_sum(sq, n, lane / 8, lane % 8, b);
    const float got = cascade_lane_fold(bs.data(), 1, n), want = cascade_lane(sq, n, lane / 8, lane % 8);
    if (__float_as_uint(got) != __float_as_uint(want)) {
      if (diff < 3) fprintf(stderr, "n %ld lane %d: %a, want %a\n", n, lane, got, want);
      diff++;
    }
  }
  printf("fold n %ld (%ld blocks a lane): %ld lanes differ\n", n, nb, diff);
  return diff != 0;
}

static int norm_cases() {
  int bad = 0;
  unsigned seed = 1;
  // 5,120 (V4.1's hidden: 10 blocks a lane), 20,480 (its four streams: 40), 1,280 and
  // 512 (its query and KV latents), a tail block (5,000), fewer terms than a step (100),
  // below a vector step (20), 64 blocks a lane (the most the kernel takes: 32,768)
  for (long g : {5120L, 20480L, 1280L, 512L, 5000L, 100L, 20L, 32768L})
    for (long chunks : {1L, 3L}) bad += norm_case(chunks, g, chunks == 1, g % 3 == 2, seed++);
  bad += norm_case(2, 5120, true, true, seed++);
  bad += norm_case(2, 5120, false, false, seed++);
  // V4's: its hidden (4,096: 64 parts), the mHC streams (16,384: 128), a query latent
  // (1,024: 32), the most parts (256, more than a block's threads), a ragged chunk
  bad += v4_case(1, 4096, 64, true, seed++);
  bad += v4_case(3, 16384, 128, false, seed++);
  bad += v4_case(3, 1024, 32, true, seed++);
  bad += v4_case(2, 65536, 256, true, seed++);
  bad += v4_case(3, 1000, 32, false, seed++);
  // the levels: 256 and 4,096 steps (two and three promotions), with tails
  for (long n : {32L * 16 * 256, 32L * 16 * 256 + 96, 32L * 16 * 300 + 7, 32L * 16 * 4096 + 32 * 5, 31L, 33L, 32L * 17})
    bad += fold_case(n, seed++);
  return bad;
}
