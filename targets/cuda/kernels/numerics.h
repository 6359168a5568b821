// numerics.h: DeepSeek-V4.1's fp32 summation orders and elementwise paths, ported from
// the cpu target (targets/cpu/v41_order.go, v41_exp.go) operation for operation, so
// that a kernel built on them rounds exactly where the cpu target (and the V4.1
// reference it reproduces) rounds. Every fused multiply-add of the exact kernels is the
// cpu target's fma32: an exact double FMA rounded to float32; the fast mode's MKL-order
// chains use fma_fast.
#ifdef DI_EMULATE
#define DEVM inline
#else
#define DEVM __device__ __forceinline__
#endif

DEV float fma32(float a, float b, float c) { return (float)fma((double)a, (double)b, (double)c); }

// fma_fast is the float32 fused multiply-add (one rounding) of the fast mode's MKL-order
// chains (lane_chain, mkl_gemv_lanes, mkl_lane and its dot_seq<true>, gemv_lane_staged,
// gemv_tile, seq_tile, mkl_fold's tail: every kernel that splits an MKL order into lanes
// or tiles, all of them fast-mode kernels; the exact kernels' mkl_dot keeps fma32). It is fma32's value except where the
// exact a·b + c lies within 2^-53 (relative) of a float32 rounding midpoint, not on it,
// and fma32's second rounding breaks the tie the other way (about once in 2^28 steps of
// random data); a float32 FMA is one instruction where fma32 is a double FMA and four
// float↔double conversions (16 a clock a multiprocessor on the H200: the bound of run
// 15's router and mix tiles, docs/perf/small-kernels.md).
DEV float fma_fast(float a, float b, float c) { return fmaf(a, b, c); }

// Row accessors for the dot products: a float32 row, or a weight matrix row in any
// storage format (widened exactly as the cpu target widens it).
struct FRow {
  const float* p;
  DEVM float operator()(i64 k) const { return p[k]; }
};
struct WRow {
  Weight w;
  i64 r;
  DEVM float operator()(i64 k) const { return wval(w, r, k); }
};

DEV int ceil_log2(i64 n) {
  int l = 0;
  while ((1ll << l) < n) l++;
  return l;
}

// cascade_sum is ATen's vectorized inner sum of a contiguous fp32 row (cpu: cascadeSum).
template <class X>
DEVM float cascade_sum(X x, i64 n) {
  const int lanes = 8, ilp = 4, levels = 4;
  i64 nvec = n / lanes;
  i64 sizeILP = nvec / ilp;
  int power = 4;
  if (sizeILP > 1) {
    int p = ceil_log2(sizeILP) / levels;
    power = p > 4 ? p : 4;
  }
  i64 step = 1ll << power;
  i64 mask = step - 1;
  float acc[levels][ilp][lanes];
  for (int a0 = 0; a0 < levels; a0++)
    for (int a1 = 0; a1 < ilp; a1++)
      for (int a2 = 0; a2 < lanes; a2++) acc[a0][a1][a2] = 0;
  i64 i = 0;
  while (i + step <= sizeILP) {
    for (i64 j = 0; j < step; j++) {
      for (int k = 0; k < ilp; k++)
        for (int l = 0; l < lanes; l++) acc[0][k][l] += x((i * ilp + k) * lanes + l);
      i++;
    }
    for (int j = 1; j < levels; j++) {
      for (int k = 0; k < ilp; k++) {
        for (int l = 0; l < lanes; l++) {
          acc[j][k][l] += acc[j - 1][k][l];
          acc[j - 1][k][l] = 0;
        }
      }
      if ((i & (mask << (j * power))) != 0) break;
    }
  }
  for (; i < sizeILP; i++)
    for (int k = 0; k < ilp; k++)
      for (int l = 0; l < lanes; l++) acc[0][k][l] += x((i * ilp + k) * lanes + l);
  for (int j = 1; j < levels; j++)
    for (int k = 0; k < ilp; k++)
      for (int l = 0; l < lanes; l++) acc[0][k][l] += acc[j][k][l];
  float ps[ilp][lanes];
  for (int k = 0; k < ilp; k++)
    for (int l = 0; l < lanes; l++) ps[k][l] = acc[0][k][l];
  for (i64 t = sizeILP * ilp; t < nvec; t++)
    for (int l = 0; l < lanes; l++) ps[0][l] += x(t * lanes + l);
  for (int k = 1; k < ilp; k++)
    for (int l = 0; l < lanes; l++) ps[0][l] += ps[k][l];
  float fin = 0;
  for (i64 t = nvec * lanes; t < n; t++) fin += x(t);
  for (int l = 0; l < lanes; l++) fin += ps[0][l];
  return fin;
}

// MKL's sgemm orders for F.linear (cpu: fp32Linear, mklOrder).
enum { ORDER_SEQ = 0, ORDER_GEMV = 1, ORDER_SMALL = 2, ORDER_SPLIT2 = 3, ORDER_SPLIT4 = 4 };

DEV i64 small_rows(i64 K, i64 N) {
  if (N >= 448 && K < 256) return 3;
  return imin(15, K / 24);
}

DEV int mkl_order(i64 m, i64 K, i64 N) {
  if (m == 1 && N >= 8) return ORDER_GEMV;
  if (m <= small_rows(K, N)) return ORDER_SMALL;
  if (m >= 17 && m <= 128 && N < 32 && m * N * K >= 294912) {
    if (K >= 1024 && K % 4 == 0) return ORDER_SPLIT4;
    if (K % 2 == 0) return ORDER_SPLIT2;
  }
  return ORDER_SEQ;
}

// dot_seq is the fused multiply-adds of x(k)·w(k) for k = k0..k1-1 in order (FAST:
// fma_fast, the fast mode's lanes; else fma32). The loads of 16 terms are issued before
// their chain (in flight together; a 16,384-long chain that waited for each load in turn
// took most of a V4.1 prefill); the values are the plain loop's.
template <bool FAST = false, class X, class W>
DEVM float dot_seq(X x, W w, i64 k0, i64 k1) {
  float v = 0;
  i64 k = k0;
  for (; k + 16 <= k1; k += 16) {
    float xv[16], wv[16];
    UNROLL_BY(16)
    for (int u = 0; u < 16; u++) {
      xv[u] = x(k + u);
      wv[u] = w(k + u);
    }
    UNROLL_BY(16)
    for (int u = 0; u < 16; u++) v = FAST ? fma_fast(xv[u], wv[u], v) : fma32(xv[u], wv[u], v);
  }
  for (; k < k1; k++) v = FAST ? fma_fast(x(k), w(k), v) : fma32(x(k), w(k), v);
  return v;
}

DEV float halving16(float* v) {
  for (int len = 16; len > 1; len /= 2) {
    int h = len / 2;
    for (int i = 0; i < h; i++) v[i] += v[i + h];
  }
  return v[0];
}

template <class X, class W>
DEVM float dot_gemv(X x, W w, i64 K) {
  float lanes[16];
  for (int l = 0; l < 16; l++) lanes[l] = 0;
  lanes[0] = x(0) * w(0);
  i64 nvec = (K - 1) / 16;
  for (i64 t = 0; t < nvec; t++)
    for (int l = 0; l < 16; l++) {
      i64 k = 1 + 16 * t + l;
      lanes[l] = fma32(x(k), w(k), lanes[l]);
    }
  float s = halving16(lanes);
  if (1 + 16 * nvec == K) return s;
  float tail[16];
  for (int l = 0; l < 16; l++) tail[l] = 0;
  tail[0] = s;
  for (i64 k = 1 + 16 * nvec; k < K; k++) {
    i64 l = k - (1 + 16 * nvec);
    tail[l] = fma32(x(k), w(k), tail[l]);
  }
  return halving16(tail);
}

template <class X, class W>
DEVM float dot_small(X x, W w, i64 K) {
  float acc[4][4];
  for (int u = 0; u < 4; u++)
    for (int l = 0; l < 4; l++) acc[u][l] = 0;
  for (i64 k = 0; k < K; k++) {
    int u = (int)((k / 4) % 4), l = (int)(k % 4);
    acc[u][l] = fma32(x(k), w(k), acc[u][l]);
  }
  float v[4];
  for (int l = 0; l < 4; l++) {
    float s = acc[0][l];
    for (int u = 1; u < 4; u++) s += acc[u][l];
    v[l] = s;
  }
  return (v[0] + v[1]) + (v[2] + v[3]);
}

// piece_index is which of parts pieces (as even as possible, larger first) index i of
// n falls in.
DEV int piece_index(i64 n, int parts, i64 i) {
  i64 base = n / parts, extra = n % parts, start = 0;
  for (int p = 0; p < parts; p++) {
    i64 size = base + (p < extra ? 1 : 0);
    if (i < start + size) return p;
    start += size;
  }
  return parts - 1;
}

DEV void chunk_order(i64 m, i64 r, int* order) {
  i64 groups = m > 64 ? 4 : 2;
  i64 per = (m + groups - 1) / groups;
  i64 off = r % per, size = imin(per, m - r / per * per);
  int q = piece_index(size, 4, off);
  order[0] = 0;
  if (q == 2) { order[1] = 2; order[2] = 1; order[3] = 3; }
  else if (q == 3) { order[1] = 3; order[2] = 1; order[3] = 2; }
  else { order[1] = 1; order[2] = 2; order[3] = 3; }
}

template <class X, class W>
DEVM float dot_split4(X x, W w, i64 K, const int* order) {
  i64 c = K / 4;
  float part[4];
  for (int p = 0; p < 4; p++) part[p] = dot_seq(x, w, p * c, (p + 1) * c);
  float v = part[order[0]];
  for (int j = 1; j < 4; j++) v += part[order[j]];
  return v;
}

// mkl_dot is y[r, n] of an m-row fp32 F.linear of shape (K, N): row r of x against row
// n of w, in the order MKL sums it (cpu: fp32Linear).
template <class X, class W>
DEVM float mkl_dot(X x, W w, i64 m, i64 r, i64 K, i64 N) {
  switch (mkl_order(m, K, N)) {
    case ORDER_GEMV: return dot_gemv(x, w, K);
    case ORDER_SMALL: return dot_small(x, w, K);
    case ORDER_SPLIT4: {
      int order[4];
      chunk_order(m, r, order);
      return dot_split4(x, w, K, order);
    }
    case ORDER_SPLIT2: {
      i64 h = K / 2;
      return dot_seq(x, w, 0, h) + dot_seq(x, w, h, K);
    }
  }
  return dot_seq(x, w, 0, K);
}

// The lanes of these orders, for kernels that run them as separate work items (the
// fast mode's mhc and compressor kernels): cascade_sum keeps 32 independent lanes
// (ILP × vector lanes, each with its own cascade of levels), mkl_dot up to 16
// (dot_gemv's lanes, dot_small's accumulators, dot_split4's parts). A lane computed
// alone and the lanes folded give the serial function's value bit for bit.

// cascade_lane is lane (k, l) of cascade_sum(x, n): its level accumulators run and
// folded, before the tail and the lanes are added (cascade_fold).
template <class X>
DEVM float cascade_lane(X x, i64 n, int k, int l) {
  const int lanes = 8, ilp = 4, levels = 4;
  i64 nvec = n / lanes;
  i64 sizeILP = nvec / ilp;
  int power = 4;
  if (sizeILP > 1) {
    int p = ceil_log2(sizeILP) / levels;
    power = p > 4 ? p : 4;
  }
  i64 step = 1ll << power;
  i64 mask = step - 1;
  float acc[levels];
  for (int j = 0; j < levels; j++) acc[j] = 0;
  i64 i = 0;
  while (i + step <= sizeILP) {
    // eight terms' loads before their additions (step is a multiple of 16), so that
    // they are in flight together; the same additions in the same order
    for (i64 j = 0; j < step; j += 8) {
      float v[8];
      UNROLL_BY(8) for (int u = 0; u < 8; u++) v[u] = x(((i + u) * ilp + k) * lanes + l);
      UNROLL_BY(8) for (int u = 0; u < 8; u++) acc[0] += v[u];
      i += 8;
    }
    for (int j = 1; j < levels; j++) {
      acc[j] += acc[j - 1];
      acc[j - 1] = 0;
      if ((i & (mask << (j * power))) != 0) break;
    }
  }
  for (; i < sizeILP; i++) acc[0] += x((i * ilp + k) * lanes + l);
  for (int j = 1; j < levels; j++) acc[0] += acc[j];
  return acc[0];
}

// cascade_blocks: the level-0 blocks of each of cascade_lane's lanes (the lane's terms
// in steps of `step`, and a last, shorter block for the tail when there is one). A
// block's sum from 0 in term order is what cascade_lane's acc[0] holds when the block
// ends (acc[0] is 0 when a block begins), so cascade_lane_fold replays the levels from
// the blocks' sums alone, and the blocks can be summed in parallel
// (mhc_fast_norm41_one).
DEVM void cascade_shape(i64 n, i64* sizeILP, i64* step, int* power) {
  const int lanes = 8, ilp = 4, levels = 4;
  *sizeILP = n / lanes / ilp;
  *power = 4;
  if (*sizeILP > 1) {
    int p = ceil_log2(*sizeILP) / levels;
    *power = p > 4 ? p : 4;
  }
  *step = 1ll << *power;
}
DEVM i64 cascade_blocks(i64 n) {
  i64 sizeILP, step;
  int power;
  cascade_shape(n, &sizeILP, &step, &power);
  return (sizeILP + step - 1) / step;
}
// cascade_block_sum: block b of lane (k, l): its terms summed from 0 in order.
template <class X>
DEVM float cascade_block_sum(X x, i64 n, int k, int l, i64 b) {
  const int lanes = 8, ilp = 4;
  i64 sizeILP, step;
  int power;
  cascade_shape(n, &sizeILP, &step, &power);
  const i64 end = imin(sizeILP, (b + 1) * step);
  float s = 0;
  for (i64 i = b * step; i < end; i++) s += x((i * ilp + k) * lanes + l);
  return s;
}
// cascade_lane_fold: cascade_lane(x, n, k, l) from the lane's block sums bs[b·stride].
DEVM float cascade_lane_fold(const float* bs, i64 stride, i64 n) {
  const int levels = 4;
  i64 sizeILP, step;
  int power;
  cascade_shape(n, &sizeILP, &step, &power);
  const i64 mask = step - 1;
  float acc[levels];
  for (int j = 0; j < levels; j++) acc[j] = 0;
  i64 i = 0, b = 0;
  while (i + step <= sizeILP) {
    acc[0] = bs[stride * b++];  // (acc[0] is 0 when a block begins)
    i += step;
    for (int j = 1; j < levels; j++) {
      acc[j] += acc[j - 1];
      acc[j - 1] = 0;
      if ((i & (mask << (j * power))) != 0) break;
    }
  }
  if (i < sizeILP) acc[0] = bs[stride * b];  // the tail's block
  for (int j = 1; j < levels; j++) acc[0] += acc[j];
  return acc[0];
}

// cascade_fold is cascade_sum(x, n) from its 32 lanes (lane[k·8 + l]).
template <class X>
DEVM float cascade_fold(X x, i64 n, const float* lane) {
  const int lanes = 8, ilp = 4;
  i64 nvec = n / lanes;
  i64 sizeILP = nvec / ilp;
  float ps[ilp][lanes];
  for (int k = 0; k < ilp; k++)
    for (int l = 0; l < lanes; l++) ps[k][l] = lane[k * lanes + l];
  for (i64 t = sizeILP * ilp; t < nvec; t++)
    for (int l = 0; l < lanes; l++) ps[0][l] += x(t * lanes + l);
  for (int k = 1; k < ilp; k++)
    for (int l = 0; l < lanes; l++) ps[0][l] += ps[k][l];
  float fin = 0;
  for (i64 t = nvec * lanes; t < n; t++) fin += x(t);
  for (int l = 0; l < lanes; l++) fin += ps[0][l];
  return fin;
}

// lane_chain is v + x(k)·w(k) for k = k0, k0 + 16, ... (n terms), fused multiply-adds in
// that order. The loads of 8 terms are issued before their chain, so that they are in
// flight together (a value read through a format switch, as wval does, would otherwise
// wait for each load in turn); the values are the plain loop's. (16 terms, tried in run
// 11b on the H200: batch 1 a little faster, batch 64 and 256 slower — V4.1's router
// parts 5.75 → 7.76 ms at batch 256 — so 8 stays.)
template <class X, class W>
DEVM float lane_chain(X x, W w, i64 k0, i64 n, float v) {
  i64 t = 0;
  for (; t + 8 <= n; t += 8) {
    float xv[8], wv[8];
    UNROLL_BY(8)
    for (int u = 0; u < 8; u++) {
      i64 k = k0 + 16 * (t + u);
      xv[u] = x(k);
      wv[u] = w(k);
    }
    UNROLL_BY(8)
    for (int u = 0; u < 8; u++) v = fma_fast(xv[u], wv[u], v);
  }
  for (; t < n; t++) v = fma_fast(x(k0 + 16 * t), w(k0 + 16 * t), v);
  return v;
}

// mkl_gemv_lanes is lane L of mkl_dot's GEMV order (one row: mkl_lane's ORDER_GEMV) for
// NT rows x[u] against the same weight row w, their chains side by side so that a
// weight value is loaded once for them; v[u] the lanes' values, each the one mkl_lane
// gives. (NT is at most 4: the loops over the rows unroll by 4.)
template <int NT, class X, class W>
DEVM void mkl_gemv_lanes(const X* x, W w, i64 K, int L, float* v) {
  UNROLL_BY(4)
  for (int u = 0; u < NT; u++) v[u] = L == 0 ? x[u](0) * w(0) : 0;
  const i64 n = (K - 1) / 16, k0 = 1 + L;
  i64 j = 0;
  for (; j + 8 <= n; j += 8) {
    float wv[8], xv[NT][8];
    UNROLL_BY(8)
    for (int q = 0; q < 8; q++) {
      const i64 k = k0 + 16 * (j + q);
      wv[q] = w(k);
      UNROLL_BY(4)
      for (int u = 0; u < NT; u++) xv[u][q] = x[u](k);
    }
    UNROLL_BY(4)
    for (int u = 0; u < NT; u++)
      UNROLL_BY(8)
      for (int q = 0; q < 8; q++) v[u] = fma_fast(xv[u][q], wv[q], v[u]);
  }
  for (; j < n; j++) {
    const i64 k = k0 + 16 * j;
    const float wk = w(k);
    UNROLL_BY(4)
    for (int u = 0; u < NT; u++) v[u] = fma_fast(x[u](k), wk, v[u]);
  }
}

// mkl_lane is lane L (of 16) of mkl_dot(x, w, m, ·, K, N): dot_gemv's lane L,
// dot_small's accumulator (L/4, L%4), dot_split4's or SPLIT2's part L, or the whole
// sequential dot in lane 0; 0 in the lanes an order does not use.
template <class X, class W>
DEVM float mkl_lane(X x, W w, i64 m, i64 K, i64 N, int L) {
  switch (mkl_order(m, K, N)) {
    case ORDER_GEMV: {
      float v = L == 0 ? x(0) * w(0) : 0;
      i64 nvec = (K - 1) / 16;
      return lane_chain(x, w, 1 + L, nvec, v);
    }
    case ORDER_SMALL: {
      i64 k0 = 4 * (L / 4) + L % 4;
      return lane_chain(x, w, k0, k0 < K ? (K - k0 + 15) / 16 : 0, 0.0f);
    }
    case ORDER_SPLIT4: {
      i64 c = K / 4;
      return L < 4 ? dot_seq<true>(x, w, L * c, (L + 1) * c) : 0;
    }
    case ORDER_SPLIT2: {
      i64 h = K / 2;
      return L == 0 ? dot_seq<true>(x, w, 0, h) : L == 1 ? dot_seq<true>(x, w, h, K) : 0;
    }
  }
  return L == 0 ? dot_seq<true>(x, w, 0, K) : 0;
}

#ifndef DI_EMULATE
// GEMV_CH: the values of x and of a weight row gemv_lane_staged holds in shared memory
// at a time (2 × 16 KB).
#define GEMV_CH 4096
// gemv_lane_staged is lane tid (threads 0..15; the others return 0) of MKL's GEMV order
// for the float32 rows xp and wr of K values (both 16-byte aligned): mkl_lane's
// ORDER_GEMV, x(0)·w(0) on lane 0 then the fused multiply-adds of k = 1 + L + 16j, in
// that order. Every thread of the launch block (128) calls it: they stage GEMV_CH
// values of both rows at a time in xs4 and ws4 (shared, GEMV_CH / 4 each), each
// thread's loads in flight together, and the 16 lanes run their chains from there
// (where a lane reading global memory waits on it every few terms).
DEVM float gemv_lane_staged(const float* xp, const float* wr, i64 K, int tid, float4* xs4, float4* ws4) {
  const float* xs = (const float*)xs4;
  const float* ws = (const float*)ws4;
  const int L = tid;
  const i64 kend = 1 + 16 * ((K - 1) / 16);
  float v = 0;
  for (i64 c0 = 0; c0 < kend; c0 += GEMV_CH) {
    const i64 cn = imin(GEMV_CH, kend - c0), n4 = cn / 4;
    __syncthreads();  // the last chunk's chains are done with the buffers
    float4 wv[GEMV_CH / 512], xv[GEMV_CH / 512];
    UNROLL_BY(8) for (int u = 0; u < GEMV_CH / 512; u++) {
      i64 q = tid + 128 * u;
      if (q < n4) {
        wv[u] = ((const float4*)(wr + c0))[q];
        xv[u] = ((const float4*)(xp + c0))[q];
      }
    }
    UNROLL_BY(8) for (int u = 0; u < GEMV_CH / 512; u++) {
      i64 q = tid + 128 * u;
      if (q < n4) ws4[q] = wv[u], xs4[q] = xv[u];
    }
    if (tid < cn - 4 * n4) {
      ((float*)ws4)[4 * n4 + tid] = wr[c0 + 4 * n4 + tid];
      ((float*)xs4)[4 * n4 + tid] = xp[c0 + 4 * n4 + tid];
    }
    __syncthreads();
    if (L < 16) {
      if (c0 == 0 && L == 0) v = xs[0] * ws[0];
      // the lane's first k in the chunk: k ≡ 1 + L (mod 16), k ≥ 1 + L
      i64 k = c0 + (((1 + L - c0) % 16) + 16) % 16;
      if (k < 1 + L) k += 16;
      UNROLL_BY(8) for (; k < c0 + cn; k += 16) v = fma_fast(xs[k - c0], ws[k - c0], v);
    }
  }
  return L < 16 ? v : 0.0f;
}
// gemv_staged_ok reports whether gemv_lane_staged serves a row of weight w (float32,
// 16-byte aligned) against xp for an m-row sequence view (MKL's GEMV order).
DEVM bool gemv_staged_ok(const Weight& w, i64 r, const float* xp, i64 m, i64 K, i64 N) {
  const float* wr = (const float*)w.p + r * w.cols;
  return mkl_order(m, K, N) == ORDER_GEMV && w.fmt == 0 && !((u64)wr & 15) && !((u64)xp & 15);
}

#endif

// smem_addr: p's address in the shared state space (p in a __shared__ array), for the
// PTX that takes one (cp.async, ldmatrix, wgmma's descriptors, mbarriers, bulk copies);
// with DI_LANES, the harness's stand-in.
#ifdef DI_LANES
DEV u32 smem_addr(const void* p) { return lanes_smem_addr(p); }
#elif !defined(DI_EMULATE)
DEV u32 smem_addr(const void* p) {
  u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
#endif

// fast_cp16: an asynchronous copy of 16 bytes from src to shared memory at dst (zeros
// when !in; src is then not read); fast_cp_commit closes the thread's group of copies,
// fast_cp_wait<n> waits until at most n of its groups are in flight. With DI_LANES, the
// harness's stand-ins (a copy lands only when a wait lets it).
#ifdef DI_LANES
DEV void fast_cp16(void* dst, const void* src, bool in) { lanes_cp16(dst, src, in); }
DEV void fast_cp_commit() { lanes_cp_commit(); }
template <int n>
DEV void fast_cp_wait() {
  lanes_cp_wait(n);
}
#elif !defined(DI_EMULATE)
DEV void fast_cp16(void* dst, const void* src, bool in) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(in ? 16 : 0) : "memory");
}
DEV void fast_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int n>
DEV void fast_cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory");
}
#endif

// Bulk copies into shared memory on an mbarrier (Hopper's cp.async.bulk; the FP4 bulk
// tiles): fast_bar_init sets up a barrier of n arrivals a phase; fast_bar_arrive_tx
// arrives once, expecting bytes more of copies in the phase; fast_bulk copies bytes
// (a multiple of 16, both addresses 16-byte aligned) from global src to shared dst,
// completing them on bar; fast_bar_wait waits until the phase of the given parity is
// complete (its arrivals in and its bytes landed); fast_bar_fence makes initialized
// barriers visible to the copies, fast_async_fence orders this thread's earlier reads of
// shared memory before the copies it issues next. With DI_LANES, the harness's stand-ins
// (a barrier's copies land only when a wait completes its phase).
#ifdef DI_LANES
DEV void fast_bar_init(u64* bar, int n) { lanes_bar_init(bar, n); }
DEV void fast_bar_arrive_tx(u64* bar, u32 bytes) { lanes_bar_arrive_tx(bar, bytes); }
DEV void fast_bulk(void* dst, const void* src, u32 bytes, u64* bar) { lanes_bulk(dst, src, bytes, bar); }
DEV void fast_bar_wait(u64* bar, u32 parity) { lanes_bar_wait(bar, parity); }
DEV void fast_bar_fence() {}
DEV void fast_async_fence() {}
#elif !defined(DI_EMULATE)
DEV void fast_bar_init(u64* bar, int n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(n) : "memory");
}
DEV void fast_bar_arrive_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
DEV void fast_bulk(void* dst, const void* src, u32 bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
DEV void fast_bar_wait(u64* bar, u32 parity) {
  const u32 at = smem_addr(bar);
  u32 done = 0;
  while (!done)
    asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                 : "=r"(done)
                 : "r"(at), "r"(parity)
                 : "memory");
}
DEV void fast_bar_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
DEV void fast_async_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
#endif

// GemvTile<GT, GN, UT, UN, J> is the shape of gemv_tile: a launch block of 128 threads,
// 16 lanes × 8 groups (GT × GN); group g holds the chains of UT x rows (tile rows
// (g / GN)·UT + u) against UN weight rows ((g % GN)·UN + q), so a tile is TT = GT·UT rows
// of x by TN = GN·UN weight rows. The rows are staged in shared memory C = 16·J
// positions at a time (J steps of every chain; a thread loads J/8 positions of every
// row), a row every S floats: S puts a warp's two groups (the same x rows, weight rows
// UN apart) on different banks.
template <int GT, int GN, int UT, int UN, int J_ = 8>
struct GemvTile {
  static_assert(GT * GN == 8, "8 groups of 16 lanes");
  static_assert(GN % 2 == 0, "a warp's two groups share their x rows");
  static_assert(J_ % 8 == 0, "a thread loads whole positions of 128");
  static constexpr int TT = GT * UT, TN = GN * UN, J = J_, C = 16 * J, V = J / 8, ROWS = TT + TN;
  static constexpr int NGN = GN, NUT = UT, NUN = UN;
  // xrow and wrow: the tile rows of chain acc[u][q] of thread tid
  static DEVM int xrow(int tid, int u) { return (tid >> 4) / GN * UT + u; }
  static DEVM int wrow(int tid, int q) { return (tid >> 4) % GN * UN + q; }
  static constexpr int pad() {
    int p = 0;
    while ((UN * (C + p)) % 32 != 16) p++;
    return p;
  }
  static constexpr int S = C + pad();
  // gemv_tile_async's stages (F: 1 bf16 weights, 0 float32): two buffers, each TT x
  // rows of SX floats and TN weight rows of SW values as stored, a row's C + 1 values
  // from the 16-byte-aligned position before them (so C + 4 floats, C + 8 bf16), SW
  // putting a warp's two groups (weight rows UN apart) on different banks
  static constexpr int SX = C + 4;
  template <int F>
  static constexpr int sw() {
    // (in values: 8 for bf16, 4 for float32 keep the rows 16-byte aligned; the two
    // groups' rows UN·SW values apart, i.e. UN·SW/2 or UN·SW words, a half bank row off
    // where a pad of whole 16 bytes can make it so)
    const int base = F == 1 ? C + 8 : C + 4, step = F == 1 ? 8 : 4;
    for (int p = 0; p < 32 * step; p += step)
      if ((F == 1 ? UN * (base + p) / 2 : UN * (base + p)) % 32 == 16) return base + p;
    return base;
  }
  template <int F>
  static constexpr int async_floats() {
    return 2 * (TT * SX + (F == 1 ? TN * sw<F>() / 2 : TN * sw<F>()));
  }
  static constexpr int amax(int a, int b) { return a > b ? a : b; }
  // SMEM: floats of shared memory a launch block gives gemv_tile; smem<AF>() with async
  // staging for weights of format AF (1 bf16, 0 float32; -1 none): either path
  static constexpr int SMEM = ROWS * S;
  template <int AF>
  static constexpr int smem() {
    return AF < 0 ? SMEM : amax(SMEM, async_floats<(AF < 0 ? 0 : AF)>());
  }
};
#ifndef DI_EMULATE
// gemv_tile_chains: gemv_tile for weights stored as F: 1 bf16, 0 float32 — a chunk's
// loads issued together as raw bits (clamped addresses: no branch, and no value used
// before the chunk is stored, after the next chunk's products started) and widened when
// stored — or -1, any format through wval (a value widened as it arrives: each thread
// waits on every load in turn, as run 14a measured). xs is a row of xr that is not null
// (the clamped loads of the null rows read it).
template <int F, int GT, int GN, int UT, int UN, int J>
DEVM void gemv_tile_chains(const float* const* xr, const float* xs, const Weight& w, i64 n0, i64 N, i64 K, float* sm,
                           float (&acc)[UT][UN]) {
  typedef GemvTile<GT, GN, UT, UN, J> G;
  const int tid = (int)threadIdx.x, L = tid & 15, g = tid >> 4, tg = g / GN, ng = g % GN;
  const i64 nchain = K > 1 ? (K - 1) / 16 : 0, chunks = (nchain + G::J - 1) / G::J;
  u32 pre[G::ROWS][G::V];  // positions tid + 128·v of every row, as stored
  auto load = [&](i64 c) {
    UNROLL_BY(16) for (int r = 0; r < G::TT; r++) {
      const float* p = xr[r] ? xr[r] : xs;
      UNROLL_BY(4) for (int v = 0; v < G::V; v++) pre[r][v] = bits_f32(p[imin(1 + c * G::C + tid + 128 * v, K - 1)]);
    }
    UNROLL_BY(16) for (int r = 0; r < G::TN; r++) {
      const i64 n = imin(n0 + r, N - 1);
      UNROLL_BY(4) for (int v = 0; v < G::V; v++) {
        const i64 k = imin(1 + c * G::C + tid + 128 * v, K - 1);
        if (F == 1) pre[G::TT + r][v] = ((const unsigned short*)w.p)[n * w.cols + k];
        else if (F == 0) pre[G::TT + r][v] = bits_f32(((const float*)w.p)[n * w.cols + k]);
        else pre[G::TT + r][v] = bits_f32(wval(w, n, k));
      }
    }
  };
  if (chunks > 0) load(0);
  for (i64 c = 0; c < chunks; c++) {
    __syncthreads();  // the last chunk's chains are done with sm
    UNROLL_BY(16) for (int r = 0; r < G::ROWS; r++)
      UNROLL_BY(4) for (int v = 0; v < G::V; v++) {
        const bool ok = 1 + c * G::C + tid + 128 * v < K && (r < G::TT ? xr[r] != nullptr : n0 + r - G::TT < N);
        const float x = r >= G::TT && F == 1 ? bf16_f32((unsigned short)pre[r][v]) : f32_bits(pre[r][v]);
        sm[r * G::S + tid + 128 * v] = ok ? x : 0.0f;
      }
    __syncthreads();
    if (c + 1 < chunks) load(c + 1);
    const int jn = (int)imin(G::J, nchain - c * G::J);
    UNROLL_BY(8) for (int j = 0; j < G::J; j++) {
      if (j >= jn) break;
      const int kk = L + 16 * j;
      float xv[UT], wv[UN];
      UNROLL_BY(4) for (int u = 0; u < UT; u++) xv[u] = sm[(tg * UT + u) * G::S + kk];
      UNROLL_BY(8) for (int q = 0; q < UN; q++) wv[q] = sm[(G::TT + ng * UN + q) * G::S + kk];
      UNROLL_BY(4) for (int u = 0; u < UT; u++)
        UNROLL_BY(8) for (int q = 0; q < UN; q++) acc[u][q] = fma_fast(xv[u], wv[q], acc[u][q]);
    }
  }
}

// gemv_tile_async: gemv_tile_chains for 16-byte-aligned rows (float32 x; weights F: 1
// bf16, 0 float32, a row every w.cols values, w.cols a multiple of 8), every staged value
// copied by cp.async, 16 bytes at a time, into one of two buffers a chunk ahead, as
// stored (bf16 widened when read): a chunk's staging is a few copies a thread instead of
// a load, a widening and a store a value. Each chunk stages positions [c·C, c·C + C + E)
// of every row (E values to a 16-byte copy; positions 1 + c·C … c·C + C are the
// chunk's), pieces at or past K zero-filled; null x rows and weight rows past N read a
// clamped row whose chains are not stored (gemv_tile's callers store neither). The same
// fused multiply-adds in the same order as gemv_tile_chains.
template <int F, int GT, int GN, int UT, int UN, int J>
DEVM void gemv_tile_async(const float* const* xr, const float* xs, const Weight& w, i64 n0, i64 N, i64 K, float* sm,
                          float (&acc)[UT][UN]) {
  typedef GemvTile<GT, GN, UT, UN, J> G;
  constexpr int E = F == 1 ? 8 : 4, SW = G::template sw<F>();
  constexpr int XP = G::C / 4 + 1, WP = G::C / E + 1;  // 16-byte pieces a row a chunk
  constexpr int XB = G::TT * G::SX, WB = F == 1 ? G::TN * SW / 2 : G::TN * SW;  // floats a buffer
  constexpr int PIECES = G::TT * XP + G::TN * WP;
  const int tid = (int)threadIdx.x, L = tid & 15, g = tid >> 4, tg = g / GN, ng = g % GN;
  const i64 nchain = K > 1 ? (K - 1) / 16 : 0, chunks = (nchain + G::J - 1) / G::J;
  auto issue = [&](i64 c) {
    float* xb = sm + (c & 1) * XB;
    float* wb = sm + 2 * XB + (c & 1) * WB;
    for (int i = tid; i < PIECES; i += 128) {
      if (i < G::TT * XP) {
        const int r = i / XP, p = i % XP;
        const i64 k = c * G::C + 4 * p;
        const float* src = (xr[r] ? xr[r] : xs) + k;
        fast_cp16(xb + r * G::SX + 4 * p, k < K ? src : xs, k < K);
      } else {
        const int r = (i - G::TT * XP) / WP, p = (i - G::TT * XP) % WP;
        const i64 k = c * G::C + E * p, n = imin(n0 + r, N - 1);
        const char* src = (const char*)w.p + (n * w.cols + k) * (F == 1 ? 2 : 4);
        fast_cp16((char*)wb + (r * SW + E * p) * (F == 1 ? 2 : 4), k < K ? (const void*)src : w.p, k < K);
      }
    }
    fast_cp_commit();
  };
  if (chunks > 0) issue(0);
  for (i64 c = 0; c < chunks; c++) {
    if (c + 1 < chunks) issue(c + 1);
    else fast_cp_commit();  // (an empty group: the wait below is the same every chunk)
    fast_cp_wait<1>();
    __syncthreads();  // every thread's copies of chunk c landed
    const float* xb = sm + (c & 1) * XB;
    const float* wbf = sm + 2 * XB + (c & 1) * WB;
    const unsigned short* wbh = (const unsigned short*)wbf;
    const int jn = (int)imin(G::J, nchain - c * G::J);
    UNROLL_BY(8) for (int j = 0; j < G::J; j++) {
      if (j >= jn) break;
      const int kk = 1 + L + 16 * j;
      float xv[UT], wv[UN];
      UNROLL_BY(4) for (int u = 0; u < UT; u++) xv[u] = xb[(tg * UT + u) * G::SX + kk];
      UNROLL_BY(8) for (int q = 0; q < UN; q++)
        wv[q] = F == 1 ? bf16_f32(wbh[(ng * UN + q) * SW + kk]) : wbf[(ng * UN + q) * SW + kk];
      UNROLL_BY(4) for (int u = 0; u < UT; u++)
        UNROLL_BY(8) for (int q = 0; q < UN; q++) acc[u][q] = fma_fast(xv[u], wv[q], acc[u][q]);
    }
    __syncthreads();  // chunk c's buffer is free for chunk c + 2's copies
  }
}

// gemv_async_ok reports whether gemv_tile_async can stage a tile of weights in the
// format it was compiled for: the weight 16-byte aligned with rows of a multiple of 8
// values, K a multiple of 8, and every x row 16-byte aligned (the same answer on every
// thread: xr is shared).
template <int TT>
DEVM bool gemv_async_ok(const float* const* xr, const Weight& w, i64 K) {
  if (((unsigned long long)w.p & 15) || (w.cols & 7) || (K & 7)) return false;
  for (int r = 0; r < TT; r++)
    if ((unsigned long long)xr[r] & 15) return false;
  return true;
}

// gemv_tile runs the 16 lanes of MKL's GEMV order (mkl_lane's ORDER_GEMV: x(0)·w(0) on
// lane 0, then the fused multiply-adds of k = 1 + L + 16j, j = 0 .. (K−1)/16 − 1, in that
// order) of a tile: x rows xr[0 .. TT) (shared; null: a row not computed, its chains
// left at 0) against weight rows n0 .. n0 + TN of w (rows at or past N read as 0).
// Thread tid is lane tid % 16 of group tid / 16; acc[u][q] is its chain of x row
// (g / GN)·UT + u against weight row n0 + (g % GN)·UN + q, each the value mkl_lane
// gives. Every thread of the block calls it. Each chunk's values are loaded (coalesced:
// thread tid loads position tid of every row) while the chains of the previous chunk
// run; a value in shared memory serves UN or UT chains. With AF ≥ 0, weights of that
// format (1 bf16, 0 float32) and rows gemv_async_ok accepts, gemv_tile_async stages them
// instead (sm: G::smem<AF>() floats, not G::SMEM; the buffers sized for that format).
template <int GT, int GN, int UT, int UN, int J = 8, int AF = -1>
DEVM void gemv_tile(const float* const* xr, const Weight& w, i64 n0, i64 N, i64 K, float* sm, float (&acc)[UT][UN]) {
  typedef GemvTile<GT, GN, UT, UN, J> G;
  const int tid = (int)threadIdx.x, L = tid & 15, g = tid >> 4, tg = g / GN, ng = g % GN;
  const float* xs = nullptr;
  UNROLL_BY(16) for (int r = 0; r < G::TT; r++) if (!xs) xs = xr[r];
  UNROLL_BY(4) for (int u = 0; u < UT; u++) {
    const float* p = xr[tg * UT + u];
    UNROLL_BY(8) for (int q = 0; q < UN; q++) {
      const i64 n = n0 + ng * UN + q;
      acc[u][q] = L == 0 && p && n < N ? p[0] * wval(w, n, 0) : 0.0f;
    }
  }
  if (!xs || N <= 0) return;  // no row to compute (the whole block: xr is shared)
  if (AF >= 0 && w.fmt == AF && gemv_async_ok<GT * UT>(xr, w, K))
    gemv_tile_async<(AF < 0 ? 0 : AF), GT, GN, UT, UN, J>(xr, xs, w, n0, N, K, sm, acc);
  else if (w.fmt == 1) gemv_tile_chains<1, GT, GN, UT, UN, J>(xr, xs, w, n0, N, K, sm, acc);
  else if (w.fmt == 0) gemv_tile_chains<0, GT, GN, UT, UN, J>(xr, xs, w, n0, N, K, sm, acc);
  else gemv_tile_chains<-1, GT, GN, UT, UN, J>(xr, xs, w, n0, N, K, sm, acc);
}
#endif

// mkl_fold is mkl_dot(x, w, m, r, K, N) from its 16 lanes.
template <class X, class W>
DEVM float mkl_fold(X x, W w, i64 m, i64 r, i64 K, i64 N, const float* lane) {
  switch (mkl_order(m, K, N)) {
    case ORDER_GEMV: {
      float lanes[16];
      for (int l = 0; l < 16; l++) lanes[l] = lane[l];
      float s = halving16(lanes);
      i64 nvec = (K - 1) / 16;
      if (1 + 16 * nvec == K) return s;
      float tail[16];
      for (int l = 0; l < 16; l++) tail[l] = 0;
      tail[0] = s;
      for (i64 k = 1 + 16 * nvec; k < K; k++) {
        i64 l = k - (1 + 16 * nvec);
        tail[l] = fma_fast(x(k), w(k), tail[l]);
      }
      return halving16(tail);
    }
    case ORDER_SMALL: {
      float v[4];
      for (int l = 0; l < 4; l++) {
        float s = lane[l];
        for (int u = 1; u < 4; u++) s += lane[4 * u + l];
        v[l] = s;
      }
      return (v[0] + v[1]) + (v[2] + v[3]);
    }
    case ORDER_SPLIT4: {
      int order[4];
      chunk_order(m, r, order);
      float v = lane[order[0]];
      for (int j = 1; j < 4; j++) v += lane[order[j]];
      return v;
    }
    case ORDER_SPLIT2: return lane[0] + lane[1];
  }
  return lane[0];
}

// mkl_fast_dot is mkl_dot(x, w, m, r, K, N) in the fast mode: its 16 lanes (mkl_lane),
// folded (mkl_fold).
template <class X, class W>
DEVM float mkl_fast_dot(X x, W w, i64 m, i64 r, i64 K, i64 N) {
  float lanes[16];
  for (int L = 0; L < 16; L++) lanes[L] = mkl_lane(x, w, m, K, N, L);
  return mkl_fold(x, w, m, r, K, N, lanes);
}

// SeqTile<TT, TN> is the shape of seq_tile: a launch block of 128 threads, a tile of TT x
// rows × TN weight rows, each thread the 4 × 4 chains of x rows 4·(tid % (TT/4)) + u and
// weight rows 4·(tid / (TT/4)) + q; KC reduction values of every row staged in shared
// memory at a time, transposed (a value k of row r at k·(rows + 1) + r: the transposing
// stores and the chains' reads on distinct banks).
template <int TT, int TN>
struct SeqTile {
  static_assert((TT / 4) * (TN / 4) == 128, "128 threads of 4 × 4 chains");
  static_assert(TT % 16 == 0 && TN % 32 == 0, "whole loads a thread");
  static constexpr int KC = 32, SX = TT + 1, SW = TN + 1, SMEM = KC * (SX + SW);
  static DEVM int xrow(int tid, int u) { return 4 * (tid % (TT / 4)) + u; }
  static DEVM int wrow(int tid, int q) { return 4 * (tid / (TT / 4)) + q; }
};
#ifndef DI_EMULATE
// seq_tile_chains: seq_tile for F: 0 float32 weights (x and w loaded as float4), 1 bf16
// weights (x as float4, w as 8 bf16 a 16-byte load) — both need K a multiple of 8 and
// 16-byte aligned rows — or −1 (one value a load, w through wval). A chunk's loads are
// issued together as raw bits on clamped addresses, widened and masked when stored.
template <int F, int TT, int TN>
DEVM void seq_tile_chains(const float* const* xr, const float* xs, const Weight& w, i64 n0, i64 N, i64 K, float* sm,
                          float (&acc)[4][4]) {
  typedef SeqTile<TT, TN> G;
  const int tid = (int)threadIdx.x;
  float* xsm = sm;
  float* wsm = sm + G::KC * G::SX;
  // loads: x row e / 8, values 4·(e % 8) .. +3 (F ≥ 0), or row e / 32, value e % 32;
  // w (F = 0) as x, (F = 1) row e / 4, values 8·(e % 4) .. +7, (F = −1) row e / 32
  constexpr int NX = F >= 0 ? TT * 8 / 128 : TT * 32 / 128;
  constexpr int NW = F == 0 ? TN * 8 / 128 : F == 1 ? TN * 4 / 128 : TN * 32 / 128;
  uint4 rx[F >= 0 ? NX : 1], rw[F >= 0 ? NW : 1];
  u32 sx[F >= 0 ? 1 : NX], sw[F >= 0 ? 1 : NW];
  auto load = [&](i64 k0) {
    UNROLL_BY(16) for (int i = 0; i < NX; i++) {
      const int e = tid + 128 * i, r = F >= 0 ? e / 8 : e / 32;
      const float* p = xr[r] ? xr[r] : xs;
      if (F >= 0) rx[i] = *(const uint4*)(p + imin(k0 + 4 * (e % 8), K - 4));
      else sx[i] = bits_f32(p[imin(k0 + e % 32, K - 1)]);
    }
    UNROLL_BY(16) for (int i = 0; i < NW; i++) {
      const int e = tid + 128 * i;
      if (F == 0) {
        rw[i] = *(const uint4*)((const float*)w.p + imin(n0 + e / 8, N - 1) * w.cols + imin(k0 + 4 * (e % 8), K - 4));
      } else if (F == 1) {
        rw[i] = *(const uint4*)((const unsigned short*)w.p + imin(n0 + e / 4, N - 1) * w.cols + imin(k0 + 8 * (e % 4), K - 8));
      } else {
        sw[i] = bits_f32(wval(w, imin(n0 + e / 32, N - 1), imin(k0 + e % 32, K - 1)));
      }
    }
  };
  const i64 chunks = (K + G::KC - 1) / G::KC;
  UNROLL_BY(16) for (int u = 0; u < 4; u++) UNROLL_BY(16) for (int q = 0; q < 4; q++) acc[u][q] = 0;
  if (chunks > 0) load(0);
  for (i64 c = 0; c < chunks; c++) {
    const i64 k0 = c * G::KC;
    __syncthreads();  // the last chunk's chains are done with sm
    UNROLL_BY(16) for (int i = 0; i < NX; i++) {
      const int e = tid + 128 * i;
      if (F >= 0) {
        const int r = e / 8, kk = 4 * (e % 8);
        const bool ok = xr[r] != nullptr && k0 + kk < K;
        const u32 v[4] = {rx[i].x, rx[i].y, rx[i].z, rx[i].w};
        UNROLL_BY(16) for (int j = 0; j < 4; j++) xsm[(kk + j) * G::SX + r] = ok ? f32_bits(v[j]) : 0.0f;
      } else {
        const int r = e / 32, kk = e % 32;
        xsm[kk * G::SX + r] = xr[r] != nullptr && k0 + kk < K ? f32_bits(sx[i]) : 0.0f;
      }
    }
    UNROLL_BY(16) for (int i = 0; i < NW; i++) {
      const int e = tid + 128 * i;
      if (F == 0) {
        const int r = e / 8, kk = 4 * (e % 8);
        const bool ok = n0 + r < N && k0 + kk < K;
        const u32 v[4] = {rw[i].x, rw[i].y, rw[i].z, rw[i].w};
        UNROLL_BY(16) for (int j = 0; j < 4; j++) wsm[(kk + j) * G::SW + r] = ok ? f32_bits(v[j]) : 0.0f;
      } else if (F == 1) {
        const int r = e / 4, kk = 8 * (e % 4);
        const bool ok = n0 + r < N && k0 + kk < K;
        const u32 v[4] = {rw[i].x, rw[i].y, rw[i].z, rw[i].w};
        UNROLL_BY(16) for (int j = 0; j < 4; j++) {
          wsm[(kk + 2 * j) * G::SW + r] = ok ? bf16_f32((unsigned short)(v[j] & 0xffffu)) : 0.0f;
          wsm[(kk + 2 * j + 1) * G::SW + r] = ok ? bf16_f32((unsigned short)(v[j] >> 16)) : 0.0f;
        }
      } else {
        const int r = e / 32, kk = e % 32;
        wsm[kk * G::SW + r] = n0 + r < N && k0 + kk < K ? f32_bits(sw[i]) : 0.0f;
      }
    }
    __syncthreads();
    if (c + 1 < chunks) load(k0 + G::KC);
    const int kn = (int)imin(G::KC, K - k0), x0 = G::xrow(tid, 0), w0 = G::wrow(tid, 0);
    UNROLL_BY(8) for (int kk = 0; kk < G::KC; kk++) {
      if (kk >= kn) break;
      float xv[4], wv[4];
      UNROLL_BY(16) for (int u = 0; u < 4; u++) xv[u] = xsm[kk * G::SX + x0 + u], wv[u] = wsm[kk * G::SW + w0 + u];
      UNROLL_BY(16) for (int u = 0; u < 4; u++) UNROLL_BY(16) for (int q = 0; q < 4; q++) acc[u][q] = fma_fast(xv[u], wv[q], acc[u][q]);
    }
  }
}

// seq_tile runs MKL's sequential order in the fast mode (mkl_lane's ORDER_SEQ lane 0:
// dot_seq<true>, the fused multiply-adds of k = 0, 1, ..., K − 1 from 0) for a tile: x
// rows xr[0 .. TT) (shared; null: a row not computed, its chains left at 0) against
// weight rows n0 .. n0 + TN of w (rows at or past N read as 0); acc[u][q] is the chain of
// x row SeqTile::xrow(tid, u) against weight row n0 + SeqTile::wrow(tid, q). Every thread
// of the block calls it.
template <int TT, int TN>
DEVM void seq_tile(const float* const* xr, const Weight& w, i64 n0, i64 N, i64 K, float* sm, float (&acc)[4][4]) {
  const float* xs = nullptr;
  bool al = (K & 7) == 0 && (w.cols & 7) == 0 && ((u64)w.p & 15) == 0;
  for (int r = 0; r < TT; r++) {
    if (!xs) xs = xr[r];
    if (xr[r] && ((u64)xr[r] & 15)) al = false;
  }
  UNROLL_BY(16) for (int u = 0; u < 4; u++) UNROLL_BY(16) for (int q = 0; q < 4; q++) acc[u][q] = 0;
  if (!xs || N <= 0 || K <= 0) return;  // no row to compute (the whole block: xr is shared)
  if (al && w.fmt == 1) seq_tile_chains<1, TT, TN>(xr, xs, w, n0, N, K, sm, acc);
  else if (al && w.fmt == 0) seq_tile_chains<0, TT, TN>(xr, xs, w, n0, N, K, sm, acc);
  else seq_tile_chains<-1, TT, TN>(xr, xs, w, n0, N, K, sm, acc);
}
#endif

// ATen's elementwise paths (cpu: v41_exp.go).
DEV i64 vec_tail(i64 n) { return n - n % 32; }

DEV float pow2f(int e) { return f32_bits((u32)(e + 0x7f) << 23); }

DEV float exp_sleef(float d) {
  const float rln2 = 1.442695040888963407359924681001892137426645954152985934135449406931f;
  const float l2u = 0.693145751953125f;
  const float l2l = 1.428606765330187045e-06f;
  int q = (int)rint((double)(d * rln2));
  float qf = (float)q;
  float s = fma32(qf, -l2u, d);
  s = fma32(qf, -l2l, s);
  float u = 0.000198527617612853646278381f;
  u = fma32(u, s, 0.00139304355252534151077271f);
  u = fma32(u, s, 0.00833336077630519866943359f);
  u = fma32(u, s, 0.0416664853692054748535156f);
  u = fma32(u, s, 0.166666671633720397949219f);
  u = fma32(u, s, 0.5f);
  u = 1 + fma32(s * s, u, s);
  int h = q >> 1;
  u = u * pow2f(h) * pow2f(q - h);
  if (d < -104) u = 0;
  if (d > 100) u = F32_INF;
  return u;
}

DEV float exp_scalar(float x) { return (float)exp((double)x); }
DEV float sigmoid_vec(float x) { return 1 / (exp_sleef(0 - x) + 1); }
DEV float sigmoid_scalar(float x) { return 1 / (1 + exp_scalar(-x)); }
DEV float sigmoid_at(float x, i64 i, i64 n) { return i < vec_tail(n) ? sigmoid_vec(x) : sigmoid_scalar(x); }

// seq_rows: for row i of a step's n rows, the first row of its sequence and the
// sequence's row count; rows that are not the step's tokens (n != T) count as one
// sequence (cpu: seqRows).
DEV void seq_rows(const SeqRec* seqs, i64 nseq, i64 n, i64 i, i64* first, i64* rows) {
  // (the step's rows: the last sequence's end, the rows laid out in order from 0)
  const i64 total = nseq > 0 ? seqs[nseq - 1].row + seqs[nseq - 1].n : 0;
  if (total != n || !seq_view(seqs, nseq, 0, i, first, rows)) { *first = 0; *rows = n; }
}

