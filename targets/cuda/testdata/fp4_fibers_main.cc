// fp4_fibers_main.cc: TestFP4DeviceCodeOnHostFibers' cases (follows fp4_fibers.h and the
// kernel sources' device branch): random FP4 experts and activation halves, each case's
// launch run by fast_moe_*_fp4 (pipelined), fast_moe_*_fp4_reg and the emulated loop
// (fp4_ref) and fast_moe_*_fp4_reg8 and _reg8a, and with bf16 activations (xexact) fast_moe_*_fp4_regx, _rega and
// fast_moe_*_fp4_wide (64 slots a pass), without them fast_moe_*_fp4_widel (32 slots a pass,
// both halves); all must write the same outputs, bit for bit.
#include <random>
#include <algorithm>
typedef void (*KernelFn)(const FastMoEArgs);
static void launch(KernelFn fn, const FastMoEArgs& a, long blocks) { fibers_launch(fn, a, blocks); }

// xexact: bf16 activations (lo halves zero) and the tiles told so (no lo mma); the
// emulated loop's whole chain on the same halves must then give the same values too
struct Case { int NW; long N, K; std::vector<int> counts; int k; bool xexact = false; };

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
  std::vector<Weight> tab(3 * E);
  g_valid.clear();
  std::vector<void*> mem;
  for (long i = 0; i < 3 * E; i++) {
    size_t cb = (size_t)c.N * c.K / 2, sb = (size_t)c.N * c.K / 32;
    unsigned char* q = (unsigned char*)aligned_alloc(64, (cb + 63) / 64 * 64);
    // scales at an odd offset of their allocation, so that rows start anywhere in a word
    unsigned char* sbase = (unsigned char*)aligned_alloc(64, (sb + 1 + 63) / 64 * 64 + 64);
    unsigned char* s = sbase + (i % 4);
    for (size_t j = 0; j < cb; j++) q[j] = (unsigned char)rng();
    for (size_t j = 0; j < sb; j++) {
      unsigned r = rng() % 100;
      s[j] = r < 5 ? (unsigned char)(129 + rng() % 6) : (unsigned char)(118 + rng() % 11);
    }
    g_valid.push_back({(const char*)q, (const char*)q + cb});
    // a word holding a valid scale byte may be read whole
    g_valid.push_back({(const char*)((uintptr_t)s & ~(uintptr_t)3), (const char*)(((uintptr_t)(s + sb) + 3) & ~(uintptr_t)3)});
    mem.push_back(q), mem.push_back(sbase);
    tab[i] = Weight{q, s, 4, c.K};
  }
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
  std::vector<long long> counts(E), off(E);
  std::vector<int> list(slots);
  {
    std::vector<int> perm(slots);
    for (long i = 0; i < slots; i++) perm[i] = (int)i;
    std::shuffle(perm.begin(), perm.end(), rng);
    long o = 0;
    for (long e = 0; e < E; e++) {
      counts[e] = c.counts[e], off[e] = o;
      std::vector<int> l(perm.begin() + o, perm.begin() + o + c.counts[e]);
      std::sort(l.begin(), l.end());
      for (long j = 0; j < c.counts[e]; j++) list[o + j] = l[j];
      o += c.counts[e];
    }
  }
  // active experts (those with slots), then -1s up to nact
  long nact = std::min(E, slots);
  std::vector<int> act(nact, -1);
  {
    long j = 0;
    for (long e = 0; e < E; e++) if (c.counts[e] > 0 && j < nact) act[j++] = (int)e;
  }
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
  bool tiled = false;
  if (c.xexact) {
    ddiff = against_reg(fast_moe_up_fp4_regx, fast_moe_down_fp4_regx, "regx");
    ddiff += against_reg(fast_moe_up_fp4_rega, fast_moe_down_fp4_rega, "rega");
    wdiff = against_reg(fast_moe_up_fp4_wide, fast_moe_down_fp4_wide, "wide");
    if (c.N % 16 == 0 && c.K % 128 == 0) {
      // _regt: the same weights in the tiled layout (DEEPINFER_CUDA_FP4_TILED; written
      // here from its definition, not from the kernels' helpers): value (r, k) of a row
      // group's 16 × 128 tile at codes 512·((r/8)%2) + 16·(4·(r%8) + (k%128)/32) + (k%32)/2
      // of the tile's 1,024 bytes, its scale at 2·(4·(r%8) + (k%128)/32) + (r/8)%2 of 64;
      // tiles in row-group order, then along K
      std::vector<Weight> tt(3 * E);
      for (long i = 0; i < 3 * E; i++) {
        const unsigned char* q = (const unsigned char*)tab[i].p;
        const unsigned char* sc = tab[i].s;
        size_t cb = (size_t)c.N * c.K / 2, sb = (size_t)c.N * c.K / 32;
        unsigned char* tq = (unsigned char*)aligned_alloc(64, (cb + 63) / 64 * 64);
        unsigned char* ts = (unsigned char*)aligned_alloc(64, (sb + 63) / 64 * 64);
        for (long r = 0; r < c.N; r++)
          for (long k = 0; k < c.K; k += 32) {
            long tile = (r / 16) * (c.K / 128) + k / 128, lane = 4 * (r % 8) + (k % 128) / 32, h8 = (r / 8) % 2;
            memcpy(tq + tile * 1024 + 512 * h8 + 16 * lane, q + r * (c.K / 2) + k / 2, 16);
            ts[tile * 64 + 2 * lane + h8] = sc[r * (c.K / 32) + k / 32];
          }
        g_valid.push_back({(const char*)tq, (const char*)tq + cb});
        g_valid.push_back({(const char*)ts, (const char*)ts + sb});
        mem.push_back(tq), mem.push_back(ts);
        tt[i] = Weight{tq, ts, 6, c.K};
      }
      const Weight* keep = a.tab;
      a.tab = tt.data();
      ddiff += against_reg(fast_moe_up_fp4_regt, fast_moe_down_fp4_regt, "regt");
      ddiff += against_reg(fast_moe_up_fp4_regb, fast_moe_down_fp4_regb, "regb");  // by bulk copies
      ddiff += against_reg(fast_moe_up_fp4_regbd, fast_moe_down_fp4_regbd, "regbd");  // rings of 8
      wdiff += against_reg(fast_moe_up_fp4_widet, fast_moe_down_fp4_widet, "widet");  // the wide tiles
      a.tab = keep;
      tiled = true;
    }
  } else {
    wdiff = against_reg(fast_moe_up_fp4_widel, fast_moe_down_fp4_widel, "widel");  // both halves, 32 slots a pass
  }
  ddiff += against_reg(fast_moe_up_fp4_reg8, fast_moe_down_fp4_reg8, "reg8");  // any activations
  ddiff += against_reg(fast_moe_up_fp4_reg8a, fast_moe_down_fp4_reg8a, "reg8a");
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
  // bf16 activations (V4.1's): the fp8 numerics' e4m3 tiles on random E4M3 codes (no
  // NaN code) and power-of-two piece scales against their definition (fp4_e4_ref, the
  // emulated branch), bit for bit, every output written
  long ediff = 0, eunw = 0;
  if (c.xexact) {
    std::vector<unsigned char> xq(xrows * c.K);
    std::vector<float> xe(xrows * (c.K / 32));
    for (auto& v : xq) { v = (unsigned char)rng(); if ((v & 0x7f) == 0x7f) v ^= 1; }
    for (auto& v : xe) v = std::ldexp(1.0f, (int)(rng() % 12) - 9);
    g_valid.push_back({(const char*)xq.data(), (const char*)(xq.data() + xq.size())});
    g_valid.push_back({(const char*)xe.data(), (const char*)(xe.data() + xe.size())});
    std::vector<float> pe(psz), pq(psz);
    for (size_t i = 0; i < psz; i++) memcpy(&pe[i], &SENT, 4), memcpy(&pq[i], &SENT, 4);
    FastMoEArgs e = a;
    e.xq = xq.data(), e.xe = xe.data();
    e.part = pe.data();
    launch(c.NW == 2 ? fast_moe_up_fp4_e4 : fast_moe_down_fp4_e4, e, blocks);
    e.part = pq.data();
    if (c.NW == 2) fp4_e4_ref<2>(e, blocks); else fp4_e4_ref<1>(e, blocks);
    std::vector<float> pt(psz);  // the 16-byte loads with the quad's words exchanged (e4t)
    for (size_t i = 0; i < psz; i++) memcpy(&pt[i], &SENT, 4);
    e.part = pt.data();
    launch(c.NW == 2 ? fast_moe_up_fp4_e4t : fast_moe_down_fp4_e4t, e, blocks);
    std::vector<float> pw(psz);  // on wgmma (e4w)
    for (size_t i = 0; i < psz; i++) memcpy(&pw[i], &SENT, 4);
    e.part = pw.data();
    launch(c.NW == 2 ? fast_moe_up_fp4_e4w : fast_moe_down_fp4_e4w, e, blocks);
    for (size_t i = 0; i < psz; i++) {
      if (memcmp(&pe[i], &pq[i], 4) != 0 || memcmp(&pt[i], &pq[i], 4) != 0 || memcmp(&pw[i], &pq[i], 4) != 0) {
        if (ediff < 5) fprintf(stderr, "  e4 %g e4t %g e4w %g ref %g at %zu\n", pe[i], pt[i], pw[i], pq[i], i);
        ediff++;
      }
      eunw += (memcmp(&pq[i], &SENT, 4) == 0) != (memcmp(&pr[i], &SENT, 4) == 0);
    }
    printf("  e4m3 tiles (e4, e4t, e4w): %ld != their definition, %ld written sets differ from the register tiles'\n", ediff, eunw);
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
  printf("NW %d N %ld K %ld (Kp %ld, S %ld, ks %ld) experts %ld slots %ld blocks %ld%s: %ld written, %ld pipe != reg, %ld regx/rega/reg8/reg8a%s != reg, %ld wide%s != reg, %ld written sets differ, worst vs reference %.3g, %ld differ from the whole chain, errors %ld\n",
         c.NW, c.N, c.K, Kp, S, ks, E, slots, blocks, c.xexact ? " (xexact)" : "", written, diff, ddiff, tiled ? "/regt/regb/regbd" : "", wdiff, tiled ? "/widet" : "", unwritten, worst, chain,
         (long)g_errors);
  for (void* m : mem) free(m);
  return diff == 0 && ddiff == 0 && wdiff == 0 && unwritten == 0 && worst == 0 && chain == 0 && ediff == 0 && eunw == 0 && g_errors == 0 ? 0 : 1;
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
      {2, 64, 4096, {6, 17, 0, 2}, 2, true},     // the tiled layout (regt): 4 slices of 8 steps
      {1, 128, 1408, {2, 7, 1}, 1, true},         // tiled, S 2: slices of 6 and 5 steps
      {2, 48, 2304, {3, 1, 12}, 2, true},         // tiled, V4.1's I (18 steps), a partial row block
      {2, 32, 6144, {3, 20}, 2, true},            // tiled, 12 steps a slice (the rings wrap in a pass), two warps without rows
      {2, 96, 640, {70, 130, 0, 9, 32, 33}, 6},   // float32 activations, many slots: 32-slot passes (widel), partial tiles
      {1, 160, 384, {64, 65, 1, 31}, 1},
  };
  int bad = 0;
  unsigned seed = 1;
  for (auto& c : cases) bad += run_case(c, seed++);
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
