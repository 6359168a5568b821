// pick_fibers_main.cc: TestDraftPickDeviceCodeOnHostFibers' cases (follows fp4_fibers.h,
// the headers and dspark41.cu's device branch): dspark_head_pick_part's warps (a warp a
// block's chunk of logits) then dspark_head_pick's (a warp a block folding the chunks'
// bests), the lanes' argmaxes folded by shuffles, on host fibers against the serial scan the
// emulated device runs, on logits full of ties, NaNs, signed zeros and infinities: every
// drafted id and confidence the same.
#include <random>
#include <vector>

static int pick_case(long nb, long block, long V, int kind, unsigned seed) {
  std::mt19937 rng(seed);
  const long T = nb * block, D = 40, R = 8;
  std::vector<float> logits(T * V), x(T * D), conf(D + R), membed(V * R);
  for (auto& v : x) v = (float)(rng() % 1000) / 7.0f;
  for (auto& v : conf) v = (float)(rng() % 100) / 13.0f - 3.0f;
  for (auto& v : membed) v = (float)(rng() % 100) / 11.0f;
  for (long q = 0; q < T * V; q++) {
    float& v = logits[q];
    const long j = q % V;
    switch (kind) {
      case 4: v = (float)j; break;  // the largest last
      case 5: v = j == (V - 1 < DSPARK_PICK_CHUNK - 1 ? V - 1 : DSPARK_PICK_CHUNK - 1) ? 1.0f : 0.0f; break;  // a chunk's last

      case 0: v = (float)(rng() % 1000000) / 3.0f; break;            // distinct-ish
      case 1: v = (float)(rng() % 4); break;                          // many ties
      case 2: v = rng() % 50 == 0 ? __uint_as_float(0x7fc00000u) : (float)(rng() % 8); break;  // NaNs
      default: {
        const float s[] = {0.0f, -0.0f, __uint_as_float(0xff800000u), __uint_as_float(0x7f800000u), 1.0f};
        v = s[rng() % 5];
      }
    }
  }
  std::vector<int> tokens(T), ids(T, -1), want_ids(T, -1);
  for (auto& t : tokens) t = (int)(rng() % V);
  std::vector<float> got_conf(T, -9.0f), want_conf(T, -9.0f);
  const long i = 0;  // the anchor's row: the token from tokens
  // the serial scan and sum (the emulated device's order)
  for (long b = 0; b < nb; b++) {
    const long r = b * block + i;
    const float* row = logits.data() + r * V;
    long best = 0;
    for (long j = 0; j < V; j++)
      if (row[j] > row[best] || (isnan32(row[j]) && !isnan32(row[best]))) best = j;
    double c = 0;
    for (long j = 0; j < D; j++) c += (double)x[r * D + j] * (double)conf[j];
    for (long j = 0; j < R; j++) c += (double)membed[tokens[b * block] * R + j] * (double)conf[D + j];
    want_ids[r] = (int)best, want_conf[r] = (float)c;
  }
  DSparkPickArgs a{};
  a.x = x.data(), a.tokens = tokens.data(), a.logits = logits.data(), a.ids = ids.data(), a.confOut = got_conf.data();
  a.membed.p = membed.data(), a.membed.fmt = 0, a.membed.cols = R;
  a.conf.p = conf.data(), a.conf.fmt = 0, a.conf.cols = D + R;
  a.T = T, a.V = V, a.D = D, a.R = R, a.block = block, a.i = i;
  const long nch = (V + DSPARK_PICK_CHUNK - 1) / DSPARK_PICK_CHUNK;
  std::vector<DSparkPickPart> parts(nb * nch, DSparkPickPart{-7.0f, -7});
  a.parts = (char*)parts.data();
  long before = g_errors;
  fibers_launch(dspark_head_pick_part, a, (nb * nch * 32 + 127) / 128);
  fibers_launch(dspark_head_pick, a, (nb * 32 + 127) / 128);
  long diff = 0;
  for (long r = 0; r < T; r++)
    if (ids[r] != want_ids[r] || __float_as_uint(got_conf[r]) != __float_as_uint(want_conf[r])) {
      if (diff < 3) fprintf(stderr, "row %ld: id %d conf %a, want %d %a\n", r, ids[r], got_conf[r], want_ids[r], want_conf[r]);
      diff++;
    }
  printf("pick blocks %ld of %ld, V %ld, logits kind %d: %ld rows differ, errors %ld\n", nb, block, V, kind, diff, g_errors - before);
  return diff || g_errors != before;
}

int main() {
  int bad = 0;
  unsigned seed = 1;
  // vocabularies below a warp, not a multiple of 32, and larger; of one, two and 33
  // chunks (more than a warp's lanes fold at once); more blocks than a launch block's
  // four warps
  for (long V : {7L, 33L, 1000L, 4099L, 33L * DSPARK_PICK_CHUNK + 5})
    for (int kind = 0; kind < 6; kind++) bad += pick_case(kind == 3 ? 6 : 3, 5, V, kind, seed++);
  if (bad) {
    printf("FAIL\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
