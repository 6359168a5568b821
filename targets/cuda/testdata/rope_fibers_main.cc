// rope_fibers_main.cc: TestRopeDeviceCodeOnHostFibers' cases (follows fp4_fibers.h, the
// headers, attention.cu and rope.cu): rope's kernels on host fibers — rope_one (the
// copies four channels a work item, and one), rope_copy4 then rope_apply, rope_copy then
// rope_apply — with and without the bf16 rounding a fused fake_quant asks for (round),
// each against a serial reference: a head's kept channels copied (rounded to bf16 with
// round) and its trailing rope_dim channels rotated by attention.cu's rope_rotate (the
// compressor's per-head rotation, not rope_apply's grouping), then rounded with round.
// Every output value must be the reference's, bit for bit. The inputs are float32
// values that bf16 cannot hold, so a rounding left out shows.
#include <random>
#include <vector>

struct RopeCase { long n, heads, head_dim, rope_dim; bool fp32; double attn; };

static int rope_case(const RopeCase& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const long rows = c.n * c.heads, vals = rows * c.head_dim, keep = c.head_dim - c.rope_dim;
  std::vector<float> x(vals);
  long notbf16 = 0;
  for (auto& v : x) {
    v = nd(rng);
    notbf16 += q_bf16(v) != v;
  }
  std::vector<int> pos(c.n);
  for (auto& p : pos) p = (int)(rng() % 70000);
  RopeSpec r{};
  r.head_dim = c.head_dim, r.rope_dim = c.rope_dim, r.fp32 = c.fp32 ? 1 : 0, r.attn = c.attn;
  for (long i = 0; i < c.rope_dim / 2; i++) r.inv[i] = std::pow(10000.0, -2.0 * (double)i / (double)c.rope_dim);
  long bad = 0, before = g_errors;
  for (int round = 0; round < 2; round++)
    for (double sign : {1.0, -1.0}) {
      // the reference
      std::vector<float> want(vals);
      for (long th = 0; th < rows; th++) {
        const float* xr = x.data() + th * c.head_dim;
        float* wr = want.data() + th * c.head_dim;
        for (long k = 0; k < keep; k++) wr[k] = round ? q_bf16(xr[k]) : xr[k];
        rope_rotate(r, xr, wr, (i64)pos[th / c.heads], sign);
        if (round)
          for (long k = keep; k < c.head_dim; k++) wr[k] = q_bf16(wr[k]);
      }
      RopeArgs ra{x.data(), pos.data(), nullptr, c.n, c.heads, sign, round, r};
      const long napply = (long)rope_apply_items(ra);
      const bool four = c.head_dim % 4 == 0 && keep % 4 == 0;
      auto check = [&](const std::vector<float>& y, const char* what) {
        long d = 0;
        for (long i = 0; i < vals; i++)
          if (memcmp(&y[i], &want[i], 4) != 0) {
            if (d < 3) fprintf(stderr, "  %s (round %d, sign %g): value %ld (row %ld, channel %ld) %.9g, want %.9g\n", what, round, sign, i,
                               i / c.head_dim, i % c.head_dim, y[i], want[i]);
            d++;
          }
        bad += d;
      };
      auto blocks = [](long items) { return std::max(1L, std::min(3L, (items + 127) / 128)); };  // the grid-stride loop too
      // rope_one, the copies four channels a work item and one
      for (int copy4 = 0; copy4 < 2; copy4++) {
        if (copy4 && !four) continue;
        std::vector<float> y(vals, 7.0f);
        RopeOneArgs o{ra, c.head_dim / 4, keep / 4, copy4, copy4 ? rows * (keep / 4) : rows * keep};
        o.r.y = y.data();
        fibers_launch(rope_one, o, blocks(o.ncopy + napply));
        check(y, copy4 ? "rope_one (copy4)" : "rope_one");
      }
      // the two launches
      if (four) {
        std::vector<float> y(vals, 7.0f);
        RopeCopyArgs cp{x.data(), y.data(), rows, c.head_dim / 4, keep / 4, round};
        fibers_launch(rope_copy4, cp, blocks(rows * (keep / 4)));
        RopeArgs ap = ra;
        ap.y = y.data();
        fibers_launch(rope_apply, ap, blocks(napply));
        check(y, "rope_copy4 + rope_apply");
      }
      {
        std::vector<float> y(vals, 7.0f);
        RopeArgs ap = ra;
        ap.y = y.data();
        fibers_launch(rope_copy, ap, blocks(rows * keep));
        fibers_launch(rope_apply, ap, blocks(napply));
        check(y, "rope_copy + rope_apply");
      }
      // in place (no copies; the kept channels stay): unrounded only, as Go runs it
      if (!round) {
        std::vector<float> y = x;
        RopeArgs ap = ra;
        ap.x = y.data(), ap.y = y.data();
        fibers_launch(rope_apply, ap, blocks(napply));
        check(y, "rope_apply in place");
      }
    }
  printf("tokens %ld heads %ld head_dim %ld rope_dim %ld fp32 %d attn %g: %ld of %ld inputs not bf16 values, %ld outputs differ, harness errors %ld\n",
         c.n, c.heads, c.head_dim, c.rope_dim, (int)c.fp32, c.attn, notbf16, vals, bad, g_errors - before);
  return bad == 0 && g_errors == before && notbf16 > vals / 2 ? 0 : 1;
}

int main() {
  std::vector<RopeCase> cases = {
      {3, 8, 64, 16, false, 1.0},    // V4-like: 48 kept channels (copy4), 8 heads a group
      {5, 11, 64, 16, true, 1.0},    // heads not a multiple of the group of 8, float32 angles
      {2, 4, 24, 8, false, 0.75},    // attention scaling on the angle
      {4, 3, 30, 10, false, 1.0},    // kept channels not a multiple of four: rope_copy only
      {1, 64, 512, 64, true, 1.0},   // V4.1's 512-wide heads: 448 kept channels
  };
  int fails = 0;
  for (size_t i = 0; i < cases.size(); i++) fails += rope_case(cases[i], 1234u + (unsigned)i);
  printf(fails ? "FAIL\n" : "PASS\n");
  return fails ? 1 : 0;
}
