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

// dense_mxfp8_group fake-quantizes g values in place to MXFP8 (quant.MXFP8.FakeQuant of
// one group): scale 2^⌈log2(max(amax, 1e-4)/448)⌉, codes E4M3.
DEV void dense_mxfp8_group(float* v, i64 g) {
  float amax = 0;
  for (i64 i = 0; i < g; i++) amax = go_max32(amax, (float)fabs((double)v[i]));
  float s = q_pow2ceil(go_max32(amax, f32_bits(0x38d1b717u)) * f32_bits(0x3b124925u));
  for (i64 i = 0; i < g; i++)
    v[i] = q_round_e4m3(go_min32(go_max32(v[i] / s, -448.0f), 448.0f)) * s;
}

// dense_quant_piece writes piece p of a row of n values (chunk values a piece) into dst:
// bf16 (mode 1), or bf16 then MXFP8 over whole groups of chunk values (mode 2); mode 0
// copies (cpu: quantizeActs).
DEV void dense_quant_piece(const float* x, float* dst, i64 n, i64 chunk, i64 p, i64 mode) {
  i64 lo = p * chunk, hi = imin(lo + chunk, n);
  for (i64 i = lo; i < hi; i++) dst[i] = mode == 0 ? x[i] : q_bf16(x[i]);
  if (mode == 2 && hi - lo == chunk) dense_mxfp8_group(dst + lo, chunk);
}

// dense_quant: y = quantizeActs(x) row by row, one work item per piece of a row.
struct DenseQuantArgs { const float* x; float* y; i64 rows; i64 n; i64 chunk; i64 mode; };
KERNEL(dense_quant, DenseQuantArgs) {
  i64 pieces = (a.n + a.chunk - 1) / a.chunk;
  for (i64 i = GIDX; i < a.rows * pieces; i += GSTRIDE) {
    i64 r = i / pieces, p = i % pieces;
    dense_quant_piece(a.x + r * a.n, a.y + r * a.n, a.n, a.chunk, p, a.mode);
  }
}

// dense_view finds the sequence view holding row r (cpu: views): the step's rows, or
// with keep > 0 each sequence's last keep rows packed in order. first is the view's
// first row, n its rows; false when no view holds r.
DEV bool dense_view(const SeqRec* seqs, i64 nseq, i64 keep, i64 r, i64* first, i64* n) {
  i64 row = 0;
  for (i64 q = 0; q < nseq; q++) {
    i64 m = seqs[q].n;
    if (keep > 0 && m > keep) m = keep;
    i64 start = keep > 0 ? row : seqs[q].row;
    if (r >= start && r < start + m) {
      *first = start;
      *n = m;
      if (seqs[q].flags & SEQ_ROWS) {  // each row as in a one-row step
        *first = r;
        *n = 1;
      }
      return true;
    }
    row += m;
  }
  return false;
}

// dense_dot_unitary is gonum's f32.DotUnitary (amd64) of x[k0, k0+len) and w[k0, k0+len),
// w's first element yoff values past a 16-byte boundary.
template <class X, class W>
DEVM float dense_dot_unitary(X x, W w, i64 k0, i64 len, i64 yoff) {
  float sum[4] = {0, 0, 0, 0}, psum[4] = {0, 0, 0, 0};
  i64 idx = k0;
  if (len > 0) {
    i64 mis = yoff & 3;
    bool done = false;
    if (mis != 0) {
      for (i64 t = 4 - mis; t > 0; t--) {
        sum[0] += x(idx) * w(idx);
        idx++;
        if (--len == 0) { done = true; break; }
      }
    }
    if (!done) {
      i64 tail = len & 15, n16 = len >> 4;
      if (n16 > 0) {
        for (i64 v = 0; v < n16; v++) {
          for (int l = 0; l < 4; l++) {
            float p0 = x(idx + l) * w(idx + l);
            float p1 = x(idx + 4 + l) * w(idx + 4 + l);
            float p2 = x(idx + 8 + l) * w(idx + 8 + l);
            float p3 = x(idx + 12 + l) * w(idx + 12 + l);
            sum[l] += p0;
            psum[l] += p1;
            sum[l] += p2;
            psum[l] += p3;
          }
          idx += 16;
        }
        for (int l = 0; l < 4; l++) sum[l] += psum[l];
      }
      if (tail != 0) {
        for (i64 v = 0; v < (tail >> 2); v++) {
          for (int l = 0; l < 4; l++) sum[l] += x(idx + l) * w(idx + l);
          idx += 4;
        }
        for (i64 v = 0; v < (tail & 3); v++) {
          sum[0] += x(idx) * w(idx);
          idx++;
        }
      }
    }
  }
  float h0 = sum[0] + sum[1], h1 = sum[2] + sum[3];
  return h0 + h1;
}

// dense_gonum_par is whether the reduction is summed in blocks of 64: always, as the cpu
// target's gemmNT does for every shape (gonum's parallel order, fixed for batch
// invariance); the arguments name the product for the record.
DEV bool dense_gonum_par(i64 m, i64 n) { return true; }

// dense_gonum is one output of gonum's sgemm (C = 0, then C += 1·dot, per block of 64 of
// the reduction when par).
template <class X, class W>
DEVM float dense_gonum(X x, W w, i64 K, i64 yoff, bool par) {
  float c = 0;
  if (!par) {
    c += dense_dot_unitary(x, w, 0, K, yoff);
    return c;
  }
  for (i64 kb = 0; kb < K; kb += 64) c += dense_dot_unitary(x, w, kb, imin(64, K - kb), yoff + kb);
  return c;
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

struct DenseXRow {
  const float* p;
  DEVM float operator()(i64 k) const { return p[k]; }
};
struct DenseWRow {
  Weight w;
  i64 r, c0;
  DEVM float operator()(i64 k) const { return wval(w, r, c0 + k); }
};

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
      if (!dense_view(a.seqs, a.nseq, a.keep, t, &first, &rows)) continue;
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
    if (!dense_view(a.seqs, a.nseq, a.keep, t, &first, &rows)) continue;
    i64 blk = a.G * rows * a.in * a.out <= 16 * 16 * 16 ? a.in : 32;
    a.y[i] = dense_bf16_dot(x, w, a.in, blk);
  }
}
