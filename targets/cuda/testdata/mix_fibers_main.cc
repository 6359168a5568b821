// mix_fibers_main.cc: TestLaunchCutsOnHostFibers' cases (follows fp4_fibers.h, the headers
// and mhc.cu's device branch): mhc_mix41_split folding each token's mHC mixes and RMS
// scale from their lanes itself (fold, half a warp a token) against mhc_fast_mix41_sum
// then mhc_mix41_split without fold — pre, post, comb, the scaled mixes and the scale
// bit for bit — on decode tokens and sequences of several rows (MKL's other orders), an
// odd token count (a warp's second half idle), V4.1's width and a small one.
#include <random>
#include <vector>

static int mix_case(std::vector<long> ns, long d, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const long n = 4, m = (2 + n) * n, K = n * d;
  std::vector<SeqRec> seqs;
  long T = 0;
  for (long q : ns) {
    seqs.push_back(SeqRec{T, q, 50 + T, 0, q == 1 ? SEQ_DECODE : 0});
    T += q;
  }
  std::vector<float> x(T * K), fn(m * K), base(m), scale(3);
  for (auto& v : x) v = nd(rng);
  for (auto& v : fn) v = nd(rng) * 0.02f;
  for (auto& v : base) v = nd(rng) * 0.5f;
  for (auto& v : scale) v = 0.5f + nd(rng) * 0.1f;
  Weight wf{}, wb{}, ws{};
  wf.fmt = 0, wf.cols = K, wf.p = fn.data();
  wb.fmt = 0, wb.cols = m, wb.p = base.data();
  ws.fmt = 0, ws.cols = 3, ws.p = scale.data();
  std::vector<float> part(T * (m * 16 + 32));
  std::vector<float> mix1(T * m, -1), mix2(T * m, -2), rs1(T, -1), rs2(T, -2);
  std::vector<float> pre1(T * n), pre2(T * n), post1(T * n), post2(T * n), comb1(T * n * n), comb2(T * n * n);
  mhc_FastMix41Args pa{x.data(), wf, part.data(), mix1.data(), rs1.data(), T, m, K, 1e-6, seqs.data(), (long)seqs.size(), 0};
  long before = g_errors;
  fibers_launch(mhc_fast_mix41_part, pa, (T * (m * 16 + 32) + 127) / 128);
  fibers_launch(mhc_fast_mix41_sum, pa, (T * (m + 1) + 127) / 128);
  mhc_Mix41SplitArgs a{};
  a.x = x.data(), a.base = wb, a.scale = ws, a.T = T, a.n = n, a.K = K, a.norm_eps = 1e-6, a.eps = 1e-6, a.iters = 20;
  a.seqs = seqs.data(), a.nseq = (long)seqs.size(), a.keep = 0, a.fn = wf, a.part = part.data();
  a.mix = mix1.data(), a.rs = rs1.data(), a.pre = pre1.data(), a.post = post1.data(), a.comb = comb1.data(), a.fold = 0;
  fibers_launch(mhc_mix41_split, a, (T * 16 + 127) / 128);
  a.mix = mix2.data(), a.rs = rs2.data(), a.pre = pre2.data(), a.post = post2.data(), a.comb = comb2.data(), a.fold = 1;
  fibers_launch(mhc_mix41_split, a, (T * 16 + 127) / 128);
  long diff = 0;
  auto cmp = [&](const std::vector<float>& p, const std::vector<float>& q) {
    for (size_t i = 0; i < p.size(); i++) diff += __float_as_uint(p[i]) != __float_as_uint(q[i]);
  };
  cmp(mix1, mix2), cmp(rs1, rs2), cmp(pre1, pre2), cmp(post1, post2), cmp(comb1, comb2);
  printf("mix T %ld d %ld: %ld values differ, errors %ld\n", T, d, diff, g_errors - before);
  return diff || g_errors != before;
}

static int mix_cases() {
  int bad = 0;
  unsigned seed = 1;
  // (an even token count: the fibers play a half warp's shuffles as the whole warp's)
  bad += mix_case({1, 1}, 5120, seed++);        // V4.1's width, two decode tokens
  bad += mix_case({1, 1, 1, 1}, 64, seed++);    // four decode tokens
  bad += mix_case({3, 1, 2, 2}, 96, seed++);    // sequences of several rows
  return bad;
}
