// basic.cu: embedding, elementwise ops, RMSNorm (V4), the dense float32 GEMMs of V4
// (linear, lm_head) and the sampler. Each is a port of the cpu target's kernel with the
// same arithmetic in the same order (targets/cpu/dense.go, vm/sampling).

struct EmbedArgs { const int* tokens; Weight table; float* out; i64 T; i64 V; i64 D; i64* err; };
KERNEL(embed, EmbedArgs) {
  for (i64 i = GIDX; i < a.T * a.D; i += GSTRIDE) {
    i64 t = i / a.D, d = i % a.D;
    int tok = a.tokens[t];
    if (tok < 0 || tok >= a.V) { *a.err = 1; continue; }
    a.out[i] = wval(a.table, tok, d);
  }
}

// add; round: each sum then rounded to bf16 (an epilogue, ops_fuse.go).
struct AddArgs { const float* x; const float* y; float* z; i64 n; i64 round; };
KERNEL(add, AddArgs) {
  for (i64 i = GIDX; i < a.n; i += GSTRIDE) {
    const float v = a.x[i] + a.y[i];
    a.z[i] = a.round ? q_bf16(v) : v;
  }
}

DEV float silu32(float x) { return x / (1.0f + (float)exp((double)(-x))); }

struct SwiGLUArgs { const float* g; const float* u; float* out; i64 n; double limit; };
KERNEL(swiglu, SwiGLUArgs) {
  float limit = (float)a.limit;
  for (i64 i = GIDX; i < a.n; i += GSTRIDE) {
    float gv = a.g[i], uv = a.u[i];
    if (limit > 0) {
      gv = fmin32(gv, limit);
      uv = fmax32(fmin32(uv, limit), -limit);
    }
    a.out[i] = silu32(gv) * uv;
  }
}

// rmsnorm (V4): per chunk of g values, y = x / sqrt(mean(x²) + eps) (· w), the sum of
// squares in float64.
struct RMSNormArgs { const float* x; Weight w; float* y; i64 chunks; i64 g; double eps; i64 weighted; };
KERNEL(rmsnorm, RMSNormArgs) {
  for (i64 c = GIDX; c < a.chunks; c += GSTRIDE) {
    const float* x = a.x + c * a.g;
    float* y = a.y + c * a.g;
    double ss = 0;
    for (i64 i = 0; i < a.g; i++) ss += (double)x[i] * (double)x[i];
    double inv = 1.0 / sqrt(ss / (double)a.g + a.eps);
    for (i64 i = 0; i < a.g; i++) {
      float v = (float)((double)x[i] * inv);
      y[i] = a.weighted ? v * wval(a.w, 0, i) : v;
    }
  }
}

// gemm_nt: c[m, n] = Σ_k a[m, k]·w[n, k] in float32, in gonum's order (blocks of 64 of
// DotUnitary, as the cpu target's gemmNT). rows (when set) picks a's rows (lm_head's
// logit rows), checked against arows. One work item is a weight row n and a group of
// GEMM_G rows m (rows.h), the groups of a row adjacent.
#define GEMM_G 16
struct GemmArgs { const float* x; const int* rows; Weight w; float* c; i64 M; i64 N; i64 K; i64 arows; i64* err; };
KERNEL(gemm_nt, GemmArgs) {
  i64 ng = (a.M + GEMM_G - 1) / GEMM_G;
  for (i64 i = GIDX; i < a.N * ng; i += GSTRIDE) {
    i64 n = i / ng, m0 = (i % ng) * GEMM_G, cnt = imin(GEMM_G, a.M - m0);
    int rows[GEMM_G];
    bool ok = true;
    UNROLL for (int j = 0; j < GEMM_G; j++) {
      i64 r = m0 + j;
      if (j < cnt && a.rows) {
        r = a.rows[m0 + j];
        if (r < 0 || r >= a.arows) ok = false;
      }
      rows[j] = j < cnt ? (int)r : 0;
    }
    if (!ok) { *a.err = 2; continue; }
    float c[GEMM_G];
    gonum_rows<GEMM_G>(a.x, a.K, rows, 0, cnt, a.w, n, a.K, c);
    UNROLL for (int j = 0; j < GEMM_G; j++)
      if (j < cnt) a.c[(m0 + j) * a.N + n] = c[j];
  }
}

// For a few rows (decode at small batch), a product in two launches, with the same
// values: dense_part computes every block's DotUnitary, one (weight row, block of 64) a
// work item over all M ≤ SPLIT_M rows (the blocks of a row adjacent, so that a warp
// reads a weight row's bytes in one sweep); dense_sum adds each output's blocks in
// order, as dense_gonum does. Rows of x are rows[m] (or m); a weight row n reads x from
// column (n / xdiv)·K when xdiv > 0 (grouped_linear's groups); y[m·ldy + n], rounded to
// bf16 when out_bf16.
#define SPLIT_M 8
struct DenseSplitArgs {
  const float* x; const int* rows; Weight w; float* y; float* part; i64 M; i64 N; i64 K; i64 nb;
  i64 ldx; i64 xdiv; i64 ldy; i64 out_bf16; i64 arows; i64* err;
};
KERNEL(dense_part, DenseSplitArgs) {
  for (i64 i = GIDX; i < a.N * a.nb; i += GSTRIDE) {
    i64 n = i / a.nb, b = i % a.nb;
    int rows[SPLIT_M];
    bool ok = true;
    UNROLL for (int j = 0; j < SPLIT_M; j++) {
      i64 r = j;
      if (j < a.M && a.rows) {
        r = a.rows[j];
        if (r < 0 || r >= a.arows) ok = false;
      }
      rows[j] = j < a.M ? (int)r : 0;
    }
    if (!ok) { *a.err = 2; continue; }
    const float* x = a.x + (a.xdiv > 0 ? (n / a.xdiv) * a.K : 0);
    float d[SPLIT_M];
    gonum_block<SPLIT_M>(x, a.ldx, rows, 0, a.M, a.w, n, a.K, b * 64, d);
    UNROLL for (int j = 0; j < SPLIT_M; j++)
      if (j < a.M) a.part[(j * a.N + n) * a.nb + b] = d[j];
  }
}
KERNEL(dense_sum, DenseSplitArgs) {
  for (i64 i = GIDX; i < a.M * a.N; i += GSTRIDE) {
    i64 m = i / a.N, n = i % a.N;
    const float* p = a.part + i * a.nb;
    float c = 0;
    for (i64 b = 0; b < a.nb; b++) c += p[b];
    a.y[m * a.ldy + n] = a.out_bf16 ? q_bf16(c) : c;
  }
}

// sample: one token per logits row, vm/sampling.Row. scratch holds, per row, 12·V bytes:
// a greedy row's parts (sample_argmax_part), or a sampled row's V relative probabilities
// (floats) and, on the emulated device, V ints (the candidate order).
DEV bool sample_allowed(const int* words, i64 id) {
  u32 w = (u32)words[2 * (id >> 6) + ((id >> 5) & 1)];
  return ((w >> (id & 31)) & 1) != 0;
}

struct SampleArgs { const float* logits; const float* params; const int* mask; int* out; i64 R; i64 V; i64 cols; char* scratch; };

// The greedy scan in parts: sample_argmax_part scans SAMPLE_CHUNK ids of a greedy row
// (one (row, chunk) a work item) for its first allowed id and its first largest
// non-NaN allowed value; sample combines the parts in order. The serial scan keeps the
// first allowed id while nothing is strictly larger, so its answer is that id when its
// logit is NaN, else the first id of the largest non-NaN logit: what the parts give.
#define SAMPLE_CHUNK 256
struct SamplePart { float maxv; int maxi; int first; int pad; };
DEV const int* sample_words(const SampleArgs& a, i64 r) {
  return (a.mask && a.mask[r * a.cols] != 0) ? a.mask + r * a.cols + 1 : 0;
}
// sample_part_better: whether part b's largest value comes before part a's in the
// greedy scan's order (a larger value, or an equal one at a lower id; -1: none). The
// scan keeps the first id of the largest non-NaN value, so folding parts (or lanes) by
// this order, in any grouping, gives the scan's answer; first is the lowest allowed id.
DEV bool sample_part_better(const SamplePart& a, const SamplePart& b) {
  if (b.maxi < 0) return false;
  if (a.maxi < 0) return true;
  if (b.maxv != a.maxv) return b.maxv > a.maxv;
  return b.maxi < a.maxi;
}
DEV void sample_part_fold(SamplePart* p, const SamplePart& o) {
  if (sample_part_better(*p, o)) p->maxv = o.maxv, p->maxi = o.maxi;
  if (o.first >= 0 && (p->first < 0 || o.first < p->first)) p->first = o.first;
}
#ifndef DI_EMULATE
// sample_part_warp: the lanes' parts folded by shuffles (l and l ^ 16, then ^ 8, … ^ 1);
// every lane ends with the warp's part.
DEV SamplePart sample_part_warp(SamplePart p) {
  for (int off = 16; off >= 1; off >>= 1) {
    SamplePart o;
    o.maxv = __shfl_xor_sync(0xffffffffu, p.maxv, off);
    o.maxi = __shfl_xor_sync(0xffffffffu, p.maxi, off);
    o.first = __shfl_xor_sync(0xffffffffu, p.first, off);
    sample_part_fold(&p, o);
  }
  return p;
}
#endif
// A warp a (row, chunk): lane l scans ids l, l + 32, … of the chunk (coalesced loads),
// the lanes' parts folded by sample_part_better. Until run 29 a thread scanned a chunk
// alone. The emulated device scans the chunk serially at lane 0.
KERNEL(sample_argmax_part, SampleArgs) {
  i64 nch = (a.V + SAMPLE_CHUNK - 1) / SAMPLE_CHUNK;
  for (i64 w = GIDX; w < a.R * nch * 32; w += GSTRIDE) {
    const i64 it = w >> 5;
    const int lane = (int)(w & 31);
    i64 r = it / nch, c = it % nch;
    if (a.params[4 * r] > 0) continue;  // sampled at a temperature (the whole warp)
    const float* lg = a.logits + r * a.V;
    const int* words = sample_words(a, r);
    SamplePart part = {0, -1, -1, 0};
    const i64 end = imin(a.V, (c + 1) * SAMPLE_CHUNK);
#ifdef DI_EMULATE
    if (lane != 0) continue;
    for (i64 i = c * SAMPLE_CHUNK; i < end; i++) {
#else
    for (i64 i = c * SAMPLE_CHUNK + lane; i < end; i += 32) {
#endif
      if (words && !sample_allowed(words, i)) continue;
      if (part.first < 0) part.first = (int)i;
      if (isnan32(lg[i])) continue;
      if (part.maxi < 0 || lg[i] > part.maxv) {
        part.maxv = lg[i];
        part.maxi = (int)i;
      }
    }
#ifndef DI_EMULATE
    part = sample_part_warp(part);
    if (lane != 0) continue;
#endif
    ((SamplePart*)(a.scratch + r * a.V * 12))[c] = part;
  }
}

// Rows sampled at a temperature: vm/sampling.Row. Each allowed id's relative
// probability e = exp_sleef((logit − max) / T) in float32 and its integer mass
// ⌊e · 2^40⌋ (sample_mass); the cuts over the candidates of positive mass sorted by e
// (larger first, then lower id): the first top_k, then the shortest prefix whose mass
// reaches ⌈top_p · total⌉; the draw u = ⌊U · kept mass⌋ and the first kept id, in id
// order, where the kept mass so far exceeds u. Integer sums do not depend on their
// order, so a launch block finds the same token as the serial loop without sorting.
#define SAMPLE_MASS_SCALE 1099511627776.0f  // 2^40, vm/sampling's massScale
DEV u64 sample_mass(float e) { return (u64)(e * SAMPLE_MASS_SCALE); }
// sample_e: e = exp((lg − mx) / t), 0 below -104 before exp_sleef is called (its
// rounding of an infinite argument to an int is undefined on the host)
DEV float sample_e(float lg, float mx, float t) {
  const float x = (lg - mx) / t;
  return x < -104 ? 0.0f : exp_sleef(x);
}
// sample_threshold: ⌊U · m⌋, 0 below 1 (or NaN), at most m − 1 (vm/sampling threshold)
DEV u64 sample_threshold(double U, u64 m) {
  const double x = U * (double)m;
  if (!(x >= 1)) return 0;
  if (x >= (double)m) return m - 1;
  const u64 u = (u64)x;
  return u < m - 1 ? u : m - 1;
}
// sample_need: the top-p cut's mass ⌈top_p · total⌉ (vm/sampling needMass)
DEV u64 sample_need(float topP, u64 total) { return (u64)ceil((double)topP * (double)total); }
DEV bool sample_inf(float x) { return x == F32_INF || x == -F32_INF; }
// sample_keeps: whether id i of relative probability e is kept by the cut (all: every
// id of positive mass; else e above key's, or equal up to id last)
DEV bool sample_keeps(bool all, u32 key, i64 last, i64 i, float e) {
  const u32 k = bits_f32(e);
  return all || k > key || (k == key && i <= last);
}

// sample_row: one row at temperature t by one thread, as vm/sampling.Row (e and order:
// V floats and V ints of scratch). The emulated device runs it; the launch block's form
// (sample_blk) must give the same token.
DEV bool sample_before(const float* e, int x, int y) { return e[x] != e[y] ? e[x] > e[y] : x < y; }
DEVM void sample_sift(int* order, const float* e, i64 root, i64 n) {
  for (;;) {
    i64 child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && sample_before(e, order[child], order[child + 1])) child++;
    if (!sample_before(e, order[root], order[child])) return;
    int t = order[root]; order[root] = order[child]; order[child] = t;
    root = child;
  }
}
DEVM int sample_row(const float* lg, const int* words, i64 V, float* e, int* order, float t, i64 topK, float topP, double U) {
  i64 n = 0, last = -1;
  bool nan = false;
  float mx = -F32_INF;
  for (i64 i = 0; i < V; i++) {
    if (words && !sample_allowed(words, i)) continue;
    n++, last = i;
    if (isnan32(lg[i])) nan = true;
    else if (lg[i] > mx) mx = lg[i];
  }
  if (n == 0) return 0;
  if (nan || sample_inf(mx)) return (int)last;
  u64 total = 0;
  for (i64 i = 0; i < V; i++) {
    e[i] = (!words || sample_allowed(words, i)) ? sample_e(lg[i], mx, t) : 0.0f;
    total += sample_mass(e[i]);
  }
  const bool nucleus = topP > 0 && topP < 1;
  bool all = true;
  u32 key = 0;
  i64 lastk = 0;
  u64 m = total;
  if (topK > 0 || nucleus) {
    i64 np = 0;
    for (i64 i = 0; i < V; i++)
      if (sample_mass(e[i]) > 0) order[np++] = (int)i;
    i64 keep = np;
    if (topK > 0 && topK < keep) keep = topK;
    if (keep < np || nucleus) {
      // heap sort into (e larger first, then lower id)
      for (i64 j = np / 2 - 1; j >= 0; j--) sample_sift(order, e, j, np);
      for (i64 end = np - 1; end > 0; end--) {
        int x = order[0]; order[0] = order[end]; order[end] = x;
        sample_sift(order, e, 0, end);
      }
      if (nucleus) {
        const u64 need = sample_need(topP, total);
        u64 acc = 0;
        for (i64 j = 0; j < keep; j++)
          if ((acc += sample_mass(e[order[j]])) >= need) { keep = j + 1; break; }
      }
      m = 0;
      for (i64 j = 0; j < keep; j++) m += sample_mass(e[order[j]]);
      all = false, key = bits_f32(e[order[keep - 1]]), lastk = order[keep - 1];
    }
  }
  const u64 u = sample_threshold(U, m);
  u64 acc = 0;
  i64 got = 0;
  for (i64 i = 0; i < V; i++) {
    const u64 q = sample_mass(e[i]);
    if (q == 0 || !sample_keeps(all, key, lastk, i, e[i])) continue;
    got = i;
    if ((acc += q) > u) break;
  }
  return (int)got;
}

// SAMPLE_NT: the sample kernel's launch block, one a row (ops_basic.go sampleBlock): a
// row's passes are chains of memory round trips per thread, so the more threads share a
// row the shorter they are (run 30d: 128 threads, 0.70 ms a row; 30e: 1,024).
#define SAMPLE_NT 1024
#ifndef DI_EMULATE
// The launch block's form: SAMPLE_NT threads a row. The passes over the row are
// strided (thread j: ids j, j + SAMPLE_NT, …) with eight loads issued before their
// values are used (a row's pass is a chain of memory round trips otherwise: run 30b's
// first form took 2 ms a row); the draw's pass runs over contiguous chunks, in id order.
// Integer sums by shuffles and shared memory. The cut's boundary (the e at which the
// sorted mass, or count, first reaches its target) is found digit by digit of e's bits
// (bits 30-20, 19-10, 9-0), a histogram of mass and count a digit in shared memory,
// instead of by a sort; the ties at the boundary are taken in id order by the draw.
#define SAMPLE_NW (SAMPLE_NT / 32)
#define SAMPLE_AHEAD 8
// (shared-memory atomics add 32-bit words natively; a 64-bit add is a compare-and-swap
// loop, which run 30c's form paid for every id, so a mass goes into the histogram as
// four 11-bit parts, each part's sum below 2^32 for vocabularies below 2^21)
#define SAMPLE_PARTS 4
struct SampleShared {
  u32 hp[SAMPLE_PARTS][2048];
  u32 hc[2048];
  u64 red[SAMPLE_NW];
  u64 r_m, r_c;
  u32 r_digit;
  int r_found;
};
// sample_each: f(i, src[i]) for i = tid, tid + SAMPLE_NT, … below V, SAMPLE_AHEAD loads
// issued before the first value is used
template <class F> DEV void sample_each(const float* src, i64 V, int tid, F f) {
  i64 i = tid;
  for (; i + (SAMPLE_AHEAD - 1) * SAMPLE_NT < V; i += SAMPLE_AHEAD * SAMPLE_NT) {
    float v[SAMPLE_AHEAD];
    UNROLL_BY(8)
    for (int j = 0; j < SAMPLE_AHEAD; j++) v[j] = src[i + j * SAMPLE_NT];
    UNROLL_BY(8)
    for (int j = 0; j < SAMPLE_AHEAD; j++) f(i + j * SAMPLE_NT, v[j]);
  }
  for (; i < V; i += SAMPLE_NT) f(i, src[i]);
}
// sample_span: f(i, src[i]) for i in [lo, hi) in order until f returns true, loads
// SAMPLE_AHEAD at a time
template <class F> DEV void sample_span(const float* src, i64 lo, i64 hi, F f) {
  i64 i = lo;
  for (; i + SAMPLE_AHEAD <= hi; i += SAMPLE_AHEAD) {
    float v[SAMPLE_AHEAD];
    UNROLL_BY(8)
    for (int j = 0; j < SAMPLE_AHEAD; j++) v[j] = src[i + j];
    for (int j = 0; j < SAMPLE_AHEAD; j++)
      if (f(i + j, v[j])) return;
  }
  for (; i < hi; i++)
    if (f(i, src[i])) return;
}
// sample_blk_sum: the block's sum of v (every thread gets it)
DEV u64 sample_blk_sum(u64 v, int tid, SampleShared& S) {
  for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((tid & 31) == 0) S.red[tid >> 5] = v;
  __syncthreads();
  u64 s = 0;
  for (int w = 0; w < SAMPLE_NW; w++) s += S.red[w];
  __syncthreads();
  return s;
}
// sample_blk_max: the block's largest v (unsigned)
DEV u64 sample_blk_max(u64 v, int tid, SampleShared& S) {
  for (int off = 16; off >= 1; off >>= 1) {
    const u64 o = __shfl_xor_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  if ((tid & 31) == 0) S.red[tid >> 5] = v;
  __syncthreads();
  u64 s = 0;
  for (int w = 0; w < SAMPLE_NW; w++) s = S.red[w] > s ? S.red[w] : s;
  __syncthreads();
  return s;
}
// sample_blk_exscan: the sum of v over the threads before this one
DEV u64 sample_blk_exscan(u64 v, int tid, SampleShared& S) {
  const int lane = tid & 31;
  u64 x = v;
  for (int off = 1; off < 32; off <<= 1) {
    const u64 o = __shfl_up_sync(0xffffffffu, x, off);
    if (lane >= off) x += o;
  }
  if (lane == 31) S.red[tid >> 5] = x;
  __syncthreads();
  u64 before = 0;
  for (int w = 0; w < (tid >> 5); w++) before += S.red[w];
  __syncthreads();
  return before + x - v;
}
// the digits of e's bits the descent takes: level lv's shift and width
DEV int sample_shift(int lv) { return lv == 0 ? 20 : lv == 1 ? 10 : 0; }
DEV int sample_width(int lv) { return lv == 0 ? 11 : 10; }
DEV void sample_hist_zero(int lv, int tid, SampleShared& S) {
  for (int d = tid; d < (1 << sample_width(lv)); d += SAMPLE_NT) {
    for (int j = 0; j < SAMPLE_PARTS; j++) S.hp[j][d] = 0;
    S.hc[d] = 0;
  }
}
// sample_hist_mass: digit d's mass, its parts put together
DEV u64 sample_hist_mass(const SampleShared& S, int d) {
  return ((u64)S.hp[3][d] << 33) + ((u64)S.hp[2][d] << 22) + ((u64)S.hp[1][d] << 11) + (u64)S.hp[0][d];
}
// sample_hist_add: a candidate of mass q > 0 and key k into level lv's histogram when
// its bits above the level are prefix
DEV void sample_hist_add(int lv, u32 prefix, u32 k, u64 q, SampleShared& S) {
  const int sh = sample_shift(lv), w = sample_width(lv);
  if ((k >> (sh + w)) != prefix) return;
  const u32 d = (k >> sh) & ((1u << w) - 1u);
  atomicAdd(&S.hp[0][d], (u32)(q & 0x7ffu));
  atomicAdd(&S.hp[1][d], (u32)((q >> 11) & 0x7ffu));
  atomicAdd(&S.hp[2][d], (u32)((q >> 22) & 0x7ffu));
  atomicAdd(&S.hp[3][d], (u32)(q >> 33));
  atomicAdd(&S.hc[d], 1u);
}
// sample_digit: level lv's digit at which the mass (by_mass) or count, added from the
// largest digit down after above's, first reaches target; prefix and above move to it
// (above: the mass and count of the keys larger than the digit's). Returns false when
// the level's candidates together stay below it. The histogram must be complete.
DEV bool sample_digit(int lv, bool by_mass, u64 target, int tid, SampleShared& S, u32* prefix, u64* above_m, u64* above_c) {
  if (tid < 32) {
    // lane l sums digits nb-1-l·c down to nb-(l+1)·c (c = nb/32), the lanes' sums
    // scanned from the largest digits down; the lane where the target is crossed walks
    // its digits
    const int nb = 1 << sample_width(lv), c = nb / 32, hi = nb - 1 - tid * c;
    u64 sm = 0, sc = 0;
    for (int j = 0; j < c; j++) sm += sample_hist_mass(S, hi - j), sc += S.hc[hi - j];
    u64 xm = sm, xc = sc;
    for (int off = 1; off < 32; off <<= 1) {
      const u64 om = __shfl_up_sync(0xffffffffu, xm, off), oc = __shfl_up_sync(0xffffffffu, xc, off);
      if (tid >= off) xm += om, xc += oc;
    }
    u64 bm = *above_m + xm - sm, bc = *above_c + xc - sc;  // above this lane's digits
    const u64 before = by_mass ? bm : bc, mine = by_mass ? sm : sc;
    if (tid == 0) S.r_found = 0;
    __syncwarp();
    if (before < target && target <= before + mine) {
      for (int j = 0; j < c; j++) {
        const int d = hi - j;
        const u64 dm = sample_hist_mass(S, d), dc = S.hc[d];
        if ((by_mass ? bm + dm : bc + dc) >= target) {
          S.r_digit = (u32)d, S.r_m = bm, S.r_c = bc, S.r_found = 1;
          break;
        }
        bm += dm, bc += dc;
      }
    }
  }
  __syncthreads();
  const bool found = S.r_found != 0;
  *prefix = (*prefix << sample_width(lv)) | S.r_digit;
  *above_m = S.r_m, *above_c = S.r_c;
  __syncthreads();  // read before the histogram or the results are written again
  return found;
}
// sample_descend: the key (e's bits) of the candidate of positive mass at which the
// mass (by_mass) or the count of the candidates taken in sorted order first reaches
// target, and the mass and count of those above it (larger keys); level 0's histogram
// already filled when have0. Returns false when they all stay below target.
DEV bool sample_descend(const float* E, i64 V, bool by_mass, u64 target, bool have0, int tid, SampleShared& S, u32* key, u64* am, u64* ac) {
  u32 prefix = 0;
  u64 above_m = 0, above_c = 0;
  for (int lv = 0; lv < 3; lv++) {
    if (lv > 0 || !have0) {
      sample_hist_zero(lv, tid, S);
      __syncthreads();
      sample_each(E, V, tid, [&](i64, float e) {
        const u64 q = sample_mass(e);
        if (q > 0) sample_hist_add(lv, prefix, bits_f32(e), q, S);
      });
      __syncthreads();
    }
    if (!sample_digit(lv, by_mass, target, tid, S, &prefix, &above_m, &above_c)) return false;
  }
  *key = prefix, *am = above_m, *ac = above_c;
  return true;
}
// sample_blk: one row at temperature t by the launch block (tid: its thread); the thread
// whose chunk holds the token (or thread 0) writes a.out[r].
DEV void sample_blk(const SampleArgs& a, i64 r, int tid, SampleShared& S) {
  const float* lg = a.logits + r * a.V;
  const float* p = a.params + 4 * r;
  const float t = p[0], topP = p[1];
  const i64 topK = (i64)p[2];
  const double U = (double)p[3];
  const int* words = sample_words(a, r);
  float* E = (float*)(a.scratch + r * a.V * 12);
  const i64 V = a.V;
  // the allowed ids: how many, the last, a NaN among them, the largest
  u64 n = 0, last = 0, nan = 0;
  float mx = -F32_INF;
  sample_each(lg, V, tid, [&](i64 i, float v) {
    if (words && !sample_allowed(words, i)) return;
    n++, last = (u64)i + 1;
    if (isnan32(v)) nan = 1;
    else if (v > mx) mx = v;
  });
  n = sample_blk_sum(n, tid, S);
  last = sample_blk_max(last, tid, S);
  nan = sample_blk_max(nan, tid, S);
  // the largest as an ordered key (the float's bits, negatives flipped)
  const u32 mb = bits_f32(mx);
  const u32 mk = (u32)sample_blk_max((u64)(mb & 0x80000000u ? ~mb : mb | 0x80000000u), tid, S);
  mx = f32_bits(mk & 0x80000000u ? mk & 0x7fffffffu : ~mk);
  if (n == 0 || nan || sample_inf(mx)) {
    if (tid == 0) a.out[r] = n == 0 ? 0 : (int)(last - 1);
    return;
  }
  // each id's relative probability into E, the total mass, the count of positive mass,
  // and (with a top-p cut) the descent's first histogram
  const bool nucleus = topP > 0 && topP < 1;
  if (nucleus) sample_hist_zero(0, tid, S);
  __syncthreads();
  u64 total = 0, npos = 0;
  sample_each(lg, V, tid, [&](i64 i, float v) {
    const float e = (!words || sample_allowed(words, i)) ? sample_e(v, mx, t) : 0.0f;
    E[i] = e;
    const u64 q = sample_mass(e);
    if (q == 0) return;
    total += q, npos++;
    if (nucleus) sample_hist_add(0, 0, bits_f32(e), q, S);
  });
  total = sample_blk_sum(total, tid, S);  // (its barriers order E's and the histogram's writes before their reads)
  npos = sample_blk_sum(npos, tid, S);
  // the cut: the boundary key, how many ids of that key are kept (the first in id
  // order), the mass above it
  bool all = true;
  u32 key = 0;
  u64 ties = 0, am = 0, ac = 0;
  i64 pos = (i64)npos;
  if (nucleus) {
    const u64 need = sample_need(topP, total);
    if (sample_descend(E, V, true, need, true, tid, S, &key, &am, &ac)) {
      const u64 q = sample_mass(f32_bits(key));
      ties = (need - am + q - 1) / q;
      pos = (i64)(ac + ties);
      all = false;
    }
  }
  if (topK > 0 && topK < pos) {
    sample_descend(E, V, false, (u64)topK, false, tid, S, &key, &am, &ac);
    ties = (u64)topK - ac;
    all = false;
  }
  const u64 qk = all ? 0 : sample_mass(f32_bits(key));
  const u64 m = all ? total : am + ties * qk;
  const u64 u = sample_threshold(U, m);
  // the draw: each thread's chunk's kept mass (its ids above the key, and the ties of
  // the key kept: those the threads before left of the first ties), the thread where u
  // falls walks its chunk
  const i64 C = (V + SAMPLE_NT - 1) / SAMPLE_NT, lo = imin(V, tid * C), hi = imin(V, lo + C);
  u64 above = 0, tc = 0;
  sample_span(E, lo, hi, [&](i64, float e) {
    const u64 q = sample_mass(e);
    const u32 k = bits_f32(e);
    if (q > 0 && (all || k > key)) above += q;
    else if (!all && q > 0 && k == key) tc++;
    return false;
  });
  const u64 tb = all ? 0 : sample_blk_exscan(tc, tid, S);
  const u64 kt = tb >= ties ? 0 : (ties - tb < tc ? ties - tb : tc);  // this chunk's kept ties
  const u64 s = above + kt * qk;
  const u64 before = sample_blk_exscan(s, tid, S);
  if (before <= u && u < before + s) {
    u64 acc = before, seen = 0;
    sample_span(E, lo, hi, [&](i64 i, float e) {
      const u64 q = sample_mass(e);
      const u32 k = bits_f32(e);
      if (q == 0 || !(all || k > key || (k == key && seen++ < kt))) return false;
      if ((acc += q) <= u) return false;
      a.out[r] = (int)i;
      return true;
    });
  }
}
#endif

// A launch block (SAMPLE_NT threads) a row. A greedy row's parts folded by its first warp (lane l folds
// parts l, l + 32, … in order, then the lanes by shuffles); a row at a temperature by
// the whole block (sample_blk). The emulated device runs each row at thread 0: the
// parts folded serially, or sample_row. Until run 29 a thread a row did all of it;
// until run 30 a warp a row (a temperature's sort and draw on lane 0).
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(SAMPLE_NT, 1)
KERNEL(sample, SampleArgs) {
#ifndef DI_EMULATE
  __shared__ SampleShared S;
#endif
  for (i64 w = GIDX; w < a.R * SAMPLE_NT; w += GSTRIDE) {
    const i64 r = w / SAMPLE_NT;
    const int tid = (int)(w % SAMPLE_NT), lane = tid & 31;
    const float* p = a.params + 4 * r;
    if (!(p[0] > 0)) {
      if (tid >= 32) continue;
      const SamplePart* parts = (const SamplePart*)(a.scratch + r * a.V * 12);
      const i64 nch = (a.V + SAMPLE_CHUNK - 1) / SAMPLE_CHUNK;
      SamplePart f = {0, -1, -1, 0};
#ifdef DI_EMULATE
      if (lane != 0) continue;
      for (i64 c = 0; c < nch; c++) sample_part_fold(&f, parts[c]);
#else
      for (i64 c = lane; c < nch; c += 32) sample_part_fold(&f, parts[c]);
      f = sample_part_warp(f);
      if (lane != 0) continue;
#endif
      const float* lg = a.logits + r * a.V;
      i64 first = f.first, best = f.maxi;
      if (first >= 0 && isnan32(lg[first])) best = first;
      a.out[r] = (int)(best < 0 ? (first < 0 ? 0 : first) : best);
      continue;
    }
#ifdef DI_EMULATE
    if (tid != 0) continue;
    float* e = (float*)(a.scratch + r * a.V * 12);
    int* order = (int*)(a.scratch + r * a.V * 12 + a.V * 4);
    a.out[r] = sample_row(a.logits + r * a.V, sample_words(a, r), a.V, e, order, p[0], (i64)p[2], p[1], (double)p[3]);
#else
    sample_blk(a, r, tid, S);
    __syncthreads();  // the block's shared memory free for its next row
#endif
  }
}

#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// resolve_prev: a pipelined step's input tokens that stand for the previous step's
// sampled tokens (targets.FromPrevious(j) = -1 - j) replaced by them, on the device, so
// that a step can be enqueued before the previous one's tokens are back on the host.
// prev holds the previous step's nprev sampled ids.
struct ResolvePrevArgs { int* tokens; const int* prev; i64 T; i64 nprev; i64* err; };
KERNEL(resolve_prev, ResolvePrevArgs) {
  for (i64 i = GIDX; i < a.T; i += GSTRIDE) {
    int t = a.tokens[i];
    if (t >= 0) continue;
    i64 j = -1 - (i64)t;
    if (j >= a.nprev) { *a.err = 3; continue; }
    a.tokens[i] = a.prev[j];
  }
}

// unpack_step: a step's parameters, copied to the device in one piece (the staging
// region; runtime.go packLayout lays it out and passes the word offsets), scattered to
// where the kernels read them, and tokens that stand for the previous step's sampled
// tokens (FromPrevious(j) = -1 - j) replaced by them on the way, as resolve_prev does.
// The region starts with two i64: nprev, how many ids the previous step sampled (-1:
// tokens are copied as they are, for a step that does not resolve them), and m, how
// many logits rows carry a grammar mask. With a mask parameter (mask set) every row's
// flag word is written, and the words of the m masked rows, whose row numbers follow
// the flags; the other rows' words are left as they are (the sampler reads a row's
// words only when its flag is set). Everything here but nprev and m follows from the
// step's shape and fixed addresses, so the launch may sit in the step's graph.
struct UnpackArgs {
  const int* src; const int* prev; i64* err;
  int* tokens; int* positions; int* rows; int* sample; int* seqs; int* mask;
  i64 T; i64 R; i64 seqWords; i64 cols;
  i64 oTok; i64 oPos; i64 oRows; i64 oSample; i64 oSeqs; i64 oFlags; i64 oMaskRows; i64 oMasks;
};
KERNEL(unpack_step, UnpackArgs) {
  const i64* head = (const i64*)a.src;
  i64 nprev = head[0], m = imax(0, imin(head[1], a.R));
  for (i64 i = GIDX; i < a.T; i += GSTRIDE) {
    int t = a.src[a.oTok + i];
    if (t < 0 && nprev >= 0) {
      i64 j = -1 - (i64)t;
      if (j >= nprev) *a.err = 3;
      else t = a.prev[j];
    }
    a.tokens[i] = t;
    a.positions[i] = a.src[a.oPos + i];
  }
  for (i64 i = GIDX; i < a.R; i += GSTRIDE) {
    a.rows[i] = a.src[a.oRows + i];
    if (a.mask) a.mask[i * a.cols] = a.src[a.oFlags + i];
  }
  for (i64 i = GIDX; i < 4 * a.R; i += GSTRIDE) a.sample[i] = a.src[a.oSample + i];
  for (i64 i = GIDX; i < a.seqWords; i += GSTRIDE) a.seqs[i] = a.src[a.oSeqs + i];
  if (a.mask) {
    i64 w = a.cols - 1;
    for (i64 i = GIDX; i < m * w; i += GSTRIDE) {
      i64 k = i / w, r = a.src[a.oMaskRows + k];
      if (r < 0 || r >= a.R) continue;
      a.mask[r * a.cols + 1 + i % w] = a.src[a.oMasks + i];
    }
  }
}

// keep_ids: the step's sampled ids copied next to the error flag (runtime.go's
// read-back region), where the next step's FromPrevious tokens read them and one copy
// brings flag and ids to the host.
struct KeepIdsArgs { const int* ids; int* out; i64 R; };
KERNEL(keep_ids, KeepIdsArgs) {
  for (i64 i = GIDX; i < a.R; i += GSTRIDE) a.out[i] = a.ids[i];
}
