// fp4_fibers_main.cc: TestFP4DeviceCodeOnHostFibers' cases (follows fp4_fibers.h and the
// kernel sources' device branch): random FP4 experts and activation halves, each case's
// launch run by fast_moe_*_fp4 (pipelined), fast_moe_*_fp4_reg and the emulated loop
// (fp4_ref), and with bf16 activations (xexact) fast_moe_*_fp4_regx and
// fast_moe_*_fp4_wide (64 slots a pass); all must write the same outputs, bit for bit.
#include <random>
#include <algorithm>
typedef void (*KernelFn)(const FastMoEArgs);
static void launch(KernelFn fn, const FastMoEArgs& a, long blocks) { fibers_launch(fn, a, blocks); }

// xexact: bf16 activations (lo halves zero) and the tiles told so (no lo mma); the
// emulated loop's whole chain on the same halves must then give the same values too
struct Case { int NW; long N, K; std::vector<int> counts; int k; bool xexact = false; };

// Lists: a case's slots shuffled among its experts (each expert's in order), and the
// active experts (those with slots), then -1s up to nact.
struct Lists {
  std::vector<long long> counts, off;
  std::vector<int> list, act;
  long nact;
};
static Lists make_lists(const Case& c, long slots, std::mt19937& rng) {
  long E = (long)c.counts.size();
  Lists r{std::vector<long long>(E), std::vector<long long>(E), std::vector<int>(slots), {}, std::min(E, slots)};
  std::vector<int> perm(slots);
  for (long i = 0; i < slots; i++) perm[i] = (int)i;
  std::shuffle(perm.begin(), perm.end(), rng);
  long o = 0;
  for (long e = 0; e < E; e++) {
    r.counts[e] = c.counts[e], r.off[e] = o;
    std::vector<int> l(perm.begin() + o, perm.begin() + o + c.counts[e]);
    std::sort(l.begin(), l.end());
    for (long j = 0; j < c.counts[e]; j++) r.list[o + j] = l[j];
    o += c.counts[e];
  }
  r.act.assign(r.nact, -1);
  for (long e = 0, j = 0; e < E; e++) if (c.counts[e] > 0 && j < r.nact) r.act[j++] = (int)e;
  return r;
}

// make_weights: 3E random FP4 weights of N × K (codes, then scale bytes from scale()),
// each scale array at an odd offset of its allocation, so that rows start anywhere in a
// word; their ranges are g_valid's (a word holding a valid scale byte may be read
// whole), their allocations mem's.
template <class Scale>
static std::vector<Weight> make_weights(const Case& c, long E, std::mt19937& rng, std::vector<void*>& mem, Scale scale) {
  std::vector<Weight> tab(3 * E);
  for (long i = 0; i < 3 * E; i++) {
    size_t cb = (size_t)c.N * c.K / 2, sb = (size_t)c.N * c.K / 32;
    unsigned char* q = (unsigned char*)aligned_alloc(64, (cb + 63) / 64 * 64);
    unsigned char* sbase = (unsigned char*)aligned_alloc(64, (sb + 1 + 63) / 64 * 64 + 64);
    unsigned char* s = sbase + (i % 4);
    for (size_t j = 0; j < cb; j++) q[j] = (unsigned char)rng();
    for (size_t j = 0; j < sb; j++) s[j] = scale();
    g_valid.push_back({(const char*)q, (const char*)q + cb});
    g_valid.push_back({(const char*)((uintptr_t)s & ~(uintptr_t)3), (const char*)(((uintptr_t)(s + sb) + 3) & ~(uintptr_t)3)});
    mem.push_back(q), mem.push_back(sbase);
    tab[i] = Weight{q, s, 4, c.K};
  }
  return tab;
}

static int run_case(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  long Kp = (c.K + 127) / 128 * 128;
  long S = std::min(4L, std::max(1L, Kp / 512));
  long ks = (Kp / S + 127) / 128 * 128;
  S = (Kp + ks - 1) / ks;
  long E = (long)c.counts.size();
  long slots = 0;
  for (int n : c.counts) slots += n;
  long div = c.NW == 2 ? c.k : 1;
  long xrows = (slots + div - 1) / div;
  long P = Kp / 2;
  // weights: 3E of N × K
  g_valid.clear();
  std::vector<void*> mem;
  std::vector<Weight> tab = make_weights(c, E, rng, mem, [&]() {
    unsigned r = rng() % 100;
    return r < 5 ? (unsigned char)(129 + rng() % 6) : (unsigned char)(118 + rng() % 11);
  });
  auto rbf = [&]() -> unsigned {
    unsigned h = ((rng() & 1) << 15) | ((120 + rng() % 8) << 7) | (rng() & 127);
    unsigned l = ((rng() & 1) << 15) | ((120 + rng() % 8) << 7) | (rng() & 127);
    return h | (l << 16);
  };
  std::vector<unsigned> xh(xrows * P), xl(xrows * P);
  for (auto& v : xh) v = rbf();
  for (auto& v : xl) v = c.xexact ? 0 : rbf() & 0x7fff7fffu;  // any bits; smaller halves
  g_valid.push_back({(const char*)xh.data(), (const char*)(xh.data() + xh.size())});
  g_valid.push_back({(const char*)xl.data(), (const char*)(xl.data() + xl.size())});
  Lists ls = make_lists(c, slots, rng);
  auto &counts = ls.counts, &off = ls.off;
  auto &list = ls.list, &act = ls.act;
  long nact = ls.nact;
  long planes = c.NW == 2 ? 2 : 1;
  size_t psz = (size_t)planes * S * slots * c.N;
  std::vector<float> pp(psz), pr(psz), pf(psz);
  const unsigned SENT = 0x7fbadbadu;
  for (size_t i = 0; i < psz; i++) memcpy(&pp[i], &SENT, 4), memcpy(&pr[i], &SENT, 4), memcpy(&pf[i], &SENT, 4);
  FastMoEArgs a{};
  a.xh = xh.data(), a.xl = xl.data(), a.tab = tab.data(), a.counts = counts.data(), a.off = off.data();
  a.list = list.data(), a.act = act.data();
  a.slots = slots, a.k = c.k, a.E = E, a.N = c.N, a.K = c.K, a.Kp = Kp, a.S = S, a.ks = ks, a.nact = nact;
  a.xexact = c.xexact ? 1 : 0;
  long RB = c.NW == 2 ? 64 : 128;
  long blocks = nact * ((c.N + RB - 1) / RB) * S;
  a.part = pp.data();
  launch(c.NW == 2 ? fast_moe_up_fp4 : fast_moe_down_fp4, a, blocks);
  a.part = pr.data();
  launch(c.NW == 2 ? fast_moe_up_fp4_reg : fast_moe_down_fp4_reg, a, blocks);
  // with bf16 activations: the register tiles compiled for them (_regx) and the wide
  // tiles (64 slots a pass, two and three blocks an SM), against the register ones
  auto against_reg = [&](KernelFn up, KernelFn down, const char* name) {
    long n = 0;
    std::vector<float> pd(psz);
    for (size_t i = 0; i < psz; i++) memcpy(&pd[i], &SENT, 4);
    FastMoEArgs d = a;
    d.part = pd.data();
    launch(c.NW == 2 ? up : down, d, blocks);
    for (size_t i = 0; i < psz; i++)
      if (memcmp(&pd[i], &pr[i], 4) != 0) {
        if (n < 5) fprintf(stderr, "  %s %g reg %g at %zu\n", name, pd[i], pr[i], i);
        n++;
      }
    return n;
  };
  long ddiff = 0, wdiff = 0;
  if (c.xexact) {
    ddiff = against_reg(fast_moe_up_fp4_regx, fast_moe_down_fp4_regx, "regx");
    wdiff = against_reg(fast_moe_up_fp4_wide, fast_moe_down_fp4_wide, "wide");
  }
  a.part = pf.data();
  if (c.NW == 2) fp4_ref<2>(a, blocks); else fp4_ref<1>(a, blocks);
  long chain = 0;  // xexact: outputs that differ from the whole chain's
  if (c.xexact) {
    std::vector<float> pw(psz);
    for (size_t i = 0; i < psz; i++) memcpy(&pw[i], &SENT, 4);
    FastMoEArgs w = a;
    w.xexact = 0, w.part = pw.data();
    if (c.NW == 2) fp4_ref<2>(w, blocks); else fp4_ref<1>(w, blocks);
    for (size_t i = 0; i < psz; i++) chain += memcmp(&pw[i], &pf[i], 4) != 0;
  }
  long diff = 0, unwritten = 0, written = 0;
  double worst = 0;
  for (size_t i = 0; i < psz; i++) {
    unsigned bp, br, bf;
    memcpy(&bp, &pp[i], 4), memcpy(&br, &pr[i], 4), memcpy(&bf, &pf[i], 4);
    if (bp != br) { if (diff < 5) fprintf(stderr, "  pipe %g reg %g at %zu\n", pp[i], pr[i], i); diff++; }
    if ((bf == SENT) != (bp == SENT)) unwritten++;
    if (bf != SENT) {
      written++;
      double d = fabs((double)pp[i] - pf[i]) / std::max(1.0, fabs((double)pf[i]));
      if (!(d <= worst)) worst = d;
    }
  }
  printf("NW %d N %ld K %ld (Kp %ld, S %ld, ks %ld) experts %ld slots %ld blocks %ld%s: %ld written, %ld pipe != reg, %ld regx != reg, %ld wide != reg, %ld written sets differ, worst vs reference %.3g, %ld differ from the whole chain, errors %ld\n",
         c.NW, c.N, c.K, Kp, S, ks, E, slots, blocks, c.xexact ? " (xexact)" : "", written, diff, ddiff, wdiff, unwritten, worst, chain,
         (long)g_errors);
  for (void* m : mem) free(m);
  return diff == 0 && ddiff == 0 && wdiff == 0 && unwritten == 0 && worst == 0 && chain == 0 && g_errors == 0 ? 0 : 1;
}


// The block-scaled tiles (fast_moe_*_fp4_bs): the device code on fibers against the
// emulated loop (fp4_ref_bs) bit for bit, and both against a double-precision sum of the
// same products decoded here (e2m1 weights times 2^(scale − 127), E4M3 activations times
// their piece's scale): within 2^-20 of the sum of the terms' magnitudes. special puts
// scale bytes 0 and 255 (2^-127, NaN) among the weights' (the step's exact form).
static double e2m1_val(unsigned c) {
  static const double m[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (c & 8 ? -1 : 1) * m[c & 7];
}
static double e4m3_val(unsigned c) {
  unsigned e = (c >> 3) & 15, m = c & 7;
  double r = e == 0 ? ldexp((double)m, -9) : ldexp(1 + m / 8.0, (int)e - 7);
  return c & 128 ? -r : r;
}
static int run_bs_case(const Case& c, unsigned seed, bool special) {
  std::mt19937 rng(seed);
  long Kp = (c.K + 127) / 128 * 128;
  long S = std::min(4L, std::max(1L, Kp / 512));
  long ks = (Kp / S + 127) / 128 * 128;
  S = (Kp + ks - 1) / ks;
  long E = (long)c.counts.size(), slots = 0;
  for (int n : c.counts) slots += n;
  long div = c.NW == 2 ? c.k : 1, xrows = (slots + div - 1) / div, P = Kp / 2;
  g_valid.clear();
  std::vector<void*> mem;
  std::vector<Weight> tab = make_weights(c, E, rng, mem, [&]() {
    unsigned r = rng() % 1000;
    return special && r < 3 ? 0 : special && r < 5 ? 255 : r < 50 ? (unsigned char)(129 + rng() % 6) : (unsigned char)(112 + rng() % 17);
  });
  // activations: E4M3 codes (no NaN) as halves in bs_store_piece's order and a
  // power-of-two scale (times 64) a piece of 32; xcode keeps each value's code
  std::vector<unsigned> xh(xrows * P, 0), xl(xrows * P, 0);
  std::vector<unsigned char> xcode(xrows * Kp, 0);
  for (long m = 0; m < xrows; m++)
    for (long p = 0; p < Kp / 32; p++) {
      bool in = p * 32 < c.K;
      for (int v = 0; v < 32; v++) {
        unsigned code = rng() & 255;
        if ((code & 127) == 127) code ^= 1;
        xcode[m * Kp + 32 * p + v] = in ? code : 0;
      }
      for (int w = 0; w < 16; w++) {  // word 4t + 2o + j: codes 8t + 4j + o and that + 2
        int v0 = 8 * (w >> 2) + 4 * (w & 1) + ((w >> 1) & 1);
        xh[m * P + 16 * p + w] = h_of_e4m3(xcode[m * Kp + 32 * p + v0]) | h_of_e4m3(xcode[m * Kp + 32 * p + v0 + 2]) << 16;
      }
      float fs = in ? ldexpf(64.0f, -(int)(rng() % 12)) : 0.0f;
      memcpy(&xl[m * P + p], &fs, 4);
    }
  Lists ls = make_lists(c, slots, rng);
  auto &counts = ls.counts, &off = ls.off;
  auto &list = ls.list, &act = ls.act;
  long nact = ls.nact;
  long planes = c.NW == 2 ? 2 : 1;
  size_t psz = (size_t)planes * S * slots * c.N;
  const unsigned SENT = 0x7fbadbadu;
  std::vector<float> pd(psz), pf(psz);
  for (size_t i = 0; i < psz; i++) memcpy(&pd[i], &SENT, 4), memcpy(&pf[i], &SENT, 4);
  FastMoEArgs a{};
  a.xh = xh.data(), a.xl = xl.data(), a.tab = tab.data(), a.counts = counts.data(), a.off = off.data();
  a.list = list.data(), a.act = act.data();
  a.slots = slots, a.k = c.k, a.E = E, a.N = c.N, a.K = c.K, a.Kp = Kp, a.S = S, a.ks = ks, a.nact = nact, a.xexact = 1;
  long RB = c.NW == 2 ? 64 : 128, blocks = nact * ((c.N + RB - 1) / RB) * S;
  a.part = pd.data();
  launch(c.NW == 2 ? fast_moe_up_fp4_bs : fast_moe_down_fp4_bs, a, blocks);
  a.part = pf.data();
  if (c.NW == 2) fp4_ref_bs<2>(a, blocks); else fp4_ref_bs<1>(a, blocks);
  long diff = 0, unwritten = 0, written = 0, nans = 0, far = 0;
  double worst = 0;
  for (size_t i = 0; i < psz; i++) {
    unsigned bd, bf;
    memcpy(&bd, &pd[i], 4), memcpy(&bf, &pf[i], 4);
    if (bd != bf && !(pd[i] != pd[i] && pf[i] != pf[i])) { if (diff < 5) fprintf(stderr, "  bs %g ref %g at %zu\n", pd[i], pf[i], i); diff++; }
    if ((bd == SENT) != (bf == SENT)) unwritten++;
    if (bf == SENT) continue;
    written++;
    // the double sum: part index ((plane·S + s)·slots + slot)·N + n
    long n = (long)(i % c.N), slot = (long)((i / c.N) % slots), sl = (long)((i / c.N / slots) % S), plane = (long)(i / c.N / slots / S);
    long e = -1;
    for (long q = 0; q < E; q++) for (long j = 0; j < counts[q]; j++) if (list[off[q] + j] == slot) e = q;
    const Weight& w = c.NW == 2 ? tab[plane == 0 ? e : 2 * E + e] : tab[E + e];
    long m = slot / div;
    double sum = 0, mag = 0;
    bool nan = false;
    for (long k = sl * ks; k < std::min(c.K, (sl + 1) * ks); k++) {
      unsigned code = (((const unsigned char*)w.p)[n * (c.K / 2) + k / 2] >> (4 * (k & 1))) & 15;
      unsigned sb = w.s[n * (c.K / 32) + k / 32];
      unsigned xb = xcode[m * Kp + k];
      float fs;
      memcpy(&fs, &xl[m * P + k / 32], 4);
      if (sb == 255) nan = true;
      double term = e2m1_val(code) * ldexp(1.0, (int)sb - 127) * e4m3_val(xb) * fs / 64;
      sum += term, mag += fabs(term);
    }
    if (nan) { nans += pf[i] != pf[i]; continue; }
    double d = fabs(pf[i] - sum) / std::max(mag, 1e-30);
    if (!(d <= worst)) worst = d;
    if (!(d <= ldexp(1.0, -20))) far++;
  }
  printf("bs NW %d N %ld K %ld (Kp %ld, S %ld) experts %ld slots %ld blocks %ld%s: %ld written, %ld device != emulated, %ld written sets differ, worst vs the double sum %.3g (%ld past 2^-20), %ld NaN from NaN scales, errors %ld\n",
         c.NW, c.N, c.K, Kp, S, E, slots, blocks, special ? " (scale bytes 0, 255)" : "", written, diff, unwritten, worst, far, nans, (long)g_errors);
  for (void* q : mem) free(q);
  return diff == 0 && unwritten == 0 && far == 0 && written > 0 && (!special || nans > 0) && g_errors == 0 ? 0 : 1;
}

// fast_quant_split with layout 2 (the block-scaled tiles' activations) on fibers:
// each piece's halves and scale as bs_store_piece stores q_mx_scale's and q_mx_round's
// (the emulated device's), for rows of random values, a zero piece and the pieces past
// K; and q_f16_bits on every E4M3 value against this file's encoding.
static int run_bs_split(unsigned seed) {
  int bad = 0;
  for (unsigned c = 0; c < 256; c++) {
    if ((c & 127) == 127) continue;
    unsigned e = (c >> 3) & 15, m = c & 7;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + m / 8.0f, (int)e - 7);
    if (c & 128) v = -v;
    if (q_f16_bits(v) != h_of_e4m3(c) || h_val(h_of_e4m3(c)) != v) {
      if (bad < 5) fprintf(stderr, "  code %u: q_f16_bits(%g) %x, here %x (%g)\n", c, v, q_f16_bits(v), h_of_e4m3(c), h_val(h_of_e4m3(c)));
      bad++;
    }
  }
  std::mt19937 rng(seed);
  const long M = 3, K = 160, Kp = 256, P = Kp / 2;
  std::vector<float> x(M * K);
  for (auto& v : x) v = ldexpf((float)((int)(rng() % 2001) - 1000), -(int)(rng() % 20));
  for (long k = 32; k < 64; k++) x[1 * K + k] = 0;  // a zero piece
  std::vector<unsigned> xh(M * P, 0xdeadbeefu), xl(M * P, 0xdeadbeefu), wh(M * P, 0xdeadbeefu), wl(M * P, 0xdeadbeefu);
  long long err = 0;
  FastQuantSplitArgs a{x.data(), xh.data(), xl.data(), M, K, Kp, 2, 2, &err};
  fibers_launch(fast_quant_split, a, (M * (Kp / 32) * 32 + 127) / 128);
  for (long r = 0; r < M; r++)
    for (long p = 0; p < Kp / 32; p++) {
      float code[32] = {0};
      float s = 0;
      if (p * 32 + 32 <= K) {
        float v[32], amax = 0;
        for (int j = 0; j < 32; j++) v[j] = q_bf16(x[r * K + p * 32 + j]), amax = std::max(amax, fabsf(v[j]));
        s = q_mx_scale(amax);
        for (int j = 0; j < 32; j++) code[j] = q_mx_round(v[j], s);
      }
      bs_store_piece(wh.data(), wl.data(), r, P, p, code, s);
    }
  long diff = 0;
  for (long r = 0; r < M; r++)
    for (long i = 0; i < Kp / 2 + Kp / 32; i++) {
      bool code = i < Kp / 2;
      long at = r * P + (code ? i : i - Kp / 2);
      if ((code ? xh[at] : xl[at]) != (code ? wh[at] : wl[at])) { if (diff < 5) fprintf(stderr, "  split row %ld word %ld\n", r, i); diff++; }
    }
  printf("bs split: %d q_f16_bits wrong, %ld words differ, error %lld, errors %ld\n", bad, diff, err, (long)g_errors);
  return bad == 0 && diff == 0 && err == 0 && g_errors == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  std::vector<Case> cases = {
      {2, 96, 192, {1, 9, 17, 0, 3}, 3},          // tiny-v41-dev2's up: K tail, N tail, passes
      {1, 192, 96, {1, 9, 17, 0, 3}, 1},          // its down: one step (fewer than the prologue)
      {2, 200, 1120, {6, 33, 8, 16}, 2},          // 2 slices of 5 and 4 steps, K tail, odd scale rows
      {1, 300, 2048, {5, 16, 17}, 1},             // 4 slices of 4 steps, partial third row block
      {1, 128, 1024 + 384, {2, 7}, 1},            // S 2: slices of 6 and 5 steps
      {2, 64, 4096, {6, 17}, 2},                  // V4-Flash's up: 4 slices of 8 steps
      {2, 200, 1120, {6, 33, 8, 16}, 2, true},    // bf16 activations, no lo mma (V4.1's MXFP8 values)
      {1, 300, 2048, {5, 16, 17}, 1, true},
      {2, 96, 640, {70, 130, 0, 9}, 6, true},     // many slots an expert (a prefill's): 64-slot passes, partial tiles
      {1, 160, 384, {64, 65, 1}, 1, true},
  };
  int bad = 0;
  unsigned seed = 1;
  for (auto& c : cases) bad += run_case(c, seed++);
  // the block-scaled tiles: bf16-valued activations' shapes (V4.1's), and scale bytes 0
  // and 255
  for (auto& c : cases)
    if (c.xexact) bad += run_bs_case(c, seed++, false);
  bad += run_bs_case(cases[6], seed++, true);
  bad += run_bs_case({2, 64, 512, {3, 1, 0, 12, 2}, 8, true}, seed++, false);  // one step a pass
  bad += run_bs_split(seed++);
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
