// dense41.cu: V4.1's quantized linear (qlinear) and the grouped output projection
// (grouped_linear, V4 and V4.1), with the helpers the MoE kernels (moe.cu) share: Go's
// min/max, bf16 rounding, MXFP8 fake quantization (package quant), the per-sequence
// views of targets/cpu/v41_numerics.go, and gonum's float32 GEMM order.
//
// gonum's sgemm (the cpu target's gemmNT) sums each output as f32.DotUnitary, the amd64
// SSE kernel: a scalar prologue up to the weight row's 16-byte alignment (lane 0), then
// 16 values a step into two 4-lane accumulators (sum, psum), 4-value and scalar tails,
// and two horizontal adds; when the product has at least 4 blocks of 64×64 outputs it
// goes "parallel" and sums the reduction in blocks of 64, each block's dot added to the
// output in order. The widened weights of the cpu target start 16-byte aligned (Go's
// allocator), so a weight row's alignment is its element offset mod 4.

// dense_quant_piece writes piece p of a row of n values (chunk values a piece) into dst,
// the row's place: q_act_piece's values (cpu: quantizeActs).
DEV void dense_quant_piece(const float* x, float* dst, i64 n, i64 chunk, i64 p, i64 mode) {
  q_act_piece(x, n, p * chunk, chunk, mode, dst + p * chunk);
}

// dense_quant: y = quantizeActs(x) row by row, 32 work items (a warp) per piece of a row
// when a piece is 32 values (a value a lane: the group's maximum across the lanes, a
// maximum not depending on the order), else one work item per piece. The emulated
// device runs a piece at its first lane.
struct DenseQuantArgs { const float* x; float* y; i64 rows; i64 n; i64 chunk; i64 mode; };
KERNEL(dense_quant, DenseQuantArgs) {
  i64 pieces = (a.n + a.chunk - 1) / a.chunk;
  if (a.chunk != 32) {
    for (i64 i = GIDX; i < a.rows * pieces; i += GSTRIDE) {
      i64 r = i / pieces, p = i % pieces;
      dense_quant_piece(a.x + r * a.n, a.y + r * a.n, a.n, a.chunk, p, a.mode);
    }
    return;
  }
  for (i64 i = GIDX; i < a.rows * pieces * 32; i += GSTRIDE) {
    const i64 rp = i >> 5, r = rp / pieces, p = rp % pieces;
    const int lane = (int)(i & 31);
#ifdef DI_EMULATE
    if (lane == 0) dense_quant_piece(a.x + r * a.n, a.y + r * a.n, a.n, 32, p, a.mode);
#else
    const i64 c = p * 32 + lane;
    const float v = q_act_lane32(a.x + r * a.n, a.n, p, lane, a.mode);
    if (c < a.n) a.y[r * a.n + c] = v;
#endif
  }
}

// dense_rows_chunk is the row count of the gemmNT call that computes row r of the cpu's
// gemmRows (parallelFor over procs cores, work multiply-adds a row).
DEV i64 dense_rows_chunk(i64 t, i64 work, i64 procs, i64 r) {
  i64 p = procs;
  if (p > t) p = t;
  if (p <= 1 || t * work < (1ll << 15)) return t;
  i64 chunk = (t + p - 1) / p;
  return imin(chunk, t - r / chunk * chunk);
}

// dense_bf16_dot is one output of the cpu's bf16Matmul: fp32 sums of blk products, the
// block sums added in order.
template <class X, class W>
DEVM float dense_bf16_dot(X x, W w, i64 K, i64 blk) {
  float tot = 0;
  for (i64 b = 0; b < K; b += blk) {
    float p = 0;
    for (i64 k = b; k < imin(b + blk, K); k++) p += x(k) * w(k);
    tot += p;
  }
  return tot;
}

// dense_qlinear: y[t, n] of qlinear (cpu: newQLinear) from the quantized activations
// xq: act 0 (f32) in MKL's order for the row's sequence view, 1 (bf16) in oneDNN's
// block order, 2 (mxfp8) in gonum's order for the cpu's row split; out_bf16 rounds.
struct DenseQLinearArgs {
  const float* xq; Weight w; float* y; i64 T; i64 N; i64 K; i64 act; i64 out_bf16;
  const SeqRec* seqs; i64 nseq; i64 keep; i64 procs;
};
KERNEL(dense_qlinear, DenseQLinearArgs) {
  for (i64 i = GIDX; i < a.T * a.N; i += GSTRIDE) {
    i64 t = i / a.N, n = i % a.N;
    DenseXRow x = {a.xq + t * a.K};
    DenseWRow w = {a.w, n, 0};
    float v;
    if (a.act == 2) {
      i64 m = dense_rows_chunk(a.T, a.N * a.K, a.procs, t);
      v = dense_gonum(x, w, a.K, n * a.K, dense_gonum_par(m, a.N));
    } else {
      i64 first, rows;
      if (!seq_view(a.seqs, a.nseq, a.keep, t, &first, &rows)) continue;
      if (a.act == 0) {
        v = mkl_dot(x, w, rows, t - first, a.K, a.N);
      } else {
        i64 blk = rows * a.K * a.N <= 16 * 16 * 16 ? a.K : 32;
        v = dense_bf16_dot(x, w, a.K, blk);
      }
    }
    a.y[i] = a.out_bf16 ? q_bf16(v) : v;
  }
}

// dense_qlinear_rows: dense_qlinear for act 2 (mxfp8, gonum's order), one work item a weight row n and a group of DENSE_G rows t (rows.h).
#define DENSE_G 16
KERNEL(dense_qlinear_rows, DenseQLinearArgs) {
  i64 ng = (a.T + DENSE_G - 1) / DENSE_G;
  for (i64 i = GIDX; i < a.N * ng; i += GSTRIDE) {
    i64 n = i / ng, t0 = (i % ng) * DENSE_G, cnt = imin(DENSE_G, a.T - t0);
    float c[DENSE_G];
    gonum_rows<DENSE_G>(a.xq, a.K, 0, t0, cnt, a.w, n, a.K, c);
    UNROLL for (int j = 0; j < DENSE_G; j++)
      if (j < cnt) a.y[(t0 + j) * a.N + n] = a.out_bf16 ? q_bf16(c[j]) : c[j];
  }
}

// dense_grouped: grouped_linear (cpu: newGroupedLinear), y[t, j·out+o] = x[t, j·in:]·
// W[j·out+o]: V4 (v41 = 0) in gonum's order over all T rows, V4.1 in bf16Matmul's
// order for the row's sequence view.
struct DenseGroupedArgs {
  const float* x; Weight w; float* y; i64 T; i64 G; i64 out; i64 in; i64 v41;
  const SeqRec* seqs; i64 nseq; i64 keep;
};
KERNEL(dense_grouped, DenseGroupedArgs) {
  i64 width = a.G * a.out;
  for (i64 i = GIDX; i < a.T * width; i += GSTRIDE) {
    i64 t = i / width, c = i % width, j = c / a.out;
    DenseXRow x = {a.x + t * a.G * a.in + j * a.in};
    DenseWRow w = {a.w, c, 0};
    if (!a.v41) {
      a.y[i] = dense_gonum(x, w, a.in, c * a.in, dense_gonum_par(a.T, a.out));
      continue;
    }
    i64 first, rows;
    if (!seq_view(a.seqs, a.nseq, a.keep, t, &first, &rows)) continue;
    i64 blk = a.G * rows * a.in * a.out <= 16 * 16 * 16 ? a.in : 32;
    a.y[i] = dense_bf16_dot(x, w, a.in, blk);
  }
}

// dense_grouped_rows: dense_grouped for V4, one work item a
// weight row c and a group of DENSE_G rows t (rows.h).
KERNEL(dense_grouped_rows, DenseGroupedArgs) {
  i64 width = a.G * a.out, ng = (a.T + DENSE_G - 1) / DENSE_G;
  for (i64 i = GIDX; i < width * ng; i += GSTRIDE) {
    i64 c = i / ng, t0 = (i % ng) * DENSE_G, cnt = imin(DENSE_G, a.T - t0), j = c / a.out;
    float y[DENSE_G];
    gonum_rows<DENSE_G>(a.x + j * a.in, a.G * a.in, 0, t0, cnt, a.w, c, a.in, y);
    UNROLL for (int u = 0; u < DENSE_G; u++)
      if (u < cnt) a.y[(t0 + u) * width + c] = y[u];
  }
}
