// route_fold_fibers_main.cc: TestLaunchCutsOnHostFibers' cases (follows fp4_fibers.h, the
// headers, dense41.cu and moe.cu's device branches): moe_route_v41 folding each
// token's router logits from their lanes itself (fold, an expert a lane in turn) against
// moe_fast_gate41_sum then moe_route_v41 without fold — the routing weights, the experts
// chosen and every expert's score and selection value bit for bit — on decode tokens
// and sequences of several rows (MKL's other orders), with and without a bias, experts
// past a warp's multiples.
#include <random>
#include <vector>

static int route_case(std::vector<long> ns, long E, long D, long k, bool bias, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<SeqRec> seqs;
  long T = 0;
  for (long n : ns) {
    seqs.push_back(SeqRec{T, n, 100 + T, 0, n == 1 ? SEQ_DECODE : 0});
    T += n;
  }
  std::vector<float> x(T * D), g(E * D), bv(E);
  for (auto& v : x) v = nd(rng);
  for (auto& v : g) v = nd(rng) * 0.05f;
  for (auto& v : bv) v = nd(rng) * 0.1f;
  Weight gate{}, bw{};
  gate.fmt = 0, gate.cols = D, gate.p = g.data();
  bw.fmt = 0, bw.cols = E, bw.p = bv.data();
  std::vector<float> part(T * E * 16);
  MoERoute41Args a{};
  a.x = x.data(), a.gate = gate, a.bias = bw, a.has_bias = bias, a.T = T, a.E = E, a.D = D, a.k = k, a.norm = 1, a.scale = 1.5;
  a.seqs = seqs.data(), a.nseq = (long)seqs.size(), a.keep = 0, a.part = part.data();
  // the lanes, as moe_fast_gate41_part leaves them
  for (long t = 0; t < T; t++)
    for (long e = 0; e < E; e++) {
      long long first, rows;
      FRow xr;
      WRow w;
      if (!moe_gate41_at(a, t, e, &xr, &w, &first, &rows)) continue;
      for (int l = 0; l < 16; l++) part[(t * E + e) * 16 + l] = mkl_lane(xr, w, rows, D, E, l);
    }
  const long sbytes = T * (2 * E + k) * 8;
  std::vector<char> s1(sbytes, 0), s2(sbytes, 0);
  std::vector<float> w1(T * k, -1), w2(T * k, -2);
  std::vector<int> i1(T * k, -1), i2(T * k, -2);
  long before = g_errors;
  a.scratch = s1.data(), a.wout = w1.data(), a.idout = i1.data(), a.fold = 0;
  fibers_launch(moe_fast_gate41_sum, a, (T * E + 127) / 128);
  fibers_launch(moe_route_v41, a, T);
  a.scratch = s2.data(), a.wout = w2.data(), a.idout = i2.data(), a.fold = 1;
  fibers_launch(moe_route_v41, a, T);
  long diff = 0;
  for (long i = 0; i < T * k; i++) diff += __float_as_uint(w1[i]) != __float_as_uint(w2[i]) || i1[i] != i2[i];
  for (long t = 0; t < T; t++)  // the scores and selection values (the pick lists are the kernel's scratch)
    for (long b = 0; b < 2 * E * 8 - 4 * E; b++) diff += s1[t * (2 * E + k) * 8 + b] != s2[t * (2 * E + k) * 8 + b];
  printf("route T %ld E %ld D %ld k %ld bias %d: %ld values differ, errors %ld\n", T, E, D, k, bias, diff, g_errors - before);
  return diff || g_errors != before;
}

static int route_cases() {
  int bad = 0;
  unsigned seed = 1;
  bad += route_case({1}, 384, 512, 6, true, seed++);         // V4.1's experts, a decode token
  bad += route_case({1, 1, 1, 1}, 384, 256, 6, false, seed++);
  bad += route_case({3, 1, 5}, 70, 96, 4, true, seed++);     // several rows a sequence: MKL's other orders
  bad += route_case({2, 6}, 33, 64, 2, false, seed++);
  return bad;
}
