// topk_fibers_main.cc: TestTopKDeviceCodeOnHostFibers' cases (follows fp4_fibers.h and
// csa41.cu's device branch): rows of (value, index) pairs full of ties run through
// csa_topk_probe's device branch (csa_topk_blk, then csa_kept_list_blk) on host fibers
// and through the serial csa_topk and csa_kept_list; the arrays and lists must be the
// same, every element of them. Each case also runs csa_topk_probe_u (the heap select's
// elements left unsorted, as csa_index_select runs it): its kept bytes and lists must be
// the serial ones; and csa_topk_probe_t (the fast modes' radix select, csa_lowtie_kept_blk):
// its kept bytes and lists must be the serial csa_lowtie_kept's, the pairs unmoved.
#include <random>
#include <algorithm>

enum Fill { Bf16Normal, FewValues, AllEqual, Ascending, Descending, Specials, MostlyNegInf };

static float fill_value(Fill f, std::mt19937& rng, long i, long n) {
  std::normal_distribution<float> nd(4.0f, 1.0f);
  switch (f) {
    case Bf16Normal: {  // bf16 scores: a tie every few values
      unsigned u = __float_as_uint(nd(rng));
      return __uint_as_float(u & 0xffff0000u);
    }
    case FewValues: return (float)(rng() % 5);
    case AllEqual: return 1.5f;
    case Ascending: return (float)(i / 3);
    case Descending: return (float)((n - i) / 3);
    case Specials: {
      switch (rng() % 6) {
        case 0: return __uint_as_float(0x7fc00000u);   // NaN
        case 1: return -__uint_as_float(0x7f800000u);  // -inf
        case 2: return -0.0f;
        case 3: return 0.0f;
        case 4: return __uint_as_float(0x7f800000u);
        default: return (float)(rng() % 3);
      }
    }
    case MostlyNegInf: return rng() % 4 ? -__uint_as_float(0x7f800000u) : (float)(rng() % 50);
  }
  return 0;
}

struct Case { long n, k, lim; Fill f; long rows; };

static int run_case(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  long N = c.rows * c.n;
  std::vector<csa_TopkElem> q(N), ref(N);
  for (long t = 0; t < c.rows; t++)
    for (long i = 0; i < c.n; i++) q[t * c.n + i] = csa_TopkElem{fill_value(c.f, rng, i, c.n), (int)i};
  ref = q;
  const std::vector<csa_TopkElem> orig = q;
  std::vector<unsigned char> kept(N), rkept(N);
  std::vector<int> out(c.rows * c.k, 7), rout(c.rows * c.k, 7);
  for (long t = 0; t < c.rows; t++) {
    long kk = csa_topk(&ref[t * c.n], c.n, c.k);
    csa_kept_list(&ref[t * c.n], kk, c.n, c.lim, &rkept[t * c.n], &rout[t * c.k], c.k);
  }
  csa_TopkProbeArgs a = {q.data(), kept.data(), out.data(), c.rows, c.n, c.k, c.lim};
  long before = g_errors;
  fibers_launch(csa_topk_probe, a, c.rows);
  long diff = 0, odiff = 0;
  for (long i = 0; i < N; i++)
    if (__float_as_uint(q[i].v) != __float_as_uint(ref[i].v) || q[i].i != ref[i].i) diff++;
  for (long i = 0; i < c.rows * c.k; i++) odiff += out[i] != rout[i];
  printf("n %ld k %ld lim %ld fill %d rows %ld: %ld elements differ, %ld list slots differ, errors %ld\n", c.n, c.k, c.lim,
         (int)c.f, c.rows, diff, odiff, g_errors - before);
  int bad = diff == 0 && odiff == 0 && g_errors == before ? 0 : 1;
  std::vector<csa_TopkElem> uq = orig;
  std::vector<unsigned char> ukept(N, 7);
  std::vector<int> uout(c.rows * c.k, 7);
  csa_TopkProbeArgs ua = {uq.data(), ukept.data(), uout.data(), c.rows, c.n, c.k, c.lim};
  before = g_errors;
  fibers_launch(csa_topk_probe_u, ua, c.rows);
  long kdiff = 0, udiff = 0;
  for (long i = 0; i < N; i++) kdiff += ukept[i] != rkept[i];
  for (long i = 0; i < c.rows * c.k; i++) udiff += uout[i] != rout[i];
  printf("  unsorted: %ld kept bytes differ, %ld list slots differ, errors %ld\n", kdiff, udiff, g_errors - before);
  bad |= kdiff == 0 && udiff == 0 && g_errors == before ? 0 : 1;
  // the fast modes' selection (csa_lowtie_kept_blk against the serial csa_lowtie_kept)
  std::vector<unsigned char> tkept(N, 7), tref(N, 9);
  std::vector<int> tout(c.rows * c.k, 7), trout(c.rows * c.k, 9);
  for (long t = 0; t < c.rows; t++)
    csa_lowtie_kept(&orig[t * c.n], c.n, c.k, c.lim, &tref[t * c.n], &trout[t * c.k], c.k);
  std::vector<csa_TopkElem> tq = orig;
  csa_TopkProbeArgs ta = {tq.data(), tkept.data(), tout.data(), c.rows, c.n, c.k, c.lim};
  before = g_errors;
  fibers_launch(csa_topk_probe_t, ta, c.rows);
  long tkdiff = 0, tdiff = 0, qdiff = 0;
  for (long i = 0; i < N; i++) tkdiff += tkept[i] != tref[i];
  for (long i = 0; i < N; i++) qdiff += __float_as_uint(tq[i].v) != __float_as_uint(orig[i].v) || tq[i].i != orig[i].i;
  for (long i = 0; i < c.rows * c.k; i++) tdiff += tout[i] != trout[i];
  printf("  lower position first among ties: %ld kept bytes differ, %ld list slots differ, %ld pairs moved, errors %ld\n",
         tkdiff, tdiff, qdiff, g_errors - before);
  return bad | (tkdiff == 0 && tdiff == 0 && qdiff == 0 && g_errors == before ? 0 : 1);
}

int main() {
  std::vector<Case> cases = {
      {1, 1, 1, Bf16Normal, 2},
      {5, 2, 5, FewValues, 3},
      {64, 20, 64, FewValues, 2},            // one serial partition
      {65, 33, 60, Bf16Normal, 2},           // the first partition on the block
      {300, 150, 300, AllEqual, 2},
      {1000, 512, 1000, Bf16Normal, 3},
      {2048, 512, 2048, Bf16Normal, 2},      // a ratio-2 layer's row at 4,096
      {4096, 512, 4090, Bf16Normal, 2},      // a ratio-1 layer's row at 4,096
      {4096, 512, 4096, FewValues, 1},
      {4096, 1000, 4096, Specials, 2},
      {4097, 2048, 4097, MostlyNegInf, 1},   // restricted rows: most keys -inf
      {3000, 2999, 3000, Ascending, 1},
      {3000, 17, 3000, Descending, 1},       // 17·64 ≤ 3000: the heap select
      {6000, 90, 6000, Specials, 1},         // heap select with NaNs
      {9000, 100, 9000, Bf16Normal, 2},      // heap select over two chunks
      {70000, 1090, 70000, FewValues, 1},    // a heap past shared memory
      {33000, 600, 33000, Bf16Normal, 1},    // the first partition past the masks: serial
      {9, 20, 9, FewValues, 1},              // k past n
      {32768, 512, 32768, Bf16Normal, 2},    // V4.1's rows at 32,768 (the heap select)
      {32768, 512, 32000, FewValues, 1},     // the same, ties everywhere, lim < n
      {40000, 600, 40000, Specials, 1},      // heap select past the first chunks, NaNs
  };
  int bad = 0;
  unsigned seed = 1;
  for (auto& c : cases) bad += run_case(c, seed++);
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
