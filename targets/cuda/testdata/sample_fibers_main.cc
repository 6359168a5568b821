// sample_fibers_main.cc: TestSampleDeviceCodeOnHostFibers' cases (follows fp4_fibers.h,
// the headers and basic.cu's device branch): sample_argmax_part (a warp a row's chunk of
// ids) and sample (a launch block a row; a greedy row's parts folded by its first warp)
// on host fibers against the serial greedy scan, on logits full of ties, NaNs, signed
// zeros and infinities, with and without a mask of allowed ids; and rows sampled at a
// temperature (sample_blk: the block's sums, the cut's boundary digit by digit, the tie
// and the draw in chunks) against sample_row, the serial form the emulated device runs:
// plain draws, top-k, top-p and both, over ties at the boundary and masses below 2^-40.
#include <random>
#include <vector>

// the greedy scan the emulated device and the cpu target compute: the first allowed id,
// replaced only by a strictly larger allowed value, a NaN first id kept
static int greedy(const float* lg, long V, const int* words) {
  long first = -1, best = -1;
  for (long i = 0; i < V; i++) {
    if (words && !sample_allowed(words, i)) continue;
    if (first < 0) first = i;
    if (isnan32(lg[i])) continue;
    if (best < 0 || lg[i] > lg[best]) best = i;
  }
  if (first >= 0 && isnan32(lg[first])) best = first;
  return (int)(best < 0 ? (first < 0 ? 0 : first) : best);
}

static int sample_case(long R, long V, int kind, bool masked, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> logits(R * V), params(4 * R, 0.0f);
  for (auto& v : logits) {
    switch (kind) {
      case 0: v = (float)(rng() % 1000000) / 3.0f - 1000.0f; break;
      case 1: v = (float)(rng() % 3); break;
      case 2: v = rng() % 20 == 0 ? __uint_as_float(0x7fc00000u) : (float)(rng() % 5); break;
      default: {
        const float s[] = {0.0f, -0.0f, __uint_as_float(0xff800000u), __uint_as_float(0x7f800000u), -1.0f};
        v = s[rng() % 5];
      }
    }
  }
  // every third row sampled at a temperature, with a plain walk, top-k, top-p or both
  // (in turn, top-p from 0.5 to 0.999999, top-k from 1 past the vocabulary), over flat
  // or peaked logits (a few ids far above the rest: the top-p prefix short); a NaN logit
  // in some rows (the serial form), a +inf logit in others (NaN probabilities)
  static const float cuts[][2] = {{0, 0}, {5, 0}, {0, 0.9f}, {5, 0.9f}, {0, 0.5f}, {100000, 0}, {3, 0.999f}, {0, 0.999999f}, {1, 0}, {40, 0.95f}};
  for (long r = 2; r < R; r += 3) {
    const long c = (r / 3 + seed) % 10;
    params[4 * r] = (r / 3 + seed) % 3 == 0 ? 1.3f : 0.7f, params[4 * r + 1] = cuts[c][1], params[4 * r + 2] = cuts[c][0];
    // (U = 0 in one row in six: the draw's u is 0, at a chunk's start)
    params[4 * r + 3] = (r / 3 + seed) % 6 == 0 ? 0.0f : (float)(rng() % 1000) / 1000.0f;
    const bool peaked = (r / 3 + seed) % 2 == 0;
    // (one row in four spread 8× wider: many ids below 2^-40 of the largest, no mass)
    const float spread = (r / 3 + seed) % 4 == 2 ? 8.0f : 1.0f;
    for (long i = 0; i < V; i++) logits[r * V + i] = spread * (float)(rng() % 100) / 10.0f + (peaked && rng() % 97 == 0 ? 25.0f : 0.0f);
    if ((r / 3 + seed) % 5 == 1) logits[r * V + rng() % V] = __uint_as_float(0x7fc00000u);
    if ((r / 3 + seed) % 7 == 3) logits[r * V + rng() % V] = __uint_as_float(0x7f800000u);
  }
  // the mask: a header word (1: masked) then two words a 64 ids; row 0 allows none
  const long cols = 1 + 2 * ((V + 63) / 64);
  std::vector<int> mask(R * cols, 0);
  for (long r = 0; r < R && masked; r++) {
    mask[r * cols] = 1;
    for (long i = 0; i < V; i++)
      if (r != 0 && rng() % 3 != 0) mask[r * cols + 1 + 2 * (i >> 6) + ((i >> 5) & 1)] |= 1 << (i & 31);
  }
  std::vector<int> out(R, -7), want(R);
  std::vector<float> we(V);
  std::vector<int> worder(V);
  for (long r = 0; r < R; r++) {
    const int* words = masked ? mask.data() + r * cols + 1 : nullptr;
    const float* p = params.data() + 4 * r;
    want[r] = p[0] > 0 ? sample_row(logits.data() + r * V, words, V, we.data(), worder.data(), p[0], (i64)p[2], p[1], (double)p[3])
                       : greedy(logits.data() + r * V, V, words);
  }
  std::vector<char> scratch(R * V * 12 + 64);
  SampleArgs a{};
  a.logits = logits.data(), a.params = params.data(), a.mask = masked ? mask.data() : nullptr, a.out = out.data();
  a.R = R, a.V = V, a.cols = cols, a.scratch = scratch.data();
  const long nch = (V + SAMPLE_CHUNK - 1) / SAMPLE_CHUNK;
  long before = g_errors;
  fibers_launch(sample_argmax_part, a, (R * nch * 32 + 127) / 128);
  fibers_launch_n(sample, a, R, SAMPLE_NT);
  long diff = 0;
  for (long r = 0; r < R; r++)
    if (out[r] != want[r]) {
      if (diff < 3) fprintf(stderr, "row %ld: %d, want %d\n", r, out[r], want[r]);
      diff++;
    }
  printf("sample rows %ld, V %ld, logits kind %d, masked %d: %ld rows differ, errors %ld\n", R, V, kind, (int)masked, diff, g_errors - before);
  return diff || g_errors != before;
}

// unmasked_rows: R rows of V unmasked logits at their parameters through sample's launch
// blocks on fibers, against sample_row; reports under label
static int unmasked_rows(const char* label, long R, long V, std::vector<float>& logits, std::vector<float>& params) {
  std::vector<int> out(R, -7), want(R), worder(V);
  std::vector<float> we(V);
  for (long r = 0; r < R; r++) {
    const float* p = params.data() + 4 * r;
    want[r] = sample_row(logits.data() + r * V, nullptr, V, we.data(), worder.data(), p[0], (i64)p[2], p[1], (double)p[3]);
  }
  std::vector<char> scratch(R * V * 12 + 64);
  SampleArgs a{};
  a.logits = logits.data(), a.params = params.data(), a.mask = nullptr, a.out = out.data();
  a.R = R, a.V = V, a.cols = 1 + 2 * ((V + 63) / 64), a.scratch = scratch.data();
  long before = g_errors, diff = 0;
  fibers_launch_n(sample, a, R, SAMPLE_NT);
  for (long r = 0; r < R; r++)
    if (out[r] != want[r]) {
      if (diff < 3) fprintf(stderr, "%s row %ld: %d, want %d\n", label, r, out[r], want[r]);
      diff++;
    }
  printf("%s rows %ld, V %ld: %ld rows differ, errors %ld\n", label, R, V, diff, g_errors - before);
  return diff || g_errors != before;
}

// tie_case: every row at a temperature over four distinct logits (a cut's boundary
// falls inside a large group of ties, some kept, the rest not, ids above the boundary
// on both sides of the last kept one), top-k from 1 to V and top-p in turn
static int tie_case(long R, long V, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> logits(R * V), params(4 * R);
  for (auto& v : logits) v = (float)(rng() % 4) * 0.5f;
  for (long r = 0; r < R; r++) {
    params[4 * r] = 1.0f;
    params[4 * r + 1] = r % 3 == 0 ? 0.05f + 0.9f * (float)(rng() % 1000) / 1000.0f : 0.0f;
    params[4 * r + 2] = r % 3 == 1 ? 0.0f : (float)(1 + rng() % V);
    params[4 * r + 3] = (float)(rng() % 1000) / 1000.0f;
  }
  return unmasked_rows("tie", R, V, logits, params);
}

// chunk_tie_case: every row's mass in one thread's chunk of the draw (64 ids of 65,536:
// ids above the cut interleaved with ties at it), top-k cutting the ties, so the walking
// thread meets kept ties, cut ties and ids above the cut after them
static int chunk_tie_case(long R, unsigned seed) {
  const long V = 65536, w0 = 64 * 500;
  std::mt19937 rng(seed);
  std::vector<float> logits(R * V, -200.0f), params(4 * R);
  for (long r = 0; r < R; r++) {
    for (long i = w0; i < w0 + 64; i++) logits[r * V + i] = i % 2 ? 1.0f : 0.5f;
    params[4 * r] = 1.0f, params[4 * r + 1] = 0.0f;
    params[4 * r + 2] = (float)(32 + 1 + rng() % 31);
    params[4 * r + 3] = (float)(rng() % 1000) / 1000.0f;
  }
  return unmasked_rows("chunk tie", R, V, logits, params);
}

// hist_case: masses up to 2^40 added into one digit of the histogram in parts come back
// as their exact sum (sample_hist_mass), for as many ids as a vocabulary below 2^21 holds
static int hist_case() {
  static SampleShared S;
  std::mt19937_64 rng(7);
  int bad = 0;
  for (int trial = 0; trial < 4; trial++) {
    for (int d = 0; d < 2048; d++) {
      for (int j = 0; j < SAMPLE_PARTS; j++) S.hp[j][d] = 0;
      S.hc[d] = 0;
    }
    const u32 key = 0x3f000000u | (u32)(trial * 0x100000u);  // level 0's digit key >> 20
    const long n = trial == 3 ? (1L << 21) - 1 : 1000 + trial * 50000;
    u64 want = 0;
    for (long i = 0; i < n; i++) {
      const u64 q = trial == 3 ? (1ull << 40) : rng() % ((1ull << 40) + 1);
      want += q;
      sample_hist_add(0, 0, key, q, S);
    }
    const u64 got = sample_hist_mass(S, (int)(key >> 20));
    if (got != want || S.hc[key >> 20] != (u32)n) {
      fprintf(stderr, "histogram trial %d: mass %llu, want %llu; count %u, want %ld\n", trial, got, want, S.hc[key >> 20], n);
      bad++;
    }
  }
  printf("histogram parts: %d trials differ\n", bad);
  return bad;
}

int main() {
  int bad = 0;
  bad += hist_case();
  bad += chunk_tie_case(24, 5);
  bad += tie_case(60, 3001, 99);
  unsigned seed = 1;
  // vocabularies below a warp, within one chunk, not a multiple of 32, and of many
  // chunks (more than a warp's 32 parts)
  for (long V : {7L, 200L, 1000L, 9000L})
    for (int kind = 0; kind < 4; kind++)
      for (bool masked : {false, true}) bad += sample_case(kind == 3 ? 15 : 12, V, kind, masked, seed++);
  if (bad) {
    printf("FAIL\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
