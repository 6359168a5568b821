// bias_fibers_main.cc: TestDraftBiasDeviceCodeOnHostFibers' cases (follows fp4_fibers.h,
// the headers and dspark41.cu's device branch): dspark_head_bias's tiles (a launch block
// 32 vocabulary entries, their head rows staged in shared memory, a warp a block's
// embedding row) on host fibers against the serial form (a work item an entry, every
// block in turn), every logit bit for bit: ranks of the tiles (256, 40, 75) and above
// them (300: the serial form on the device too), vocabularies not a multiple of 32,
// blocks not a multiple of the four warps, bf16 and float32 embeddings, a bad token
// (error 504 either way).
#include <random>
#include <vector>

static int bias_case(long nb, long block, long V, long R, int efmt, bool bad, unsigned seed) {
  std::mt19937 rng(seed);
  const long T = nb * block, i = 2 % block;
  std::vector<float> hf(V * R), ef(V * R), logits(T * V);
  std::vector<unsigned short> eh(V * R);
  for (auto& v : hf) v = ((float)(rng() % 20001) - 10000.0f) / 1237.0f;
  for (long j = 0; j < V * R; j++) {
    eh[j] = (unsigned short)(0x3c00 + rng() % 0x0800) | (rng() % 2 ? 0x8000 : 0);  // bf16 bits
    ef[j] = ((float)(rng() % 20001) - 10000.0f) / 311.0f;
  }
  for (auto& v : logits) v = ((float)(rng() % 2001) - 1000.0f) / 7.0f;
  std::vector<int> tokens(T), ids(T);
  for (auto& t : tokens) t = (int)(rng() % V);
  for (auto& t : ids) t = (int)(rng() % V);
  if (bad) ids[(nb / 2) * block + i - 1] = (int)V + 3;  // block nb/2's token past the vocabulary
  i64 err = 0, want_err = 0;
  DSparkBiasArgs a{};
  a.tokens = tokens.data(), a.ids = ids.data();
  a.membed.p = efmt ? (const void*)eh.data() : (const void*)ef.data(), a.membed.fmt = efmt, a.membed.cols = R;
  a.mhead.p = hf.data(), a.mhead.fmt = 0, a.mhead.cols = R;
  a.T = T, a.V = V, a.R = R, a.block = block, a.i = i;
  // the serial form on a copy
  std::vector<float> want(logits);
  DSparkBiasArgs s = a;
  s.logits = want.data(), s.err = &want_err;
  for (long v = 0; v < V; v++) dspark_bias_entry(s, v, nb);
  a.logits = logits.data(), a.err = &err;
  long before = g_errors;
  const long items = dspark_bias_tiled(a) ? (V + DSPARK_BIAS_ROWS - 1) / DSPARK_BIAS_ROWS * 128 : V;
  fibers_launch(dspark_head_bias, a, (items + 127) / 128);
  long diff = 0;
  for (long j = 0; j < T * V; j++)
    if (__float_as_uint(logits[j]) != __float_as_uint(want[j])) {
      if (diff < 3) fprintf(stderr, "logit [%ld, %ld] %a, want %a\n", j / V, j % V, logits[j], want[j]);
      diff++;
    }
  printf("bias blocks %ld of %ld, V %ld, rank %ld, embedding fmt %d, bad token %d: %ld logits differ, err %ld (want %ld), errors %ld\n",
         nb, block, V, R, efmt, (int)bad, diff, (long)err, (long)want_err, g_errors - before);
  return diff || err != want_err || g_errors != before;
}

int main() {
  int bad = 0;
  unsigned seed = 1;
  bad += bias_case(9, 5, 70, 256, 1, false, seed++);
  bad += bias_case(6, 5, 100, 40, 0, false, seed++);
  bad += bias_case(4, 3, 33, 75, 1, true, seed++);
  bad += bias_case(3, 5, 40, 300, 1, false, seed++);
  bad += bias_case(1, 5, 31, 64, 0, false, seed++);
  if (bad) {
    printf("FAIL\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
