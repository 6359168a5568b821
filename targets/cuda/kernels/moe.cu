// moe.cu: the router (moe_route: V4's float64 router, V4.1's float32 route41, hash
// routing), the routed experts (moe_experts: V4 and V4.1 numerics) and the single-rank
// collectives (moe_dispatch, moe_combine, cp_gather: copies). Ports of
// targets/cpu/moe.go, v41_numerics.go and collective.go; the GEMM orders and the
// quantization helpers are dense41.cu's.

// moe_topk is the cpu's topExperts: the k highest sel values (lower id on ties), by
// insertion into a descending list.
DEV void moe_topk(const double* sel, i64 E, i64* pick, i64 k) {
  for (i64 j = 0; j < k; j++) pick[j] = -1;
  for (i64 e = 0; e < E; e++) {
    double v = sel[e];
    i64 j = k;
    while (j > 0 && (pick[j - 1] < 0 || sel[pick[j - 1]] < v)) j--;
    if (j == k) continue;
    for (i64 q = k - 1; q > j; q--) pick[q] = pick[q - 1];
    pick[j] = e;
  }
}

#ifndef DI_EMULATE
// MOE_KW: the most slots moe_topk_warp selects.
#define MOE_KW 16
// moe_topk_warp is moe_topk on a warp's 32 lanes (lane = the caller's lane; every lane
// calls it): each lane keeps the k best of its experts lane, lane + 32, ... (inserted in
// id order, so an equal value never passes an earlier one), then each of k rounds takes
// the best of the lanes' heads (the higher value, the lower id on ties) into pick (lane
// 0 writes it). Without NaNs that is moe_topk's list: the k highest values, lower ids
// first among equals (−0 and +0 equal, as moe_topk's comparison has them). It returns
// false and writes nothing when a value is NaN (moe_topk's list then depends on the
// scan order) or k > MOE_KW; the caller then runs moe_topk.
DEVM bool moe_topk_warp(const double* sel, i64 E, i64* pick, i64 k, int lane) {
  if (k > MOE_KW) return false;
  double v[MOE_KW];
  int id[MOE_KW];
  UNROLL for (int q = 0; q < MOE_KW; q++) v[q] = -F64_INF, id[q] = -1;
  int nan = 0;
  for (i64 e = lane; e < E; e += 32) {
    double x = sel[e];
    int xe = (int)e;
    nan |= x != x;
    // the new value takes the first slot it beats (empty, or a lower value: its id is
    // higher than every listed one), and each slot after it moves down one (all
    // unrolled: registers)
    bool moved = false;
    UNROLL for (int q = 0; q < MOE_KW; q++) {
      if (q < k && (moved || id[q] < 0 || x > v[q])) {
        moved = true;
        double tv = v[q];
        int ti = id[q];
        v[q] = x, id[q] = xe;
        x = tv, xe = ti;
      }
    }
  }
  if (__any_sync(0xffffffffu, nan)) return false;
  for (i64 j = 0; j < k; j++) {
    double bv = v[0];
    int bi = id[0];
    UNROLL for (int off = 16; off > 0; off >>= 1) {
      double ov = __shfl_xor_sync(0xffffffffu, bv, off);
      int oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
    }
    if (lane == 0) pick[j] = bi;
    if (bi >= 0 && id[0] == bi) {
      UNROLL for (int q = 0; q + 1 < MOE_KW; q++) v[q] = v[q + 1], id[q] = id[q + 1];
      v[MOE_KW - 1] = -F64_INF, id[MOE_KW - 1] = -1;
    }
  }
  return true;
}
#endif

// moe_select runs the selection of a token on its launch block's first warp (lane:
// the work item's place in the block; lanes 32 and up, and on the emulated device every
// lane but 0, have returned): moe_topk_warp, or moe_topk on lane 0 when it declines.
// It returns whether the caller's lane goes on (lane 0 only).
DEVM bool moe_select(const double* sel, i64 E, i64* pick, i64 k, int lane) {
  bool done = false;
#ifndef DI_EMULATE
  __syncwarp();  // lane 0's writes to sel seen by the warp
  done = moe_topk_warp(sel, E, pick, k, lane);
#endif
  if (lane != 0) return false;
  if (!done) moe_topk(sel, E, pick, k);
  return true;
}

// moe_lane is a work item's place in its token's ROW_SPREAD items, or -1 when it has no
// part in the token's selection (past the first warp; on the emulated device, past the
// first item).
DEVM int moe_lane(i64 it) {
  int lane = (int)(it % ROW_SPREAD);
#ifdef DI_EMULATE
  return lane == 0 ? 0 : -1;
#else
  return lane < 32 ? lane : -1;
#endif
}

// moe_route_v4: one token a work item. scores (float64 gate logits, scored), sel (score
// + bias) and pick live in scratch. scoring: 0 sqrtsoftplus, 1 sigmoid, 2 softmax.
struct MoERouteArgs {
  const float* x; Weight gate; Weight bias; i64 has_bias; const int* tokens; const int* tid2eid;
  float* wout; int* idout; i64 T; i64 E; i64 D; i64 k; i64 V; i64 hash; i64 norm; i64 scoring;
  double scale; char* scratch; i64* err;
};
// moe_gate_v4: one (token, expert) a work item: the float64 gate logit, summed in order.
KERNEL(moe_gate_v4, MoERouteArgs) {
  for (i64 i = GIDX; i < a.T * a.E; i += GSTRIDE) {
    i64 t = i / a.E, e = i % a.E;
    double* scores = (double*)(a.scratch + t * (2 * a.E + a.k) * 8);
    const float* xt = a.x + t * a.D;
    double acc = 0;
    for (i64 j = 0; j < a.D; j++) acc += (double)wval(a.gate, e, j) * (double)xt[j];
    scores[e] = acc;
  }
}

// In the fast mode the gate logits are split: moe_fast_gate_part sums, one (token,
// expert, part) a work item, the products of part p (values p, p + MOE_GP, ...: a
// warp's parts read one weight row's adjacent values) in float64; moe_fast_gate_sum
// adds an expert's parts in order. scratch2 holds the parts.
#define MOE_GP 32
struct MoEFastGateArgs { const float* x; Weight gate; char* scratch; double* part; i64 T; i64 E; i64 D; i64 k; };
KERNEL(moe_fast_gate_part, MoEFastGateArgs) {
  for (i64 i = GIDX; i < a.T * a.E * MOE_GP; i += GSTRIDE) {
    i64 p = i % MOE_GP, te = i / MOE_GP, e = te % a.E, t = te / a.E;
    // (rows.h part_chain_row: the gate's format chosen once a work item, not around every
    // load as wval does; 58.5 µs a launch at one token on the H200 with wval, run 27)
    a.part[i] = part_chain_row(a.x + t * a.D, a.gate, e, p, MOE_GP, a.D);
  }
}
// moe_fast_gate_tile: moe_fast_gate_part's values (rows.h part_dots_tile), one work
// item a (4 tokens, 4 experts, part): each value loaded and widened once for four sums
// (run 25 on the H200: the part kernel took 0.48 ms a V4 layer at batch 256, re-reading
// a token's row for every expert). Consecutive work items are a tile's parts, then the
// token group's expert groups (a launch block's warps share the tokens' rows in L1).
// (at most 128 registers a thread, four launch blocks a multiprocessor: unbounded, the
// compiler took 255 for the router's tiles and 172 for the mixes', two blocks, and the
// router's tiles ran slower than a sum a work item on the H200, run 26b)
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS __launch_bounds__(128, 4)
#endif
KERNEL(moe_fast_gate_tile, MoEFastGateArgs) {
  const i64 EG = (a.E + 3) / 4, TG = (a.T + 3) / 4;
  for (i64 i = GIDX; i < TG * EG * MOE_GP; i += GSTRIDE) {
    const i64 p = i % MOE_GP, eg = (i / MOE_GP) % EG, tg = i / (MOE_GP * EG), t0 = 4 * tg, e0 = 4 * eg;
    part_dots_tile<4, 4>(a.x + t0 * a.D, a.D, a.gate, e0, p, MOE_GP, a.D, (int)imin(4, a.T - t0), (int)imin(4, a.E - e0), -1,
                         [&](int t, int e, double v) { a.part[((t0 + t) * a.E + e0 + e) * MOE_GP + p] = v; });
  }
}
#ifndef DI_EMULATE
#undef KERNEL_BOUNDS
#define KERNEL_BOUNDS
#endif
KERNEL(moe_fast_gate_sum, MoEFastGateArgs) {
  for (i64 te = GIDX; te < a.T * a.E; te += GSTRIDE) {
    i64 e = te % a.E, t = te / a.E;
    double acc = 0;
    for (i64 p = 0; p < MOE_GP; p++) acc += a.part[te * MOE_GP + p];
    ((double*)(a.scratch + t * (2 * a.E + a.k) * 8))[e] = acc;
  }
}

// moe_score_v4: one (token, expert) a work item, after moe_gate_v4, for the
// elementwise scorings (0 sqrtsoftplus, 1 sigmoid): the expert's score and, unless
// hash-routed, its selection value (score + bias). moe_route_v4 then only selects.
KERNEL(moe_score_v4, MoERouteArgs) {
  for (i64 i = GIDX; i < a.T * a.E; i += GSTRIDE) {
    i64 t = i / a.E, e = i % a.E;
    double* scores = (double*)(a.scratch + t * (2 * a.E + a.k) * 8);
    double v = scores[e];
    v = a.scoring == 0 ? sqrt(v > 20 ? v : log1p(exp(v))) : 1 / (1 + exp(-v));
    scores[e] = v;
    if (!a.hash) scores[a.E + e] = a.has_bias ? v + (double)wval(a.bias, 0, e) : v;
  }
}

// moe_route_v4: one token's work after moe_gate_v4 (and moe_score_v4 for the
// elementwise scorings): the softmax scoring, the selection (moe_select: the first warp
// of the token's ROW_SPREAD work items, one launch block, so that tokens run on
// different multiprocessors), the weights (its first item).
KERNEL(moe_route_v4, MoERouteArgs) {
  for (i64 it = GIDX; it < a.T * ROW_SPREAD; it += GSTRIDE) {
    int lane = moe_lane(it);
    if (lane < 0) continue;
    i64 t = it / ROW_SPREAD;
    double* scores = (double*)(a.scratch + t * (2 * a.E + a.k) * 8);
    double* sel = scores + a.E;
    i64* pick = (i64*)(sel + a.E);
    if (a.hash && lane != 0) continue;
    if (lane == 0 && a.scoring == 2) {
      double mx = -F64_INF;
      for (i64 e = 0; e < a.E; e++) mx = go_max64(mx, scores[e]);
      double sum = 0;
      for (i64 e = 0; e < a.E; e++) {
        scores[e] = exp(scores[e] - mx);
        sum += scores[e];
      }
      for (i64 e = 0; e < a.E; e++) scores[e] /= sum;
      if (!a.hash)
        for (i64 e = 0; e < a.E; e++) sel[e] = a.has_bias ? scores[e] + (double)wval(a.bias, 0, e) : scores[e];
    }
    if (a.hash) {
      int tok = a.tokens[t];
      if (tok < 0 || tok >= a.V) { *a.err = 201; continue; }
      bool bad = false;
      for (i64 j = 0; j < a.k; j++) {
        int e = a.tid2eid[tok * a.k + j];
        if (e < 0 || e >= a.E) bad = true;
        pick[j] = e;
      }
      if (bad) { *a.err = 200; continue; }
    } else if (!moe_select(sel, a.E, pick, a.k, lane)) {
      continue;
    }
    double sum = 0;
    for (i64 j = 0; j < a.k; j++) sum += scores[pick[j]];
    for (i64 j = 0; j < a.k; j++) {
      double w = scores[pick[j]];
      if (a.norm) w /= sum + 1e-20;
      a.wout[t * a.k + j] = (float)(w * a.scale);
      a.idout[t * a.k + j] = (int)pick[j];
    }
  }
}

// moe_route_v41: route41, one token a work item: the gate logits in MKL's order for the
// token's sequence view, sqrt(softplus) in float32, top-k of score + bias, weights
// summed and scaled in float32.
struct MoERoute41Args {
  const float* x; Weight gate; Weight bias; i64 has_bias; float* wout; int* idout;
  i64 T; i64 E; i64 D; i64 k; i64 norm; double scale; const SeqRec* seqs; i64 nseq; i64 keep;
  char* scratch;
  float* part;  // the fast mode's lanes of the logits (moe_fast_gate41_part)
  i64 fold;     // moe_route_v41 folds the lanes itself (no moe_fast_gate41_sum)
};
// moe_gate41_score: token t's expert e from its logit v: score and selection value.
DEVM void moe_gate41_score(const MoERoute41Args& a, i64 t, i64 e, float v) {
  double* sel = (double*)(a.scratch + t * (2 * a.E + a.k) * 8);
  float* sc = (float*)(sel + a.E);
  if (v <= 20) v = (float)log1p(exp((double)v));
  sc[e] = (float)sqrt((double)v);
  sel[e] = a.has_bias ? (double)(sc[e] + wval(a.bias, 0, e)) : (double)sc[e];
}
// moe_gate_v41: one (token, expert) a work item: the logit in MKL's order, its score
// and selection value.
// moe_gate41_at: token t's row and expert e's gate row, and the token's sequence view
// (false: no sequence).
DEVM bool moe_gate41_at(const MoERoute41Args& a, i64 t, i64 e, FRow* x, WRow* w, i64* first, i64* rows) {
  if (!seq_view(a.seqs, a.nseq, a.keep, t, first, rows)) return false;
  x->p = a.x + t * a.D;
  w->w = a.gate;
  w->r = e;
  return true;
}
KERNEL(moe_gate_v41, MoERoute41Args) {
  for (i64 i = GIDX; i < a.T * a.E; i += GSTRIDE) {
    i64 t = i / a.E, e = i % a.E, first, rows;
    FRow x;
    WRow w;
    if (moe_gate41_at(a, t, e, &x, &w, &first, &rows))
      moe_gate41_score(a, t, e, mkl_dot(x, w, rows, t - first, a.D, a.E));
  }
}
// moe_fast_gate41_part and moe_fast_gate41_sum (V4.1, the fast mode): moe_gate_v41
// with the 16 independent lanes of MKL's order as work items (numerics.h mkl_lane),
// into part[t, e, lane], then folded as mkl_dot folds them (mkl_fold): its values bit
// for bit, in chains 16 times shorter.
// A work item serves MOE_GT consecutive tokens (the same expert and lane): when all of
// them take MKL's GEMV order (one row a sequence: decode) their chains run side by side,
// a weight value loaded once for the tokens; otherwise, or for a single token, each
// token's lane in turn. (Run 11c on the H200: 5.75 → 3.85 ms at batch 256, 1.43 →
// 1.02 at 64, four V4.1 layers; batch 1 0.51 → 0.58 before single tokens ran alone.)
#define MOE_GT 4
KERNEL(moe_fast_gate41_part, MoERoute41Args) {
  const i64 groups = (a.T + MOE_GT - 1) / MOE_GT;
  for (i64 i = GIDX; i < groups * a.E * 16; i += GSTRIDE) {
    const int L = (int)(i % 16);
    const i64 te = i / 16, e = te % a.E, t0 = (te / a.E) * MOE_GT;
    FRow x[MOE_GT];
    WRow w;
    i64 first[MOE_GT], rows[MOE_GT];
    bool ok[MOE_GT], gemv = true;
    int live = 0;
    UNROLL for (int u = 0; u < MOE_GT; u++) {
      ok[u] = t0 + u < a.T && moe_gate41_at(a, t0 + u, e, &x[u], &w, &first[u], &rows[u]);
      if (ok[u] && mkl_order(rows[u], a.D, a.E) != ORDER_GEMV) gemv = false;
      if (!ok[u]) x[u].p = a.x;  // read, not used
      live += ok[u];
    }
    // (one token alone, as in a batch-1 step, runs its own lane: no loads for the others)
    if (!gemv || live < 2) {
      for (int u = 0; u < MOE_GT; u++)
        if (ok[u]) a.part[((t0 + u) * a.E + e) * 16 + L] = mkl_lane(x[u], w, rows[u], a.D, a.E, L);
      continue;
    }
    float v[MOE_GT];
    mkl_gemv_lanes<MOE_GT>(x, w, a.D, L, v);
    UNROLL for (int u = 0; u < MOE_GT; u++)
      if (ok[u]) a.part[((t0 + u) * a.E + e) * 16 + L] = v[u];
  }
}
// moe_fast_gate41_tile and moe_fast_gate41_tile1: moe_fast_gate41_part's lanes for
// decode steps (one row a sequence: MKL's GEMV order), a launch block a tile of tokens ×
// experts (numerics.h gemv_tile: the rows staged in shared memory; the same fused
// multiply-adds in the same order): _tile 4 tokens × 32 experts, a value loaded once for
// 4 tokens or 4 experts; _tile1, for steps of 1-3 tokens, 1 token × 8 experts with 512
// positions staged at a time (more blocks, more loads in flight, where a step's whole
// work is one chain of (D−1)/16 steps a lane). A token in another order, should a step
// hold one, takes mkl_lane on the block's threads.
#ifndef DI_EMULATE
template <int GT, int GN, int UT, int UN, int J, int AF = -1>
DEVM void moe_gate41_tile(const MoERoute41Args& a, i64 GIDX) {
  typedef GemvTile<GT, GN, UT, UN, J> G;
  __shared__ float sm[G::template smem<AF>()];
  __shared__ const float* xr[G::TT];
  __shared__ int other[G::TT];
  const i64 ne = (a.E + G::TN - 1) / G::TN, blocks = (a.T + G::TT - 1) / G::TT * ne, b = GIDX / 128;
  const int tid = (int)(GIDX % 128), L = tid & 15;
  if (b >= blocks) return;  // the whole block
  const i64 t0 = b / ne * G::TT, e0 = b % ne * G::TN;
  if (tid < G::TT) {
    i64 first, rows;
    FRow x;
    WRow w;
    const bool ok = t0 + tid < a.T && moe_gate41_at(a, t0 + tid, e0, &x, &w, &first, &rows);
    const bool gemv = ok && mkl_order(rows, a.D, a.E) == ORDER_GEMV;
    xr[tid] = gemv ? x.p : nullptr;
    other[tid] = ok && !gemv;
  }
  __syncthreads();
  float acc[UT][UN];
  gemv_tile<GT, GN, UT, UN, J, AF>(xr, a.gate, e0, a.E, a.D, sm, acc);
  UNROLL for (int u = 0; u < UT; u++) {
    const int row = G::xrow(tid, u);
    UNROLL for (int q = 0; q < UN; q++) {
      const i64 e = e0 + G::wrow(tid, q);
      if (xr[row] && e < a.E) a.part[((t0 + row) * a.E + e) * 16 + L] = acc[u][q];
    }
  }
  for (int u = 0; u < G::TT; u++) {
    if (!other[u]) continue;
    for (int i = tid; i < G::TN * 16; i += 128) {
      const i64 t = t0 + u, e = e0 + i / 16;
      i64 first, rows;
      FRow x;
      WRow w;
      if (e < a.E && moe_gate41_at(a, t, e, &x, &w, &first, &rows))
        a.part[(t * a.E + e) * 16 + i % 16] = mkl_lane(x, w, rows, a.D, a.E, i % 16);
    }
  }
}
#endif
// moe_gate41_lanes_all: every (token, expert, lane) a work item (the emulated device's
// loop for the tiles: the same values).
DEVM void moe_gate41_lanes_all(const MoERoute41Args& a, i64 GIDX, i64 GSTRIDE) {
  for (i64 i = GIDX; i < a.T * a.E * 16; i += GSTRIDE) {
    const i64 t = i / 16 / a.E, e = i / 16 % a.E;
    i64 first, rows;
    FRow x;
    WRow w;
    if (moe_gate41_at(a, t, e, &x, &w, &first, &rows)) a.part[i] = mkl_lane(x, w, rows, a.D, a.E, (int)(i % 16));
  }
}
KERNEL(moe_fast_gate41_tile, MoERoute41Args) {
#ifdef DI_EMULATE
  moe_gate41_lanes_all(a, GIDX, GSTRIDE);
#else
  (void)GSTRIDE;
  moe_gate41_tile<1, 8, 4, 4, 8>(a, GIDX);
#endif
}
// moe_fast_gate41_tile_a: moe_fast_gate41_tile with the rows staged by cp.async
// (numerics.h gemv_tile_async, for bf16 gate weights — V4.1's — where the rows allow;
// the default since run 23a, DEEPINFER_CUDA_GEMV_ASYNC=0 keeps the other): the same
// values.
KERNEL(moe_fast_gate41_tile_a, MoERoute41Args) {
#ifdef DI_EMULATE
  moe_gate41_lanes_all(a, GIDX, GSTRIDE);
#else
  (void)GSTRIDE;
  moe_gate41_tile<1, 8, 4, 4, 8, 1>(a, GIDX);
#endif
}
KERNEL(moe_fast_gate41_tile1, MoERoute41Args) {
#ifdef DI_EMULATE
  moe_gate41_lanes_all(a, GIDX, GSTRIDE);
#else
  (void)GSTRIDE;
  moe_gate41_tile<1, 8, 1, 1, 32>(a, GIDX);
#endif
}
// moe_fast_gate41_seq (V4.1, the fast mode's steps of long sequences, where MKL's order
// is one sequential chain a logit): moe_gate_v41's scores and selection values with a
// launch block a tile of 32 tokens × 64 experts (numerics.h seq_tile: the rows staged
// in shared memory, each logit mkl_fast_dot's chain: dot_seq<true>, k = 0, 1, ... from
// 0); a token in another order (a short sequence in the same step) takes mkl_fast_dot on
// the block's threads. moe_gate_v41 runs the same chains with fma32 and one work item a
// logit, each reading its two rows from global memory (265 ms of run 15's 8,192-token
// V4.1 prefill).
#define MOE_SEQ 32, 64
KERNEL(moe_fast_gate41_seq, MoERoute41Args) {
  typedef SeqTile<MOE_SEQ> G;
#ifdef DI_EMULATE
  for (i64 i = GIDX; i < a.T * a.E; i += GSTRIDE) {
    i64 t = i / a.E, e = i % a.E, first, rows;
    FRow x;
    WRow w;
    if (moe_gate41_at(a, t, e, &x, &w, &first, &rows))
      moe_gate41_score(a, t, e, mkl_fast_dot(x, w, rows, t - first, a.D, a.E));
  }
#else
  (void)GSTRIDE;
  __shared__ float sm[G::SMEM];
  __shared__ const float* xr[32];
  __shared__ int other[32];
  const i64 ne = (a.E + 63) / 64, blocks = (a.T + 31) / 32 * ne, b = GIDX / 128;
  const int tid = (int)(GIDX % 128);
  if (b >= blocks) return;  // the whole block
  const i64 t0 = b / ne * 32, e0 = b % ne * 64;
  if (tid < 32) {
    i64 first, rows;
    FRow x;
    WRow w;
    const bool ok = t0 + tid < a.T && moe_gate41_at(a, t0 + tid, e0, &x, &w, &first, &rows);
    const bool seq = ok && mkl_order(rows, a.D, a.E) == ORDER_SEQ;
    xr[tid] = seq ? x.p : nullptr;
    other[tid] = ok && !seq;
  }
  __syncthreads();
  float acc[4][4];
  seq_tile<MOE_SEQ>(xr, a.gate, e0, a.E, a.D, sm, acc);
  UNROLL for (int u = 0; u < 4; u++) {
    const int row = G::xrow(tid, u);
    UNROLL for (int q = 0; q < 4; q++) {
      const i64 e = e0 + G::wrow(tid, q);
      if (xr[row] && e < a.E) moe_gate41_score(a, t0 + row, e, acc[u][q]);
    }
  }
  for (int u = 0; u < 32; u++) {
    if (!other[u]) continue;
    const i64 t = t0 + u, e = e0 + tid;
    i64 first, rows;
    FRow x;
    WRow w;
    if (tid < 64 && e < a.E && moe_gate41_at(a, t, e, &x, &w, &first, &rows))
      moe_gate41_score(a, t, e, mkl_fast_dot(x, w, rows, t - first, a.D, a.E));
  }
#endif
}
// moe_fast_gate41_rows: moe_fast_gate41_part's lanes for steps of few tokens, one row a
// sequence (MKL's GEMV order), with a launch block a (token, expert) that stages the
// token's row and the expert's gate row in shared memory (numerics.h gemv_lane_staged:
// the same values); a weight that is not float32 or aligned, or another order, takes
// mkl_lane on the block's first 16 threads.
KERNEL(moe_fast_gate41_rows, MoERoute41Args) {
#ifdef DI_EMULATE
  for (i64 i = GIDX; i < a.T * a.E * 128; i += GSTRIDE) {
    if (i % 128 != 0) continue;
    i64 t = i / 128 / a.E, e = i / 128 % a.E, first, rows;
    FRow x;
    WRow w;
    if (!moe_gate41_at(a, t, e, &x, &w, &first, &rows)) continue;
    for (int L = 0; L < 16; L++) a.part[(t * a.E + e) * 16 + L] = mkl_lane(x, w, rows, a.D, a.E, L);
  }
#else
  (void)GSTRIDE;
  __shared__ float4 xs4[GEMV_CH / 4], ws4[GEMV_CH / 4];
  const i64 b = GIDX / 128;
  const int tid = (int)(GIDX % 128);
  if (b >= a.T * a.E) return;  // the whole block
  const i64 t = b / a.E, e = b % a.E;
  i64 first, rows;
  FRow x;
  WRow w;
  if (!moe_gate41_at(a, t, e, &x, &w, &first, &rows)) return;
  if (!gemv_staged_ok(a.gate, e, x.p, rows, a.D, a.E)) {
    if (tid < 16) a.part[(t * a.E + e) * 16 + tid] = mkl_lane(x, w, rows, a.D, a.E, tid);
    return;
  }
  float v = gemv_lane_staged(x.p, (const float*)a.gate.p + e * a.gate.cols, a.D, tid, xs4, ws4);
  if (tid < 16) a.part[(t * a.E + e) * 16 + tid] = v;
#endif
}
// moe_gate41_fold: token t's expert e's logit folded from its lanes, scored.
DEVM void moe_gate41_fold(const MoERoute41Args& a, i64 t, i64 e) {
  i64 first, rows;
  FRow x;
  WRow w;
  if (moe_gate41_at(a, t, e, &x, &w, &first, &rows))
    moe_gate41_score(a, t, e, mkl_fold(x, w, rows, t - first, a.D, a.E, a.part + (t * a.E + e) * 16));
}
KERNEL(moe_fast_gate41_sum, MoERoute41Args) {
  for (i64 i = GIDX; i < a.T * a.E; i += GSTRIDE) moe_gate41_fold(a, i / a.E, i % a.E);
}

// moe_route_v41: one token's work, after moe_gate_v41: top-k (moe_select, the first
// warp of the token's ROW_SPREAD work items, one launch block) and the weights. With
// fold (the fast mode) the warp first folds the token's logits from their lanes, as
// moe_fast_gate41_sum does (an expert a lane in turn): one launch where there were two.
KERNEL(moe_route_v41, MoERoute41Args) {
  for (i64 it = GIDX; it < a.T * ROW_SPREAD; it += GSTRIDE) {
    int lane = moe_lane(it);
    if (lane < 0) continue;
    i64 t = it / ROW_SPREAD;
    double* sel = (double*)(a.scratch + t * (2 * a.E + a.k) * 8);
    float* sc = (float*)(sel + a.E);
    i64* pick = (i64*)(sel + 2 * a.E);
    i64 first, rows;
    if (!seq_view(a.seqs, a.nseq, a.keep, t, &first, &rows)) continue;
    if (a.fold) {
#ifdef DI_EMULATE
      for (i64 e = 0; e < a.E; e++) moe_gate41_fold(a, t, e);
#else
      for (i64 e = lane; e < a.E; e += 32) moe_gate41_fold(a, t, e);
      __syncwarp();  // every expert's score written before the selection reads them
#endif
    }
    if (!moe_select(sel, a.E, pick, a.k, lane)) continue;
    float sum = 0;
    for (i64 j = 0; j < a.k; j++) sum += sc[pick[j]];
    float scale = (float)a.scale;
    for (i64 j = 0; j < a.k; j++) {
      float w = sc[pick[j]];
      if (a.norm) w /= sum + f32_bits(0x1e3ce508u);  // float32(1e-20)
      a.wout[t * a.k + j] = w * scale;
      a.idout[t * a.k + j] = (int)pick[j];
    }
  }
}

// moe_count: how many (token, slot) pairs each expert serves (the row count of the
// cpu's per-expert GEMMs), in two launches: a work item per (chunk of MOE_CH slots,
// expert) counts the chunk's slots of the expert into part[expert, chunk] (the
// expert-0 items also check the ids), then moe_count_sum adds an expert's chunks and
// writes each expert's offset off[e] (the counts of the experts before it) by a scan.
#define MOE_CH 256
struct MoECountArgs { const int* ids; i64 slots; i64 E; i64* counts; i64* err; i64* part; i64* off; };
DEV i64 moe_chunks(i64 slots) { return (slots + MOE_CH - 1) / MOE_CH; }
KERNEL(moe_count, MoECountArgs) {
  const i64 nch = moe_chunks(a.slots);
  for (i64 i = GIDX; i < nch * a.E; i += GSTRIDE) {
    const i64 c = i / a.E, e = i % a.E, s1 = imin(a.slots, (c + 1) * MOE_CH);
    i64 n = 0;
    for (i64 s = c * MOE_CH; s < s1; s++) {
      if (a.ids[s] == e) n++;
      if (e == 0 && (a.ids[s] < 0 || a.ids[s] >= a.E)) *a.err = 202;
    }
    a.part[e * nch + c] = n;
  }
}
// moe_count_sum is one warp (32 work items): 32 experts a pass, each lane's count then
// the pass's inclusive scan by shuffles. (moe_group summed the counts before its
// expert itself, up to E loads a work item, and fast_moe_active likewise: ~35 µs a
// launch each at any batch in run 22c.)
DEV i64 moe_count_of(const MoECountArgs& a, i64 nch, i64 e) {
  i64 n = 0;
  for (i64 c = 0; c < nch; c++) n += a.part[e * nch + c];
  return n;
}
KERNEL(moe_count_sum, MoECountArgs) {
  const i64 nch = moe_chunks(a.slots);
#ifdef DI_EMULATE
  (void)GSTRIDE;
  if (GIDX != 0) return;
  i64 o = 0;
  for (i64 e = 0; e < a.E; e++) {
    const i64 n = moe_count_of(a, nch, e);
    a.counts[e] = n;
    a.off[e] = o;
    o += n;
  }
#else
  (void)GSTRIDE;
  if (GIDX >= 32) return;
  const int lane = (int)GIDX;
  i64 run = 0;
  for (i64 e0 = 0; e0 < a.E; e0 += 32) {
    const i64 e = e0 + lane;
    const i64 n = e < a.E ? moe_count_of(a, nch, e) : 0;
    i64 inc = n;
    for (int d = 1; d < 32; d <<= 1) {
      const i64 v = __shfl_up_sync(0xffffffffu, inc, d);
      if (lane >= d) inc += v;
    }
    if (e < a.E) {
      a.counts[e] = n;
      a.off[e] = run + inc - n;
    }
    run += __shfl_sync(0xffffffffu, inc, 31);
  }
#endif
}

// The routed experts, grouped by expert: moe_group lists each expert's slots (in slot
// order, from the expert's offset moe_count_sum wrote; a work item per (chunk of MOE_CH
// slots, expert) writes the chunk's slots of the expert after those of its earlier
// chunks); moe_hidden reads each row of an
// expert's w1 and w3 once for all its slots; moe_proj each row of its w2; moe_out sums
// a token's slots. Every value is the one the cpu target computes: each output is
// dense_gonum's sum, operation for operation (rows.h).
// moe_plan (at most MOE_PLAN_SLOTS slots and MOE_PLAN_E experts: Go checks): what
// moe_count, moe_count_sum, moe_group and (with act) fast_moe_active compute, in one
// launch block — each expert's count and first position, its slots in slot order, the
// active experts in order then -1 — where those were four launches of a few µs each, at
// any batch (run 29b: 21 µs a layer at batch 1). Each of the block's four warps takes a
// quarter of the slots in order: their counts by shared-memory atomic adds (a count,
// whatever the order), the experts' totals scanned into first positions (every warp the
// same values; warp 0 stores them), each warp's own start in an expert after the
// quarters before it, then its slots placed 32 at a time, a slot's rank among the
// chunk's slots of its expert by shuffles. The emulated device runs it on one thread.
#define MOE_PLAN_SLOTS 4096
#define MOE_PLAN_E 512
#define MOE_PLAN_W 4  // warps (ROW_SPREAD / 32)
struct MoEPlanArgs { const int* ids; i64 slots; i64 E; i64* counts; i64* off; int* list; int* act; i64* err; };
KERNEL(moe_plan, MoEPlanArgs) {
  (void)GSTRIDE;
#ifdef DI_EMULATE
  if (GIDX != 0) return;
  i64 run[MOE_PLAN_E];
  for (i64 e = 0; e < a.E; e++) a.counts[e] = 0, run[e] = 0;
  for (i64 s = 0; s < a.slots; s++) {
    const int e = a.ids[s];
    if (e < 0 || e >= a.E) *a.err = 202;
    else a.counts[e]++;
  }
  i64 o = 0, j = 0;
  for (i64 e = 0; e < a.E; e++) {
    a.off[e] = o;
    o += a.counts[e];
    if (a.act && a.counts[e] > 0) a.act[j++] = (int)e;
  }
  if (a.act)
    for (; j < a.E; j++) a.act[j] = -1;
  for (i64 s = 0; s < a.slots; s++) {
    const int e = a.ids[s];
    if (e >= 0 && e < a.E) a.list[a.off[e] + run[e]++] = (int)s;
  }
#else
  __shared__ int sid[MOE_PLAN_SLOTS];
  __shared__ int cw[MOE_PLAN_W][MOE_PLAN_E];  // each warp's counts
  __shared__ int bw[MOE_PLAN_W][MOE_PLAN_E];  // each warp's next place in an expert's list
  if (GIDX >= ROW_SPREAD) return;  // one launch block (Go launches one)
  // (the loops before a barrier take the same trips on every thread)
  const int tid = (int)GIDX, lane = tid & 31, w = tid >> 5;
  for (i64 e0 = 0; e0 < a.E; e0 += ROW_SPREAD)
    if (e0 + tid < a.E)
      for (int q = 0; q < MOE_PLAN_W; q++) cw[q][e0 + tid] = 0;
  for (i64 s0 = 0; s0 < a.slots; s0 += ROW_SPREAD)
    if (s0 + tid < a.slots) sid[s0 + tid] = a.ids[s0 + tid];
  __syncthreads();
  const i64 per = (a.slots + MOE_PLAN_W - 1) / MOE_PLAN_W, s0w = imin(a.slots, w * per), s1w = imin(a.slots, s0w + per);
  for (i64 c0 = s0w; c0 < s1w; c0 += 32) {
    const i64 s = c0 + lane;
    const int e = s < s1w ? sid[s] : 0;
    if (s < s1w && (e < 0 || e >= a.E)) *a.err = 202;
    else if (s < s1w) atomicAdd(&cw[w][e], 1);
  }
  __syncthreads();
  int run = 0, arun = 0;
  for (i64 e0 = 0; e0 < a.E; e0 += 32) {
    const i64 e = e0 + lane;
    int n = 0, mine = 0;  // the expert's total, and the slots of the quarters before this warp's
    if (e < a.E)
      for (int q = 0; q < MOE_PLAN_W; q++) {
        if (q == w) mine = n;
        n += cw[q][e];
      }
    int inc = n;
    for (int d = 1; d < 32; d <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, inc, d);
      if (lane >= d) inc += v;
    }
    const u32 m = __ballot_sync(0xffffffffu, n > 0);
    if (e < a.E) bw[w][e] = run + inc - n + mine;
    if (w == 0 && e < a.E) {
      a.counts[e] = n;
      a.off[e] = run + inc - n;
      if (a.act && n > 0) a.act[arun + __popc(m & ((1u << lane) - 1))] = (int)e;
    }
    run += __shfl_sync(0xffffffffu, inc, 31);
    arun += __popc(m);
  }
  for (i64 j0 = arun; j0 < a.E; j0 += ROW_SPREAD)
    if (a.act && j0 + tid < a.E) a.act[j0 + tid] = -1;
  __syncwarp();  // the warp's own bw row written before its lanes read it
  for (i64 c0 = s0w; c0 < s1w; c0 += 32) {
    const i64 s = c0 + lane;
    const int e = s < s1w ? sid[s] : -1, ok = e >= 0 && e < a.E;
    int r = 0, c = 0;  // the chunk's earlier slots of e, and all of them
    for (int q = 0; q < 32; q++) {
      const int eq = __shfl_sync(0xffffffffu, ok ? e : -1, q);
      if (ok && eq == e) {
        c++;
        if (q < lane) r++;
      }
    }
    if (ok) a.list[bw[w][e] + r] = (int)s;
    __syncwarp();  // every lane has read bw before the last of each expert's advances it
    if (ok && r == c - 1) bw[w][e] += c;
    __syncwarp();
  }
#endif
}

struct MoEGroupArgs { const int* ids; const i64* counts; const i64* off; int* list; i64 slots; i64 E; const i64* part; };
KERNEL(moe_group, MoEGroupArgs) {
  const i64 nch = moe_chunks(a.slots);
  for (i64 i = GIDX; i < nch * a.E; i += GSTRIDE) {
    const i64 c = i / a.E, e = i % a.E, s1 = imin(a.slots, (c + 1) * MOE_CH);
    i64 o = a.off[e];
    for (i64 d = 0; d < c; d++) o += a.part[e * nch + d];
    for (i64 s = c * MOE_CH; s < s1; s++)
      if (a.ids[s] == e) a.list[o++] = (int)s;
  }
}

#define MOE_G 8  // slots a pass over a weight row serves

// moe_hidden: one (expert, row of w1 and w3) a work item: h[slot, row] =
// swiglu(w1·x, w3·x) of each of the expert's slots. V4.1: x is the MXFP8 activations,
// w1·x and w3·x are rounded to bf16 and h is scaled by the routing weight.
struct MoEHiddenArgs {
  const float* x; const float* wts; const Weight* tab; const i64* counts; const i64* off; const int* list;
  float* h; i64 k; i64 E; i64 D; i64 I; double limit; i64 v41;
};
KERNEL(moe_hidden, MoEHiddenArgs) {
  float limit = (float)a.limit;
  for (i64 i = GIDX; i < a.E * a.I; i += GSTRIDE) {
    i64 e = i / a.I, r = i % a.I;
    i64 n = a.counts[e];
    const int* slots = a.list + a.off[e];
    for (i64 g0 = 0; g0 < n; g0 += MOE_G) {
      i64 m = imin(MOE_G, n - g0);
      int toks[MOE_G];
      UNROLL for (int j = 0; j < MOE_G; j++) toks[j] = j < m ? slots[g0 + j] / (int)a.k : 0;
      float g[MOE_G], u[MOE_G];
      gonum_rows<MOE_G>(a.x, a.D, toks, 0, m, a.tab[e], r, a.D, g);
      gonum_rows<MOE_G>(a.x, a.D, toks, 0, m, a.tab[2 * a.E + e], r, a.D, u);
      UNROLL for (int j = 0; j < MOE_G; j++) {
        if (j < m) {
          i64 s = slots[g0 + j];
          float gv = g[j], uv = u[j];
          if (a.v41) {
            gv = q_bf16(gv);
            uv = q_bf16(uv);
          }
          float v = moe_swiglu(gv, uv, limit);
          if (a.v41) v *= a.wts[s];
          a.h[s * a.I + r] = v;
        }
      }
    }
  }
}

// moe_proj: one (expert, row of w2) a work item: y[slot, row] = w2·h of each of the
// expert's slots.
struct MoEProjArgs { const float* h; const Weight* tab; const i64* counts; const i64* off; const int* list; float* y; i64 E; i64 D; i64 I; };
KERNEL(moe_proj, MoEProjArgs) {
  for (i64 i = GIDX; i < a.E * a.D; i += GSTRIDE) {
    i64 e = i / a.D, o = i % a.D;
    i64 n = a.counts[e];
    const int* slots = a.list + a.off[e];
    for (i64 g0 = 0; g0 < n; g0 += MOE_G) {
      i64 m = imin(MOE_G, n - g0);
      float y[MOE_G];
      gonum_rows<MOE_G>(a.h, a.I, slots + g0, 0, m, a.tab[a.E + e], o, a.I, y);
      UNROLL for (int j = 0; j < MOE_G; j++)
        if (j < m) a.y[(i64)slots[g0 + j] * a.D + o] = y[j];
    }
  }
}

// For a few tokens (decode at small batch) the experts' products are split by blocks of
// 64, as dense_part and dense_sum split a dense one: moe_hpart computes each (slot, row,
// block)'s DotUnitary for w1 and w3, moe_hsum adds them in order and applies the SwiGLU
// (moe_hidden's values); moe_ppart and moe_psum do the same for w2 (moe_proj's values).
struct MoESplitArgs {
  const float* x; const float* h; const float* wts; const int* ids; const Weight* tab; float* part1; float* part3;
  float* hid; float* y; i64 slots; i64 k; i64 E; i64 D; i64 I; double limit; i64 v41;
};
KERNEL(moe_hpart, MoESplitArgs) {
  i64 nb = (a.D + 63) / 64;
  for (i64 i = GIDX; i < a.slots * a.I * nb; i += GSTRIDE) {
    i64 b = i % nb, sr = i / nb, r = sr % a.I, s = sr / a.I;
    int e = a.ids[s];
    if (e < 0 || e >= a.E) continue;
    int tok = (int)(s / a.k);
    float d1, d3;
    gonum_block<1>(a.x, a.D, &tok, 0, 1, a.tab[e], r, a.D, b * 64, &d1);
    gonum_block<1>(a.x, a.D, &tok, 0, 1, a.tab[2 * a.E + e], r, a.D, b * 64, &d3);
    a.part1[i] = d1;
    a.part3[i] = d3;
  }
}
KERNEL(moe_hsum, MoESplitArgs) {
  i64 nb = (a.D + 63) / 64;
  float limit = (float)a.limit;
  for (i64 i = GIDX; i < a.slots * a.I; i += GSTRIDE) {
    i64 s = i / a.I;
    int e = a.ids[s];
    if (e < 0 || e >= a.E) continue;
    float g = 0, u = 0;
    for (i64 b = 0; b < nb; b++) g += a.part1[i * nb + b];
    for (i64 b = 0; b < nb; b++) u += a.part3[i * nb + b];
    if (a.v41) {
      g = q_bf16(g);
      u = q_bf16(u);
    }
    float v = moe_swiglu(g, u, limit);
    if (a.v41) v *= a.wts[s];
    a.hid[i] = v;
  }
}
KERNEL(moe_ppart, MoESplitArgs) {
  i64 nb = (a.I + 63) / 64;
  for (i64 i = GIDX; i < a.slots * a.D * nb; i += GSTRIDE) {
    i64 b = i % nb, so = i / nb, o = so % a.D, s = so / a.D;
    int e = a.ids[s];
    if (e < 0 || e >= a.E) continue;
    int row = (int)s;
    float d;
    gonum_block<1>(a.h, a.I, &row, 0, 1, a.tab[a.E + e], o, a.I, b * 64, &d);
    a.part1[i] = d;
  }
}
KERNEL(moe_psum, MoESplitArgs) {
  i64 nb = (a.I + 63) / 64;
  for (i64 i = GIDX; i < a.slots * a.D; i += GSTRIDE) {
    int e = a.ids[i / a.D];
    if (e < 0 || e >= a.E) continue;
    float c = 0;
    for (i64 b = 0; b < nb; b++) c += a.part1[i * nb + b];
    a.y[i] = c;
  }
}

// moe_out: out[t, o] = the token's experts' w2·h summed: V4 weighted in fp32 and summed
// in slot order; V4.1 rounded to bf16 and summed from zero in ascending expert id.
// moe_out_parts (the fast mode's default since run 23): the same, each slot's w2·h read
// as fast_moe_dsum summed it (its S slices' partial sums from zero, in slice order), so
// that no launch writes and reads the slots' rows between.
struct MoEOutArgs {
  const float* y; const float* wts; const int* ids; float* out; i64 T; i64 k; i64 E; i64 D; i64 v41;
  i64 S; i64 slots;  // moe_out_parts: y holds S planes of slots rows
};
template <bool PARTS>
DEVM float moe_out_y(const MoEOutArgs& a, i64 s, i64 o) {
  if (!PARTS) return a.y[s * a.D + o];
  float v = 0;
  for (i64 p = 0; p < a.S; p++) v += a.y[(p * a.slots + s) * a.D + o];
  return v;
}
template <bool PARTS>
DEVM void moe_out_items(const MoEOutArgs& a, long long GIDX, long long GSTRIDE) {
  for (i64 i = GIDX; i < a.T * a.D; i += GSTRIDE) {
    const i64 t = qdiv(i, a.D), o = qmod(i, a.D);
    bool bad = false;
    for (i64 j = 0; j < a.k; j++) {
      int e = a.ids[t * a.k + j];
      if (e < 0 || e >= a.E) bad = true;
    }
    if (bad) continue;
    float acc = 0;
    if (!a.v41) {
      for (i64 j = 0; j < a.k; j++) {
        i64 s = t * a.k + j;
        float y = a.wts[s] * moe_out_y<PARTS>(a, s, o);
        if (j == 0) acc = y;
        else acc += y;
      }
      a.out[i] = acc;
      continue;
    }
    // slots in ascending expert id, ties in slot order (the cpu's sort of ≤ 12 slots
    // is an insertion sort)
    i64 done = 0;  // slots taken so far, as a bit set over j < 64
    for (i64 n = 0; n < a.k; n++) {
      i64 best = -1;
      for (i64 j = 0; j < a.k; j++) {
        if ((done >> j) & 1) continue;
        if (best < 0 || a.ids[t * a.k + j] < a.ids[t * a.k + best]) best = j;
      }
      done |= 1ll << best;
      acc += q_bf16(moe_out_y<PARTS>(a, t * a.k + best, o));
    }
    a.out[i] = acc;
  }
}
KERNEL(moe_out, MoEOutArgs) { moe_out_items<false>(a, GIDX, GSTRIDE); }
KERNEL(moe_out_parts, MoEOutArgs) { moe_out_items<true>(a, GIDX, GSTRIDE); }

// moe_copy: a collective on one rank.
struct MoECopyArgs { const float* x; float* y; i64 n; };
KERNEL(moe_copy, MoECopyArgs) {
  for (i64 i = GIDX; i < a.n; i += GSTRIDE) a.y[i] = a.x[i];
}
