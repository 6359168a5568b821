// fused_fibers_main.cc: TestFusedAttentionOnHostFibers' cases (follows fp4_fibers.h, the
// headers, tensorcore.cu, tensorcore_attn.cu and csa41.cu): csa_tc_fused's device branch
// (a launch block of 256 threads per row and 32 heads: the query staged, the keys
// copied a softmax block ahead, logits, softmax and output per block) on host fibers
// against the split kernels' device branches on the same fibers (csa_tc_logits,
// csa_attn_softmax, csa_tc_out: checked against the emulated device by
// TestFastProductsOnSimulatedLanes and the GPU runs), every output bit for bit:
// softmax blocks of 64 keys and fewer, the last one partial; rows of no keys and in no
// view; invalid keys and a block of none; heads past a launch block's 32 and a dim not
// a multiple of 64; rows whose keys have lo halves (only some keys marked); keys of
// −inf logits. It also prints ctf_smem for the Go test to compare with the binder's.
#include <random>
#include <vector>

static unsigned short bf16_bits(float v) { return (unsigned short)(__float_as_uint(q_bf16(v)) >> 16); }

static int fused_case(const char* what, long rows, long heads, long dim, long lmax, long block, std::vector<long> rlen,
                      unsigned seed) {
  std::mt19937 rng(seed);
  auto val = [&]() { return ((float)(rng() % 20001) - 10000.0f) / 7919.0f; };
  const long nblk = (lmax + block - 1) / block;
  std::vector<float> q(rows * heads * dim), sink(heads);
  std::vector<unsigned short> kh(rows * lmax * dim + 8), kl(rows * lmax * dim + 8);
  std::vector<unsigned char> valid(rows * lmax), klo(rows * lmax);
  std::vector<unsigned> rlo(rows);
  std::vector<long long> len(rows);
  for (auto& v : q) v = val();
  for (auto& v : sink) v = val();
  for (long t = 0; t < rows; t++) {
    len[t] = rlen[t];
    const bool lo = t % 3 == 1;  // rows with lo halves (some keys)
    rlo[t] = lo;
    for (long j = 0; j < lmax; j++) {
      const long tj = t * lmax + j;
      // invalid keys: every seventh, and in row 2 a whole block (the block changes nothing)
      valid[tj] = j % 7 != 3 && !(t == 2 && j >= block && j < 2 * block);
      klo[tj] = lo && j % 3 == 0;
      for (long d = 0; d < dim; d++) {
        const float v = val();
        kh[tj * dim + d] = valid[tj] ? bf16_bits(v) : 0x7fc2;  // (a key not valid: NaN, whose products must not be taken)
        kl[tj * dim + d] = klo[tj] ? bf16_bits((v - q_bf16(v)) * 0.5f + val() * 1e-3f) : 0x7fc1;  // (unmarked: NaN, never read)
      }
    }
  }
  // a key of huge logits, so that one block's maximum jumps (rescales far from 1)
  if (rows > 0 && lmax > 5) for (long d = 0; d < dim; d++) kh[(0 * lmax + 5) * dim + d] = bf16_bits(q[d] * 40.0f);
  g_valid.clear();
  g_valid.push_back({(const char*)kh.data(), (const char*)(kh.data() + kh.size())});
  const float sentinel = __uint_as_float(0x7fc01234u);
  std::vector<float> pb(rows * heads * lmax), bsc(rows * nblk * heads), den(rows * heads), ps(rows * heads * lmax);
  std::vector<float> want(rows * heads * dim, sentinel), got(rows * heads * dim, sentinel);
  CsaTcArgs c{};
  c.q = q.data(), c.kh = kh.data(), c.kl = kl.data(), c.valid = valid.data(), c.rlen = len.data(), c.rlo = rlo.data();
  c.pb = pb.data(), c.bsc = bsc.data(), c.den = den.data(), c.out = want.data();
  c.rows = rows, c.heads = heads, c.dim = dim, c.lmax = lmax, c.nblk = nblk, c.block = block, c.scale = 0.0883883;
  c.klo = klo.data();
  // the split kernels: wide logits, the softmax (a warp per (row, head)), wide output
  const long groups = (heads + 15) / 16;
  fibers_launch(csa_tc_logits, c, (rows * ((lmax + 63) / 64) * groups * 32 + 127) / 128);
  csa_AttnArgs s{};
  s.sink.p = sink.data(), s.sink.fmt = 0, s.sink.cols = heads;
  s.rows = rows, s.heads = heads, s.dim = dim, s.block = block, s.pb = pb.data(), s.ps = ps.data(), s.bsc = bsc.data();
  s.den = den.data(), s.valid = valid.data(), s.lmax = lmax, s.nblk = nblk, s.rlen = len.data(), s.tc = 1;
  fibers_launch(csa_attn_softmax, s, (rows * heads * 32 + 127) / 128);
  fibers_launch(csa_tc_out, c, (rows * ((dim + 63) / 64) * groups * 32 + 127) / 128);
  // the fused kernel, and its second form (csa_tc_fused2) into got2
  std::vector<float> got2(rows * heads * dim, sentinel);
  CsaFusedArgs f{};
  f.tc = c, f.tc.out = got.data(), f.sink = s.sink, f.ps = ps.data();
  const long before = g_errors;
  fibers_launch_n(csa_tc_fused, f, rows * ((heads + CTF_HC - 1) / CTF_HC), CTF_NT);
  f.tc.out = got2.data();
  fibers_launch_n(csa_tc_fused2, f, rows * ((heads + CTF_HC - 1) / CTF_HC), CTF_NT);
  // and in launch blocks of 16 warps (csa_tc_fused3) into got3
  std::vector<float> got3(rows * heads * dim, sentinel);
  f.tc.out = got3.data();
  fibers_launch_n(csa_tc_fused3, f, rows * ((heads + CTF_HC - 1) / CTF_HC), CTF_NT3);
  long diff = 0, diff2 = 0, diff3 = 0, written = 0, finite = 0;
  for (long i = 0; i < rows * heads * dim; i++) {
    diff += __float_as_uint(want[i]) != __float_as_uint(got[i]);
    diff2 += __float_as_uint(want[i]) != __float_as_uint(got2[i]);
    diff3 += __float_as_uint(want[i]) != __float_as_uint(got3[i]);
    written += __float_as_uint(want[i]) != __float_as_uint(sentinel);
    finite += std::isfinite(want[i]) && want[i] != 0;
  }
  printf("fused %s: %ld rows, %ld heads of %ld, lmax %ld, block %ld: %ld of %ld values written (%ld finite, nonzero), %ld differ (the second form: %ld, in 16 warps: %ld), errors %ld\n",
         what, rows, heads, dim, lmax, block, written, rows * heads * dim, finite, diff, diff2, diff3, g_errors - before);
  return diff || diff2 || diff3 || g_errors != before || finite == 0;
}

// softmax_block's form for a block of 64 keys (softmax_block64, one head and four at
// once) against its general form (cascade_lane and cascade_fold), a warp on fibers:
// every probability, rescale, maximum and sum bit for bit, over blocks of which one
// has no valid key (the first: it changes nothing), one has a head whose valid keys are all −inf, one jumps the
// maximum, and one holds a NaN logit.
struct SmxArgs {
  float* pr;                // [4 heads][nb][64] logits, then probabilities
  const unsigned char* vr;  // [nb][64]
  float* bsc;               // [nb][4]
  float* ms;                // [8]: the maxima, then the sums
  long long nb, mode;       // 0: softmax_block<false>, 1: softmax_block<true>, 2: softmax_block64<4>
};
static void smx_kernel(const SmxArgs a) {
  const int lane = threadIdx.x & 31;
  static float ps[64];
  float m[4], s[4];
  for (int h = 0; h < 4; h++) m[h] = -__uint_as_float(0x7f800000u), s[h] = 0;
  for (long long b = 0; b < a.nb; b++) {
    if (a.mode == 2) {
      float* pr[4];
      float* bp[4];
      for (int h = 0; h < 4; h++) pr[h] = a.pr + (h * a.nb + b) * 64, bp[h] = a.bsc + b * 4 + h;
      softmax_block64<4>(pr, 1, a.vr + b * 64, lane, bp, m, s);
      continue;
    }
    for (int h = 0; h < 4; h++) {
      float* pr = a.pr + (h * a.nb + b) * 64;
      if (a.mode == 1) softmax_block<true>(pr, 1, a.vr + b * 64, ps, 64, lane, a.bsc + b * 4 + h, m[h], s[h]);
      else softmax_block<false>(pr, 1, a.vr + b * 64, ps, 64, lane, a.bsc + b * 4 + h, m[h], s[h]);
      __syncwarp();
    }
  }
  if (lane == 0)
    for (int h = 0; h < 4; h++) a.ms[h] = m[h], a.ms[4 + h] = s[h];
}
static int smx_case(unsigned seed) {
  std::mt19937 rng(seed);
  const long nb = 6;
  std::vector<float> lg(4 * nb * 64);
  std::vector<unsigned char> vr(nb * 64);
  for (auto& v : lg) v = ((float)(rng() % 20001) - 10000.0f) / 1500.0f;
  for (long i = 0; i < nb * 64; i++) vr[i] = rng() % 7 != 0 && i >= 64;  // block 0: no valid key (the block changes nothing)
  for (long e = 0; e < 64; e++) lg[(2 * nb + 2) * 64 + e] = -__uint_as_float(0x7f800000u);  // head 2, block 2: all −inf
  for (long e = 0; e < 64; e += 5) lg[(1 * nb + 3) * 64 + e] += 60.0f;                    // head 1, block 3: the maximum jumps
  lg[(3 * nb + 5) * 64 + 17] = __uint_as_float(0x7fc00000u);                             // head 3, block 5: a NaN
  vr[5 * 64 + 17] = 1;
  std::vector<float> pr[3], bsc[3], ms[3];
  for (int mode = 0; mode < 3; mode++) {
    pr[mode] = lg, bsc[mode].assign(nb * 4, 7.0f), ms[mode].assign(8, 0);
    SmxArgs a{pr[mode].data(), vr.data(), bsc[mode].data(), ms[mode].data(), nb, mode};
    fibers_launch_n(smx_kernel, a, 1, 32);
  }
  long diff = 0;
  for (int mode = 1; mode < 3; mode++) {
    for (size_t i = 0; i < lg.size(); i++) diff += __float_as_uint(pr[0][i]) != __float_as_uint(pr[mode][i]);
    for (size_t i = 0; i < bsc[0].size(); i++) diff += __float_as_uint(bsc[0][i]) != __float_as_uint(bsc[mode][i]);
    for (int i = 0; i < 8; i++) diff += __float_as_uint(ms[0][i]) != __float_as_uint(ms[mode][i]);
  }
  printf("softmax blocks of 64 (seed %u): sums %g %g %g %g, block 0's rescale %g, %ld values differ\n", seed, ms[0][4], ms[0][5],
         ms[0][6], ms[0][7], bsc[0][0], diff);
  return diff != 0 || bsc[0][0] != -1.0f || !std::isfinite(ms[0][4]);
}

int main() {
  int bad = 0;
  for (unsigned seed = 11; seed < 31; seed++) bad += smx_case(seed);
  for (long d : {8L, 64L, 72L, 512L})
    for (long nw : {8L, 16L}) printf("smem %ld %ld %lld\n", d, nw, (long long)ctf_smem(d, nw));
  // V4.1's shape, fewer keys: two launch blocks of heads a row, three softmax blocks, rows
  // of no keys (0) and in no view (−1)
  bad += fused_case("v41", 4, 64, 512, 150, 64, {150, 0, 129, -1}, 1);
  // heads past a block's 32 and not a multiple of 16; a dim not a multiple of 64
  bad += fused_case("heads 40 dim 72", 5, 40, 72, 150, 64, {150, 97, 150, 64, 1}, 2);
  // the tiny fixtures' shape, with softmax blocks of 16 keys (many blocks) and of 40
  bad += fused_case("block 16", 3, 4, 64, 50, 16, {50, 33, 50}, 3);
  bad += fused_case("block 40", 3, 20, 64, 90, 40, {90, 41, 90}, 4);
  // a dim whose rows of 16-byte copies (40) do not divide the block's 256 threads (the
  // staging's carry from one row to the next)
  bad += fused_case("dim 320", 2, 8, 320, 100, 64, {100, 70}, 5);
  if (bad) {
    printf("FAIL\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
