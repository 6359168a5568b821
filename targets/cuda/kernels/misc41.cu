// misc41.cu: V4.1's small ops (targets/cpu/v41_numerics.go): hc_select, hc_mean,
// fake_quant (the quant package's codecs, ported bit for bit), concat, and SWA bounded
// replay's tail_rows and tail_index.

// mhc_fq_scale is quant.Format.Scale; fmt as quant.Format: 1 MXFP8, 2 FP4UE8M0,
// 3 FP4E4M3.
DEV float mhc_fq_scale(i64 fmt, float amax) {
  if (fmt == 1) return q_pow2ceil(go_max32(amax, 1e-4f) * f32_bits(0x3b124925u));    // · float32(1/448)
  if (fmt == 2) return q_pow2ceil(go_max32(amax, f32_bits(0x01c00000u)) * f32_bits(0x3e2aaaabu));  // 6·2^-126, · float32(1/6)
  return e4m3_f32(q_enc_e4m3(go_max32(amax, f32_bits(0x3c400000u)) / 6));  // 6·2^-9
}

// mhc_fq_round is quant.Format.roundScaled: v's code value in units of s.
DEV float mhc_fq_round(i64 fmt, float v, float s) {
  if (fmt == 1) return q_round_e4m3(go_min32(go_max32(v / s, -448.0f), 448.0f));
  return e2m1_f32(q_enc_e2m1(go_min32(go_max32(v / s, -6.0f), 6.0f)));
}

// mhc_fake_quant: fmt 0 rounds each value to bf16 (g = 1); otherwise each group of g
// values becomes its quantized value q·s (quant.Format.FakeQuant). A group of g = 2..32
// values (a power of two) is g consecutive work items, a value a lane (the group's
// maximum across its lanes, a maximum not depending on the order; the items rounded up
// to whole warps); other groups one work item each; bf16 with vec, four values a work
// item. The emulated device runs a group at
// its first lane.
struct mhc_FakeQuantArgs { const float* x; float* y; i64 groups; i64 g; i64 fmt; i64 vec; };
DEV bool mhc_fq_lanes(const mhc_FakeQuantArgs& a) { return a.fmt != 0 && a.g >= 2 && a.g <= 32 && (a.g & (a.g - 1)) == 0; }
DEV void mhc_fq_group(const mhc_FakeQuantArgs& a, i64 gi) {
  const float* x = a.x + gi * a.g;
  float* y = a.y + gi * a.g;
  if (a.fmt == 0) {
    for (i64 i = 0; i < a.g; i++) y[i] = q_bf16(x[i]);
    return;
  }
  float amax = 0;
  for (i64 i = 0; i < a.g; i++) amax = go_max32(amax, fabsf(x[i]));
  float s = mhc_fq_scale(a.fmt, amax);
  for (i64 i = 0; i < a.g; i++) y[i] = mhc_fq_round(a.fmt, x[i], s) * s;
}
KERNEL(mhc_fake_quant, mhc_FakeQuantArgs) {
  if (a.fmt == 0 && a.vec) {
    // bf16, four values a work item (16-byte loads and stores; Go binds it when the
    // operand's values are a multiple of four): the same rounding of each value
    for (i64 i = GIDX; i < a.groups / 4; i += GSTRIDE) {
      float4 v = ((const float4*)a.x)[i];
      v.x = q_bf16(v.x), v.y = q_bf16(v.y), v.z = q_bf16(v.z), v.w = q_bf16(v.w);
      ((float4*)a.y)[i] = v;
    }
    return;
  }
  if (!mhc_fq_lanes(a)) {
    for (i64 gi = GIDX; gi < a.groups; gi += GSTRIDE) mhc_fq_group(a, gi);
    return;
  }
  const i64 n = a.groups * a.g;
  for (i64 i = GIDX; i < (n + 31) / 32 * 32; i += GSTRIDE) {
#ifdef DI_EMULATE
    if (i < n && i % a.g == 0) mhc_fq_group(a, i / a.g);
#else
    const bool in = i < n;
    const float v = in ? a.x[i] : 0.0f;
    float amax = go_max32(0.0f, fabsf(v));
    for (int off = (int)a.g / 2; off >= 1; off >>= 1) amax = go_max32(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const float s = mhc_fq_scale(a.fmt, amax);
    if (in) a.y[i] = mhc_fq_round(a.fmt, v, s) * s;
#endif
  }
}

struct mhc_SelectArgs { const float* x; float* y; i64 T; i64 n; i64 d; i64 j; };
KERNEL(mhc_select, mhc_SelectArgs) {
  for (i64 i = GIDX; i < a.T * a.d; i += GSTRIDE) {
    i64 t = i / a.d, c = i % a.d;
    a.y[i] = a.x[(t * a.n + a.j) * a.d + c];
  }
}

// mhc_mean: the bf16 mean of the streams, summed in fp32 in stream order.
struct mhc_MeanArgs { const float* x; float* y; i64 T; i64 n; i64 d; };
KERNEL(mhc_mean, mhc_MeanArgs) {
  for (i64 i = GIDX; i < a.T * a.d; i += GSTRIDE) {
    i64 t = i / a.d, c = i % a.d;
    float sum = 0;
    for (i64 j = 0; j < a.n; j++) sum += a.x[(t * a.n + j) * a.d + c];
    a.y[i] = q_bf16(sum / (float)a.n);
  }
}

// mhc_copy_cols copies x[rows, w] into columns off.. of y[rows, stride] (one concat
// operand).
struct mhc_CopyColsArgs { const float* x; float* y; i64 rows; i64 w; i64 stride; i64 off; };
KERNEL(mhc_copy_cols, mhc_CopyColsArgs) {
  for (i64 i = GIDX; i < a.rows * a.w; i += GSTRIDE) {
    i64 r = i / a.w, c = i % a.w;
    a.y[r * a.stride + a.off + c] = a.x[i];
  }
}

// mhc_tail_rows: each sequence's last min(n, keep) rows of x[T, w] (4-byte values,
// float or int) into y[K, w].
struct mhc_TailRowsArgs { const u32* x; u32* y; i64 K; i64 w; const SeqRec* seqs; i64 nseq; i64 keep; };
KERNEL(mhc_tail_rows, mhc_TailRowsArgs) {
  for (i64 i = GIDX; i < a.K * a.w; i += GSTRIDE) {
    i64 kr = i / a.w, c = i % a.w, row = 0;
    for (i64 q = 0; q < a.nseq; q++) {
      i64 vn = imin(a.seqs[q].n, a.keep);
      if (kr >= row && kr < row + vn) {
        i64 from = a.seqs[q].row + a.seqs[q].n - vn;
        a.y[i] = a.x[(from + kr - row) * a.w + c];
        break;
      }
      row += vn;
    }
  }
}

// mhc_tail_index renumbers logit rows from step rows to tail rows.
struct mhc_TailIndexArgs { const int* rows; int* out; i64 R; const SeqRec* seqs; i64 nseq; i64 keep; i64* err; };
KERNEL(mhc_tail_index, mhc_TailIndexArgs) {
  for (i64 i = GIDX; i < a.R; i += GSTRIDE) {
    i64 r = a.rows[i], vrow = 0;
    bool found = false;
    for (i64 q = 0; q < a.nseq; q++) {
      const SeqRec& s = a.seqs[q];
      i64 vn = imin(s.n, a.keep);
      if (r >= s.row && r < s.row + s.n) {
        i64 off = r - s.row - (s.n - vn);
        if (off < 0) {
          *a.err = 100;
        } else {
          a.out[i] = (int)(vrow + off);
        }
        found = true;
        break;
      }
      vrow += vn;
    }
    if (!found) *a.err = 101;
  }
}
