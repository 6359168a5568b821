// route_fibers_main.cc: TestRoutingDeviceCodeOnHostFibers' cases (follows fp4_fibers.h,
// dense41.cu, moe.cu and tensorcore.cu's device branch): slot ids run through moe_count,
// moe_count_sum (one warp: the counts and the experts' offsets by a shuffle scan),
// moe_group and fast_moe_active (one warp: the active experts placed by ballots) on host
// fibers and through a count, a stable grouping and an active list done here; every
// count, offset, list slot and active entry must be the same.
#include <random>

struct Case { long slots, E; int skew; };

static int run_case(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int> ids(c.slots);
  for (long s = 0; s < c.slots; s++) {
    // skew 1: every id in the upper half (a run of idle experts first); 2: a few experts
    long e = (long)(rng() % c.E);
    if (c.skew == 1) e = c.E / 2 + e % ((c.E + 1) / 2);
    if (c.skew == 2) e = (e % 3) * (c.E / 3);
    ids[s] = (int)e;
  }
  const long nch = (c.slots + MOE_CH - 1) / MOE_CH;
  std::vector<i64> counts(c.E, -7), off(c.E, -7), part(c.E * nch, -7);
  std::vector<int> list(c.slots, -7), act(c.E, -7);
  i64 err = 0;
  long before = g_errors;
  MoECountArgs ca = {ids.data(), c.slots, c.E, counts.data(), &err, part.data(), off.data()};
  fibers_launch(moe_count, ca, (nch * c.E + 127) / 128);
  fibers_launch(moe_count_sum, ca, 1);
  MoEGroupArgs ga = {ids.data(), counts.data(), off.data(), list.data(), c.slots, c.E, part.data()};
  fibers_launch(moe_group, ga, (nch * c.E + 127) / 128);
  FastMoEArgs fa = {};
  fa.counts = counts.data(), fa.act = act.data(), fa.E = c.E;
  fibers_launch(fast_moe_active, fa, 1);
  // here: counts, offsets, the stable list, the active experts in id order
  std::vector<i64> wc(c.E, 0), wo(c.E, 0);
  std::vector<int> wl, wa;
  for (long s = 0; s < c.slots; s++) wc[ids[s]]++;
  for (long e = 0, o = 0; e < c.E; o += wc[e], e++) {
    wo[e] = o;
    if (wc[e] > 0) wa.push_back((int)e);
    for (long s = 0; s < c.slots; s++)
      if (ids[s] == e) wl.push_back((int)s);
  }
  while ((long)wa.size() < c.E) wa.push_back(-1);
  long cd = 0, od = 0, ld = 0, ad = 0;
  for (long e = 0; e < c.E; e++) cd += counts[e] != wc[e], od += off[e] != wo[e], ad += act[e] != wa[e];
  for (long s = 0; s < c.slots; s++) ld += list[s] != wl[s];
  printf("slots %ld experts %ld skew %d: %ld counts, %ld offsets, %ld list slots, %ld active entries differ; error %lld, harness errors %ld\n",
         c.slots, c.E, c.skew, cd, od, ld, ad, (long long)err, g_errors - before);
  return cd == 0 && od == 0 && ld == 0 && ad == 0 && err == 0 && g_errors == before ? 0 : 1;
}

int main() {
  std::vector<Case> cases = {
      {1, 1, 0},    {1, 4, 0},    {31, 32, 0},  {255, 37, 1}, {256, 33, 2},
      {257, 300, 0}, {1536, 384, 0}, {1536, 384, 1}, {2048, 384, 2}, {6, 384, 0},
  };
  int bad = 0;
  unsigned seed = 1;
  for (auto& c : cases) bad += run_case(c, seed++);
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
