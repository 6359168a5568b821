// push_fibers_main.cc: TestLaunchCutsOnHostFibers' cases (follows fp4_fibers.h, the
// headers and csa41.cu's and dspark41.cu's device branches): csa_ring_push (a warp a
// (row, group): csa_pack_group_lanes) against csa_pack_group on one thread a group, and
// dspark_push (a warp a (row, group of 32)) against the same packing on one thread, every
// state byte bit for bit: the ring formats (float32, FP8 and FP4 with UE8M0 or E4M3
// scales), groups of 32 to 128 values, a group of an odd length, rows that the ring
// keeps and rows it drops, NaN and zero groups, several sequences with several rows.
#include <random>
#include <vector>
#include <cmath>

static void fill_vals(std::vector<float>& x, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (size_t i = 0; i < x.size(); i++) {
    switch (rng() % 24) {
      case 0: x[i] = 0.0f; break;
      case 1: x[i] = -0.0f; break;
      case 2: x[i] = nd(rng) * 1e4f; break;
      case 3: x[i] = nd(rng) * 1e-6f; break;
      default: x[i] = nd(rng);
    }
  }
}

// ring_case: seqs of n rows each (positions from pos0), a ring of ring rows.
static int ring_case(std::vector<long> ns, long dim, int fmt, long g, long ring, bool nan, bool zero, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<SeqRec> seqs;
  long rows = 0;
  for (long n : ns) {
    seqs.push_back(SeqRec{rows, n, (long)(rng() % 300), 0, 0});
    rows += n;
  }
  std::vector<float> kv(rows * dim);
  fill_vals(kv, rng);
  if (nan) kv[3] = NAN, kv[g + 5] = -NAN;
  if (zero)
    for (long j = 0; j < g; j++) kv[dim + j] = 0.0f;  // row 1's first group
  const long cb = fmt == 0 ? 4 * dim : fmt == 1 ? dim : dim / 2, rowbytes = cb + (fmt == 0 ? 0 : dim / g);
  std::vector<std::vector<unsigned char>> want(seqs.size()), got;
  for (auto& st : want) st.assign(ring * rowbytes, 0x5a);
  got = want;
  csa_AttnArgs a{};
  a.kv = kv.data(), a.seqs = seqs.data(), a.nseq = (long)seqs.size(), a.rows = rows, a.dim = dim;
  a.ring_off = 0, a.ring_rows = ring, a.ring_fmt = fmt, a.ring_group = g, a.ring_rowbytes = rowbytes;
  // the reference: csa_pack_group on one thread a group, as the emulated device runs it
  for (size_t q = 0; q < seqs.size(); q++) seqs[q].state = (long long)(unsigned long long)want[q].data();
  const long ng = dim / g;
  for (long t = 0; t < rows; t++)
    for (long gi = 0; gi < ng; gi++) {
      csa_View v;
      if (!csa_view_at(a.seqs, a.nseq, 0, t, &v)) continue;
      long i = t - v.row;
      if (i < v.n - ring) continue;
      csa_pack_group(kv.data() + t * dim, fmt, g, dim, gi, v.state + ((v.pos + i) % ring) * rowbytes);
    }
  for (size_t q = 0; q < seqs.size(); q++) seqs[q].state = (long long)(unsigned long long)got[q].data();
  long before = g_errors;
  fibers_launch(csa_ring_push, a, (rows * ng * 32 + 127) / 128);
  long diff = 0, written = 0;
  for (size_t q = 0; q < seqs.size(); q++)
    for (size_t b = 0; b < want[q].size(); b++) {
      diff += want[q][b] != got[q][b];
      written += want[q][b] != 0x5a;
    }
  printf("ring push rows %ld dim %ld fmt %d g %ld ring %ld: %ld bytes written, %ld differ, errors %ld\n", rows, dim, fmt, g, ring,
         written, diff, g_errors - before);
  return diff || written == 0 || g_errors != before;
}

// dspark_case: seqs of n rows each, a ring of cap rows, keep (0: the step's rows).
static int dspark_case(std::vector<long> ns, long dim, long cap, long keep, bool mx, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<SeqRec> seqs;
  long rows = 0, krows = 0;
  for (long n : ns) {
    seqs.push_back(SeqRec{rows, n, (long)(rng() % 300), 0, 0});
    rows += n;
    krows += keep > 0 && n > keep ? keep : n;
  }
  const long pushed = keep > 0 ? krows : rows;
  std::vector<float> kv(pushed * dim);
  fill_vals(kv, rng);
  kv[7] = NAN;
  const long bytes = 8 * cap + 4 * cap * dim;
  std::vector<std::vector<unsigned char>> want(seqs.size()), got;
  for (auto& st : want) st.assign(bytes, 0x5a);
  got = want;
  DSparkPushArgs a{kv.data(), seqs.data(), (long)seqs.size(), pushed, dim, cap, keep, 0, mx};
  for (size_t q = 0; q < seqs.size(); q++) seqs[q].state = (long long)(unsigned long long)want[q].data();
  // the reference: one thread a group of 32, as the emulated device runs it
  const long groups = (dim + 31) / 32;
  for (long r = 0; r < pushed; r++)
    for (long gg = 0; gg < groups; gg++) dspark_push_group(a, r, gg * 32);
  for (size_t q = 0; q < seqs.size(); q++) seqs[q].state = (long long)(unsigned long long)got[q].data();
  long before = g_errors;
  fibers_launch(dspark_push, a, (pushed * groups * 32 + 127) / 128);
  long diff = 0, written = 0;
  for (size_t q = 0; q < seqs.size(); q++)
    for (long b = 0; b < bytes; b++) {
      diff += want[q][b] != got[q][b];
      written += want[q][b] != 0x5a;
    }
  printf("dspark push rows %ld dim %ld cap %ld keep %ld mxfp8 %d: %ld bytes written, %ld differ, errors %ld\n", pushed, dim, cap,
         keep, mx, written, diff, g_errors - before);
  return diff || written == 0 || g_errors != before;
}

static int push_cases() {
  int bad = 0;
  unsigned seed = 1;
  bad += ring_case({1}, 512, 1, 64, 128, false, false, seed++);            // V4.1 at batch 1: FP8, UE8M0 per 64
  bad += ring_case({3, 1, 2}, 512, 1, 64, 128, true, true, seed++);        // several rows, NaN and zero groups
  bad += ring_case({5, 2}, 256, 2, 32, 4, true, true, seed++);             // FP4 (UE8M0); the ring keeps 4 of 5 rows
  bad += ring_case({3}, 192, 3, 32, 8, false, true, seed++);               // FP4 with E4M3 scales
  bad += ring_case({2, 2}, 96, 0, 96, 8, true, false, seed++);             // float32 rows
  bad += ring_case({2}, 128, 1, 128, 8, false, false, seed++);             // groups of 128: four values a lane
  bad += ring_case({2, 1}, 90, 2, 45, 8, false, false, seed++);            // FP4 groups of an odd length: lane 0
  bad += dspark_case({1}, 5120, 128, 0, true, seed++);                     // V4.1's drafter ring at batch 1
  bad += dspark_case({3, 1, 4}, 100, 2, 0, true, seed++);                  // a ragged last group; rows dropped
  bad += dspark_case({6, 2}, 96, 8, 3, true, seed++);                      // keep: the last 3 rows a sequence
  bad += dspark_case({2, 3}, 70, 8, 0, false, seed++);                     // float32
  return bad;
}
