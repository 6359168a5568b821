// index_fibers_main.cc: TestIndexScoreTileOnHostFibers' cases (follows fp4_fibers.h, the
// headers and attention.cu's device branch): V4's index scores a launch block per row and
// 64 entries (att_index_score_t, 64 entries × 64 heads of dots in registers, keys and
// queries staged 16 values at a time) against att_index_score_item (att_index_score's
// per-(row, entry) work), every score bit for bit, and the scores of entries a row does
// not see left as they were.
#include <random>
#include <vector>

// index_case: T rows in sequences of one row (decode), a three-row sequence at row multi
// and row skip in no sequence; H heads of D query values, compressor ratio r, an entry
// cache of maxe rows a sequence (positions spread so that some rows see every entry,
// some a few, some none).
static int index_case(long T, long H, long D, long r, long maxe, long multi, long skip, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const long width = 2 * D, off = 64;  // the cache after 64 bytes of other state
  const long cache = 2 * r * width + 2 * r * D + maxe * D;  // floats: att_cache's layout
  std::vector<SeqRec> seqs;
  std::vector<int> pos(T);
  for (long t = 0; t < T; t++) {
    if (t == skip) continue;
    long n = t == multi && t + 3 <= T && (skip < t || skip >= t + 3) ? 3 : 1;
    long p0 = (long)(rng() % (unsigned)(r * maxe + 2 * r * 128));  // past the cache's end too
    seqs.push_back(SeqRec{t, n, p0, 0, n == 1 ? SEQ_DECODE : 0});
    for (long j = 0; j < n; j++) pos[t + j] = (int)(p0 + j);
    t += n - 1;
  }
  std::vector<std::vector<float>> state(seqs.size());
  for (size_t q = 0; q < seqs.size(); q++) {
    state[q].resize(off / 4 + cache);
    for (auto& v : state[q]) v = nd(rng);
    seqs[q].state = (long long)(unsigned long long)state[q].data();
  }
  std::vector<float> qf(T * H * D), w(T * H);
  for (auto& v : qf) v = nd(rng);
  for (auto& v : w) v = nd(rng);
  std::vector<double> qd(T * H * D);
  for (size_t i = 0; i < qf.size(); i++) qd[i] = (double)qf[i];
  const double unset = -12345.0;
  std::vector<double> want(T * maxe, unset);
  AttIndexArgs a{};
  a.q = qf.data(), a.w = w.data(), a.pos = pos.data(), a.seqs = seqs.data(), a.nseq = (long)seqs.size(), a.T = T;
  a.off = off, a.ratio = r, a.width = width, a.cdim = D, a.heads = H, a.dim = D, a.topk = 8;
  a.scale = 0.0883883476483184, a.maxe = maxe, a.qd = qd.data();
  std::vector<long long> vis(2 * T);  // att_index_qd's
  for (long t = 0; t < T; t++) {
    SeqRec sr;
    vis[2 * t] = att_index_visible(a, t, &sr), vis[2 * t + 1] = att_seq_of(a.seqs, a.nseq, t);
  }
  a.vis = vis.data();
  a.scores = want.data();
  for (long i = 0; i < T * maxe; i++) att_index_score_item(a, i);
  std::vector<double> got(T * maxe, unset);
  a.scores = got.data();
  long before = g_errors;
  fibers_launch(att_index_score_t, a, T * ((maxe + 63) / 64));
  long diff = 0, scored = 0;
  for (long i = 0; i < T * maxe; i++) {
    if (memcmp(&got[i], &want[i], 8) != 0) {
      if (diff < 3) fprintf(stderr, "  score %ld: %.17g, want %.17g\n", i, got[i], want[i]);
      diff++;
    }
    scored += want[i] != unset;
  }
  printf("att_index_score_t T %ld H %ld D %ld ratio %ld entries %ld: %ld of %ld scored, %ld differ, errors %ld\n", T, H, D,
         r, maxe, scored, T * maxe, diff, g_errors - before);
  return diff == 0 && scored > 0 && g_errors == before ? 0 : 1;
}

int main() {
  int bad = 0;
  unsigned seed = 1;
  bad += index_case(6, 20, 32, 4, 300, 2, 5, seed++);   // heads not a multiple of 8, blocks of 64 and a partial one
  bad += index_case(4, 64, 128, 4, 200, -1, -1, seed++); // V4-Flash's 64 heads of 128 values
  bad += index_case(5, 16, 72, 2, 129, 0, 3, seed++);    // one entry past two blocks
  bad += index_case(3, 3, 8, 1, 40, -1, 1, seed++);      // fewer entries than a block
  bad += index_case(4, 64, 40, 4, 190, 1, -1, seed++);   // key values past two stages of 16
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
