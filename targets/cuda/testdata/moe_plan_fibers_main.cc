// moe_plan_fibers_main.cc: TestLaunchCutsOnHostFibers' cases (follows fp4_fibers.h, the
// headers, dense41.cu and moe.cu's device branches): moe_plan's launch block against a
// serial reference of what moe_count, moe_count_sum, moe_group and fast_moe_active
// compute — every count, first position, list entry and active expert — on slot counts
// from one to MOE_PLAN_SLOTS (4,096), expert counts around a warp's multiples, skewed and
// uniform routing, with and without the active list, and ids out of range (error 202,
// those slots in no list).
#include <random>
#include <vector>

static int plan_case(long slots, long E, int skew, bool act, int bad_ids, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int> ids(slots);
  for (auto& v : ids) v = skew ? (int)(rng() % (unsigned)skew) : (int)(rng() % (unsigned)E);
  for (int b = 0; b < bad_ids; b++) ids[rng() % slots] = b % 2 ? (int)E : -1;
  // the reference
  std::vector<long long> wc(E, 0), wo(E, 0);
  std::vector<int> wl(slots, -7), wa(E, -1);
  long long werr = 0;
  for (long s = 0; s < slots; s++) {
    if (ids[s] < 0 || ids[s] >= E) werr = 202;
    else wc[ids[s]]++;
  }
  long long o = 0;
  long j = 0;
  for (long e = 0; e < E; e++) {
    wo[e] = o, o += wc[e];
    if (wc[e] > 0) wa[j++] = (int)e;
  }
  std::vector<long long> run(E, 0);
  for (long s = 0; s < slots; s++)
    if (ids[s] >= 0 && ids[s] < E) wl[wo[ids[s]] + run[ids[s]]++] = (int)s;
  // the kernel
  std::vector<long long> gc(E, -5), go(E, -5);
  std::vector<int> gl(slots, -7), ga(E, -9);
  long long gerr = 0;
  MoEPlanArgs a{};
  a.ids = ids.data(), a.slots = slots, a.E = E, a.counts = gc.data(), a.off = go.data(), a.list = gl.data();
  a.act = act ? ga.data() : nullptr, a.err = &gerr;
  long before = g_errors;
  fibers_launch(moe_plan, a, 1);
  long diff = 0;
  for (long e = 0; e < E; e++) diff += gc[e] != wc[e] || go[e] != wo[e] || (act && ga[e] != wa[e]);
  for (long s = 0; s < slots; s++) diff += gl[s] != wl[s];
  if (!act)
    for (long e = 0; e < E; e++) diff += ga[e] != -9;  // no active list asked for: untouched
  diff += gerr != werr;
  printf("plan slots %ld E %ld skew %d act %d bad %d: %ld values differ, error %lld, errors %ld\n", slots, E, skew, act, bad_ids,
         diff, gerr, g_errors - before);
  return diff || g_errors != before;
}

static int moe_plan_cases() {
  int bad = 0;
  unsigned seed = 1;
  bad += plan_case(6, 384, 0, true, 0, seed++);      // V4.1 at batch 1: 6 slots of 384 experts
  bad += plan_case(384, 384, 0, true, 0, seed++);    // batch 64
  bad += plan_case(512, 384, 0, true, 0, seed++);    // the most slots
  bad += plan_case(512, 384, 5, true, 0, seed++);    // every slot on five experts
  bad += plan_case(96, 256, 0, false, 0, seed++);    // V4, no active list
  bad += plan_case(1, 16, 0, true, 0, seed++);       // one slot
  bad += plan_case(200, 33, 0, true, 0, seed++);     // experts past a warp's multiple
  bad += plan_case(300, 512, 0, true, 3, seed++);    // the most experts; ids out of range
  bad += plan_case(1536, 384, 0, true, 0, seed++);   // V4.1 at batch 256
  bad += plan_case(1536, 256, 3, true, 2, seed++);   // three experts take every slot; bad ids
  bad += plan_case(4096, 384, 0, false, 0, seed++);  // the most slots
  bad += plan_case(37, 8, 0, true, 0, seed++);       // quarters of ten slots: a warp's chunk part empty
  return bad;
}
