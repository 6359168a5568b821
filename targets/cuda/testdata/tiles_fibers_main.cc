// tiles_fibers_main.cc: TestTilesDeviceCodeOnHostFibers' cases (follows fp4_fibers.h,
// the headers, dense41.cu, moe.cu, mhc.cu and csa41.cu's device branches): V4.1's
// exact-order tile kernels on host fibers — moe_fast_gate41_tile, _tile1, _tile_a and
// mhc_fast_mix41_tile, _tile_a against mkl_lane / the per-lane items, csa_fast_proj_tile against
// csa_gonum_nt (the sums before their bf16 rounding) — every output bit for bit, and the outputs a kernel must not write left
// as they were.
#include <array>
#include <random>
#include <vector>

struct WeightData {
  std::vector<float> f;
  std::vector<unsigned short> h;
  std::vector<unsigned char> c, s;
  Weight w;
};

static unsigned short to_bf16(float f) { return (unsigned short)(__float_as_uint(q_bf16(f)) >> 16); }

// make_weight: rows × cols values in format fmt (prelude.h's formats: 0 float32, 1 bf16,
// 2, 3, 5 FP8, 4 FP4).
static void make_weight(WeightData& d, long rows, long cols, int fmt, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  d.w.fmt = fmt, d.w.cols = cols, d.w.s = nullptr;
  long n = rows * cols;
  if (fmt == 0) {
    d.f.resize(n);
    for (auto& v : d.f) v = nd(rng);
    d.w.p = d.f.data();
  } else if (fmt == 1) {
    d.h.resize(n);
    for (auto& v : d.h) v = to_bf16(nd(rng));
    d.w.p = d.h.data();
  } else {
    // FP8 codes (2: a scale a 32 × 32 block, 3: a scale per 32 of a row, 5: a 128 × 128
    // block) or FP4 codes, two a byte (4: a scale per 32 of a row)
    d.c.resize(fmt == 4 ? (n + 1) / 2 : n);
    for (auto& v : d.c) {
      v = (unsigned char)(rng() % 256);
      if (fmt != 4 && (v & 0x7f) == 0x7f) v = 0;  // no NaN codes: a NaN row would hide every order
    }
    long ns = fmt == 2 ? ((rows + 31) / 32) * ((cols + 31) / 32)
              : fmt == 5 ? ((rows + 127) / 128) * ((cols + 127) / 128)
                         : rows * ((cols + 31) / 32);
    d.s.resize(ns);
    for (auto& v : d.s) v = (unsigned char)(118 + rng() % 8);
    d.w.p = d.c.data(), d.w.s = d.s.data();
  }
}

// fill_x: activations with the values that test a chain's rounding: normals, zeros of
// both signs, and magnitudes far apart.
static void fill_x(std::vector<float>& x, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) {
    switch (rng() % 16) {
      case 0: v = 0.0f; break;
      case 1: v = -0.0f; break;
      case 2: v = nd(rng) * 4096.0f; break;
      case 3: v = nd(rng) / 4096.0f; break;
      default: v = nd(rng);
    }
  }
}

// decode_seqs: T one-row sequences, except rows [multi, multi + 3) one three-row
// sequence when multi ≥ 0 (another order than the tile's), and row skip in no sequence
// when skip ≥ 0.
static std::vector<SeqRec> decode_seqs(long T, long multi, long skip) {
  std::vector<SeqRec> s;
  for (long t = 0; t < T; t++) {
    if (t == skip) continue;
    if (t == multi && t + 3 <= T && (skip < t || skip >= t + 3)) {
      s.push_back(SeqRec{t, 3, 10, 0, 0});
      t += 2;
      continue;
    }
    s.push_back(SeqRec{t, 1, 100 + t, 0, SEQ_DECODE});
  }
  return s;
}

static long compare(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  long diff = 0;
  for (size_t i = 0; i < got.size(); i++)
    if (__float_as_uint(got[i]) != __float_as_uint(want[i])) {
      if (diff < 3) fprintf(stderr, "%s: [%zu] %a, want %a\n", what, i, got[i], want[i]);
      diff++;
    }
  return diff;
}

static const float kUnset = -12345.0f;

// readable: the ranges the async staging's copies may read (the x rows and the weight;
// a copy anywhere else is an error)
static void readable(const std::vector<float>& x, const WeightData& w) {
  g_valid.clear();
  g_valid.push_back({(const char*)x.data(), (const char*)(x.data() + x.size())});
  if (!w.f.empty()) g_valid.push_back({(const char*)w.f.data(), (const char*)(w.f.data() + w.f.size())});
  if (!w.h.empty()) g_valid.push_back({(const char*)w.h.data(), (const char*)(w.h.data() + w.h.size())});
}

// gate_case: moe_fast_gate41_tile (one = false: 4 tokens × 32 experts a block) or
// moe_fast_gate41_tile1 (1 token × 8 experts, 512 positions a chunk).
static int gate_case(bool one, long T, long E, long D, int fmt, long multi, long skip, unsigned seed) {
  std::mt19937 rng(seed);
  WeightData w;
  make_weight(w, E, D, fmt, rng);
  std::vector<float> x(T * D);
  fill_x(x, rng);
  std::vector<SeqRec> seqs = decode_seqs(T, multi, skip);
  std::vector<float> got(T * E * 16, kUnset), want(T * E * 16, kUnset);
  MoERoute41Args a{};
  a.x = x.data(), a.gate = w.w, a.T = T, a.E = E, a.D = D, a.seqs = seqs.data(), a.nseq = (long)seqs.size();
  a.part = want.data();
  for (long t = 0; t < T; t++)
    for (long e = 0; e < E; e++) {
      i64 first, rows;
      FRow xr;
      WRow wr;
      if (moe_gate41_at(a, t, e, &xr, &wr, &first, &rows))
        for (int L = 0; L < 16; L++) want[(t * E + e) * 16 + L] = mkl_lane(xr, wr, rows, D, E, L);
    }
  a.part = got.data();
  long before = g_errors;
  if (one)
    fibers_launch(moe_fast_gate41_tile1, a, T * ((E + 7) / 8));
  else
    fibers_launch(moe_fast_gate41_tile, a, (T + 3) / 4 * ((E + 31) / 32));
  long diff = compare("gate", got, want);
  printf("gate%s T %ld E %ld D %ld fmt %d multi %ld skip %ld: %ld lanes differ, errors %ld\n", one ? " (tile1)" : "", T, E,
         D, fmt, multi, skip, diff, g_errors - before);
  if (!one) {
    // the same tiles staged by cp.async (gemv_tile_async where the rows allow)
    std::fill(got.begin(), got.end(), kUnset);
    readable(x, w);
    fibers_launch(moe_fast_gate41_tile_a, a, (T + 3) / 4 * ((E + 31) / 32));
    long d = compare("gate (async)", got, want);
    printf("gate (async staging) T %ld E %ld D %ld fmt %d: %ld lanes differ\n", T, E, D, fmt, d);
    diff += d;
  }
  return diff == 0 && g_errors == before ? 0 : 1;
}

static int mix_case(long T, long m, long K, int fmt, long multi, unsigned seed) {
  std::mt19937 rng(seed);
  WeightData w;
  make_weight(w, m, K, fmt, rng);
  std::vector<float> x(T * K);
  fill_x(x, rng);
  std::vector<SeqRec> seqs = decode_seqs(T, multi, -1);
  const long per = m * 16 + 32;
  std::vector<float> got(T * per, kUnset), want(T * per, kUnset);
  mhc_FastMix41Args a{};
  a.x = x.data(), a.fn = w.w, a.T = T, a.m = m, a.K = K, a.seqs = seqs.data(), a.nseq = (long)seqs.size();
  a.part = want.data();
  for (long i = 0; i < T * per; i++) mhc_mix41_part_item(a, i);
  a.part = got.data();
  long before = g_errors;
  long tiles = (T + 1) / 2 * ((m + 7) / 8), lanes = (32 * T + 127) / 128;
  fibers_launch(mhc_fast_mix41_tile, a, tiles + lanes);
  long diff = compare("mix", got, want);
  printf("mix T %ld m %ld K %ld fmt %d multi %ld: %ld lanes differ, errors %ld\n", T, m, K, fmt, multi, diff,
         g_errors - before);
  std::fill(got.begin(), got.end(), kUnset);
  readable(x, w);
  fibers_launch(mhc_fast_mix41_tile_a, a, tiles + lanes);
  long d = compare("mix (async)", got, want);
  printf("mix (async staging) T %ld m %ld K %ld fmt %d: %ld lanes differ\n", T, m, K, fmt, d);
  diff += d;
  // the tiles bounded to 128 registers
  std::fill(got.begin(), got.end(), kUnset);
  readable(x, w);
  fibers_launch(mhc_fast_mix41_tile_b, a, tiles + lanes);
  d = compare("mix (bounded)", got, want);
  printf("mix (bounded) T %ld m %ld K %ld fmt %d: %ld lanes differ\n", T, m, K, fmt, d);
  diff += d;
  return diff == 0 && g_errors == before ? 0 : 1;
}

// mix_sum_case: V4's fast mixes' sums (mhc_fast_mix_sum, a warp a (token, mix row)):
// every mix against the harness's own float64 arithmetic — lane l's parts l, l + 32, …
// in order, then lanes l and l ^ 16, ^ 8, ^ 4, ^ 2, ^ 1 added pairwise — bit for bit.
static int mix_sum_case(long T, long m, long P, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> part(T * (m + 1) * P), got(T * m, -1.0), want(T * m, -1.0);
  for (auto& v : part) v = nd(rng) * 100;
  for (long t = 0; t < T; t++)  // the sums of squares' parts are positive
    for (long p = 0; p < P; p++) part[(t * (m + 1) + m) * P + p] = fabs(part[(t * (m + 1) + m) * P + p]);
  const long K = 4 * P * P;
  const double eps = 1e-6;
  for (long t = 0; t < T; t++)
    for (long r = 0; r < m; r++) {
      double ss[32], acc[32];
      for (int l = 0; l < 32; l++) {
        ss[l] = 0, acc[l] = 0;
        for (long p = l; p < P; p += 32) ss[l] += part[(t * (m + 1) + m) * P + p], acc[l] += part[(t * (m + 1) + r) * P + p];
      }
      for (int off = 16; off >= 1; off >>= 1) {
        double ns[32], na[32];
        for (int l = 0; l < 32; l++) ns[l] = ss[l] + ss[l ^ off], na[l] = acc[l] + acc[l ^ off];
        for (int l = 0; l < 32; l++) ss[l] = ns[l], acc[l] = na[l];
      }
      want[t * m + r] = acc[0] * (1 / sqrt(ss[0] / (double)K + eps));
    }
  mhc_FastMixSumArgs a{};
  a.part = part.data(), a.mix = got.data(), a.T = T, a.m = m, a.K = K, a.P = P, a.norm_eps = eps;
  long before = g_errors;
  fibers_launch(mhc_fast_mix_sum, a, (T * m * 32 + 127) / 128);
  long diff = 0;
  for (long i = 0; i < T * m; i++)
    if (memcmp(&got[i], &want[i], 8) != 0) {
      if (diff < 3) fprintf(stderr, "  mix sum %ld: %.17g, want %.17g\n", i, got[i], want[i]);
      diff++;
    }
  printf("mix sums T %ld m %ld P %ld: %ld differ, errors %ld\n", T, m, P, diff, g_errors - before);
  return diff == 0 && g_errors == before ? 0 : 1;
}

// planted_case: the tiles' chains round each fused multiply-add once (numerics.h
// fma_fast). Lane 0 of token 0 against weight row 0 (float32 weights, everything else
// 0) is planted with x(1)·w(1) = 1 + 2^-23 and x(17)·w(17) = 2^-24·(1 − 2^-46): the exact
// sum lies 2^-70 below a float32 midpoint, so one rounding gives 1 + 2^-23 where fma32's
// double rounding gives 1 + 2^-22. Both router tiles and the mix tile must hold 1 + 2^-23.
static int planted_case() {
  const float one = 0x1.000002p0f, a17 = 0x1.000002p-12f, b17 = 0x1.fffffcp-13f;
  if (fma32(a17, b17, one) == fma_fast(a17, b17, one)) {
    fprintf(stderr, "planted: fma32 and fma_fast agree on the planted case\n");
    return 1;
  }
  int bad = 0;
  const long T = 2, E = 12, D = 300, m = 9, K = 640;
  std::vector<float> x(T * K, 0.0f), wg(E * D, 0.0f), wm(m * K, 0.0f);
  x[1] = one, x[17] = a17, wg[1] = 1, wg[17] = b17, wm[1] = 1, wm[17] = b17;
  std::vector<SeqRec> seqs = decode_seqs(T, -1, -1);
  Weight g{wg.data(), nullptr, 0, D}, f{wm.data(), nullptr, 0, K};
  for (int one_tile = 0; one_tile < 2; one_tile++) {
    std::vector<float> got(T * E * 16, kUnset);
    MoERoute41Args a{};
    a.x = x.data(), a.gate = g, a.T = T, a.E = E, a.D = D, a.seqs = seqs.data(), a.nseq = (long)seqs.size();
    a.part = got.data();
    if (one_tile)
      fibers_launch(moe_fast_gate41_tile1, a, T * ((E + 7) / 8));
    else
      fibers_launch(moe_fast_gate41_tile, a, (T + 3) / 4 * ((E + 31) / 32));
    printf("planted gate%s: lane 0 %a, want %a\n", one_tile ? " (tile1)" : "", got[0], one);
    bad += __float_as_uint(got[0]) != __float_as_uint(one);
  }
  const long per = m * 16 + 32;
  std::vector<float> got(T * per, kUnset);
  mhc_FastMix41Args a{};
  a.x = x.data(), a.fn = f, a.T = T, a.m = m, a.K = K, a.seqs = seqs.data(), a.nseq = (long)seqs.size();
  a.part = got.data();
  fibers_launch(mhc_fast_mix41_tile, a, (T + 1) / 2 * ((m + 7) / 8) + (32 * T + 127) / 128);
  printf("planted mix: lane 0 %a, want %a\n", got[0], one);
  bad += __float_as_uint(got[0]) != __float_as_uint(one);
  return bad;
}

// long_seqs: a step of T rows: one sequence of the first T − 4 rows (long: MKL's
// sequential order), then a 3-row and a 1-row sequence (other orders, in the same tiles),
// with row skip in no sequence when skip ≥ 0 (inside the long one: it ends before it).
static std::vector<SeqRec> long_seqs(long T, long skip) {
  std::vector<SeqRec> s;
  long n = T - 4;
  if (skip >= 0 && skip < n) n = skip;
  s.push_back(SeqRec{0, n, 0, 0, 0});
  s.push_back(SeqRec{T - 4, 3, 50, 0, 0});
  s.push_back(SeqRec{T - 1, 1, 70, 0, SEQ_DECODE});
  return s;
}

// seq_case: moe_fast_gate41_seq (router: scores and selection values, E experts) and
// mhc_fast_mix41_seq (mixes: m rows, against mhc_mix41_fast) against mkl_fast_dot a value, every output bit for
// bit, outputs of rows in no sequence left as they were.
static int seq_case(long T, long E, long D, int fmt, long skip, unsigned seed) {
  std::mt19937 rng(seed);
  WeightData w;
  make_weight(w, E, D, fmt, rng);
  std::vector<float> x(T * D);
  fill_x(x, rng);
  std::vector<SeqRec> seqs = long_seqs(T, skip);
  const long K = 2, per = (2 * E + K) * 8 / 4;
  std::vector<float> got(T * per, kUnset), want(T * per, kUnset);
  MoERoute41Args a{};
  a.x = x.data(), a.gate = w.w, a.T = T, a.E = E, a.D = D, a.k = K, a.seqs = seqs.data(), a.nseq = (long)seqs.size();
  a.scratch = (char*)want.data();
  for (long t = 0; t < T; t++)
    for (long e = 0; e < E; e++) {
      i64 first, rows;
      FRow xr;
      WRow wr;
      if (moe_gate41_at(a, t, e, &xr, &wr, &first, &rows))
        moe_gate41_score(a, t, e, mkl_fast_dot(xr, wr, rows, t - first, D, E));
    }
  a.scratch = (char*)got.data();
  long before = g_errors;
  fibers_launch(moe_fast_gate41_seq, a, (T + 31) / 32 * ((E + 63) / 64));
  long diff = compare("gate seq", got, want);
  printf("gate seq T %ld E %ld D %ld fmt %d skip %ld: %ld words differ, errors %ld\n", T, E, D, fmt, skip, diff,
         g_errors - before);
  int bad = diff == 0 && g_errors == before ? 0 : 1;
  // the mixes: E mix rows of D values
  std::vector<float> mg(T * E, kUnset), mw(T * E, kUnset);
  mhc_Mix41DotArgs b{};
  b.x = x.data(), b.fn = w.w, b.T = T, b.m = E, b.K = D, b.seqs = seqs.data(), b.nseq = (long)seqs.size();
  for (long t = 0; t < T; t++)
    for (long r = 0; r < E; r++) mw[t * E + r] = mhc_mix41_fast(b, t, r);
  b.mix = mg.data();
  before = g_errors;
  fibers_launch(mhc_fast_mix41_seq, b, (T + 63) / 64 * ((E + 31) / 32));
  diff = compare("mix seq", mg, mw);
  printf("mix seq T %ld m %ld K %ld fmt %d skip %ld: %ld values differ, errors %ld\n", T, E, D, fmt, skip, diff,
         g_errors - before);
  return bad + (diff == 0 && g_errors == before ? 0 : 1);
}

// planted_seq: seq_tile's chains round each fused multiply-add once: token 0's value
// against row 0 is x(1)·w(1) = 1 + 2^-23, then x(17)·w(17) = 2^-24·(1 − 2^-46) (as in
// planted_case), in a 40-row sequence (MKL's sequential order), float32 weights.
static int planted_seq() {
  const float one = 0x1.000002p0f, a17 = 0x1.000002p-12f, b17 = 0x1.fffffcp-13f;
  const long T = 40, N = 40, K = 64;
  std::vector<float> x(T * K, 0.0f), wm(N * K, 0.0f), mix(T * N, kUnset);
  x[1] = one, x[17] = a17, wm[1] = 1, wm[17] = b17;
  std::vector<SeqRec> seqs = {SeqRec{0, T, 0, 0, 0}};
  mhc_Mix41DotArgs b{};
  b.x = x.data(), b.fn = Weight{wm.data(), nullptr, 0, K}, b.mix = mix.data(), b.T = T, b.m = N, b.K = K;
  b.seqs = seqs.data(), b.nseq = 1;
  if (mkl_order(T, K, N) != ORDER_SEQ) {
    fprintf(stderr, "planted seq: not MKL's sequential order\n");
    return 1;
  }
  fibers_launch(mhc_fast_mix41_seq, b, (T + 63) / 64 * ((N + 31) / 32));
  printf("planted seq: value 0 %a, want %a\n", mix[0], one);
  return __float_as_uint(mix[0]) != __float_as_uint(one);
}

static int proj_case(long T, long d, long D, int fmt, long skip, unsigned seed) {
  std::mt19937 rng(seed);
  WeightData w;
  make_weight(w, d, D, fmt, rng);
  std::vector<float> x(T * D);
  fill_x(x, rng);
  std::vector<SeqRec> seqs = decode_seqs(T, -1, skip);
  std::vector<float> got(T * d, kUnset), want(T * d, kUnset);
  csa_CompressArgs a{};
  a.x = x.data(), a.wkv = w.w, a.T = T, a.D = D, a.d = d, a.ratio = 1, a.seqs = seqs.data(), a.nseq = (long)seqs.size();
  for (long t = 0; t < T; t++) {
    csa_View v;
    if (!csa_view_at(a.seqs, a.nseq, 0, t, &v)) continue;
    for (long c = 0; c < d; c++) {
      csa_BF16Row xb = {x.data() + t * D};
      WRow wr = {w.w, c};
      want[t * d + c] = CSA_PROJ_ROUND(csa_gonum_nt(xb, wr, D, c * D, true));
    }
  }
  a.P = got.data();
  long before = g_errors;
  fibers_launch(csa_fast_proj_tile, a, (T + 15) / 16 * ((d + 63) / 64));
  long diff = compare("proj", got, want);
  printf("proj T %ld d %ld D %ld fmt %d skip %ld: %ld values differ, errors %ld\n", T, d, D, fmt, skip, diff,
         g_errors - before);
  return diff == 0 && g_errors == before ? 0 : 1;
}

// itc_audit (CSA_ITC_AUDIT): for each dot csa_index_score_tc settles, its bounds checked
// against the case's values — every product q·k a multiple of 2^ex, Σ|q·k| ≤ 2^eb — for
// rows and keys the case marks auditable (keys in format g_au.fmt with every product
// exact: the queries of qmode 1, 3 and 4); a violation is an error.
static struct {
  const csa_IndexArgs* a = nullptr;
  const std::vector<float>* q = nullptr;
  std::vector<long long> state;  // a row's state address
  long checked = 0;
} g_au;
static void itc_audit(long t, long e, long h, int ex, int eb) {
  // (ex ≥ CSA_ITC_NOBITS: a key the kernel did not load)
  if (!g_au.a || t < 0 || t >= (long)g_au.state.size() || !g_au.state[t] || ex >= CSA_ITC_NOBITS / 2) return;
  const csa_IndexArgs& a = *g_au.a;
  const long D = a.dim;
  const unsigned char* row = (const unsigned char*)g_au.state[t] + e * a.ik_rowbytes;
  if (e < 0 || e >= a.ecap || ((unsigned long long)row & 3)) return;
  long double sum = 0;
  bool multiple = true;
  for (long d = 0; d < D; d++) {
    const long double p = (long double)(*g_au.q)[(t * a.heads + h) * D + d] * csa_row_val(row, a.ik_fmt, a.ik_group, D, d);
    sum += fabsl(p);
    const long double r = ldexpl(p, -ex);
    if (r != truncl(r)) multiple = false;
  }
  g_au.checked++;
  if (!multiple || sum > ldexpl(1.0L, eb)) {
    if (g_errors < 3) fprintf(stderr, "itc audit: row %ld key %ld head %ld: ex %d eb %d, multiple %d, sum %Lg\n", t, e, h, ex, eb, (int)multiple, sum);
    g_errors++;
  }
}

// index_case: csa_index_score_blk against csa_index_item (the per-(row, key) item of
// csa_index_score) for T rows of sequences at positions around pos0 (ratio r, heads H of
// D values, index keys in format fmt: 0 float32, 1 FP8 + UE8M0, 2 FP4 + UE8M0, 3 FP4 +
// E4M3 scales, groups of 32), a three-row prefill sequence at row multi (not a decode
// view: the layer's source) and row skip in no sequence: every score and key bit for bit,
// and the entries neither writes left as they were.
// qmode 1: the queries as V4.1's are (FP4 values in groups of 32, a power-of-two scale
// each: bf16 values, so the products may fuse); 2: the same with scales so small that
// the products fall below float32's normals and round there (they must not fuse); 3:
// fill_x's values rounded to bf16 (magnitudes far apart: sums that round); 4: as 1 with
// the queries' and keys' scales a few powers of two apart (every sum exact). The scores are
// compared before their bf16 roundings (CSA_IX_ROUND), except with tc:
// csa_index_score_tc against csa_index_item with the roundings (the tensor cores' dots are
// settled through them), every score bit for bit, and each of its paths counted (want:
// the least count each path must reach: dots the tensor cores settle, dots computed in
// the cpu's order, keys by the item loop, of the first the dots whose sums are exact).
static int index_case(long T, long H, long D, int fmt, long ratio, long pos0, long multi, long skip, unsigned seed,
                      int qmode = 0, bool tc = false, std::array<long, 4> want_paths = {0, 0, 0, 0}) {
  std::mt19937 rng(seed);
  const long g = 32, maxpos = pos0 + 3 * 160 + 8, ecap = maxpos / ratio + 1;
  const long rowbytes = fmt == 0 ? 4 * D : (fmt == 1 ? D : D / 2) + D / g;
  std::vector<SeqRec> seqs = decode_seqs(T, multi, skip);
  // each sequence's index keys (ecap rows) in a state block of its own
  std::vector<std::vector<unsigned char>> state(seqs.size());
  for (size_t q = 0; q < seqs.size(); q++) {
    seqs[q].pos = pos0 + (long)(rng() % 480);
    std::vector<unsigned char>& st = state[q];
    st.resize(ecap * rowbytes);
    for (long e = 0; e < ecap; e++) {
      unsigned char* row = st.data() + e * rowbytes;
      if (fmt == 0) {
        std::vector<float> kv(D);
        fill_x(kv, rng);
        memcpy(row, kv.data(), 4 * D);
        continue;
      }
      const long cb = fmt == 1 ? D : D / 2;
      for (long i = 0; i < cb; i++) {
        row[i] = (unsigned char)(rng() % 256);
        if (fmt == 1 && (row[i] & 0x7f) == 0x7f) row[i] = 0;  // no NaN codes
      }
      for (long i = 0; i < D / g; i++) {
        unsigned char u = (unsigned char)(qmode == 2 ? 50 + rng() % 6 : qmode == 4 ? 120 + rng() % 3 : 112 + rng() % 20);
        if (fmt == 3) u = (unsigned char)(8 + rng() % 100);  // E4M3 scales, no NaN
        row[cb + i] = u;
      }
    }
    seqs[q].state = (long long)(unsigned long long)st.data();
  }
  std::vector<float> q(T * H * D), w(T * H);
  fill_x(q, rng);
  fill_x(w, rng);
  if (qmode == 3)
    for (auto& v : q) v = q_bf16(v);
  if (qmode == 1 || qmode == 2 || qmode == 4) {
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (size_t i = 0; i < q.size(); i += 32) {
      const float sc = ldexpf(1.0f, qmode == 2 ? -72 - (int)(rng() % 4) : qmode == 4 ? (int)(rng() % 3) - 1 : (int)(rng() % 12) - 8);
      for (size_t j = i; j < i + 32 && j < q.size(); j++) q[j] = (rng() % 2 ? -1 : 1) * e2m1[rng() % 8] * sc;
    }
  }
  csa_IndexArgs a{};
  a.q = q.data(), a.w = w.data(), a.seqs = seqs.data(), a.nseq = (long)seqs.size(), a.rows = T;
  a.layer = 0, a.source = 0, a.ratio = ratio, a.heads = H, a.dim = D, a.scale = 0.0883883476483184;
  a.ecap = ecap, a.ik_fmt = fmt, a.ik_group = fmt == 0 ? D : g, a.ik_rowbytes = rowbytes;
  a.nowners = 1, a.owners[0] = 0, a.owners[1] = ratio, a.owners[2] = 0;
  const csa_TopkElem unset = {kUnset, -7};
  std::vector<csa_TopkElem> got(T * ecap, unset), want(T * ecap, unset);
  g_ix_round = tc;
  a.work = want.data();
  for (long t = 0; t < T; t++)
    for (long e = 0; e < ecap; e++) csa_index_item(a, t, e);
  a.work = got.data();
  long before = g_errors, diff = 0, scored = 0;
  if (tc) {
    g_itc[0] = g_itc[1] = g_itc[2] = g_itc[3] = 0;
    g_mma_trunc = 1;  // (a tensor core's coarsest summation within the kernel's bound)
    if (qmode == 1 || qmode == 3 || qmode == 4) {
      g_au.a = &a, g_au.q = &q, g_au.state.assign(T, 0);
      for (auto& sq : seqs) g_au.state[sq.row] = sq.state;
    }
    const long checked = g_au.checked;
    fibers_launch(csa_index_score_tc, a, T * ((ecap + CSA_ITK - 1) / CSA_ITK));
    g_au.a = nullptr;
    if ((qmode == 1 || qmode == 3 || qmode == 4) && g_au.checked == checked) {
      fprintf(stderr, "itc audit: no dot checked\n");
      g_errors++;
    }
    // two blocks a row, each looping over every other chunk of the row: the same scores
    std::vector<csa_TopkElem> two(T * ecap, unset);
    a.work = two.data();
    fibers_launch(csa_index_score_tc, a, T * 2);
    g_mma_trunc = 0;
    for (long i = 0; i < T * ecap; i++)
      if (__float_as_uint(two[i].v) != __float_as_uint(got[i].v) || two[i].i != got[i].i) {
        if (diff < 3) fprintf(stderr, "index tc (two blocks a row): [%ld] %a key %d, want %a key %d\n", i, two[i].v, two[i].i, got[i].v, got[i].i);
        diff++;
      }
    g_ix_round = 0;
    for (long i = 0; i < T * ecap; i++) {
      scored += want[i].i != -7;
      if (__float_as_uint(got[i].v) != __float_as_uint(want[i].v) || got[i].i != want[i].i) {
        if (diff < 3) fprintf(stderr, "index tc: [%ld] %a key %d, want %a key %d\n", i, got[i].v, got[i].i, want[i].v, want[i].i);
        diff++;
      }
    }
    bool paths = true;
    for (int j = 0; j < 4; j++) paths = paths && g_itc[j] >= want_paths[j];
    // V4.1's kind of data (qmode 4): every dot on the exact path, none in the cpu's order
    if (qmode == 4) paths = paths && g_itc[1] == 0 && g_itc[2] == 0 && g_itc[3] >= g_itc[0];
    printf("index tc T %ld heads %ld dim %ld fmt %d ratio %ld queries %d: %ld of %ld scores differ, dots settled %ld, "
           "exact %ld, in the cpu's order %ld, keys by the item loop %ld%s, errors %ld\n",
           T, H, D, fmt, ratio, qmode, diff, scored, g_itc[0], g_itc[3], g_itc[1], g_itc[2], paths ? "" : " (too few on a path)",
           g_errors - before);
    return diff == 0 && scored > 0 && paths && g_errors == before ? 0 : 1;
  }
  fibers_launch(csa_index_score_words, a, T * ((ecap + 127) / 128));
  std::vector<csa_TopkElem> blk(T * ecap, unset);
  a.work = blk.data();
  // (two launch blocks a row, each looping over every other chunk of 128 keys)
  fibers_launch(csa_index_score_blk, a, T * 2);
  for (long i = 0; i < T * ecap; i++) {
    if (__float_as_uint(blk[i].v) != __float_as_uint(want[i].v) || blk[i].i != want[i].i) {
      if (diff < 3) fprintf(stderr, "index blk: [%ld] %a key %d, want %a key %d\n", i, blk[i].v, blk[i].i, want[i].v, want[i].i);
      diff++;
    }
    scored += want[i].i != -7;
    if (__float_as_uint(got[i].v) != __float_as_uint(want[i].v) || got[i].i != want[i].i) {
      if (diff < 3) fprintf(stderr, "index: [%ld] %a key %d, want %a key %d\n", i, got[i].v, got[i].i, want[i].v, want[i].i);
      diff++;
    }
  }
  printf("index T %ld heads %ld dim %ld fmt %d ratio %ld queries %d: %ld of %ld scores differ, errors %ld\n", T, H, D, fmt,
         ratio, qmode, diff, scored, g_errors - before);
  return diff == 0 && scored > 0 && g_errors == before ? 0 : 1;
}

// entry_case: csa_compress_entry's warp a row against csa_entry_row (one thread a row)
// for T rows (ratio r; exact: the latent's norm and the key's products computed there,
// else the fast mode's, done before), latent d in format kvf, index keys idim in format
// ikf, RoPE on the last rope values (float32 angles or not): latents, keys and the packed
// state bytes bit for bit.
static int entry_case(long T, long ratio, long d, long idim, long rope, int kvf, long kvg, int ikf, bool exact,
                      bool fp32, long skip, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<SeqRec> seqs = decode_seqs(T, -1, skip);
  const long rows = 64;
  auto rowbytes = [](int f, long dim, long g) { return f == 0 ? 4 * dim : (f == 1 ? dim : dim / 2) + dim / g; };
  const long kvb = rowbytes(kvf, d, kvg), ikb = idim ? rowbytes(ikf, idim, 32) : 0;
  std::vector<std::vector<unsigned char>> st(seqs.size()), st2;
  for (size_t q = 0; q < seqs.size(); q++) {
    seqs[q].pos = (long)(rng() % 40) * ratio + (long)(rng() % ratio);
    st[q].assign(rows * (kvb + ikb), 0xa5);
  }
  st2 = st;
  std::vector<float> L(T * d), P(T * d), K(T * idim > 0 ? T * idim : 1), dummy(4);
  fill_x(L, rng);
  fill_x(P, rng);
  fill_x(K, rng);
  WeightData norm, knorm, wk;
  make_weight(norm, 1, d, 0, rng);
  make_weight(knorm, 1, idim > 0 ? idim : 1, 0, rng);
  make_weight(wk, idim > 0 ? idim : 1, d, 1, rng);
  long long err = 0;
  csa_CompressArgs a{};
  a.seqs = seqs.data(), a.nseq = (long)seqs.size(), a.T = T, a.d = d, a.idim = idim, a.ratio = ratio, a.eps = 1e-6;
  a.norm = norm.w, a.knorm = knorm.w, a.wk = wk.w, a.P = P.data();
  a.kv_off = 0, a.kv_fmt = kvf, a.kv_group = kvg, a.kv_rows = rows, a.kv_rowbytes = kvb;
  a.ik_off = rows * kvb, a.ik_fmt = ikf, a.ik_group = 32, a.ik_rowbytes = ikb;
  a.rope_dim = rope, a.rope_fp32 = fp32, a.attn_factor = 1.0703125;
  for (long i = 0; i < rope / 2; i++) a.inv[i] = pow(10000.0, -2.0 * i / rope);
  a.err = &err, a.kpart = exact ? nullptr : dummy.data();
  std::vector<float> L2 = L, K2 = K;
  for (size_t q = 0; q < seqs.size(); q++) seqs[q].state = (long long)(unsigned long long)st[q].data();
  a.L = L.data(), a.K = K.data();
  for (long t = 0; t < T; t++) csa_entry_row(a, t);
  for (size_t q = 0; q < seqs.size(); q++) seqs[q].state = (long long)(unsigned long long)st2[q].data();
  a.L = L2.data(), a.K = K2.data();
  long before = g_errors;
  fibers_launch(csa_compress_entry, a, (32 * T + 127) / 128);
  long diff = compare("entry latents", L2, L) + compare("entry keys", K2, K), bytes = 0, closed = 0;
  for (size_t q = 0; q < seqs.size(); q++) {
    bytes += st[q] != st2[q];
    closed += st[q] != std::vector<unsigned char>(st[q].size(), 0xa5);
  }
  printf("entry T %ld ratio %ld d %ld idim %ld rope %ld kv %d ik %d exact %d: %ld sequences stored an entry; %ld values and %ld states differ, errors %ld\n",
         T, ratio, d, idim, rope, kvf, ikf, exact, closed, diff, bytes, g_errors - before);
  return diff == 0 && bytes == 0 && closed > 0 && err == 0 && g_errors == before ? 0 : 1;
}

// entry_norm_case: csa_fast_entry_norm's warp a row against csa_rms_row (one thread a
// row) for T rows at compression ratio r (1: the latent normalized from P into L; else
// in place in L), latents of d values: the normalized rows bit for bit, the rows that
// close no group untouched.
static int entry_norm_case(long T, long ratio, long d, long skip, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<SeqRec> seqs = decode_seqs(T, -1, skip);
  for (size_t q = 0; q < seqs.size(); q++) seqs[q].pos = (long)(rng() % 40) * ratio + (long)(rng() % ratio);
  std::vector<float> L(T * d), P(T * d);
  fill_x(L, rng);
  fill_x(P, rng);
  WeightData norm;
  make_weight(norm, 1, d, 1, rng);
  long long err = 0;
  csa_CompressArgs a{};
  a.seqs = seqs.data(), a.nseq = (long)seqs.size(), a.T = T, a.d = d, a.ratio = ratio, a.eps = 1e-6;
  a.norm = norm.w, a.P = P.data(), a.kv_rows = 64, a.err = &err;
  std::vector<float> L2 = L, orig = L;
  a.L = L.data();
  long closed = 0;
  for (long t = 0; t < T; t++) {
    csa_View v;
    if (!csa_entry_closes(a, t, &v)) continue;
    closed++;
    csa_rms_row(ratio == 1 ? P.data() + t * d : L.data() + t * d, a.norm, L.data() + t * d, d, a.eps);
  }
  a.L = L2.data();
  long before = g_errors;
  fibers_launch(csa_fast_entry_norm, a, (32 * T + 127) / 128);
  long diff = compare("entry norms", L2, L), moved = 0;
  for (long i = 0; i < T * d; i++) moved += L[i] != orig[i];
  printf("entry norm T %ld ratio %ld d %ld: %ld rows closed a group; %ld values differ, errors %ld\n", T, ratio, d, closed, diff,
         g_errors - before);
  return diff == 0 && closed > 0 && closed < T && moved > 0 && err == 0 && g_errors == before ? 0 : 1;
}

// kdec_case: csa_attn_kdec's tensor-core branch (a warp a (row, key)) against the values
// csa_row_val gives, key by key: every hi half, the lo halves only of keys with a nonzero
// one (the others' left as they were), each key's flag and each row's. Keys: float32
// rows (lo halves), FP8 and FP4 rows (bf16 values: none), empty slots, mixed in a row;
// a row in no view and an empty row; dims past a warp's 128 values and off multiples of 4.
static int kdec_case(long R, long L, long D, unsigned seed) {
  std::mt19937 rng(seed);
  const long g = 32;
  std::vector<long long> rlen(R);
  for (long t = 0; t < R; t++) rlen[t] = t == 1 ? -1 : t == 2 ? 0 : 1 + (long)(rng() % L);
  rlen[0] = L;
  std::vector<std::vector<unsigned char>> rows;
  std::vector<csa_Key> kref(R * L);
  std::vector<int> kind(R * L, -1);
  for (long t = 0; t < R; t++)
    for (long j = 0; j < rlen[t]; j++) {
      // row 3 holds no float32 keys (a row without lo halves); the others mix them in
      int f = (int)(rng() % 4);
      if (t == 3 && f == 0) f = 1;
      kind[t * L + j] = f;
      if (f == 3) { kref[t * L + j] = csa_Key{nullptr, 1, g}; continue; }  // an empty slot
      const int fmt = f == 0 ? 0 : f == 1 ? 1 : 2;
      const long ng = (D + g - 1) / g;  // scale groups, the last maybe partial
      std::vector<unsigned char> b(fmt == 0 ? 4 * D : (fmt == 1 ? D : (D + 1) / 2) + ng);
      if (fmt == 0) {
        std::normal_distribution<float> nd(0.0f, 2.0f);
        // half of them bf16 values but one: a lo half in one lane's values only
        const long one = rng() % 2 ? (long)(rng() % D) : -1;
        for (long d = 0; d < D; d++) {
          float v = nd(rng);
          if (one >= 0 && d != one) v = q_bf16(v);
          memcpy(&b[4 * d], &v, 4);
        }
      } else {
        const long cb = fmt == 1 ? D : (D + 1) / 2;
        for (long i = 0; i < cb; i++) {
          b[i] = (unsigned char)(rng() % 256);
          if (fmt == 1 && (b[i] & 0x7f) == 0x7f) b[i] = 0;  // no NaN codes
        }
        // (a scale byte of 0 or 1 would make subnormal values with lo halves)
        for (long i = 0; i < ng; i++) b[cb + i] = (unsigned char)(118 + rng() % 16);
      }
      rows.push_back(b);
      kref[t * L + j] = csa_Key{nullptr, fmt, fmt == 0 ? 1 : g};
    }
  size_t r = 0;  // the rows' addresses, once the vector no longer moves
  for (long i = 0; i < R * L; i++)
    if (kind[i] >= 0 && kind[i] != 3) kref[i].p = rows[r++].data();
  std::vector<unsigned short> halves(2 * R * L * D + 8, 0xA5A5), want = halves;
  std::vector<unsigned> rlo(R, 0), wrlo(R, 0);
  std::vector<unsigned char> klo(R * L, 0xEE), wklo = klo;
  for (long t = 0; t < R; t++)
    for (long j = 0; j < rlen[t]; j++) {
      const csa_Key& k = kref[t * L + j];
      bool any = false;
      std::vector<unsigned short> lo(D);
      for (long d = 0; d < D; d++) {
        const float v = k.p ? csa_row_val(k.p, k.fmt, k.g, D, d) : 0.0f, hv = q_bf16(v);
        want[(t * L + j) * D + d] = (unsigned short)(__float_as_uint(hv) >> 16);
        lo[d] = hv == v ? 0 : (unsigned short)(__float_as_uint(q_bf16(v - hv)) >> 16);
        any = any || lo[d] != 0;
      }
      if (any)
        for (long d = 0; d < D; d++) want[R * L * D + (t * L + j) * D + d] = lo[d];
      wklo[t * L + j] = any;
      if (any) wrlo[t] = 1;
    }
  csa_AttnArgs a{};
  a.rows = R, a.lmax = L, a.dim = D, a.kf = (float*)halves.data(), a.rlen = rlen.data(), a.kref = kref.data();
  a.rlo = rlo.data(), a.klo = klo.data(), a.tc = 1;
  long before = g_errors;
  fibers_launch(csa_attn_kdec, a, (R * L * 32 + 127) / 128);
  long diff = 0, flags = 0, marked = 0;
  for (size_t i = 0; i < halves.size(); i++) diff += halves[i] != want[i];
  for (long i = 0; i < R * L; i++) flags += klo[i] != wklo[i], marked += wklo[i] == 1;
  for (long t = 0; t < R; t++) flags += rlo[t] != wrlo[t];
  printf("kdec R %ld L %ld D %ld: %ld of %ld keys with lo halves, %ld halves and %ld flags differ, errors %ld\n", R, L, D,
         marked, R * L, diff, flags, g_errors - before);
  return diff == 0 && flags == 0 && marked > 0 && wrlo[3] == 0 && g_errors == before ? 0 : 1;
}

int main() {
  int bad = 0;
  unsigned seed = 1;
  // the router: tokens past the tile, experts past 32, chains of every tail
  bad += gate_case(false, 1, 8, 17, 0, -1, -1, seed++);
  bad += gate_case(false, 5, 40, 160, 1, -1, -1, seed++);
  bad += gate_case(false, 9, 64, 1000, 2, -1, -1, seed++);
  bad += gate_case(false, 8, 33, 129, 0, 2, -1, seed++);   // a three-row sequence: another order
  bad += gate_case(false, 7, 37, 300, 1, -1, 4, seed++);   // a row in no sequence
  bad += gate_case(false, 4, 6, 64, 0, -1, -1, seed++);    // fewer than 8 experts: not the GEMV order
  bad += gate_case(false, 6, 96, 5120, 1, -1, -1, seed++); // V4.1's row length
  bad += gate_case(false, 5, 40, 300, 3, -1, -1, seed++);  // the other stored formats
  bad += gate_case(false, 5, 40, 301, 4, -1, -1, seed++);  // FP4, an odd row length
  bad += gate_case(false, 5, 140, 300, 5, -1, -1, seed++);
  // the few-token tile: 512 positions a chunk, chains ending inside one
  // 16-byte-aligned rows, K a multiple of 8 (the async staging's; the cases above with
  // other K or formats check that it falls back): chunks past K, rows past N, tokens past T
  bad += gate_case(false, 5, 40, 2056, 1, -1, -1, seed++);
  bad += gate_case(false, 9, 70, 400, 1, 4, -1, seed++);   // a three-row sequence
  bad += gate_case(true, 1, 8, 17, 0, -1, -1, seed++);
  bad += gate_case(true, 3, 21, 1000, 2, -1, -1, seed++);
  bad += gate_case(true, 3, 12, 600, 0, 0, -1, seed++);    // a three-row sequence
  bad += gate_case(true, 2, 5, 64, 1, -1, -1, seed++);     // fewer than 8 experts
  bad += gate_case(true, 1, 24, 5120, 1, -1, -1, seed++);  // V4.1's row length
  bad += planted_case();                                   // one rounding a fused multiply-add
  bad += planted_seq();
  // long steps: MKL's sequential chains on tiles, other orders in the same tiles
  bad += seq_case(40, 12, 300, 1, -1, seed++);     // one value a load (300: not a multiple of 8)
  bad += seq_case(70, 70, 1000, 1, 20, seed++);    // bf16 rows as 16-byte loads, a chunk's tail
  bad += seq_case(134, 24, 640, 0, -1, seed++);    // float32 rows, the mixes' shape (130 rows: sequential)
  bad += seq_case(36, 64, 5120, 1, -1, seed++);    // V4.1's router row length
  bad += seq_case(40, 33, 256, 2, 3, seed++);      // FP8 weights
  // the mixes: 24 rows of 4·D, the cascade lanes
  bad += mix_case(3, 24, 640, 0, -1, seed++);
  bad += mix_case(5, 24, 1000, 0, -1, seed++);
  bad += mix_case(6, 24, 1024, 1, 1, seed++);       // a three-row sequence
  bad += mix_case(2, 9, 20480, 0, -1, seed++);      // V4.1's mix width, mix rows past a tile
  bad += mix_case(3, 24, 700, 4, -1, seed++);       // FP4 weights
  bad += mix_case(7, 24, 1544, 1, -1, seed++);      // bf16 mix weights, a chunk past K
  // the compressor's projections: blocks of 64 with every tail, rows past a tile
  bad += proj_case(1, 1, 64, 0, -1, seed++);
  bad += proj_case(17, 65, 100, 1, -1, seed++);
  bad += proj_case(16, 64, 132, 2, 3, seed++);
  bad += proj_case(9, 70, 76, 0, -1, seed++);
  bad += proj_case(5, 30, 30, 1, -1, seed++);       // D not a multiple of 4
  bad += proj_case(20, 130, 5120, 2, 7, seed++);    // V4.1's row length
  bad += proj_case(33, 128, 5120, 1, 12, seed++);   // V4.1's shape and format (bf16)
  bad += proj_case(12, 40, 96, 4, -1, seed++);
  bad += proj_case(18, 66, 192, 5, 2, seed++);
  // the indexer's scores: a launch block per row and 128 keys, the queries staged once
  bad += index_case(3, 4, 64, 2, 4, 0, -1, -1, seed++);       // the fixtures' shape
  bad += index_case(4, 32, 128, 2, 4, 200, -1, 2, seed++);    // V4.1's shape, a row in no sequence
  bad += index_case(5, 3, 32, 0, 1, 40, 1, -1, seed++);       // float32 keys, a three-row sequence
  bad += index_case(3, 17, 96, 1, 2, 130, -1, -1, seed++);    // FP8 keys, rows on and off 4-byte boundaries
  bad += index_case(3, 32, 128, 1, 4, 90, -1, -1, seed++);    // FP8 keys read as words
  bad += index_case(2, 32, 256, 3, 4, 300, -1, -1, seed++);   // E4M3 scales, the most queries
  bad += index_case(4, 32, 128, 2, 4, 200, -1, -1, seed++, 1); // V4.1's FP4 queries: the products fuse
  bad += index_case(3, 32, 128, 1, 4, 90, -1, -1, seed++, 1);  // FP8 keys, fused
  bad += index_case(3, 32, 256, 3, 4, 120, -1, -1, seed++, 1); // E4M3 scales, fused
  bad += index_case(3, 32, 128, 2, 4, 200, -1, -1, seed++, 2); // products below the normals: not fused
  // the index scores' dots on the tensor cores (csa_index_score_tc), settled to the cpu's
  // (seeds of their own: the cases after keep theirs)
  unsigned tseed = 7001;
  bad += index_case(4, 32, 128, 2, 1, 700, -1, 2, tseed++, 4, true, {80000, 0, 0, 80000}); // V4.1's shape and queries
  bad += index_case(4, 32, 128, 2, 1, 700, -1, -1, tseed++, 1, true, {20000, 100, 0, 10000}); // scales far apart
  bad += index_case(3, 32, 128, 2, 1, 600, -1, -1, tseed++, 3, true, {20000, 50, 0}); // bf16 queries: sums that round
  bad += index_case(3, 20, 128, 1, 2, 500, 1, -1, tseed++, 3, true, {5000, 10, 0});   // FP8 keys, a partial head tile
  bad += index_case(3, 32, 128, 3, 4, 900, -1, -1, tseed++, 3, true, {5000, 10, 0});  // E4M3 scales
  bad += index_case(3, 4, 64, 2, 4, 0, -1, -1, tseed++, 3, true, {100, 0, 0});       // the fixtures' shapes
  bad += index_case(4, 2, 32, 2, 1, 300, -1, 1, tseed++, 3, true, {100, 0, 0});
  bad += index_case(3, 17, 96, 1, 2, 130, -1, -1, tseed++, 3, true, {500, 0, 100});  // rows off 4-byte boundaries
  bad += index_case(3, 32, 128, 2, 4, 200, -1, -1, tseed++, 2, true, {0, 0, 100});   // products below the normals
  bad += index_case(2, 8, 64, 2, 1, 200, -1, -1, tseed++, 0, true, {0, 0, 100});     // queries not bf16 values
  // the compressor's entries: a warp a row
  bad += entry_case(5, 1, 512, 128, 64, 1, 64, 2, false, false, -1, seed++);  // V4.1's fast-mode shapes
  bad += entry_case(16, 4, 512, 128, 64, 1, 64, 2, true, true, 2, seed++);    // the exact mode, float32 angles
  bad += entry_case(9, 2, 96, 0, 32, 0, 96, 0, true, false, -1, seed++);     // no index key, float32 rows
  bad += entry_case(4, 1, 192, 128, 96, 2, 32, 1, false, false, -1, seed++); // more RoPE pairs than lanes
  bad += entry_norm_case(6, 1, 512, 3, seed++);   // V4.1's ratio-1 latents (from P), a row in no sequence
  bad += entry_norm_case(12, 4, 512, -1, seed++); // ratio 4: in place, some rows close no group
  bad += entry_norm_case(5, 2, 200, -1, seed++);  // a length off the cascade's 32-value blocks (its tails)
  // V4's mixes' sums: a warp a (token, mix row), parts not a multiple of the lanes' 128
  bad += mix_sum_case(3, 24, 256, seed++);  // V4-Flash: 256 parts
  bad += mix_sum_case(5, 3, 40, seed++);    // a lane with two parts, others one
  bad += mix_sum_case(2, 7, 16, seed++);    // lanes without parts
  // the tensor-core attention's key widening: lo halves only where a key has them
  bad += kdec_case(5, 9, 512, seed++);    // V4.1's dim: four pieces a lane
  bad += kdec_case(4, 13, 72, seed++);    // fewer values than a warp's 128
  bad += kdec_case(4, 6, 70, seed++);     // not a multiple of 4: the scalar stores
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad != 0;
}
