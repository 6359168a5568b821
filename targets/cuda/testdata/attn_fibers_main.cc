// attn_fibers_main.cc: TestDraftAttentionDeviceCodeOnHostFibers' cases (follows
// fp4_fibers.h, the headers and dspark41.cu's device branch): dspark_attention's warps (a
// warp a (row, head): the tags checked by lanes, the scores of keys l, l + 32, … a lane,
// the chunks' maxima, probabilities and sums, the accumulators of values l, l + 32, … a
// lane) on host fibers against dspark_attn_item, the serial form the emulated device runs,
// every output bit for bit and the same error: softmax blocks of fewer and more keys than
// a warp's lanes (V4.1's plans: 64), rings not yet full and wrapped, heads of
// fewer values than a warp, not a multiple of 32, and past DSPARK_ATT_DMAX (the serial
// form at lane 0), a sequence of more rows than the scratch's bound (the same), keys of
// -inf (a chunk of no mass skipped), NaNs, a row in no sequence, a block with no decoded
// token before it (error 501) and a ring missing a position (error 502); nothing written
// past the scratch.
#include <random>
#include <vector>

struct AttnSeq {
  long n, pos;  // rows this step, position of the first
};

static int attn_case(const char* what, std::vector<AttnSeq> seqs, long extra, long heads, long dim, long window,
                     long block, long cap, int kind, unsigned seed) {
  std::mt19937 rng(seed);
  auto val = [&]() { return ((float)(rng() % 20001) - 10000.0f) / 4099.0f; };
  long T = extra;  // rows in no sequence, after the sequences' rows
  for (auto& s : seqs) T += s.n;
  const long stride = block + dim > window + block ? block + dim : window + block;
  std::vector<float> q(T * heads * dim), kv(T * dim), sink(heads);
  for (auto& v : q) v = val();
  for (auto& v : kv) v = val();
  for (auto& v : sink) v = val();
  const long ring_bytes = 8 * cap + 4 * cap * dim, off = 24;
  std::vector<std::vector<long long>> states;  // (8-byte aligned blocks)
  std::vector<SeqRec> recs;
  long row = 0;
  for (size_t k = 0; k < seqs.size(); k++) {
    states.emplace_back((off + ring_bytes) / 8 + 1, 0);
    char* st = (char*)states.back().data() + off;
    long long* tags = (long long*)st;
    float* ring = (float*)(st + 8 * cap);
    const long p = seqs[k].pos - 1;
    // the ring holds positions max(0, p - cap + 1) .. p
    for (long qp = p - cap + 1 < 0 ? 0 : p - cap + 1; qp <= p; qp++) {
      tags[qp % cap] = qp + 1;
      for (long d = 0; d < dim; d++) ring[(qp % cap) * dim + d] = val();
    }
    if (kind == 1 && p >= 0) {  // keys of -inf: the first chunk has no mass when its keys all are
      for (long qp = p - window + 1 < 0 ? 0 : p - window + 1; qp <= p; qp++)
        if ((qp - p) % 3 != 0 || qp < p - window + 1 + block) ring[(qp % cap) * dim] = -__uint_as_float(0x7f800000u);
      for (long t = row; t < row + seqs[k].n; t++)
        for (long h = 0; h < heads; h++) q[(t * heads + h) * dim] = 1.0f + (float)h;
    }
    if (kind == 2 && p >= 0) ring[(p % cap) * dim + dim / 2] = __uint_as_float(0x7fc00000u);  // a NaN key value
    if (kind == 3 && p >= 2) tags[(p - 2) % cap] = 0;                                        // a position missing
    if (kind == 4 && p >= 0) tags[(p - p % window) % cap] = 0;                               // the first key's (j = 0)
    recs.push_back(SeqRec{row, seqs[k].n, seqs[k].pos, (i64)(intptr_t)st, SEQ_DECODE});
    row += seqs[k].n;
  }
  DSparkAttnArgs a{};
  a.q = q.data(), a.kv = kv.data();
  a.sink.p = sink.data(), a.sink.fmt = 0, a.sink.cols = heads;
  a.seqs = recs.data(), a.nseq = (i64)recs.size(), a.T = T, a.heads = heads, a.dim = dim, a.window = window;
  a.block = block, a.scale = 1.0 / std::sqrt((double)dim), a.off = 0, a.cap = cap, a.stride = stride;
  // the serial form
  const float sentinel = -123.25f;
  std::vector<float> want(T * heads * dim, sentinel), got(T * heads * dim, sentinel);
  std::vector<float> scratch(T * heads * stride + 1);
  i64 want_err = 0, err = 0;
  DSparkAttnArgs s = a;
  s.out = want.data(), s.err = &want_err, s.scratch = scratch.data();
  for (long it = 0; it < T * heads; it++) dspark_attn_item(s, it, scratch.data() + it * stride);
  const long canary = 64;  // floats past the scratch the kernel must not touch
  std::vector<float> scratch2(T * heads * stride + canary, sentinel);
  a.out = got.data(), a.err = &err, a.scratch = scratch2.data();
  long before = g_errors;
  fibers_launch(dspark_attention, a, (T * heads * 32 + 127) / 128);
  long diff = 0;
  for (long j = 0; j < T * heads * dim; j++)
    if (__float_as_uint(got[j]) != __float_as_uint(want[j])) {
      if (diff < 3) fprintf(stderr, "%s: out [%ld, %ld, %ld] %a, want %a\n", what, j / (heads * dim), j / dim % heads, j % dim, got[j], want[j]);
      diff++;
    }
  for (long j = T * heads * stride; j < T * heads * stride + canary; j++)
    if (__float_as_uint(scratch2[j]) != __float_as_uint(sentinel)) {
      fprintf(stderr, "%s: scratch written past its end at %ld\n", what, j - T * heads * stride);
      diff++;
      break;
    }
  long written = 0;
  for (long j = 0; j < T * heads * dim; j++) written += __float_as_uint(want[j]) != __float_as_uint(sentinel);
  printf("attention %s: %ld rows, %ld heads of %ld, window %ld, block %ld, ring %ld: %ld of %ld values written, %ld differ, err %ld (want %ld), errors %ld\n",
         what, T, heads, dim, window, block, cap, written, T * heads * dim, diff, (long)err, (long)want_err, g_errors - before);
  return diff || err != want_err || g_errors != before;
}

int main() {
  int bad = 0;
  unsigned seed = 1;
  // V4.1's shape, smaller: rings full and wrapped, and one not yet full
  bad += attn_case("wrapped", {{5, 300}, {5, 41}, {5, 3}}, 0, 2, 64, 40, 5, 40, 0, seed++);
  bad += attn_case("head 512", {{5, 200}, {5, 9}}, 0, 1, 512, 128, 5, 128, 0, seed++);
  // V4.1's softmax blocks of 64 keys (more than a warp's lanes), and of 40
  bad += attn_case("softmax 64", {{5, 300}, {5, 70}, {5, 20}}, 0, 2, 512, 128, 64, 128, 0, seed++);
  bad += attn_case("softmax 40", {{5, 90}}, 0, 2, 64, 100, 40, 100, 1, seed++);
  // heads of fewer values than a warp and not a multiple of 32; a larger ring than the window
  bad += attn_case("dim 20", {{3, 70}, {3, 2}}, 2, 3, 20, 33, 3, 50, 0, seed++);
  bad += attn_case("dim 40", {{5, 100}}, 0, 2, 40, 70, 5, 70, 0, seed++);
  // past DSPARK_ATT_DMAX (lane 0, the serial form)
  bad += attn_case("dim 1030", {{2, 30}}, 0, 1, DSPARK_ATT_DMAX + 6, 12, 2, 12, 0, seed++);
  // more keys than the scratch's bound (a sequence of twice the block's rows; serial)
  bad += attn_case("long block", {{5, 60}, {10, 80}}, 0, 2, 8, 64, 5, 64, 0, seed++);
  // keys of -inf (the first chunks of no mass), NaNs
  bad += attn_case("-inf keys", {{5, 90}, {5, 4}}, 0, 2, 33, 32, 5, 32, 1, seed++);
  bad += attn_case("NaN key", {{5, 90}, {4, 2}}, 1, 2, 48, 32, 4, 32, 2, seed++);
  // errors: a block with no token before it (501), a ring missing a position (502)
  bad += attn_case("no token", {{5, 40}, {5, 0}}, 0, 2, 32, 16, 5, 16, 0, seed++);
  bad += attn_case("missing", {{5, 40}}, 0, 2, 32, 16, 5, 16, 3, seed++);
  bad += attn_case("missing first", {{5, 40}}, 0, 2, 32, 16, 5, 16, 4, seed++);
  if (bad) {
    printf("FAIL\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
