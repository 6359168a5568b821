// cascade_fibers_main.cc: TestNormBlocksOnHostFibers' cases (follows fp4_fibers.h, the
// headers and mhc.cu's device branch): mhc_fast_norm41_blk then _fold (a lane's level-0
// blocks summed in parallel, the levels replayed from their sums) against
// mhc_fast_norm41_part (a work item a lane, cascade_lane), every part bit for bit, on
// chunk sizes with and without a tail block, with one, two and three levels of
// promotion, and below one vector step; and cascade_lane_fold against cascade_lane on
// more sizes directly.
#include <random>
#include <vector>

static int norm_case(long chunks, long g, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(chunks * g);
  for (auto& v : x) v = ((float)(rng() % 2000001) - 1000000.0f) / (float)(1 + rng() % 1000);
  const long nb = cascade_blocks(g);
  std::vector<float> want(chunks * 32, -1.0f), got(chunks * 32, -2.0f), bpart(chunks * nb * 32 + 1, -3.0f);
  mhc_FastNorm41Args a{};
  a.x = x.data(), a.chunks = chunks, a.g = g, a.bpart = bpart.data();
  long before = g_errors;
  a.part = want.data();
  fibers_launch(mhc_fast_norm41_part, a, (chunks * 32 + 127) / 128);
  a.part = got.data();
  fibers_launch(mhc_fast_norm41_blk, a, (chunks * nb * 32 + 127) / 128);
  fibers_launch(mhc_fast_norm41_fold, a, (chunks * 32 + 127) / 128);
  long diff = 0;
  for (long i = 0; i < chunks * 32; i++)
    if (__float_as_uint(got[i]) != __float_as_uint(want[i])) {
      if (diff < 3) fprintf(stderr, "chunk %ld lane %ld: %a, want %a\n", i / 32, i % 32, got[i], want[i]);
      diff++;
    }
  printf("norm chunks %ld, g %ld (%ld blocks a lane): %ld lanes differ, errors %ld\n", chunks, g, nb, diff, g_errors - before);
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

int main() {
  int bad = 0;
  unsigned seed = 1;
  // 5,120 (V4.1's hidden: 10 blocks), 20,480 (its four streams: 40), 512, a tail block
  // (5,000: 156 terms a lane), fewer terms than a step (100), below a vector step (20)
  for (long g : {5120L, 20480L, 512L, 5000L, 100L, 20L})
    for (long chunks : {1L, 3L}) bad += norm_case(chunks, g, seed++);
  // the levels: 256 and 4,096 steps (two and three promotions), with tails
  for (long n : {32L * 16 * 256, 32L * 16 * 256 + 96, 32L * 16 * 300 + 7, 32L * 16 * 4096 + 32 * 5, 31L, 33L, 32L * 17})
    bad += fold_case(n, seed++);
  if (bad) {
    printf("FAIL\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
