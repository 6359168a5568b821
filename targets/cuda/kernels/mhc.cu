// mhc.cu: manifold-constrained hyper-connections (hc_init, hc_mix, hc_collapse,
// hc_expand, hc_head) in V4's float64 mixes (targets/cpu/mhc.go) and V4.1's fp32
// reference order (targets/cpu/v41_mhc.go), and V4.1's RMSNorm.

DEV double mhc_sigmoid64(double x) { return 1 / (1 + exp(-x)); }

// mhc_view is the cpu's views(s, keep) for row t: the first row of t's sequence (in
// the step's rows, or in the kept tails when keep > 0) and that sequence's row count.
// (prelude.h seq_view; a row no view holds counts as one of its own).
DEV void mhc_view(const SeqRec* seqs, i64 nseq, i64 keep, i64 t, i64* first, i64* n) {
  if (!seq_view(seqs, nseq, keep, t, first, n)) {
    *first = t;
    *n = 1;
  }
}

// mhc_sq is x[k]² of a float32 row, for cascade_sum.
struct mhc_Sq {
  const float* p;
  DEVM float operator()(i64 k) const { return p[k] * p[k]; }
};

// mhc_rms41 is 1/sqrt(mean(x²) + eps) in the reference's fp32 order.
DEV float mhc_rms41(const float* x, i64 k, float eps) {
  mhc_Sq sq;
  sq.p = x;
  float mean = cascade_sum(sq, k) / (float)k;
  return 1 / (float)sqrt((double)(mean + eps));
}

struct mhc_InitArgs { const float* x; float* y; i64 T; i64 n; i64 d; };
KERNEL(mhc_init, mhc_InitArgs) {
  for (i64 i = GIDX; i < a.T * a.n * a.d; i += GSTRIDE) {
    i64 t = i / (a.n * a.d), c = i % a.d;
    a.y[i] = a.x[t * a.d + c];
  }
}

// mhc_mix_dot (V4): mix[t, r] = fn[r]·x_t / rms(x_t), in float64 (cpu: mixRow).
struct mhc_MixDotArgs { const float* x; Weight fn; double* mix; i64 T; i64 m; i64 K; double norm_eps; };
KERNEL(mhc_mix_dot, mhc_MixDotArgs) {
  for (i64 i = GIDX; i < a.T * a.m; i += GSTRIDE) {
    i64 t = i / a.m, r = i % a.m;
    const float* x = a.x + t * a.K;
    double ss = 0;
    for (i64 k = 0; k < a.K; k++) ss += (double)x[k] * (double)x[k];
    double inv = 1 / sqrt(ss / (double)a.K + a.norm_eps);
    double acc = 0;
    for (i64 k = 0; k < a.K; k++) acc += (double)wval(a.fn, r, k) * (double)x[k];
    a.mix[i] = acc * inv;
  }
}

// mhc_cols and mhc_rows are one Sinkhorn half-step on an n×n matrix: each column (row)
// divided by its sum plus eps, in the precision F of the model's mixes (V4: double,
// V4.1: float).
template <class F>
DEVM void mhc_cols(F* c, i64 n, F eps) {
  for (i64 j = 0; j < n; j++) {
    F s = 0;
    for (i64 i = 0; i < n; i++) s += c[i * n + j];
    for (i64 i = 0; i < n; i++) c[i * n + j] /= s + eps;
  }
}

template <class F>
DEVM void mhc_rows(F* c, i64 n, F eps) {
  for (i64 i = 0; i < n; i++) {
    F s = 0;
    for (i64 j = 0; j < n; j++) s += c[i * n + j];
    for (i64 j = 0; j < n; j++) c[i * n + j] /= s + eps;
  }
}

// mhc_sinkhorn_n: the first column half-step, then iters−1 (row, column) pairs, on an N×N
// matrix held in registers (the loops unrolled), copied from and back to c.
template <class F, int N>
DEVM void mhc_sinkhorn_n(F* c, F eps, i64 iters) {
  F r[N * N];
  UNROLL for (int i = 0; i < N * N; i++) r[i] = c[i];
  auto cols = [&]() {
    UNROLL for (int j = 0; j < N; j++) {
      F s = 0;
      UNROLL for (int i = 0; i < N; i++) s += r[i * N + j];
      UNROLL for (int i = 0; i < N; i++) r[i * N + j] /= s + eps;
    }
  };
  cols();
  for (i64 it = 1; it < iters; it++) {
    UNROLL for (int i = 0; i < N; i++) {
      F s = 0;
      UNROLL for (int j = 0; j < N; j++) s += r[i * N + j];
      UNROLL for (int j = 0; j < N; j++) r[i * N + j] /= s + eps;
    }
    cols();
  }
  UNROLL for (int i = 0; i < N * N; i++) c[i] = r[i];
}

// mhc_sinkhorn is the Sinkhorn projection of the n×n matrix c (the same operations in
// the same order for every n; in registers for n of 2 and 4).
template <class F>
DEVM void mhc_sinkhorn(F* c, i64 n, F eps, i64 iters) {
  if (n == 4) return mhc_sinkhorn_n<F, 4>(c, eps, iters);
  if (n == 2) return mhc_sinkhorn_n<F, 2>(c, eps, iters);
  mhc_cols(c, n, eps);
  for (i64 it = 1; it < iters; it++) {
    mhc_rows(c, n, eps);
    mhc_cols(c, n, eps);
  }
}

// mhc_mix_split (V4): pre, post and the Sinkhorn-projected comb of one token, in
// float64 (cpu: newHCMix). c is the token's n×n working matrix. A token takes 16 work
// items (half a warp): for n = 4 on the device, lane l holds comb's value (l/4, l%4)
// in a register and every sum is read across the lanes in the serial order, so each
// value is the same operation on the same operands as mhc_mix_split_token's (the
// Sinkhorn's 640 float64 divisions 16 at a time, not one after another); other n, and
// the emulated device, run mhc_mix_split_token on the group's first item.
struct mhc_MixSplitArgs {
  const double* mix; Weight base; Weight scale; float* pre; float* post; float* comb; double* c;
  i64 T; i64 n; double eps; i64 iters;
};
DEVM void mhc_mix_split_token(const mhc_MixSplitArgs& a, i64 t) {
  i64 n = a.n, m = (2 + n) * n;
  const double* mix = a.mix + t * m;
  double* c = a.c + t * n * n;
  double s0 = (double)wval(a.scale, 0, 0), s1 = (double)wval(a.scale, 0, 1), s2 = (double)wval(a.scale, 0, 2);
  for (i64 j = 0; j < n; j++) {
    a.pre[t * n + j] = (float)(mhc_sigmoid64(mix[j] * s0 + (double)wval(a.base, 0, j)) + a.eps);
    a.post[t * n + j] = (float)(2 * mhc_sigmoid64(mix[n + j] * s1 + (double)wval(a.base, 0, n + j)));
  }
  for (i64 i = 0; i < n; i++) {
    double* row = c + i * n;
    double mx = -F64_INF;
    for (i64 j = 0; j < n; j++) {
      row[j] = mix[2 * n + i * n + j] * s2 + (double)wval(a.base, 0, 2 * n + i * n + j);
      mx = go_max64(mx, row[j]);
    }
    double sum = 0;
    for (i64 j = 0; j < n; j++) {
      row[j] = exp(row[j] - mx);
      sum += row[j];
    }
    for (i64 j = 0; j < n; j++) row[j] = row[j] / sum + a.eps;
  }
  mhc_sinkhorn(c, n, a.eps, a.iters);
  for (i64 i = 0; i < n * n; i++) a.comb[t * n * n + i] = (float)c[i];
}
#ifndef DI_EMULATE
// mhc_at is lane src's v among a token's 16 lanes (mask: the group's lanes).
template <class F>
DEVM F mhc_at(F v, int src, unsigned mask) { return __shfl_sync(mask, v, src, 16); }

// mhc_sinkhorn_lanes is mhc_sinkhorn_n<F, 4> with the matrix on 16 lanes, lane l
// holding r = (l/4, l%4): each sum read across the lanes in the serial order, then
// the lane's own division; it returns the lane's projected value.
template <class F>
DEVM F mhc_sinkhorn_lanes(F r, int l, F eps, i64 iters, unsigned mask) {
  const int n = 4, i = l / n, j = l % n;
  auto cols = [&]() {
    F s = 0;
    UNROLL for (int q = 0; q < n; q++) s += mhc_at(r, q * n + j, mask);
    r /= s + eps;
  };
  cols();
  for (i64 it = 1; it < iters; it++) {
    F s = 0;
    UNROLL for (int q = 0; q < n; q++) s += mhc_at(r, i * n + q, mask);
    r /= s + eps;
    cols();
  }
  return r;
}

// mhc_mix_split_lanes: token t's split for n = 4 on the 16 lanes of mask (lane l of the
// group holds comb's (l/4, l%4)).
DEVM void mhc_mix_split_lanes(const mhc_MixSplitArgs& a, i64 t, int l, unsigned mask) {
  const int n = 4, i = l / n;
  const double* mix = a.mix + t * (2 + n) * n;
  double s0 = (double)wval(a.scale, 0, 0), s1 = (double)wval(a.scale, 0, 1), s2 = (double)wval(a.scale, 0, 2);
  if (l < n) a.pre[t * n + l] = (float)(mhc_sigmoid64(mix[l] * s0 + (double)wval(a.base, 0, l)) + a.eps);
  else if (l < 2 * n)
    a.post[t * n + l - n] = (float)(2 * mhc_sigmoid64(mix[l] * s1 + (double)wval(a.base, 0, l)));
  double r = mix[2 * n + l] * s2 + (double)wval(a.base, 0, 2 * n + l);
  double mx = -F64_INF;
  UNROLL for (int q = 0; q < n; q++) mx = go_max64(mx, mhc_at(r, i * n + q, mask));
  r = exp(r - mx);
  double sum = 0;
  UNROLL for (int q = 0; q < n; q++) sum += mhc_at(r, i * n + q, mask);
  r = r / sum + a.eps;
  a.comb[t * n * n + l] = (float)mhc_sinkhorn_lanes(r, l, a.eps, a.iters, mask);
}
#endif
// MHC_SPLIT_HALVES(token, lanes) is a split kernel's loop: half a warp a token, lanes(a,
// t, l, mask) for n = 4 on the device, else token(a, t) on the group's first item.
#ifdef DI_EMULATE
#define MHC_SPLIT_HALVES(token, lanes) \
  for (i64 i = GIDX; i < a.T * 16; i += GSTRIDE) \
    if ((i & 15) == 0) token(a, i >> 4);
#else
#define MHC_SPLIT_HALVES(token, lanes)                                  \
  for (i64 i = GIDX; i < a.T * 16; i += GSTRIDE) {                      \
    if (a.n == 4) lanes(a, i >> 4, (int)(i & 15), 0xffffu << (i & 16)); \
    else if ((i & 15) == 0) token(a, i >> 4);                           \
  }
#endif
KERNEL(mhc_mix_split, mhc_MixSplitArgs) { MHC_SPLIT_HALVES(mhc_mix_split_token, mhc_mix_split_lanes) }

// mhc_mix41_dot (V4.1): mixes = F.linear(x, hc_fn) per sequence, in MKL's order for the
// sequence's row count (cpu: fp32Linear in newHCMixAny).
struct mhc_Mix41DotArgs { const float* x; Weight fn; float* mix; i64 T; i64 m; i64 K; const SeqRec* seqs; i64 nseq; i64 keep; };
// mhc_mix41_at: token t's row and mix row r of fn, and the token's sequence view.
DEVM void mhc_mix41_at(const mhc_Mix41DotArgs& a, i64 t, i64 r, FRow* x, WRow* w, i64* first, i64* rows) {
  mhc_view(a.seqs, a.nseq, a.keep, t, first, rows);
  x->p = a.x + t * a.K;
  w->w = a.fn;
  w->r = r;
}
KERNEL(mhc_mix41_dot, mhc_Mix41DotArgs) {
  for (i64 i = GIDX; i < a.T * a.m; i += GSTRIDE) {
    i64 t = i / a.m, r = i % a.m, first, rows;
    FRow x;
    WRow w;
    mhc_mix41_at(a, t, r, &x, &w, &first, &rows);
    a.mix[i] = mkl_dot(x, w, rows, t - first, a.K, a.m);
  }
}
// mhc_mix41_fast: mix (t, r) in the fast mode (mkl_fast_dot: MKL's order for the token's
// sequence, fma_fast).
DEVM float mhc_mix41_fast(const mhc_Mix41DotArgs& a, i64 t, i64 r) {
  i64 first, rows;
  FRow x;
  WRow w;
  mhc_mix41_at(a, t, r, &x, &w, &first, &rows);
  return mkl_fast_dot(x, w, rows, t - first, a.K, a.m);
}

// mhc_fast_mix41_seq (V4.1, the fast mode's steps of long sequences, where MKL's order is
// one sequential chain a mix): mhc_mix41_dot's mixes with a launch block a tile of 64
// tokens × 32 mix rows (numerics.h seq_tile: each mix mkl_fast_dot's chain, dot_seq<true>);
// a token in another order takes mkl_fast_dot on the block's threads.
#define MHC_SEQ 64, 32
KERNEL(mhc_fast_mix41_seq, mhc_Mix41DotArgs) {
  typedef SeqTile<MHC_SEQ> G;
#ifdef DI_EMULATE
  for (i64 i = GIDX; i < a.T * a.m; i += GSTRIDE) a.mix[i] = mhc_mix41_fast(a, i / a.m, i % a.m);
#else
  (void)GSTRIDE;
  __shared__ float sm[G::SMEM];
  __shared__ const float* xr[64];
  __shared__ int other[64];
  const i64 nr = (a.m + 31) / 32, blocks = (a.T + 63) / 64 * nr, b = GIDX / 128;
  const int tid = (int)(GIDX % 128);
  if (b >= blocks) return;  // the whole block
  const i64 t0 = b / nr * 64, r0 = b % nr * 32;
  if (tid < 64) {
    i64 first = 0, rows = 0;
    const bool ok = t0 + tid < a.T;
    if (ok) mhc_view(a.seqs, a.nseq, a.keep, t0 + tid, &first, &rows);
    const bool seq = ok && mkl_order(rows, a.K, a.m) == ORDER_SEQ;
    xr[tid] = seq ? a.x + (t0 + tid) * a.K : nullptr;
    other[tid] = ok && !seq;
  }
  __syncthreads();
  float acc[4][4];
  seq_tile<MHC_SEQ>(xr, a.fn, r0, a.m, a.K, sm, acc);
  UNROLL for (int u = 0; u < 4; u++) {
    const int row = G::xrow(tid, u);
    UNROLL for (int q = 0; q < 4; q++) {
      const i64 r = r0 + G::wrow(tid, q);
      if (xr[row] && r < a.m) a.mix[(t0 + row) * a.m + r] = acc[u][q];
    }
  }
  for (int u = 0; u < 64; u++)
    if (other[u] && tid < 32 && r0 + tid < a.m) a.mix[(t0 + u) * a.m + r0 + tid] = mhc_mix41_fast(a, t0 + u, r0 + tid);
#endif
}

// mhc_mix41_fold_row (V4.1, the fast mode): token t's mix row r < m folded from its MKL
// lanes in part (per token m·16 + 32 values), as mhc_mix41_dot computes it, or (r = m)
// its RMS scale folded from the cascade's 32 lanes, as mhc_rms41 computes it
// (mhc_fast_mix41_sum, or mhc_mix41_split with fold).
DEVM void mhc_mix41_fold_row(const float* xs, const Weight& fn, const float* part, float* mix, float* rs, i64 m, i64 K,
                             double norm_eps, const SeqRec* seqs, i64 nseq, i64 keep, i64 t, i64 r) {
  const float* pt = part + t * (m * 16 + 32);
  FRow x;
  x.p = xs + t * K;
  if (r == m) {
    mhc_Sq sq;
    sq.p = x.p;
    float mean = cascade_fold(sq, K, pt + m * 16) / (float)K;
    rs[t] = 1 / (float)sqrt((double)(mean + (float)norm_eps));
    return;
  }
  i64 first, rows;
  mhc_view(seqs, nseq, keep, t, &first, &rows);
  WRow w;
  w.w = fn;
  w.r = r;
  mix[t * m + r] = mkl_fold(x, w, rows, t - first, K, m, pt + r * 16);
}

// mhc_mix41_split (V4.1): the RMS scaling of one token's mixes, then hc_split_sinkhorn
// in fp32 (cpu: mixRow41, splitSinkhorn). With fold (the fast mode's decode steps) it
// first folds the token's mixes and RMS scale from their lanes itself, as
// mhc_fast_mix41_sum does (a lane two rows): one launch where there were two.
struct mhc_Mix41SplitArgs {
  const float* x; float* mix; Weight base; Weight scale; float* pre; float* post; float* comb;
  i64 T; i64 n; i64 K; double norm_eps; double eps; i64 iters; const SeqRec* seqs; i64 nseq; i64 keep;
  float* rs;  // the fast mode's per-token RMS scales (mhc_fast_mix41_sum); null: computed here
  Weight fn; const float* part; i64 fold;  // with fold: the mixes' weights and lanes
};
DEVM void mhc_mix41_split_token(const mhc_Mix41SplitArgs& a, i64 t) {
  i64 n = a.n, m = (2 + n) * n, first, rows;
  float eps = (float)a.eps;
  if (a.fold)
    for (i64 r = 0; r <= m; r++)
      mhc_mix41_fold_row(a.x, a.fn, a.part, a.mix, a.rs, m, a.K, a.norm_eps, a.seqs, a.nseq, a.keep, t, r);
  mhc_view(a.seqs, a.nseq, a.keep, t, &first, &rows);
  bool vec = (t - first) * n < vec_tail(rows * n);
  float* mx = a.mix + t * m;
  float rs = a.rs ? a.rs[t] : mhc_rms41(a.x + t * a.K, a.K, (float)a.norm_eps);
  for (i64 i = 0; i < m; i++) mx[i] *= rs;
  float s0 = wval(a.scale, 0, 0), s1 = wval(a.scale, 0, 1), s2 = wval(a.scale, 0, 2);
  float* pre = a.pre + t * n;
  float* post = a.post + t * n;
  for (i64 j = 0; j < n; j++) {
    float u = mx[j] * s0 + wval(a.base, 0, j);
    float v = mx[n + j] * s1 + wval(a.base, 0, n + j);
    pre[j] = (vec ? sigmoid_vec(u) : sigmoid_scalar(u)) + eps;
    post[j] = 2 * (vec ? sigmoid_vec(v) : sigmoid_scalar(v));
  }
  float* c = a.comb + t * n * n;
  for (i64 i = 0; i < n; i++) {
    float* row = c + i * n;
    float mxv = -F32_INF;
    for (i64 j = 0; j < n; j++) {
      row[j] = mx[2 * n + i * n + j] * s2 + wval(a.base, 0, 2 * n + i * n + j);
      mxv = go_max32(mxv, row[j]);
    }
    float sum = 0;
    for (i64 j = 0; j < n; j++) {
      row[j] = exp_scalar(row[j] - mxv);
      sum += row[j];
    }
    for (i64 j = 0; j < n; j++) row[j] = row[j] / sum + eps;
  }
  mhc_sinkhorn(c, n, eps, a.iters);
}
#ifndef DI_EMULATE
// mhc_mix41_split_lanes: mhc_mix41_split_token for n = 4 on the 16 lanes of mask, as
// mhc_mix_split_lanes (the RMS scale computed on lane 0 when not given).
DEVM void mhc_mix41_split_lanes(const mhc_Mix41SplitArgs& a, i64 t, int l, unsigned mask) {
  const int n = 4, m = (2 + n) * n, i = l / n;
  float eps = (float)a.eps;
  if (a.fold) {
    for (int r = l; r <= m; r += 16)
      mhc_mix41_fold_row(a.x, a.fn, a.part, a.mix, a.rs, m, a.K, a.norm_eps, a.seqs, a.nseq, a.keep, t, r);
    __syncwarp(mask);  // the token's mixes and scale written before its lanes read them
  }
  i64 first, rows;
  mhc_view(a.seqs, a.nseq, a.keep, t, &first, &rows);
  bool vec = (t - first) * n < vec_tail(rows * n);
  float* mx = a.mix + t * m;
  float rs = 0;
  if (a.rs) rs = a.rs[t];
  else if (l == 0) rs = mhc_rms41(a.x + t * a.K, a.K, (float)a.norm_eps);
  if (!a.rs) rs = mhc_at(rs, 0, mask);
  float s0 = wval(a.scale, 0, 0), s1 = wval(a.scale, 0, 1), s2 = wval(a.scale, 0, 2);
  float ml = mx[l] * rs, mc = mx[2 * n + l] * rs;
  if (l < n) {
    float u = ml * s0 + wval(a.base, 0, l);
    a.pre[t * n + l] = (vec ? sigmoid_vec(u) : sigmoid_scalar(u)) + eps;
  } else if (l < 2 * n) {
    float v = ml * s1 + wval(a.base, 0, l);
    a.post[t * n + l - n] = 2 * (vec ? sigmoid_vec(v) : sigmoid_scalar(v));
  }
  float r = mc * s2 + wval(a.base, 0, 2 * n + l);
  float mxv = -F32_INF;
  UNROLL for (int q = 0; q < n; q++) mxv = go_max32(mxv, mhc_at(r, i * n + q, mask));
  r = exp_scalar(r - mxv);
  float sum = 0;
  UNROLL for (int q = 0; q < n; q++) sum += mhc_at(r, i * n + q, mask);
  r = r / sum + eps;
  a.comb[t * n * n + l] = mhc_sinkhorn_lanes(r, l, eps, a.iters, mask);
  // the scaled mixes, as the serial kernel leaves them (lanes l and l + 16 of 24)
  mx[l] = ml;
  if (l + 16 < m) mx[l + 16] *= rs;
}
#endif
// mhc_mix41_split: a token takes 16 work items, as mhc_mix_split.
KERNEL(mhc_mix41_split, mhc_Mix41SplitArgs) { MHC_SPLIT_HALVES(mhc_mix41_split_token, mhc_mix41_split_lanes) }

// mhc_collapse: y_t = Σ_j w_j·stream_j (cpu: collapse); round: each value then rounded to
// bf16 (a fake_quant to bf16 run as this kernel's epilogue, ops_fuse.go).
struct mhc_CollapseArgs { const float* x; const float* w; float* y; i64 T; i64 n; i64 d; i64 round; };
KERNEL(mhc_collapse, mhc_CollapseArgs) {
  for (i64 i = GIDX; i < a.T * a.d; i += GSTRIDE) {
    const i64 t = qdiv(i, a.d), c = qmod(i, a.d);
    float acc = 0;
    for (i64 j = 0; j < a.n; j++) acc += a.w[t * a.n + j] * a.x[(t * a.n + j) * a.d + c];
    a.y[i] = a.round ? q_bf16(acc) : acc;
  }
}

// mhc_expand: new_k = post_k·out + Σ_j comb[j,k]·stream_j; V4 adds the terms to
// post_k·out one by one, V4.1 sums them first (cpu: newHCExpand, newHCExpandAny); round:
// each value then rounded to bf16 (an epilogue, ops_fuse.go).
struct mhc_ExpandArgs { const float* x; const float* out; const float* post; const float* comb; float* y; i64 T; i64 n; i64 d; i64 v41; i64 round; };
KERNEL(mhc_expand, mhc_ExpandArgs) {
  for (i64 i = GIDX; i < a.T * a.n * a.d; i += GSTRIDE) {
    i64 n = a.n, d = a.d;
    i64 t = i / (n * d), k = (i / d) % n, c = i % d;
    float pk = a.post[t * n + k], o = a.out[t * d + c];
    if (a.v41) {
      float sum = 0;
      for (i64 j = 0; j < n; j++) sum += a.comb[t * n * n + j * n + k] * a.x[(t * n + j) * d + c];
      const float v = pk * o + sum;
      a.y[i] = a.round ? q_bf16(v) : v;
    } else {
      float v = pk * o;
      for (i64 j = 0; j < n; j++) v += a.comb[t * n * n + j * n + k] * a.x[(t * n + j) * d + c];
      a.y[i] = a.round ? q_bf16(v) : v;
    }
  }
}

// mhc_expand4: mhc_expand with a work item per (token, 4 channels) computing all n
// streams' outputs (n ≤ 8; d a multiple of 4, the operands 16-byte aligned: Go checks):
// each stream's 4 values loaded once as a float4, where mhc_expand's item per output
// value loaded the n streams' values again for each of the n outputs. Each output value
// is the same sum in the same order.
KERNEL(mhc_expand4, mhc_ExpandArgs) {
  const i64 n = a.n, d = a.d, d4 = d / 4;
  for (i64 i = GIDX; i < a.T * d4; i += GSTRIDE) {
    const i64 t = qdiv(i, d4), c = qmod(i, d4) * 4;
    float4 xs[8];
    UNROLL for (int j = 0; j < 8; j++)
      if (j < n) xs[j] = *(const float4*)(a.x + (t * n + j) * d + c);
    const float4 o = *(const float4*)(a.out + t * d + c);
    for (i64 k = 0; k < n; k++) {
      const float pk = a.post[t * n + k];
      float v[4] = {pk * o.x, pk * o.y, pk * o.z, pk * o.w}, sum[4] = {0, 0, 0, 0};
      UNROLL for (int j = 0; j < 8; j++) {
        if (j >= n) break;
        const float cw = a.comb[t * n * n + j * n + k];
        const float xv[4] = {xs[j].x, xs[j].y, xs[j].z, xs[j].w};
        UNROLL for (int u = 0; u < 4; u++) {
          if (a.v41) sum[u] += cw * xv[u];
          else v[u] += cw * xv[u];
        }
      }
      float4 r;
      r.x = a.v41 ? v[0] + sum[0] : v[0];
      r.y = a.v41 ? v[1] + sum[1] : v[1];
      r.z = a.v41 ? v[2] + sum[2] : v[2];
      r.w = a.v41 ? v[3] + sum[3] : v[3];
      if (a.round) r.x = q_bf16(r.x), r.y = q_bf16(r.y), r.z = q_bf16(r.z), r.w = q_bf16(r.w);
      *(float4*)(a.y + (t * n + k) * d + c) = r;
    }
  }
}

// mhc_head (V4): the streams collapsed with pre = sigmoid(mix·scale + base) + eps, mix
// from mhc_mix_dot (cpu: newHCHead).
struct mhc_HeadArgs { const float* x; const double* mix; Weight base; Weight scale; float* y; i64 T; i64 n; i64 d; double eps; };
KERNEL(mhc_head, mhc_HeadArgs) {
  for (i64 i = GIDX; i < a.T * a.d; i += GSTRIDE) {
    i64 t = i / a.d, c = i % a.d;
    double s0 = (double)wval(a.scale, 0, 0);
    float acc = 0;
    for (i64 j = 0; j < a.n; j++) {
      float w = (float)(mhc_sigmoid64(a.mix[t * a.n + j] * s0 + (double)wval(a.base, 0, j)) + a.eps);
      acc += w * a.x[(t * a.n + j) * a.d + c];
    }
    a.y[i] = acc;
  }
}

// mhc_rmsnorm41: V4.1's RMSNorm per chunk of g values, the statistics in ATen's fp32
// order (cpu: newRMSNormAny).
struct mhc_RMSNorm41Args { const float* x; Weight w; float* y; i64 chunks; i64 g; double eps; i64 weighted; i64 round; };
KERNEL(mhc_rmsnorm41, mhc_RMSNorm41Args) {
  for (i64 c = GIDX; c < a.chunks; c += GSTRIDE) {
    const float* x = a.x + c * a.g;
    float* y = a.y + c * a.g;
    float rs = mhc_rms41(x, a.g, (float)a.eps);
    for (i64 i = 0; i < a.g; i++) {
      float v = x[i] * rs;
      if (a.weighted) v *= wval(a.w, 0, i);
      y[i] = a.round ? q_bf16(v) : v;
    }
  }
}

// ---- the fast numerics mode: split reductions ----
//
// The exact kernels above sum a row's K values in one chain (V4's mixes: 16,384 float64
// adds a work item). In the fast mode a sum over K values is split into P interleaved
// parts (P from the shape alone, ops_mhc.go's fastParts: about √K), part p summing the
// values k ≡ p (mod P) in float64, so that adjacent work items read adjacent values; a
// second launch adds a row's P parts in order. The values differ from the cpu target's
// by the summation order only.

// mhc_fast_mix_part: the parts of the mixes' sums of token t: row r < m is fn[r]·x_t,
// row m the sum of squares x_t·x_t. One work item a (token, row, part), into
// part[t, r, p] (T × (m+1) × P doubles).
struct mhc_FastMixPartArgs { const float* x; Weight fn; double* part; i64 T; i64 m; i64 K; i64 P; };
// (rows.h part_chain_row: the weight's format chosen once a work item, PART_AHEAD terms'
// loads ahead; run 27 on the H200: 33 → 6 µs a launch at one token)
KERNEL(mhc_fast_mix_part, mhc_FastMixPartArgs) {
  const i64 rows = a.m + 1;
  for (i64 i = GIDX; i < a.T * rows * a.P; i += GSTRIDE) {
    i64 p = i % a.P, r = (i / a.P) % rows, t = i / (a.P * rows);
    const float* x = a.x + t * a.K;
    a.part[i] = r == a.m ? part_chain(x, FRow{x}, p, a.P, a.K) : part_chain_row(x, a.fn, r, p, a.P, a.K);
  }
}

// mhc_fast_mix_tile: mhc_fast_mix_part's values (rows.h part_dots_tile), one work item a
// (4 tokens, 4 rows, part): each value loaded and widened once for four sums (run 25 on
// the H200: the part kernel took 0.40 ms a V4 layer at batch 256, re-reading a token's
// row for every mix row). Consecutive work items are a tile's parts, then the token
// group's row groups.
// (at most 128 registers a thread, four launch blocks a multiprocessor: unbounded, the
// compiler took 255 for the router's tiles and 172 for the mixes', two blocks, and the
// router's tiles ran slower than a sum a work item on the H200, run 26b)
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 4)
#endif
KERNEL(mhc_fast_mix_tile, mhc_FastMixPartArgs) {
  const i64 rows = a.m + 1, RG = (rows + 3) / 4, TG = (a.T + 3) / 4;
  for (i64 i = GIDX; i < TG * RG * a.P; i += GSTRIDE) {
    const i64 p = i % a.P, rg = (i / a.P) % RG, tg = i / (a.P * RG), t0 = 4 * tg, r0 = 4 * rg;
    const int sq = a.m >= r0 && a.m < r0 + 4 ? (int)(a.m - r0) : -1;  // the sum of squares
    part_dots_tile<4, 4>(a.x + t0 * a.K, a.K, a.fn, r0, p, a.P, a.K, (int)imin(4, a.T - t0), (int)imin(4, rows - r0), sq,
                         [&](int t, int r, double v) { a.part[((t0 + t) * rows + r0 + r) * a.P + p] = v; });
  }
}
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS
#endif

// mhc_fast_mix_sum (V4): a (token, mix row)'s parts summed, mix[t, r] = dot / rms in
// float64, as mhc_mix_dot. A warp an item: lane l adds parts l, l + 32, … in order (the
// dot's and the sum of squares'), then the lanes' sums fold pairwise, lanes l and
// l ^ 16, then ^ 8, ^ 4, ^ 2, ^ 1. Until run 26 one thread added all P
// parts in one chain: 24 threads at batch 1, about 24 µs a launch on the H200 (run 26d).
struct mhc_FastMixSumArgs { const double* part; double* mix; i64 T; i64 m; i64 K; i64 P; double norm_eps; };
// mhc_mix_lane: lane l's sums of item (t, r): the dot's parts (*acc) and the squares'
// (*ss), parts l, l + 32, … in order, their loads in flight together.
DEVM void mhc_mix_lane(const mhc_FastMixSumArgs& a, i64 t, i64 r, int l, double* ss, double* acc) {
  const double* pt = a.part + t * (a.m + 1) * a.P;
  double s = 0, d = 0;
  i64 p = l;
  for (; p + 96 < a.P; p += 128) {
    double u[4], v[4];
    UNROLL for (int j = 0; j < 4; j++) u[j] = pt[a.m * a.P + p + 32 * j], v[j] = pt[r * a.P + p + 32 * j];
    UNROLL for (int j = 0; j < 4; j++) s += u[j], d += v[j];
  }
  for (; p < a.P; p += 32) s += pt[a.m * a.P + p], d += pt[r * a.P + p];
  *ss = s, *acc = d;
}
DEVM void mhc_mix_store(const mhc_FastMixSumArgs& a, i64 i, double ss, double acc) {
  double inv = 1 / sqrt(ss / (double)a.K + a.norm_eps);
  a.mix[i] = acc * inv;
}
KERNEL(mhc_fast_mix_sum, mhc_FastMixSumArgs) {
#ifdef DI_EMULATE
  for (i64 w = GIDX; w < a.T * a.m * 32; w += GSTRIDE) {
    if ((w & 31) != 0) continue;
    const i64 i = w >> 5;
    double ss[32], acc[32];
    for (int l = 0; l < 32; l++) mhc_mix_lane(a, i / a.m, i % a.m, l, &ss[l], &acc[l]);
    for (int off = 16; off >= 1; off >>= 1) {  // every lane l: its sum + lane l ^ off's
      double ns[32], na[32];
      for (int l = 0; l < 32; l++) ns[l] = ss[l] + ss[l ^ off], na[l] = acc[l] + acc[l ^ off];
      for (int l = 0; l < 32; l++) ss[l] = ns[l], acc[l] = na[l];
    }
    mhc_mix_store(a, i, ss[0], acc[0]);
  }
#else
  // (the launch's work items are whole warps: a warp's lanes share w >> 5)
  for (i64 w = GIDX; w < a.T * a.m * 32; w += GSTRIDE) {
    const i64 i = w >> 5;
    const int l = (int)(w & 31);
    double ss, acc;
    mhc_mix_lane(a, i / a.m, i % a.m, l, &ss, &acc);
    for (int off = 16; off >= 1; off >>= 1) {
      ss += __shfl_xor_sync(0xffffffffu, ss, off);
      acc += __shfl_xor_sync(0xffffffffu, acc, off);
    }
    if (l == 0) mhc_mix_store(a, i, ss, acc);
  }
#endif
}

// mhc_fast_norm_part (V4): RMSNorm's sum of squares per chunk of g values in P parts,
// into part[c, p]. One work item a (chunk, part).
struct mhc_FastNormPartArgs { const float* x; double* part; i64 chunks; i64 g; i64 P; };
KERNEL(mhc_fast_norm_part, mhc_FastNormPartArgs) {
  for (i64 i = GIDX; i < a.chunks * a.P; i += GSTRIDE) {
    i64 c = i / a.P, p = i % a.P;
    const float* x = a.x + c * a.g;
    double acc = 0;
    for (i64 k = p; k < a.g; k += a.P) acc += (double)x[k] * (double)x[k];
    a.part[i] = acc;
  }
}

// mhc_fast_norm_apply (V4): y = x·inv (· w), inv from the chunk's parts summed in
// order, in float64 as rmsnorm. One work item a value; each adds its chunk's P parts
// itself (P is about √g), which saves a launch.
struct mhc_FastNormApplyArgs { const float* x; Weight w; float* y; const double* part; i64 chunks; i64 g; i64 P; double eps; i64 weighted; };
KERNEL(mhc_fast_norm_apply, mhc_FastNormApplyArgs) {
  for (i64 i = GIDX; i < a.chunks * a.g; i += GSTRIDE) {
    i64 c = i / a.g, k = i % a.g;
    const double* pc = a.part + c * a.P;
    double ss = 0;
    for (i64 p = 0; p < a.P; p++) ss += pc[p];
    double inv = 1.0 / sqrt(ss / (double)a.g + a.eps);
    float v = (float)((double)a.x[i] * inv);
    a.y[i] = a.weighted ? v * wval(a.w, 0, k) : v;
  }
}

// mhc_fast_norm_one (V4, P at most NORM_ONE_PARTS: Go checks): mhc_fast_norm_part's and
// _apply's work in one launch, a launch block (ROW_SPREAD threads) a chunk — the P parts
// summed by threads p < P as the part kernel sums them, then every value normalized
// from the parts added in order, as the apply kernel adds them: the same values bit for
// bit, one launch where there were two. The emulated device runs a chunk on one thread.
#define NORM_ONE_PARTS 256
KERNEL(mhc_fast_norm_one, mhc_FastNormApplyArgs) {
#ifdef DI_EMULATE
  for (i64 c = GIDX; c < a.chunks; c += GSTRIDE) {
    const float* x = a.x + c * a.g;
    double ss = 0;
    for (i64 p = 0; p < a.P; p++) {
      double acc = 0;
      for (i64 k = p; k < a.g; k += a.P) acc += (double)x[k] * (double)x[k];
      ss += acc;
    }
    double inv = 1.0 / sqrt(ss / (double)a.g + a.eps);
    for (i64 k = 0; k < a.g; k++) {
      float v = (float)((double)x[k] * inv);
      a.y[c * a.g + k] = a.weighted ? v * wval(a.w, 0, k) : v;
    }
  }
#else
  __shared__ double part[NORM_ONE_PARTS];
  const int tid = (int)(GIDX % ROW_SPREAD);
  for (i64 c = GIDX / ROW_SPREAD; c < a.chunks; c += GSTRIDE / ROW_SPREAD) {
    const float* x = a.x + c * a.g;
    for (i64 p0 = 0; p0 < a.P; p0 += ROW_SPREAD) {  // (the same trips on every thread)
      const i64 p = p0 + tid;
      double acc = 0;
      for (i64 k = p; k < a.g && p < a.P; k += a.P) acc += (double)x[k] * (double)x[k];
      if (p < a.P) part[p] = acc;
    }
    __syncthreads();
    double ss = 0;
    for (i64 p = 0; p < a.P; p++) ss += part[p];
    const double inv = 1.0 / sqrt(ss / (double)a.g + a.eps);
    for (i64 k = tid; k < a.g; k += ROW_SPREAD) {
      float v = (float)((double)x[k] * inv);
      a.y[c * a.g + k] = a.weighted ? v * wval(a.w, 0, k) : v;
    }
    __syncthreads();  // the parts read before the next chunk's are written
  }
#endif
}

// V4.1 in the fast mode: the reference's fp32 orders keep independent lanes — ATen's
// cascade_sum 32, MKL's dot_gemv and dot_small 16, dot_split4 4 (numerics.h's
// cascade_lane and mkl_lane) — so these kernels compute the lanes as separate work
// items and fold them as the serial kernels do: the values are the cpu target's bit
// for bit, in chains 16 to 32 times shorter. (V4.1 quantizes activations to FP8 and
// FP4; a last-bit difference there flips codes, and the free-running check could not
// bound what follows.)

// mhc_fast_mix41_part (V4.1): the lanes of token t's sums: for each mix row r the 16
// lanes of mkl_dot(x_t, fn[r]) for the token's sequence rows, then the 32 lanes of
// cascade_sum(x_t²). One work item a (token, lane), into part[t, m·16 + 32].
struct mhc_FastMix41Args {
  const float* x; Weight fn; float* part; float* mix; float* rs; i64 T; i64 m; i64 K; double norm_eps;
  const SeqRec* seqs; i64 nseq; i64 keep;
};
DEVM void mhc_mix41_part_item(const mhc_FastMix41Args& a, i64 i) {
  const i64 per = a.m * 16 + 32, t = i / per, j = i % per;
  FRow x;
  x.p = a.x + t * a.K;
  if (j >= a.m * 16) {
    mhc_Sq sq;
    sq.p = x.p;
    i64 c = j - a.m * 16;
    a.part[i] = cascade_lane(sq, a.K, (int)(c / 8), (int)(c % 8));
    return;
  }
  i64 first, rows;
  mhc_view(a.seqs, a.nseq, a.keep, t, &first, &rows);
  WRow w;
  w.w = a.fn;
  w.r = j / 16;
  a.part[i] = mkl_lane(x, w, rows, a.K, a.m, (int)(j % 16));
}
KERNEL(mhc_fast_mix41_part, mhc_FastMix41Args) {
  for (i64 i = GIDX; i < a.T * (a.m * 16 + 32); i += GSTRIDE) mhc_mix41_part_item(a, i);
}

// mhc_fast_mix41_tile (V4.1, decode steps of many tokens: one row a sequence, MKL's GEMV
// order): mhc_fast_mix41_part's lanes with a launch block a tile of G::TT tokens ×
// G::TN mix rows (numerics.h gemv_tile: the rows staged in shared memory; the same
// fused multiply-adds in the same order), then blocks of 128 of the tokens' cascade
// lanes (4 tokens a block). A token in another order takes mkl_lane on the block's
// threads. MHC_TILE is the tile (2 tokens × 8 rows, 512 positions a chunk; ops_mhc.go
// mixTileTokens, mixTileRows size the grids).
#define MHC_TILE 1, 8, 2, 1, 32
template <int AF, int GT, int GN, int UT, int UN, int J>
DEVM void mhc_mix41_tile(const mhc_FastMix41Args& a, i64 GIDX, i64 GSTRIDE) {
  typedef GemvTile<GT, GN, UT, UN, J> G;
  const i64 per = a.m * 16 + 32, nr = (a.m + G::TN - 1) / G::TN, tiles = (a.T + G::TT - 1) / G::TT * nr;
#ifdef DI_EMULATE
  (void)tiles;
  for (i64 i = GIDX; i < a.T * per; i += GSTRIDE) mhc_mix41_part_item(a, i);
#else
  (void)GSTRIDE;
  __shared__ float sm[G::template smem<AF>()];
  __shared__ const float* xr[G::TT];
  __shared__ int other[G::TT];
  const i64 b = GIDX / 128;
  const int tid = (int)(GIDX % 128), L = tid & 15;
  if (b >= tiles) {  // the cascade lanes: a work item a (token, lane)
    const i64 i = (b - tiles) * 128 + tid, t = i / 32;
    if (t < a.T) mhc_mix41_part_item(a, t * per + a.m * 16 + i % 32);
    return;
  }
  const i64 t0 = b / nr * G::TT, r0 = b % nr * G::TN;
  if (tid < G::TT) {
    i64 first = 0, rows = 0;
    const bool ok = t0 + tid < a.T;
    if (ok) mhc_view(a.seqs, a.nseq, a.keep, t0 + tid, &first, &rows);
    const bool gemv = ok && mkl_order(rows, a.K, a.m) == ORDER_GEMV;
    xr[tid] = gemv ? a.x + (t0 + tid) * a.K : nullptr;
    other[tid] = ok && !gemv;
  }
  __syncthreads();
  float acc[G::NUT][G::NUN];
  gemv_tile<GT, GN, UT, UN, J, AF>(xr, a.fn, r0, a.m, a.K, sm, acc);
  UNROLL for (int u = 0; u < G::NUT; u++) {
    const int row = G::xrow(tid, u);
    UNROLL for (int q = 0; q < G::NUN; q++) {
      const i64 r = r0 + G::wrow(tid, q);
      if (xr[row] && r < a.m) a.part[(t0 + row) * per + r * 16 + L] = acc[u][q];
    }
  }
  for (int u = 0; u < G::TT; u++) {
    if (!other[u]) continue;
    for (int i = tid; i < G::TN * 16; i += 128) {
      const i64 t = t0 + u, r = r0 + i / 16;
      if (r < a.m) mhc_mix41_part_item(a, t * per + r * 16 + i % 16);
    }
  }
#endif
}
KERNEL(mhc_fast_mix41_tile, mhc_FastMix41Args) { mhc_mix41_tile<-1, MHC_TILE>(a, GIDX, GSTRIDE); }
// mhc_fast_mix41_tile_a: the same tiles with the rows staged by cp.async (numerics.h
// gemv_tile_async, for float32 mix weights — V4.1's — where the rows allow;
// DEEPINFER_CUDA_MIX_ASYNC=1; slower than mhc_fast_mix41_tile in run 23a): the same
// values.
KERNEL(mhc_fast_mix41_tile_a, mhc_FastMix41Args) { mhc_mix41_tile<0, MHC_TILE>(a, GIDX, GSTRIDE); }
// mhc_fast_mix41_tile_b: mhc_fast_mix41_tile bounded to 128 registers a thread (CUDA
// 12.4: 200 unbounded, so two blocks, 8 warps, a multiprocessor; bounded, four blocks,
// 256 / 408 B spilled / reloaded): the same values. Steps of more than 128 tokens run it
// (ops_mhc.go mixTileBRows: run 36a, an H100, 0.816 → 0.615 ms at batch 256, 0.373 →
// 0.387 at 64). A staged form at four blocks (_tile_a's stages of 256 positions in 21
// KB) lost there: 0.791 ms at 256, 0.629 at 64 (removed).
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 4)
KERNEL(mhc_fast_mix41_tile_b, mhc_FastMix41Args) { mhc_mix41_tile<-1, MHC_TILE>(a, GIDX, GSTRIDE); }
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS

// mhc_fast_mix41_rows (V4.1, steps whose sequences have one row each: MKL's GEMV order):
// mhc_fast_mix41_part's lanes with a launch block a (token, mix row) — and one a token
// for the 32 cascade lanes — that stages the rows in shared memory (numerics.h
// gemv_lane_staged: the same fused multiply-adds in the same order as lane_chain's).
// Other orders, or a weight that is not float32 or not 16-byte aligned, take mkl_lane
// on the block's first 16 threads.
DEVM void mhc_mix41_rows_serial(const mhc_FastMix41Args& a, i64 t, i64 r) {
  const i64 per = a.m * 16 + 32;
  FRow x;
  x.p = a.x + t * a.K;
  if (r == a.m) {
    mhc_Sq sq;
    sq.p = x.p;
    for (int c = 0; c < 32; c++) a.part[t * per + a.m * 16 + c] = cascade_lane(sq, a.K, c / 8, c % 8);
    return;
  }
  i64 first, rows;
  mhc_view(a.seqs, a.nseq, a.keep, t, &first, &rows);
  WRow w;
  w.w = a.fn;
  w.r = r;
  for (int L = 0; L < 16; L++) a.part[t * per + r * 16 + L] = mkl_lane(x, w, rows, a.K, a.m, L);
}
KERNEL(mhc_fast_mix41_rows, mhc_FastMix41Args) {
#ifdef DI_EMULATE
  for (i64 i = GIDX; i < a.T * (a.m + 1) * 128; i += GSTRIDE)
    if (i % 128 == 0) mhc_mix41_rows_serial(a, i / 128 / (a.m + 1), i / 128 % (a.m + 1));
#else
  (void)GSTRIDE;
  __shared__ float4 xs4[GEMV_CH / 4], ws4[GEMV_CH / 4];
  const i64 b = GIDX / 128;
  const int tid = (int)(GIDX % 128);
  if (b >= a.T * (a.m + 1)) return;  // the whole block
  const i64 t = b / (a.m + 1), r = b % (a.m + 1), per = a.m * 16 + 32;
  const float* xp = a.x + t * a.K;
  if (r == a.m) {
    if (tid < 32) {
      mhc_Sq sq;
      sq.p = xp;
      a.part[t * per + a.m * 16 + tid] = cascade_lane(sq, a.K, tid / 8, tid % 8);
    }
    return;
  }
  i64 first, rows;
  mhc_view(a.seqs, a.nseq, a.keep, t, &first, &rows);
  if (!gemv_staged_ok(a.fn, r, xp, rows, a.K, a.m)) {
    if (tid < 16) {
      FRow x;
      x.p = xp;
      WRow w;
      w.w = a.fn;
      w.r = r;
      a.part[t * per + r * 16 + tid] = mkl_lane(x, w, rows, a.K, a.m, tid);
    }
    return;
  }
  float v = gemv_lane_staged(xp, (const float*)a.fn.p + r * a.fn.cols, a.K, tid, xs4, ws4);
  if (tid < 16) a.part[t * per + r * 16 + tid] = v;
#endif
}

// mhc_fast_mix41_sum (V4.1): the lanes folded: mix[t, r] as mhc_mix41_dot computes it,
// and rs[t] as mhc_rms41 (for mhc_mix41_split). One work item a (token, mix row), the
// row m item writing rs.
KERNEL(mhc_fast_mix41_sum, mhc_FastMix41Args) {
  for (i64 i = GIDX; i < a.T * (a.m + 1); i += GSTRIDE)
    mhc_mix41_fold_row(a.x, a.fn, a.part, a.mix, a.rs, a.m, a.K, a.norm_eps, a.seqs, a.nseq, a.keep, i / (a.m + 1),
                       i % (a.m + 1));
}

// mhc_fast_norm41_part (V4.1): the 32 cascade lanes of each chunk's sum of squares,
// into part[c, 32]. One work item a (chunk, lane).
struct mhc_FastNorm41Args { const float* x; Weight w; float* y; float* part; i64 chunks; i64 g; double eps; i64 weighted; i64 round; };
KERNEL(mhc_fast_norm41_part, mhc_FastNorm41Args) {
  for (i64 i = GIDX; i < a.chunks * 32; i += GSTRIDE) {
    mhc_Sq sq;
    sq.p = a.x + i / 32 * a.g;
    a.part[i] = cascade_lane(sq, a.g, (int)(i % 32 / 8), (int)(i % 8));
  }
}

// mhc_fast_norm41_one (V4.1, chunks whose cascade lanes have at most NORM41_ONE_BLOCKS
// level-0 blocks: Go checks): mhc_fast_norm41_part's and _apply's work in one launch, a
// launch block (ROW_SPREAD threads) a chunk — the lanes' level-0 blocks summed in
// parallel (cascade_block_sum: the 32 lanes of a block read 32 adjacent values), each
// lane's levels replayed from them (cascade_lane_fold), the lanes folded once
// (cascade_fold), every value normalized: the part and apply kernels' values bit for
// bit. At batch 1 a V4.1 norm was two launches, the first one warp chaining 160 terms a
// lane (10.7 µs in run 29b's profile). The emulated device runs a chunk on one thread.
#define NORM41_ONE_BLOCKS 64
KERNEL(mhc_fast_norm41_one, mhc_FastNorm41Args) {
#ifdef DI_EMULATE
  for (i64 c = GIDX; c < a.chunks; c += GSTRIDE) {
    mhc_Sq sq;
    sq.p = a.x + c * a.g;
    float lanes[32];
    for (int l = 0; l < 32; l++) lanes[l] = cascade_lane(sq, a.g, l / 8, l % 8);
    float mean = cascade_fold(sq, a.g, lanes) / (float)a.g;
    float rs = 1 / (float)sqrt((double)(mean + (float)a.eps));
    for (i64 k = 0; k < a.g; k++) {
      float v = a.x[c * a.g + k] * rs;
      if (a.weighted) v *= wval(a.w, 0, k);
      a.y[c * a.g + k] = a.round ? q_bf16(v) : v;
    }
  }
#else
  // (every thread folds the lanes itself: the same value, and no branch between the
  // barriers; a chunk's shared values are written only after the next chunk's first
  // barrier, which every thread reaches after its last read of them)
  __shared__ float bs[NORM41_ONE_BLOCKS * 32];
  __shared__ float lanes[32];
  const int tid = (int)(GIDX % ROW_SPREAD);
  const i64 nb = cascade_blocks(a.g);
  for (i64 c = GIDX / ROW_SPREAD; c < a.chunks; c += GSTRIDE / ROW_SPREAD) {
    mhc_Sq sq;
    sq.p = a.x + c * a.g;
    for (i64 i = tid; i < nb * 32; i += ROW_SPREAD) {
      const int lane = (int)(i % 32);
      bs[i] = cascade_block_sum(sq, a.g, lane / 8, lane % 8, i / 32);
    }
    __syncthreads();
    const float lf = cascade_lane_fold(bs + (tid & 31), 32, a.g);
    if (tid < 32) lanes[tid] = lf;
    __syncthreads();
    const float mean = cascade_fold(sq, a.g, lanes) / (float)a.g;
    const float rs = 1 / (float)sqrt((double)(mean + (float)a.eps));
    for (i64 k = tid; k < a.g; k += ROW_SPREAD) {
      float v = a.x[c * a.g + k] * rs;
      if (a.weighted) v *= wval(a.w, 0, k);
      a.y[c * a.g + k] = a.round ? q_bf16(v) : v;
    }
  }
#endif
}

// mhc_fast_norm41_apply (V4.1): y = x·rs (· w) as mhc_rmsnorm41, rs from the chunk's
// lanes. One work item a value; each folds its chunk's lanes itself.
KERNEL(mhc_fast_norm41_apply, mhc_FastNorm41Args) {
  for (i64 i = GIDX; i < a.chunks * a.g; i += GSTRIDE) {
    i64 c = i / a.g, k = i % a.g;
    mhc_Sq sq;
    sq.p = a.x + c * a.g;
    float mean = cascade_fold(sq, a.g, a.part + c * 32) / (float)a.g;
    float rs = 1 / (float)sqrt((double)(mean + (float)a.eps));
    float v = a.x[i] * rs;
    if (a.weighted) v *= wval(a.w, 0, k);
    a.y[i] = a.round ? q_bf16(v) : v;
  }
}
